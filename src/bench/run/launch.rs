//! The launcher: the one place an engine in this process becomes a benchmark target. A session
//! on an engine ([`run_on_engine`]) makes its prompts for the engine's model (text through a
//! tokenizer, or seeded random ids), builds the [`EngineTarget`] and runs the session; a caller
//! that drives targets itself (`compare`'s rounds, the page's experiment, `plan`'s simulated
//! engine) builds one for its prompts with [`EngineTarget::for_prompts`]. The CLI, the page and the
//! capacity planner all come through here.

use std::cell::Cell;
use std::rc::Rc;

use crate::bench::base::thinking::ThinkTags;
use crate::bench::measure::energy::{GpuReadings, NvmlMeter};
use crate::bench::measure::saturation::Saturation;
use crate::bench::record::raw::{RequestRecord, StepSample};
use crate::bench::record::run_config::{RecordedExecutor, RunConfig};
use crate::bench::result::BenchResult;
use crate::bench::run::driver::{self, Progress};
use crate::bench::run::session::{run_into, SessionSpec};
use crate::bench::run::target::{Listener, SessionEvent, Target};
use crate::bench::traffic::prompts::PromptSource;
use crate::bench::traffic::workload::{PlannedRequest, WorkloadSpec};
use crate::engine::{Engine, ForwardPass, SamplingParams};
use crate::error::{Error, Result};
use crate::model::Tokenizer;

/// Runs `session` on `engine`: prompts for its model (text through `tokenizer` unless
/// `random_prompts` or there is none), the target built, every rate's result pushed to `results`
/// as it ends. `describe`: the run record's target and model (the launcher adds the prompts'
/// kind; the engine its adapter, kernels and limits).
#[allow(clippy::too_many_arguments)] // a session's parts, each passed through as it is
pub async fn run_on_engine<X: RecordedExecutor>(
    engine: &mut Engine<X>,
    tokenizer: Option<&Tokenizer>,
    random_prompts: bool,
    describe: RunConfig,
    session: &SessionSpec<'_>,
    listener: &Listener,
    cancel: &Rc<Cell<bool>>,
    results: &mut Vec<BenchResult>,
) -> Result<()> {
    let vocab_size = engine.model.cfg().vocab_size;
    let prompts = PromptSource::for_model(session.spec, tokenizer, random_prompts, vocab_size);
    let mut target = EngineTarget::for_prompts(engine, &prompts, describe);
    run_into(&mut target, session, listener, cancel, results).await
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
    /// Set by a run that ended early at saturation ([`Target::take_saturation`]).
    saturation: Option<Saturation>,
    /// The tokenizer's thinking tags, to split replies into reasoning and answer; `None`: no split.
    think: Option<ThinkTags>,
    /// The engine's GPU's power and energy through NVML, read around each run, when asked for.
    nvml: Option<NvmlMeter>,
}

impl<'a, X: RecordedExecutor> EngineTarget<'a, X> {
    /// `engine` as a target for a run's prompts, greedy: their kind goes in the run record, and
    /// the tokenizer's thinking tags (if any) split replies into reasoning and answer. What every
    /// caller outside the tests uses (a layer test holds the rest of `src/` to it).
    pub fn for_prompts(engine: &'a mut Engine<X>, prompts: &'a PromptSource<'_>, describe: RunConfig) -> Self {
        let describe = RunConfig { prompts: Some(prompts.kind().to_string()), ..describe };
        EngineTarget::new(engine, |p: &PlannedRequest| prompts.ids(p), describe, prompts.think_tags())
    }

    /// `engine` as a target, its requests' prompts from `prompt`, greedy; `think`: the
    /// tokenizer's thinking tags (`None`: replies are not split into reasoning and answer). For
    /// tests with prompts of their own; a run's prompts go through [`EngineTarget::for_prompts`].
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
            saturation: None,
            think,
            nvml: None,
        }
    }

    /// Reads the engine's GPU's energy through `meter` around each run (the CLI on a native GPU;
    /// without NVML the run's energy is absent, with the reason).
    pub fn metered(self, meter: NvmlMeter) -> Self {
        EngineTarget { nvml: Some(meter), ..self }
    }

    /// Replies are not split into reasoning and answer (the capacity planner's simulated replies
    /// are not text).
    pub fn without_thinking(self) -> Self {
        EngineTarget { think: None, ..self }
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
        };
        let on_progress = &mut |p: &Progress| listener(SessionEvent::Progress(p));
        if let Some(meter) = self.nvml.as_mut() {
            meter.start(self.engine.model.now_s());
        }
        let ran = driver::run_watched(self.engine, plan, &options, on_progress, &|| cancel.get()).await;
        if let Some(meter) = self.nvml.as_mut() {
            meter.stop(self.engine.model.now_s());
        }
        let (records, steps, saturation) = ran?;
        self.saturation = saturation;
        Ok((records, steps))
    }

    fn fault(&self) -> Option<Error> {
        self.engine.model.fault()
    }

    fn take_saturation(&mut self) -> Option<Saturation> {
        self.saturation.take()
    }

    fn take_gpu_metrics(&mut self) -> Option<GpuReadings> {
        self.nvml.as_mut().and_then(NvmlMeter::take)
    }
}
