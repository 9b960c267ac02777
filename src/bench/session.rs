//! One benchmark session, whatever the target: a warm-up and the baseline (the median of requests
//! alone), then for each rate the planned workload, its summary, its diagnosis against the
//! baseline and a [`BenchResult`] that records what ran ([`RunConfig`]). The CLI and the page only
//! parse their inputs, pick a [`Target`] — the engine in this process ([`EngineTarget`]) or a server
//! (`remote::native::RemoteTarget`, `remote::browser::RemoteTarget`) — and present the results.

use std::cell::Cell;
use std::rc::Rc;

use serde::{Deserialize, Serialize};

use super::delivered::DeliveredLoad;
use super::driver::Progress;
use super::energy::{Energy, GpuReadings};
pub use super::launch::{run_on_engine, EngineTarget};
use super::phases::{measured, Phases};
use super::record::{RequestRecord, StepSample};
use super::saturation::Saturation;
use super::server_metrics::ServerMetrics;
use super::steady::SteadyState;
use super::workload::{plan, PlannedRequest, WorkloadSpec};
use super::{diagnose_in, summarize, Baseline, BenchResult, Cost, Lang, Slo};
use crate::engine::forward::EngineLimits;
use crate::engine::{Executor, ForwardPass};
use crate::error::{Error, Result};
use crate::gpu::context::AdapterSummary;
use crate::gpu::kernels::KernelOptions;

/// What a session tells its caller as it goes. `Progress` comes after every engine step (or
/// every finished request, from a server).
pub enum SessionEvent<'a> {
    /// The warm-up before the baseline ended: `requests` shaped like the workload's, not
    /// measured ([`WARM_UP_REQUESTS`]).
    WarmedUp {
        requests: usize,
        seconds: f64,
    },
    Baseline(&'a Baseline),
    RateStarted {
        rate: f64,
        requests: usize,
    },
    Progress(&'a Progress<'a>),
    RateDone {
        rate: f64,
        result: &'a BenchResult,
    },
}

/// The caller's listener: shared, so that a target may hand it to tasks it spawns.
pub type Listener = Rc<dyn Fn(SessionEvent)>;

/// Something the benchmark can load with requests.
#[allow(async_fn_in_trait)] // used generically (no `dyn`), on one thread in the browser
pub trait Target {
    /// This target's part of the run record: what ran, where, with which settings.
    fn run_config(&self) -> RunConfig;

    /// Whether the target reports its own steps (the engine does; a server does not), which the
    /// GPU-busy fraction needs.
    fn reports_steps(&self) -> bool;

    /// Sends `plan` (requests at their arrival times, or closed-loop as `spec` says) and records
    /// what happens. `ignore_eos`: generate exactly each request's output length. Requests not
    /// sent because `cancel` was set have no finite arrival time and are dropped by the session.
    async fn run(
        &mut self,
        plan: &[PlannedRequest],
        spec: &WorkloadSpec,
        ignore_eos: bool,
        listener: &Listener,
        cancel: &Rc<Cell<bool>>,
    ) -> Result<(Vec<RequestRecord>, Vec<StepSample>)>;

    /// An error that ends the session after the current rate's result is kept (the engine's GPU
    /// device lost or faulted); `None` for targets that end runs by returning errors.
    fn fault(&self) -> Option<Error> {
        None
    }

    /// Whether the last `run` was ended early because the target could not sustain its rate
    /// (only when `spec.saturation_stop`); taken once.
    fn take_saturation(&mut self) -> Option<Saturation> {
        None
    }

    /// The server's `/metrics` scraped during the last `run`, if this target scrapes them;
    /// taken once.
    fn take_server_metrics(&mut self) -> Option<ServerMetrics> {
        None
    }

    /// The GPUs' power and energy read during the last `run`, if this target reads them; taken
    /// once.
    fn take_gpu_metrics(&mut self) -> Option<GpuReadings> {
        None
    }
}

/// A borrowed target is a target (an experiment runs a slice of borrowed ones).
impl<T: Target> Target for &mut T {
    fn run_config(&self) -> RunConfig {
        (**self).run_config()
    }

    fn reports_steps(&self) -> bool {
        (**self).reports_steps()
    }

    async fn run(
        &mut self,
        plan: &[PlannedRequest],
        spec: &WorkloadSpec,
        ignore_eos: bool,
        listener: &Listener,
        cancel: &Rc<Cell<bool>>,
    ) -> Result<(Vec<RequestRecord>, Vec<StepSample>)> {
        (**self).run(plan, spec, ignore_eos, listener, cancel).await
    }

    fn fault(&self) -> Option<Error> {
        (**self).fault()
    }

    fn take_saturation(&mut self) -> Option<Saturation> {
        (**self).take_saturation()
    }

    fn take_server_metrics(&mut self) -> Option<ServerMetrics> {
        (**self).take_server_metrics()
    }

    fn take_gpu_metrics(&mut self) -> Option<GpuReadings> {
        (**self).take_gpu_metrics()
    }
}

/// What a session runs: the workload (its rate replaced by each of `rates`), the SLOs, the report
/// language, whether to measure the baseline, and whether requests ignore EOS.
pub struct SessionSpec<'a> {
    pub spec: &'a WorkloadSpec,
    pub rates: &'a [f64],
    pub slo: Option<&'a Slo>,
    /// The SLOs as the user wrote them, for the record.
    pub slo_text: Option<&'a str>,
    pub lang: Lang,
    pub baseline: bool,
    pub ignore_eos: bool,
    /// The hardware's price per hour, for [`crate::bench::Cost`] in each rate's summary.
    pub cost_per_hour: Option<f64>,
    /// A warm-up and a cool-down left out of each rate's summary (default: none).
    pub phases: Phases,
}

/// The baseline, then one result per rate, in order; stops after the rate during which `cancel`
/// was set (that result holds the requests sent until then). A baseline request that fails is
/// recorded in [`Baseline::error`] and the rates run without a diagnosis.
pub async fn run<T: Target>(
    target: &mut T,
    s: &SessionSpec<'_>,
    listener: &Listener,
    cancel: &Rc<Cell<bool>>,
) -> Result<Vec<BenchResult>> {
    let mut results = Vec::new();
    run_into(target, s, listener, cancel, &mut results).await?;
    Ok(results)
}

/// [`run`], pushing each rate's result into `results` as it ends, so that a caller still has
/// the finished rates when a later one fails (the CLI writes them before its error).
pub async fn run_into<T: Target>(
    target: &mut T,
    s: &SessionSpec<'_>,
    listener: &Listener,
    cancel: &Rc<Cell<bool>>,
    results: &mut Vec<BenchResult>,
) -> Result<()> {
    // Every rate's plan is checked before anything runs.
    s.phases.check(s.spec.num_requests)?;
    for &rate in s.rates {
        plan(&WorkloadSpec { rate, ..s.spec.clone() })?;
    }
    let baseline = if s.baseline { warm_up_and_baseline(target, s.spec, listener, cancel).await? } else { None };
    if let Some(e) = target.fault() {
        return Err(e);
    }
    for &rate in s.rates {
        if cancel.get() {
            break;
        }
        let spec = WorkloadSpec { rate, ..s.spec.clone() };
        let planned = plan(&spec)?;
        listener(SessionEvent::RateStarted { rate, requests: planned.len() });
        // Scrapes left by the warm-up, the baseline or an earlier rate are not this rate's.
        let _ = (target.take_server_metrics(), target.take_gpu_metrics());
        let (mut requests, steps) = target.run(&planned, &spec, s.ignore_eos, listener, cancel).await?;
        let saturation = target.take_saturation();
        let server_metrics = target.take_server_metrics();
        let gpu_metrics = target.take_gpu_metrics();
        // Requests never released (a cancelled run) have no arrival time: NaN, which JSON cannot
        // hold, so the saved run could not be read back.
        requests.retain(|r| r.arrival_s.is_finite());
        // The bucket follows the run's step time, so that slow steps do not alias into zeros.
        s.phases.mark(&mut requests);
        let implied = |records: &[RequestRecord]| {
            spec.dataset.as_ref().and_then(|d| d.implied_hit_rate(records.iter().map(|r| r.id)))
        };
        let mut metrics = match measured(&requests, &steps) {
            Some((kept, kept_steps, excluded)) => {
                let bucket_s = super::metrics::throughput_bucket_s(&kept, &kept_steps);
                let mut m = summarize(&kept, &kept_steps, s.slo, bucket_s);
                m.excluded = Some(excluded);
                m.prefix_cache_implied_rate = implied(&kept);
                m
            }
            None => {
                let mut m = summarize(&requests, &steps, s.slo, super::metrics::throughput_bucket_s(&requests, &steps));
                m.prefix_cache_implied_rate = implied(&requests);
                m
            }
        };
        metrics.steady = SteadyState::of(&requests, &steps, s.slo);
        metrics.delivered = DeliveredLoad::of(&requests, &spec);
        if !target.reports_steps() {
            // A server does not say how busy it was or whether it preempted: unknown, not 0.
            let unknown = |m: &mut super::BenchmarkMetrics| (m.gpu_busy_fraction, m.preemptions) = (f64::NAN, None);
            unknown(&mut metrics);
            if let Some(summary) = metrics.steady.as_mut().and_then(|s| s.summary.as_mut()) {
                unknown(summary);
            }
        }
        metrics.cost = s.cost_per_hour.map(|price| Cost::at(price, &metrics));
        metrics.server = server_metrics.as_ref().map(ServerMetrics::summary);
        // Over the measured phase where warm-up or cool-down was left out (from the first measured
        // arrival to the last measured request's end) and two readings fall in it, else over every
        // reading; the output tokens are every token timed in that span, whichever request's.
        let measured = metrics.excluded.map(|x| {
            let ends = requests.iter().filter(|r| r.phase.is_none()).filter_map(RequestRecord::ended_s);
            (x.measured_from_s, ends.fold(x.measured_from_s, f64::max))
        });
        metrics.energy = gpu_metrics.as_ref().map(|g| Energy::of(g, &requests, measured));
        let diagnosis = baseline.as_ref().filter(|b| b.error.is_none()).map(|b| diagnose_in(&metrics, b, s.lang));
        let run_config = RunConfig {
            workload: Some(spec),
            slo: s.slo_text.map(String::from),
            ignore_eos: Some(s.ignore_eos),
            tool_version: Some(env!("CARGO_PKG_VERSION").to_string()),
            phases: (!s.phases.is_none()).then_some(s.phases),
            ..target.run_config()
        };
        let result = BenchResult {
            config: run_config,
            metrics,
            diagnosis,
            baseline: baseline.clone(),
            requests,
            steps,
            saturation,
            server_metrics,
            gpu_metrics,
        };
        listener(SessionEvent::RateDone { rate, result: &result });
        results.push(result);
        if let Some(e) = target.fault() {
            return Err(e);
        }
    }
    Ok(())
}

/// What a session does before its first rate: the warm-up, then the baseline, each told to the
/// listener; for a caller that runs its rates one session at a time (`bench --rate max`).
pub async fn warm_up_and_baseline<T: Target>(
    target: &mut T,
    spec: &WorkloadSpec,
    listener: &Listener,
    cancel: &Rc<Cell<bool>>,
) -> Result<Option<Baseline>> {
    let start = crate::clock::now_s();
    let requests = warm_up(target, spec, cancel).await?;
    if let Some(e) = target.fault() {
        return Err(e);
    }
    listener(SessionEvent::WarmedUp { requests, seconds: crate::clock::now_s() - start });
    let measured = baseline(target, spec, cancel).await?;
    if let Some(e) = target.fault() {
        return Err(e);
    }
    if let Some(b) = &measured {
        listener(SessionEvent::Baseline(b));
    }
    Ok(measured)
}

/// Requests in the warm-up before the baseline (fewer when the workload has fewer).
pub const WARM_UP_REQUESTS: usize = 8;
/// Requests alone whose median latencies are the baseline.
pub const BASELINE_REQUESTS: usize = 3;

/// Before the baseline, what the run will do, unmeasured: [`WARM_UP_REQUESTS`] requests at once
/// with prompts spread over the workload's lengths (shortest to longest) and outputs of 2, 3, …
/// tokens (within its output lengths), so that the steps take every shape a run takes — prefill
/// of one prompt and of several, decode batches from all of them down to one — and a target pays
/// its first uses (a driver compiling a pipeline at its first dispatch, a server's lazy set-up)
/// here, not in the baseline or the run. Returns how many requests it sent.
async fn warm_up<T: Target>(target: &mut T, spec: &WorkloadSpec, cancel: &Rc<Cell<bool>>) -> Result<usize> {
    let k = spec.num_requests.clamp(1, WARM_UP_REQUESTS);
    // A conversation's prompts grow with its history: warm up to the longest.
    let (input, output) = (&spec.prompt_range(), &spec.output_len);
    let plan: Vec<PlannedRequest> = (0..k)
        .map(|i| {
            let share = if k > 1 { i as f64 / (k - 1) as f64 } else { 1.0 };
            PlannedRequest {
                // Below the baseline's ids (u64::MAX down): no warm-up prompt is a baseline one.
                id: u64::MAX - BASELINE_REQUESTS as u64 - i as u64,
                arrival_s: Some(0.0),
                prompt_len: input.min + ((input.max - input.min) as f64 * share).round() as usize,
                output_len: (2 + i).clamp(output.min.max(2), output.max.max(2)),
            }
        })
        .collect();
    let burst = WorkloadSpec { num_requests: k, rate: f64::INFINITY, conversations: None, ..spec.clone() };
    let quiet: Listener = Rc::new(|_| {});
    target.run(&plan, &burst, true, &quiet, cancel).await?;
    Ok(k)
}

/// [`BASELINE_REQUESTS`] requests alone, one after another, each at the workload's longest
/// prompt (with conversations, the longest history: [`WorkloadSpec::prompt_range`]) and output (at least 2 tokens, so that it has a TPOT), ignoring EOS; the baseline is
/// their median TTFT and median TPOT: the latencies a loaded run is judged against, measured with
/// the same definitions as every request of the run ([`RequestRecord::ttft_s`],
/// [`RequestRecord::tpot_s`]). A request that fails is a failed baseline, not an error; `None`
/// when cancelled before they ended.
async fn baseline<T: Target>(target: &mut T, spec: &WorkloadSpec, cancel: &Rc<Cell<bool>>) -> Result<Option<Baseline>> {
    let alone = PlannedRequest {
        id: u64::MAX,
        arrival_s: Some(0.0),
        prompt_len: spec.prompt_range().max,
        output_len: spec.output_len.max.max(2),
    };
    let alone_spec = WorkloadSpec { num_requests: 1, conversations: None, ..spec.clone() };
    // Progress of the baseline is not the run's: the listener hears about it as `Baseline`.
    let quiet: Listener = Rc::new(|_| {});
    let (mut ttft, mut tpot) = (Vec::new(), Vec::new());
    for k in 0..BASELINE_REQUESTS {
        // Each its own prompt (a prompt is drawn by id): with the prefix cache on, a repeated one
        // would be served from the cache, and the baseline would be a cache hit's TTFT.
        let alone = PlannedRequest { id: u64::MAX - k as u64, ..alone.clone() };
        let (records, _) = target.run(std::slice::from_ref(&alone), &alone_spec, true, &quiet, cancel).await?;
        let Some(first) = records.first().filter(|r| r.arrival_s.is_finite() && !cancel.get()) else {
            return Ok(None);
        };
        let failure = match (&first.error, first.finish_s) {
            (Some(e), _) => Some(e.as_str()),
            (None, None) => Some("it did not finish"),
            (None, Some(_)) => None,
        };
        if let Some(e) = failure {
            return Ok(Some(Baseline::failed(format!("the baseline request (one request alone) failed: {e}"))));
        }
        ttft.extend(first.ttft_s());
        tpot.extend(first.tpot_s());
    }
    let median_ms = |values: Vec<f64>| super::stats(&values).p50 * 1000.0;
    Ok(Some(Baseline { ttft_ms: median_ms(ttft), tpot_ms: median_ms(tpot), requests: BASELINE_REQUESTS, error: None }))
}

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
    /// ids" (seeded random ids): [`crate::bench::PromptSource::kind`].
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
    /// The warm-up and cool-down left out of the summary ([`crate::bench::phases`]); absent
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
    /// The engine's check of itself on the adapter before it measured (`engine::verify`); absent
    /// for servers, for runs told not to (`--no-verify`) and in results saved before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verification: Option<crate::engine::verify::Verification>,
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
/// (`fused`), prefill attention tiled over queries (`prefill_tiles`) and the GEMV's largest step
/// (`gemv_max_m`). Fields absent from results saved before they existed read as `false` / absent.
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
}

impl KernelPath {
    /// One line: "gpu kernels · tile 8 · subgroups · fused · prefill tiles · GEMV ≤ 64 · bf16
    /// weights in buffers" (the GPU family's switches only where they apply).
    pub fn describe(&self) -> String {
        let mut parts = vec![format!("{} kernels · tile {}", self.family, self.tile)];
        if self.subgroups {
            parts.push("subgroups".to_string());
        }
        if self.family == "gpu" {
            parts.push(if self.fused { "fused" } else { "unfused" }.to_string());
        }
        parts.push(if self.prefill_tiles { "prefill tiles" } else { "prefill untiled" }.to_string());
        if let Some(m) = self.gemv_max_m {
            parts.push(format!("GEMV ≤ {m}"));
        }
        parts.push(format!("{} weights in {}s", self.weight_format, self.weights));
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
        }
    }
}

/// What the run record says about an engine's executor beyond its limits: the GPU's adapter and
/// kernel path, or the capacity planner's cost model and the hardware it models.
pub trait RecordedExecutor: Executor {
    fn record(&self, config: RunConfig) -> RunConfig;

    /// See [`Target::fault`].
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
            ..config
        }
    }

    fn fault(&self) -> Option<Error> {
        self.gpu.fault()
    }
}
