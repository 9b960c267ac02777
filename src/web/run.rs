//! A benchmark run, wired as the CLI's `bench`: plan, baseline, driver, summarize, diagnose,
//! `BenchResult`. The driver reports after every engine step; the charts take that at most
//! once per animation frame.

use super::charts::ChartData;
use super::history::{self, Entry};
use super::i18n::use_text;
use super::settings::{self, LoadOptions, Problems, RunForm};
use super::state::{AppState, LoadedModel, Phase, RunProgress};
use super::sweep::{rate_text, SweepView};
use crate::bench::session::{EngineTarget, Listener, SessionEvent};
use crate::bench::{self, BenchResult, PlannedRequest, PromptSource, SessionSpec, WorkloadSpec};
use crate::engine::{Engine, Policy, SamplingParams};
use crate::model::Tokenizer;
use crate::Result;
use leptos::prelude::*;
use std::cell::RefCell;
use std::rc::Rc;

/// Starts a run (or a sweep, one run per rate) with the current settings.
pub fn start(state: AppState, config: RunForm) {
    let t = super::i18n::text(state.lang.get_untracked());
    let mut config = config;
    let max_position = if state.target.is_remote() { None } else { max_position(state) };
    if let Err(e) = with_dataset(state, &mut config, max_position) {
        state.run_error.set(Some(e.to_string()));
        return;
    }
    if state.target.is_remote() {
        // As the CLI's `bench --endpoint`: a server's scheduler and weights are its own.
        if config.policy != Policy::default() || config.load != LoadOptions::default() {
            state.run_error.set(Some(t.switches_not_remote.to_string()));
            return;
        }
        match state.target.runnable(t) {
            Ok(endpoint) => super::remote_run::start(state, config, endpoint),
            Err(e) => state.run_error.set(Some(e)),
        }
        return;
    }
    if needs_reload(state, &config) {
        state.run_error.set(Some(t.run_needs_reload.to_string()));
        return;
    }
    let Some(loaded) = state.take_model() else { return };
    let tokenizer = state.tokenizer.get_value();
    let model_key = state.choice.get_untracked().key();
    let lang = state.lang.get_untracked();
    begin(state, &config);
    wasm_bindgen_futures::spawn_local(async move {
        let LoadedModel { model, capacity } = loaded;
        let mut model = model;
        // The buffers were sized for `capacity`; a run may ask the scheduler for less.
        model.limits.max_seqs = config.max_batch.min(capacity.max_seqs);
        model.limits.max_batched_tokens = config.max_batched_tokens.min(capacity.max_batched_tokens);
        let mut engine = Engine::new(model);
        let context =
            RunContext { state, config: &config, tokenizer: tokenizer.as_deref(), lang, model_name: &model_key };
        let (results, error) = match engine.set_policy(config.policy) {
            Ok(()) => benchmark(&context, &mut engine).await,
            Err(e) => (Vec::new(), Some(e)),
        };
        let mut model = engine.model;
        model.limits = capacity.clone();
        state.put_model(LoadedModel { model, capacity });
        // What was measured is kept even when the run ended at an error (a lost device).
        finish(state, &config, &model_key, Some(config.max_batch), Ok(results));
        if let Some(e) = error {
            state.run_error.set(Some(e.to_string()));
        }
        super::models::forget_faulty_gpu(state);
    });
}

/// The loaded model's context length.
pub(super) fn max_position(state: AppState) -> Option<usize> {
    state.model_info.with_untracked(|m| m.as_ref().map(|m| m.caps.max_position))
}

/// `config` with the picked dataset's requests (none picked: unchanged), measured with the run's
/// tokenizer.
pub(super) fn with_dataset(state: AppState, config: &mut RunForm, max_position: Option<usize>) -> Result<()> {
    let default = state.default_tokenizer.get_value();
    let tokenizer = state.tokenizer.get_value().or_else(|| default.clone());
    let name = match (&tokenizer, &default) {
        (Some(t), Some(d)) if Rc::ptr_eq(t, d) => "the page's Qwen3 tokenizer.json",
        _ => "the model's tokenizer.json",
    };
    super::dataset::attach(state.dataset, config, tokenizer.as_deref().map(|t| (t, name)), max_position)
}

/// Whether the loaded model was uploaded with other weights or speculation than `config` asks for
/// (an upload is needed first).
pub fn needs_reload(state: AppState, config: &RunForm) -> bool {
    state.model_info.with_untracked(|m| m.as_ref().is_some_and(|m| m.load != config.load))
}

/// The page's state when a run (local or remote) starts: running, nothing shown, a sweep view
/// when several rates are asked for.
pub(super) fn begin(state: AppState, config: &RunForm) {
    state.cancel.with_value(|c| c.set(false));
    state.long_tasks.set_value(Default::default());
    state.phase.set(Phase::Running);
    state.run_error.set(None);
    state.progress.set(Some(RunProgress::Baseline));
    state.charts.set(ChartData::default());
    state.shown.set(None);
    let sweep = config.rates.len() > 1;
    state.sweep.set(sweep.then(|| SweepView::new(config.rates.clone(), config.slo.as_ref().and_then(|s| s.ttft_ms))));
}

/// Saves each rate's result to the history (named after `label`, the engine batch when there is
/// one), shows the last, or shows the error; then the page is idle again.
pub(super) fn finish(
    state: AppState,
    config: &RunForm,
    label: &str,
    batch: Option<usize>,
    outcome: Result<Vec<(f64, BenchResult)>>,
) {
    let long_tasks = state.long_tasks.try_update_value(|log| std::mem::take(&mut log.done)).unwrap_or_default();
    match outcome {
        Ok(results) => {
            let last = results.len().saturating_sub(1);
            for (i, (rate, mut result)) in results.into_iter().enumerate() {
                // Matched by position and rate: a rate cut short by Cancel has its own reading.
                if let Some((_, seen)) = long_tasks.get(i).filter(|(r, _)| r.total_cmp(&rate).is_eq()) {
                    result.metrics.long_tasks = Some(seen.clone());
                }
                let spec = WorkloadSpec { rate, ..config.spec.clone() };
                let mut name = run_name(&spec, label, batch);
                if i == last && state.cancel.with_value(|c| c.get()) {
                    name.push_str(" (cancelled)");
                }
                let entry = Entry { time_ms: super::browser::now_ms(), name, result };
                if i == last {
                    state.charts.set(ChartData::from_result(&entry.result));
                }
                let saved = history::add(state, entry);
                if i == last {
                    state.shown.set(Some(saved));
                }
            }
        }
        Err(e) => state.run_error.set(Some(e.to_string())),
    }
    state.progress.set(None);
    state.phase.set(Phase::Idle);
}

/// "embedded · poisson 4 req/s · 32 × 128→64 · batch 16"; `batch` is the engine's (none for a
/// server, whose scheduler is its own).
pub(super) fn run_name(s: &WorkloadSpec, model: &str, batch: Option<usize>) -> String {
    let load = match s.arrival {
        bench::Arrival::Sequential => "sequential".to_string(),
        bench::Arrival::Concurrency => format!("concurrency {}", s.concurrency),
        arrival => {
            let name =
                serde_json::to_value(arrival).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default();
            let rate = if s.rate.is_finite() { format!("{}", s.rate) } else { "inf".into() };
            format!("{name} {rate} req/s")
        }
    };
    let len = |r: bench::LenRange| if r.min == r.max { r.min.to_string() } else { format!("{}:{}", r.min, r.max) };
    let batch = batch.map(|b| format!(" · batch {b}")).unwrap_or_default();
    format!("{model} · {load} · {} × {}→{}{batch}", s.num_requests, len(s.input_len), len(s.output_len))
}

/// The newest snapshot, shown over the next animation frames one chart at a time.
///
/// Why one at a time: redrawing every chart in one frame took 4–12 ms of main-thread CPU on
/// SwiftShader (median 6.7 ms over a 0.6B-shape run), and the frame runs while the step's GPU work
/// (SwiftShader's threads) and everything else on the machine compete for the same cores, which
/// stretched one such frame to 125 ms of wall time: a long task over 50 ms during the run. One
/// chart per frame keeps each frame's work to a fraction of that; the charts trail the engine by
/// at most one frame per chart.
#[derive(Default)]
struct Frame {
    pending: Option<ChartData>,
    progress: Option<(usize, usize)>,
    requested: bool,
    /// Bumped when a rate starts or ends, so that frames asked for before stop.
    generation: u32,
}

impl Frame {
    /// Nothing pending, and the frames already asked for do nothing.
    fn reset(&mut self) {
        *self = Frame { generation: self.generation.wrapping_add(1), ..Frame::default() };
    }
}

/// Copies into `shown` the first chart of `new` that differs from it; true when another still
/// differs (and needs a frame of its own).
pub fn show_one_chart(shown: &mut ChartData, new: &ChartData) -> bool {
    fn one<T: Clone + PartialEq>(shown: &mut T, new: &T, free: &mut bool) -> bool {
        if shown == new {
            return false;
        }
        if std::mem::take(free) {
            shown.clone_from(new);
            return false;
        }
        true
    }
    let mut free = true;
    let left = [
        one(&mut shown.ttft, &new.ttft, &mut free),
        one(&mut shown.tpot, &new.tpot, &mut free),
        one(&mut shown.throughput, &new.throughput, &mut free),
        one(&mut shown.batch, &new.batch, &mut free),
        one(&mut shown.kv, &new.kv, &mut free),
        one(&mut shown.timeline, &new.timeline, &mut free),
    ];
    left.contains(&true)
}

/// Shows the pending progress and one pending chart at the next animation frame, and asks for
/// another frame while charts are left.
fn show_next_frame(state: AppState, frame: Rc<RefCell<Frame>>) {
    let generation = frame.borrow().generation;
    request_animation_frame(move || {
        let (progress, pending) = {
            let mut f = frame.borrow_mut();
            if f.generation != generation {
                return;
            }
            (f.progress.take(), f.pending.take())
        };
        if let Some((finished, total)) = progress {
            state.progress.set(Some(RunProgress::Requests { finished, total }));
        }
        let Some(new) = pending else {
            frame.borrow_mut().requested = false;
            return;
        };
        let more = state.charts.try_update(|shown| show_one_chart(shown, &new)).unwrap_or(false);
        let mut f = frame.borrow_mut();
        if f.generation != generation {
            return;
        }
        if more {
            f.pending = Some(new);
            drop(f);
            show_next_frame(state, frame);
        } else {
            f.requested = false;
        }
    });
}

/// The page's view of a session (local or remote): progress and live charts (a snapshot built at
/// most once per chain of animation frames, one chart redrawn per frame), the sweep as each rate
/// ends.
pub(super) fn listener(state: AppState) -> Listener {
    let frame = Rc::new(RefCell::new(Frame::default()));
    Rc::new(move |event| match event {
        SessionEvent::WarmedUp { .. } | SessionEvent::Baseline(_) => {}
        SessionEvent::RateStarted { requests, .. } => {
            state.long_tasks.update_value(|log| log.watch = super::browser::LongTaskWatch::start());
            frame.borrow_mut().reset();
            state.progress.set(Some(RunProgress::Requests { finished: 0, total: requests }));
            state.charts.set(ChartData::default());
        }
        SessionEvent::Progress(p) if p.records.is_empty() => {
            // A server: no live records, only how many requests have ended.
            state.progress.set(Some(RunProgress::Requests { finished: p.finished, total: p.total }));
        }
        SessionEvent::Progress(p) => {
            // Only the first step after the frames showed a snapshot builds the next; later ones
            // wait for it (their counts go to the next frame).
            let mut f = frame.borrow_mut();
            f.progress = Some((p.finished, p.total));
            if f.requested {
                return;
            }
            f.pending = Some(ChartData::live(p.records, p.steps));
            f.requested = true;
            drop(f);
            show_next_frame(state, frame.clone());
        }
        SessionEvent::RateDone { rate, result } => {
            state.long_tasks.update_value(|log| {
                if let Some(watch) = log.watch.take() {
                    log.done.push((rate, watch.finish()));
                }
            });
            // Frames still pending would show a stale snapshot over the final one.
            frame.borrow_mut().reset();
            state.sweep.update(|s| {
                if let Some(s) = s {
                    s.push(rate, result);
                }
            });
        }
    })
}

/// The session's settings from the page's.
pub(super) fn session_spec(config: &RunForm, lang: bench::Lang) -> SessionSpec<'_> {
    SessionSpec {
        spec: &config.spec,
        rates: &config.rates,
        slo: config.slo.as_ref(),
        slo_text: config.slo_text.as_deref(),
        lang,
        baseline: true,
        ignore_eos: true,
        cost_per_hour: config.cost_per_hour,
    }
}

/// The page's part of every run record: how finely it can take timestamps.
pub(super) fn page_record(state: AppState) -> bench::RunConfig {
    bench::RunConfig {
        timer_resolution_ms: state.timer_resolution_ms.get_untracked(),
        cross_origin_isolated: Some(super::model_panel::cross_origin_isolated()),
        ..bench::RunConfig::default()
    }
}

/// What every rate of a run shares.
struct RunContext<'a> {
    state: AppState,
    config: &'a RunForm,
    tokenizer: Option<&'a Tokenizer>,
    lang: bench::Lang,
    model_name: &'a str,
}

/// The baseline once, then one run per rate (stopping early when cancelled): (rate, result), and
/// the error that stopped it, if any (the rates it finished, and the one it cut short, are kept).
async fn benchmark(cx: &RunContext<'_>, engine: &mut Engine) -> (Vec<(f64, BenchResult)>, Option<crate::Error>) {
    let (state, config) = (cx.state, cx.config);
    let vocab_size = engine.model.cfg.vocab_size;
    let prompts = PromptSource::for_model(&config.spec, cx.tokenizer, config.random_prompts, vocab_size);
    let prompt = |p: &PlannedRequest| prompts.ids(p);
    let mut target = EngineTarget {
        engine,
        prompt: &prompt,
        sampling: SamplingParams::default(),
        describe: bench::RunConfig {
            target: "browser".into(),
            model: Some(cx.model_name.to_string()),
            prompts: Some(prompts.kind().to_string()),
            ..page_record(state)
        },
        saturation: None,
    };
    let cancel = state.cancel.get_value();
    let mut results = Vec::new();
    let outcome =
        bench::session::run_into(&mut target, &session_spec(config, cx.lang), &listener(state), &cancel, &mut results)
            .await;
    (config.rates.iter().copied().zip(results).collect(), outcome.err())
}

/// Run / Cancel, with progress and the reason when Run is unavailable.
#[component]
pub fn RunPanel(state: AppState, checked: Memo<std::result::Result<RunForm, Problems>>) -> impl IntoView {
    let t = use_text();
    let running = move || state.phase.get() == Phase::Running;
    let reload_pending = move || {
        !state.target.is_remote()
            && checked.with(|c| {
                let wanted = c.as_ref().map(|c| c.load.clone()).ok();
                state.model_info.with(|m| matches!((m, wanted), (Some(m), Some(w)) if m.load != w))
            })
    };
    let can_run = move || {
        let target_ready = if state.target.is_remote() {
            state.target.runnable(t()).is_ok()
        } else {
            state.model_info.with(Option::is_some) && !reload_pending()
        };
        state.phase.get() == Phase::Idle && target_ready && checked.with(|c| c.is_ok())
    };
    let target_problem = move || state.target.is_remote().then(|| state.target.runnable(t()).err()).flatten();
    let cancelling = RwSignal::new(false);
    let run = move |_| {
        if let Ok(config) = checked.get_untracked() {
            cancelling.set(false);
            start(state, config);
        }
    };
    let cancel = move |_| {
        cancelling.set(true);
        state.cancel.with_value(|c| c.set(true));
    };
    let progress = move || match state.progress.get() {
        Some(RunProgress::Baseline) => Some((t().measuring_baseline.to_string(), None)),
        Some(RunProgress::Requests { finished, total }) => {
            // In a sweep: which rate is running.
            let rate = state.sweep.with(|s| {
                s.as_ref().and_then(|s| {
                    let i = s.points.len().min(s.rates.len().saturating_sub(1));
                    Some(format!(
                        "{} {} ({}/{}) · ",
                        t().sweep_progress,
                        rate_text(*s.rates.get(i)?),
                        i + 1,
                        s.rates.len()
                    ))
                })
            });
            let label = format!("{}{} {finished} / {total}", rate.unwrap_or_default(), t().finished);
            Some((label, Some((finished, total))))
        }
        None => None,
    };
    view! {
        <section class="card run-card">
            <div class="row">
                <button class="primary big" data-testid="run" disabled=move || !can_run() on:click=run>
                    {move || t().run}
                </button>
                <button
                    class="ghost"
                    data-testid="cancel"
                    disabled=move || !running() || cancelling.get()
                    on:click=cancel
                >
                    {move || if cancelling.get() && running() { t().cancelling } else { t().cancel }}
                </button>
            </div>
            {move || {
                progress()
                    .map(|(label, bar)| {
                        view! {
                            <div class="progress" data-testid="progress">
                                {bar.map(|(done, total)| view! { <progress max=total value=done></progress> })}
                                <span class="num">{label}</span>
                            </div>
                        }
                    })
            }}
            {move || target_problem().map(|e| view! { <p class="note warn">{e}</p> })}
            <Show when=move || reload_pending() && !running()>
                <p class="note warn" data-testid="run-needs-reload">{move || t().run_needs_reload}</p>
            </Show>
            <Show when=move || checked.with(|c| c.is_err()) && !running()>
                <p class="note warn">{move || t().fix_settings}</p>
            </Show>
            {move || {
                state
                    .run_error
                    .get()
                    .map(|e| view! { <p class="error" role="alert">{move || t().run_failed} ": " {e}</p> })
            }}
        </section>
    }
}

/// The live validation of the settings against the loaded model.
pub fn checked(state: AppState) -> Memo<std::result::Result<RunForm, Problems>> {
    let t = use_text();
    Memo::new(move |_| {
        // A server's limits are its own: only the in-browser engine's are checked here.
        let caps = if state.target.is_remote() { None } else { state.model_info.with(|m| m.as_ref().map(|m| m.caps)) };
        let settings = state.settings;
        settings::validate(&|f| settings.get(f).get(), caps, t())
    })
}
