//! The page: a header with the status line and the language switch; on the left the model,
//! the workload and Run; on the right the live charts, the report, the history and the
//! playground.

use super::charts::LiveCharts;
use super::experiment::{ExperimentPanel, ExperimentState};
use super::history::{self, HistoryPanel};
use super::i18n::{self, use_text, LangSwitch, UiLang};
use super::model_panel::{AdapterPanel, ModelPanel};
use super::models;
use super::no_webgpu::NoWebGpuNotice;
use super::plan::PlanPanel;
use super::playground::Playground;
use super::results::Report;
use super::run::{self, RunPanel};
use super::search::SearchPanel;
use super::settings::SettingsPanel;
use super::state::{AppState, Phase};
use super::sweep::SweepPanel;
use super::target::TargetPanel;
use crate::bench::Lang;
use crate::web::protocol::{ModelChoice, ModelSource};
use leptos::prelude::*;

#[component]
pub fn App() -> impl IntoView {
    let query = crate::web::browser::query_param;
    let lang = i18n::opening_lang();
    let choice =
        query("model").and_then(|m| ModelSource::from_key(&m)).unwrap_or(ModelSource::Preset(ModelChoice::Embedded));
    let state = AppState::new(lang, choice, history::load());
    provide_context(UiLang(state.lang));
    let t = use_text();

    // The settings, the model and the language live in the query string: a link reproduces a run.
    Effect::new(move |_| {
        let mut pairs = state.settings.changed();
        // The remote target without its key: the key is never in a link.
        pairs.extend(state.target.query_pairs());
        // Local files cannot be named in a link.
        match state.choice.get() {
            ModelSource::Preset(ModelChoice::Embedded) | ModelSource::Local { .. } => {}
            source => pairs.push(("model", source.key())),
        }
        let lang = state.lang.get();
        if i18n::link_names_lang(lang) {
            pairs.push(("lang", lang.code().to_string()));
        }
        // The engine switches (`?kernels=`, `?fused=`, …) stay in the link.
        pairs.extend(state.switches.query_pairs());
        // Not fatal: the page works the same without it.
        let _ = crate::web::browser::replace_query(&pairs);
    });
    Effect::new(move |_| {
        let lang = if state.lang.get() == Lang::Zh { "zh-CN" } else { "en" };
        if let Some(root) = document().document_element() {
            let _ = root.set_attribute("lang", lang);
        }
    });

    models::start(state);
    let checked = run::checked(state);
    let problems = Memo::new(move |_| checked.with(|c| c.clone().err().unwrap_or_default()));
    let experiment = ExperimentState::new();
    let locked = Signal::derive(move || state.phase.get() == Phase::Running);
    let spec = Signal::derive(move || checked.with(|c| c.as_ref().ok().map(|c| c.spec.clone())));
    // Weights or speculation changed in the settings: (what the model has, what is asked for).
    let reload = Signal::derive(move || {
        if state.target.is_remote() {
            return None;
        }
        let wanted = checked.with(|c| c.as_ref().ok().map(|c| c.load.clone()))?;
        let loaded = state.model_info.with(|m| m.as_ref().map(|m| m.load.clone()))?;
        (loaded != wanted).then_some((loaded, wanted))
    });

    view! {
        <header class="top">
            <div class="brand">
                <h1>"tokenmeter"</h1>
                <p class="tagline">{move || t().tagline}</p>
            </div>
            <LangSwitch />
        </header>
        <p class="status" data-testid="status" role="status">
            <span class="dot" class:ok=move || state.model_info.with(Option::is_some)></span>
            {move || models::status_text(state, t())}
        </p>
        <NoWebGpuNotice why=state.no_webgpu />
        <main class="layout">
            <aside class="side">
                // Run first: in view on load at every width (the column is sticky on tall screens).
                <RunPanel state=state checked=checked />
                <ModelPanel state=state />
                <AdapterPanel state=state />
                <TargetPanel
                    target=state.target
                    spec=spec
                    locked=locked
                    engine=Signal::derive(move || state.no_webgpu.with(Option::is_none))
                />
                <SettingsPanel
                    settings=state.settings
                    problems=problems
                    locked=locked
                    reload=reload
                    on_reload=Callback::new(move |_| models::reload(state))
                    dataset=state.dataset
                    on_search=Callback::new(move |_| run::search(state, checked))
                    can_start=Signal::derive(move || run::ready(state, checked, t()))
                />
            </aside>
            <div class="content">
                <section class="card" aria-labelledby="live-title">
                    <div class="card-head">
                        <h2 id="live-title">{move || t().live}</h2>
                        <span class="run-name">{move || state.shown.get().map(|e| e.title(super::i18n::text(state.lang.get())))}</span>
                    </div>
                    <LiveCharts data=state.charts.into() />
                </section>
                <SweepPanel sweep=state.sweep />
                <SearchPanel search=state.search />
                <Report shown=state.shown />
                <PlanPanel state=state />
                <ExperimentPanel state=state x=experiment checked=checked />
                <HistoryPanel state=state run_again=run::run_again />
                <Playground state=state />
            </div>
        </main>
    }
}
