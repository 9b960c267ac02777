//! The kernel registry: every kernel declared once (file, the files it is compiled after, entry
//! point, bindings, which options build it) and its WGSL assembled from shaders/ — the weights and
//! x blocks swapped in, the constants prelude prepended.

use super::attention::{ATTENTION_GPU_PART, PREFILL_CPU_QUERIES, PREFILL_KEYS, PREFILL_KV4, PREFILL_SLICE};
use super::matmul::{GEMV_ROWS, GEMV_TOKENS, TILED, TILED_K};
use super::options::{KernelFamily, KernelOptions, MatmulTile};
use crate::gpu::{WeightFormat, WeightStorage};

/// Declares every kernel once: its name, the WGSL file in shaders/ or rendered by build.rs (and the
/// file it is compiled after, whose Params, bindings and helpers it uses), its entry point, its storage bindings 1.. in
/// order (binding 0 is the parameter uniform), and which [`KernelOptions`] build it. The `Kernel`
/// enum, `Kernel::ALL` and the lookups below are generated from this one list, and
/// `tests/it/contracts.rs` checks each line against its WGSL (entry, parameter block, bindings).
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
    QkNormRope = "rope.wgsl" after "rope_angle.wgsl", "qk_norm_rope", [Write, Read, Read, Read, Read, Write, Write], Always;
    /// `QkNormRope` with a workgroup per (head, token) (the GPU family).
    QkNormRopeGpu = "rope.wgsl" after "rope_angle.wgsl", "qk_norm_rope_gpu", [Write, Read, Read, Read, Read, Write, Write],
        GpuFamily;
    Attention = "attention.wgsl", "attention", [Read, Read, Read, Read, Read, Write], Always;
    /// Attention with each token's context split into parts (flash-decoding) ...
    AttentionSplit = "attention.wgsl", "attention_split", [Read, Read, Read, Read, Read, Write], Always;
    /// `AttentionSplit` with a workgroup per part (the GPU family; with one part it writes the output itself).
    AttentionSplitGpu = "attention.wgsl", "attention_split_gpu", [Read, Read, Read, Read, Read, Write], GpuFamily;
    /// `AttentionSplitGpu` with `QkNormRopeGpu`'s work in its prologue, for steps where each
    /// sequence has one token (`rope_in_attention`): binding 7 the q|k norm weights, 8 RoPE's
    /// frequencies; k and v written to the cache by one workgroup of each kv head's.
    AttentionSplitGpuRope = "attention.wgsl" after "rope_angle.wgsl" with "attention_rope.wgsl" as "attention_split_gpu+rope",
        "attention_split_gpu", [Read, Read, Read, Write, Write, Write, Read, Read], GpuFamily;
    /// Prefill attention tiled over queries (the GPU family; runs of one sequence, see [`record_attention`]).
    AttentionPrefillGpu = "attention.wgsl", "attention_prefill_gpu", [Read, Read, Read, Read, Read, Write], GpuFamily;
    /// Prefill attention four queries an invocation, each K/V load serving all four (the CPU
    /// family: on software adapters loads, not FLOPs, set attention's speed).
    AttentionPrefillCpu = "attention.wgsl", "attention_prefill_cpu", [Read, Read, Read, Read, Read, Write], Always;
    /// ... and the pass that combines the parts.
    AttentionMerge = "attention_merge.wgsl", "attention_merge", [Read, Write], Always;
    SwiGlu = "swiglu.wgsl", "swiglu", [Read, Write], Always;
    Argmax = "argmax.wgsl", "argmax", [Read, Write], Always;
    Sample = "sample.wgsl", "sample", [Read, Read, Write], Always;
    /// Synthetic weights written in place (`gpu::fill`): never part of a step.
    FillRandomBf16 = "fill.wgsl", "fill_random_bf16", [Write], Standalone;
    /// The roofline probe (`gpu::roofline`): the pattern its copies and reads are checked against ...
    RooflineFill = "roofline.wgsl", "fill", [Read, Write], Standalone;
    /// ... copy and read bandwidth, each invocation streaming its own block or grid-strided ...
    CopyBlocked = "roofline.wgsl", "copy_blocked", [Read, Write], Standalone;
    CopyStrided = "roofline.wgsl", "copy_strided", [Read, Write], Standalone;
    ReadBlocked = "roofline.wgsl", "read_blocked", [Read, Write], Standalone;
    ReadStrided = "roofline.wgsl", "read_strided", [Read, Write], Standalone;
    /// ... the decode GEMV's own read (8 weight rows an invocation, in lockstep) ...
    ReadRows = "roofline.wgsl", "read_rows", [Read, Write], Standalone;
    /// ... the f32 FMA rate ...
    FmaRate = "roofline.wgsl", "fma_rate", [Read, Write], Standalone;
    /// ... and, where weights live in textures, a texture copy and the GEMV's read of a texture.
    CopyTexture = "roofline_texture.wgsl", "copy_texture", [Texture, Write], Standalone;
    ReadRowsTexture = "roofline_texture.wgsl", "read_rows_texture", [Texture, Write], Standalone;
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
    /// Not in an engine's table: built alone for its own job ([`super::Kernels::standalone`]).
    Standalone,
}

/// How a kernel uses one of its storage bindings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
    /// bf16 weights: a read-only storage buffer or an `rgba32uint` texture ([`WeightStorage`]).
    Weights,
    /// An `rgba32uint` texture, whatever the weights' storage (the roofline's texture read).
    Texture,
}
use Access::{Read, Texture, Weights, Write};

/// Something a kernel binding can be: a buffer, or a weight chunk (buffer or texture).
pub trait Bind {
    fn resource(&self) -> wgpu::BindingResource<'_>;
}

impl Bind for wgpu::Buffer {
    fn resource(&self) -> wgpu::BindingResource<'_> {
        self.as_entire_binding()
    }
}

impl Bind for wgpu::TextureView {
    fn resource(&self) -> wgpu::BindingResource<'_> {
        wgpu::BindingResource::TextureView(self)
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
    /// the same for every format; a form that fetches 8 weights at a time (bf16) gets its paired
    /// load `weights16` from weights_pair.wgsl (int8's and int4's fetch 16 at once). Every kernel's
    /// WGSL starts with [`wgsl_prelude`] (after any `enable`), the constants the host sizes
    /// dispatches and buffers with.
    pub fn source(self, weights: WeightStorage, format: WeightFormat) -> (String, &'static str) {
        self.source_in(weights, format, None)
    }

    /// [`Kernel::source`] with the hand-written files read from `shader_dir` where given (natively,
    /// for kernel work without rebuilding: `--shader-dir DIR`); the files build.rs renders
    /// (matmul_tiles.wgsl, matmul_subgroup.wgsl) always come from the build.
    pub fn source_in(
        self,
        weights: WeightStorage,
        format: WeightFormat,
        shader_dir: Option<&std::path::Path>,
    ) -> (String, &'static str) {
        let Decl { file, bases, x_form, entry, needs, .. } = self.decl();
        let mut text = Self::file_text(file, shader_dir).into_owned();
        let subgroups = matches!(needs, Needs::Subgroups | Needs::SubgroupsTileEight | Needs::SubgroupsGpuFamily)
            && cfg!(target_arch = "wasm32");
        let enable = if subgroups { "enable subgroups;\n\n" } else { "" };
        for base in bases.iter().rev() {
            text = format!("{}\n{text}", Self::file_text(base, shader_dir));
        }
        if let Some(block) = weights_block(weights, format).filter(|_| self.bindings().contains(&Weights)) {
            let begin = text.find(WEIGHTS_BEGIN).expect("the weights block starts");
            let end = text.find(WEIGHTS_END).expect("the weights block ends") + WEIGHTS_END.len();
            text.replace_range(begin..end, &Self::file_text(block, shader_dir));
        }
        if self.bindings().contains(&Weights) && !text.contains(WEIGHTS16) {
            text += &Self::file_text("weights_pair.wgsl", shader_dir);
        }
        if let Some(form) = x_form {
            let begin = text.find(X_BEGIN).expect("the x block starts");
            let end = text.find(X_END).expect("the x block ends") + X_END.len();
            text.replace_range(begin..end, &Self::file_text(form, shader_dir));
        }
        (format!("{enable}{}{text}", wgsl_prelude()), entry)
    }

    /// A WGSL file, compiled in: hand-written in shaders/ (or read from `shader_dir`, natively),
    /// or rendered by build.rs into `OUT_DIR` (matmul_tiles.wgsl, matmul_subgroup.wgsl).
    fn file_text(file: &str, shader_dir: Option<&std::path::Path>) -> std::borrow::Cow<'static, str> {
        #[cfg(not(target_arch = "wasm32"))]
        if let Some(dir) = shader_dir.filter(|_| !matches!(file, "matmul_tiles.wgsl" | "matmul_subgroup.wgsl")) {
            let path = dir.join(file);
            let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            return text.into();
        }
        #[cfg(target_arch = "wasm32")]
        let _ = shader_dir;
        let text = match file {
            "embed.wgsl" => include_str!("../../../shaders/embed.wgsl"),
            "rmsnorm.wgsl" => include_str!("../../../shaders/rmsnorm.wgsl"),
            "matmul.wgsl" => include_str!("../../../shaders/matmul.wgsl"),
            "matmul_subgroup.wgsl" => include_str!(concat!(env!("OUT_DIR"), "/matmul_subgroup.wgsl")),
            "matmul_gpu.wgsl" => include_str!("../../../shaders/matmul_gpu.wgsl"),
            "matmul_gpu_subgroup.wgsl" => include_str!("../../../shaders/matmul_gpu_subgroup.wgsl"),
            "matmul_x_norm.wgsl" => include_str!("../../../shaders/matmul_x_norm.wgsl"),
            "matmul_x_swiglu.wgsl" => include_str!("../../../shaders/matmul_x_swiglu.wgsl"),
            "matmul_tiles.wgsl" => include_str!(concat!(env!("OUT_DIR"), "/matmul_tiles.wgsl")),
            "weights_texture.wgsl" => include_str!("../../../shaders/weights_texture.wgsl"),
            "weights_int8.wgsl" => include_str!("../../../shaders/weights_int8.wgsl"),
            "weights_int8_texture.wgsl" => include_str!("../../../shaders/weights_int8_texture.wgsl"),
            "weights_int4.wgsl" => include_str!("../../../shaders/weights_int4.wgsl"),
            "weights_int4_texture.wgsl" => include_str!("../../../shaders/weights_int4_texture.wgsl"),
            "weights_pair.wgsl" => include_str!("../../../shaders/weights_pair.wgsl"),
            "rope.wgsl" => include_str!("../../../shaders/rope.wgsl"),
            "rope_angle.wgsl" => include_str!("../../../shaders/rope_angle.wgsl"),
            "attention_rope.wgsl" => include_str!("../../../shaders/attention_rope.wgsl"),
            "attention.wgsl" => include_str!("../../../shaders/attention.wgsl"),
            "attention_merge.wgsl" => include_str!("../../../shaders/attention_merge.wgsl"),
            "swiglu.wgsl" => include_str!("../../../shaders/swiglu.wgsl"),
            "argmax.wgsl" => include_str!("../../../shaders/argmax.wgsl"),
            "sample.wgsl" => include_str!("../../../shaders/sample.wgsl"),
            "fill.wgsl" => include_str!("../../../shaders/fill.wgsl"),
            "roofline.wgsl" => include_str!("../../../shaders/roofline.wgsl"),
            "roofline_texture.wgsl" => include_str!("../../../shaders/roofline_texture.wgsl"),
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
    let constants: [(&str, usize, &str); 11] = [
        ("PREVIOUS_ID", crate::gpu::PREVIOUS_ID as usize, "embed: a token that reads the previous step's id"),
        ("MAX_HEAD_DIM4", MAX_HEAD_DIM / 4, "attention: private q/acc arrays"),
        ("GPU_PART", ATTENTION_GPU_PART, "attention_split_gpu: positions a workgroup scores"),
        ("PREFILL_SLICE", PREFILL_SLICE, "attention_prefill_gpu: q / accumulator vec4 per lane"),
        ("PREFILL_KEYS", PREFILL_KEYS, "attention_prefill_gpu: most keys per staged block"),
        ("PREFILL_KV4", PREFILL_KV4, "attention_prefill_gpu: vec4 of its workgroup K/V block"),
        ("CPU_QUERIES", PREFILL_CPU_QUERIES, "attention_prefill_cpu: queries per invocation (4: written out by hand)"),
        ("GEMV_TEAMS", GEMV_ROWS, "matmul_bf16_gemv: weight rows per workgroup"),
        ("GEMV_TOKENS", GEMV_TOKENS, "matmul_bf16_gemv: tokens per workgroup"),
        ("TILE", TILED, "matmul_bf16_tiled: tokens and rows per workgroup"),
        ("TILE_K", TILED_K as usize, "matmul_bf16_tiled: columns of K staged per round"),
    ];
    let mut out = String::from("// Prepended by src/gpu/kernels/registry.rs (wgsl_prelude): shared with the host.\n");
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
/// A weights form's paired load: a form without one (8 weights a fetch) gets weights_pair.wgsl's.
const WEIGHTS16: &str = "fn weights16(";
/// The x block of matmul_gpu.wgsl, which a fused kernel's x form replaces.
const X_BEGIN: &str = "// BEGIN x";
const X_END: &str = "// END x\n";

impl KernelOptions {
    /// These options with every field that does not change what [`KernelOptions::builds`] builds
    /// or [`Kernel::source_in`] compiles set to one value: two options with one key have the same
    /// pipelines ([`super::Kernels::with_options`]).
    pub(super) fn pipelines_key(self) -> KernelOptions {
        KernelOptions {
            fused: false,
            prefill_tiles: false,
            gemv_max_m: 0,
            gemv_m1: false,
            gemv_rows4: false,
            tile_prefetch: false,
            ..self
        }
    }

    /// Whether these options build `kernel` (every kernel but the general matmuls of other tiles
    /// and, without subgroups, the subgroup variants).
    pub(super) fn builds(self, kernel: Kernel) -> bool {
        let eight = self.tile == MatmulTile::Eight;
        match kernel.decl().needs {
            Needs::Always => true,
            Needs::TileFour => !eight,
            Needs::TileEight => eight,
            Needs::Subgroups => self.subgroups,
            Needs::SubgroupsTileEight => self.subgroups && eight,
            Needs::GpuFamily => self.family == KernelFamily::Gpu,
            Needs::SubgroupsGpuFamily => self.subgroups && self.family == KernelFamily::Gpu,
            Needs::Standalone => false,
        }
    }
}
