//! Run / Cancel and the page's side of a run: [`start`] turns the checked form into a command
//! for the run service (`web::worker::service`), and [`sink`] draws what the service reports —
//! progress, the live charts (at most one chart per animation frame), the sweep, then the
//! results saved to the history and shown.

use super::history::{self, Entry, NameParts};
use super::i18n::{use_text, Text};
use super::link::RunSink;
use super::names;
use super::search::{trying_text, SearchView};
use super::settings::{self, Field, Problems, RunRequest};
use super::state::{AppState, Phase, RateSeen, RunProgress};
use super::sweep::{rate_text, SweepView};
use crate::bench::{self, WorkloadSpec};
use crate::web::protocol::{ChartData, Command, Context, Destination, Ended, Refused};
use crate::web::protocol::{RunUpdate, ToEngine};
use leptos::prelude::*;
use std::cell::RefCell;
use std::rc::Rc;

/// Starts a run (or a sweep, one run per rate) with the current settings, on the page's engine or
/// the chosen server.
pub fn start(state: AppState, mut form: RunRequest) {
    let t = super::i18n::text(state.lang.get_untracked());
    form.size_rate = untrack(|| state.settings.sizes_rate()) && sizable(&form);
    let destination = if state.target.is_remote() {
        match state.target.runnable(t) {
            Ok(endpoint) => Destination::Server(endpoint, state.target.server_metrics_url()),
            Err(e) => return state.run_error.set(Some(e)),
        }
    } else {
        Destination::Engine
    };
    let refused = Rc::new(move |e| state.run_error.set(Some(e)));
    send(state, Command::Run { form: Box::new(form), destination }, sink(state), refused);
}

/// Whether a request's rate can be sized from the baseline: one open-loop rate drawn at a finite
/// rate (not a sweep, a search, a closed loop or a trace's own times).
fn sizable(form: &RunRequest) -> bool {
    let arrival = form.spec.arrival;
    form.search.is_none()
        && form.rates.len() == 1
        && form.rates[0].is_finite()
        && arrival.open_loop()
        && arrival != bench::Arrival::Trace
}

/// Sends `command` to the run service in the engine worker with what it needs from the page;
/// `refused` gets why it did not start (nothing, when another task holds the model: the buttons say
/// so).
pub(super) fn send(state: AppState, command: Command, sink: RunSink, refused: Rc<dyn Fn(String)>) {
    let cx = match context(state) {
        Ok(cx) => cx,
        Err(e) => return refused(e.to_string()),
    };
    let Some(link) = super::link::get(state) else { return };
    // Busy from the click on (the worker's `Began` follows), idle again if it refuses.
    state.phase.set(Phase::Running);
    let refused_to = Rc::new(move |r: Refused| {
        idle(state);
        if let Some(why) = refused_text(r, super::i18n::text(state.lang.get_untracked())) {
            refused(why);
        }
    });
    link.command(ToEngine::Command { cx: Box::new(cx), command }, sink, refused_to);
}

/// Stops the run in progress at its next step.
pub(super) fn cancel_run(state: AppState) {
    super::link::send(state, &ToEngine::Cancel);
}

/// What the service needs from the page now.
fn context(state: AppState) -> crate::Result<Context> {
    Ok(Context {
        lang: state.lang.get_untracked(),
        model_key: state.choice.get_untracked().key(),
        loaded: state.model_info.with_untracked(|m| m.as_ref().map(|m| (m.load.clone(), m.caps.max_position))),
        dataset: state.dataset.choice()?,
        page: bench::RunConfig {
            timer_resolution_ms: state.timer_resolution_ms.get_untracked(),
            cross_origin_isolated: Some(super::model_panel::cross_origin_isolated()),
            request: Some(saved_request(state)),
            ..bench::RunConfig::default()
        },
    })
}

/// The request as the CLI spells it (`bench::base::field::args_of`): the settings that differ from
/// their defaults, the dataset's name, and a server's endpoint, model name and API (never its key),
/// so the CLI's `bench --rerun` and the history's *Run again* read it.
fn saved_request(state: AppState) -> bench::record::run_config::SavedRequest {
    let dataset = state.dataset.picked.with_untracked(|p| p.as_ref().map(|p| p.name.clone()));
    let settings = state.settings;
    let value = |f: Field| match f {
        Field::Dataset => dataset.clone(),
        Field::Endpoint | Field::ServedModel | Field::Api => untrack(|| state.target.value(f)),
        f if Field::PAGE.contains(&f) => Some(settings.get(f).get_untracked()),
        _ => None,
    };
    let args = bench::base::field::args_of(value);
    bench::record::run_config::SavedRequest { command: "bench".into(), args, dataset_sha256: None }
}

/// Restores the settings a saved run was made with (its recorded request) and runs them again on
/// the current target; `Err` says why not: a flag the page has no field for, a dataset not picked
/// again, another kind of target, or settings the form refuses now.
pub fn run_again(state: AppState, saved: &bench::record::run_config::SavedRequest) -> std::result::Result<(), String> {
    let t = super::i18n::text(state.lang.get_untracked());
    let (fields, _) = bench::base::field::fields_of(&saved.args);
    let target = [Field::Endpoint, Field::ServedModel, Field::Api];
    let foreign: Vec<String> = fields
        .iter()
        .filter(|(f, _)| !Field::PAGE.contains(f) && *f != Field::Dataset && !target.contains(f))
        .map(|(f, v)| format!("{} {v}", f.flag()))
        .collect();
    if !foreign.is_empty() {
        return Err(format!("{}: {}", t.run_again_foreign, foreign.join(" ")));
    }
    let endpoint = fields.iter().find(|(f, _)| *f == Field::Endpoint).map(|(_, v)| v.clone());
    match (&endpoint, state.target.is_remote()) {
        (Some(url), false) => return Err(format!("{}: {url}", t.run_again_server)),
        (None, true) => return Err(t.run_again_engine.to_string()),
        _ => {}
    }
    let dataset = fields.iter().find(|(f, _)| *f == Field::Dataset).map(|(_, v)| v.clone());
    if dataset.is_some() && dataset != state.dataset.name() {
        return Err(format!("{}: {}", t.run_again_dataset, dataset.unwrap_or_default()));
    }
    state.settings.reset();
    if endpoint.is_some() {
        for field in target {
            state.target.restore(field, field.default_value().to_string());
        }
    }
    for (field, value) in fields.into_iter().filter(|(f, _)| *f != Field::Dataset) {
        if target.contains(&field) {
            // The same kind of target (checked above): the server's address, model and API.
            state.target.restore(field, value);
        } else {
            state.settings.get(field).set(value);
        }
    }
    match check_now(state, t) {
        Ok(request) => {
            start(state, request);
            Ok(())
        }
        Err(problems) => Err(problems.into_iter().map(|(_, p)| p).collect::<Vec<_>>().join("; ")),
    }
}

/// Why a command did not start, in the page's language (`None` for [`Refused::Busy`]).
pub fn refused_text(refused: Refused, t: &Text) -> Option<String> {
    match refused {
        Refused::Busy => None,
        Refused::NeedsReload => Some(t.run_needs_reload.to_string()),
        Refused::WrongTarget => Some(t.run_wrong_target.to_string()),
        Refused::Problems { b, problems } => {
            let lines = problems.iter().map(|(field, text)| {
                let side = if b { "B · " } else { "" };
                format!("{side}{}: {text}", field.label(t))
            });
            Some(lines.collect::<Vec<_>>().join("\n"))
        }
        Refused::Invalid(e) => Some(e),
    }
}

/// The page's state when a command starts: busy, nothing shown, a sweep view when several rates
/// are asked for.
fn begin(state: AppState, rates: &[f64], ttft_slo_ms: Option<f64>) {
    state.watch.set_value(Default::default());
    state.phase.set(Phase::Running);
    state.run_error.set(None);
    state.progress.set(Some(RunProgress::Baseline));
    state.charts.set(ChartData::default());
    state.shown.set(None);
    let sweep = rates.len() > 1;
    state.sweep.set(sweep.then(|| SweepView::new(rates.to_vec(), ttft_slo_ms)));
    // No rates: a search for the highest rate, which picks its own.
    state.search.set(rates.is_empty().then(SearchView::default));
}

/// The page idle again.
pub(super) fn idle(state: AppState) {
    state.progress.set(None);
    state.phase.set(Phase::Idle);
}

/// Saves each rate's result to the history (named after `label`, the engine batch when there is
/// one), shows the last, or the error; then the page is idle again.
fn finish(state: AppState, ended: Ended) {
    let Ended::Run { results, spec, label, batch, cancelled, error, search } = ended else { return };
    state.search.update(|s| {
        if let Some(s) = s {
            s.found = search.clone();
        }
    });
    let seen = state.watch.try_update_value(|w| std::mem::take(&mut w.done)).unwrap_or_default();
    let last = results.len().saturating_sub(1);
    let mut entries = Vec::with_capacity(results.len());
    // An entry's time is its identity: each a millisecond after the one before at least, since a
    // sweep's rates end here in the same millisecond.
    let mut time_ms = state.history.with_untracked(|h| h.last().map_or(0.0, |e| e.time_ms));
    for (i, (rate, mut result)) in results.into_iter().enumerate() {
        // Matched by position and rate: a rate cut short by Cancel has its own reading.
        if let Some(seen) = seen.get(i).filter(|s| s.rate.total_cmp(&rate).is_eq()) {
            result.metrics.long_tasks = seen.long_tasks.clone();
            if seen.conditions.is_some() {
                // The worker judged the run without them: judged again with them.
                result.metrics.browser_conditions = seen.conditions.clone();
                result.stamp();
            }
        }
        if let Some(z) = result.config.sized_rate {
            // The sized rate stands in the field now: Run again, and the next Run, use it.
            state.settings.get(Field::Rate).set(z.text());
            state.settings.rate_given();
        }
        let parts = NameParts {
            label: label.clone(),
            batch,
            sized: result.config.sized_rate.is_some(),
            cancelled: i == last && cancelled,
            search_stage: None,
        };
        let spec = WorkloadSpec { rate, ..spec.clone() };
        time_ms = crate::web::browser::now_ms().max(time_ms + 1.0);
        entries.push(Entry::named(time_ms, result, &spec, parts, &state));
    }
    // A search is one entry, which opens its runs.
    if let Some(found) = search.filter(|_| !entries.is_empty()) {
        entries = vec![history::searched(entries, found, super::i18n::text(state.lang.get_untracked()))];
    }
    let last = entries.len().saturating_sub(1);
    for (i, entry) in entries.into_iter().enumerate() {
        // A run in which every request failed is said in the error banner (`error`), not shown as
        // a report of dashes; the history keeps it, marked failed.
        let shown = i == last && !entry.result.failed();
        if shown {
            state.charts.set(ChartData::from_result(&entry.result));
        }
        let saved = history::add(state, entry);
        if shown {
            state.shown.set(Some(saved));
        }
    }
    state.run_error.set(error);
    idle(state);
}

/// What Run will run, in [`names::run_name`]'s words: a sweep's rates ("poisson 1, 2, 4 req/s"), a
/// search's `max`, and the target the run goes to (`None` while a server's address or model is
/// missing: the card says that itself).
fn run_plan(state: AppState, form: &RunRequest, t: &Text) -> Option<String> {
    let (label, batch) = if state.target.is_remote() {
        (state.target.runnable(t).ok()?.label(), None)
    } else {
        (state.choice.with(|c| c.key()), Some(form.max_batch))
    };
    let rates = if form.search.is_some() {
        "max".to_string()
    } else if state.settings.sizes_rate() && sizable(form) {
        t.rate_from_baseline.to_string()
    } else {
        form.rates.iter().map(|r| rate_text(*r)).collect::<Vec<_>>().join(", ")
    };
    Some(names::named_with_rates(&form.spec, &rates, &label, batch, t))
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
        one(&mut shown.ttfat, &new.ttfat, &mut free),
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

/// The page's side of the service: progress and live charts (the worker's snapshots, one chart
/// redrawn per animation frame), the sweep as each rate ends, the main thread's long tasks per
/// rate, then the results. A caller with more to show (the experiment) wraps it.
pub(super) fn sink(state: AppState) -> RunSink {
    let frame = Rc::new(RefCell::new(Frame::default()));
    Rc::new(move |update| match update {
        RunUpdate::Began { rates, ttft_slo_ms } => begin(state, &rates, ttft_slo_ms),
        RunUpdate::LoadingB(_) => {}
        RunUpdate::RateStarted { rate, requests } => {
            state.search.update(|s| {
                if let Some(s) = s {
                    s.started(rate);
                }
            });
            state.watch.update_value(|w| {
                w.long_tasks = crate::web::browser::LongTaskWatch::start();
                w.conditions = crate::web::browser::ConditionWatch::start();
            });
            frame.borrow_mut().reset();
            state.progress.set(Some(RunProgress::Requests { finished: 0, total: requests }));
            state.charts.set(ChartData::default());
        }
        RunUpdate::Progress { finished, total, charts: None } => {
            // Between snapshots, or a server (no live records): only how many requests have ended.
            let mut f = frame.borrow_mut();
            if f.requested {
                f.progress = Some((finished, total));
            } else {
                state.progress.set(Some(RunProgress::Requests { finished, total }));
            }
        }
        RunUpdate::Progress { finished, total, charts: Some(charts) } => {
            // The newest snapshot replaces one not yet shown.
            let mut f = frame.borrow_mut();
            f.progress = Some((finished, total));
            f.pending = Some(*charts);
            if f.requested {
                return;
            }
            f.requested = true;
            drop(f);
            show_next_frame(state, frame.clone());
        }
        RunUpdate::RateDone { rate, result } => {
            state.watch.update_value(|w| {
                let long_tasks = w.long_tasks.take().map(|watch| watch.finish());
                let tasks = long_tasks.as_ref().map_or(&[][..], |t| &t.tasks[..]);
                let conditions = w.conditions.take().map(|watch| watch.finish(tasks));
                w.done.push(RateSeen { rate, long_tasks, conditions });
            });
            // Frames still pending would show a stale snapshot over the final one.
            frame.borrow_mut().reset();
            state.sweep.update(|s| {
                if let Some(s) = s {
                    s.push(rate, &result);
                }
            });
        }
        RunUpdate::Ended(ended) => {
            frame.borrow_mut().reset();
            finish(state, *ended);
        }
    })
}

/// Run / Cancel, with progress and the reason when Run is unavailable.
/// Whether a run could start now, its settings aside (tracked): nothing running, and the model
/// loaded with the weights asked for, or the server set up.
pub fn ready(state: AppState, checked: Memo<std::result::Result<RunRequest, Problems>>, t: &Text) -> bool {
    let target_ready = if state.target.is_remote() {
        state.target.runnable(t).is_ok()
    } else {
        state.model_info.with(Option::is_some) && !reload_pending(state, checked)
    };
    state.phase.get() == Phase::Idle && target_ready
}

/// The engine's model was uploaded with other weights or speculation than the settings ask for
/// (tracked).
fn reload_pending(state: AppState, checked: Memo<std::result::Result<RunRequest, Problems>>) -> bool {
    !state.target.is_remote()
        && checked.with(|c| {
            let wanted = c.as_ref().map(|c| c.load.clone()).ok();
            state.model_info.with(|m| matches!((m, wanted), (Some(m), Some(w)) if m.load != w))
        })
}

/// *Find the highest rate*: the Rate set to `max`, then the run started as Run starts it; with a
/// problem (no SLO), nothing starts and the problem shows under its field.
pub fn search(state: AppState, checked: Memo<std::result::Result<RunRequest, Problems>>) {
    state.settings.get(Field::Rate).set("max".into());
    if let Ok(config) = checked.get_untracked() {
        start(state, config);
    }
}

#[component]
pub fn RunPanel(state: AppState, checked: Memo<std::result::Result<RunRequest, Problems>>) -> impl IntoView {
    let t = use_text();
    let running = move || state.phase.get() == Phase::Running;
    let reload_pending = move || reload_pending(state, checked);
    let can_run = move || ready(state, checked, t()) && checked.with(|c| c.is_ok());
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
        cancel_run(state);
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
            // In a search: the rate being tried.
            let rate = rate.or_else(|| {
                state.search.with(|s| s.as_ref()?.trying.map(|(rate, n)| format!("{} · ", trying_text(rate, n, t()))))
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
            // What Run will run, as the history will name it: plain text (a server's address).
            {move || {
                checked
                    .with(|c| c.as_ref().ok().and_then(|form| run_plan(state, form, t())))
                    .map(|plan| {
                        view! {
                            <p class="run-plan" data-testid="run-plan">
                                <span class="muted">{t().run_plan} " "</span>
                                {plan}
                            </p>
                        }
                    })
            }}
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
                    .map(|e| view! { <p class="error" role="alert" data-testid="run-error">{move || t().run_failed} ": " {e}</p> })
            }}
        </section>
    }
}

/// The live validation of the settings against the loaded model.
pub fn checked(state: AppState) -> Memo<std::result::Result<RunRequest, Problems>> {
    let t = use_text();
    Memo::new(move |_| check_now(state, t()))
}

/// The form checked now (tracked where read in a reactive scope).
fn check_now(state: AppState, t: &Text) -> std::result::Result<RunRequest, Problems> {
    // A server's limits are its own: only the in-browser engine's are checked here.
    let caps = if state.target.is_remote() { None } else { state.model_info.with(|m| m.as_ref().map(|m| m.caps)) };
    let settings = state.settings;
    let dataset = state.dataset.name();
    let value = |f| match f {
        Field::Dataset => dataset.clone(),
        Field::Endpoint | Field::ServedModel | Field::Api => state.target.value(f),
        f => settings.value(f),
    };
    settings::validate(&value, caps, t)
}
