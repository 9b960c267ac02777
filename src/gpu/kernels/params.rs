//! Parameter blocks, each mirrored field for field in a WGSL `Params` struct (tests/it/contracts.rs
//! checks every one against naga's reading of the WGSL).

use bytemuck::{Pod, Zeroable};

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Debug)]
pub struct EmbedParams {
    pub n_tokens: u32,
    pub hidden: u32,
    pub row_start: u32,
    pub row_count: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Debug)]
pub struct RmsNormParams {
    pub n_rows: u32,
    pub width: u32,
    pub eps: f32,
    pub _pad: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Debug)]
pub struct MatmulParams {
    pub m: u32,
    pub n: u32,
    pub k: u32,
    pub row_start: u32,
    pub rows: u32,
    pub accumulate: u32,
    /// The RMSNorm prologue's epsilon ([`Prologue::RmsNorm`]; unused by the other kernels).
    pub eps: f32,
    /// Variant bits of the GPU family's matmuls, from the options by
    /// [`record_matmul_with`](super::record_matmul_with): [`MatmulParams::GEMV_M1`],
    /// [`MatmulParams::TILE_PREFETCH`], [`MatmulParams::GEMV_ROWS4`] (matmul.wgsl names them alike).
    pub flags: u32,
}

impl MatmulParams {
    /// A step of one token takes the GEMV's one-token loop ([`KernelOptions::gemv_m1`](super::KernelOptions::gemv_m1)).
    pub const GEMV_M1: u32 = 1;
    /// The tiled matmul loads the next round before this one's products ([`KernelOptions::tile_prefetch`](super::KernelOptions::tile_prefetch)).
    pub const TILE_PREFETCH: u32 = 2;
    /// A step of one token takes the GEMV's four-row layout ([`KernelOptions::gemv_rows4`](super::KernelOptions::gemv_rows4)).
    pub const GEMV_ROWS4: u32 = 4;
}

/// Shared by `qk_norm_rope` (eps; `splits` and `token_begin` unused) and the attention kernels
/// (scale; [`record_attention`] sets `splits`, `token_begin` and `n_tokens` per dispatch).
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Debug)]
pub struct HeadParams {
    pub n_tokens: u32,
    pub n_heads: u32,
    pub n_kv_heads: u32,
    pub head_dim: u32,
    pub qkv_width: u32,
    pub block_size: u32,
    pub max_blocks: u32,
    pub eps_or_scale: f32,
    pub splits: u32,
    pub token_begin: u32,
    /// `attention_split_gpu` with one part: 1 writes the normalised output itself (the bind group
    /// of `attention`, no merge), 0 writes its part's partials. Set by [`record_attention_split`].
    pub direct: u32,
    /// The q/k norms' epsilon where attention runs them itself (`AttentionSplitGpuRope`; the
    /// other kernels take it, if at all, in `eps_or_scale`).
    pub eps: f32,
}

/// `swiglu` (n_tokens, inter) and `argmax` (n_rows, width).
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Debug)]
pub struct PairParams {
    pub a: u32,
    pub b: u32,
    pub _pad: [u32; 2],
}

/// `fill_random_bf16` (fill.wgsl): synthetic weights, tensor rows `row0..` into words
/// `word_offset..word_offset + words` of the destination.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Debug)]
pub struct FillParams {
    pub seed: u32,
    pub scale: f32,
    /// bf16 elements per tensor row (even).
    pub cols: u32,
    pub row0: u32,
    pub word_offset: u32,
    pub words: u32,
    pub _pad: [u32; 2],
}

/// The roofline probe's kernels (roofline.wgsl, roofline_texture.wgsl).
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Debug)]
pub struct ProbeParams {
    /// vec4 elements (texels) to copy or read.
    pub n: u32,
    /// Blocked patterns: elements per invocation.
    pub per_lane: u32,
    /// `fma_rate`: iterations per invocation.
    pub iters: u32,
    pub _pad: u32,
}

/// One row's sampling settings, mirrored in `sample.wgsl`'s `RowParams`.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Debug, PartialEq)]
pub struct RowSample {
    /// <= 0: greedy.
    pub temperature: f32,
    /// 0: off.
    pub top_k: u32,
    /// 1: off.
    pub top_p: f32,
    /// Uniform in [0, 1), from the request's seeded generator.
    pub u: f32,
}

impl RowSample {
    pub const GREEDY: RowSample = RowSample { temperature: 0.0, top_k: 0, top_p: 1.0, u: 0.0 };

    pub fn is_greedy(&self) -> bool {
        self.temperature <= 0.0 || self.top_k == 1
    }
}
