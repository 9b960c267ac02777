//! One benchmark session, whatever the target: a warm-up and the baseline (the median of requests
//! alone), then for each rate the planned workload, its summary, its diagnosis against the
//! baseline and a [`BenchResult`] that records what ran ([`RunConfig`]). The CLI and the page only
//! parse their inputs, load a [`Target`] — the engine in this process, through the launcher
//! (`run/launch.rs`, which calls this), or a server (`remote::native::ServerTarget`,
//! `remote::browser::ServerTarget`) — and present the results.

use std::cell::Cell;
use std::rc::Rc;

use crate::bench::base::lang::Lang;
use crate::bench::measure::delivered::DeliveredLoad;
use crate::bench::measure::energy::Energy;
use crate::bench::measure::metrics::{summarize, Cost, Slo};
use crate::bench::measure::server_metrics::ServerMetrics;
use crate::bench::measure::steady::SteadyState;
use crate::bench::record::phases::{measured, Phases};
use crate::bench::record::raw::RequestRecord;
use crate::bench::record::run_config::{Criteria, RunConfig, SizedRate};
use crate::bench::result::BenchResult;
use crate::bench::run::target::{Listener, SessionEvent, Target};
use crate::bench::traffic::workload::{plan, Arrival, PlannedRequest, WorkloadSpec};
use crate::bench::verdict::diagnosis::{diagnose_in, Baseline};
use crate::error::Result;

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
    /// The hardware's price per hour, for [`crate::bench::measure::metrics::Cost`] in each rate's summary.
    pub cost_per_hour: Option<f64>,
    /// A warm-up and a cool-down left out of each rate's summary (default: none).
    pub phases: Phases,
    /// What each rate's validity verdict holds it to beside its SLOs.
    pub criteria: Criteria,
    /// The rate was not given: run one rate, sized from the baseline ([`SizedRate`]), instead of
    /// `rates` (which stay the fallback when the baseline failed or was not measured).
    pub size_rate: bool,
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
    let outputs = s.spec.output_len.max;
    let sized = baseline.as_ref().and_then(|b| b.alone_s(outputs)).filter(|_| s.size_rate).map(SizedRate::of);
    let sized_rates = sized.map(|z| [z.rate]);
    for &rate in sized_rates.as_ref().map_or(s.rates, |r| &r[..]) {
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
        let decided = target.take_decided();
        let server_metrics = target.take_server_metrics();
        let gpu_metrics = target.take_gpu_metrics();
        // Requests never released (a cancelled run) have no arrival time: NaN, which JSON cannot
        // hold, so the saved run could not be read back.
        requests.retain(|r| r.arrival_s.is_finite());
        let unsent = planned.len() - requests.len();
        // The bucket follows the run's step time, so that slow steps do not alias into zeros.
        s.phases.mark(&mut requests);
        let implied = |records: &[RequestRecord]| {
            spec.dataset.as_ref().and_then(|d| d.implied_hit_rate(records.iter().map(|r| r.id)))
        };
        let mut metrics = match measured(&requests, &steps) {
            Some((kept, kept_steps, excluded)) => {
                let bucket_s = crate::bench::measure::metrics::throughput_bucket_s(&kept, &kept_steps);
                let mut m = summarize(&kept, &kept_steps, s.slo, bucket_s);
                m.excluded = Some(excluded);
                m.prefix_cache_implied_rate = implied(&kept);
                m
            }
            None => {
                let mut m = summarize(
                    &requests,
                    &steps,
                    s.slo,
                    crate::bench::measure::metrics::throughput_bucket_s(&requests, &steps),
                );
                m.prefix_cache_implied_rate = implied(&requests);
                m
            }
        };
        metrics.unsent = unsent;
        // The rate asked, where the arrivals were drawn at one: the diagnosis explains an offered
        // rate off it.
        let drawn = spec.arrival.open_loop() && spec.arrival != Arrival::Trace && spec.rate.is_finite();
        if let Some(load) = metrics.load.as_mut().filter(|_| drawn) {
            load.asked_rps = Some(spec.rate);
        }
        metrics.steady = SteadyState::of(&requests, &steps, s.slo);
        metrics.delivered = DeliveredLoad::of(&requests, &spec);
        if !target.reports_steps() {
            // A server does not say how busy it was or whether it preempted: unknown, not 0.
            let unknown = |m: &mut crate::bench::measure::metrics::BenchmarkMetrics| {
                (m.gpu_busy_fraction, m.preemptions) = (f64::NAN, None)
            };
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
        let mut run_config = RunConfig {
            workload: Some(spec),
            slo: s.slo_text.map(String::from),
            ignore_eos: Some(s.ignore_eos),
            tool_version: Some(env!("CARGO_PKG_VERSION").to_string()),
            phases: (!s.phases.is_none()).then_some(s.phases),
            criteria: Some(s.criteria),
            sized_rate: sized,
            ..target.run_config()
        };
        // Run again repeats the sized rate, not the default the request was made with.
        if let Some(z) = sized {
            run_config.request = run_config.request.map(|r| r.with("--rate", &z.text()));
        }
        let mut result = BenchResult {
            config: run_config,
            metrics,
            diagnosis,
            baseline: baseline.clone(),
            requests,
            steps,
            saturation,
            decided,
            server_metrics,
            gpu_metrics,
            validity: None,
        };
        result.stamp();
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
    let median_ms = |values: Vec<f64>| crate::bench::base::stats::stats(&values).p50 * 1000.0;
    Ok(Some(Baseline { ttft_ms: median_ms(ttft), tpot_ms: median_ms(tpot), requests: BASELINE_REQUESTS, error: None }))
}
