//! What one GPU sustains, predicted from runs measured on it (the page's Plan card): a cost model
//! fitted on the runs' steps, the runs' own workload replayed at a grid of rates through the
//! engine on that model's virtual clock, and the rate where the predicted TTFT p99 crosses the
//! SLO ([`slo_crossing`], the sweep's rule). Replicas for a target rate are that rate over the
//! sustained one, rounded up: a lower bound, since a router spreads requests unevenly
//! (`tokenmeter plan --find-replicas` runs the fleet).

use std::cell::Cell;
use std::rc::Rc;

use crate::bench::run::launch::{self, OnEngine};
use crate::bench::run::max_rate::{attainment_of, FirstGuess};
use crate::bench::run::target::Listener;
use crate::bench::verdict::sweep::{slo_crossing, SloCrossing};
use crate::bench::{BenchResult, BenchmarkMetrics, Lang, RunConfig, SessionSpec, Slo};
use crate::engine::{CostModel, Engine};
use crate::error::{Error, Result};
use crate::model::Qwen3Config;
use crate::planner::{measured_steps, SimExecutor};

/// Rates a plan tries besides the measured ones: from this fraction of the highest rate measured…
const GRID_FROM: f64 = 0.125;
/// …to this multiple of it…
const GRID_TO: f64 = 4.0;
/// …in this many geometric steps.
const GRID_POINTS: usize = 11;

/// One GPU's predicted capacity.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Capacity {
    /// The cost model, fitted on the runs' steps (its held-back error says how well).
    pub cost: CostModel,
    /// The rates tried, ascending, each with its predicted metrics.
    #[serde(with = "crate::bench::traffic::workload::infinite_rate::pairs")]
    pub predicted: Vec<(f64, BenchmarkMetrics)>,
    /// The runs' own (rate, metrics), to draw beside the prediction.
    #[serde(with = "crate::bench::traffic::workload::infinite_rate::pairs")]
    pub measured: Vec<(f64, BenchmarkMetrics)>,
    pub ttft_slo_ms: f64,
    /// Where the predicted TTFT p99 crosses the SLO.
    pub crossing: SloCrossing,
    /// Requests each predicted rate ran, and the runs' own count.
    pub requests: usize,
    pub measured_requests: usize,
}

impl Capacity {
    /// The highest rate one GPU sustains within the SLO, when the grid brackets it.
    pub fn sustained(&self) -> Option<f64> {
        match self.crossing {
            SloCrossing::At(rate) if rate > 0.0 => Some(rate),
            _ => None,
        }
    }

    /// GPUs like this one for `rate` requests/s: `rate` over the sustained rate, rounded up (a
    /// lower bound: a router spreads requests unevenly).
    pub fn replicas_for(&self, rate: f64) -> Option<usize> {
        let one = self.sustained()?;
        (rate.is_finite() && rate > 0.0).then(|| (rate / one).ceil().max(1.0) as usize)
    }
}

/// The rates a plan tries: the measured ones and a geometric grid around the highest.
pub fn grid(measured: &[f64]) -> Vec<f64> {
    let top = measured.iter().copied().filter(|r| r.is_finite() && *r > 0.0).fold(0.0, f64::max);
    let mut rates: Vec<f64> = measured.iter().copied().filter(|r| r.is_finite() && *r > 0.0).collect();
    if top > 0.0 {
        let ratio = (GRID_TO / GRID_FROM).powf(1.0 / (GRID_POINTS - 1) as f64);
        // Three significant digits, so the rates read as they are (1.41, 2.83, 5.66, …).
        let three_digits = |x: f64| {
            let scale = 10f64.powi(2 - x.log10().floor() as i32);
            (x * scale).round() / scale
        };
        rates.extend((0..GRID_POINTS).map(|k| three_digits(top * GRID_FROM * ratio.powi(k as i32))));
    }
    rates.sort_by(f64::total_cmp);
    rates.dedup_by(|a, b| (*a - *b).abs() <= 1e-9 * b.abs());
    rates
}

/// Predicts what one GPU like the one `runs` were measured on sustains within `ttft_slo_ms`
/// (TTFT p99): the cost model fitted on the runs' steps, the first run's workload, engine sizes
/// and scheduling at each rate of [`grid`]. `cfg`: the model the runs ran. Refused: runs without
/// steps (a server's), simulated runs, runs of different engines, closed loops (their rate is
/// their own), datasets (their rows are not kept with a result).
///
/// The saturation stop is off: a rate past capacity runs to its end.
/// `min_requests`: each rate runs at least this many requests (the run's lengths and arrivals,
/// more of them), so that a rate past capacity shows its queue growing; a short run's own count
/// would end before it does. 0 replays the run's count.
pub async fn capacity(
    runs: &[BenchResult],
    cfg: &Qwen3Config,
    ttft_slo_ms: f64,
    min_requests: usize,
) -> Result<Capacity> {
    if !(ttft_slo_ms.is_finite() && ttft_slo_ms > 0.0) {
        return Err(Error::Invalid(format!("TTFT SLO {ttft_slo_ms} ms: must be a positive number")));
    }
    let p = predict(runs, cfg, None, min_requests).await?;
    let predicted: Vec<(f64, BenchmarkMetrics)> =
        p.rates.iter().copied().zip(p.results.into_iter().map(|r| r.metrics)).collect();
    let refs: Vec<&BenchmarkMetrics> = predicted.iter().map(|(_, m)| m).collect();
    let crossing = slo_crossing(&p.rates, &refs, ttft_slo_ms).expect("one result per rate");
    Ok(Capacity {
        cost: p.cost,
        predicted,
        measured: p.measured,
        ttft_slo_ms,
        crossing,
        requests: p.requests,
        measured_requests: p.measured_requests,
    })
}

/// `bench --rate max`'s first guess on the engine: the highest rate of [`grid`] (around the
/// runs') whose predicted share of requests within every SLO ([`attainment_of`]) meets
/// `attainment`, or the lowest when none does; the runs as for [`capacity`].
pub async fn predicted_max_rate(runs: &[BenchResult], cfg: &Qwen3Config, slo: &Slo, attainment: f64) -> Result<f64> {
    let p = predict(runs, cfg, Some(slo), 0).await?;
    let meets = |r: &BenchResult| attainment_of(&r.requests, slo).0 >= attainment;
    let highest =
        p.rates.iter().zip(&p.results).filter(|(_, r)| meets(r)).map(|(&rate, _)| rate).fold(f64::NAN, f64::max);
    Ok(if highest.is_finite() { highest } else { p.rates[0] })
}

/// `--rate max`'s first guess on the engine ([`crate::bench::run::max_rate::find`]): the planner's prediction
/// ([`predicted_max_rate`]) from the first run's steps, for the engine's model. The CLI's and the
/// page's.
pub struct PlannerGuess(pub Qwen3Config);

impl FirstGuess for PlannerGuess {
    fn guess<'a>(
        &'a self,
        runs: &'a [BenchResult],
        slo: &'a Slo,
        attainment: f64,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<f64>> + 'a>> {
        Box::pin(predicted_max_rate(runs, &self.0, slo, attainment))
    }

    fn source(&self) -> &'static str {
        "the planner's prediction from the first run's steps"
    }
}

/// What the simulated engine predicts at each rate of [`grid`].
struct Prediction {
    cost: CostModel,
    rates: Vec<f64>,
    results: Vec<BenchResult>,
    measured: Vec<(f64, BenchmarkMetrics)>,
    requests: usize,
    measured_requests: usize,
}

/// The cost model fitted on the runs' steps, and the first run's workload, engine sizes and
/// scheduling replayed at each rate of [`grid`] with `slo` (see [`capacity`] for what is refused).
async fn predict(
    runs: &[BenchResult],
    cfg: &Qwen3Config,
    slo: Option<&Slo>,
    min_requests: usize,
) -> Result<Prediction> {
    let source = "the runs on this GPU";
    let steps = measured_steps(runs, source)?;
    let config: &RunConfig = &runs[0].config;
    let cost = CostModel::fit(&steps, config.kernels.as_ref().and_then(|k| k.matmul_rule()), source)?;
    let (Some(limits), Some(mut spec)) = (config.engine.clone(), config.workload.clone()) else {
        return Err(Error::Invalid(format!("{source}: the run recorded no engine sizes or workload")));
    };
    if !spec.arrival.open_loop() {
        return Err(Error::Invalid(format!(
            "{source}: plan from a run with arrivals at a rate (a closed loop sets its own)"
        )));
    }
    if spec.dataset.is_some() {
        return Err(Error::Invalid(format!("{source}: a dataset's rows are not kept with a result")));
    }
    let measured_requests = spec.num_requests;
    spec.num_requests = spec.num_requests.max(min_requests);
    // A rate past capacity runs to its end: stopped early, its TTFT would be that of the requests
    // served before the stop, lower than at a rate the GPU sustains.
    spec.saturation_stop = false;
    let measured: Vec<(f64, BenchmarkMetrics)> =
        runs.iter().filter_map(|r| Some((r.config.workload.as_ref()?.rate, r.metrics.clone()))).collect();
    let rates = grid(&measured.iter().map(|(rate, _)| *rate).collect::<Vec<_>>());
    if rates.is_empty() {
        return Err(Error::Invalid(format!("{source}: plan from a run at a finite rate (not a burst)")));
    }
    let mut engine = Engine::new(SimExecutor::new(cfg.clone(), limits, cost.clone(), config.clone()));
    engine.set_policy(config.scheduler.unwrap_or_default())?;
    let describe = RunConfig { target: "local".into(), model: config.model.clone(), ..RunConfig::default() };
    let session = SessionSpec {
        size_rate: false,
        spec: &spec,
        rates: &rates,
        slo,
        slo_text: None,
        lang: Lang::En,
        baseline: false,
        ignore_eos: true,
        cost_per_hour: None,
        phases: config.phases.unwrap_or_default(),
        criteria: config.criteria.unwrap_or_default(),
    };
    let quiet: Listener = Rc::new(|_| {});
    let mut results = Vec::new();
    // The simulator reads only lengths: seeded random ids (and the workload's shared prefix).
    let on = OnEngine { replies_are_text: false, ..OnEngine::new(&mut engine, None, true, describe) };
    launch::run(on, &session, None, &quiet, &Rc::new(Cell::new(false)), &mut results).await?;
    Ok(Prediction { cost, rates, results, measured, requests: spec.num_requests, measured_requests })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grid_holds_the_measured_rates_and_spans_around_the_highest() {
        let rates = grid(&[2.0, 8.0, f64::INFINITY]);
        assert_eq!(rates.len(), GRID_POINTS, "2 and 8 are on the grid already: {rates:?}");
        assert_eq!(rates, [1.0, 1.41, 2.0, 2.83, 4.0, 5.66, 8.0, 11.3, 16.0, 22.6, 32.0]);
        assert!(rates.contains(&2.0) && rates.windows(2).all(|w| w[0] < w[1]));
        assert!(grid(&[f64::INFINITY]).is_empty());
    }
}
