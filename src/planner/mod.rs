//! The capacity planner (`tokenmeter plan`): the engine's own scheduler, block allocator and
//! batcher loop, advanced on a virtual clock by a step-cost model fitted on a measured run — so a
//! plan is the engine's decisions at a rate or a batch size that was never run, in seconds
//! instead of minutes per rate. Its results are ordinary [`BenchResult`]s (the same report, JSON
//! and HTML), labelled simulated (`run_config.simulated`: the cost model).
//!
//! - [`CostModel`] (in `engine::cost`, beside the step shape it reads): the step-cost model and its
//!   fit, with its error on held-back steps.
//! - [`sim`]: the executor on the virtual clock.
//! - [`fleet`]: N replicas behind a router on one virtual timeline.
//! - [`capacity`]: what one GPU sustains within an SLO, predicted from runs on it (the page's Plan
//!   card).
//! - [`calibrate`]: a designed set of steps measured now (`plan --calibrate`), instead of a saved run's.
//! - here: the measured steps of a results file, and predicted beside measured.

pub mod calibrate;
pub mod capacity;
pub mod fleet;
pub mod sim;

pub use crate::engine::CostModel;
pub use fleet::{Fleet, FleetTarget, Router};
pub use sim::SimExecutor;

use crate::bench::{BenchResult, BenchmarkMetrics, Stats};
use crate::engine::forward::EngineLimits;
use crate::engine::{EngineOptions, Speculation, StepShape};
use crate::error::{Error, Result};
use crate::model::Qwen3Config;

/// The measured steps of `results` (one engine, one adapter), as `(shape, seconds)`, for
/// [`CostModel::fit`]. Refused: a server's results (a server reports no steps), simulated
/// results (a model fitted on a model), and results of different engines or adapters.
pub fn measured_steps(results: &[BenchResult], source: &str) -> Result<Vec<(StepShape, f64)>> {
    let Some(first) = results.first() else {
        return Err(Error::Invalid(format!("{source}: no results")));
    };
    let identity = |r: &BenchResult| {
        let c = &r.config;
        (c.model.clone(), c.adapter.as_ref().map(|a| a.name.clone()), c.kernels.clone())
    };
    for r in results {
        if r.config.is_server() {
            return Err(Error::Invalid(format!(
                "{source}: a server's results: a server reports no steps to fit a cost model on (plan from a run of \
                 this engine: tokenmeter bench --json)"
            )));
        }
        if r.config.simulated.is_some() {
            return Err(Error::Invalid(format!("{source}: simulated results (plan from a measured run)")));
        }
        if identity(r) != identity(first) {
            return Err(Error::Invalid(format!(
                "{source}: results of different models, adapters or kernel paths; a cost model describes one"
            )));
        }
    }
    Ok(results.iter().flat_map(|r| &r.steps).filter_map(|s| Some((s.shape?, s.duration_s))).collect())
}

/// The engine sizes a plan runs with: `options` as the user set them, without the adapter's say
/// (the plan may ask for more than the measured GPU gave); KV blocks, unless set, the measured
/// run's token slots. Speculative decoding is not modelled (its acceptance is the text's).
pub fn limits_for(options: &EngineOptions, measured: &EngineLimits, cfg: &Qwen3Config) -> Result<EngineLimits> {
    if options.speculation.max_draft() > 0 {
        return Err(Error::Invalid("--speculate: the planner does not model speculative decoding".into()));
    }
    if options.block_size == 0 || options.max_seqs == 0 || options.max_batched_tokens == 0 {
        return Err(Error::Invalid("block size, max batch and max batched tokens must be positive".into()));
    }
    let slots = measured.num_blocks * measured.block_size;
    Ok(EngineLimits {
        max_batched_tokens: options.max_batched_tokens,
        max_seqs: options.max_seqs.min(options.max_batched_tokens),
        block_size: options.block_size,
        num_blocks: options.kv_blocks.unwrap_or(slots / options.block_size).max(1),
        max_blocks_per_seq: cfg.max_position_embeddings.div_ceil(options.block_size),
        speculation: Speculation::Off,
        max_logit_rows: options.max_seqs.min(options.max_batched_tokens),
        prefix_cache: options.prefix_cache,
        overlap: options.overlap_in_force(),
    })
}

/// One row of predicted beside measured.
#[derive(Clone, Debug, PartialEq)]
pub struct Agreement {
    pub metric: &'static str,
    pub measured: f64,
    pub predicted: f64,
}

impl Agreement {
    /// (predicted − measured) / measured; NaN where measured is 0 or either is missing.
    pub fn error(&self) -> f64 {
        (self.predicted - self.measured) / self.measured
    }
}

/// The latency percentiles and throughputs of a simulated run beside the measured run's.
pub fn agreement(measured: &BenchmarkMetrics, predicted: &BenchmarkMetrics) -> Vec<Agreement> {
    let mut rows = Vec::new();
    let mut stats = |name: [&'static str; 3], m: &Stats, p: &Stats| {
        for (metric, (a, b)) in name.into_iter().zip([(m.p50, p.p50), (m.p90, p.p90), (m.p99, p.p99)]) {
            rows.push(Agreement { metric, measured: a, predicted: b });
        }
    };
    stats(["TTFT p50 (ms)", "TTFT p90 (ms)", "TTFT p99 (ms)"], &measured.ttft_ms, &predicted.ttft_ms);
    stats(["TPOT p50 (ms)", "TPOT p90 (ms)", "TPOT p99 (ms)"], &measured.tpot_ms, &predicted.tpot_ms);
    stats(["ITL p50 (ms)", "ITL p90 (ms)", "ITL p99 (ms)"], &measured.itl_ms, &predicted.itl_ms);
    stats(["E2E p50 (ms)", "E2E p90 (ms)", "E2E p99 (ms)"], &measured.e2e_ms, &predicted.e2e_ms);
    rows.push(Agreement {
        metric: "output tokens/s",
        measured: measured.output_throughput,
        predicted: predicted.output_throughput,
    });
    rows.push(Agreement {
        metric: "requests/s",
        measured: measured.request_throughput,
        predicted: predicted.request_throughput,
    });
    rows
}

/// [`agreement`] as a text table.
pub fn agreement_table(rows: &[Agreement]) -> String {
    let mut out = format!("{:<18} {:>12} {:>12} {:>8}\n", "", "measured", "predicted", "error");
    for r in rows {
        let error = r.error();
        let error = if error.is_finite() { format!("{:+.1}%", error * 100.0) } else { "–".into() };
        out.push_str(&format!("{:<18} {:>12.2} {:>12.2} {:>8}\n", r.metric, r.measured, r.predicted, error));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agreement_rows_compare_like_with_like() {
        // p50, p90, p99 of 1..=100 times `scale`: 50.5, 90.1, 99.01 (linear interpolation).
        let stats =
            |scale: f64| crate::bench::base::stats::stats(&(1..=100).map(|i| i as f64 * scale).collect::<Vec<_>>());
        let metrics = |ttft: f64, output_throughput: f64| BenchmarkMetrics {
            ttft_ms: stats(ttft),
            tpot_ms: stats(1.0),
            output_throughput,
            ..crate::bench::summarize(&[], &[], None, 0.25)
        };
        let rows = agreement(&metrics(1.0, 50.0), &metrics(1.1, 40.0));
        let row = |name: &str| rows.iter().find(|r| r.metric == name).unwrap();
        let p99 = row("TTFT p99 (ms)");
        assert!((p99.measured - 99.01).abs() < 1e-9 && (p99.predicted - 108.911).abs() < 1e-9, "{p99:?}");
        assert!((row("TTFT p50 (ms)").error() - 0.1).abs() < 1e-12);
        assert_eq!(row("TPOT p90 (ms)").error(), 0.0);
        assert!((row("output tokens/s").error() + 0.2).abs() < 1e-12);
        let table = agreement_table(&rows);
        assert!(table.contains("+10.0%") && table.contains("-20.0%"), "{table}");
        // No request completed, so no ITL in either: no error to show.
        assert!(table.lines().any(|l| l.starts_with("ITL p50") && l.ends_with('–')), "{table}");
    }
}
