//! `bench --rate max`: the highest arrival rate whose measured SLO attainment meets a target,
//! found by real runs. One criterion: the share of requests within every SLO ([`Slo::met_by`]),
//! over the run's steady window ([`crate::bench::measure::steady`]) when it reached one, else over the
//! whole run ([`attainment_of`]).
//!
//! 1. **A first run** ([`first_run`]): the warm-up and baseline, then the workload at the rate one
//!    request at a time sustains (1 / its E2E alone, from the baseline; [`START_RPS`] without one).
//!    On the engine it is sized by its steps, not its requests: its request count doubles until it
//!    gives the planner's fit [`MIN_STEPS`] measured steps.
//! 2. **A bracket** ([`search`]), from a first guess: the planner's prediction on the engine (the
//!    caller fits it on the first run's steps; the `planner` layer is above this one), the first
//!    run's rate for a server (a short rising sweep). The guess is run; a rate that meets the
//!    target is multiplied by [`GROW`] until one misses, a rate that misses divided until one
//!    meets.
//! 3. **Narrowing**: the geometric middle of the bracket is run and replaces its end, until the
//!    bracket's ends are within the tolerance of each other (`hi ≤ lo · (1 + tolerance)`) or the
//!    run budget is spent.
//! 4. **Repeats near the boundary**: a run whose attainment is within [`NEAR`] of the target is run
//!    [`REPEATS`] times in all on the same planned arrivals, and the rate is decided on their
//!    pooled attainment, so that one noisy run cannot decide it.
//!
//! The result ([`MaxRate`]): the rate (the bracket's low end), its bracket, every run that decided
//! it (each a full [`BenchResult`] in the caller's list), and the SLO limiting at the boundary (the
//! one the fewest requests met at the bracket's high end).

use std::cell::Cell;
use std::rc::Rc;

use serde::{Deserialize, Serialize};

use crate::bench::base::confidence::{min_passing, EARLY_STOPPING_CONFIDENCE};
use crate::bench::base::lang::Lang;
use crate::bench::measure::decided::{DecideRule, Decided};
use crate::bench::measure::metrics::Slo;
use crate::bench::measure::steady::SteadyState;
use crate::bench::record::raw::RequestRecord;
use crate::bench::record::run_config::Criteria;
use crate::bench::result::BenchResult;
use crate::bench::run::session::{run_into, warm_up_and_baseline, SessionSpec};
use crate::bench::run::target::{Listener, Target};
use crate::bench::traffic::workload::WorkloadSpec;
use crate::bench::verdict::diagnosis::Baseline;
use crate::engine::cost::MIN_STEPS;
use crate::error::{Error, Result};

/// The first run's rate without a baseline to start from, requests per second.
pub const START_RPS: f64 = 1.0;
/// The bracket grows (or shrinks) by this factor a run.
pub const GROW: f64 = 2.0;
/// A run this close to the target attainment is repeated…
pub const NEAR: f64 = 0.03;
/// …to this many runs at its rate, pooled.
pub const REPEATS: usize = 3;
/// The first run on the engine doubles its requests at most this many times to reach
/// [`MIN_STEPS`] steps.
const SIZING_DOUBLINGS: usize = 4;
/// Rates outside this range end the bracketing: nothing meets the SLOs even this slowly, or
/// everything does this fast.
const SLOWEST_RPS: f64 = 1e-3;
const FASTEST_RPS: f64 = 1e6;

/// How `--rate max` searches (the run request's `search`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct RateSearch {
    /// The share of requests that must meet every SLO.
    pub attainment: f64,
    /// The bracket is narrowed until `hi ≤ lo · (1 + tolerance)`.
    pub tolerance: f64,
    /// Runs at most, the first run, repeats and the runs sizing it included.
    pub max_runs: usize,
    /// A bracketing or narrowing run's arrivals span about this many seconds at most: its
    /// requests are `rate × run_s` where that is fewer than the workload's (never fewer than
    /// [`RateSearch::min_requests`]).
    #[serde(default = "RateSearch::default_run_s")]
    pub run_s: f64,
}

impl RateSearch {
    pub const TOLERANCE: f64 = 0.05;
    pub const MAX_RUNS: usize = 24;
    pub const RUN_S: f64 = 60.0;

    pub fn new(attainment: f64) -> RateSearch {
        RateSearch { attainment, tolerance: Self::TOLERANCE, max_runs: Self::MAX_RUNS, run_s: Self::RUN_S }
    }

    fn default_run_s() -> f64 {
        Self::RUN_S
    }

    /// The fewest requests a run is cut to: those that could decide it met with none over the
    /// SLOs ([`crate::bench::base::confidence::min_passing`]: 44 at 90%, 459 at 99%).
    pub fn min_requests(&self) -> usize {
        min_passing(0, self.attainment, EARLY_STOPPING_CONFIDENCE)
    }

    /// A run's requests at `rate`, from the workload's `planned` ([`RateSearch::run_s`]).
    pub fn requests_at(&self, rate: f64, planned: usize) -> usize {
        let by_time = (rate * self.run_s).ceil();
        if by_time.is_finite() && by_time < planned as f64 {
            (by_time as usize).max(self.min_requests()).min(planned)
        } else {
            planned
        }
    }
}

/// Why a run was made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stage {
    /// A burst of a few requests at once ([`probe`]): what the target serves flat out, the first
    /// guess where there is no prediction. It decides no rate.
    Probe,
    First,
    Bracket,
    Narrow,
    Repeat,
}

/// One run of the search.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Trial {
    /// Requests per second; the probe's is infinite (`null` in JSON).
    #[serde(with = "crate::bench::traffic::workload::infinite_rate")]
    pub rate: f64,
    pub stage: Stage,
    /// Its index in the results (the JSON's `results`).
    pub result: usize,
    /// The share of its requests within every SLO ([`attainment_of`]).
    pub attainment: f64,
    /// Over its steady window (else the whole run).
    pub steady: bool,
    /// Each SLO alone: the share of the same requests within it.
    pub per_slo: Vec<(String, f64)>,
    /// The rate's verdict (pooled over its repeats): it met the target.
    pub met: bool,
    /// The run was stopped once its attainment was decided ([`crate::bench::measure::decided`]),
    /// which is then its verdict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided: Option<Decided>,
}

/// What the search found.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MaxRate {
    /// The highest rate run that met the target (the bracket's low end); `None` when none did.
    pub rate: Option<f64>,
    /// Met at `lo` (0 when no rate did), missed at `hi` (`null`: no rate missed).
    #[serde(with = "crate::bench::base::stats::nan_as_null")]
    pub lo: f64,
    #[serde(with = "crate::bench::base::stats::nan_as_null")]
    pub hi: f64,
    pub attainment: f64,
    pub tolerance: f64,
    pub slo: String,
    /// The bracket was narrowed to the tolerance (not stopped by the run budget or a bound).
    pub converged: bool,
    /// The search stopped rising at a rate where every request arrived before the first one
    /// finished and the target was still met: a higher rate only brings the same requests sooner,
    /// so this workload cannot show the limit (more requests can).
    #[serde(default)]
    pub whole_workload_at_once: bool,
    /// Where the bracket started, in words.
    pub first_guess: String,
    /// The SLO the fewest requests met at `hi`, and that share.
    pub limiting: Option<(String, f64)>,
    pub trials: Vec<Trial>,
    pub max_runs: usize,
    /// What the search's runs cost: requests sent, and seconds from each run's start to its last
    /// request's end, summed (the warm-up and baseline aside).
    #[serde(default)]
    pub spent_requests: usize,
    #[serde(default)]
    pub spent_s: f64,
    /// An objective one request alone already breaks: the search ended at the baseline, before
    /// any run (no rate can meet it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unreachable: Option<Unreachable>,
}

/// An objective the baseline breaks: the workload's longest request alone (the median of
/// [`crate::bench::run::session::BASELINE_REQUESTS`]) is over it, so at any rate at least the
/// requests that long are.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Unreachable {
    /// `ttft_ms`, `tpot_ms` or `e2e_ms`.
    pub objective: String,
    pub limit_ms: f64,
    /// The request alone's figure (E2E: its TTFT and TPOT over the longest output).
    pub alone_ms: f64,
}

impl Unreachable {
    /// The first objective of `slo` the baseline breaks, for outputs of `outputs` tokens.
    pub fn of(baseline: &Baseline, slo: &Slo, outputs: usize) -> Option<Unreachable> {
        let e2e = baseline.ttft_ms + baseline.tpot_ms * (outputs.max(2) - 1) as f64;
        [
            ("ttft_ms", slo.ttft_ms, baseline.ttft_ms),
            ("tpot_ms", slo.tpot_ms, baseline.tpot_ms),
            ("e2e_ms", slo.e2e_ms, e2e),
        ]
        .into_iter()
        .find_map(|(objective, limit, alone)| {
            let limit_ms = limit.filter(|&l| alone > l)?;
            Some(Unreachable { objective: objective.into(), limit_ms, alone_ms: alone })
        })
    }

    pub fn text(&self, lang: Lang) -> String {
        let (o, limit, alone) = (&self.objective, self.limit_ms, self.alone_ms);
        match lang {
            Lang::En => format!(
                "no rate can meet {o}={limit}: one request alone (the baseline, the workload's longest) takes \
                 {alone:.1} ms"
            ),
            Lang::Zh => {
                format!("任何速率都无法满足 {o}={limit}：单个请求独占时（基线，负载中最长的请求）就需 {alone:.1} ms")
            }
        }
    }
}

/// The share of `records` within every SLO of `slo`, failed requests included, over the run's
/// steady window when it reached one; whether it did, and each SLO's share alone.
pub fn attainment_of(records: &[RequestRecord], slo: &Slo) -> (f64, bool, Vec<(String, f64)>) {
    let steady = SteadyState::of(records, &[], Some(slo)).filter(SteadyState::reached);
    let counted: Vec<&RequestRecord> = records
        .iter()
        .filter(|r| r.arrival_s.is_finite())
        .filter(|r| steady.as_ref().is_none_or(|s| r.arrival_s >= s.from_s && r.arrival_s <= s.to_s))
        .collect();
    let share = |slo: &Slo| counted.iter().filter(|r| slo.met_by(r)).count() as f64 / counted.len().max(1) as f64;
    let alone =
        |name: &str, limit: Option<f64>, make: fn(f64) -> Slo| limit.map(|l| (name.to_string(), share(&make(l))));
    let per_slo = [
        alone("ttft_ms", slo.ttft_ms, |l| Slo { ttft_ms: Some(l), ..Slo::default() }),
        alone("tpot_ms", slo.tpot_ms, |l| Slo { tpot_ms: Some(l), ..Slo::default() }),
        alone("e2e_ms", slo.e2e_ms, |l| Slo { e2e_ms: Some(l), ..Slo::default() }),
    ]
    .into_iter()
    .flatten()
    .collect();
    (share(slo), steady.is_some(), per_slo)
}

/// The search's runs, over one target: each a session of one rate pushed to `results`.
pub struct Searcher<'a, 'b, T: Target> {
    pub target: &'a mut T,
    pub session: &'a SessionSpec<'b>,
    pub search: RateSearch,
    pub slo: &'a Slo,
    pub listener: &'a Listener,
    pub cancel: &'a Rc<Cell<bool>>,
    pub results: &'a mut Vec<BenchResult>,
    pub trials: Vec<Trial>,
    /// The workload every run is made of, at its rate: the session's, with the first run's
    /// request count once it was sized by its steps.
    pub spec: WorkloadSpec,
}

impl<'a, 'b, T: Target> Searcher<'a, 'b, T> {
    /// A search on `target` of `session`'s workload (its rates unused) for `slo`; each run's result
    /// is pushed to `results`.
    pub fn new(
        target: &'a mut T,
        session: &'a SessionSpec<'b>,
        search: RateSearch,
        slo: &'a Slo,
        listener: &'a Listener,
        cancel: &'a Rc<Cell<bool>>,
        results: &'a mut Vec<BenchResult>,
    ) -> Self {
        Searcher {
            target,
            session,
            search,
            slo,
            listener,
            cancel,
            results,
            trials: Vec::new(),
            spec: session.spec.clone(),
        }
    }

    /// The rate of the last run so far (the first run's, after [`first_run`]).
    pub fn last_rate(&self) -> Option<f64> {
        self.trials.last().map(|t| t.rate)
    }

    /// One run at `rate` (its workload `spec` at that rate), recorded as a trial of `stage`. A
    /// bracketing, narrowing or repeated run is sized by duration ([`RateSearch::requests_at`])
    /// and stopped once its attainment is decided; the first run and the probe go to their end.
    async fn run(&mut self, spec: &WorkloadSpec, rate: f64, stage: Stage) -> Result<usize> {
        if self.cancel.get() {
            return Err(Error::Cancelled);
        }
        let decides = matches!(stage, Stage::Bracket | Stage::Narrow | Stage::Repeat);
        let num_requests = if decides { self.search.requests_at(rate, spec.num_requests) } else { spec.num_requests };
        let spec = WorkloadSpec { rate, num_requests, ..spec.clone() };
        let rates = [rate];
        // A trial without a steady state cannot decide the search (unless decided while it ran):
        // its verdict says so.
        let criteria = Criteria { steady_required: stage != Stage::Probe, ..self.session.criteria };
        let session = SessionSpec { spec: &spec, rates: &rates, baseline: false, criteria, ..*self.session };
        let before = self.results.len();
        let rule = DecideRule { slo: self.slo.clone(), attainment: self.search.attainment };
        self.target.decide_early(decides.then_some(rule));
        let ran = run_into(self.target, &session, self.listener, self.cancel, self.results).await;
        self.target.decide_early(None);
        ran?;
        let result = self.results.get(before).ok_or(Error::Cancelled)?;
        let (attainment, steady, per_slo) = attainment_of(&result.requests, self.slo);
        let decided = result.decided.clone();
        let trial = Trial { rate, stage, result: before, attainment, steady, per_slo, met: false, decided };
        self.trials.push(trial);
        Ok(self.trials.len() - 1)
    }

    /// Whether `rate` meets the target: one run, or [`REPEATS`] pooled when the first is near it.
    async fn decide(&mut self, rate: f64, stage: Stage) -> Result<bool> {
        let spec = self.spec.clone();
        let first = self.run(&spec, rate, stage).await?;
        self.settle(vec![first]).await
    }

    /// The verdict at the rate of the trials `runs` (already run, at one rate), repeating the last
    /// when it is near the target and was not decided while it ran; every one of them gets it.
    async fn settle(&mut self, mut runs: Vec<usize>) -> Result<bool> {
        let last = *runs.last().expect("a run to settle");
        let (rate, target) = (self.trials[last].rate, self.search.attainment);
        if let Some(met) = self.trials[last].decided.as_ref().map(|d| d.met) {
            for &i in &runs {
                self.trials[i].met = met;
            }
            return Ok(met);
        }
        if (self.trials[last].attainment - target).abs() <= NEAR {
            let spec = self.spec.clone();
            while runs.len() < REPEATS && self.trials.len() < self.search.max_runs {
                runs.push(self.run(&spec, rate, Stage::Repeat).await?);
            }
        }
        // Pooled: every counted request of the runs at this rate alike.
        let (good, counted) = runs.iter().fold((0.0, 0.0), |(g, n), &i| {
            let requests = self.counted(i) as f64;
            (g + self.trials[i].attainment * requests, n + requests)
        });
        let met = counted > 0.0 && good / counted >= target;
        for &i in &runs {
            self.trials[i].met = met;
        }
        Ok(met)
    }

    /// Requests trial `i`'s attainment counted (its steady window's, or all).
    fn counted(&self, i: usize) -> usize {
        let result = &self.results[self.trials[i].result];
        match result.metrics.steady.as_ref().filter(|s| s.reached() && self.trials[i].steady) {
            Some(s) => s.requests,
            None => result.requests.iter().filter(|r| r.arrival_s.is_finite()).count(),
        }
    }

    /// The highest rate that met the target, and the lowest above it that missed (NaN: none);
    /// the probe decides neither.
    fn bounds(&self) -> (f64, f64) {
        let deciding = || self.trials.iter().filter(|t| t.stage != Stage::Probe);
        let lo = deciding().filter(|t| t.met).map(|t| t.rate).fold(f64::NAN, f64::max);
        let above = |t: &&Trial| !t.met && (lo.is_nan() || t.rate > lo);
        let hi = deciding().filter(above).map(|t| t.rate).fold(f64::NAN, f64::min);
        (lo, hi)
    }

    /// Whether, in the last run at `rate`, every request arrived before the first one finished.
    fn all_at_once(&self, rate: f64) -> bool {
        let Some(t) = self.trials.iter().rev().find(|t| t.rate == rate) else { return false };
        let requests = &self.results[t.result].requests;
        let last_arrival = requests.iter().map(|r| r.arrival_s).filter(|a| a.is_finite()).fold(f64::NAN, f64::max);
        let first_finish = requests.iter().filter_map(|r| r.finish_s).fold(f64::NAN, f64::min);
        last_arrival < first_finish
    }

    fn budget_left(&self) -> bool {
        self.trials.len() < self.search.max_runs
    }
}

/// What the warm-up and baseline say before any run.
enum Start {
    /// An objective one request alone already breaks.
    Unreachable(Unreachable),
    /// Seconds one request alone takes (`None`: no baseline, or it failed).
    Alone(Option<f64>),
}

/// The warm-up and baseline, when the session asks for them.
async fn start<T: Target>(s: &mut Searcher<'_, '_, T>) -> Result<Start> {
    let baseline = if s.session.baseline {
        warm_up_and_baseline(s.target, s.session.spec, s.listener, s.cancel).await?
    } else {
        None
    };
    let outputs = s.session.spec.output_len.max;
    if let Some(u) = baseline.as_ref().filter(|b| b.error.is_none()).and_then(|b| Unreachable::of(b, s.slo, outputs)) {
        return Ok(Start::Unreachable(u));
    }
    Ok(Start::Alone(baseline.and_then(|b| b.alone_s(outputs))))
}

/// The first run (see the module): the warm-up and baseline when the session asks for them, then
/// the workload at 1 / (the baseline's E2E alone), or [`START_RPS`]; on a target that reports steps,
/// its requests doubled until it gives [`MIN_STEPS`] of them. Its trial is the searcher's first.
pub async fn first_run<T: Target>(s: &mut Searcher<'_, '_, T>) -> Result<Option<Unreachable>> {
    match start(s).await? {
        Start::Unreachable(u) => Ok(Some(u)),
        Start::Alone(alone_s) => sized_first_run(s, alone_s).await.map(|()| None),
    }
}

/// The probe's requests at most: all sent at once.
pub const PROBE_REQUESTS: usize = 16;

/// A burst of [`PROBE_REQUESTS`] (the workload's count where fewer) sent at once: the requests
/// served per second from the first send to the last end, what the target sustains flat out
/// (`None` when fewer than two succeeded). Its trial ([`Stage::Probe`]) decides no rate.
pub async fn probe<T: Target>(s: &mut Searcher<'_, '_, T>) -> Result<Option<(f64, usize)>> {
    let spec = WorkloadSpec { num_requests: s.spec.num_requests.min(PROBE_REQUESTS), ..s.spec.clone() };
    let i = s.run(&spec, f64::INFINITY, Stage::Probe).await?;
    let records = &s.results[s.trials[i].result].requests;
    let served: Vec<&RequestRecord> = records.iter().filter(|r| r.succeeded()).collect();
    let first = records.iter().map(|r| r.sent_s.unwrap_or(r.arrival_s)).fold(f64::INFINITY, f64::min);
    let last = served.iter().filter_map(|r| r.finish_s).fold(f64::NEG_INFINITY, f64::max);
    let rate = served.len() as f64 / (last - first);
    Ok((served.len() >= 2 && rate.is_finite() && rate > 0.0).then_some((rate, records.len())))
}

/// The first run at the rate one request alone sustains (`alone_s`; [`START_RPS`] without it).
async fn sized_first_run<T: Target>(s: &mut Searcher<'_, '_, T>, alone_s: Option<f64>) -> Result<()> {
    let rate = alone_s.map_or(START_RPS, |t| 1.0 / t);
    let mut runs = Vec::new();
    for doubling in 0..=SIZING_DOUBLINGS {
        let spec = s.spec.clone();
        let i = s.run(&spec, rate, Stage::First).await?;
        runs.push(i);
        let steps = s.results[s.trials[i].result].steps.iter().filter(|st| st.shape.is_some()).count();
        if !s.target.reports_steps() || steps >= MIN_STEPS || doubling == SIZING_DOUBLINGS || !s.budget_left() {
            break;
        }
        // Too few steps for the planner: a longer run; every later run is this long too (the
        // shorter ones still count, pooled at this rate).
        s.spec.num_requests = (s.spec.num_requests * 2).min(crate::limits::MAX_REQUESTS);
    }
    s.settle(runs).await?;
    Ok(())
}

/// Brackets from `first_guess` (its run is the first trial's when the rates agree), narrows to
/// the tolerance, and says what it found. `guess_from`: where the guess came from, in words.
pub async fn search<T: Target>(mut s: Searcher<'_, '_, T>, first_guess: f64, guess_from: &str) -> Result<MaxRate> {
    if !(first_guess.is_finite() && first_guess > 0.0) {
        return Err(Error::Invalid(format!("--rate max: a first guess of {first_guess} req/s")));
    }
    // Bracketing: met at lo, missed at hi, from every run so far (the first run's included).
    let known = |s: &Searcher<'_, '_, T>, rate: f64| s.trials.iter().rev().find(|t| t.rate == rate).map(|t| t.met);
    let mut rate = first_guess;
    let mut converged = true;
    let mut at_once = false;
    let (mut lo, mut hi) = loop {
        let met = match known(&s, rate) {
            Some(met) => met,
            None => s.decide(rate, Stage::Bracket).await?,
        };
        let (lo, hi) = s.bounds();
        if lo.is_finite() && hi.is_finite() {
            break (lo, hi);
        }
        if met && s.all_at_once(rate) {
            (converged, at_once) = (false, true);
            break (lo, hi);
        }
        rate = if met { rate * GROW } else { rate / GROW };
        if !(SLOWEST_RPS..=FASTEST_RPS).contains(&rate) || !s.budget_left() {
            converged = false;
            break (lo, hi);
        }
    };
    // Narrowing, at the bracket's geometric middle.
    while converged && hi > lo * (1.0 + s.search.tolerance) {
        if !s.budget_left() {
            converged = false;
            break;
        }
        let middle = (lo * hi).sqrt();
        if s.decide(middle, Stage::Narrow).await? {
            lo = middle;
        } else {
            hi = middle;
        }
    }
    // The SLO the fewest requests met at the bracket's high end (its last run).
    let limiting = s
        .trials
        .iter()
        .rev()
        .find(|t| t.rate == hi)
        .and_then(|t| t.per_slo.iter().min_by(|a, b| a.1.total_cmp(&b.1)).cloned());
    let runs = s.trials.iter().filter_map(|t| s.results.get(t.result));
    let (spent_requests, spent_s) = runs.fold((0, 0.0), |(n, secs), r| {
        let end = r.requests.iter().filter_map(RequestRecord::ended_s).fold(0.0, f64::max);
        (n + r.requests.len(), secs + end)
    });
    Ok(MaxRate {
        rate: lo.is_finite().then_some(lo),
        lo: if lo.is_finite() { lo } else { 0.0 },
        hi,
        attainment: s.search.attainment,
        tolerance: s.search.tolerance,
        slo: s.session.slo_text.unwrap_or_default().to_string(),
        converged,
        whole_workload_at_once: at_once,
        first_guess: format!("{first_guess:.3} req/s ({guess_from})"),
        limiting,
        max_runs: s.search.max_runs,
        trials: std::mem::take(&mut s.trials),
        spent_requests,
        spent_s,
        unreachable: None,
    })
}

/// The first rate a search tries after its first run, from that run's results: the capacity
/// planner's prediction on the engine (the planner sits above `bench`, so it comes in as a value).
pub trait FirstGuess {
    /// A rate for `slo` met by `attainment` of requests, or why there is none.
    fn guess<'a>(
        &'a self,
        runs: &'a [BenchResult],
        slo: &'a Slo,
        attainment: f64,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<f64>> + 'a>>;

    /// Where the guess comes from, in words (the result's `first_guess`).
    fn source(&self) -> &'static str;
}

/// `--rate max` on `target`: the warm-up and baseline, then, with a `guess` (the engine's
/// planner), the first run ([`first_run`]) and the [`search`] from the guess's rate; without one
/// (a server), a [`probe`] and the search from the rate it served. Where the guess has none or the
/// probe served nothing, the search rises from the first run's rate (the reason goes in the
/// result's `first_guess`).
#[allow(clippy::too_many_arguments)] // a search's parts, each passed through as it is
pub async fn find<T: Target>(
    target: &mut T,
    session: &SessionSpec<'_>,
    search_for: RateSearch,
    slo: &Slo,
    guess: Option<&dyn FirstGuess>,
    listener: &Listener,
    cancel: &Rc<Cell<bool>>,
    results: &mut Vec<BenchResult>,
) -> Result<MaxRate> {
    let mut s = Searcher::new(target, session, search_for, slo, listener, cancel, results);
    let alone_s = match start(&mut s).await? {
        Start::Alone(alone_s) => alone_s,
        Start::Unreachable(unreachable) => {
            return Ok(MaxRate {
                rate: None,
                lo: 0.0,
                hi: 0.0,
                attainment: search_for.attainment,
                tolerance: search_for.tolerance,
                slo: session.slo_text.unwrap_or_default().to_string(),
                converged: false,
                whole_workload_at_once: false,
                first_guess: "none: the baseline breaks the SLO".into(),
                limiting: None,
                trials: Vec::new(),
                max_runs: search_for.max_runs,
                spent_requests: 0,
                spent_s: 0.0,
                unreachable: Some(unreachable),
            })
        }
    };
    let rising = "a rising sweep from the first run's rate";
    let (rate, from) = match guess {
        None => match probe(&mut s).await? {
            Some((rate, n)) => (rate, format!("a probe: {n} requests at once were served at {rate:.3} req/s")),
            None => {
                sized_first_run(&mut s, alone_s).await?;
                (s.last_rate().unwrap_or(START_RPS), format!("{rising}; the probe served no rate"))
            }
        },
        Some(g) => {
            sized_first_run(&mut s, alone_s).await?;
            let first = s.last_rate().unwrap_or(START_RPS);
            match g.guess(s.results, slo, search_for.attainment).await {
                Ok(rate) => (rate, g.source().to_string()),
                Err(e) => (first, format!("{rising}; no prediction: {e}")),
            }
        }
    };
    search(s, rate, &from).await
}

impl MaxRate {
    /// Every rate tried met the SLOs: the search found no limit, only that the target sustains
    /// `lo` (its headline says so rather than "highest rate").
    pub fn no_limit_found(&self) -> bool {
        self.rate.is_some() && !self.hi.is_finite()
    }
}

/// Each result's rate: a search's results are at the rates it picked.
pub fn rates_of(results: &[BenchResult]) -> Vec<f64> {
    results.iter().map(|r| r.config.workload.as_ref().map_or(f64::NAN, |w| w.rate)).collect()
}
