//! An experiment: the same workload (same seed: same arrivals, lengths and prompts) run under
//! two or more settings in turn, A B C A B C …, so that a machine drifting during the experiment
//! drifts every setting alike; then [`compare`] of each setting against a reference over the
//! repetitions. The CLI's `compare` runs [`run_round_robin`] and [`compare_arms`]; the page's
//! Experiment card, an A/B, calls [`run_alternating`]; both show [`compare::text_report`].

use std::cell::Cell;
use std::rc::Rc;

use serde::{Deserialize, Serialize};

use crate::bench::base::lang::Lang;
use crate::bench::measure::metrics::Slo;
use crate::bench::result::BenchResult;
use crate::bench::run::session::{self, SessionSpec};
use crate::bench::run::target::{Listener, Target};
use crate::bench::traffic::workload::WorkloadSpec;
use crate::bench::verdict::compare::{self, CompareOptions, Comparison};
use crate::bench::verdict::validity::Validity;
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
    /// What each repetition's validity verdict holds it to.
    pub criteria: crate::bench::record::run_config::Criteria,
}

/// Everything an experiment leaves: every repetition's result (summary and requests) per side,
/// in the order they ran, and the comparison.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Experiment {
    pub a: Vec<BenchResult>,
    pub b: Vec<BenchResult>,
    pub comparison: Comparison,
}

/// One setting of a many-way experiment: its name and its repetitions, in the order they ran.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Arm {
    pub name: String,
    pub runs: Vec<BenchResult>,
}

/// One setting against the reference (the comparison's A is the reference, its B the setting).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Versus {
    pub name: String,
    pub reference: String,
    pub comparison: Comparison,
}

/// A many-way experiment: every setting's repetitions, and each other setting against the
/// reference, with intervals that hold for all of them together.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ManyWay {
    pub reference: String,
    pub arms: Vec<Arm>,
    pub versus: Vec<Versus>,
    /// Output quality of settings against a reference, measured apart from the timed runs
    /// ([`crate::bench::verdict::quality`]); empty when no pass ran.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub quality: Vec<crate::bench::verdict::quality::Quality>,
    /// The repetitions stamped INVALID, on which the comparison rests all the same.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub invalid: Vec<InvalidRun>,
}

/// A repetition stamped INVALID ([`BenchResult::validity`]).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct InvalidRun {
    pub setting: String,
    /// 1-based, of `of`.
    pub repetition: usize,
    pub of: usize,
    pub validity: Validity,
}

impl InvalidRun {
    pub fn text(&self, lang: Lang) -> String {
        let verdict = self.validity.text(lang);
        match lang {
            Lang::En => format!("{}'s run {} of {} is {verdict}", self.setting, self.repetition, self.of),
            Lang::Zh => format!("{} 的第 {} / {} 次运行{verdict}", self.setting, self.repetition, self.of),
        }
    }
}

/// Every repetition of every setting that is stamped INVALID.
pub fn invalid_runs<'a>(settings: impl IntoIterator<Item = (&'a str, &'a [BenchResult])>) -> Vec<InvalidRun> {
    let mut invalid = Vec::new();
    for (setting, runs) in settings {
        for (i, run) in runs.iter().enumerate() {
            let validity = run.validity();
            if !validity.valid {
                invalid.push(InvalidRun { setting: setting.to_string(), repetition: i + 1, of: runs.len(), validity });
            }
        }
    }
    invalid
}

/// Runs A, B, A, B, … `repeats` times each (no baseline; after a warm-up run per side), telling
/// `on_repetition` after each run, then compares. Stops with the runs so far when `cancel` is set
/// (an error if a side has none yet).
pub async fn run_alternating<T: Target>(
    a: &mut T,
    b: &mut T,
    x: &ExperimentSpec<'_>,
    listener: &Listener,
    cancel: &Rc<Cell<bool>>,
    on_repetition: &mut dyn FnMut(Side, usize, &BenchResult),
) -> Result<Experiment> {
    let side = |k: usize| if k == 0 { Side::A } else { Side::B };
    let mut runs =
        run_round_robin(&mut [a, b], x, listener, cancel, &mut |k, i, r| on_repetition(side(k), i, r)).await?;
    let (runs_b, runs_a) = (runs.pop().unwrap_or_default(), runs.pop().unwrap_or_default());
    let comparison = compare_results(&runs_a, &runs_b, x.slo, &CompareOptions::default())?;
    Ok(Experiment { a: runs_a, b: runs_b, comparison })
}

/// Runs every target in turn, `repeats` rounds (no baseline; after a warm-up run of each),
/// telling `on_repetition` (target, round, result) after each run; returns each target's runs.
/// Stops with the runs so far when `cancel` is set.
pub async fn run_round_robin<T: Target>(
    targets: &mut [T],
    x: &ExperimentSpec<'_>,
    listener: &Listener,
    cancel: &Rc<Cell<bool>>,
    on_repetition: &mut dyn FnMut(usize, usize, &BenchResult),
) -> Result<Vec<Vec<BenchResult>>> {
    if x.repeats == 0 {
        return Err(Error::Invalid("an experiment needs at least one repetition per side".into()));
    }
    if targets.len() < 2 {
        return Err(Error::Invalid("an experiment needs at least two settings".into()));
    }
    let rates = [x.spec.rate];
    let session = SessionSpec {
        size_rate: false,
        spec: x.spec,
        rates: &rates,
        slo: x.slo,
        slo_text: x.slo_text,
        lang: x.lang,
        baseline: false,
        ignore_eos: x.ignore_eos,
        cost_per_hour: None,
        phases: crate::bench::record::phases::Phases::default(),
        criteria: x.criteria,
    };
    if x.warmup {
        for target in targets.iter_mut() {
            session::run(target, &session, listener, cancel).await?;
        }
    }
    let mut runs: Vec<Vec<BenchResult>> = vec![Vec::new(); targets.len()];
    for i in 0..x.repeats {
        for (k, target) in targets.iter_mut().enumerate() {
            if cancel.get() {
                break;
            }
            let mut results = session::run(target, &session, listener, cancel).await?;
            let Some(result) = results.pop() else { continue };
            on_repetition(k, i, &result);
            runs[k].push(result);
        }
    }
    Ok(runs)
}

/// Each arm but the `reference` against it ([`compare_results`]), with the family-wise interval
/// shared by all of those comparisons.
pub fn compare_arms(arms: &[Arm], reference: usize, slo: Option<&Slo>, options: &CompareOptions) -> Result<ManyWay> {
    let base = arms.get(reference).ok_or_else(|| Error::Invalid("compare: no such reference".into()))?;
    if arms.len() < 2 {
        return Err(Error::Invalid("compare: at least two settings".into()));
    }
    let options = CompareOptions { comparisons: arms.len() - 1, ..options.clone() };
    let versus = arms
        .iter()
        .enumerate()
        .filter(|&(k, _)| k != reference)
        .map(|(_, arm)| {
            let comparison = compare_results(&base.runs, &arm.runs, slo, &options)
                .map_err(|e| Error::Invalid(format!("{} against {}: {e}", arm.name, base.name)))?;
            Ok(Versus { name: arm.name.clone(), reference: base.name.clone(), comparison })
        })
        .collect::<Result<Vec<_>>>()?;
    let invalid = invalid_runs(arms.iter().map(|a| (a.name.as_str(), a.runs.as_slice())));
    Ok(ManyWay { reference: base.name.clone(), arms: arms.to_vec(), versus, quality: Vec::new(), invalid })
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
