//! Kernels against the CPU reference ([`crate::model::reference`]), written once for the engine's
//! check of itself ([`crate::engine::verify`]) and the kernel tests (native, and on Dawn): the
//! paged-head set-up, and the comparisons of the q/k norm + RoPE + KV write and of paged attention
//! with the reference on the inputs the kernel was given. Pure — the caller runs the kernel and
//! passes what it read back — so it builds for wasm32 too.

use crate::gpu::kernels::HeadParams;
use crate::model::reference;

/// Largest |got − want| / (1 + |want|) and where (a NaN counts as the worst; lengths that differ
/// are NaN at the shorter one's end).
pub fn worst(got: &[f32], want: &[f32]) -> (f32, usize) {
    if got.len() != want.len() {
        return (f32::NAN, got.len().min(want.len()));
    }
    got.iter().zip(want).enumerate().map(|(i, (x, y))| ((x - y).abs() / (1.0 + y.abs()), i)).fold((0.0, 0), |acc, v| {
        if v.0 > acc.0 || v.0.is_nan() {
            v
        } else {
            acc
        }
    })
}

/// The worst output of a comparison: its relative error against the tolerance, and where.
#[derive(Clone, Debug, PartialEq)]
pub struct Worst {
    pub err: f32,
    pub tol: f32,
    /// The output, with what the kernel gave and what the reference wants.
    pub at: String,
}

impl Worst {
    pub fn passed(&self) -> bool {
        self.err <= self.tol
    }

    /// The worse of two (a failure over a pass; else the larger error relative to its tolerance).
    fn max(self, other: Worst) -> Worst {
        let ratio = |w: &Worst| if w.err.is_nan() { f32::INFINITY } else { w.err / w.tol.max(f32::MIN_POSITIVE) };
        if ratio(&other) > ratio(&self) {
            other
        } else {
            self
        }
    }

    fn of(what: String, got: &[f32], want: &[f32], tol: f32) -> Worst {
        let (err, i) = worst(got, want);
        let (g, w) = (got.get(i).copied().unwrap_or(f32::NAN), want.get(i).copied().unwrap_or(f32::NAN));
        Worst { err, tol, at: format!("{what}[{i}] = {g} vs {w}") }
    }
}

impl std::fmt::Display for Worst {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (relative error {:.1e}, bound {:.0e})", self.at, self.err, self.tol)
    }
}

/// A matmul's worst output: its error as a share of the output's f32 bound ([`matmul`]).
#[derive(Clone, Debug, PartialEq)]
pub struct MatmulWorst {
    pub row: usize,
    pub col: usize,
    pub got: f32,
    pub want: f32,
    pub bound: f32,
    /// |got − want| / bound: at most 1 passes; NaN where the kernel gave a NaN or an infinity.
    pub excess: f32,
}

impl MatmulWorst {
    pub fn passed(&self) -> bool {
        self.excess <= 1.0
    }
}

impl std::fmt::Display for MatmulWorst {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "y[{}, {}] = {} vs {} (error {:.2} of its f32 bound {:.1e})",
            self.row, self.col, self.got, self.want, self.excess, self.bound
        )
    }
}

/// A matmul's outputs `got` (M × N, row-major) against the reference `want` for `x` (M × K) and
/// the weights' values `w` (N × K, as the kernel reads them: dequantised). Each output is held to
/// the f32 error bound of its K-term dot product whatever the summation order (both sides round):
/// 2 (K − 1) 2^-24 Σ|x w| (Higham, "Accuracy and Stability of Numerical Algorithms", 3.1), 1% over,
/// plus 1e-30 for exact zeros. The worst output, a non-finite one first.
pub fn matmul(got: &[f32], want: &[f32], x: &[f32], w: &[f32], m: usize, n: usize, k: usize) -> MatmulWorst {
    let scale = 2.0 * k.saturating_sub(1) as f32 * 2f32.powi(-24) * 1.01;
    let bound = |o: usize| {
        let (xr, wr) = (&x[o / n * k..][..k], &w[o % n * k..][..k]);
        xr.iter().zip(wr).map(|(a, b)| (a * b).abs()).sum::<f32>() * scale + 1e-30
    };
    let excess = |o: usize| match got.get(o) {
        Some(g) if g.is_finite() => (g - want[o]).abs() / bound(o),
        _ => f32::NAN,
    };
    let o = (0..m * n)
        .map(|o| (o, excess(o)))
        .max_by(|a, b| match (a.1.is_nan(), b.1.is_nan()) {
            (false, false) => a.1.total_cmp(&b.1),
            (x, y) => x.cmp(&y),
        })
        .map_or(0, |(o, _)| o);
    MatmulWorst {
        row: o / n.max(1),
        col: o % n.max(1),
        got: got.get(o).copied().unwrap_or(f32::NAN),
        want: want.get(o).copied().unwrap_or(f32::NAN),
        bound: if m * n == 0 { 0.0 } else { bound(o) },
        excess: if m * n == 0 { 0.0 } else { excess(o) },
    }
}

/// A q/k head after RMSNorm and RoPE: f32 sums of head_dim terms and a rotation whose angle is
/// reduced in f32 (positions up to 40,000 at theta 1e6).
pub const ROPE_TOL: f32 = 2e-4;

/// Sequences of token rows `[id, position, sequence, 0]` over a paged cache: `tables` holds
/// `max_blocks` physical block ids per sequence.
#[derive(Clone, Debug)]
pub struct HeadSetup {
    pub n_heads: usize,
    pub n_kv: usize,
    pub hd: usize,
    pub block_size: usize,
    pub max_blocks: usize,
    pub tokens: Vec<[u32; 4]>,
    pub tables: Vec<u32>,
}

impl HeadSetup {
    /// The cache slot of `seq`'s position `pos`.
    pub fn slot(&self, seq: usize, pos: usize) -> usize {
        self.tables[seq * self.max_blocks + pos / self.block_size] as usize * self.block_size + pos % self.block_size
    }

    /// The kernels' parameters; `last` is the norm's epsilon (RoPE) or the softmax scale (attention).
    pub fn params(&self, last: f32) -> HeadParams {
        HeadParams {
            n_tokens: self.tokens.len() as u32,
            n_heads: self.n_heads as u32,
            n_kv_heads: self.n_kv as u32,
            head_dim: self.hd as u32,
            qkv_width: ((self.n_heads + 2 * self.n_kv) * self.hd) as u32,
            block_size: self.block_size as u32,
            max_blocks: self.max_blocks as u32,
            eps_or_scale: last,
            splits: 1,
            token_begin: 0,
            direct: 0,
            eps: 0.0,
        }
    }
}

/// Every token's q and k heads (RMS-normed per head with `norms` — q's then k's — at `eps`, rotated
/// by RoPE at its position with `freqs`) against the reference, k read from the token's cache slot
/// in `k_cache`; its v copied exactly into `v_cache`. The worst head (of [`ROPE_TOL`]) or the first
/// v that differs.
#[allow(clippy::too_many_arguments)]
pub fn qk_norm_rope(
    s: &HeadSetup,
    qkv: &[f32],
    norms: &[f32],
    freqs: &[f32],
    eps: f32,
    got_qkv: &[f32],
    k_cache: &[f32],
    v_cache: &[f32],
) -> Worst {
    let width = (s.n_heads + 2 * s.n_kv) * s.hd;
    let mut out = Worst { err: 0.0, tol: ROPE_TOL, at: "no head".into() };
    for (t, tok) in s.tokens.iter().enumerate() {
        let pos = tok[1] as usize;
        let slot = s.slot(tok[2] as usize, pos);
        let row = &qkv[t * width..][..width];
        for h in 0..s.n_heads + s.n_kv {
            let is_q = h < s.n_heads;
            let norm = &norms[if is_q { 0 } else { s.hd }..][..s.hd];
            let mut head = reference::rms_norm(&row[h * s.hd..][..s.hd], s.hd, norm, eps);
            reference::rope(&mut head, pos, freqs);
            let got = if is_q {
                &got_qkv[t * width + h * s.hd..][..s.hd]
            } else {
                &k_cache[(slot * s.n_kv + h - s.n_heads) * s.hd..][..s.hd]
            };
            let what = format!("token {t} (position {pos}) {} head {}", if is_q { "q" } else { "k" }, h % s.n_heads);
            out = out.max(Worst::of(what, got, &head, ROPE_TOL));
        }
        for j in 0..s.n_kv {
            let want = &row[(s.n_heads + s.n_kv + j) * s.hd..][..s.hd];
            let what = format!("token {t} (position {pos}) v head {j} in the cache");
            out = out.max(Worst::of(what, &v_cache[(slot * s.n_kv + j) * s.hd..][..s.hd], want, 0.0));
        }
    }
    out
}

/// Every (token, head) of `got` against [`reference::attention_head`] over the cache's keys and
/// values in position order. The tolerance: outputs are convex combinations of V rows (|v| ≤ 1),
/// so an absolute f32 error of a few ulps times the online-softmax rescalings stays far below 2e-5
/// for contexts of thousands.
pub fn attention(s: &HeadSetup, qkv: &[f32], k_cache: &[f32], v_cache: &[f32], got: &[f32], tol: f32) -> Worst {
    let width = (s.n_heads + 2 * s.n_kv) * s.hd;
    let mut out = Worst { err: 0.0, tol, at: "no head".into() };
    // Each (sequence, kv head)'s keys and values in position order, gathered once.
    let mut gathered: std::collections::HashMap<(u32, usize), (Vec<f32>, Vec<f32>)> = Default::default();
    for (t, tok) in s.tokens.iter().enumerate() {
        let ctx = tok[1] as usize + 1;
        let longest = s.tokens.iter().filter(|o| o[2] == tok[2]).map(|o| o[1] as usize + 1).max().unwrap_or(ctx);
        for h in 0..s.n_heads {
            let kvh = h / (s.n_heads / s.n_kv);
            let (keys, values) = gathered.entry((tok[2], kvh)).or_insert_with(|| {
                let gather = |cache: &[f32]| -> Vec<f32> {
                    (0..longest)
                        .flat_map(|p| cache[(s.slot(tok[2] as usize, p) * s.n_kv + kvh) * s.hd..][..s.hd].to_vec())
                        .collect()
                };
                (gather(k_cache), gather(v_cache))
            });
            let want = reference::attention_head(
                &qkv[t * width + h * s.hd..][..s.hd],
                &keys[..ctx * s.hd],
                &values[..ctx * s.hd],
                s.hd,
            );
            let what = format!("token {t} (position {}) head {h}", tok[1]);
            out = out.max(Worst::of(what, &got[(t * s.n_heads + h) * s.hd..][..s.hd], &want, tol));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_worst_output_is_named_and_a_nan_is_worst() {
        let w = Worst::of("y".into(), &[1.0, 2.5, 3.0], &[1.0, 2.0, 3.0], 0.1);
        assert!(!w.passed() && (w.err - 0.5 / 3.0).abs() < 1e-6 && w.at == "y[1] = 2.5 vs 2", "{w}");
        let nan = Worst::of("y".into(), &[f32::NAN, 2.0], &[1.0, 2.0], 0.1);
        assert!(!nan.passed() && nan.at.starts_with("y[0] = NaN"), "{nan}");
        let pass = Worst::of("z".into(), &[1.0], &[1.0], 0.0);
        assert!(pass.passed());
        assert_eq!(pass.clone().max(w.clone()), w);
        assert_eq!(w.clone().max(pass), w);
    }

    /// The bound worked by hand: y = x·w over K = 3 with x = (1, −2, 0.5), w = (4, 1, −2): the
    /// sum of |x w| is 4 + 2 + 1 = 7, the bound 2 · 2 · 2^-24 · 1.01 · 7 + 1e-30.
    #[test]
    fn a_matmul_is_held_to_its_dot_products_f32_bound() {
        let (x, w) = ([1.0, -2.0, 0.5], [4.0, 1.0, -2.0]);
        let bound = 4.0 * 2f32.powi(-24) * 1.01 * 7.0 + 1e-30;
        let exact = matmul(&[1.0], &[1.0], &x, &w, 1, 1, 3);
        assert!(exact.passed() && exact.excess == 0.0 && (exact.bound - bound).abs() < 1e-12, "{exact}");
        let inside = matmul(&[1.0 + bound * 0.9], &[1.0], &x, &w, 1, 1, 3);
        assert!(inside.passed(), "{inside}");
        let outside = matmul(&[1.0 + bound * 4.0], &[1.0], &x, &w, 1, 1, 3);
        assert!(!outside.passed() && outside.to_string().starts_with("y[0, 0] = "), "{outside}");
        // Two rows, two columns: the worst is named, and a NaN anywhere is worse than any number.
        let (x2, w2) = ([1.0, 0.0, 0.0, 1.0], [1.0, 0.0, 0.0, 1.0]);
        let off = matmul(&[1.0, 0.0, 0.5, 1.0], &[1.0, 0.0, 0.0, 1.0], &x2, &w2, 2, 2, 2);
        assert!(!off.passed() && (off.row, off.col) == (1, 0), "{off}");
        let nan = matmul(&[1.0, 0.0, 0.5, f32::NAN], &[1.0, 0.0, 0.0, 1.0], &x2, &w2, 2, 2, 2);
        assert!(!nan.passed() && (nan.row, nan.col) == (1, 1), "{nan}");
    }
}
