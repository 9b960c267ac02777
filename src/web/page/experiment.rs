//! The Experiment card: A (the settings) against B (the same settings with a few engine fields
//! changed), the same workload run A B A B … on the page's engine by
//! `bench::run::experiment::run_alternating`, then one verdict per metric (`bench::verdict::compare`). B shares
//! the loaded model when only runtime settings differ (batch, tokens per step, scheduling); other
//! weights or speculation upload a second copy for B, freed afterwards.

use super::experiment_result::ExperimentResult;
use super::i18n::{use_text, Text};
use super::link::RunSink;
use super::run;
use super::settings::{self, Field, Problems, RunRequest};
use super::state::{AppState, Phase};
use crate::bench::verdict::compare::Comparison;
use crate::bench::verdict::quality::Quality;
use crate::bench::BenchResult;
use crate::web::protocol::RunUpdate;
use crate::web::protocol::{ChartData, Command, Ended};
use leptos::prelude::*;
use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;

/// The fields B may change; everything else (the workload, the SLOs) is A's, so both sides run
/// the same plan.
pub const VARIANT_FIELDS: [Field; 7] = [
    Field::Weights,
    Field::Speculate,
    Field::Policy,
    Field::ChunkedPrefill,
    Field::PrefillChunk,
    Field::MaxBatch,
    Field::MaxBatchedTokens,
];

/// Repetitions per side: at least 2 (one gives no measure of drift), at most 20.
const MAX_REPEATS: usize = 20;

/// What the card shows after (or during) an experiment.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// Every repetition kept, per side, in the order they ran.
    pub a: Vec<BenchResult>,
    pub b: Vec<BenchResult>,
    /// What B changed: (field, A's value, B's value).
    pub changes: Vec<(Field, String, String)>,
    pub comparison: std::result::Result<Comparison, String>,
    /// Cancelled: only finished repetitions are compared.
    pub cancelled: bool,
    /// B's output quality against A's, where B computes differently (the worker decides).
    pub quality: Option<std::result::Result<Quality, String>>,
}

/// The card's state.
#[derive(Clone, Copy)]
pub struct ExperimentState {
    /// B's values of the [`VARIANT_FIELDS`] that differ from A's.
    pub overrides: RwSignal<Vec<(Field, String)>>,
    pub repeats: RwSignal<String>,
    /// Which run is going ("B · repetition 2 of 3").
    pub progress: RwSignal<Option<String>>,
    pub outcome: RwSignal<Option<Arc<Outcome>>>,
    pub error: RwSignal<Option<String>>,
    pub running: RwSignal<bool>,
}

impl ExperimentState {
    pub fn new() -> ExperimentState {
        ExperimentState {
            overrides: RwSignal::new(Vec::new()),
            repeats: RwSignal::new("3".into()),
            progress: RwSignal::new(None),
            outcome: RwSignal::new(None),
            error: RwSignal::new(None),
            running: RwSignal::new(false),
        }
    }

    /// B's value of `field` (tracked): its override, else A's.
    fn b_value(&self, settings: settings::Settings, field: Field) -> String {
        self.overrides
            .with(|o| o.iter().find(|(f, _)| *f == field).map(|(_, v)| v.clone()))
            .unwrap_or_else(|| settings.get(field).get())
    }

    fn set_b(&self, settings: settings::Settings, field: Field, value: String) {
        let same = settings.get(field).get_untracked() == value;
        self.overrides.update(|o| {
            o.retain(|(f, _)| *f != field);
            if !same {
                o.push((field, value));
            }
        });
    }
}

impl Default for ExperimentState {
    fn default() -> Self {
        ExperimentState::new()
    }
}

/// B's changes against A: (field, A's value, B's value), in the editor's order (tracked).
fn changes(state: AppState, x: ExperimentState) -> Vec<(Field, String, String)> {
    x.overrides.with(|o| {
        VARIANT_FIELDS
            .iter()
            .filter_map(|f| o.iter().find(|(g, _)| g == f))
            .map(|(f, b)| (*f, state.settings.get(*f).get(), b.clone()))
            .collect()
    })
}

/// "Max batch: 16 → 1 · Scheduling policy: fcfs → decode-first", or that B is A.
pub(super) fn changes_text(changes: &[(Field, String, String)], t: &Text) -> String {
    if changes.is_empty() {
        return t.b_same.to_string();
    }
    let show = |v: &str| if v.is_empty() { "–".to_string() } else { v.to_string() };
    let lines: Vec<String> =
        changes.iter().map(|(f, a, b)| format!("{}: {} → {}", f.label(t), show(a), show(b))).collect();
    lines.join(" · ")
}

/// The label of the `n`th session run of an experiment (0-based): the warm-ups, then A B A B ….
fn run_label(n: usize, repeats: usize, t: &Text) -> String {
    match n {
        0 => format!("A · {}", t.warmup),
        1 => format!("B · {}", t.warmup),
        n => {
            let side = if (n - 2) % 2 == 0 { "A" } else { "B" };
            let i = (n - 2) / 2 + 1;
            format!("{side} · {}", t.repetition_of.replace("{i}", &i.to_string()).replace("{r}", &repeats.to_string()))
        }
    }
}

/// Starts the experiment: A is `a`, B is `b` (same workload), `repeats` per side.
fn start(state: AppState, x: ExperimentState, a: RunRequest, b: RunRequest, repeats: usize) {
    let changes = untrack(|| changes(state, x));
    x.error.set(None);
    x.outcome.set(None);
    x.progress.set(None);
    let page = run::sink(state);
    let started = Cell::new(0usize);
    let sink: RunSink = Rc::new(move |update| {
        let t = super::i18n::text(state.lang.get_untracked());
        match update {
            RunUpdate::LoadingB(p) => x.progress.set(Some(t.loading_b.replace("{p}", &p.to_string()))),
            RunUpdate::RateStarted { .. } => {
                x.progress.set(Some(run_label(started.get(), repeats, t)));
                started.set(started.get() + 1);
            }
            RunUpdate::Ended(ended) if matches!(*ended, Ended::Experiment(_)) => {
                let Ended::Experiment(end) = *ended else { return };
                if let Some(last) = &end.last {
                    state.charts.set(ChartData::from_result(last));
                }
                x.error.set(end.error);
                if !end.a.is_empty() || !end.b.is_empty() {
                    let (a, b, comparison, cancelled, quality) =
                        (end.a, end.b, end.comparison, end.cancelled, end.quality);
                    let changes = changes.clone();
                    x.outcome.set(Some(Arc::new(Outcome { a, b, changes, comparison, cancelled, quality })));
                }
                x.running.set(false);
                x.progress.set(None);
                run::idle(state);
                return;
            }
            _ => {}
        }
        page(update);
    });
    x.running.set(true);
    let refused = Rc::new(move |e| {
        x.running.set(false);
        x.error.set(Some(e));
    });
    run::send(state, Command::Experiment { a: Box::new(a), b: Box::new(b), repeats }, sink, refused);
}

/// B's settings: A's, with B's overrides (validated the same way, against the loaded model).
fn checked_b(state: AppState, x: ExperimentState) -> Memo<std::result::Result<RunRequest, Problems>> {
    let t = use_text();
    Memo::new(move |_| {
        let caps = state.model_info.with(|m| m.as_ref().map(|m| m.caps));
        let dataset = state.dataset.name();
        let value = |f: Field| match f {
            Field::Dataset => dataset.clone(),
            f => Field::PAGE.contains(&f).then(|| x.b_value(state.settings, f)),
        };
        settings::validate(&value, caps, t())
    })
}

/// The card: B's editor, repetitions, Run / Cancel, progress, then the verdict table, the text
/// report and the download.
#[component]
pub fn ExperimentPanel(
    state: AppState,
    x: ExperimentState,
    checked: Memo<std::result::Result<RunRequest, Problems>>,
) -> impl IntoView {
    let t = use_text();
    let checked_b = checked_b(state, x);
    let repeats = Memo::new(move |_| {
        x.repeats
            .with(|r| limits_count(r, 2, MAX_REPEATS))
            .map_err(|_| format!("{} (2–{MAX_REPEATS})", t().not_a_count))
    });
    // Why the experiment cannot run now, if it cannot.
    let problem = move || -> Option<String> {
        if state.target.is_remote() {
            return Some(t().experiment_remote.into());
        }
        match checked.get() {
            Err(_) => return Some(t().fix_settings.into()),
            Ok(c) if c.rates.len() > 1 => return Some(t().experiment_one_rate.into()),
            Ok(_) => {}
        }
        if checked_b.with(|c| c.is_err()) {
            return Some(t().experiment_fix_b.into());
        }
        None
    };
    let can_run = move || {
        state.phase.get() == Phase::Idle
            && state.model_info.with(Option::is_some)
            && problem().is_none()
            && repeats.with(|r| r.is_ok())
    };
    let cancelling = RwSignal::new(false);
    let run = move |_| {
        let (Ok(a), Ok(b), Ok(r)) = (checked.get_untracked(), checked_b.get_untracked(), repeats.get_untracked())
        else {
            return;
        };
        cancelling.set(false);
        start(state, x, a, b, r);
    };
    let cancel = move |_| {
        cancelling.set(true);
        run::cancel_run(state);
    };
    let summary = move || changes_text(&changes(state, x), t());
    view! {
        <section class="card" aria-labelledby="experiment-title" data-testid="experiment">
            <div class="card-head">
                <h2 id="experiment-title">{move || t().experiment}</h2>
            </div>
            <p class="note">{move || t().experiment_note}</p>
            <div class="table-scroll">
                <table class="table variant">
                    <thead>
                        <tr>
                            <th scope="col">{move || t().setting}</th>
                            <th scope="col">"A"</th>
                            <th scope="col">"B"</th>
                        </tr>
                    </thead>
                    <tbody>
                        {VARIANT_FIELDS
                            .into_iter()
                            .map(|field| view! { <VariantRow state=state x=x field=field checked_b=checked_b /> })
                            .collect_view()}
                    </tbody>
                </table>
            </div>
            <p class="note" data-testid="b-differs">
                <strong>{move || t().b_differs}</strong>
                " "
                {summary}
            </p>
            <div class="row experiment-controls">
                <label class="field">
                    <span class="field-label">{move || t().repetitions}</span>
                    <input
                        data-testid="experiment-repeats"
                        autocomplete="off"
                        prop:value=move || x.repeats.get()
                        disabled=move || x.running.get()
                        aria-invalid=move || repeats.with(|r| r.is_err()).to_string()
                        on:input=move |ev| x.repeats.set(event_target_value(&ev))
                    />
                    <span class="field-hint">{move || t().repetitions_hint}</span>
                    <span class="field-error" role="alert">{move || repeats.get().err()}</span>
                </label>
                <button class="primary" data-testid="run-experiment" disabled=move || !can_run() on:click=run>
                    {move || t().run_experiment}
                </button>
                <button
                    class="ghost"
                    data-testid="cancel-experiment"
                    disabled=move || !x.running.get() || cancelling.get()
                    on:click=cancel
                >
                    {move || t().cancel}
                </button>
            </div>
            <p class="progress-line num" data-testid="experiment-progress" role="status">
                {move || x.progress.get()}
            </p>
            {move || problem().filter(|_| !x.running.get()).map(|p| view! { <p class="note warn">{p}</p> })}
            {move || x.error.get().map(|e| view! { <p class="error" role="alert">{move || t().experiment_failed} ": " {e}</p> })}
            <ExperimentResult state=state x=x />
        </section>
    }
}

/// One of B's fields: its label, A's value, B's editor (a select or a text input) and B's problem.
#[component]
fn VariantRow(
    state: AppState,
    /// The card's state: B's overrides, and whether an experiment runs.
    x: ExperimentState,
    /// One of the [`VARIANT_FIELDS`].
    field: Field,
    /// B's settings, checked.
    checked_b: Memo<std::result::Result<RunRequest, Problems>>,
) -> impl IntoView {
    let t = use_text();
    let a_value = move || {
        let v = state.settings.get(field).get();
        if v.is_empty() {
            "–".to_string()
        } else {
            v
        }
    };
    let differs = move || x.overrides.with(|o| o.iter().any(|(f, _)| *f == field));
    let problem =
        move || checked_b.with(|c| c.as_ref().err()?.iter().find(|(f, _)| *f == field).map(|(_, m)| m.clone()));
    let id = format!("b-{}", field.key());
    let editor = match field {
        Field::Weights | Field::Policy | Field::ChunkedPrefill => {
            let options: Vec<&'static str> = match field {
                Field::Weights => vec!["bf16", "int8", "int4"],
                Field::Policy => vec!["fcfs", "prefill-first", "decode-first"],
                _ => vec!["on", "off"],
            };
            view! {
                <select
                    id=id.clone()
                    data-testid=id.clone()
                    disabled=move || x.running.get()
                    prop:value=move || x.b_value(state.settings, field)
                    on:change=move |ev| x.set_b(state.settings, field, event_target_value(&ev))
                >
                    {options
                        .into_iter()
                        .map(|o| {
                            view! {
                                <option value=o selected=move || x.b_value(state.settings, field) == o>
                                    {o}
                                </option>
                            }
                        })
                        .collect_view()}
                </select>
            }
            .into_any()
        }
        _ => view! {
            <input
                id=id.clone()
                data-testid=id.clone()
                autocomplete="off"
                spellcheck="false"
                disabled=move || x.running.get()
                aria-invalid=move || problem().is_some().to_string()
                prop:value=move || x.b_value(state.settings, field)
                on:input=move |ev| x.set_b(state.settings, field, event_target_value(&ev))
            />
        }
        .into_any(),
    };
    view! {
        <tr class:differs=differs class:invalid=move || problem().is_some()>
            <th scope="row">
                <label for=id>{move || field.label(t())}</label>
            </th>
            <td class="num">{a_value}</td>
            <td>{editor} <span class="field-error" role="alert">{problem}</span></td>
        </tr>
    }
}

fn limits_count(text: &str, min: usize, max: usize) -> std::result::Result<usize, String> {
    crate::limits::parse_count(text, min, max)
}
