//! Checks shared by the native kernel tests and the Dawn ones (no I/O, no device of their own:
//! builds for wasm32): the closeness assertion, the paged-attention setup, and the CPU-reference
//! checks of attention and of the q/k norm + RoPE + KV write.

use super::data::worst;
use tokenmeter::gpu::kernels::{HeadParams, Prologue};
use tokenmeter::gpu::{Kernel, Kernels};
use tokenmeter::model::reference;
use tokenmeter::model::weights::Matrix;

pub fn assert_close(name: &str, got: &[f32], want: &[f32], tol: f32) {
    let (err, at) = worst(got, want);
    assert!(err <= tol, "{name}: worst relative error {err} at index {at}: got {} want {}", got[at], want[at]);
}

/// Sequences of token rows `[id, position, sequence, 0]` over a paged cache: `tables` holds
/// `max_blocks` physical block ids per sequence.
#[derive(Clone)]
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
    pub fn slot(&self, seq: usize, pos: usize) -> usize {
        self.tables[seq * self.max_blocks + pos / self.block_size] as usize * self.block_size + pos % self.block_size
    }
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

/// Every token's q and k heads (RMS-normed per head with `norms`, rotated by RoPE at its
/// position) and its v against the reference; k and v read from the token's cache slot.
#[allow(clippy::too_many_arguments)]
pub fn check_qk_norm_rope(
    s: &HeadSetup,
    qkv: &[f32],
    norms: &[f32],
    freqs: &[f32],
    got_qkv: &[f32],
    k_cache: &[f32],
    v_cache: &[f32],
) {
    let width = (s.n_heads + 2 * s.n_kv) * s.hd;
    for (t, tok) in s.tokens.iter().enumerate() {
        let pos = tok[1] as usize;
        let slot = s.slot(tok[2] as usize, pos);
        let row = &qkv[t * width..][..width];
        for h in 0..s.n_heads + s.n_kv {
            let is_q = h < s.n_heads;
            let mut head = reference::rms_norm(
                &row[h * s.hd..][..s.hd],
                s.hd,
                &norms[if is_q { 0 } else { s.hd }..][..s.hd],
                1e-6,
            );
            reference::rope(&mut head, pos, freqs);
            let got = if is_q {
                got_qkv[t * width + h * s.hd..][..s.hd].to_vec()
            } else {
                k_cache[(slot * s.n_kv + h - s.n_heads) * s.hd..][..s.hd].to_vec()
            };
            assert_close(&format!("rope token {t} pos {pos} head {h}"), &got, &head, 2e-4);
        }
        for j in 0..s.n_kv {
            let want = &row[(s.n_heads + s.n_kv + j) * s.hd..][..s.hd];
            assert_close("v copy", &v_cache[(slot * s.n_kv + j) * s.hd..][..s.hd], want, 0.0);
        }
    }
}

/// Every (token, head) against `reference::attention_head`. The tolerance: outputs are convex
/// combinations of V rows (|v| <= 1), so an absolute f32 error of a few ulps times the number of
/// online-softmax rescalings stays far below 2e-5 for contexts of thousands.
pub fn check_attention(
    s: &HeadSetup,
    qkv: &[f32],
    k_cache: &[f32],
    v_cache: &[f32],
    got: &[f32],
    splits: usize,
    tol: f32,
) {
    let width = (s.n_heads + 2 * s.n_kv) * s.hd;
    // Each (sequence, kv head)'s keys and values in position order, gathered once.
    let mut gathered: std::collections::HashMap<(u32, usize), (Vec<f32>, Vec<f32>)> = Default::default();
    for (t, tok) in s.tokens.iter().enumerate() {
        let ctx = tok[1] as usize + 1;
        for h in 0..s.n_heads {
            let kvh = h / (s.n_heads / s.n_kv);
            let longest = s.tokens.iter().filter(|o| o[2] == tok[2]).map(|o| o[1] as usize + 1).max().unwrap();
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
            assert_close(
                &format!("attention (head_dim {}, {splits} splits) token {t} (position {}) head {h}", s.hd, tok[1]),
                &got[(t * s.n_heads + h) * s.hd..][..s.hd],
                &want,
                tol,
            );
        }
    }
}

/// Inputs and the CPU reference of a fused GPU-family matmul (`gpu::kernels::Prologue`):
/// `y = rms_norm(x) W^T` (x is `m x k`, `norm` the norm's weight, eps 1e-6) or
/// `y = (silu(gate) * up) W^T` (x is the `m x 2k` gate|up output), with each output's error
/// bound: the f32 bound of a K-term dot product (2 (K - 1) 2^-24 sum_k |x_k w_k| over the
/// reference's normed or activated x), plus 64 ulps of that sum for the prologue's own rounding
/// (the fused norm scales the sum instead of each x; exp and inverseSqrt are not correctly
/// rounded on GPUs). A wrong column, token, weight or scale misses by orders of magnitude more.
pub struct FusedCase {
    pub x: Vec<f32>,
    pub norm: Vec<f32>,
    pub want: Vec<f32>,
    pub bounds: Vec<f32>,
}

pub const FUSED_EPS: f32 = 1e-6;

pub fn fused_case(swiglu: bool, m: usize, k: usize, w: &[f32], n: usize, seed: u64) -> FusedCase {
    let norm: Vec<f32> = super::data::random(seed + 1, k).iter().map(|v| 1.0 + 0.5 * v).collect();
    let (x, input) = if swiglu {
        // Gate values over [-4, 4] reach both tails of silu.
        let x: Vec<f32> = super::data::random(seed, m * 2 * k).iter().map(|v| 4.0 * v).collect();
        let act =
            (0..m * k).map(|i| reference::silu(x[i / k * 2 * k + i % k]) * x[i / k * 2 * k + k + i % k]).collect();
        (x, act)
    } else {
        let x: Vec<f32> = super::data::random(seed, m * k).iter().map(|v| 3.0 * v).collect();
        let normed = reference::rms_norm(&x, k, &norm, FUSED_EPS);
        (x, normed)
    };
    let want = reference::matmul_f32(&input, m, k, w, n);
    let scale = (2.0 * (k - 1) as f32 + 64.0) * 2f32.powi(-24) * 1.01;
    let bounds = (0..m * n)
        .map(|i| {
            let (xr, wr) = (&input[i / n * k..][..k], &w[i % n * k..][..k]);
            xr.iter().zip(wr).map(|(a, b)| (a * b).abs()).sum::<f32>() * scale + 1e-30
        })
        .collect();
    FusedCase { x, norm, want, bounds }
}

impl FusedCase {
    /// Panics at the first output past its bound, naming it.
    pub fn check(&self, name: &str, got: &[f32], n: usize) {
        let over = (0..self.want.len()).find(|&i| (got[i] - self.want[i]).abs() > self.bounds[i]);
        if let Some(i) = over {
            panic!("{name}: y[{}, {}] = {} vs {} (bound {:.2e})", i / n, i % n, got[i], self.want[i], self.bounds[i]);
        }
    }
}

/// The bind groups of a fused matmul over `w`'s chunks (the norm's kernels take its weight at
/// binding 4; SwiGLU's bind as any matmul, x being the gate|up output).
pub fn fused_binds(
    kernels: &Kernels,
    device: &wgpu::Device,
    prologue: Prologue,
    w: &Matrix,
    (x, y, norm): (&wgpu::Buffer, &wgpu::Buffer, &wgpu::Buffer),
) -> Vec<wgpu::BindGroup> {
    w.chunks
        .iter()
        .map(|c| match prologue {
            Prologue::RmsNorm => kernels.bind(device, Kernel::MatmulGemvNorm, "w", &[x, c, y, norm]),
            _ => kernels.bind(device, Kernel::Matmul, "w", &[x, c, y]),
        })
        .collect()
}
