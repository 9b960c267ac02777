//! An A/B experiment: the same workload (same seed: same arrivals, lengths and prompts) run under
//! A and under B alternately, A B A B …, so that a machine drifting during the experiment drifts
//! both sides alike; then [`compare`] over the repetitions. The CLI's `compare` and the
//! page's Experiment card call [`run_alternating`] with their own targets and show
//! [`compare::text_report`].

use std::cell::Cell;
use std::rc::Rc;

use serde::{Deserialize, Serialize};

use super::compare::{self, CompareOptions, Comparison};
use super::session::{self, Listener, SessionSpec, Target};
use super::{BenchResult, Lang, Slo, WorkloadSpec};
use crate::error::{Error, Result};

/// Which side a repetition ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Side {
    A,
    B,
}

/// What an experiment runs: one workload (one rate), its SLOs, `repeats` runs per side.
pub struct ExperimentSpec<'a> {
    pub spec: &'a WorkloadSpec,
    pub slo: Option<&'a Slo>,
    pub slo_text: Option<&'a str>,
    pub repeats: usize,
    pub ignore_eos: bool,
    pub lang: Lang,
    /// One run per side before the repetitions, not compared: the first run of an engine pays for
    /// compiling pipelines and warming caches (on lavapipe its TTFT was 60× the next run's).
    pub warmup: bool,
}

/// Everything an experiment leaves: every repetition's result (summary and requests) per side,
/// in the order they ran, and the comparison.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Experiment {
    pub a: Vec<BenchResult>,
    pub b: Vec<BenchResult>,
    pub comparison: Comparison,
}

/// Runs A, B, A, B, … `repeats` times each (no baseline; after a warm-up run per side), telling `on_repetition` after each
/// run, then compares. Stops with the runs so far when `cancel` is set (an error if a side has
/// none yet).
pub async fn run_alternating<A: Target, B: Target>(
    a: &mut A,
    b: &mut B,
    x: &ExperimentSpec<'_>,
    listener: &Listener,
    cancel: &Rc<Cell<bool>>,
    on_repetition: &mut dyn FnMut(Side, usize, &BenchResult),
) -> Result<Experiment> {
    if x.repeats == 0 {
        return Err(Error::Invalid("an experiment needs at least one repetition per side".into()));
    }
    let rates = [x.spec.rate];
    let session = SessionSpec {
        spec: x.spec,
        rates: &rates,
        slo: x.slo,
        slo_text: x.slo_text,
        lang: x.lang,
        baseline: false,
        ignore_eos: x.ignore_eos,
        cost_per_hour: None,
    };
    if x.warmup {
        session::run(a, &session, listener, cancel).await?;
        session::run(b, &session, listener, cancel).await?;
    }
    let (mut runs_a, mut runs_b) = (Vec::new(), Vec::new());
    for i in 0..x.repeats {
        for side in [Side::A, Side::B] {
            if cancel.get() {
                break;
            }
            let mut results = match side {
                Side::A => session::run(a, &session, listener, cancel).await?,
                Side::B => session::run(b, &session, listener, cancel).await?,
            };
            let Some(result) = results.pop() else { continue };
            on_repetition(side, i, &result);
            match side {
                Side::A => runs_a.push(result),
                Side::B => runs_b.push(result),
            }
        }
    }
    let comparison = compare_results(&runs_a, &runs_b, x.slo, &CompareOptions::default())?;
    Ok(Experiment { a: runs_a, b: runs_b, comparison })
}

/// Compares saved results: each result is one repetition. All must have run the same workload
/// (and the same `ignore_eos` and SLOs), or the comparison would measure the workloads' difference.
/// `slo`: the SLOs for goodput; `None` takes the results' own (when they have the same).
pub fn compare_results(
    a: &[BenchResult],
    b: &[BenchResult],
    slo: Option<&Slo>,
    options: &CompareOptions,
) -> Result<Comparison> {
    let first = a.first().or(b.first()).ok_or_else(|| Error::Invalid("compare: no results on either side".into()))?;
    for (side, results) in [("A", a), ("B", b)] {
        if results.is_empty() {
            return Err(Error::Invalid(format!("compare: side {side} has no results")));
        }
        for (i, r) in results.iter().enumerate() {
            let differs = |what: &str, mine: String, theirs: String| {
                Error::Invalid(format!(
                    "compare: the workloads differ: {side} run {} has {what} {mine}, the first run has {theirs}",
                    i + 1
                ))
            };
            let (w, w0) = (&r.config.workload, &first.config.workload);
            if w != w0 {
                let show = |w: &Option<WorkloadSpec>| w.as_ref().map_or("none recorded".into(), |w| format!("{w:?}"));
                return Err(differs("workload", show(w), show(w0)));
            }
            if r.config.ignore_eos != first.config.ignore_eos {
                return Err(differs(
                    "ignore_eos",
                    format!("{:?}", r.config.ignore_eos),
                    format!("{:?}", first.config.ignore_eos),
                ));
            }
            if slo.is_none() && r.config.slo != first.config.slo {
                return Err(differs("SLOs", format!("{:?}", r.config.slo), format!("{:?}", first.config.slo)));
            }
            if r.requests.is_empty() {
                return Err(Error::Invalid(format!("compare: {side} run {} has no requests", i + 1)));
            }
        }
    }
    if first.config.workload.is_none() {
        return Err(Error::Invalid("compare: the results do not record their workload".into()));
    }
    let own_slo = match (slo, &first.config.slo) {
        (Some(_), _) | (None, None) => None,
        (None, Some(text)) => Some(text.parse::<Slo>()?),
    };
    let slo = slo.or(own_slo.as_ref());
    let requests = |rs: &[BenchResult]| rs.iter().map(|r| r.requests.clone()).collect::<Vec<_>>();
    compare::compare(&requests(a), &requests(b), slo, options)
}
