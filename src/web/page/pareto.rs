//! The Pareto chart in the page: the geometry of `crate::bench::present::pareto` (speed per user against
//! throughput per GPU, the frontier joined) drawn as SVG elements. Shown by the sweep card (one
//! point per rate) and the history card (one per saved run). Labels are text nodes, never markup.

use crate::bench::present::pareto::{Chart, ParetoPoint, HEIGHT, WIDTH};
use crate::bench::BenchResult;
use leptos::prelude::*;

/// Dot labels longer than this are cut (the dot's tooltip has the whole name).
const LABEL_CHARS: usize = 18;

/// The chart of `points` (nothing below two points: one run is no trade-off).
#[component]
pub fn ParetoChart(
    points: Signal<Vec<ParetoPoint>>,
    /// Whether every run says its GPUs (the engine: one): the y axis reads per GPU, else per target.
    per_gpu: Signal<bool>,
    #[prop(into)] testid: String,
) -> impl IntoView {
    let lang = expect_context::<super::i18n::UiLang>().0;
    let drawing = move || {
        let points = points.get();
        if points.len() < 2 {
            return None;
        }
        let chart = Chart::draw(&points, per_gpu.get(), lang.get());
        let (axis_x, axis_y) = (Chart::y_axis_x(), Chart::x_axis_y());
        Some(view! {
            <svg class="pareto-chart" viewBox=format!("0 0 {WIDTH} {HEIGHT}") role="img" aria-label=chart.y_label.clone()>
                {chart
                    .y_ticks
                    .iter()
                    .map(|t| {
                        view! {
                            <line class="grid" x1=axis_x x2=WIDTH - 16.0 y1=t.at y2=t.at />
                            <text class="tick" x=axis_x - 6.0 y=t.at + 4.0 text-anchor="end">{t.text.clone()}</text>
                        }
                    })
                    .collect_view()}
                {chart
                    .x_ticks
                    .iter()
                    .map(|t| {
                        view! { <text class="tick" x=t.at y=axis_y + 14.0 text-anchor="middle">{t.text.clone()}</text> }
                    })
                    .collect_view()}
                <text class="axis" x=(WIDTH + axis_x) / 2.0 y=HEIGHT - 4.0 text-anchor="middle">{chart.x_label.clone()}</text>
                <text class="axis" x=8.0 y=14.0>{chart.y_label.clone()}</text>
                <path class="pareto-frontier" d=chart.frontier.clone() fill="none" />
                {chart
                    .dots
                    .iter()
                    .map(|d| {
                        let label = d.label.as_ref().map(|l| l.chars().take(LABEL_CHARS).collect::<String>());
                        view! {
                            <circle class="pareto-dot" class:frontier=d.on_frontier cx=d.x cy=d.y r="4">
                                <title>{d.title.clone()}</title>
                            </circle>
                            {label.map(|l| view! { <text class="tick" x=d.x y=d.y + d.label_dy text-anchor="middle">{l}</text> })}
                        }
                    })
                    .collect_view()}
            </svg>
        })
    };
    view! { <div class="pareto-box" data-testid=testid>{drawing}</div> }
}

/// The points of `runs` (name, result) that have one, and whether every run says its GPUs.
pub fn points_of<'a>(runs: impl Iterator<Item = (String, &'a BenchResult)> + Clone) -> (Vec<ParetoPoint>, bool) {
    let per_gpu = crate::bench::present::pareto::counts_gpus(runs.clone().map(|(_, r)| r));
    (runs.filter_map(|(name, r)| ParetoPoint::of(name, r)).collect(), per_gpu)
}
