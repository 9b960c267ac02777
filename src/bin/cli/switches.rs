//! The kernel and engine switches as flags, the one place the binary turns them into values (with
//! the `TOKENMETER_*` variables as fallbacks, read here by clap and nowhere else).

use clap::Args;
use tokenmeter::gpu::kernels::{parse_on_off, KernelFamily, KernelSwitches, MatmulTile, TrialUse};
use tokenmeter::gpu::WeightStorage;

#[derive(Args, Clone, Debug, Default)]
pub struct SwitchArgs {
    /// Kernel family: gpu (coalesced loads, workgroup tiles: for GPUs) or cpu (an invocation per
    /// weight row: shaped for software adapters). Default: the adapter's.
    #[arg(long, env = "TOKENMETER_KERNELS", value_name = "gpu|cpu")]
    kernels: Option<KernelFamily>,
    /// Where matmul weights live: buffer or texture. Default: textures on CPU adapters, else buffers.
    #[arg(long, env = "TOKENMETER_WEIGHTS", value_name = "buffer|texture")]
    weight_storage: Option<WeightStorage>,
    /// Subgroup operations in the kernels where the device has them (default on).
    #[arg(long, env = "TOKENMETER_SUBGROUPS", value_name = "on|off", value_parser = parse_on_off)]
    subgroups: Option<bool>,
    /// Tokens per register tile of the CPU family's general matmul: 4 or 8 (default 8 natively).
    #[arg(long, env = "TOKENMETER_MATMUL_TILE", value_name = "4|8")]
    matmul_tile: Option<MatmulTile>,
    /// GPU family: RMSNorm and SwiGLU inside the matmuls that follow them (default on).
    #[arg(long, env = "TOKENMETER_FUSED", value_name = "on|off", value_parser = parse_on_off)]
    fused: Option<bool>,
    /// Prefill attention tiled over queries (default on).
    #[arg(long, env = "TOKENMETER_PREFILL_TILES", value_name = "on|off", value_parser = parse_on_off)]
    prefill_tiles: Option<bool>,
    /// GPU family: the most tokens a step's matmuls take through the GEMV; larger steps take the
    /// 64 x 64 tile (default 64).
    #[arg(long, env = "TOKENMETER_GEMV_MAX_M", value_name = "N",
          value_parser = |s: &str| tokenmeter::limits::parse_count(s, 1, tokenmeter::limits::MAX_BATCHED_TOKENS).map(|n| n as u32))]
    gemv_max_m: Option<u32>,
    /// GPU family: a step of one token (decode at batch 1) takes the GEMV's one-token loop
    /// (default on, unless the kernel trial measures the 4-token loop faster).
    #[arg(long, env = "TOKENMETER_GEMV_M1", value_name = "on|off", value_parser = parse_on_off)]
    gemv_m1: Option<bool>,
    /// GPU family: a step of one token takes the GEMV's four-row layout (128 lanes over four rows,
    /// x loaded once for the four; default off, unless the kernel trial measures it faster).
    #[arg(long, env = "TOKENMETER_GEMV_ROWS4", value_name = "on|off", value_parser = parse_on_off)]
    gemv_rows4: Option<bool>,
    /// GPU family: the tiled matmul (steps of more tokens than the GEMV takes) issues the next
    /// round's loads of K before this round's products (default off, unless the kernel trial
    /// measures it faster).
    #[arg(long, env = "TOKENMETER_TILE_PREFETCH", value_name = "on|off", value_parser = parse_on_off)]
    tile_prefetch: Option<bool>,
    /// Shader modules without wgpu's injected bounds checks (kernel work only).
    #[arg(long, env = "TOKENMETER_UNCHECKED")]
    unchecked_shaders: bool,
    /// How the kernel variants these switches leave open are chosen at load: on (time them on this
    /// adapter, or take an earlier load's choice for the same adapter, driver, model shape and
    /// jobs, kept under the user's cache directory), fresh (time them again), off (the static
    /// defaults). Default on.
    #[arg(long, env = "TOKENMETER_KERNEL_TRIAL", value_name = "on|fresh|off")]
    kernel_trial: Option<TrialUse>,
    /// Read the hand-written WGSL of shaders/ from DIR instead of the compiled-in copies (kernel
    /// work without rebuilding; the kernels build.rs renders stay as built).
    #[arg(long, env = "TOKENMETER_SHADER_DIR", value_name = "DIR")]
    shader_dir: Option<std::path::PathBuf>,
    /// CPU/GPU overlap in decode: each step submitted before the previous one's ids are read
    /// (default on; off in force with --prefix-cache or --speculate).
    #[arg(long, env = "TOKENMETER_OVERLAP", value_name = "on|off", value_parser = parse_on_off)]
    overlap: Option<bool>,
}

impl SwitchArgs {
    pub fn kernels(&self) -> KernelSwitches {
        KernelSwitches {
            family: self.kernels,
            storage: self.weight_storage,
            subgroups: self.subgroups,
            tile: self.matmul_tile,
            fused: self.fused,
            prefill_tiles: self.prefill_tiles,
            gemv_max_m: self.gemv_max_m,
            gemv_m1: self.gemv_m1,
            gemv_rows4: self.gemv_rows4,
            tile_prefetch: self.tile_prefetch,
            unchecked: self.unchecked_shaders,
            trial: self.kernel_trial,
            // Read when pipelines are built, for the process's life: leaked once, here.
            shader_dir: self.shader_dir.clone().map(|d| &*Box::leak(d.into_boxed_path())),
        }
    }

    /// CPU/GPU overlap unless `--overlap off`.
    pub fn overlap(&self) -> bool {
        self.overlap != Some(false)
    }
}
