//! The model card's time to ready: the loaded model's load as a bar of its phases
//! (`bench::record::ready`), and, once this visit loaded the same model both from the network and
//! from the cache, the cold load beside the cached one with what the cache saved. Numbers and
//! fixed labels only, as text nodes.

use super::i18n::{use_text, UiLang};
use super::state::AppState;
use crate::bench::record::ready::{duration, saving_line, LoadSource, Phase, TimeToReady};
use crate::bench::Lang;
use leptos::prelude::*;

#[component]
pub fn TimeToReadyView(state: AppState) -> impl IntoView {
    let t = use_text();
    let UiLang(lang) = expect_context::<UiLang>();
    move || {
        let info = state.model_info.get()?;
        let last = info.time_to_ready.clone()?;
        let (t, lang) = (t(), lang.get());
        // This model's latest load of each kind.
        let latest = |source: LoadSource| {
            state.loads.with(|loads| {
                loads.iter().rev().find(|(name, r)| *name == info.name && r.source == source).map(|(_, r)| r.clone())
            })
        };
        let (cold, cached) = (latest(LoadSource::Network), latest(LoadSource::Cache));
        let (bars, saving) = match (cold, cached) {
            (Some(cold), Some(cached)) => {
                let line = saving_line(&cold, &cached, lang);
                (vec![(t.ready_cold, cold), (t.ready_cached, cached)], Some(line))
            }
            _ => (vec![(t.ready_last, last)], None),
        };
        // One scale for the bars shown together: the faster load's bar is the shorter.
        let scale_s = bars.iter().map(|(_, r)| r.total_s()).fold(0.0, f64::max);
        let legend = Phase::ALL
            .into_iter()
            .map(
                |p| view! { <span class="swatch" style=format!("background:{}", p.colour())></span>{p.label(lang)}" " },
            )
            .collect_view();
        Some(view! {
            <div class="time-to-ready" data-testid="time-to-ready">
                <h4>{t.time_to_ready}</h4>
                {bars.into_iter().map(|(label, ready)| load_bar(label, ready, scale_s, lang)).collect_view()}
                {saving.map(|line| view! { <p class="note num" data-testid="ready-saving">{line}</p> })}
                <p class="legend">{legend}</p>
                <p class="note">{t.ready_note}</p>
            </div>
        })
    }
}

/// One load: its label and whole, the bar (the full width is `scale_s`), and where its bytes came
/// from and its phases.
fn load_bar(label: &'static str, ready: TimeToReady, scale_s: f64, lang: Lang) -> impl IntoView {
    let source = serde_json::to_value(ready.source).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default();
    let parts = ready
        .phases()
        .into_iter()
        .filter(|(_, seconds)| *seconds > 0.0 && scale_s > 0.0)
        .map(|(phase, seconds)| {
            let share = seconds / scale_s;
            view! {
                <span
                    class=format!("ready-{}", phase.key())
                    style=format!("width:{:.2}%;background:{}", share * 100.0, phase.colour())
                    title=format!("{} {}", phase.label(lang), duration(seconds))
                ></span>
            }
        })
        .collect_view();
    // The head line's whole is in the label; the others say where the bytes came from and the phases.
    let lines = ready.lines(lang).into_iter().skip(1).map(|line| view! { <div>{line.trim().to_string()}</div> });
    view! {
        <div
            class="ready-load"
            data-testid="ready-load"
            data-source=source
            data-fetched=ready.fetched_bytes.to_string()
            data-stored=ready.stored_bytes.to_string()
            data-download-s=ready.download_s.to_string()
        >
            <div class="ready-label num">{label}" · "{duration(ready.total_s())}</div>
            <div class="ready-bar">{parts}</div>
            <div class="note num ready-lines">{lines.collect_view()}</div>
        </div>
    }
}
