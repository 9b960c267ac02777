//! The sweep view: one run per rate (the Rate field holds several, `1,2,4,inf`), a table, and
//! output throughput against p99 TTFT with the knee marked (`crate::bench::verdict::sweep::knee`, the
//! CLI's rule). The chart is a small SVG drawn here: a few points with one of them ringed.

use super::i18n::{use_text, Text};
use super::pareto::ParetoChart;
use crate::bench::present::pareto::{tick_text, ParetoPoint};
use crate::bench::verdict::sweep::{knee, KneeReason};
use crate::bench::{BenchResult, BenchmarkMetrics};
use leptos::prelude::*;

/// One rate's outcome.
#[derive(Clone, Debug, PartialEq)]
pub struct SweepPoint {
    pub rate: f64,
    pub output_throughput: f64,
    pub ttft_p99_ms: f64,
    pub tpot_p99_ms: f64,
    pub goodput: Option<f64>,
}

/// The sweep so far: its rates, the points measured, the knee among them.
#[derive(Clone, Debug, Default)]
pub struct SweepView {
    pub rates: Vec<f64>,
    pub points: Vec<SweepPoint>,
    /// Each rate's metrics, for the knee.
    pub metrics: Vec<BenchmarkMetrics>,
    pub knee: Option<(usize, KneeReason)>,
    pub ttft_slo_ms: Option<f64>,
    /// Each rate's point on the Pareto chart (rates without one are left out).
    pub pareto: Vec<ParetoPoint>,
    /// Whether every rate's run says its GPUs ([`crate::bench::present::pareto::counts_gpus`]).
    pub per_gpu: bool,
}

impl SweepView {
    pub fn new(rates: Vec<f64>, ttft_slo_ms: Option<f64>) -> SweepView {
        SweepView { rates, ttft_slo_ms, per_gpu: true, ..SweepView::default() }
    }

    /// Adds a rate's result and recomputes the knee.
    pub fn push(&mut self, rate: f64, result: &BenchResult) {
        let m = &result.metrics;
        self.points.push(SweepPoint {
            rate,
            output_throughput: m.output_throughput,
            ttft_p99_ms: m.ttft_ms.p99,
            tpot_p99_ms: m.tpot_ms.p99,
            goodput: m.goodput,
        });
        self.metrics.push(m.clone());
        self.pareto.extend(ParetoPoint::of(format!("{} req/s", rate_text(rate)), result));
        self.per_gpu &= crate::bench::present::pareto::counts_gpus([result]);
        let runs: Vec<_> = self.metrics.iter().collect();
        self.knee = knee(&runs, self.ttft_slo_ms);
    }
}

/// A rate as the page shows it everywhere (run names, the sweep, the search, the plan): "inf", or
/// at most three decimals without trailing zeros ("2", "0.25", "4.513": a searched rate is not
/// shown as 4.512737200773266), or two significant digits below 0.01.
pub fn rate_text(rate: f64) -> String {
    if !rate.is_finite() {
        return "inf".into();
    }
    if rate != 0.0 && rate.abs() < 0.01 {
        return format!("{rate:.1e}");
    }
    let fixed = format!("{rate:.3}");
    fixed.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn knee_text(view: &SweepView, t: &Text) -> String {
    match view.knee {
        Some((i, reason)) => {
            let why = match reason {
                KneeReason::MeetsTtftSlo => t.knee_slo,
                KneeReason::ThroughputFlattens => t.knee_flat,
                KneeReason::LastSustained => t.knee_sustained,
                KneeReason::BelowLowest => t.knee_below,
            };
            format!("{}: {} {} req/s ({why})", t.knee, t.sweep_rate, rate_text(view.points[i].rate))
        }
        None => format!("{}: {}", t.knee, t.knee_none),
    }
}

/// The small charts' geometry (the sweep's, the Plan card's).
pub(super) const W: f64 = 520.0;
pub(super) const H: f64 = 240.0;
pub(super) const PAD_LEFT: f64 = 56.0;
pub(super) const PAD_BOTTOM: f64 = 36.0;
pub(super) const PAD: f64 = 14.0;
/// Room above the plot for the y axis' name.
pub(super) const PAD_TOP: f64 = 28.0;

/// Throughput (x) against p99 TTFT (y), points joined in rate order, the knee ringed.
#[component]
fn SweepChart(view: Signal<SweepView>) -> impl IntoView {
    let t = use_text();
    let drawing = move || {
        let v = view.get();
        let finite: Vec<&SweepPoint> =
            v.points.iter().filter(|p| p.output_throughput.is_finite() && p.ttft_p99_ms.is_finite()).collect();
        let max_x = finite.iter().map(|p| p.output_throughput).fold(0.0, f64::max).max(1e-9) * 1.1;
        let max_y = finite.iter().map(|p| p.ttft_p99_ms).fold(0.0, f64::max).max(1e-9) * 1.1;
        let sx = move |x: f64| PAD_LEFT + x / max_x * (W - PAD_LEFT - PAD);
        let sy = move |y: f64| H - PAD_BOTTOM - y / max_y * (H - PAD_BOTTOM - PAD_TOP);
        let path: String = finite
            .iter()
            .map(|p| format!("{:.1},{:.1}", sx(p.output_throughput), sy(p.ttft_p99_ms)))
            .collect::<Vec<_>>()
            .join(" ");
        let ticks = (0..=4).map(|i| i as f64 / 4.0).collect::<Vec<_>>();
        let knee = v
            .knee
            .and_then(|(i, _)| v.points.get(i))
            .filter(|p| p.output_throughput.is_finite() && p.ttft_p99_ms.is_finite())
            .cloned();
        view! {
            <svg class="sweep-chart" viewBox=format!("0 0 {W} {H}") role="img" aria-label=move || t().sweep>
                {ticks
                    .iter()
                    .map(|&f| {
                        view! {
                            <line class="grid" x1=sx(f * max_x) x2=sx(f * max_x) y1=sy(0.0) y2=sy(max_y) />
                            <line class="grid" x1=sx(0.0) x2=sx(max_x) y1=sy(f * max_y) y2=sy(f * max_y) />
                            <text class="tick" x=sx(f * max_x) y=H - PAD_BOTTOM + 14.0 text-anchor="middle">
                                {tick_text(f * max_x)}
                            </text>
                            <text class="tick" x=PAD_LEFT - 6.0 y=sy(f * max_y) + 4.0 text-anchor="end">
                                {tick_text(f * max_y)}
                            </text>
                        }
                    })
                    .collect_view()}
                <text class="axis" x=(W + PAD_LEFT) / 2.0 y=H - 4.0 text-anchor="middle">{move || t().sweep_x}</text>
                <text class="axis" x=8.0 y=14.0>{move || t().sweep_y}</text>
                <polyline class="sweep-line" points=path fill="none" />
                {finite
                    .iter()
                    .map(|p| {
                        let (x, y) = (sx(p.output_throughput), sy(p.ttft_p99_ms));
                        view! {
                            <circle class="sweep-dot" cx=x cy=y r="4">
                                <title>{format!("{} req/s: {:.1} tok/s, p99 TTFT {:.1} ms", rate_text(p.rate), p.output_throughput, p.ttft_p99_ms)}</title>
                            </circle>
                            <text class="tick" x=x y=y - 9.0 text-anchor="middle">{rate_text(p.rate)}</text>
                        }
                    })
                    .collect_view()}
                {knee.map(|p| {
                    let (x, y) = (sx(p.output_throughput), sy(p.ttft_p99_ms));
                    view! {
                        <g data-testid="sweep-knee">
                            <circle class="knee-ring" cx=x cy=y r="9" fill="none" />
                            <text class="knee-label" x=x + 12.0 y=y + 16.0>{move || t().knee}</text>
                        </g>
                    }
                })}
            </svg>
        }
    };
    view! { <div class="sweep-chart-box">{drawing}</div> }
}

/// The sweep card: shown while a sweep runs and after it.
#[component]
pub fn SweepPanel(sweep: RwSignal<Option<SweepView>>) -> impl IntoView {
    let t = use_text();
    let shown = Signal::derive(move || sweep.get().unwrap_or_default());
    view! {
        <Show when=move || sweep.with(Option::is_some)>
            <section class="card" aria-labelledby="sweep-title" data-testid="sweep">
                <div class="card-head">
                    <h2 id="sweep-title">{move || t().sweep}</h2>
                    <span class="num muted">
                        {move || {
                            let v = shown.get();
                            format!("{} / {}", v.points.len(), v.rates.len())
                        }}
                    </span>
                </div>
                <div class="sweep-body">
                    <SweepChart view=shown />
                    <table class="table sweep-table">
                        <thead>
                            <tr>
                                <th>{move || t().sweep_rate}</th>
                                <th>"tok/s"</th>
                                <th>"TTFT p99"</th>
                                <th>"TPOT p99"</th>
                                <th>{move || t().goodput}</th>
                            </tr>
                        </thead>
                        <tbody>
                            {move || {
                                let v = shown.get();
                                let knee = v.knee.map(|(i, _)| i);
                                v.points
                                    .iter()
                                    .enumerate()
                                    .map(|(i, p)| {
                                        view! {
                                            <tr class:knee=knee == Some(i)>
                                                <td>{rate_text(p.rate)}</td>
                                                <td class="num">{format!("{:.1}", p.output_throughput)}</td>
                                                <td class="num">{format!("{:.1}", p.ttft_p99_ms)}</td>
                                                <td class="num">{format!("{:.2}", p.tpot_p99_ms)}</td>
                                                <td class="num">{p.goodput.map_or("–".into(), |g| format!("{g:.2}"))}</td>
                                            </tr>
                                        }
                                    })
                                    .collect_view()
                            }}
                        </tbody>
                    </table>
                </div>
                <ParetoChart
                    points=Signal::derive(move || shown.with(|v| v.pareto.clone()))
                    per_gpu=Signal::derive(move || shown.with(|v| v.per_gpu))
                    testid="sweep-pareto"
                />
                <p class="note" data-testid="sweep-knee-text">
                    {move || {
                        let v = shown.get();
                        if v.points.is_empty() { String::new() } else { knee_text(&v, t()) }
                    }}
                </p>
            </section>
        </Show>
    }
}
