//! The run service: the one owner of a benchmark's life in the engine worker — a run or a sweep on the
//! in-browser engine, the same workload against a server, and the A/B experiment.
//!
//! A view sends a [`Command`] with the [`Context`] it read from the page; the service checks it
//! (a [`Refused`] says why it cannot start, before anything runs), takes the model from the
//! [`Host`], runs the CLI's session or experiment, gives the model back, and says everything
//! through one [`Sink`] of [`Report`]s, ending with exactly one [`Ended`]. It reads and writes no
//! signal: it runs in the engine worker ([`super`]), which sends what it reports to the page,
//! where `page/run.rs` and `page/experiment.rs` draw it. Commands in, updates out.

use super::dataset;
use super::host::{Host, LoadedModel};
use crate::bench::measure::saturation::Saturation;
use crate::bench::result::NoneSucceeded;
use crate::bench::run::experiment::{self, ExperimentSpec, Side};
use crate::bench::run::launch::{self, OnEngine, Search};
use crate::bench::run::target::{Listener, SessionEvent, Target};
use crate::bench::verdict::compare::CompareOptions;
use crate::bench::verdict::quality::{self, computes_differently, Numerics, Quality, QualityInputs};
use crate::bench::{self, BenchResult, PlannedRequest, PromptSource, WorkloadSpec};
use crate::engine::forward::EngineLimits;
use crate::engine::{Engine, ForwardPass, Policy};
use crate::gpu::Gpu;
use crate::model::Tokenizer;
use crate::planner::capacity::PlannerGuess;
use crate::remote::browser::{Client, ServerTarget};
use crate::remote::{Api, Endpoint, RemoteSetup};
use crate::web::protocol::{Command, Context, Destination, Ended, ExperimentEnd, Refused, RunRequest};
use crate::{Error, Result};
use std::cell::{Cell, RefCell};
use std::rc::Rc;

/// Per request against a server, from `fetch()` to the end of its stream.
const REMOTE_TIMEOUT_S: f64 = 300.0;

/// What the service reports, in order: `Began`, then the session's events (and an experiment's
/// `LoadingB`), then one `Ended`, then `DeviceLost` when the device faulted meanwhile.
pub enum Report<'a> {
    /// The command started: the rates it will run (one per rate of a sweep) and the TTFT SLO.
    Began {
        rates: &'a [f64],
        ttft_slo_ms: Option<f64>,
    },
    Session(SessionEvent<'a>),
    /// An experiment uploads B's own copy of the model: percent done.
    LoadingB(u32),
    Ended(Box<Ended>),
    /// The device was lost or reported an error: its model is dropped; the next load opens a new
    /// device.
    DeviceLost(String),
}

/// The view's side of the service.
pub type Sink = Rc<dyn Fn(Report<'_>)>;

/// Stops the run in progress at its next step; what finished is kept. (Needs no [`Context`]: a
/// Cancel must work whatever the form says now.)
pub fn cancel(host: &Host) {
    host.cancel_flag().set(true);
}

/// Starts `command`, or says why it cannot. `Began` is sent before this returns, so the page is
/// busy from the click on.
pub fn start(host: &Rc<Host>, cx: Context, command: Command, sink: Sink) -> std::result::Result<(), Refused> {
    if let Command::Run { form, destination } = &command {
        if !destination.agrees_with(&form.target) {
            return Err(Refused::WrongTarget);
        }
    }
    match command {
        Command::Run { form, destination: Destination::Server(endpoint, server_metrics) } => {
            // The page's own check (`settings::validate` for a server) said so under each input;
            // a command sent past it is refused with the same words.
            let problems = form.server_problems(true);
            if !problems.is_empty() {
                return Err(Refused::problems(&problems, cx.lang, false));
            }
            // A server's context is its own: only the API's answer limits it.
            let form = prepared(host, &cx, *form, None)?;
            began(host, &form, &sink);
            let host = host.clone();
            wasm_bindgen_futures::spawn_local(async move {
                on_server(&host, &cx, form, endpoint, server_metrics, &sink).await
            });
            Ok(())
        }
        Command::Run { form, destination: Destination::Engine } => {
            let (load, max_position) = cx.loaded.clone().ok_or(Refused::Busy)?;
            let form = prepared(host, &cx, *form, Some(max_position))?;
            if form.load != load {
                return Err(Refused::NeedsReload);
            }
            let loaded = host.take_model().ok_or(Refused::Busy)?;
            began(host, &form, &sink);
            let host = host.clone();
            wasm_bindgen_futures::spawn_local(async move { on_engine(&host, &cx, form, loaded, &sink).await });
            Ok(())
        }
        Command::Experiment { a, b, repeats } => {
            let (load, max_position) = cx.loaded.clone().ok_or(Refused::Busy)?;
            // The picked dataset, once, for both sides: the same requests.
            let a = prepared(host, &cx, *a, Some(max_position))?;
            let b = RunRequest { spec: a.spec.clone(), ..*b };
            b.check_loaded(max_position).map_err(|p| Refused::problems(&p, cx.lang, true))?;
            if a.load != load {
                return Err(Refused::NeedsReload);
            }
            let gpu = host.gpu().ok_or(Refused::Busy)?;
            let loaded = host.take_model().ok_or(Refused::Busy)?;
            began(host, &a, &sink);
            let host = host.clone();
            wasm_bindgen_futures::spawn_local(async move {
                let end = experiment(&host, &cx, Sides { a, b, repeats }, loaded, gpu, &sink).await;
                sink(Report::Ended(Box::new(Ended::Experiment(Box::new(end)))));
                device_check(&host, &sink);
            });
            Ok(())
        }
    }
}

/// `form` with the picked dataset's requests (none picked: unchanged), measured with the run's
/// tokenizer, and checked against the loaded model (`RunRequest::check_loaded`, as the CLI).
fn prepared(
    host: &Host,
    cx: &Context,
    mut form: RunRequest,
    max_position: Option<usize>,
) -> std::result::Result<RunRequest, Refused> {
    if let Some(choice) = &cx.dataset {
        let tokenizer = host.tokenizer();
        let named = tokenizer.as_deref().map(|t| (t, host.tokenizer_name()));
        dataset::attach(choice, &mut form, named, max_position)?;
    }
    if let Some(max) = max_position {
        form.check_loaded(max).map_err(|p| Refused::problems(&p, cx.lang, false))?;
    }
    Ok(form)
}

fn began(host: &Host, form: &RunRequest, sink: &Sink) {
    host.cancel_flag().set(false);
    sink(Report::Began { rates: &form.rates, ttft_slo_ms: form.slo.as_ref().and_then(|s| s.ttft_ms) });
}

/// After a run: a device that faulted is dropped with its model, and the page told.
fn device_check(host: &Host, sink: &Sink) {
    if let Some(fault) = host.forget_faulty_gpu() {
        sink(Report::DeviceLost(fault));
    }
}

/// The session's settings from the page's.
/// The session's listener: every event to the sink.
fn listener(sink: &Sink) -> Listener {
    let sink = sink.clone();
    Rc::new(move |event| sink(Report::Session(event)))
}

/// The engine's record: the page's, with what the engine ran.
fn engine_record(cx: &Context) -> bench::RunConfig {
    bench::RunConfig { target: "browser".into(), model: Some(cx.model_key.clone()), ..cx.page.clone() }
}

/// A run or a sweep on the page's engine, as the CLI's `bench`.
async fn on_engine(host: &Host, cx: &Context, form: RunRequest, loaded: LoadedModel, sink: &Sink) {
    let LoadedModel { model, capacity } = loaded;
    let mut engine = Engine::new(sized(model, &capacity, form.max_batch, form.max_batched_tokens));
    let tokenizer = host.tokenizer();
    let cancel = host.cancel_flag();
    let mut results = Vec::new();
    let outcome = match engine.set_policy(form.policy) {
        Ok(()) => {
            let session = form.session(cx.lang);
            let (random, listener) = (form.random_prompts, listener(sink));
            // The loaded model's load goes with each run on it.
            let describe = bench::RunConfig { time_to_ready: host.time_to_ready(), ..engine_record(cx) };
            // `--rate max`: the search, its first guess the planner's, as the CLI's.
            let guess = PlannerGuess(engine.model.cfg.clone());
            let search = Search::of(form.search, session.slo, Some(&guess));
            let on = OnEngine::new(&mut engine, tokenizer.as_deref(), random, describe);
            launch::run(on, &session, search, &listener, &cancel, &mut results).await
        }
        Err(e) => Err(e),
    };
    let mut model = engine.model;
    model.limits = capacity.clone();
    host.put_model(LoadedModel { model, capacity });
    let (search, error) = split(outcome, &results, cx.lang);
    sink(Report::Ended(Box::new(Ended::Run {
        results: bench::run::max_rate::rates_of(&results).into_iter().zip(results).collect(),
        label: cx.model_key.clone(),
        batch: Some(form.max_batch),
        cancelled: cancel.get(),
        error,
        spec: form.spec,
        search,
    })));
    device_check(host, sink);
}

/// `model` with the scheduler's sizes a run asks for: its buffers were sized for `capacity`, and a
/// run may ask for less.
fn sized(mut model: ForwardPass, capacity: &EngineLimits, max_batch: usize, max_batched_tokens: usize) -> ForwardPass {
    model.limits.max_seqs = max_batch.min(capacity.max_seqs);
    model.limits.max_batched_tokens = max_batched_tokens.min(capacity.max_batched_tokens);
    model
}

/// A run or a sweep against a server, as the CLI's `bench --endpoint`: one request alone for the
/// baseline, then the workload per rate through [`crate::remote::browser`].
async fn on_server(
    host: &Host,
    cx: &Context,
    form: RunRequest,
    endpoint: Endpoint,
    server_metrics: Option<String>,
    sink: &Sink,
) {
    let label = endpoint.label();
    let client = Client::new(endpoint);
    let cancel = host.cancel_flag();
    let mut results = Vec::new();
    let outcome = async {
        // Text prompts through the page's tokenizer (the server re-tokenizes them); chat needs text.
        let tokenizer = host.tokenizer();
        let api = client.endpoint().api;
        if api == Api::Chat && tokenizer.is_none() {
            return Err(Error::Invalid("chat sends text: no tokenizer is loaded".into()));
        }
        let random_ids = form.random_prompts && api == Api::Completions;
        let prompts = PromptSource::for_server(&form.spec, tokenizer.as_deref(), random_ids, None);
        let prompt = |p: &PlannedRequest| prompts.prompt(p);
        let setup = RemoteSetup {
            prompt: &prompt,
            timeout_s: REMOTE_TIMEOUT_S,
            prompts: prompts.kind(),
            client: "browser",
            gpus: None,
            server_metrics,
            // A DCGM exporter sends no CORS headers: the page cannot read it (it says so).
            gpu_metrics: None,
            decide: None,
        };
        let mut target = PageRemote { inner: ServerTarget { client: &client, setup }, page: cx.page.clone() };
        let session = form.session(cx.lang);
        let listener = listener(sink);
        let search = Search::of(form.search, session.slo, None);
        launch::drive(&mut target, &session, search, &listener, &cancel, &mut results).await
    }
    .await;
    let (search, error) = split(outcome, &results, cx.lang);
    sink(Report::Ended(Box::new(Ended::Run {
        results: bench::run::max_rate::rates_of(&results).into_iter().zip(results).collect(),
        label,
        batch: None,
        cancelled: cancel.get(),
        error,
        spec: form.spec,
        search,
    })));
}

/// A run's outcome as its end carries it: a search's result, or the error's message.
fn split(
    outcome: Result<Option<bench::run::max_rate::MaxRate>>,
    results: &[BenchResult],
    lang: bench::Lang,
) -> (Option<bench::run::max_rate::MaxRate>, Option<String>) {
    match outcome {
        // Requests sent and none succeeded: an error, said as the CLI says it (with the first
        // request's own message: a browser's CORS hint, a server's refusal).
        Ok(found) => (found, NoneSucceeded::of(results).map(|none| none.text(lang))),
        Err(e) => (None, Some(e.to_string())),
    }
}

/// The browser client's target with the page's own part of the record (timer resolution).
struct PageRemote<'a> {
    inner: ServerTarget<'a>,
    page: bench::RunConfig,
}

impl Target for PageRemote<'_> {
    fn run_config(&self) -> bench::RunConfig {
        let own = self.inner.run_config();
        bench::RunConfig { target: own.target, prompts: own.prompts, ..self.page.clone() }
    }

    fn reports_steps(&self) -> bool {
        self.inner.reports_steps()
    }

    async fn run(
        &mut self,
        plan: &[PlannedRequest],
        spec: &WorkloadSpec,
        ignore_eos: bool,
        listener: &Listener,
        cancel: &Rc<Cell<bool>>,
    ) -> Result<(Vec<bench::RequestRecord>, Vec<bench::StepSample>)> {
        self.inner.run(plan, spec, ignore_eos, listener, cancel).await
    }

    fn take_saturation(&mut self) -> Option<Saturation> {
        self.inner.take_saturation()
    }

    fn decide_early(&mut self, rule: Option<crate::bench::measure::decided::DecideRule>) {
        self.inner.decide_early(rule)
    }

    fn take_decided(&mut self) -> Option<crate::bench::measure::decided::Decided> {
        self.inner.take_decided()
    }

    fn take_server_metrics(&mut self) -> Option<crate::bench::measure::server_metrics::ServerMetrics> {
        self.inner.take_server_metrics()
    }
}

/// An experiment's two forms (B's workload is A's) and its repetitions per side.
struct Sides {
    a: RunRequest,
    b: RunRequest,
    repeats: usize,
}

/// The experiment: B shares A's upload unless its weights, speculation or prefix cache differ
/// (then B gets its own copy on the same device, freed at the end); A B A B … by
/// `bench::run::experiment::run_alternating`, every repetition kept as it ends so that Cancel or an
/// error still compares the finished ones.
async fn experiment(
    host: &Rc<Host>,
    cx: &Context,
    sides: Sides,
    loaded: LoadedModel,
    gpu: Rc<Gpu>,
    sink: &Sink,
) -> ExperimentEnd {
    let Sides { a, b, repeats } = sides;
    let LoadedModel { model, capacity } = loaded;
    let pool_a = RefCell::new(Some(model));
    let give_back = |pool: RefCell<Option<ForwardPass>>| {
        if let Some(model) = pool.into_inner() {
            host.put_model(LoadedModel { model, capacity: capacity.clone() });
        }
    };
    let own_b = if b.load != a.load {
        let mut shown = 0;
        let mut progress = |p: u32| {
            if p != shown {
                shown = p;
                sink(Report::LoadingB(p));
            }
        };
        match super::loader::load_variant(host, b.load.clone(), &mut progress).await {
            Ok((model, _)) => Some((model.limits.clone(), RefCell::new(Some(model)))),
            Err(e) => {
                give_back(pool_a);
                return ExperimentEnd {
                    a: Vec::new(),
                    b: Vec::new(),
                    last: None,
                    comparison: Err(e.to_string()),
                    cancelled: false,
                    error: Some(e.to_string()),
                    quality: None,
                };
            }
        }
    } else {
        None
    };
    let tokenizer = host.tokenizer();
    let vocab_size = pool_a.borrow().as_ref().map_or(0, |m| m.cfg.vocab_size);
    let prompts = PromptSource::for_model(&a.spec, tokenizer.as_deref(), a.random_prompts, vocab_size);
    let describe = engine_record(cx);
    let (pool_b, capacity_b) = match &own_b {
        Some((limits, pool)) => (pool, limits.clone()),
        None => (&pool_a, capacity.clone()),
    };
    let side = |pool, capacity, form: &RunRequest| Variant {
        pool,
        capacity,
        max_batch: form.max_batch,
        max_batched_tokens: form.max_batched_tokens,
        policy: form.policy,
        tokenizer: tokenizer.as_deref(),
        random_prompts: a.random_prompts,
        describe: describe.clone(),
        record: bench::RunConfig::default(),
        saturation: None,
        gpu: gpu.clone(),
    };
    let mut target_a = side(&pool_a, capacity.clone(), &a);
    let mut target_b = side(pool_b, capacity_b, &b);
    let spec = ExperimentSpec {
        spec: &a.spec,
        slo: a.slo.as_ref(),
        slo_text: a.slo_text.as_deref(),
        repeats,
        ignore_eos: true,
        lang: cx.lang,
        warmup: true,
        criteria: a.session(cx.lang).criteria,
    };
    let cancel = host.cancel_flag();
    // Every repetition as it ends, and whether Cancel cut it short.
    let mut kept: Vec<(Side, BenchResult, bool)> = Vec::new();
    let outcome = experiment::run_alternating(
        &mut target_a,
        &mut target_b,
        &spec,
        &listener(sink),
        &cancel,
        &mut |side, _, r| kept.push((side, r.clone(), cancel.get())),
    )
    .await;
    drop((target_a, target_b));
    let cancelled = cancel.get();
    let quality = match (&own_b, &outcome) {
        (Some((_, pool_b)), Ok(_)) if !cancelled => {
            let made_with = QualityMadeWith { spec: &a.spec, prompts: &prompts, tokenizer: tokenizer.as_deref() };
            quality_of_b(&pool_a, pool_b, &made_with).await.map(|q| q.map_err(|e| e.to_string()))
        }
        _ => None,
    };
    drop(own_b);
    give_back(pool_a);
    let last = kept.last().map(|(_, r, _)| r.clone());
    let finished = |s: Side| -> Vec<BenchResult> {
        kept.iter().filter(|(side, _, cut)| *side == s && !cut).map(|(_, r, _)| r.clone()).collect()
    };
    let (runs_a, runs_b) = (finished(Side::A), finished(Side::B));
    let (comparison, error) = match outcome {
        Ok(e) if !cancelled => (Ok(e.comparison), None),
        other => {
            let compared = experiment::compare_results(&runs_a, &runs_b, a.slo.as_ref(), &CompareOptions::default())
                .map_err(|e| e.to_string());
            (compared, other.err().map(|e| e.to_string()))
        }
    };
    ExperimentEnd { a: runs_a, b: runs_b, last, comparison, cancelled, error, quality }
}

/// What the timed runs' prompts were made with: the quality pass starts from the same prompts.
struct QualityMadeWith<'a> {
    spec: &'a WorkloadSpec,
    prompts: &'a PromptSource<'a>,
    tokenizer: Option<&'a crate::model::Tokenizer>,
}

/// B's output quality against A's, untimed, after the timed runs — where B loaded a model of its
/// own that computes differently (`quality::computes_differently`: a weight format, a kernel
/// path), as `compare` decides; `None` where it does not.
async fn quality_of_b(
    pool_a: &RefCell<Option<ForwardPass>>,
    pool_b: &RefCell<Option<ForwardPass>>,
    made_with: &QualityMadeWith<'_>,
) -> Option<Result<Quality>> {
    let (model_a, model_b) = (pool_a.borrow_mut().take()?, pool_b.borrow_mut().take()?);
    let (mut engine_a, mut engine_b) = (Engine::new(model_a), Engine::new(model_b));
    let differs = computes_differently(&Numerics::of(None, &engine_a), &Numerics::of(None, &engine_b));
    let outcome = match differs {
        false => None,
        true => {
            let cfg = &engine_a.model.cfg;
            let sizes = (quality::DEFAULT_PROMPTS, quality::DEFAULT_NEW_TOKENS);
            let (vocab, positions) = (cfg.vocab_size, cfg.max_position_embeddings);
            let inputs = QualityInputs::for_workload(
                made_with.spec,
                made_with.prompts,
                made_with.tokenizer,
                vocab,
                positions,
                sizes,
            );
            Some(match inputs {
                Ok(inputs) => quality::measure(("A", "B"), &mut engine_a, &mut engine_b, &inputs).await,
                Err(e) => Err(e),
            })
        }
    };
    *pool_a.borrow_mut() = Some(engine_a.model);
    *pool_b.borrow_mut() = Some(engine_b.model);
    outcome
}

/// One side of the experiment as a session target: the model (shared with the other side, or its
/// own) is taken from `pool` for each run and given back after, so one upload can serve both
/// sides; each run builds an engine with this side's batch, tokens per step and policy and runs it
/// through the launcher (`launch::run_plan`).
struct Variant<'a> {
    pool: &'a RefCell<Option<ForwardPass>>,
    /// The sizes the model was loaded for (restored after each run).
    capacity: EngineLimits,
    max_batch: usize,
    max_batched_tokens: usize,
    policy: Policy,
    tokenizer: Option<&'a Tokenizer>,
    random_prompts: bool,
    describe: bench::RunConfig,
    /// The last run's record (the session asks for it after the run).
    record: bench::RunConfig,
    saturation: Option<Saturation>,
    gpu: Rc<Gpu>,
}

impl Target for Variant<'_> {
    fn run_config(&self) -> bench::RunConfig {
        self.record.clone()
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
    ) -> Result<(Vec<bench::RequestRecord>, Vec<bench::StepSample>)> {
        let model = self.pool.borrow_mut().take().ok_or_else(|| Error::Invalid("the model is busy".into()))?;
        let mut engine = Engine::new(sized(model, &self.capacity, self.max_batch, self.max_batched_tokens));
        let outcome = match engine.set_policy(self.policy) {
            Ok(()) => {
                let on = OnEngine::new(&mut engine, self.tokenizer, self.random_prompts, self.describe.clone());
                let (outcome, record, saturation) =
                    launch::run_plan(on, plan, spec, ignore_eos, listener, cancel).await;
                (self.record, self.saturation) = (record, saturation);
                outcome
            }
            Err(e) => Err(e),
        };
        let mut model = engine.model;
        model.limits = self.capacity.clone();
        *self.pool.borrow_mut() = Some(model);
        outcome
    }

    fn fault(&self) -> Option<Error> {
        self.gpu.fault()
    }

    fn take_saturation(&mut self) -> Option<Saturation> {
        self.saturation.take()
    }
}
