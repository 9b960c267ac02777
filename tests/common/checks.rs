//! Checks shared by the native kernel tests and the Dawn ones (no I/O, no device of their own:
//! builds for wasm32): the closeness assertion, the paged-attention setup, and the CPU-reference
//! checks of attention and of the q/k norm + RoPE + KV write.

use super::data::worst;
use tokenmeter::engine::check;
use tokenmeter::gpu::kernels::Prologue;
use tokenmeter::gpu::{Kernel, Kernels};
use tokenmeter::model::reference;
use tokenmeter::model::weights::Matrix;

pub fn assert_close(name: &str, got: &[f32], want: &[f32], tol: f32) {
    let (err, at) = worst(got, want);
    assert!(err <= tol, "{name}: worst relative error {err} at index {at}: got {} want {}", got[at], want[at]);
}

/// The paged-head set-up and the comparisons are the library's (`engine::check`, which the
/// engine's own check uses); here they assert.
pub use tokenmeter::engine::check::HeadSetup;

/// Every token's q and k heads (RMS-normed, eps 1e-6, rotated by RoPE at its position) and its v
/// against the reference ([`check::qk_norm_rope`]).
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
    let w = check::qk_norm_rope(s, qkv, norms, freqs, 1e-6, got_qkv, k_cache, v_cache);
    assert!(w.passed(), "q/k norm + RoPE (head_dim {}): {w}", s.hd);
}

/// Every (token, head) against the reference ([`check::attention`]).
pub fn check_attention(
    s: &HeadSetup,
    qkv: &[f32],
    k_cache: &[f32],
    v_cache: &[f32],
    got: &[f32],
    splits: usize,
    tol: f32,
) {
    let w = check::attention(s, qkv, k_cache, v_cache, got, tol);
    assert!(w.passed(), "attention (head_dim {}, {splits} splits): {w}", s.hd);
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
