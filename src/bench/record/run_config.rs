//! What ran: the run record every result carries (`run_config`), and what an engine's executor
//! adds to it.

use serde::{Deserialize, Serialize};

use crate::bench::base::lang::Lang;
use crate::bench::record::phases::Phases;
use crate::bench::traffic::workload::WorkloadSpec;
use crate::engine::forward::EngineLimits;
use crate::engine::{Executor, ForwardPass};
use crate::error::Error;
use crate::gpu::context::AdapterSummary;
use crate::gpu::kernels::KernelOptions;

/// What ran, in every results JSON (`run_config`; results saved before it was typed call it
/// `config` and still load). The target fills in what it knows; the session adds the workload,
/// the SLOs and the tool's version. Fields a target cannot know are absent.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct RunConfig {
    /// "local" (the CLI's engine), "browser" (the page's engine), or a server's description
    /// (`{"kind": "openai-compatible", "base_url", "model", "api", "client", …}`).
    pub target: serde_json::Value,
    /// The model: a folder, a synthetic shape, the page's choice (engine targets).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub adapter: Option<AdapterSummary>,
    /// The kernel path that ran (engine targets).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernels: Option<KernelPath>,
    /// The engine's limits in force: batch, tokens per step, KV blocks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub engine: Option<EngineLimits>,
    /// The engine's scheduling policy (engine targets; absent in results saved before it was
    /// recorded, which ran the default: fcfs, chunked prefill, chunks up to the step's budget).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduler: Option<crate::engine::Policy>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workload: Option<WorkloadSpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slo: Option<String>,
    /// "dataset text" (a dataset's rows), "text" (built-in texts through the tokenizer) or "token
    /// ids" (seeded random ids): [`crate::bench::traffic::prompts::PromptSource::kind`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompts: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ignore_eos: Option<bool>,
    /// tokenmeter's version (Cargo.toml).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_version: Option<String>,
    /// The page's timer resolution (coarser without cross-origin isolation).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timer_resolution_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cross_origin_isolated: Option<bool>,
    /// GPUs that served the run, when known: a server's from `--gpus`; absent for the engine,
    /// which runs on one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpus: Option<usize>,
    /// How a simulated fleet's requests picked their replica (`tokenmeter plan --replicas N
    /// --router …`; the replicas are `gpus`); absent for one engine or a server.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub router: Option<String>,
    /// The warm-up and cool-down left out of the summary ([`crate::bench::record::phases`]); absent
    /// when none was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phases: Option<Phases>,
    /// Set when the run was simulated by the capacity planner (`tokenmeter plan`), not measured:
    /// the cost model that timed its steps. `adapter` and `kernels` are then the measured run's
    /// that the model was fitted on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub simulated: Option<crate::engine::CostModel>,
    /// The request as the user made it, to run it again (`tokenmeter bench --rerun`); absent in
    /// results saved before it was recorded, and for the page's runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request: Option<SavedRequest>,
    /// The rate was not given but sized from the baseline (the page's first run): the rate one
    /// request at a time sustains. Absent for a rate given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sized_rate: Option<SizedRate>,
    /// The engine's check of itself on the adapter before it measured (`engine::verify`); absent
    /// for servers, for runs told not to (`--no-verify`) and in results saved before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verification: Option<crate::engine::verify::Verification>,
    /// How the engine chose among its correct kernels on this adapter (`engine::trial`): what it
    /// timed and chose, or that it took an earlier load's choice; absent for servers, for runs
    /// told not to (`--kernel-trial off`) and in results saved before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_trial: Option<crate::engine::trial::Trial>,
    /// What the run's validity verdict (a floor above, `verdict`) holds it to beside its SLOs;
    /// absent in results saved before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub criteria: Option<Criteria>,
    /// The model load before the run: its phases from its start to the first token, and where its
    /// bytes came from (`bench::record::ready`); absent for a server and in older results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_to_ready: Option<crate::bench::record::ready::TimeToReady>,
}

/// LoadGen's minimum duration of a run (its Server scenario), `--min-duration-s mlperf`.
pub const MLPERF_MIN_DURATION_S: f64 = 600.0;

/// What a run is held to for its validity verdict, beside its SLOs and its own records.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Criteria {
    /// The share of requests that must meet every SLO (`--attainment`): the percentile an SLO
    /// claims (0.99: "99% of requests meet it").
    pub attainment: f64,
    /// `--min-duration-s`: the measured phase's scheduled span (first to last planned arrival)
    /// must reach it; `mlperf` is LoadGen's 600 s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_duration_s: Option<f64>,
    /// A `--rate max` trial, which a run without a steady state cannot decide.
    #[serde(default)]
    pub steady_required: bool,
}

impl Default for Criteria {
    fn default() -> Criteria {
        Criteria { attainment: 0.99, min_duration_s: None, steady_required: false }
    }
}

/// A run request as it was made: the command and its arguments as given (never an API key:
/// the CLI takes the name of the variable that holds it), without where the results went.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedRequest {
    pub command: String,
    pub args: Vec<String>,
    /// The dataset file's SHA-256 (hex) when the run read one: a rerun needs the same file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataset_sha256: Option<String>,
}

/// A rate sized from the baseline: `rate` = 1 / `alone_s`, the seconds one request of the
/// workload's longest takes alone (at this rate one request is in flight on average; batching
/// keeps the rest of the engine's capacity in reserve).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct SizedRate {
    pub rate: f64,
    pub alone_s: f64,
}

impl SizedRate {
    /// From a baseline's seconds alone.
    pub fn of(alone_s: f64) -> SizedRate {
        SizedRate { rate: 1.0 / alone_s, alone_s }
    }

    /// The rate as a field holds it: three significant digits ("0.284").
    pub fn text(&self) -> String {
        let digits = (2 - self.rate.abs().log10().floor() as i32).clamp(0, 6) as usize;
        format!("{:.*}", digits, self.rate)
    }
}

impl SavedRequest {
    /// The request with `flag` set to `value` (replacing the flag's value if it was given).
    pub fn with(mut self, flag: &str, value: &str) -> SavedRequest {
        match self.args.iter().position(|a| a == flag) {
            Some(i) if i + 1 < self.args.len() => self.args[i + 1] = value.to_string(),
            _ => self.args.extend([flag.to_string(), value.to_string()]),
        }
        self
    }
}

#[cfg(test)]
mod sized_tests {
    use super::{SavedRequest, SizedRate};

    #[test]
    fn a_sized_rate_reads_as_three_digits_and_replaces_a_saved_rate() {
        let texts: Vec<String> = [0.28437, 2.5, 31.25, 412.9].iter().map(|&r| SizedRate::of(1.0 / r).text()).collect();
        assert_eq!(texts, ["0.284", "2.50", "31.2", "413"]);
        let saved =
            SavedRequest { command: "bench".into(), args: vec!["--seed".into(), "3".into()], dataset_sha256: None };
        let added = saved.with("--rate", "0.284");
        assert_eq!(added.args, ["--seed", "3", "--rate", "0.284"]);
        assert_eq!(added.with("--rate", "2.50").args, ["--seed", "3", "--rate", "2.50"]);
    }
}

impl RunConfig {
    /// The run measured a server (its `target` describes one) rather than an engine in this
    /// process or the page: the client sees its requests only from outside.
    pub fn is_server(&self) -> bool {
        self.target.is_object()
    }
}

/// The kernels an engine ran — the switches in force after the device had its say, not only
/// what was asked ([`KernelOptions`]): family (`gpu`/`cpu`), token tile, subgroups used, weight
/// storage, weight format, whether the GPU family's norm and SwiGLU ran inside the matmuls
/// (`fused`), prefill attention tiled over queries (`prefill_tiles`), the GEMV's largest step
/// (`gemv_max_m`), its one-token loop (`gemv_m1`) and four-row layout (`gemv_rows4`), and the tiled matmul's prefetch
/// (`tile_prefetch`). Fields absent from results saved before
/// they existed read as `false` / absent.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct KernelPath {
    pub family: String,
    pub tile: u32,
    pub subgroups: bool,
    pub weights: String,
    pub weight_format: String,
    #[serde(default)]
    pub fused: bool,
    #[serde(default)]
    pub prefill_tiles: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gemv_max_m: Option<u32>,
    /// The GPU family's one-token GEMV loop ([`KernelOptions::gemv_m1`]); absent in the CPU family.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gemv_m1: Option<bool>,
    /// The GPU family's four-row GEMV for one token ([`KernelOptions::gemv_rows4`]); absent in
    /// the CPU family.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gemv_rows4: Option<bool>,
    /// The GPU family's tiled matmul loading a round ahead ([`KernelOptions::tile_prefetch`]);
    /// absent in the CPU family.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tile_prefetch: Option<bool>,
}

impl KernelPath {
    /// One line: "gpu kernels · tile 8 · subgroups · fused · prefill tiles · GEMV ≤ 64 · one-token
    /// GEMV · bf16 weights in buffers" (the GPU family's switches only where they apply).
    pub fn describe(&self) -> String {
        self.describe_in(Lang::En)
    }

    /// [`KernelPath::describe`] in `lang` (the page's "Ran on" line).
    pub fn describe_in(&self, lang: Lang) -> String {
        let zh = lang == Lang::Zh;
        let pick = |en: &str, zh_text: &str| if zh { zh_text.to_string() } else { en.to_string() };
        let mut parts = vec![match zh {
            false => format!("{} kernels · tile {}", self.family, self.tile),
            true => format!("{} 内核 · 分块 {}", self.family, self.tile),
        }];
        if self.subgroups {
            parts.push(pick("subgroups", "子组"));
        }
        if self.family == "gpu" {
            parts.push(if self.fused { pick("fused", "融合") } else { pick("unfused", "未融合") });
        }
        parts.push(if self.prefill_tiles {
            pick("prefill tiles", "预填充分块")
        } else {
            pick("prefill untiled", "预填充不分块")
        });
        if let Some(m) = self.gemv_max_m {
            parts.push(format!("GEMV ≤ {m}"));
        }
        // How a one-token step ran: the four-row layout takes it whatever the one-token loop says.
        match (self.gemv_rows4, self.gemv_m1) {
            (Some(true), _) => parts.push(pick("four-row GEMV", "四行 GEMV")),
            (_, Some(true)) => parts.push(pick("one-token GEMV", "单词元 GEMV")),
            (_, Some(false)) => parts.push(pick("no one-token GEMV", "无单词元 GEMV")),
            (_, None) => {}
        }
        // Named where on (off is the default).
        if self.tile_prefetch == Some(true) {
            parts.push(pick("tile prefetch", "分块预取"));
        }
        parts.push(match (zh, self.weights.as_str()) {
            (false, _) => format!("{} weights in {}s", self.weight_format, self.weights),
            (true, "texture") => format!("{} 权重存于纹理", self.weight_format),
            (true, _) => format!("{} 权重存于缓冲区", self.weight_format),
        });
        parts.join(" · ")
    }

    /// What decided the recorded run's matmul kernels ([`crate::gpu::kernels::MatmulRule`]);
    /// `None` for a family or tile this version does not know.
    pub fn matmul_rule(&self) -> Option<crate::gpu::kernels::MatmulRule> {
        use crate::gpu::kernels::{KernelFamily, MatmulRule, GEMV_MAX_M};
        Some(MatmulRule {
            family: self.family.parse::<KernelFamily>().ok()?,
            tile: self.tile.to_string().parse().ok()?,
            subgroups: self.subgroups,
            gemv_max_m: self.gemv_max_m.unwrap_or(GEMV_MAX_M),
        })
    }

    pub fn of(options: &KernelOptions) -> KernelPath {
        KernelPath {
            family: options.family.name().to_string(),
            tile: options.tile.tokens(),
            subgroups: options.subgroups,
            weights: options.weights.name().to_string(),
            weight_format: options.format.name().to_string(),
            fused: options.fused,
            prefill_tiles: options.prefill_tiles,
            gemv_max_m: (options.family == crate::gpu::kernels::KernelFamily::Gpu).then_some(options.gemv_max_m),
            gemv_m1: (options.family == crate::gpu::kernels::KernelFamily::Gpu).then_some(options.gemv_m1),
            gemv_rows4: (options.family == crate::gpu::kernels::KernelFamily::Gpu).then_some(options.gemv_rows4),
            tile_prefetch: (options.family == crate::gpu::kernels::KernelFamily::Gpu).then_some(options.tile_prefetch),
        }
    }
}

/// What the run record says about an engine's executor beyond its limits: the GPU's adapter and
/// kernel path, or the capacity planner's cost model and the hardware it models.
pub trait RecordedExecutor: Executor {
    fn record(&self, config: RunConfig) -> RunConfig;

    /// The executor's fault, which ends a session (a run target's `fault`).
    fn fault(&self) -> Option<Error> {
        None
    }
}

impl RecordedExecutor for ForwardPass {
    fn record(&self, config: RunConfig) -> RunConfig {
        RunConfig {
            adapter: Some(self.gpu.adapter.clone()),
            kernels: Some(KernelPath::of(&self.kernel_options())),
            verification: self.verified.clone(),
            kernel_trial: self.trial.clone(),
            ..config
        }
    }

    fn fault(&self) -> Option<Error> {
        self.gpu.fault()
    }
}

#[cfg(test)]
impl KernelPath {
    /// The GPU family's path as a discrete GPU runs it by default (the tests' starting point).
    pub(crate) fn gpu_defaults() -> KernelPath {
        KernelPath {
            family: "gpu".into(),
            tile: 8,
            subgroups: false,
            weights: "buffer".into(),
            weight_format: "bf16".into(),
            fused: true,
            prefill_tiles: true,
            gemv_max_m: Some(64),
            gemv_m1: Some(true),
            gemv_rows4: Some(false),
            tile_prefetch: Some(false),
        }
    }
}

#[cfg(test)]
mod kernel_path_tests {
    use super::KernelPath;
    use crate::bench::base::lang::Lang;

    /// A one-token step is named by the kernel that ran it: the four-row layout, where on, and
    /// not the one-token loop it replaced.
    #[test]
    fn a_one_token_step_is_named_by_the_gemv_that_ran_it() {
        let path = KernelPath::gpu_defaults();
        assert_eq!(
            path.describe(),
            "gpu kernels · tile 8 · fused · prefill tiles · GEMV ≤ 64 · one-token GEMV · bf16 weights in buffers"
        );
        let rows4 = KernelPath { gemv_rows4: Some(true), ..path };
        let line = rows4.describe();
        assert!(line.contains("· four-row GEMV ·") && !line.contains("one-token"), "{line}");
        assert!(rows4.describe_in(Lang::Zh).contains("四行 GEMV"));
    }
}
