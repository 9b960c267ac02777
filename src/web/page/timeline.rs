//! The per-request timeline card: the geometry of `crate::bench::present::timeline` drawn as one SVG of
//! seven paths (the steady window's band, waiting, prefill, decode, marks, cancellations, step ticks) plus the axis labels
//! and a labelled band over each interval the tab was hidden or throttled, so that 1,000
//! requests redraw as fast as 10. Live, the run hands it a new timeline at most once per
//! animation frame; it redraws at most every [`REDRAW_MS`], always ending on the newest.

use super::i18n::UiLang;
use crate::bench::present::timeline::{self, labels, seconds, Timeline, WIDTH};
use leptos::prelude::*;
use std::time::Duration;

/// The fastest redraw rate of the live timeline: a run's frames come faster than a person can
/// read 1,000 bars.
pub const REDRAW_MS: f64 = 250.0;

/// The timeline card, fed by `data` (live snapshots during a run, the result after).
#[component]
pub fn TimelineCard(data: Signal<Timeline>) -> impl IntoView {
    let UiLang(lang) = expect_context::<UiLang>();
    let shown = RwSignal::new(data.get_untracked());
    // Throttle: redraw now if the last redraw is old enough, else once when it is.
    let last_ms = StoredValue::new(f64::NEG_INFINITY);
    let pending = StoredValue::new(false);
    Effect::new(move |_| {
        let newest = data.get();
        if shown.with_untracked(|s| *s == newest) {
            return;
        }
        // An emptied timeline (a new run) shows at once and starts no wait.
        if newest.rows == 0 {
            shown.set(newest);
            return;
        }
        let now = performance_now();
        let wait = last_ms.get_value() + REDRAW_MS - now;
        if wait <= 0.0 {
            last_ms.set_value(now);
            shown.set(newest);
        } else if !pending.get_value() {
            pending.set_value(true);
            set_timeout(
                move || {
                    pending.set_value(false);
                    last_ms.set_value(performance_now());
                    // The newest by then, not the one that asked.
                    shown.set(data.get_untracked());
                },
                Duration::from_millis(wait.ceil() as u64),
            );
        }
    });
    let with = move |f: fn(&Timeline) -> String| move || shown.with(f);
    let height = move || shown.with(Timeline::height);
    let legend = move || {
        let server = shown.with(|t| t.server);
        let l = labels(lang.get(), server);
        let swatch = |colour: &'static str, label: &'static str| {
            view! {
                <span class="swatch" style=format!("background:{colour}")></span>
                {label}
            }
        };
        view! {
            <p class="legend">
                {swatch(timeline::WAITING, l.waiting)}
                {(!server).then(|| swatch(timeline::PREFILL, l.prefill))}
                {swatch(timeline::DECODE, l.decode)}
                {swatch(timeline::MARK, l.marks)}
                {shown.with(|t| t.counts.cancelled > 0).then(|| swatch(timeline::CANCEL, l.cancelled))}
                {(!server).then(|| swatch("#64748b", l.steps))}
                {shown.with(|t| !t.steady.is_empty()).then(|| swatch(timeline::STEADY, l.steady))}
                {shown.with(|t| t.held.iter().any(|b| b.hidden)).then(|| swatch(timeline::HELD_SWATCH, l.hidden))}
                {shown.with(|t| t.held.iter().any(|b| !b.hidden)).then(|| swatch(timeline::HELD_SWATCH, l.throttled))}
            </p>
            {server.then(|| view! { <p class="note">{l.server_note}</p> })}
        }
    };
    let count = move |f: fn(&Timeline) -> usize| move || shown.with(f).to_string();
    view! {
        <figure
            class="chart timeline-card"
            data-testid="timeline"
            data-rows=count(|t| t.rows)
            data-waiting=count(|t| t.counts.waiting)
            data-prefill=count(|t| t.counts.prefill)
            data-decode=count(|t| t.counts.decode)
            data-marks=count(|t| t.counts.preemptions + t.counts.failed)
            data-cancelled=count(|t| t.counts.cancelled)
            data-steps=count(|t| t.counts.steps)
            data-steady=move || shown.with(|t| (!t.steady.is_empty()).to_string())
            data-hidden=count(|t| t.held.iter().filter(|b| b.hidden).count())
            data-throttled=count(|t| t.held.iter().filter(|b| !b.hidden).count())
        >
            <figcaption>
                <span class="chart-title">{move || labels(lang.get(), false).title}</span>
                <Show when=move || shown.with(|t| t.rows == 0)>
                    <span class="chart-empty">"–"</span>
                </Show>
            </figcaption>
            <svg
                class="timeline"
                viewBox=move || format!("0 0 {WIDTH} {:.1}", height())
                role="img"
                aria-label=move || labels(lang.get(), false).title
            >
                <path
                    class="tl-steady"
                    d=with(|t| t.steady.clone())
                    fill=timeline::STEADY
                    fill-opacity=timeline::STEADY_OPACITY
                ></path>
                <path class="tl-waiting" d=with(|t| t.waiting.clone()) fill=timeline::WAITING></path>
                <path class="tl-prefill" d=with(|t| t.prefill.clone()) fill=timeline::PREFILL></path>
                <path class="tl-decode" d=with(|t| t.decode.clone()) fill=timeline::DECODE></path>
                <path class="tl-marks" d=with(|t| t.marks.clone()) stroke=timeline::MARK stroke-width="1.5"></path>
                <path class="tl-cancels" d=with(|t| t.cancels.clone()) stroke=timeline::CANCEL stroke-width="1.5"></path>
                <path class="tl-steps" d=with(|t| t.steps.clone()) stroke="#64748b" stroke-width="1"></path>
                {move || {
                    shown
                        .with(|t| {
                            t.held
                                .iter()
                                .map(|band| {
                                    let class = if band.hidden { "tl-held tl-hidden" } else { "tl-held tl-throttled" };
                                    view! {
                                        <g class=class>
                                            <path
                                                d=band.path(t.bars_height)
                                                fill=timeline::HELD
                                                fill-opacity=timeline::HELD_OPACITY
                                            ></path>
                                            <text x=format!("{:.1}", band.x + 3.0) y="11" class="tl-held-label">
                                                {band.label(lang.get())}
                                            </text>
                                        </g>
                                    }
                                })
                                .collect_view()
                        })
                }}
                {move || {
                    shown
                        .with(|t| {
                            let y = t.label_y();
                            t.ticks
                                .iter()
                                .map(|&(x, s)| {
                                    view! {
                                        <text x=format!("{x:.1}") y=format!("{y:.1}") text-anchor="middle" class="tl-tick">
                                            {seconds(s)}
                                        </text>
                                    }
                                })
                                .collect_view()
                        })
                }}
            </svg>
            {legend}
        </figure>
    }
}

fn performance_now() -> f64 {
    window().performance().map_or(0.0, |p| p.now())
}
