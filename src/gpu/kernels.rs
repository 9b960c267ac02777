//! The kernel table: one WGSL file per kernel family, one pipeline per entry point, created once.
//! Every kernel takes its parameters as a uniform at binding 0 with a dynamic offset into one
//! per-step parameter arena, so bind groups are built once and a step is one `write_buffer`
//! (the arena) plus one command buffer.

use super::WeightStorage;
use crate::model::quant::WeightFormat;
use bytemuck::{Pod, Zeroable};
use std::collections::HashMap;

/// Each kernel's parameter block is bound as this many bytes at a 256-byte aligned offset.
pub const PARAM_SLOT: u64 = 256;
/// Distinct parameter blocks per step (deduplicated: layers share theirs).
pub const MAX_PARAM_SLOTS: u64 = 256;

/// Declares every kernel once: its name, the WGSL file in shaders/ or rendered by build.rs (and the file it is
/// compiled after, whose Params, bindings and helpers it uses), its entry point, its storage bindings 1.. in
/// order (binding 0 is the parameter uniform), and which [`KernelOptions`] build it. The `Kernel`
/// enum, `Kernel::ALL` and the lookups below are generated from this one list, and
/// `tests/contracts.rs` checks each line against its WGSL (entry, parameter block, bindings).
macro_rules! kernels {
    ($($(#[$doc:meta])* $name:ident = $file:literal $(after $($base:literal)+)?
        $(with $x_form:literal as $label:literal)?, $entry:literal, [$($access:ident),*], $needs:ident;)*) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Kernel {
            $($(#[$doc])* $name,)*
        }

        impl Kernel {
            pub const ALL: &'static [Kernel] = &[$(Kernel::$name),*];

            fn decl(self) -> Decl {
                match self {
                    $(Kernel::$name => Decl {
                        file: $file,
                        bases: &[$($($base),+)?],
                        x_form: kernels!(@opt $($x_form)?),
                        entry: $entry,
                        label: kernels!(@label $entry $($label)?),
                        bindings: &[$($access),*],
                        needs: Needs::$needs,
                    },)*
                }
            }
        }
    };
    (@opt) => { None };
    (@opt $value:literal) => { Some($value) };
    (@label $entry:literal) => { $entry };
    (@label $entry:literal $label:literal) => { $label };
}

kernels! {
    Embed = "embed.wgsl", "embed", [Read, Weights, Write, Read], Always;
    RmsNorm = "rmsnorm.wgsl", "rms_norm", [Read, Read, Read, Write], Always;
    /// The general matmul, a 4-token register tile (the browser's; see [`MatmulTile`]).
    Matmul = "matmul.wgsl", "matmul_bf16", [Read, Weights, Write], TileFour;
    /// `Matmul` with an 8-token register tile (native CPU adapters; rendered by build.rs).
    MatmulWide = "matmul_tiles.wgsl" after "matmul.wgsl", "matmul_bf16_wide", [Read, Weights, Write], TileEight;
    /// `MatmulWide` with 8 weight rows per invocation, for prefill-sized M (native CPU adapters).
    MatmulTall = "matmul_tiles.wgsl" after "matmul.wgsl", "matmul_bf16_tall", [Read, Weights, Write], TileEight;
    /// `Matmul` specialised for one row of x (decode at batch 1).
    MatmulM1 = "matmul.wgsl", "matmul_bf16_m1", [Read, Weights, Write], Always;
    /// `MatmulM1`, `MatmulWide` and `MatmulTall` with x shared across subgroup lanes (adapters
    /// with the `subgroups` feature; see [`KernelOptions`]; rendered by build.rs).
    MatmulM1Subgroup = "matmul_subgroup.wgsl" after "matmul.wgsl", "matmul_bf16_m1_sg",
        [Read, Weights, Write], Subgroups;
    /// 8 rows x 4 tokens with shared x, for steps of 2-4 tokens (native, with subgroups).
    MatmulSmallSubgroup = "matmul_subgroup.wgsl" after "matmul.wgsl", "matmul_bf16_small_sg",
        [Read, Weights, Write], SubgroupsTileEight;
    MatmulWideSubgroup = "matmul_subgroup.wgsl" after "matmul.wgsl", "matmul_bf16_wide_sg",
        [Read, Weights, Write], SubgroupsTileEight;
    MatmulTallSubgroup = "matmul_subgroup.wgsl" after "matmul.wgsl", "matmul_bf16_tall_sg",
        [Read, Weights, Write], SubgroupsTileEight;
    /// The GPU family's matmuls ([`KernelFamily::Gpu`]): coalesced decode GEMV for small steps ...
    MatmulGemv = "matmul_gpu.wgsl" after "matmul.wgsl", "matmul_bf16_gemv", [Read, Weights, Write], GpuFamily;
    /// ... and a 64 x 64 workgroup-memory tile for more.
    MatmulTiled = "matmul_gpu.wgsl" after "matmul.wgsl", "matmul_bf16_tiled", [Read, Weights, Write], GpuFamily;
    /// The GEMV and the tile with the RMSNorm before them in their prologue: x is the residual
    /// stream, binding 4 the norm's weight ([`Prologue::RmsNorm`]; the GPU family's q|k|v and
    /// gate|up) ...
    MatmulGemvNorm = "matmul_gpu.wgsl" after "matmul.wgsl" with "matmul_x_norm.wgsl" as "matmul_bf16_gemv+norm",
        "matmul_bf16_gemv", [Read, Weights, Write, Read], GpuFamily;
    MatmulTiledNorm = "matmul_gpu.wgsl" after "matmul.wgsl" with "matmul_x_norm.wgsl" as "matmul_bf16_tiled+norm",
        "matmul_bf16_tiled", [Read, Weights, Write, Read], GpuFamily;
    /// ... and the GEMV with SwiGLU in it: x is the gate|up output ([`Prologue::SwiGlu`];
    /// down_proj at decode; see [`KernelOptions::fuses`] for why not in the tile).
    MatmulGemvSwiGlu = "matmul_gpu.wgsl" after "matmul.wgsl" with "matmul_x_swiglu.wgsl" as "matmul_bf16_gemv+swiglu",
        "matmul_bf16_gemv", [Read, Weights, Write], GpuFamily;
    /// The three GEMVs with each team's sums reduced by subgroup shuffles (devices with
    /// `subgroups`, see [`KernelOptions::subgroups`]).
    MatmulGemvSubgroup = "matmul_gpu_subgroup.wgsl" after "matmul.wgsl" "matmul_gpu.wgsl",
        "matmul_bf16_gemv_sg", [Read, Weights, Write], SubgroupsGpuFamily;
    MatmulGemvNormSubgroup = "matmul_gpu_subgroup.wgsl" after "matmul.wgsl" "matmul_gpu.wgsl"
        with "matmul_x_norm.wgsl" as "matmul_bf16_gemv_sg+norm", "matmul_bf16_gemv_sg", [Read, Weights, Write, Read],
        SubgroupsGpuFamily;
    MatmulGemvSwiGluSubgroup = "matmul_gpu_subgroup.wgsl" after "matmul.wgsl" "matmul_gpu.wgsl"
        with "matmul_x_swiglu.wgsl" as "matmul_bf16_gemv_sg+swiglu", "matmul_bf16_gemv_sg", [Read, Weights, Write],
        SubgroupsGpuFamily;
    QkNormRope = "rope.wgsl", "qk_norm_rope", [Write, Read, Read, Read, Read, Write, Write], Always;
    /// `QkNormRope` with a workgroup per (head, token) (the GPU family).
    QkNormRopeGpu = "rope.wgsl", "qk_norm_rope_gpu", [Write, Read, Read, Read, Read, Write, Write], GpuFamily;
    Attention = "attention.wgsl", "attention", [Read, Read, Read, Read, Read, Write], Always;
    /// Attention with each token's context split into parts (flash-decoding) ...
    AttentionSplit = "attention.wgsl", "attention_split", [Read, Read, Read, Read, Read, Write], Always;
    /// `AttentionSplit` with a workgroup per part (the GPU family; with one part it writes the output itself).
    AttentionSplitGpu = "attention.wgsl", "attention_split_gpu", [Read, Read, Read, Read, Read, Write], GpuFamily;
    /// Prefill attention tiled over queries (the GPU family; runs of one sequence, see [`record_attention`]).
    AttentionPrefillGpu = "attention.wgsl", "attention_prefill_gpu", [Read, Read, Read, Read, Read, Write], GpuFamily;
    /// ... and the pass that combines the parts.
    AttentionMerge = "attention_merge.wgsl", "attention_merge", [Read, Write], Always;
    SwiGlu = "swiglu.wgsl", "swiglu", [Read, Write], Always;
    Argmax = "argmax.wgsl", "argmax", [Read, Write], Always;
    Sample = "sample.wgsl", "sample", [Read, Read, Write], Always;
}

/// One kernel's declaration (see [`kernels!`]).
struct Decl {
    file: &'static str,
    /// Files compiled before it, in order (their Params, bindings and helpers).
    bases: &'static [&'static str],
    /// The form of matmul_gpu.wgsl's `// BEGIN x … // END x` block this kernel reads x through.
    x_form: Option<&'static str>,
    entry: &'static str,
    /// The entry point, or a name of its own where several kernels share an entry.
    label: &'static str,
    bindings: &'static [Access],
    needs: Needs,
}

/// Which [`KernelOptions`] build a kernel: the others may not compile on the adapter (subgroups,
/// SwiftShader and the 8-token tile) or are never dispatched.
#[derive(Clone, Copy)]
enum Needs {
    Always,
    TileFour,
    TileEight,
    Subgroups,
    SubgroupsTileEight,
    GpuFamily,
    SubgroupsGpuFamily,
}

/// How a kernel uses one of its storage bindings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
    /// bf16 weights: a read-only storage buffer or an `rgba32uint` texture ([`WeightStorage`]).
    Weights,
}
use Access::{Read, Weights, Write};

/// Something a kernel binding can be: a buffer, or a weight chunk (buffer or texture).
pub trait Bind {
    fn resource(&self) -> wgpu::BindingResource<'_>;
}

impl Bind for wgpu::Buffer {
    fn resource(&self) -> wgpu::BindingResource<'_> {
        self.as_entire_binding()
    }
}

impl<T: Bind + ?Sized> Bind for &T {
    fn resource(&self) -> wgpu::BindingResource<'_> {
        (**self).resource()
    }
}

impl Kernel {
    /// The kernel's WGSL. The subgroup matmuls are matmul.wgsl (their parameters, bindings and
    /// helpers), then matmul_subgroup.wgsl; browsers need `enable subgroups;` first, while naga
    /// rejects it and takes the device feature as the permission. With weights in textures, the
    /// storage-buffer weights block of matmul.wgsl / embed.wgsl is swapped for weights_texture.wgsl;
    /// quantised weights swap in their own block ([`weights_block`]), so the kernels themselves are
    /// the same for every format. Every kernel's WGSL starts with [`wgsl_prelude`] (after any
    /// `enable`), the constants the host sizes dispatches and buffers with.
    pub fn source(self, weights: WeightStorage, format: WeightFormat) -> (String, &'static str) {
        let Decl { file, bases, x_form, entry, needs, .. } = self.decl();
        let mut text = Self::file_text(file).into_owned();
        let subgroups = matches!(needs, Needs::Subgroups | Needs::SubgroupsTileEight | Needs::SubgroupsGpuFamily)
            && cfg!(target_arch = "wasm32");
        let enable = if subgroups { "enable subgroups;\n\n" } else { "" };
        for base in bases.iter().rev() {
            text = format!("{}\n{text}", Self::file_text(base));
        }
        if let Some(block) = weights_block(weights, format).filter(|_| self.bindings().contains(&Weights)) {
            let begin = text.find(WEIGHTS_BEGIN).expect("the weights block starts");
            let end = text.find(WEIGHTS_END).expect("the weights block ends") + WEIGHTS_END.len();
            text.replace_range(begin..end, &Self::file_text(block));
        }
        if let Some(form) = x_form {
            let begin = text.find(X_BEGIN).expect("the x block starts");
            let end = text.find(X_END).expect("the x block ends") + X_END.len();
            text.replace_range(begin..end, &Self::file_text(form));
        }
        (format!("{enable}{}{text}", wgsl_prelude()), entry)
    }

    /// A WGSL file, compiled in: hand-written in shaders/, or rendered by build.rs into `OUT_DIR`
    /// (matmul_tiles.wgsl, matmul_subgroup.wgsl). Natively, for kernel work without rebuilding,
    /// `$TOKENMETER_SHADER_DIR` overrides the hand-written files only; the rendered ones change
    /// with build.rs.
    fn file_text(file: &str) -> std::borrow::Cow<'static, str> {
        #[cfg(not(target_arch = "wasm32"))]
        if let Some(dir) = std::env::var_os("TOKENMETER_SHADER_DIR")
            .filter(|_| !matches!(file, "matmul_tiles.wgsl" | "matmul_subgroup.wgsl"))
        {
            let path = std::path::Path::new(&dir).join(file);
            let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            return text.into();
        }
        let text = match file {
            "embed.wgsl" => include_str!("../../shaders/embed.wgsl"),
            "rmsnorm.wgsl" => include_str!("../../shaders/rmsnorm.wgsl"),
            "matmul.wgsl" => include_str!("../../shaders/matmul.wgsl"),
            "matmul_subgroup.wgsl" => include_str!(concat!(env!("OUT_DIR"), "/matmul_subgroup.wgsl")),
            "matmul_gpu.wgsl" => include_str!("../../shaders/matmul_gpu.wgsl"),
            "matmul_gpu_subgroup.wgsl" => include_str!("../../shaders/matmul_gpu_subgroup.wgsl"),
            "matmul_x_norm.wgsl" => include_str!("../../shaders/matmul_x_norm.wgsl"),
            "matmul_x_swiglu.wgsl" => include_str!("../../shaders/matmul_x_swiglu.wgsl"),
            "matmul_tiles.wgsl" => include_str!(concat!(env!("OUT_DIR"), "/matmul_tiles.wgsl")),
            "weights_texture.wgsl" => include_str!("../../shaders/weights_texture.wgsl"),
            "weights_int8.wgsl" => include_str!("../../shaders/weights_int8.wgsl"),
            "weights_int8_texture.wgsl" => include_str!("../../shaders/weights_int8_texture.wgsl"),
            "weights_int4.wgsl" => include_str!("../../shaders/weights_int4.wgsl"),
            "weights_int4_texture.wgsl" => include_str!("../../shaders/weights_int4_texture.wgsl"),
            "rope.wgsl" => include_str!("../../shaders/rope.wgsl"),
            "attention.wgsl" => include_str!("../../shaders/attention.wgsl"),
            "attention_merge.wgsl" => include_str!("../../shaders/attention_merge.wgsl"),
            "swiglu.wgsl" => include_str!("../../shaders/swiglu.wgsl"),
            "argmax.wgsl" => include_str!("../../shaders/argmax.wgsl"),
            "sample.wgsl" => include_str!("../../shaders/sample.wgsl"),
            _ => unreachable!("every kernel file is listed"),
        };
        text.into()
    }

    /// Storage bindings 1.. in order (binding 0 is the parameter uniform).
    pub fn bindings(self) -> &'static [Access] {
        self.decl().bindings
    }

    /// The kernel's name in profiles and labels: its entry point, or `entry+prologue` for the
    /// fused matmuls that share one.
    pub fn name(self) -> &'static str {
        self.decl().label
    }
}

/// The largest head_dim the attention kernels hold (their private q and accumulator arrays);
/// the config check rejects larger ones (`model::config`).
pub const MAX_HEAD_DIM: usize = 256;

/// The constants both sides depend on, from their Rust definitions: the kernels declare none of
/// these themselves, so a change here reaches the WGSL and the host's dispatch sizes together.
pub fn wgsl_prelude() -> String {
    let constants: [(&str, usize, &str); 10] = [
        (
            "PREVIOUS_ID",
            crate::engine::forward::PREVIOUS_ID as usize,
            "embed: a token that reads the previous step's id",
        ),
        ("MAX_HEAD_DIM4", MAX_HEAD_DIM / 4, "attention: private q/acc arrays"),
        ("GPU_PART", ATTENTION_GPU_PART, "attention_split_gpu: positions a workgroup scores"),
        ("PREFILL_SLICE", PREFILL_SLICE, "attention_prefill_gpu: q / accumulator vec4 per lane"),
        ("PREFILL_KEYS", PREFILL_KEYS, "attention_prefill_gpu: most keys per staged block"),
        ("PREFILL_KV4", PREFILL_KV4, "attention_prefill_gpu: vec4 of its workgroup K/V block"),
        ("GEMV_TEAMS", GEMV_ROWS, "matmul_bf16_gemv: weight rows per workgroup"),
        ("GEMV_TOKENS", GEMV_TOKENS, "matmul_bf16_gemv: tokens per workgroup"),
        ("TILE", TILED, "matmul_bf16_tiled: tokens and rows per workgroup"),
        ("TILE_K", TILED_K as usize, "matmul_bf16_tiled: columns of K staged per round"),
    ];
    let mut out = String::from("// Prepended by src/gpu/kernels.rs (wgsl_prelude): shared with the host.\n");
    for (name, value, what) in constants {
        out += &format!("const {name}: u32 = {value}u; // {what}\n");
    }
    out + "\n"
}

/// The file whose weights block replaces the storage-buffer bf16 one of matmul.wgsl and embed.wgsl
/// (`None`: that one stays).
fn weights_block(storage: WeightStorage, format: WeightFormat) -> Option<&'static str> {
    match (storage, format) {
        (WeightStorage::Buffer, WeightFormat::Bf16) => None,
        (WeightStorage::Texture, WeightFormat::Bf16) => Some("weights_texture.wgsl"),
        (WeightStorage::Buffer, WeightFormat::Int8) => Some("weights_int8.wgsl"),
        (WeightStorage::Texture, WeightFormat::Int8) => Some("weights_int8_texture.wgsl"),
        (WeightStorage::Buffer, WeightFormat::Int4) => Some("weights_int4.wgsl"),
        (WeightStorage::Texture, WeightFormat::Int4) => Some("weights_int4_texture.wgsl"),
    }
}

/// The storage-buffer weights block of matmul.wgsl and embed.wgsl (binding, `weights()` and the
/// unpack functions), which [`weights_block`]'s file replaces.
const WEIGHTS_BEGIN: &str = "// BEGIN weights";
const WEIGHTS_END: &str = "// END weights\n";
/// The x block of matmul_gpu.wgsl, which a fused kernel's x form replaces.
const X_BEGIN: &str = "// BEGIN x";
const X_END: &str = "// END x\n";

// Parameter blocks, mirrored field for field in the WGSL `Params` structs.

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
    pub _pad: u32,
}

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
    pub _pad: u32,
}

/// `swiglu` (n_tokens, inter) and `argmax` (n_rows, width).
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Debug)]
pub struct PairParams {
    pub a: u32,
    pub b: u32,
    pub _pad: [u32; 2],
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

/// The token tile of the general matmul: 4 tokens per weight load everywhere it compiles, 8 on
/// native adapters, where it is faster on lavapipe (0.6B decode at batch 16 and prefill, +25-30%).
/// SwiftShader in Chromium does not finish compiling the 8-token kernel (the page stalls in pipeline
/// creation), so the browser never builds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatmulTile {
    Four,
    Eight,
}

impl MatmulTile {
    /// Eight natively, four in the browser; `TOKENMETER_MATMUL_TILE=4` forces four natively.
    pub fn for_this_platform() -> MatmulTile {
        #[cfg(not(target_arch = "wasm32"))]
        if std::env::var("TOKENMETER_MATMUL_TILE").as_deref() != Ok("4") {
            return MatmulTile::Eight;
        }
        MatmulTile::Four
    }
}

/// Which shape of matmul kernel suits the adapter. The CPU family (lavapipe, SwiftShader: an
/// invocation is a SIMD lane of a CPU core) gives each invocation its own weight rows; the GPU
/// family has neighbouring invocations read neighbouring weights (coalesced) and stages tiles in
/// workgroup memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KernelFamily {
    Cpu,
    Gpu,
}

impl KernelFamily {
    /// GPU for discrete, integrated and virtual GPUs, CPU for CPU adapters and SwiftShader;
    /// `TOKENMETER_KERNELS=gpu|cpu` natively (and [`KernelFamily::force`] in the page) overrides.
    pub fn for_adapter(device_type: &str, name: &str) -> KernelFamily {
        if let Some(forced) = Self::forced() {
            return forced;
        }
        let software = device_type == "Cpu" || name.to_ascii_lowercase().contains("swiftshader");
        if software {
            KernelFamily::Cpu
        } else {
            KernelFamily::Gpu
        }
    }

    /// The family every run used before there were two (old saved results).
    pub fn cpu() -> KernelFamily {
        KernelFamily::Cpu
    }

    pub fn name(self) -> &'static str {
        match self {
            KernelFamily::Cpu => "cpu",
            KernelFamily::Gpu => "gpu",
        }
    }

    /// Parses "gpu" or "cpu".
    pub fn parse(s: &str) -> Option<KernelFamily> {
        match s.trim().to_ascii_lowercase().as_str() {
            "gpu" => Some(KernelFamily::Gpu),
            "cpu" => Some(KernelFamily::Cpu),
            _ => None,
        }
    }

    /// Forces a family for devices opened from now on (the page's `?kernels=`); `None` clears it.
    pub fn force(family: Option<KernelFamily>) {
        FORCED_FAMILY.store(family.map_or(0, |f| f as u8 + 1), std::sync::atomic::Ordering::Relaxed);
    }

    fn forced() -> Option<KernelFamily> {
        #[cfg(not(target_arch = "wasm32"))]
        if let Some(f) = std::env::var("TOKENMETER_KERNELS").ok().as_deref().and_then(Self::parse) {
            return Some(f);
        }
        match FORCED_FAMILY.load(std::sync::atomic::Ordering::Relaxed) {
            1 => Some(KernelFamily::Cpu),
            2 => Some(KernelFamily::Gpu),
            _ => None,
        }
    }
}

static FORCED_FAMILY: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

/// Which matmul kernels a [`Kernels`] table builds and dispatches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelOptions {
    pub family: KernelFamily,
    pub tile: MatmulTile,
    /// Use subgroup operations: the CPU family shares x across lanes (matmul_subgroup.wgsl; the
    /// browser's 4-token tile has no such variant, only decode does), the GPU family reduces its
    /// GEMV teams by shuffles (matmul_gpu_subgroup.wgsl). Needs a device opened with
    /// `Features::SUBGROUP`.
    pub subgroups: bool,
    /// Where the matmul and embedding kernels find their weights (as the `Matrix`es were made).
    pub weights: WeightStorage,
    /// How those weights are stored (the model's choice at load; bf16 unless quantised).
    pub format: WeightFormat,
    /// GPU family: RMSNorm and SwiGLU inside the matmuls that follow them ([`Prologue`]); on by
    /// default there, `TOKENMETER_FUSED=0` (natively) or `?fused=0` (the page) turns it off to
    /// measure the difference.
    pub fused: bool,
}

impl KernelOptions {
    /// This platform's tile, subgroups wherever the device has them, and the GPU's weight storage.
    pub fn for_gpu(gpu: &super::Gpu) -> KernelOptions {
        KernelOptions {
            family: gpu.kernel_family,
            tile: MatmulTile::for_this_platform(),
            subgroups: gpu.subgroups,
            weights: gpu.weight_storage,
            format: WeightFormat::Bf16,
            fused: gpu.kernel_family == KernelFamily::Gpu && fusion_allowed(),
        }
    }

    /// Whether these options build `kernel` (every kernel but the general matmuls of other tiles
    /// and, without subgroups, the subgroup variants).
    fn builds(self, kernel: Kernel) -> bool {
        let eight = self.tile == MatmulTile::Eight;
        match kernel.decl().needs {
            Needs::Always => true,
            Needs::TileFour => !eight,
            Needs::TileEight => eight,
            Needs::Subgroups => self.subgroups,
            Needs::SubgroupsTileEight => self.subgroups && eight,
            Needs::GpuFamily => self.family == KernelFamily::Gpu,
            Needs::SubgroupsGpuFamily => self.subgroups && self.family == KernelFamily::Gpu,
        }
    }

    /// The kernel for `y (+)= x W^T` with `m` rows of x and reduction length `k`, and its
    /// workgroup counts for `rows` weight rows.
    fn matmul(self, m: u32, k: u32, rows: u32) -> (Kernel, [u32; 3]) {
        let (m, rows) = (m as usize, rows as usize);
        if self.family == KernelFamily::Gpu {
            if m <= gemv_max_m() {
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
    /// `k`: the GPU family's GEMV does (up to [`gemv_max_m`] tokens) and, for the norm, its tile
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

/// A kernel table: the pipelines for one set of [`KernelOptions`] (shared, see
/// [`Kernels::with_options`]) and a parameter arena of its own.
pub struct Kernels {
    compiled: std::sync::Arc<Compiled>,
    options: KernelOptions,
    /// The per-step parameter arena (uniform, dynamic offsets).
    pub params: wgpu::Buffer,
}

/// The pipelines and binding layouts built for one device and one set of options.
pub(crate) struct Compiled {
    pipelines: HashMap<Kernel, wgpu::ComputePipeline>,
    layouts: HashMap<Kernel, wgpu::BindGroupLayout>,
}

impl Kernels {
    pub fn new(gpu: &super::Gpu) -> Kernels {
        Self::with_options(gpu, KernelOptions::for_gpu(gpu))
    }

    /// The kernel choices this table was built with.
    pub fn options(&self) -> KernelOptions {
        self.options
    }

    /// The table for `options` on `gpu`. Its pipelines are built once per device and options and
    /// shared by every table made after (`Gpu::compiled`): a driver compiles a pipeline's shader
    /// once (Mesa's llvmpipe at its first dispatch, about a second for the kernels of a step), so
    /// an engine loaded again — another model, another setting — does not pay it again. Each
    /// table has its own parameter arena, so engines on one device never share one.
    pub fn with_options(gpu: &super::Gpu, options: KernelOptions) -> Kernels {
        let compiled = {
            let mut built = gpu.compiled.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            match built.iter().find(|(o, _)| *o == options) {
                Some((_, c)) => c.clone(),
                None => {
                    let c = std::sync::Arc::new(Compiled::build(&gpu.device, options));
                    built.push((options, c.clone()));
                    c
                }
            }
        };
        let params = gpu.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("kernel parameter arena"),
            size: PARAM_SLOT * MAX_PARAM_SLOTS,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        Kernels { compiled, options, params }
    }
}

impl Compiled {
    fn build(device: &wgpu::Device, options: KernelOptions) -> Compiled {
        let mut pipelines = HashMap::new();
        let mut layouts = HashMap::new();
        // Only the matmuls these options use are built (the others may not compile on this adapter).
        for kernel in Kernel::ALL.iter().copied().filter(|&k| options.builds(k)) {
            let (source, entry) = kernel.source(options.weights, options.format);
            let name = kernel.name();
            let mut entries = vec![wgpu::BindGroupLayoutEntry {
                binding: 0,
                visibility: wgpu::ShaderStages::COMPUTE,
                ty: wgpu::BindingType::Buffer {
                    ty: wgpu::BufferBindingType::Uniform,
                    has_dynamic_offset: true,
                    min_binding_size: None,
                },
                count: None,
            }];
            for (i, &access) in kernel.bindings().iter().enumerate() {
                let ty = match access {
                    Weights if options.weights == WeightStorage::Texture => wgpu::BindingType::Texture {
                        sample_type: wgpu::TextureSampleType::Uint,
                        view_dimension: wgpu::TextureViewDimension::D2,
                        multisampled: false,
                    },
                    _ => wgpu::BindingType::Buffer {
                        ty: wgpu::BufferBindingType::Storage { read_only: access != Write },
                        has_dynamic_offset: false,
                        min_binding_size: None,
                    },
                };
                entries.push(wgpu::BindGroupLayoutEntry {
                    binding: i as u32 + 1,
                    visibility: wgpu::ShaderStages::COMPUTE,
                    ty,
                    count: None,
                });
            }
            let layout = device
                .create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor { label: Some(name), entries: &entries });
            let desc =
                wgpu::ShaderModuleDescriptor { label: Some(name), source: wgpu::ShaderSource::Wgsl(source.into()) };
            let module = if std::env::var_os("TOKENMETER_UNCHECKED").is_some() {
                unsafe { device.create_shader_module_trusted(desc, wgpu::ShaderRuntimeChecks::unchecked()) }
            } else {
                device.create_shader_module(desc)
            };
            let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                label: Some(name),
                bind_group_layouts: &[Some(&layout)],
                immediate_size: 0,
            });
            let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(name),
                layout: Some(&pipeline_layout),
                module: &module,
                entry_point: Some(entry),
                compilation_options: Default::default(),
                cache: None,
            });
            pipelines.insert(kernel, pipeline);
            layouts.insert(kernel, layout);
        }
        // The matmuls share one binding layout: a bind group made for any of them (callers use
        // `Kernel::Matmul`) serves the one a step picks.
        let general = layouts[&Kernel::MatmulM1].clone();
        for kernel in [Kernel::Matmul, Kernel::MatmulWide, Kernel::MatmulTall] {
            layouts.entry(kernel).or_insert_with(|| general.clone());
        }
        Compiled { pipelines, layouts }
    }
}

impl Kernels {
    /// A bind group for `kernel` over `buffers` (bindings 1.. in the kernel's order; weights are a
    /// `weights::Chunk`).
    pub fn bind(&self, device: &wgpu::Device, kernel: Kernel, label: &str, buffers: &[&dyn Bind]) -> wgpu::BindGroup {
        assert_eq!(buffers.len(), kernel.bindings().len(), "{}: wrong number of buffers", kernel.name());
        let mut entries = vec![wgpu::BindGroupEntry {
            binding: 0,
            resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                buffer: &self.params,
                offset: 0,
                size: Some(std::num::NonZeroU64::new(PARAM_SLOT).expect("non-zero")),
            }),
        }];
        for (i, buffer) in buffers.iter().enumerate() {
            entries.push(wgpu::BindGroupEntry { binding: i as u32 + 1, resource: buffer.resource() });
        }
        device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(label),
            layout: &self.compiled.layouts[&kernel],
            entries: &entries,
        })
    }
}

/// Dispatches of one step, recorded before any GPU work so that all parameter blocks go up
/// in a single write.
pub struct StepRecorder<'a> {
    kernels: &'a Kernels,
    arena: Vec<u8>,
    slots: HashMap<Vec<u8>, u32>,
    dispatches: Vec<(Kernel, &'a wgpu::BindGroup, u32, [u32; 3])>,
    max_groups: u32,
}

impl<'a> StepRecorder<'a> {
    pub fn new(kernels: &'a Kernels, max_groups: u32) -> Self {
        StepRecorder { kernels, arena: Vec::new(), slots: HashMap::new(), dispatches: Vec::new(), max_groups }
    }

    /// Queues `kernel` over `groups` workgroups with `params`.
    pub fn dispatch<P: Pod>(&mut self, kernel: Kernel, bind_group: &'a wgpu::BindGroup, params: &P, groups: [u32; 3]) {
        assert!(
            groups.iter().all(|&g| g <= self.max_groups),
            "{}: {groups:?} workgroups exceed the adapter's {} per dimension",
            kernel.name(),
            self.max_groups
        );
        if groups.contains(&0) {
            return;
        }
        let bytes = bytemuck::bytes_of(params).to_vec();
        let next = self.slots.len() as u32;
        let slot = *self.slots.entry(bytes.clone()).or_insert_with(|| {
            assert!((next as u64) < MAX_PARAM_SLOTS, "parameter arena full");
            let offset = next as usize * PARAM_SLOT as usize;
            self.arena.resize(offset + PARAM_SLOT as usize, 0);
            self.arena[offset..offset + bytes.len()].copy_from_slice(&bytes);
            next
        });
        self.dispatches.push((kernel, bind_group, slot * PARAM_SLOT as u32, groups));
    }

    pub fn len(&self) -> usize {
        self.dispatches.len()
    }

    pub fn is_empty(&self) -> bool {
        self.dispatches.is_empty()
    }

    /// Writes the parameter arena and encodes every dispatch into one compute pass.
    pub fn encode(self, queue: &wgpu::Queue, encoder: &mut wgpu::CommandEncoder) {
        if !self.arena.is_empty() {
            queue.write_buffer(&self.kernels.params, 0, &self.arena);
        }
        let mut pass =
            encoder.begin_compute_pass(&wgpu::ComputePassDescriptor { label: Some("step"), timestamp_writes: None });
        for (kernel, bind_group, offset, [x, y, z]) in self.dispatches {
            pass.set_pipeline(&self.kernels.compiled.pipelines[&kernel]);
            pass.set_bind_group(0, bind_group, &[offset]);
            pass.dispatch_workgroups(x, y, z);
        }
    }
}

/// Timestamp queries in one query set (wgpu's cap); longer steps are profiled by wall time.
const MAX_QUERIES: usize = 4096;

impl StepRecorder<'_> {
    /// Seconds each dispatch took, by kernel, in recording order. On GPUs with timestamp queries
    /// (the device was opened with `TIMESTAMP_QUERY`), the step runs as one submit with a timestamp
    /// before and after each dispatch, each in its own compute pass. Otherwise every dispatch runs
    /// alone (one submit each, waiting in between) and its wall time is kept: that works on every
    /// adapter and is exact on CPU adapters, whose timestamps do not bracket the work (on lavapipe
    /// the per-dispatch timestamps of a 146 ms 0.6B decode step summed to 63 ms).
    pub async fn profile(self, gpu: &super::Gpu) -> crate::error::Result<Vec<(Kernel, f64)>> {
        if !self.arena.is_empty() {
            gpu.queue.write_buffer(&self.kernels.params, 0, &self.arena);
        }
        super::roofline::wait_idle(gpu).await?;
        let timestamps =
            gpu.device.features().contains(wgpu::Features::TIMESTAMP_QUERY) && gpu.adapter.device_type != "Cpu";
        if timestamps && !self.dispatches.is_empty() && 2 * self.dispatches.len() <= MAX_QUERIES {
            return self.profile_with_timestamps(gpu).await;
        }
        let mut times = Vec::with_capacity(self.dispatches.len());
        for (kernel, bind_group, offset, [x, y, z]) in self.dispatches {
            let mut encoder = gpu.device.create_command_encoder(&Default::default());
            {
                let mut pass = encoder.begin_compute_pass(&Default::default());
                pass.set_pipeline(&self.kernels.compiled.pipelines[&kernel]);
                pass.set_bind_group(0, bind_group, &[offset]);
                pass.dispatch_workgroups(x, y, z);
            }
            let start = crate::clock::now_s();
            gpu.queue.submit([encoder.finish()]);
            super::roofline::wait_idle(gpu).await?;
            times.push((kernel, crate::clock::now_s() - start));
        }
        Ok(times)
    }

    async fn profile_with_timestamps(self, gpu: &super::Gpu) -> crate::error::Result<Vec<(Kernel, f64)>> {
        let queries = 2 * self.dispatches.len() as u32;
        let set = gpu.device.create_query_set(&wgpu::QuerySetDescriptor {
            label: Some("profile"),
            ty: wgpu::QueryType::Timestamp,
            count: queries,
        });
        let bytes = queries as u64 * 8;
        let resolved = gpu.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("profile timestamps"),
            size: bytes,
            usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        let mut encoder = gpu.device.create_command_encoder(&Default::default());
        for (i, (kernel, bind_group, offset, [x, y, z])) in self.dispatches.iter().enumerate() {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some(kernel.name()),
                timestamp_writes: Some(wgpu::ComputePassTimestampWrites {
                    query_set: &set,
                    beginning_of_pass_write_index: Some(2 * i as u32),
                    end_of_pass_write_index: Some(2 * i as u32 + 1),
                }),
            });
            pass.set_pipeline(&self.kernels.compiled.pipelines[kernel]);
            pass.set_bind_group(0, *bind_group, &[*offset]);
            pass.dispatch_workgroups(*x, *y, *z);
        }
        encoder.resolve_query_set(&set, 0..queries, &resolved, 0);
        gpu.queue.submit([encoder.finish()]);
        let ticks: Vec<u64> = bytemuck::pod_collect_to_vec(
            &super::readback::read_buffer(&gpu.device, &gpu.queue, &resolved, bytes).await?,
        );
        let seconds_per_tick = gpu.queue.get_timestamp_period() as f64 * 1e-9;
        Ok(self
            .dispatches
            .iter()
            .zip(ticks.chunks(2))
            .map(|((kernel, ..), t)| (*kernel, t[1].saturating_sub(t[0]) as f64 * seconds_per_tick))
            .collect())
    }
}

/// Loop iterations one shader invocation may run on Mesa's llvmpipe (lavapipe): its
/// `loop_limiter` (`LP_MAX_TGSI_LOOP_ITERATIONS`, gallivm) is one counter per invocation, set to
/// 65,535 and decremented at the end of every iteration of every loop; at zero every loop exits
/// early, silently. Kernels keep their iterations per invocation under half of it.
pub const LLVMPIPE_LOOP_BUDGET: usize = 65_535 / 2;

/// Context positions one attention invocation may walk: each position costs head_dim / 2 + 1
/// loop iterations (attention.wgsl, vec4 loops), plus head_dim / 2 around the walk.
/// (Qwen3, head_dim 128: 503 positions.) Longer contexts are split.
pub fn attention_max_positions(head_dim: usize) -> usize {
    (LLVMPIPE_LOOP_BUDGET - head_dim / 2) / (head_dim / 2 + 1)
}

/// Steps with at most this many (token, head) pairs split contexts of [`SPLIT_MIN_CONTEXT`]+
/// positions [`SPLITS_FOR_PARALLELISM`] ways, so that the whole adapter works on a decode step.
pub const SPLIT_MAX_PAIRS: usize = 512;
pub const SPLIT_MIN_CONTEXT: usize = 128;
pub const SPLITS_FOR_PARALLELISM: usize = 16;

/// Floats per part in the partials buffer: running max, running sum, then head_dim accumulators.
pub fn attention_part_floats(head_dim: usize) -> usize {
    head_dim + 2
}

/// Positions one workgroup of `attention_split_gpu` scores (its workgroup memory, attention.wgsl).
pub const ATTENTION_GPU_PART: usize = 512;
/// The GPU family splits a context so that each part has at least this many positions.
pub const ATTENTION_GPU_MIN_PART: usize = 64;

/// `attention_prefill_gpu` (attention.wgsl): q / accumulator vec4 columns per lane, the most keys
/// of one staged block, and the vec4 of its workgroup K (then V) block.
pub const PREFILL_SLICE: usize = 8;
pub const PREFILL_KEYS: usize = 16;
pub const PREFILL_KV4: usize = 512;
/// Its loop iterations per invocation (llvmpipe's budget): the lanes, q and output loops, and per
/// key block the K and V staging (at most PREFILL_KV4 / 64 each), three PREFILL_KEYS x
/// PREFILL_SLICE nests (dots, scores, P . V), the weights, the rescale and the block loop itself.
const PREFILL_SETUP_LOOPS: usize = 3 + 2 * PREFILL_SLICE + 8;
const PREFILL_BLOCK_LOOPS: usize =
    2 * (PREFILL_KV4 / 64) + 3 * PREFILL_KEYS * (1 + PREFILL_SLICE) + PREFILL_KEYS + PREFILL_SLICE + 1;
/// Runs of at least this many step tokens of one sequence at consecutive positions (prefill
/// chunks) take the GPU family's tiled prefill attention; shorter ones the workgroup per
/// (token, head, part).
pub const ATTENTION_PREFILL_MIN_RUN: usize = 16;
/// The tiled kernel splits contexts further while a run has fewer (tile, head) workgroups than
/// this, into parts of at least [`PREFILL_MIN_PART`] positions (up to [`SPLITS_FOR_PARALLELISM`]).
const PREFILL_MIN_WORKGROUPS: usize = 256;
const PREFILL_MIN_PART: usize = 256;

/// Queries per workgroup tile and keys per staged block of `attention_prefill_gpu` at `head_dim`
/// (mirrors the kernel: 64 lanes, L lanes a query with L * PREFILL_SLICE vec4 >= head_dim / 4).
pub fn attention_prefill_tile(head_dim: usize) -> (usize, usize) {
    let hd4 = head_dim / 4;
    let lanes = hd4.div_ceil(PREFILL_SLICE).next_power_of_two();
    (64 / lanes, PREFILL_KEYS.min(PREFILL_KV4 / hd4))
}

/// Context positions one part of `attention_prefill_gpu` may walk within the loop budget
/// (head_dim 128: 1,104).
pub fn attention_prefill_max_positions(head_dim: usize) -> usize {
    (LLVMPIPE_LOOP_BUDGET - PREFILL_SETUP_LOOPS) / PREFILL_BLOCK_LOOPS * attention_prefill_tile(head_dim).1
}

/// Loop iterations of the longest part `attention_prefill_gpu` walks at `head_dim`.
pub fn attention_prefill_walk(head_dim: usize) -> usize {
    let blocks = attention_prefill_max_positions(head_dim).div_ceil(attention_prefill_tile(head_dim).1);
    PREFILL_SETUP_LOOPS + blocks * PREFILL_BLOCK_LOOPS
}

/// Parts each context of a tiled prefill run of `n_tokens` is split into: enough for the loop
/// budget, and more while the run has few workgroups.
pub fn attention_prefill_splits(n_tokens: usize, n_heads: usize, head_dim: usize, longest_context: usize) -> usize {
    let needed = longest_context.div_ceil(attention_prefill_max_positions(head_dim)).max(1);
    let workgroups = n_tokens.div_ceil(attention_prefill_tile(head_dim).0) * n_heads;
    let for_parallelism = if workgroups < PREFILL_MIN_WORKGROUPS {
        (longest_context / PREFILL_MIN_PART).clamp(1, SPLITS_FOR_PARALLELISM)
    } else {
        1
    };
    needed.max(for_parallelism)
}

/// How the GPU family records a step's attention: the step's tokens cut into ranges, each
/// `(tokens, tiled)`. A tiled range is a run of at least [`ATTENTION_PREFILL_MIN_RUN`] tokens of
/// one sequence at consecutive positions; the tokens between them (decodes, short chunks) are
/// gathered into untiled ranges.
pub fn attention_ranges(tokens: &[[u32; 4]]) -> Vec<(std::ops::Range<usize>, bool)> {
    let mut ranges: Vec<(std::ops::Range<usize>, bool)> = Vec::new();
    let mut start = 0;
    while start < tokens.len() {
        let mut end = start + 1;
        while end < tokens.len() && tokens[end][2] == tokens[start][2] && tokens[end][1] == tokens[end - 1][1] + 1 {
            end += 1;
        }
        let tiled = end - start >= ATTENTION_PREFILL_MIN_RUN;
        match ranges.last_mut() {
            Some((last, false)) if !tiled => last.end = end,
            _ => ranges.push((start..end, tiled)),
        }
        start = end;
    }
    ranges
}

/// Parts each context of a step is split into, for the CPU family: 1 (one invocation per
/// (token, head)) unless the longest context is too long for one invocation or the step has few
/// pairs over a long context.
pub fn attention_splits(n_tokens: usize, n_heads: usize, head_dim: usize, longest_context: usize) -> usize {
    let needed = longest_context.div_ceil(attention_max_positions(head_dim)).max(1);
    let for_parallelism = if n_tokens * n_heads <= SPLIT_MAX_PAIRS && longest_context >= SPLIT_MIN_CONTEXT {
        SPLITS_FOR_PARALLELISM
    } else {
        1
    };
    needed.max(for_parallelism)
}

/// Parts for the GPU family (a workgroup each): no part over [`ATTENTION_GPU_PART`] positions (nor
/// the loop budget's limit), and, for steps of few pairs, up to [`SPLITS_FOR_PARALLELISM`] parts
/// of at least [`ATTENTION_GPU_MIN_PART`] positions.
pub fn attention_splits_gpu(n_tokens: usize, n_heads: usize, head_dim: usize, longest_context: usize) -> usize {
    let part = attention_max_positions(head_dim).min(ATTENTION_GPU_PART);
    let needed = longest_context.div_ceil(part).max(1);
    let for_parallelism = if n_tokens * n_heads <= SPLIT_MAX_PAIRS {
        longest_context.div_ceil(ATTENTION_GPU_MIN_PART).min(SPLITS_FOR_PARALLELISM)
    } else {
        1
    };
    needed.max(for_parallelism)
}

/// Partials-buffer floats a model needs at least: one token's parts at the longest context, in
/// either family.
pub fn attention_min_partials(n_heads: usize, head_dim: usize, max_context: usize) -> usize {
    let splits = attention_splits(1, n_heads, head_dim, max_context)
        .max(attention_splits_gpu(1, n_heads, head_dim, max_context))
        .max(attention_prefill_splits(1, n_heads, head_dim, max_context));
    n_heads * splits * attention_part_floats(head_dim)
}

/// Records attention for the step's `tokens` (`p.n_tokens` of them, from token 0). The CPU family
/// splits every context as [`attention_splits`] says for the step's longest. The GPU family takes
/// the ranges of [`attention_ranges`]: prefill runs through the tiled kernel, split as
/// [`attention_prefill_splits`] says, the rest a workgroup per part ([`attention_splits_gpu`]),
/// each range by its own longest context.
pub fn record_attention<'a>(
    rec: &mut StepRecorder<'a>,
    whole: &'a wgpu::BindGroup,
    split: (&'a wgpu::BindGroup, &'a wgpu::BindGroup),
    p: &HeadParams,
    tokens: &[[u32; 4]],
    partials_floats: usize,
) {
    let plan = attention_plan(rec.kernels.options.family, p.n_heads as usize, p.head_dim as usize, tokens);
    record_attention_plan(rec, whole, split, p, &plan, partials_floats);
}

/// One range of a step's attention ([`attention_plan`]): its tokens, whether the tiled prefill
/// kernel takes them, and the parts each context is split into.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttentionRange {
    pub tokens: std::ops::Range<usize>,
    pub tiled: bool,
    pub splits: usize,
}

/// How [`record_attention`] records a step's `tokens`: the same for every layer, so the engine
/// works it out once per step ([`record_attention_plan`] per layer).
pub fn attention_plan(
    family: KernelFamily,
    n_heads: usize,
    head_dim: usize,
    tokens: &[[u32; 4]],
) -> Vec<AttentionRange> {
    let longest = |range: &[[u32; 4]]| range.iter().map(|t| t[1] as usize + 1).max().unwrap_or(0);
    if family == KernelFamily::Cpu {
        let splits = attention_splits(tokens.len(), n_heads, head_dim, longest(tokens));
        return vec![AttentionRange { tokens: 0..tokens.len(), tiled: false, splits }];
    }
    attention_ranges(tokens)
        .into_iter()
        .map(|(range, tiled)| {
            let (count, context) = (range.len(), longest(&tokens[range.clone()]));
            let tiled = tiled && prefill_tiles_allowed();
            let splits = if tiled {
                attention_prefill_splits(count, n_heads, head_dim, context)
            } else {
                attention_splits_gpu(count, n_heads, head_dim, context)
            };
            AttentionRange { tokens: range, tiled, splits }
        })
        .collect()
}

/// Records one layer's attention as `plan` (from [`attention_plan`] for this step) says.
pub fn record_attention_plan<'a>(
    rec: &mut StepRecorder<'a>,
    whole: &'a wgpu::BindGroup,
    split: (&'a wgpu::BindGroup, &'a wgpu::BindGroup),
    p: &HeadParams,
    plan: &[AttentionRange],
    partials_floats: usize,
) {
    for r in plan {
        let p = HeadParams { n_tokens: r.tokens.len() as u32, token_begin: r.tokens.start as u32, ..*p };
        if r.tiled {
            record_attention_prefill(rec, whole, split, &p, r.splits, partials_floats);
        } else {
            record_attention_split(rec, whole, split, &p, r.splits, partials_floats);
        }
    }
}

/// Records attention for tokens `p.token_begin ..` + `p.n_tokens` with each context split `splits`
/// ways: 1 is one invocation per (token, head) (`attention`); more is split-and-merge through the
/// partials buffer (`partials_floats` long), over as many token ranges as it takes to fit. The GPU
/// family runs a workgroup per part (`attention_split_gpu`), which with one part writes the output
/// itself (no merge). The caller keeps each part within [`attention_max_positions`] (and
/// [`ATTENTION_GPU_PART`] for the GPU family).
pub fn record_attention_split<'a>(
    rec: &mut StepRecorder<'a>,
    whole: &'a wgpu::BindGroup,
    (parts, merge): (&'a wgpu::BindGroup, &'a wgpu::BindGroup),
    p: &HeadParams,
    splits: usize,
    partials_floats: usize,
) {
    let (n_tokens, n_heads) = (p.n_tokens as usize, p.n_heads as usize);
    let gpu_family = rec.kernels.options.family == KernelFamily::Gpu;
    if splits <= 1 && !gpu_family {
        let p = HeadParams { splits: 1, direct: 0, ..*p };
        rec.dispatch(Kernel::Attention, whole, &p, [groups(n_tokens * n_heads, 64), 1, 1]);
        return;
    }
    if splits <= 1 {
        // One part per (token, head): the workgroup's softmax is the whole one, written straight
        // to the output through `attention`'s bind group (same bindings), no partials, no merge.
        let p = HeadParams { splits: 1, direct: 1, ..*p };
        let n = n_tokens * n_heads;
        let x = n.min(rec.max_groups as usize);
        rec.dispatch(Kernel::AttentionSplitGpu, whole, &p, [x as u32, groups(n, x), 1]);
        return;
    }
    let max_groups = rec.max_groups as usize;
    let split = (parts, merge);
    if gpu_family {
        record_parts_and_merge(rec, (Kernel::AttentionSplitGpu, 1), split, p, splits, partials_floats, |count| {
            // A workgroup per part, numbered across x and y (over 65,535 of them in long chunks).
            let n = count * n_heads * splits;
            let x = n.min(max_groups);
            [x as u32, groups(n, x), 1]
        });
    } else {
        record_parts_and_merge(rec, (Kernel::AttentionSplit, 1), split, p, splits, partials_floats, |count| {
            [groups(count * n_heads * splits, 64), 1, 1]
        });
    }
}

/// Records `kernel` writing partials for tokens `p.token_begin ..` + `p.n_tokens`, each context in
/// `splits` parts, then the merge, over as many token ranges as it takes for the partials to fit
/// `partials_floats` (whole multiples of `tile` tokens where the buffer holds them);
/// `workgroups(count)` sizes a range's dispatch.
fn record_parts_and_merge<'a>(
    rec: &mut StepRecorder<'a>,
    (kernel, tile): (Kernel, usize),
    (parts, merge): (&'a wgpu::BindGroup, &'a wgpu::BindGroup),
    p: &HeadParams,
    splits: usize,
    partials_floats: usize,
    workgroups: impl Fn(usize) -> [u32; 3],
) {
    let (n_tokens, n_heads, head_dim) = (p.n_tokens as usize, p.n_heads as usize, p.head_dim as usize);
    let per_token = n_heads * splits * attention_part_floats(head_dim);
    let fits = partials_floats / per_token;
    assert!(fits > 0, "partials buffer of {partials_floats} floats cannot hold one token's {per_token}");
    let range = if fits >= tile { fits / tile * tile } else { fits };
    for begin in (0..n_tokens).step_by(range) {
        let count = range.min(n_tokens - begin);
        let p = HeadParams {
            n_tokens: count as u32,
            splits: splits as u32,
            token_begin: p.token_begin + begin as u32,
            direct: 0,
            ..*p
        };
        rec.dispatch(kernel, parts, &p, workgroups(count));
        rec.dispatch(Kernel::AttentionMerge, merge, &p, [groups(count * n_heads * head_dim, 64), 1, 1]);
    }
}

/// Records the tiled prefill attention (`attention_prefill_gpu`) for tokens `p.token_begin ..` +
/// `p.n_tokens`, which must be one sequence at consecutive positions, each context split `splits`
/// ways (within [`attention_prefill_max_positions`]): one part writes the output itself; more go
/// through the partials buffer and the merge, in token ranges of whole tiles that fit it.
pub fn record_attention_prefill<'a>(
    rec: &mut StepRecorder<'a>,
    whole: &'a wgpu::BindGroup,
    split: (&'a wgpu::BindGroup, &'a wgpu::BindGroup),
    p: &HeadParams,
    splits: usize,
    partials_floats: usize,
) {
    let (n_tokens, n_heads, head_dim) = (p.n_tokens as usize, p.n_heads as usize, p.head_dim as usize);
    let per_tile = attention_prefill_tile(head_dim).0;
    let max_groups = rec.max_groups as usize;
    let workgroups = |count: usize, splits: usize| {
        let n = count.div_ceil(per_tile) * n_heads * splits;
        let x = n.min(max_groups);
        [x as u32, groups(n, x), 1]
    };
    if splits <= 1 {
        let p = HeadParams { splits: 1, direct: 1, ..*p };
        let g = workgroups(n_tokens, 1);
        rec.dispatch(Kernel::AttentionPrefillGpu, whole, &p, g);
        return;
    }
    // Whole tiles per range where the buffer holds one; a tile cut short still attends correctly.
    let kernel = (Kernel::AttentionPrefillGpu, per_tile);
    record_parts_and_merge(rec, kernel, split, p, splits, partials_floats, |count| workgroups(count, splits));
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
const GEMV_ROWS: usize = 8;
const GEMV_TOKENS: usize = 4;

/// The most tokens the GPU family's GEMV serves (it re-reads each weight row once per 4 tokens,
/// from cache where the rows' workgroups run together); the 64 x 64 tile takes larger steps.
/// On an H200, 0.6B decode at batch 64 took 17.3 ms a step through the GEMV and 30.0 ms through
/// the tile (BENCHMARKS.md). `TOKENMETER_GEMV_MAX_M` overrides natively (to measure the crossover).
/// Read once: the choice is made for every matmul of every step.
fn gemv_max_m() -> usize {
    static MAX_M: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *MAX_M.get_or_init(|| {
        #[cfg(not(target_arch = "wasm32"))]
        if let Some(m) = std::env::var("TOKENMETER_GEMV_MAX_M").ok().and_then(|v| v.parse().ok()) {
            return m;
        }
        64
    })
}
/// Whether the GPU family tiles prefill attention over queries ([`record_attention`]): unless
/// `TOKENMETER_PREFILL_TILES=0` natively (to measure the difference; the ranges are then recorded
/// a workgroup per (token, head, part)). Read once.
fn prefill_tiles_allowed() -> bool {
    static ALLOWED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ALLOWED.get_or_init(|| {
        #[cfg(not(target_arch = "wasm32"))]
        if std::env::var("TOKENMETER_PREFILL_TILES").is_ok_and(|v| v.trim() == "0") {
            return false;
        }
        true
    })
}

/// Whether the GPU family fuses ([`KernelOptions::fused`]): unless `TOKENMETER_FUSED=0`
/// natively, or [`set_fusion`] turned it off (the page's `?fused=0`).
fn fusion_allowed() -> bool {
    if !FUSION.load(std::sync::atomic::Ordering::Relaxed) {
        return false;
    }
    #[cfg(not(target_arch = "wasm32"))]
    if std::env::var("TOKENMETER_FUSED").is_ok_and(|v| v.trim() == "0") {
        return false;
    }
    true
}

static FUSION: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

/// Allows or forbids the GPU family's fused matmuls for devices opened from now on.
pub fn set_fusion(allowed: bool) {
    FUSION.store(allowed, std::sync::atomic::Ordering::Relaxed);
}

const TILED: usize = 64;
const TILED_K: u32 = 16;
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
    let (kernel, workgroups) = match prologue {
        Prologue::None => rec.kernels.options.matmul(p.m, p.k, p.rows),
        _ => rec.kernels.options.fused(prologue, p.m as usize, p.k as usize, p.rows as usize).unwrap_or_else(|| {
            panic!("no fused {prologue:?} matmul for {} tokens, k = {} (check KernelOptions::fuses)", p.m, p.k)
        }),
    };
    rec.dispatch(kernel, bind_group, p, workgroups);
}

/// Records the per-head q/k RMSNorm, RoPE and KV-cache write for the step's `p.n_tokens` tokens:
/// an invocation per (token, head) in the CPU family, a workgroup per (head, token) in the GPU one.
pub fn record_qk_norm_rope<'a>(rec: &mut StepRecorder<'a>, bind_group: &'a wgpu::BindGroup, p: &HeadParams) {
    let heads = (p.n_heads + 2 * p.n_kv_heads) as usize;
    match rec.kernels.options.family {
        KernelFamily::Cpu => rec.dispatch(Kernel::QkNormRope, bind_group, p, [groups(heads, 64), p.n_tokens, 1]),
        KernelFamily::Gpu => rec.dispatch(Kernel::QkNormRopeGpu, bind_group, p, [heads as u32, p.n_tokens, 1]),
    }
}

pub fn groups(n: usize, size: usize) -> u32 {
    n.div_ceil(size) as u32
}
