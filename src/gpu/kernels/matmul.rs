//! The matmuls `y (+)= x W^T`: which kernel serves a step (family, tile, subgroups, the GEMV or
//! the tile, a fused prologue) and how it is recorded, chunk by chunk of the weight rows.

use super::groups;
use super::options::{KernelFamily, KernelOptions, MatmulTile};
use super::params::MatmulParams;
use super::recorder::StepRecorder;
use super::registry::Kernel;

/// What a GPU-family matmul does to x before the product: nothing, the RMSNorm that precedes
/// q|k|v and gate|up (x is then the residual stream and the norm weight a fourth binding), or
/// the SwiGLU that precedes down_proj (x is then the gate|up output, `2 k` wide). Each saves the
/// separate dispatch and the intermediate buffer's write and read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prologue {
    None,
    RmsNorm,
    SwiGlu,
}

/// The matmul kernels a step can run, as the capacity planner's cost model tells them apart
/// (`engine::CostModel`): each reads the weights some number of times for `m` tokens, at
/// its own cost a pass. On a CPU adapter a decode of 2–4 sequences runs the small-batch kernel and
/// one of 5–8 the 8-token tile, once each — and at different costs, so a step's time is a
/// staircase in its batch that no line through the batches follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatmulClass {
    /// The CPU family's one-token kernel.
    OneToken,
    /// The CPU family's small-batch kernel (subgroups, up to 4 tokens).
    Small,
    /// The CPU family's token tile (4 or 8 tokens a pass).
    Tile,
    /// The GPU family's GEMV (4 tokens a pass, up to `gemv_max_m`).
    Gemv,
    /// The GPU family's 64-token tile.
    Tiled,
}

impl MatmulClass {
    /// Every class, in declaration order (`class as usize` is its place here).
    pub const ALL: [MatmulClass; 5] =
        [MatmulClass::OneToken, MatmulClass::Small, MatmulClass::Tile, MatmulClass::Gemv, MatmulClass::Tiled];
}

/// What decides a step's matmul kernels, as a run records it: the family, its token tile, whether
/// subgroups were used, the GEMV's largest step. (The reduction length plays a part too, through
/// its multiples of 16 and 32; every Qwen3 width is a multiple of 64, so it is taken as one.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct MatmulRule {
    pub family: KernelFamily,
    pub tile: MatmulTile,
    pub subgroups: bool,
    pub gemv_max_m: u32,
}

impl MatmulRule {
    /// The class of the kernel serving `m` tokens (`m` ≥ 1) and how many times it reads the
    /// weights (the same choice as [`record_matmul`] makes).
    pub fn class(&self, m: usize) -> (MatmulClass, usize) {
        let options = KernelOptions {
            family: self.family,
            tile: self.tile,
            subgroups: self.subgroups,
            gemv_max_m: self.gemv_max_m,
            ..KernelOptions::default()
        };
        let (kernel, _) = options.matmul(m as u32, QWEN3_WIDTH, 1);
        match kernel {
            Kernel::MatmulM1 | Kernel::MatmulM1Subgroup => (MatmulClass::OneToken, 1),
            Kernel::MatmulSmallSubgroup => (MatmulClass::Small, 1),
            Kernel::MatmulGemv | Kernel::MatmulGemvSubgroup => (MatmulClass::Gemv, m.div_ceil(GEMV_TOKENS)),
            Kernel::MatmulTiled => (MatmulClass::Tiled, m.div_ceil(TILED)),
            _ => (MatmulClass::Tile, m.div_ceil(self.tile.tokens() as usize)),
        }
    }
}

/// A reduction length that is a multiple of every width the kernels test (see [`MatmulRule`]).
const QWEN3_WIDTH: u32 = 1024;

impl KernelOptions {
    /// See [`MatmulRule`].
    pub fn matmul_rule(self) -> MatmulRule {
        MatmulRule { family: self.family, tile: self.tile, subgroups: self.subgroups, gemv_max_m: self.gemv_max_m }
    }

    /// The kernel for `y (+)= x W^T` with `m` rows of x and reduction length `k`, and its
    /// workgroup counts for `rows` weight rows.
    fn matmul(self, m: u32, k: u32, rows: u32) -> (Kernel, [u32; 3]) {
        let (m, rows) = (m as usize, rows as usize);
        if self.family == KernelFamily::Gpu {
            if m <= self.gemv_max_m as usize {
                let kernel = if self.subgroups { Kernel::MatmulGemvSubgroup } else { Kernel::MatmulGemv };
                return (kernel, [groups(m, GEMV_TOKENS), groups(rows, GEMV_ROWS), 1]);
            }
            if k.is_multiple_of(TILED_K) {
                return (Kernel::MatmulTiled, [groups(rows, TILED), groups(m, TILED), 1]);
            }
        }
        let (kernel, rows_per_invocation) = self.cpu_matmul(m as u32, k);
        (kernel, [groups(rows, 64 * rows_per_invocation), groups(m, MATMUL_M_CHUNK), 1])
    }

    /// Whether a fused matmul ([`Prologue`]) serves a step of `m` tokens with reduction length
    /// `k`: the GPU family's GEMV does (up to [`KernelOptions::gemv_max_m`] tokens) and, for the norm, its tile
    /// where `k % 16 == 0`; elsewhere the step runs the norm or SwiGLU kernel and then a plain
    /// matmul. SwiGLU stays out of the tile: its row groups (`rows / 64` of them) would each
    /// recompute every `silu` of a prefill chunk — 64x for 8B's down_proj — to save a dispatch
    /// that is nothing beside a prefill step's work.
    pub fn fuses(self, prologue: Prologue, m: usize, k: usize) -> bool {
        self.fused(prologue, m, k, 1).is_some()
    }

    /// The plain matmul this step would run ([`KernelOptions::matmul`]) with `prologue` inside,
    /// and its workgroups (the same: a prologue changes what x is, not the output tiling).
    fn fused(self, prologue: Prologue, m: usize, k: usize, rows: usize) -> Option<(Kernel, [u32; 3])> {
        let (plain, groups) = self.matmul(m as u32, k as u32, rows as u32);
        if prologue == Prologue::None {
            return Some((plain, groups));
        }
        if !self.fused {
            return None;
        }
        let kernel = match (prologue, plain) {
            (Prologue::RmsNorm, Kernel::MatmulGemvSubgroup) => Kernel::MatmulGemvNormSubgroup,
            (Prologue::RmsNorm, Kernel::MatmulGemv) => Kernel::MatmulGemvNorm,
            (Prologue::RmsNorm, Kernel::MatmulTiled) => Kernel::MatmulTiledNorm,
            (Prologue::SwiGlu, Kernel::MatmulGemvSubgroup) => Kernel::MatmulGemvSwiGluSubgroup,
            (Prologue::SwiGlu, Kernel::MatmulGemv) => Kernel::MatmulGemvSwiGlu,
            // The CPU family's kernels, and SwiGLU in the tile (see `fuses`).
            _ => return None,
        };
        Some((kernel, groups))
    }

    /// The CPU family's kernel and its weight rows per invocation (also the GPU family's fallback
    /// where K is not a multiple of 16).
    fn cpu_matmul(self, m: u32, k: u32) -> (Kernel, usize) {
        let shared_x = self.subgroups && k.is_multiple_of(MATMUL_SUBGROUP_K);
        let tall = m >= MATMUL_TALL_MIN_M;
        match (self.tile, m) {
            (_, 1) if shared_x => (Kernel::MatmulM1Subgroup, MATMUL_M1_ROWS),
            (_, 1) => (Kernel::MatmulM1, MATMUL_M1_ROWS),
            (MatmulTile::Four, _) => (Kernel::Matmul, MATMUL_ROWS),
            (MatmulTile::Eight, _) if tall && shared_x => (Kernel::MatmulTallSubgroup, MATMUL_TALL_ROWS),
            (MatmulTile::Eight, _) if tall => (Kernel::MatmulTall, MATMUL_TALL_ROWS),
            (MatmulTile::Eight, _) if shared_x && m <= MATMUL_SMALL_MAX_M => {
                (Kernel::MatmulSmallSubgroup, MATMUL_SMALL_ROWS)
            }
            (MatmulTile::Eight, _) if shared_x => (Kernel::MatmulWideSubgroup, MATMUL_ROWS),
            (MatmulTile::Eight, _) => (Kernel::MatmulWide, MATMUL_ROWS),
        }
    }
}

/// Weight rows per invocation and tokens per workgroup of `matmul_bf16`, and rows per invocation
/// of `matmul_bf16_m1` (mirrors the constants in matmul.wgsl).
const MATMUL_ROWS: usize = 4;
/// Rows per invocation of `matmul_bf16_small_sg`, and the largest M it serves.
const MATMUL_SMALL_ROWS: usize = 8;
const MATMUL_SMALL_MAX_M: u32 = 4;
/// The subgroup matmuls need k to be a multiple of this (8 weights per load x `X_SHARE` lanes).
const MATMUL_SUBGROUP_K: u32 = 32;
const MATMUL_M_CHUNK: usize = 32;
const MATMUL_M1_ROWS: usize = 8;
/// Rows per invocation of `matmul_bf16_tall`, and the M from which it is used.
const MATMUL_TALL_ROWS: usize = 8;
const MATMUL_TALL_MIN_M: u32 = 64;
/// matmul_gpu.wgsl: rows and tokens per workgroup of `matmul_bf16_gemv`; the output tile of
/// `matmul_bf16_tiled` and the multiple of K it needs.
pub(super) const GEMV_ROWS: usize = 8;
pub(super) const GEMV_TOKENS: usize = 4;

pub(super) const TILED: usize = 64;
pub(super) const TILED_K: u32 = 16;
// The kernels' shapes are built around these values (GEMV: 8 teams x 32 lanes = the workgroup of
// 256, a vec4 accumulator of 4 tokens; tiled: 256 invocations load a 64 x 16 slice of x and of W
// per round and own 4 x 4 outputs each). They reach the WGSL through the prelude; changing one
// means rewriting the kernel, which these assertions say.
const _: () = assert!(GEMV_ROWS == 8 && GEMV_TOKENS == 4 && TILED == 64 && TILED_K == 16);

/// Records `y (+)= x W^T` over one weight chunk: the decode kernel when x has one row, otherwise
/// the general kernel of this table's tile for that many rows (each with shared x where it can).
pub fn record_matmul<'a>(rec: &mut StepRecorder<'a>, bind_group: &'a wgpu::BindGroup, p: &MatmulParams) {
    record_matmul_with(rec, bind_group, p, Prologue::None);
}

/// [`record_matmul`] with a prologue: the fused GPU-family kernel, which the caller has checked
/// serves this step ([`KernelOptions::fuses`]); `bind_group` is then one of [`Kernel::MatmulGemvNorm`]
/// (x = the residual stream, binding 4 the norm weight) or of [`Kernel::Matmul`] over the gate|up
/// output (SwiGLU).
pub fn record_matmul_with<'a>(
    rec: &mut StepRecorder<'a>,
    bind_group: &'a wgpu::BindGroup,
    p: &MatmulParams,
    prologue: Prologue,
) {
    let options = rec.kernels.options;
    let (kernel, workgroups) = match prologue {
        Prologue::None => options.matmul(p.m, p.k, p.rows),
        _ => options.fused(prologue, p.m as usize, p.k as usize, p.rows as usize).unwrap_or_else(|| {
            panic!("no fused {prologue:?} matmul for {} tokens, k = {} (check KernelOptions::fuses)", p.m, p.k)
        }),
    };
    let flags = if options.gemv_m1 { MatmulParams::GEMV_M1 } else { 0 }
        | if options.tile_prefetch { MatmulParams::TILE_PREFETCH } else { 0 }
        | if options.gemv_rows4 { MatmulParams::GEMV_ROWS4 } else { 0 };
    let p = MatmulParams { flags, ..*p };
    let work = super::Work {
        weight_bytes: p.rows as u64 * options.format.row_bytes(p.k as usize) as u64,
        flops: 2 * p.m as u64 * p.rows as u64 * p.k as u64,
    };
    rec.dispatch_doing(kernel, bind_group, &p, workgroups, work);
}
