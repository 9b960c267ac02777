//! The launcher: the one place an engine in this process becomes a benchmark target
//! ([`EngineTarget`], built here and nowhere else in `src/`; a test holds it here). An edge — the
//! CLI's `bench`, `compare` and `plan`, `bin/dawn.rs`, the page's worker, the capacity planner —
//! loads the engine and says what it loaded ([`OnEngine`]); the launcher makes the prompts for the
//! engine's model (text through a tokenizer, or seeded random ids), builds the target and runs a
//! plain run, a sweep or `--rate max` ([`run`]), or hands the targets to a caller that drives them
//! itself, an experiment's rounds ([`with_targets`]).

use std::cell::Cell;
use std::rc::Rc;

use crate::bench::base::thinking::ThinkTags;
use crate::bench::measure::decided::{DecideRule, Decided};
use crate::bench::measure::energy::{GpuReadings, NvmlMeter};
use crate::bench::measure::metrics::Slo;
use crate::bench::measure::saturation::Saturation;
use crate::bench::record::raw::{RequestRecord, StepSample};
use crate::bench::record::run_config::{RecordedExecutor, RunConfig};
use crate::bench::result::BenchResult;
use crate::bench::run::driver::{self, Progress};
use crate::bench::run::max_rate::{self, FirstGuess, MaxRate, RateSearch};
use crate::bench::run::release::Stop;
use crate::bench::run::session::{run_into, SessionSpec};
use crate::bench::run::target::{Listener, SessionEvent, Target};
use crate::bench::traffic::prompts::PromptSource;
use crate::bench::traffic::workload::{PlannedRequest, WorkloadSpec};
use crate::engine::{Engine, ForwardPass, SamplingParams};
use crate::error::{Error, Result};
use crate::model::Tokenizer;

/// What an edge loaded for runs on an engine in this process: the engine, how its prompts are
/// made, and what the run record says of it.
pub struct OnEngine<'a, X: RecordedExecutor = ForwardPass> {
    pub engine: &'a mut Engine<X>,
    /// Text prompts through this tokenizer (unless `random_prompts`); its thinking tags split the
    /// replies into reasoning and answer. `None`: seeded random ids, no split.
    pub tokenizer: Option<&'a Tokenizer>,
    pub random_prompts: bool,
    /// The run record's target and model (the launcher adds the prompts' kind; the engine its
    /// adapter, kernels and limits).
    pub describe: RunConfig,
    /// The GPU's power and energy through NVML, read around each run (the CLI on a native GPU;
    /// without NVML a run's energy is absent, with the reason). `None`: not read.
    pub meter: Option<NvmlMeter>,
    /// The replies are text (`false`: the capacity planner's simulated engine, whose replies are
    /// not, so they are never split by thinking tags).
    pub replies_are_text: bool,
}

impl<'a, X: RecordedExecutor> OnEngine<'a, X> {
    /// `engine`'s runs with prompts through `tokenizer` (or seeded random ids), unmetered.
    pub fn new(
        engine: &'a mut Engine<X>,
        tokenizer: Option<&'a Tokenizer>,
        random_prompts: bool,
        describe: RunConfig,
    ) -> Self {
        OnEngine { engine, tokenizer, random_prompts, describe, meter: None, replies_are_text: true }
    }

    /// The prompts of `spec`'s requests for this engine's model.
    fn prompts<'s>(&self, spec: &'s WorkloadSpec) -> PromptSource<'s>
    where
        'a: 's,
    {
        PromptSource::for_model(spec, self.tokenizer, self.random_prompts, self.engine.model.cfg().vocab_size)
    }

    /// The target, its requests' prompts from `prompts`.
    fn target<'s>(self, prompts: &'s PromptSource<'s>) -> EngineTarget<'s, X>
    where
        'a: 's,
    {
        let describe = RunConfig { prompts: Some(prompts.kind().to_string()), ..self.describe };
        let think = if self.replies_are_text { prompts.think_tags() } else { None };
        let target = EngineTarget::new(self.engine, |p: &PlannedRequest| prompts.ids(p), describe, think);
        EngineTarget { nvml: self.meter, ..target }
    }
}

/// `--rate max` as the launcher runs it: the search, the SLO it holds to, and the first guess
/// after the first run (`None`: a rising sweep from that run's rate).
pub struct Search<'a> {
    pub search: RateSearch,
    pub slo: &'a Slo,
    pub guess: Option<&'a dyn FirstGuess>,
}

impl<'a> Search<'a> {
    /// The search a request asks for: `--rate max` (`search`) with its SLO; without either, none
    /// (the request's parser refuses `max` without an SLO).
    pub fn of(search: Option<RateSearch>, slo: Option<&'a Slo>, guess: Option<&'a dyn FirstGuess>) -> Option<Self> {
        search.zip(slo).map(|(search, slo)| Search { search, slo, guess })
    }
}

/// A session on what the edge loaded: with `search`, `--rate max` (its result returned), else a
/// plain run or a sweep of `session`'s rates. Every rate's result is pushed to `results` as it
/// ends, so a caller still has the finished rates when a later one fails.
pub async fn run<X: RecordedExecutor>(
    on: OnEngine<'_, X>,
    session: &SessionSpec<'_>,
    search: Option<Search<'_>>,
    listener: &Listener,
    cancel: &Rc<Cell<bool>>,
    results: &mut Vec<BenchResult>,
) -> Result<Option<MaxRate>> {
    let prompts = on.prompts(session.spec);
    let mut target = on.target(&prompts);
    drive(&mut target, session, search, listener, cancel, results).await
}

/// [`run`] on any target (a server's clients call it with theirs): `--rate max` with `search`,
/// else the session's rates.
pub async fn drive<T: Target>(
    target: &mut T,
    session: &SessionSpec<'_>,
    search: Option<Search<'_>>,
    listener: &Listener,
    cancel: &Rc<Cell<bool>>,
    results: &mut Vec<BenchResult>,
) -> Result<Option<MaxRate>> {
    match search {
        Some(Search { search, slo, guess }) => {
            max_rate::find(target, session, search, slo, guess, listener, cancel, results).await.map(Some)
        }
        None => run_into(target, session, listener, cancel, results).await.map(|()| None),
    }
}

/// One run of `plan` on what the edge loaded, outside a session, for a caller that builds its
/// engine for each run (the page's A/B sides share one uploaded model): the records and steps,
/// the run record and the saturation verdict, as the target left them.
pub async fn run_plan<X: RecordedExecutor>(
    on: OnEngine<'_, X>,
    plan: &[PlannedRequest],
    spec: &WorkloadSpec,
    ignore_eos: bool,
    listener: &Listener,
    cancel: &Rc<Cell<bool>>,
) -> (Result<(Vec<RequestRecord>, Vec<StepSample>)>, RunConfig, Option<Saturation>) {
    let prompts = on.prompts(spec);
    let mut target = on.target(&prompts);
    let ran = target.run(plan, spec, ignore_eos, listener, cancel).await;
    (ran, target.run_config(), target.take_saturation())
}

/// The targets of several loaded engines, each making `spec`'s prompts for its model, handed to
/// `drive` (an experiment's rounds: the CLI's `compare`, the page's A/B). Each target's engine and
/// prompts are its side's; the result is `drive`'s.
pub async fn with_targets<X: RecordedExecutor, R>(
    sides: Vec<OnEngine<'_, X>>,
    spec: &WorkloadSpec,
    drive: impl AsyncFnOnce(&mut [EngineTarget<'_, X>]) -> R,
) -> R {
    let prompts: Vec<PromptSource> = sides.iter().map(|on| on.prompts(spec)).collect();
    let mut targets: Vec<EngineTarget<X>> = sides.into_iter().zip(&prompts).map(|(on, p)| on.target(p)).collect();
    drive(&mut targets).await
}

/// A request's prompt ids, made when the driver releases it.
type PromptFn<'a> = dyn Fn(&PlannedRequest) -> Result<Vec<u32>> + 'a;

/// An engine in this process as a target — on the GPU, or on the capacity planner's virtual
/// clock (the `planner` layer above) — with its prompts (text through a tokenizer, or seeded random ids)
/// and sampling.
pub struct EngineTarget<'a, X: RecordedExecutor = ForwardPass> {
    engine: &'a mut Engine<X>,
    prompt: Box<PromptFn<'a>>,
    sampling: SamplingParams,
    /// The run record's target, model and prompts (the engine adds adapter, kernels, limits).
    describe: RunConfig,
    /// Why the last run ended early, if it did ([`Target::take_saturation`], [`Target::take_decided`]).
    stop: Option<Stop>,
    /// The next runs stop once their SLO attainment is decided ([`Target::decide_early`]).
    decide: Option<DecideRule>,
    /// The tokenizer's thinking tags, to split replies into reasoning and answer; `None`: no split.
    think: Option<ThinkTags>,
    /// The engine's GPU's power and energy through NVML, read around each run, when asked for.
    nvml: Option<NvmlMeter>,
}

impl<'a, X: RecordedExecutor> EngineTarget<'a, X> {
    /// `engine` as a target, its requests' prompts from `prompt`, greedy; `think`: the
    /// tokenizer's thinking tags (`None`: replies are not split into reasoning and answer). For
    /// tests with prompts of their own; a run's target is built by the launcher ([`OnEngine`]).
    pub fn new(
        engine: &'a mut Engine<X>,
        prompt: impl Fn(&PlannedRequest) -> Result<Vec<u32>> + 'a,
        describe: RunConfig,
        think: Option<ThinkTags>,
    ) -> Self {
        EngineTarget {
            engine,
            prompt: Box::new(prompt),
            sampling: SamplingParams::default(),
            describe,
            stop: None,
            decide: None,
            think,
            nvml: None,
        }
    }
}

/// The run record of a session on `engine`, as its target would write it (for a caller that has
/// measured an engine without running a session on it: `plan --calibrate`).
pub fn engine_run_config<X: RecordedExecutor>(engine: &Engine<X>, describe: RunConfig) -> RunConfig {
    RunConfig {
        engine: Some(engine.model.limits().clone()),
        scheduler: Some(engine.policy()),
        ..engine.model.record(describe)
    }
}

impl<X: RecordedExecutor> Target for EngineTarget<'_, X> {
    fn run_config(&self) -> RunConfig {
        engine_run_config(self.engine, self.describe.clone())
    }

    fn reports_steps(&self) -> bool {
        true
    }

    async fn run(
        &mut self,
        plan: &[PlannedRequest],
        spec: &WorkloadSpec,
        ignore_eos: bool,
        listener: &Listener,
        cancel: &Rc<Cell<bool>>,
    ) -> Result<(Vec<RequestRecord>, Vec<StepSample>)> {
        let options = driver::DriverOptions {
            spec,
            sampling: self.sampling,
            ignore_eos,
            prompt: &*self.prompt,
            think: self.think,
            decide: self.decide.clone(),
        };
        let on_progress = &mut |p: &Progress| listener(SessionEvent::Progress(p));
        if let Some(meter) = self.nvml.as_mut() {
            meter.start(self.engine.model.now_s());
        }
        let ran = driver::run_watched(self.engine, plan, &options, on_progress, &|| cancel.get()).await;
        if let Some(meter) = self.nvml.as_mut() {
            meter.stop(self.engine.model.now_s());
        }
        let (records, steps, stop) = ran?;
        self.stop = stop;
        Ok((records, steps))
    }

    fn fault(&self) -> Option<Error> {
        self.engine.model.fault()
    }

    fn take_saturation(&mut self) -> Option<Saturation> {
        Stop::take_saturation(&mut self.stop)
    }

    fn decide_early(&mut self, rule: Option<DecideRule>) {
        self.decide = rule;
    }

    fn take_decided(&mut self) -> Option<Decided> {
        Stop::take_decided(&mut self.stop)
    }

    fn take_gpu_metrics(&mut self) -> Option<GpuReadings> {
        self.nvml.as_mut().and_then(NvmlMeter::take)
    }
}
