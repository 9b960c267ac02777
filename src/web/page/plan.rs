//! The Plan card: what this GPU sustains within a TTFT p99 SLO, and how many like it serve a
//! target rate, predicted from the runs made on it (`crate::planner::capacity`: a cost model
//! fitted on their steps, their workload replayed at rates around them through the engine's own
//! scheduler). The predicted TTFT p99 curve is drawn beside the measured runs, the SLO as a line.
//! The runs are the shown one and every saved run of the same model, GPU, engine and workload at
//! another rate (a sweep's rates).

use super::history::Entry;
use super::i18n::{use_text, Text};
use super::state::{AppState, Phase};
use super::sweep::{H, PAD, PAD_BOTTOM, PAD_LEFT, PAD_TOP, W};
use crate::bench::present::pareto::tick_text;
use crate::bench::verdict::sweep::SloCrossing;
use crate::bench::{BenchResult, WorkloadSpec};
use crate::planner::capacity::Capacity;
use crate::web::protocol::ToEngine;
use leptos::prelude::*;
use std::sync::Arc;

/// Requests each predicted rate runs at least: a short run's own count (the page's default is 32)
/// ends before a rate past capacity shows its queue.
const PLAN_REQUESTS: usize = 256;

/// The SLO the card starts with when the run had none.
const DEFAULT_TTFT_SLO_MS: f64 = 1000.0;

/// Whether `a` and `b` ran on the same model, GPU and engine with the same workload but its rate:
/// their steps fit one cost model, and their metrics are points of one curve.
fn same_setup(a: &BenchResult, b: &BenchResult) -> bool {
    let (x, y) = (&a.config, &b.config);
    let workload = |w: &Option<WorkloadSpec>| w.clone().map(|w| WorkloadSpec { rate: 0.0, ..w });
    x.model == y.model
        && x.adapter.as_ref().map(|a| &a.name) == y.adapter.as_ref().map(|a| &a.name)
        && x.kernels == y.kernels
        && x.engine == y.engine
        && x.scheduler == y.scheduler
        && workload(&x.workload) == workload(&y.workload)
}

/// The runs to plan from: `shown` (an engine run with steps) and the saved runs like it; a run in
/// which every request failed is none.
fn runs_like(shown: &Entry, history: &[Arc<Entry>]) -> Vec<BenchResult> {
    let mut runs = vec![shown.result.clone()];
    runs.extend(
        history
            .iter()
            .filter(|e| e.time_ms != shown.time_ms && same_setup(&e.result, &shown.result))
            .map(|e| e.result.clone()),
    );
    runs.retain(|r| !r.config.is_server() && r.config.simulated.is_none() && !r.steps.is_empty() && !r.failed());
    runs
}

/// The TTFT SLO a run set (`--slo ttft:…`), if any.
fn run_slo_ms(result: &BenchResult) -> Option<f64> {
    let text = result.config.slo.as_deref()?;
    text.parse::<crate::bench::Slo>().ok()?.ttft_ms
}

fn rate_text(rate: f64) -> String {
    if rate >= 100.0 {
        format!("{rate:.0}")
    } else if rate >= 10.0 {
        format!("{rate:.1}")
    } else {
        format!("{rate:.2}")
    }
}

/// The card's sentence for a plan and a target rate.
fn verdict(c: &Capacity, target: Option<f64>, t: &Text) -> String {
    let slo = format!("{:.0}", c.ttft_slo_ms);
    let top = c.predicted.last().map_or(0.0, |(r, _)| *r);
    let bottom = c.predicted.first().map_or(0.0, |(r, _)| *r);
    match c.crossing {
        SloCrossing::At(rate) => {
            let mut text = t.plan_sustains.replace("{x}", &rate_text(rate)).replace("{slo}", &slo);
            if let Some((z, n)) = target.and_then(|z| Some((z, c.replicas_for(z)?))) {
                text.push(' ');
                text.push_str(&t.plan_replicas.replace("{n}", &n.to_string()).replace("{z}", &rate_text(z)));
            }
            text
        }
        SloCrossing::AboveHighest => t.plan_above.replace("{x}", &rate_text(top)).replace("{slo}", &slo),
        SloCrossing::BelowLowest => t.plan_below.replace("{x}", &rate_text(bottom)).replace("{slo}", &slo),
    }
}

/// TTFT p99 (y, log) against the rate (x, log): the predicted curve, the measured runs, the SLO.
#[component]
fn PlanChart(plan: Capacity) -> impl IntoView {
    let t = use_text();
    let finite = |r: f64, y: f64| r.is_finite() && r > 0.0 && y.is_finite() && y > 0.0;
    let predicted: Vec<(f64, f64)> =
        plan.predicted.iter().map(|(r, m)| (*r, m.ttft_ms.p99)).filter(|&(r, y)| finite(r, y)).collect();
    let measured: Vec<(f64, f64)> =
        plan.measured.iter().map(|(r, m)| (*r, m.ttft_ms.p99)).filter(|&(r, y)| finite(r, y)).collect();
    let all = || predicted.iter().chain(&measured);
    let (x0, x1) = all().fold((f64::INFINITY, 0.0f64), |(lo, hi), &(r, _)| (lo.min(r), hi.max(r)));
    let (y0, y1) = all()
        .map(|&(_, y)| y)
        .chain([plan.ttft_slo_ms])
        .fold((f64::INFINITY, 0.0f64), |(lo, hi), y| (lo.min(y), hi.max(y)));
    if !(x0 < x1 && y0 <= y1) {
        return None;
    }
    let (lx0, lx1) = (x0.log10(), x1.log10());
    let (ly0, ly1) = (y0.log10() - 0.1, y1.log10() + 0.1);
    let sx = move |x: f64| PAD_LEFT + (x.log10() - lx0) / (lx1 - lx0) * (W - PAD_LEFT - PAD);
    let sy = move |y: f64| H - PAD_BOTTOM - (y.log10() - ly0) / (ly1 - ly0) * (H - PAD_BOTTOM - PAD_TOP);
    let path: String =
        predicted.iter().map(|&(r, y)| format!("{:.1},{:.1}", sx(r), sy(y))).collect::<Vec<_>>().join(" ");
    // Ticks at the decades and their halves that fall inside.
    let ticks = |lo: f64, hi: f64| -> Vec<f64> {
        (lo.floor() as i32 - 1..=hi.ceil() as i32)
            .flat_map(|e| [1.0, 2.0, 5.0].map(|m| m * 10f64.powi(e)))
            .filter(|v| v.log10() >= lo && v.log10() <= hi)
            .collect()
    };
    let slo_y = sy(plan.ttft_slo_ms);
    let sustained = plan.sustained().map(|r| (sx(r), slo_y));
    Some(view! {
        <svg class="sweep-chart plan-chart" viewBox=format!("0 0 {W} {H}") role="img" aria-label=move || t().plan>
            {ticks(lx0, lx1)
                .into_iter()
                .map(|x| {
                    view! {
                        <line class="grid" x1=sx(x) x2=sx(x) y1=sy(10f64.powf(ly0)) y2=sy(10f64.powf(ly1)) />
                        <text class="tick" x=sx(x) y=H - PAD_BOTTOM + 14.0 text-anchor="middle">{tick_text(x)}</text>
                    }
                })
                .collect_view()}
            {ticks(ly0, ly1)
                .into_iter()
                .map(|y| {
                    view! {
                        <line class="grid" x1=sx(x0) x2=sx(x1) y1=sy(y) y2=sy(y) />
                        <text class="tick" x=PAD_LEFT - 6.0 y=sy(y) + 4.0 text-anchor="end">{tick_text(y)}</text>
                    }
                })
                .collect_view()}
            <text class="axis" x=(W + PAD_LEFT) / 2.0 y=H - 4.0 text-anchor="middle">{move || t().plan_x}</text>
            <text class="axis" x=8.0 y=14.0>{move || t().sweep_y}</text>
            <line class="plan-slo" x1=sx(x0) x2=sx(x1) y1=slo_y y2=slo_y />
            <text class="tick" x=sx(x1) y=slo_y - 5.0 text-anchor="end">{format!("SLO {:.0} ms", plan.ttft_slo_ms)}</text>
            <polyline class="plan-line" points=path fill="none">
                <title>{move || t().plan_predicted}</title>
            </polyline>
            {measured
                .iter()
                .map(|&(r, y)| {
                    view! {
                        <circle class="sweep-dot" data-testid="plan-measured" cx=sx(r) cy=sy(y) r="4">
                            <title>{format!("{} {} req/s: p99 TTFT {y:.1} ms", t().plan_measured, rate_text(r))}</title>
                        </circle>
                    }
                })
                .collect_view()}
            {sustained.map(|(x, y)| view! { <circle class="knee-ring" data-testid="plan-sustained" cx=x cy=y r="7" fill="none" /> })}
        </svg>
    })
}

/// The Plan card: shown once a run on this page's engine is shown.
#[component]
pub fn PlanPanel(state: AppState) -> impl IntoView {
    let t = use_text();
    let slo = RwSignal::new(String::new());
    let target = RwSignal::new("100".to_string());
    // Computed in the engine worker (`ToEngine::Plan`), which answers into `state.planned` (and
    // the page is idle again).
    let outcome = state.planned;
    let busy = move || state.phase.get() == Phase::Planning;
    // An engine run with steps is shown: its SLO starts the field, and an older plan is dropped.
    let source = Signal::derive(move || {
        state.shown.get().filter(|e| !e.result.config.is_server() && !e.result.steps.is_empty())
    });
    Effect::new(move |_| {
        if let Some(e) = source.get() {
            slo.set(format!("{:.0}", run_slo_ms(&e.result).unwrap_or(DEFAULT_TTFT_SLO_MS)));
            outcome.set(None);
        }
    });
    let plan = move |_| {
        let Some(shown) = source.get_untracked() else { return };
        let slo_ms = match slo.get_untracked().trim().parse::<f64>() {
            Ok(ms) if ms.is_finite() && ms > 0.0 => ms,
            _ => return outcome.set(Some(Err(t().plan_bad_slo.to_string()))),
        };
        // The model's shape: the loaded model, when it is the one the run used.
        let cfg = state.model_info.with_untracked(|m| {
            m.as_ref().filter(|m| Some(m.source.key()) == shown.result.config.model).map(|m| m.config.clone())
        });
        let Some(cfg) = cfg else { return outcome.set(Some(Err(t().plan_other_model.to_string()))) };
        let runs = state.history.with_untracked(|h| runs_like(&shown, h));
        let Some(link) = super::link::get(state) else { return };
        state.phase.set(Phase::Planning);
        outcome.set(None);
        link.send(&ToEngine::Plan { runs, cfg: Box::new(cfg), ttft_slo_ms: slo_ms, min_requests: PLAN_REQUESTS }, &[]);
    };
    let target_rate = move || target.get().trim().parse::<f64>().ok().filter(|z| z.is_finite() && *z > 0.0);
    let field = move |label: fn(&'static Text) -> &'static str, testid: &'static str, value: RwSignal<String>| {
        view! {
            <label class="field">
                <span class="field-label">{move || label(t())}</span>
                <input
                    data-testid=testid
                    autocomplete="off"
                    prop:value=move || value.get()
                    on:input=move |ev| value.set(event_target_value(&ev))
                />
            </label>
        }
    };
    view! {
        <Show when=move || source.with(Option::is_some)>
            <section class="card" aria-labelledby="plan-title" data-testid="plan">
                <div class="card-head">
                    <h2 id="plan-title">{move || t().plan}</h2>
                </div>
                <p class="note">{move || t().plan_hint}</p>
                <div class="plan-form">
                    {field(|t| t.plan_slo, "plan-slo", slo)}
                    {field(|t| t.plan_target, "plan-target", target)}
                    <button
                        class="primary"
                        data-testid="plan-run"
                        disabled=move || state.phase.get() != Phase::Idle
                        on:click=plan
                    >
                        {move || if busy() { t().plan_busy } else { t().plan_button }}
                    </button>
                </div>
                {move || {
                    outcome
                        .get()
                        .map(|planned| match planned {
                            Ok(c) => {
                                let sentence = verdict(&c, target_rate(), t());
                                let model = c.cost.describe();
                                let legend = t()
                                    .plan_legend
                                    .replace("{n}", &c.requests.to_string())
                                    .replace("{m}", &c.measured_requests.to_string());
                                view! {
                                    <p class="plan-verdict" data-testid="plan-verdict">{sentence}</p>
                                    <PlanChart plan=c />
                                    <p class="note">{legend}</p>
                                    <p class="note">{model}</p>
                                }
                                    .into_any()
                            }
                            Err(why) => view! { <p class="field-error" role="alert" data-testid="plan-error">{why}</p> }.into_any(),
                        })
                }}
            </section>
        </Show>
    }
}
