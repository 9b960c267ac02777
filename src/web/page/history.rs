//! Past runs, kept in localStorage as their `BenchResult` JSON with a name and a time; any two
//! side by side, each change in percent, coloured by whether it is better.

use super::i18n::{use_text, Text, UiLang};
use super::pareto::ParetoChart;
use super::state::AppState;
use super::verdict::VerdictTable;
use crate::bench::run::experiment::compare_results;
use crate::bench::run::max_rate::{MaxRate, Stage};
use crate::bench::verdict::compare::{CompareOptions, Comparison};
use crate::bench::{BenchResult, BenchmarkMetrics, WorkloadSpec};
use crate::web::browser;
use crate::web::protocol::ChartData;
use leptos::prelude::*;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

const STORAGE_KEY: &str = "tokenmeter.runs.v1";
/// Runs kept; the oldest go first (and sooner when the storage quota is reached).
const MAX_RUNS: usize = 30;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Entry {
    /// Milliseconds since the epoch at the end of the run; also the entry's identity.
    pub time_ms: f64,
    pub name: String,
    /// The run; a search's: the run at the rate it found (else its last run).
    pub result: BenchResult,
    /// A highest-rate search saved as one entry: what it found, and every run it made (the
    /// trials' `result` index them), which the entry opens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search: Option<MaxRate>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runs: Vec<BenchResult>,
    /// What the name is made of, so that it is built in the page's language when shown
    /// ([`Entry::title`]); `name` is what it read when saved (all that entries saved before have).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parts: Option<NameParts>,
}

/// A run's name's parts beside its workload (the result's): the model or server, the engine's
/// batch, and its marks.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NameParts {
    pub label: String,
    pub batch: Option<usize>,
    /// Its rate was sized from the baseline.
    #[serde(default)]
    pub sized: bool,
    /// Cancel cut it short.
    #[serde(default)]
    pub cancelled: bool,
    /// One run of a search, opened from its entry: why it was made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search_stage: Option<Stage>,
}

impl Entry {
    /// A run of `spec` ended at `time_ms`, named from `parts` (`name` in the page's language now).
    pub fn named(time_ms: f64, result: BenchResult, spec: &WorkloadSpec, parts: NameParts, state: &AppState) -> Entry {
        let t = super::i18n::text(state.lang.get_untracked());
        let name = title_of(spec, &parts, None, t);
        Entry { time_ms, name, result, search: None, runs: Vec::new(), parts: Some(parts) }
    }

    /// The name in `t`'s language: built from the parts and the result's workload where the entry
    /// has them, else as saved.
    pub fn title(&self, t: &Text) -> String {
        match (&self.parts, &self.result.config.workload) {
            (Some(parts), Some(spec)) => title_of(spec, parts, self.search.as_ref().map(|_| self.runs.len()), t),
            _ => self.name.clone(),
        }
    }
}

/// [`Entry::title`]: the run's name, its marks, and a search's (`search_runs`: its run count).
fn title_of(spec: &WorkloadSpec, parts: &NameParts, search_runs: Option<usize>, t: &Text) -> String {
    let mut name = super::names::run_name(spec, &parts.label, parts.batch, t);
    if parts.sized {
        name.push_str(t.rate_sized_mark);
    }
    if parts.cancelled {
        name.push_str(t.name_cancelled);
    }
    if let Some(n) = search_runs {
        name = format!("{name} · {}", t.history_search_mark.replace("{n}", &n.to_string()));
    }
    if let Some(stage) = parts.search_stage {
        name = format!("{name} · {}", super::search::stage_text(stage, t));
    }
    name
}

/// Restores a saved run's request into the settings and runs it; `Err` says why not.
pub type RunAgain = fn(AppState, &crate::bench::record::run_config::SavedRequest) -> std::result::Result<(), String>;

/// Whatever parses of what was saved (a broken entry is skipped, not fatal).
pub fn load() -> Vec<Arc<Entry>> {
    let Some(text) = browser::storage_get(STORAGE_KEY) else { return Vec::new() };
    let Ok(values) = serde_json::from_str::<Vec<serde_json::Value>>(&text) else { return Vec::new() };
    values.into_iter().filter_map(|v| serde_json::from_value::<Entry>(v).ok()).map(Arc::new).collect()
}

/// Saves the list, dropping the oldest runs until it fits. Returns how many were dropped.
pub fn save(entries: &mut Vec<Arc<Entry>>) -> usize {
    let mut dropped = entries.len().saturating_sub(MAX_RUNS);
    entries.drain(..dropped);
    loop {
        let json = serde_json::to_string(&**entries).expect("serialisable");
        if browser::storage_set(STORAGE_KEY, &json).is_ok() || entries.is_empty() {
            return dropped;
        }
        entries.remove(0);
        dropped += 1;
    }
}

/// Adds a finished run and shows it.
pub fn add(state: AppState, entry: Entry) -> Arc<Entry> {
    let entry = Arc::new(entry);
    let mut dropped = 0;
    state.history.update(|list| {
        list.push(entry.clone());
        dropped = save(list);
    });
    if dropped > 0 {
        state.history_dropped.set(true);
    }
    entry
}

/// A search's runs (`runs`, one entry each, in order) as one entry: the run at the rate it found
/// (else its last) named and shown for it, every run kept for the entry to open.
pub fn searched(runs: Vec<Entry>, found: MaxRate, t: &Text) -> Entry {
    let last = runs.len() - 1;
    let at_found = found.trials.iter().rev().find(|t| t.met && Some(t.rate) == found.rate).map(|t| t.result);
    let chosen = at_found.filter(|&i| i <= last).unwrap_or(last);
    let (result, time_ms, parts) = (runs[chosen].result.clone(), runs[last].time_ms, runs[chosen].parts.clone());
    let runs = runs.into_iter().map(|e| e.result).collect();
    let mut entry = Entry { time_ms, name: String::new(), result, search: Some(found), runs, parts };
    entry.name = entry.title(t);
    entry
}

/// Which way is better for a metric.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Better {
    Lower,
    Higher,
}

type Getter = fn(&BenchmarkMetrics) -> Option<f64>;

fn rows() -> Vec<(&'static str, Better, Getter)> {
    use Better::*;
    vec![
        ("TTFT mean (ms)", Lower, |m| Some(m.ttft_ms.mean)),
        ("TTFT p50 (ms)", Lower, |m| Some(m.ttft_ms.p50)),
        ("TTFT p99 (ms)", Lower, |m| Some(m.ttft_ms.p99)),
        ("TTFT from send p50 (ms)", Lower, |m| m.ttft_from_send_ms.as_ref().map(|s| s.p50)),
        ("TPOT mean (ms)", Lower, |m| Some(m.tpot_ms.mean)),
        ("TPOT p50 (ms)", Lower, |m| Some(m.tpot_ms.p50)),
        ("TPOT p99 (ms)", Lower, |m| Some(m.tpot_ms.p99)),
        ("ITL mean (ms)", Lower, |m| Some(m.itl_ms.mean)),
        ("ITL p99 (ms)", Lower, |m| Some(m.itl_ms.p99)),
        ("E2E mean (ms)", Lower, |m| Some(m.e2e_ms.mean)),
        ("E2E p99 (ms)", Lower, |m| Some(m.e2e_ms.p99)),
        ("req/s", Higher, |m| Some(m.request_throughput)),
        ("output tok/s", Higher, |m| Some(m.output_throughput)),
        ("total tok/s", Higher, |m| Some(m.total_token_throughput)),
        ("goodput (req/s)", Higher, |m| m.goodput),
        ("failed", Lower, |m| Some(m.failed as f64)),
        ("preemptions", Lower, |m| m.preemptions.map(|n| n as f64)),
    ]
}

fn cell(x: Option<f64>) -> String {
    match x {
        // Counts (failed, preemptions) read better without decimals.
        Some(x) if x.is_finite() && x.fract() == 0.0 && x.abs() < 1e9 => format!("{x:.0}"),
        Some(x) if x.is_finite() => format!("{x:.2}"),
        _ => "–".into(),
    }
}

/// (text, class) of the change from `a` to `b`.
fn change(a: Option<f64>, b: Option<f64>, better: Better) -> (String, &'static str) {
    let (Some(a), Some(b)) = (a, b) else { return ("–".into(), "same") };
    if !a.is_finite() || !b.is_finite() {
        return ("–".into(), "same");
    }
    if a == b {
        return ("0%".into(), "same");
    }
    let class = match (b < a, better) {
        (true, Better::Lower) | (false, Better::Higher) => "better",
        _ => "worse",
    };
    if a == 0.0 {
        return (format!("{b:+.2}"), class);
    }
    let percent = (b - a) / a.abs() * 100.0;
    let class = if percent.abs() < 1.0 { "same" } else { class };
    (format!("{percent:+.1}%"), class)
}

#[component]
fn SideBySide(a: Arc<Entry>, b: Arc<Entry>) -> impl IntoView {
    let t = use_text();
    let (ma, mb) = (a.result.metrics.clone(), b.result.metrics.clone());
    let body = rows()
        .into_iter()
        .map(|(label, better, get)| {
            let (va, vb) = (get(&ma), get(&mb));
            let (delta, class) = change(va, vb, better);
            view! {
                <tr>
                    <th scope="row">{label}</th>
                    <td>{cell(va)}</td>
                    <td>{cell(vb)}</td>
                    <td class=format!("delta {class}")>{delta}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <div class="compare" data-testid="comparison">
            <h3>{move || t().comparison}</h3>
            <table class="table">
                <thead>
                    <tr>
                        <th scope="col">{move || t().metric}</th>
                        <th scope="col">"A · " {move || a.title(t())}</th>
                        <th scope="col">"B · " {move || b.title(t())}</th>
                        <th scope="col">{move || t().change}</th>
                    </tr>
                </thead>
                <tbody>{body}</tbody>
            </table>
        </div>
    }
}

/// `bench::run::experiment::compare_results` over two saved runs (one repetition each); its error says
/// why when their workloads, `ignore_eos` or SLOs differ.
fn test_pair(
    pair: Option<(Arc<Entry>, Arc<Entry>)>,
    tested: RwSignal<Option<std::result::Result<Comparison, String>>>,
) {
    let Some((a, b)) = pair else { return };
    let outcome = compare_results(
        std::slice::from_ref(&a.result),
        std::slice::from_ref(&b.result),
        None,
        &CompareOptions::default(),
    );
    let t = super::i18n::text(expect_context::<super::i18n::UiLang>().0.get_untracked());
    let outcome = outcome.map_err(|e| match workload_difference(&a.result, &b.result) {
        Some(diff) => format!("{} {diff}", t.workloads_differ),
        None => crate::limits::printable(&e.to_string()),
    });
    tested.set(Some(outcome));
}

/// How two runs' recorded workloads differ, field by field ("num_requests 8 / 6, dataset none /
/// tiny.jsonl"); `None` when they are the same.
fn workload_difference(a: &BenchResult, b: &BenchResult) -> Option<String> {
    use serde_json::Value;
    let fields = |r: &BenchResult| match serde_json::to_value(&r.config.workload) {
        Ok(Value::Object(map)) => map,
        _ => serde_json::Map::new(),
    };
    let (fa, fb) = (fields(a), fields(b));
    // A dataset by its file's name; anything else as compact JSON, each at most 200 characters.
    let show = |v: Option<&Value>| match v {
        None | Some(Value::Null) => "none".to_string(),
        Some(Value::Object(o)) if o.contains_key("file") => {
            crate::limits::printable(o["file"].as_str().unwrap_or_default())
        }
        Some(v) => crate::limits::printable(&v.to_string()),
    };
    let keys: std::collections::BTreeSet<&String> = fa.keys().chain(fb.keys()).collect();
    let differ: Vec<String> = keys
        .into_iter()
        .filter(|k| fa.get(*k) != fb.get(*k))
        .map(|k| format!("{k} {} / {}", show(fa.get(k)), show(fb.get(k))))
        .collect();
    (!differ.is_empty()).then(|| differ.join(", "))
}

/// Every saved run's point on the Pareto chart, oldest first.
fn pareto_of_history(state: &AppState) -> (Vec<crate::bench::present::pareto::ParetoPoint>, bool) {
    // A run in which every request failed has no trade-off to show.
    state.history.with(|list| {
        let t = super::i18n::text(state.lang.get());
        super::pareto::points_of(list.iter().filter(|e| !e.result.failed()).map(|e| (e.title(t), &e.result)))
    })
}

fn summary(e: &Entry, t: &Text) -> String {
    let m = &e.result.metrics;
    format!(
        "TTFT p50 {} ms · TPOT p50 {} ms · {} tok/s · {} {}",
        cell(Some(m.ttft_ms.p50)),
        cell(Some(m.tpot_ms.p50)),
        cell(Some(m.output_throughput)),
        m.completed,
        t.completed.to_lowercase()
    )
}

/// The saved runs, newest first, each with a tick box (A, then B), Show, Run again and Delete;
/// their Pareto chart; the two ticked side by side and, on request, tested against each other.
#[component]
pub fn HistoryPanel(
    state: AppState,
    /// *Run again* (`run::run_again`, handed in by the app: the history does not import the run).
    run_again: RunAgain,
) -> impl IntoView {
    let t = use_text();
    // Ticked runs, in the order ticked: the first is A, the second B.
    let picked = RwSignal::new(Vec::<f64>::new());
    let clear = move |_| {
        picked.set(Vec::new());
        state.history.update(|list| {
            list.clear();
            save(list);
        });
    };
    // The A/B test of the two ticked runs (each one repetition), cleared when the pick changes.
    let tested = RwSignal::new(None::<std::result::Result<Comparison, String>>);
    Effect::new(move |_| {
        picked.track();
        tested.set(None);
    });
    let pair = move || {
        let ids = picked.get();
        let list = state.history.get();
        let find = |id: f64| list.iter().find(|e| e.time_ms == id).cloned();
        match ids.as_slice() {
            [a, b] => Some((find(*a)?, find(*b)?)),
            _ => None,
        }
    };
    view! {
        <section class="card" aria-labelledby="history-title" data-testid="history">
            <div class="card-head">
                <h2 id="history-title">{move || t().history}</h2>
                <button class="link" on:click=clear disabled=move || state.history.with(Vec::is_empty)>
                    {move || t().clear}
                </button>
            </div>
            <p class="note">
                {move || if state.history.with(Vec::is_empty) { t().history_empty } else { t().compare_hint }}
            </p>
            <Show when=move || state.history_dropped.get()>
                <p class="note warn">{move || t().history_not_saved}</p>
            </Show>
            <ul class="runs">
                <For
                    each=move || state.history.get().into_iter().rev()
                    key=|e| e.time_ms.to_bits()
                    children=move |e| view! { <SavedRun state=state entry=e picked=picked run_again=run_again /> }
                />
            </ul>
            <ParetoChart
                points=Signal::derive(move || pareto_of_history(&state).0)
                per_gpu=Signal::derive(move || pareto_of_history(&state).1)
                testid="history-pareto"
            />
            {move || pair().map(|(a, b)| view! { <SideBySide a=a b=b /> })}
            <Show when=move || pair().is_some()>
                <div class="row history-test">
                    <button class="small" data-testid="history-test" on:click=move |_| test_pair(pair(), tested)>
                        {move || t().test_difference}
                    </button>
                </div>
            </Show>
            <TestOutcome tested=tested />
        </section>
    }
}

/// One saved run: its tick box and letter, name, time and summary, and its buttons.
#[component]
fn SavedRun(
    state: AppState,
    entry: Arc<Entry>,
    /// The ticked runs' times, A first.
    picked: RwSignal<Vec<f64>>,
    /// *Run again*, as handed to the panel.
    run_again: RunAgain,
) -> impl IntoView {
    let t = use_text();
    let id = entry.time_ms;
    let toggle = move |on: bool| {
        picked.update(|p| {
            p.retain(|&x| x != id);
            if on {
                p.push(id);
            }
            if p.len() > 2 {
                p.remove(0);
            }
        })
    };
    let delete = move || {
        picked.update(|p| p.retain(|&x| x != id));
        state.history.update(|list| {
            list.retain(|e| e.time_ms != id);
            save(list);
        });
    };
    let show = move |entry: Arc<Entry>| {
        // A search's entry shows its card again, as it ended.
        if let Some(found) = entry.search.clone() {
            state.search.set(Some(super::search::SearchView { trying: None, found: Some(found) }));
        }
        state.charts.set(ChartData::from_result(&entry.result));
        state.shown.set(Some(entry));
    };
    let runs = (entry.search.is_some() && !entry.runs.is_empty())
        .then(|| view! { <SearchRuns state=state entry=entry.clone() /> });
    let time = browser::local_time(entry.time_ms);
    let named = entry.clone();
    let name = move || named.title(t());
    let shown = entry.clone();
    // The request the run recorded, when it was a bench run (the page's and the CLI's record one;
    // results saved before did not).
    let saved = entry.result.config.request.clone().filter(|r| r.command == "bench");
    let can_run_again = saved.is_some();
    let failed = entry.result.failed();
    // A failed run is marked failed; another stamped INVALID says so, its reasons on hover.
    let validity = entry.result.validity();
    let invalid = (!failed && !validity.valid).then_some(validity);
    let letter = move || match picked.with(|p| p.iter().position(|&x| x == id)) {
        Some(0) => "A",
        Some(_) => "B",
        None => "",
    };
    view! {
        <li class="run" class:picked=move || !letter().is_empty()>
            <label class="run-pick">
                <input
                    type="checkbox"
                    prop:checked=move || picked.with(|p| p.contains(&id))
                    on:change=move |ev| toggle(event_target_checked(&ev))
                />
                <span class="badge">{letter}</span>
            </label>
            <div class="run-text">
                <div class="run-name">
                    {name}
                    {failed.then(|| view! { <span class="failed-mark" data-testid="run-failed">{move || t().history_failed}</span> })}
                    {invalid.map(|validity| {
                        let UiLang(ui) = expect_context::<UiLang>();
                        let title = move || validity.text(ui.get());
                        view! { <span class="invalid-mark" data-testid="run-invalid" title=title>{move || t().run_invalid}</span> }
                    })}
                </div>
                <div class="run-meta num">
                    {time} " · " {move || summary(&entry, t())}
                </div>
                {runs}
            </div>
            <div class="run-actions">
                <button class="small" on:click=move |_| show(shown.clone())>
                    {move || t().show}
                </button>
                <button
                    class="small"
                    data-testid="run-again"
                    title=move || t().run_again_hint
                    disabled=move || !can_run_again || state.phase.get() != super::state::Phase::Idle
                    on:click=move |_| {
                        if let Some(saved) = &saved {
                            if let Err(why) = run_again(state, saved) {
                                state.run_error.set(Some(why));
                            }
                        }
                    }
                >
                    {move || t().run_again}
                </button>
                <button class="small ghost" on:click=move |_| delete()>
                    {move || t().delete}
                </button>
            </div>
        </li>
    }
}

/// A search's runs, opened from its entry: each run's rate, why it was made, its attainment and
/// verdict, and a Show of its report.
#[component]
fn SearchRuns(state: AppState, entry: Arc<Entry>) -> impl IntoView {
    let t = use_text();
    let UiLang(lang) = expect_context::<UiLang>();
    let open = RwSignal::new(false);
    let found = entry.search.clone().unwrap_or_else(|| unreachable!("a search's entry"));
    let count = entry.runs.len();
    let rows = found
        .trials
        .iter()
        .filter_map(|trial| Some((trial.clone(), entry.runs.get(trial.result)?.clone())))
        .map(|(trial, result)| {
            let rate = super::sweep::rate_text(trial.rate);
            let (stage, attainment) = (trial.stage, trial.attainment * 100.0);
            let parts =
                NameParts { search_stage: Some(stage), cancelled: false, ..entry.parts.clone().unwrap_or_default() };
            let verdict = move || super::search::trial_verdict(&trial, t(), lang.get());
            let name = entry.name.clone();
            let shown = Arc::new(Entry {
                time_ms: entry.time_ms,
                name,
                result,
                search: None,
                runs: Vec::new(),
                parts: Some(parts),
            });
            let show = move |_| {
                state.charts.set(ChartData::from_result(&shown.result));
                state.shown.set(Some(shown.clone()));
            };
            view! {
                <li class="search-run">
                    <span class="num">
                        {move || format!("{rate} req/s · {} · {attainment:.1}%", super::search::stage_text(stage, t()))}
                    </span>
                    " · "
                    <span>{verdict}</span>
                    <button class="small" data-testid="search-run-show" on:click=show>
                        {move || t().show}
                    </button>
                </li>
            }
        })
        .collect_view();
    view! {
        <button class="link" data-testid="search-runs-open" aria-expanded=move || open.get().to_string() on:click=move |_| open.update(|o| *o = !*o)>
            {move || t().history_search_runs.replace("{n}", &count.to_string())}
        </button>
        <ol class="search-runs-list" data-testid="search-runs-list" hidden=move || !open.get()>
            {rows}
        </ol>
    }
}

/// The test of the two ticked runs: its warnings and verdicts, or why they cannot be compared.
#[component]
fn TestOutcome(
    /// `None` until tested (and again when the pick changes).
    tested: RwSignal<Option<std::result::Result<Comparison, String>>>,
) -> impl IntoView {
    let t = use_text();
    move || {
        tested.get().map(|outcome| match outcome {
            Ok(c) => {
                let warnings = c.warnings.clone();
                view! {
                    <div class="compare" data-testid="history-verdicts">
                        {warnings.into_iter().map(|w| view! { <p class="note warn">{w}</p> }).collect_view()}
                        <VerdictTable comparison=c />
                    </div>
                }
                .into_any()
            }
            Err(e) => view! {
                <p class="error" role="alert" data-testid="history-test-error">
                    {move || t().cannot_compare} ": " {e.clone()}
                </p>
            }
            .into_any(),
        })
    }
}
