//! Which kernels run: the user's switches ([`KernelSwitches`], parsed once at the edge — the
//! CLI's flags, the page's link) resolved against what the device offers into the
//! [`KernelOptions`] a kernel table is built with. Nothing below reads the environment.

use crate::gpu::{Gpu, WeightFormat, WeightStorage};
use serde::{Deserialize, Serialize};

/// The token tile of the general matmul: 4 tokens per weight load everywhere it compiles, 8 on
/// native adapters, where it is faster on lavapipe (0.6B decode at batch 16 and prefill, +25-30%).
/// SwiftShader in Chromium does not finish compiling the 8-token kernel (the page stalls in pipeline
/// creation), so the browser never builds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum MatmulTile {
    Four,
    Eight,
}

impl MatmulTile {
    /// Eight natively, four in the browser.
    pub fn for_this_platform() -> MatmulTile {
        if cfg!(target_arch = "wasm32") {
            MatmulTile::Four
        } else {
            MatmulTile::Eight
        }
    }

    /// Tokens per tile.
    pub fn tokens(self) -> u32 {
        match self {
            MatmulTile::Four => 4,
            MatmulTile::Eight => 8,
        }
    }
}

impl std::str::FromStr for MatmulTile {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "4" => Ok(MatmulTile::Four),
            "8" => Ok(MatmulTile::Eight),
            other => Err(format!("unknown matmul tile {:?}: expected 4 or 8", crate::limits::printable(other))),
        }
    }
}

/// Which shape of kernels suits the adapter, named for the adapters it is shaped for. `Software`
/// (software adapters, whose invocation is a SIMD lane of a CPU core: lavapipe, SwiftShader) gives
/// each invocation its own weight rows; `Gpu` has neighbouring invocations read neighbouring
/// weights (coalesced) and stages tiles in workgroup memory. Flags, links and saved results call
/// them `cpu` and `gpu` (`--kernels software` is also understood).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum KernelFamily {
    #[serde(rename = "cpu")]
    Software,
    #[serde(rename = "gpu")]
    Gpu,
}

impl KernelFamily {
    /// `Gpu` for discrete, integrated and virtual GPUs; `Software` for CPU adapters and SwiftShader.
    pub fn for_adapter(device_type: &str, name: &str) -> KernelFamily {
        let software = device_type == "Cpu" || name.to_ascii_lowercase().contains("swiftshader");
        if software {
            KernelFamily::Software
        } else {
            KernelFamily::Gpu
        }
    }

    /// The family every run used before there were two (old saved results).
    pub fn software() -> KernelFamily {
        KernelFamily::Software
    }

    /// The name in flags, links and results: `gpu` or `cpu`.
    pub fn name(self) -> &'static str {
        match self {
            KernelFamily::Software => "cpu",
            KernelFamily::Gpu => "gpu",
        }
    }

    /// Parses "gpu" or "cpu".
    pub fn parse(s: &str) -> Option<KernelFamily> {
        match s.trim().to_ascii_lowercase().as_str() {
            "gpu" => Some(KernelFamily::Gpu),
            "cpu" | "software" => Some(KernelFamily::Software),
            _ => None,
        }
    }
}

impl std::str::FromStr for KernelFamily {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        KernelFamily::parse(s)
            .ok_or_else(|| format!("unknown kernel family {:?}: expected gpu or cpu", crate::limits::printable(s)))
    }
}

/// "on"/"off" (also 1/0, true/false, yes/no): the form of every on-off switch.
pub fn parse_on_off(s: &str) -> Result<bool, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "on" | "1" | "true" | "yes" => Ok(true),
        "off" | "0" | "false" | "no" => Ok(false),
        other => Err(format!("expected on or off, not {:?}", crate::limits::printable(other))),
    }
}

/// Whether the engine times its kernel variants at load (`engine::trial`): `on` takes an earlier
/// load's choice where one has the same key, else times them; `fresh` times them again; `off`
/// runs the static defaults ([`KernelOptions::for_gpu`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TrialUse {
    On,
    Fresh,
    Off,
}

impl TrialUse {
    pub fn name(self) -> &'static str {
        match self {
            TrialUse::On => "on",
            TrialUse::Fresh => "fresh",
            TrialUse::Off => "off",
        }
    }
}

impl std::str::FromStr for TrialUse {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "fresh" => Ok(TrialUse::Fresh),
            other => match parse_on_off(other) {
                Ok(true) => Ok(TrialUse::On),
                Ok(false) => Ok(TrialUse::Off),
                Err(_) => Err(format!("expected on, off or fresh, not {:?}", crate::limits::printable(s))),
            },
        }
    }
}

/// The user's say over the kernels. Each `None` leaves the choice to the adapter
/// ([`KernelOptions::for_gpu`]). The CLI's flags (`--kernels`, `--weight-storage`, `--subgroups`,
/// `--matmul-tile`, `--fused`, `--prefill-tiles`, `--gemv-max-m`, `--gemv-m1`, `--gemv-rows4`, `--tile-prefetch`, `--unchecked-shaders`, `--shader-dir`; with
/// `TOKENMETER_*` variables as fallbacks, read by the binary) and the page's link
/// ([`KernelSwitches::from_query`]) make one; the engine options (`EngineOptions::kernels`) carry it
/// to the engine, so two engines on one device may differ (`compare --a … --b …`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct KernelSwitches {
    /// `--kernels gpu|cpu`.
    pub family: Option<KernelFamily>,
    /// `--weight-storage buffer|texture`.
    pub storage: Option<WeightStorage>,
    /// `--subgroups off` keeps the kernels from subgroup operations where the device has them.
    pub subgroups: Option<bool>,
    /// `--matmul-tile 4` forces the 4-token tile natively.
    pub tile: Option<MatmulTile>,
    /// `--fused off` runs the GPU family's norm and SwiGLU as kernels of their own.
    pub fused: Option<bool>,
    /// `--prefill-tiles off` runs prefill attention an invocation (GPU family: a workgroup) per (token, head, part).
    pub prefill_tiles: Option<bool>,
    /// `--gemv-max-m N`: the most tokens the GPU family's GEMV serves (the tile takes more).
    pub gemv_max_m: Option<u32>,
    /// `--gemv-m1 off`: the GPU family's GEMV takes one-token steps through its 4-token loop.
    pub gemv_m1: Option<bool>,
    /// `--gemv-rows4 on`: the GPU family's GEMV takes one-token steps through its four-row layout.
    pub gemv_rows4: Option<bool>,
    /// `--tile-prefetch on`: the GPU family's tiled matmul loads the next round of K before this
    /// round's products instead of after them.
    pub tile_prefetch: Option<bool>,
    /// `--unchecked-shaders`: no bounds checks injected by wgpu (kernel work only).
    pub unchecked: bool,
    /// `--kernel-trial on|fresh|off`: how the variants the switches leave open are chosen at
    /// load (`None`: on).
    pub trial: Option<TrialUse>,
    /// `--shader-dir DIR`: the hand-written WGSL read from DIR when the pipelines are built
    /// (natively, kernel work without rebuilding). Not recorded.
    #[serde(skip)]
    pub shader_dir: Option<&'static std::path::Path>,
}

impl Default for KernelSwitches {
    fn default() -> Self {
        KernelSwitches::NONE
    }
}

impl KernelSwitches {
    /// No switch set: every choice the adapter's.
    pub const NONE: KernelSwitches = KernelSwitches {
        family: None,
        storage: None,
        subgroups: None,
        tile: None,
        fused: None,
        prefill_tiles: None,
        gemv_max_m: None,
        gemv_m1: None,
        gemv_rows4: None,
        tile_prefetch: None,
        unchecked: false,
        trial: None,
        shader_dir: None,
    };

    /// The page's link: `?kernels=gpu|cpu`, `?weight-storage=buffer|texture`, `?subgroups=off`,
    /// `?matmul-tile=4|8`, `?fused=off`, `?prefill-tiles=off`, `?gemv-max-m=N`, `?gemv-m1=off`,
    /// `?gemv-rows4=on`, `?tile-prefetch=on`,
    /// `?kernel-trial=on|fresh|off` (`query` gives a
    /// key's value). A value that does not parse is an error naming the key.
    pub fn from_query(query: impl Fn(&str) -> Option<String>) -> Result<KernelSwitches, String> {
        fn get<T>(
            query: &dyn Fn(&str) -> Option<String>,
            key: &str,
            parse: impl Fn(&str) -> Result<T, String>,
        ) -> Result<Option<T>, String> {
            query(key).map(|v| parse(&v).map_err(|e| format!("?{key}=: {e}"))).transpose()
        }
        let q: &dyn Fn(&str) -> Option<String> = &query;
        Ok(KernelSwitches {
            family: get(q, "kernels", str::parse)?,
            storage: get(q, "weight-storage", str::parse)?,
            subgroups: get(q, "subgroups", parse_on_off)?,
            tile: get(q, "matmul-tile", str::parse)?,
            fused: get(q, "fused", parse_on_off)?,
            prefill_tiles: get(q, "prefill-tiles", parse_on_off)?,
            gemv_max_m: get(q, "gemv-max-m", |v| v.trim().parse::<u32>().map_err(|e| e.to_string()))?,
            gemv_m1: get(q, "gemv-m1", parse_on_off)?,
            gemv_rows4: get(q, "gemv-rows4", parse_on_off)?,
            tile_prefetch: get(q, "tile-prefetch", parse_on_off)?,
            trial: get(q, "kernel-trial", str::parse)?,
            ..KernelSwitches::NONE
        })
    }

    /// The link's pairs for the switches set ([`KernelSwitches::from_query`] reads them back).
    pub fn query_pairs(&self) -> Vec<(&'static str, String)> {
        let on_off = |b: bool| if b { "on" } else { "off" }.to_string();
        let mut pairs = Vec::new();
        if let Some(f) = self.family {
            pairs.push(("kernels", f.name().to_string()));
        }
        if let Some(s) = self.storage {
            pairs.push(("weight-storage", s.name().to_string()));
        }
        if let Some(b) = self.subgroups {
            pairs.push(("subgroups", on_off(b)));
        }
        if let Some(t) = self.tile {
            pairs.push(("matmul-tile", t.tokens().to_string()));
        }
        if let Some(b) = self.fused {
            pairs.push(("fused", on_off(b)));
        }
        if let Some(b) = self.prefill_tiles {
            pairs.push(("prefill-tiles", on_off(b)));
        }
        if let Some(m) = self.gemv_max_m {
            pairs.push(("gemv-max-m", m.to_string()));
        }
        if let Some(b) = self.gemv_m1 {
            pairs.push(("gemv-m1", on_off(b)));
        }
        if let Some(b) = self.gemv_rows4 {
            pairs.push(("gemv-rows4", on_off(b)));
        }
        if let Some(b) = self.tile_prefetch {
            pairs.push(("tile-prefetch", on_off(b)));
        }
        if let Some(t) = self.trial {
            pairs.push(("kernel-trial", t.name().to_string()));
        }
        pairs
    }
}

/// The most tokens the GPU family's GEMV serves by default (it re-reads each weight row once per
/// 4 tokens, from cache where the rows' workgroups run together); the 64 x 64 tile takes larger
/// steps. The crossover was measured on an H200 (BENCHMARKS.md, "GEMV or tile").
pub const GEMV_MAX_M: u32 = 64;

/// Which kernels a [`super::Kernels`] table builds and dispatches: the switches resolved against
/// the device. What a run records as its kernel path (`bench::record::run_config::KernelPath`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelOptions {
    pub family: KernelFamily,
    pub tile: MatmulTile,
    /// Use subgroup operations: the CPU family shares x across lanes (matmul_subgroup.wgsl; the
    /// browser's 4-token tile has no such variant, only decode does), the GPU family reduces its
    /// GEMV teams by shuffles (matmul_gpu_subgroup.wgsl). Only where the device has them
    /// ([`Gpu::subgroups`]).
    pub subgroups: bool,
    /// Where the matmul and embedding kernels find their weights (as the `Matrix`es were made).
    pub weights: WeightStorage,
    /// How those weights are stored (the model's choice at load; bf16 unless quantised).
    pub format: WeightFormat,
    /// GPU family: RMSNorm and SwiGLU inside the matmuls that follow them ([`super::Prologue`]).
    pub fused: bool,
    /// Prefill runs through the family's attention kernel tiled over queries.
    pub prefill_tiles: bool,
    /// GPU family: the most tokens a step's matmuls take through the GEMV.
    pub gemv_max_m: u32,
    /// GPU family: a step of one token takes the GEMV's one-token loop (matmul_gpu.wgsl
    /// `gemv_m1`: that token's products only, two weight loads in flight a lane) instead of the
    /// 4-token loop over copies of it. Both compute the same sums in another order.
    pub gemv_m1: bool,
    /// GPU family: a step of one token takes the GEMV's four-row layout (matmul_gpu.wgsl
    /// `gemv_four_rows`: half a workgroup, 128 lanes, strides along K over four rows at once, so
    /// one load of x feeds four rows and a lane has four weight loads in flight), whatever
    /// `gemv_m1` says. The same products, summed over 128 lanes instead of 32, and the RMSNorm
    /// prologue's weight applied to x instead of W. Off unless switched on or the kernel trial
    /// measures it faster: no GPU has timed it yet.
    pub gemv_rows4: bool,
    /// GPU family: the tiled matmul (steps of more than `gemv_max_m` tokens) issues the next
    /// round's loads of x and W before this round's products, so their latency may hide behind
    /// them (12 registers more an invocation); off, after them. The same sums in the same order.
    /// Off unless switched on or the kernel trial measures it faster: on lavapipe it is slower
    /// (registers kept across a barrier), and no GPU has timed it yet.
    pub tile_prefetch: bool,
    /// Shader modules without wgpu's injected bounds checks.
    pub unchecked: bool,
    /// Where the hand-written WGSL is read from instead of the compiled-in copies.
    pub shader_dir: Option<&'static std::path::Path>,
}

/// The plain path: the CPU family, this platform's tile, no subgroups, bf16 weights in buffers
/// (tests build each path they check from it).
impl Default for KernelOptions {
    fn default() -> Self {
        KernelOptions {
            family: KernelFamily::Software,
            tile: MatmulTile::for_this_platform(),
            subgroups: false,
            weights: WeightStorage::Buffer,
            format: WeightFormat::Bf16,
            fused: false,
            prefill_tiles: true,
            gemv_max_m: GEMV_MAX_M,
            gemv_m1: true,
            gemv_rows4: false,
            tile_prefetch: false,
            unchecked: false,
            shader_dir: None,
        }
    }
}

impl KernelOptions {
    /// `switches` on `gpu`: the adapter's family, this platform's tile, subgroups wherever the
    /// device has them, the device's weight storage, fusion, tiled prefill and the one-token GEMV
    /// in the GPU family (its four-row GEMV and the tiled matmul's prefetch off),
    /// each unless a switch says otherwise; bf16 weights (the loader sets the format).
    pub fn for_gpu(gpu: &Gpu, switches: &KernelSwitches) -> KernelOptions {
        let family = switches.family.unwrap_or(gpu.kernel_family);
        let gpu_family = family == KernelFamily::Gpu;
        KernelOptions {
            family,
            tile: switches.tile.unwrap_or_else(MatmulTile::for_this_platform),
            subgroups: gpu.subgroups && switches.subgroups != Some(false),
            weights: switches.storage.unwrap_or(gpu.weight_storage),
            format: WeightFormat::Bf16,
            fused: gpu_family && switches.fused != Some(false),
            prefill_tiles: switches.prefill_tiles != Some(false),
            gemv_max_m: switches.gemv_max_m.unwrap_or(GEMV_MAX_M),
            gemv_m1: switches.gemv_m1 != Some(false),
            gemv_rows4: switches.gemv_rows4 == Some(true),
            tile_prefetch: switches.tile_prefetch == Some(true),
            unchecked: switches.unchecked,
            shader_dir: switches.shader_dir,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |key| pairs.iter().find(|(k, _)| *k == key).map(|(_, v)| v.to_string())
    }

    #[test]
    fn a_link_round_trips_and_old_links_still_parse() {
        let switches = KernelSwitches {
            family: Some(KernelFamily::Gpu),
            storage: Some(WeightStorage::Buffer),
            subgroups: Some(false),
            tile: Some(MatmulTile::Four),
            fused: Some(false),
            prefill_tiles: Some(true),
            gemv_max_m: Some(16),
            gemv_m1: Some(false),
            gemv_rows4: Some(true),
            tile_prefetch: Some(false),
            trial: Some(TrialUse::Fresh),
            ..KernelSwitches::NONE
        };
        let pairs = switches.query_pairs();
        let borrowed: Vec<(&str, &str)> = pairs.iter().map(|(k, v)| (*k, v.as_str())).collect();
        assert_eq!(KernelSwitches::from_query(query(&borrowed)).unwrap(), switches);
        // Links made before the switches were values: `?kernels=gpu&fused=0&overlap=0`.
        let old = KernelSwitches::from_query(query(&[("kernels", "gpu"), ("fused", "0")])).unwrap();
        assert_eq!((old.family, old.fused, old.prefill_tiles), (Some(KernelFamily::Gpu), Some(false), None));
        assert_eq!(KernelSwitches::from_query(query(&[])).unwrap(), KernelSwitches::NONE);
    }

    #[test]
    fn a_bad_value_names_its_key() {
        let err = KernelSwitches::from_query(query(&[("fused", "maybe")])).unwrap_err();
        assert!(err.starts_with("?fused=: expected on or off"), "{err}");
        let err = KernelSwitches::from_query(query(&[("kernels", "tpu")])).unwrap_err();
        assert!(err.contains("?kernels=") && err.contains("expected gpu or cpu"), "{err}");
    }

    #[test]
    fn families_keep_their_recorded_names() {
        // Saved results say "cpu" and "gpu"; the software family is also understood by that name.
        assert_eq!(serde_json::to_string(&KernelFamily::Software).unwrap(), "\"cpu\"");
        assert_eq!(serde_json::from_str::<KernelFamily>("\"gpu\"").unwrap(), KernelFamily::Gpu);
        assert_eq!("software".parse::<KernelFamily>(), Ok(KernelFamily::Software));
    }
}
