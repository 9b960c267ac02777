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
            _pad: 0,
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
}
