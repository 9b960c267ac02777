//! The search for the highest rate within the SLOs (the Rate field's `max`, the CLI's `bench
//! --rate max`): while it runs, the rate being tried; after, what it found, each run's share of
//! requests within every SLO against the rate (a small SVG, the target a dashed line) and the
//! table of runs. The search is the library's (`bench::run::max_rate`, `planner::capacity`), run in
//! the engine worker; every run is saved to the history like a sweep's.

use super::i18n::{use_text, Text, UiLang};
use super::sweep::{rate_text, H, PAD, PAD_BOTTOM, PAD_LEFT, PAD_TOP, W};
use crate::bench::present::pareto::tick_text;
use crate::bench::run::max_rate::{MaxRate, Stage, Trial};
use crate::bench::Lang;
use leptos::prelude::*;

/// A search in progress or done.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SearchView {
    /// The rate of the run going on, and how many runs have started.
    pub trying: Option<(f64, usize)>,
    pub found: Option<MaxRate>,
}

impl SearchView {
    /// A run of the search started at `rate`.
    pub fn started(&mut self, rate: f64) {
        let n = self.trying.map_or(0, |(_, n)| n);
        self.trying = Some((rate, n + 1));
    }
}

/// Why a search's run was made, in the page's words.
pub fn stage_text(stage: Stage, t: &Text) -> &'static str {
    match stage {
        Stage::Probe => t.stage_probe,
        Stage::First => t.stage_first,
        Stage::Bracket => t.stage_bracket,
        Stage::Narrow => t.stage_narrow,
        Stage::Repeat => t.stage_repeat,
    }
}

/// A run's verdict in the search: none for the probe, the decision where it was stopped on one,
/// else met or missed.
pub fn trial_verdict(trial: &Trial, t: &Text, lang: Lang) -> String {
    match (&trial.decided, trial.stage) {
        (_, Stage::Probe) => "–".to_string(),
        (Some(d), _) => d.text(lang),
        (None, _) => (if trial.met { t.search_met } else { t.search_missed }).to_string(),
    }
}

/// "trying 2.5 req/s (run 3)".
pub fn trying_text(rate: f64, n: usize, t: &Text) -> String {
    t.search_trying.replace("{rate}", &rate_text(rate)).replace("{n}", &n.to_string())
}

/// What the search found, in a line (the CLI's last line, in the page's language).
fn found_text(f: &MaxRate, t: &Text, lang: Lang) -> String {
    if let Some(u) = &f.unreachable {
        return u.text(lang);
    }
    match f.rate {
        Some(_) if f.no_limit_found() => {
            let why = if f.whole_workload_at_once { t.search_at_once } else { t.search_not_narrowed };
            t.search_no_limit
                .replace("{lo}", &rate_text(f.lo))
                .replace("{why}", why)
                .replace("{n}", &f.trials.len().to_string())
        }
        Some(rate) => {
            let how = if f.converged {
                t.search_within.replace("{pct}", &format!("{:.0}", f.tolerance * 100.0))
            } else if f.whole_workload_at_once {
                t.search_at_once.to_string()
            } else {
                t.search_not_narrowed.to_string()
            };
            let hi = if f.hi.is_finite() { rate_text(f.hi) } else { "–".into() };
            t.search_found
                .replace("{rate}", &rate_text(rate))
                .replace("{lo}", &rate_text(f.lo))
                .replace("{hi}", &hi)
                .replace("{how}", &how)
                .replace("{n}", &f.trials.len().to_string())
        }
        None => t.search_none.replace("{hi}", &rate_text(f.hi)),
    }
}

/// Each run's share within the SLOs (y, %) against its rate (x), met green and missed red, the
/// target a dashed line.
#[component]
fn SearchChart(found: MaxRate) -> impl IntoView {
    let t = use_text();
    let rates = found.trials.iter().map(|r| r.rate).filter(|r| r.is_finite());
    let max_x = rates.fold(0.0, f64::max).max(1e-9) * 1.1;
    let sx = move |x: f64| PAD_LEFT + x / max_x * (W - PAD_LEFT - PAD);
    let sy = move |share: f64| H - PAD_BOTTOM - share.clamp(0.0, 1.0) * (H - PAD_BOTTOM - PAD_TOP);
    let ticks: Vec<f64> = (0..=4).map(|i| i as f64 / 4.0).collect();
    let target = found.attainment;
    view! {
        <div class="sweep-chart-box">
            <svg class="sweep-chart" viewBox=format!("0 0 {W} {H}") role="img" aria-label=move || t().search>
                {ticks
                    .iter()
                    .map(|&f| {
                        view! {
                            <line class="grid" x1=sx(f * max_x) x2=sx(f * max_x) y1=sy(0.0) y2=sy(1.0) />
                            <line class="grid" x1=sx(0.0) x2=sx(max_x) y1=sy(f) y2=sy(f) />
                            <text class="tick" x=sx(f * max_x) y=H - PAD_BOTTOM + 14.0 text-anchor="middle">
                                {tick_text(f * max_x)}
                            </text>
                            <text class="tick" x=PAD_LEFT - 6.0 y=sy(f) + 4.0 text-anchor="end">
                                {format!("{:.0}", f * 100.0)}
                            </text>
                        }
                    })
                    .collect_view()}
                <line
                    class="slo-line"
                    data-testid="search-target"
                    x1=sx(0.0)
                    x2=sx(max_x)
                    y1=sy(target)
                    y2=sy(target)
                    stroke-dasharray="6 4"
                />
                <text class="axis" x=(W + PAD_LEFT) / 2.0 y=H - 4.0 text-anchor="middle">{move || t().search_x}</text>
                <text class="axis" x=8.0 y=14.0>{move || t().search_y}</text>
                {found
                    .trials
                    .iter()
                    .filter(|r| r.rate.is_finite())
                    .map(|r| {
                        let class = if r.met { "search-dot met" } else { "search-dot missed" };
                        view! {
                            <circle class=class cx=sx(r.rate) cy=sy(r.attainment) r="5">
                                <title>{format!("{} req/s: {:.1}%", rate_text(r.rate), r.attainment * 100.0)}</title>
                            </circle>
                        }
                    })
                    .collect_view()}
            </svg>
        </div>
    }
}

/// The search card: shown while a search runs and after it.
#[component]
pub fn SearchPanel(search: RwSignal<Option<SearchView>>) -> impl IntoView {
    let t = use_text();
    let UiLang(lang) = expect_context::<UiLang>();
    let body = move || {
        let view = search.get()?;
        let t = t();
        let Some(found) = view.found else {
            let line = view.trying.map(|(rate, n)| trying_text(rate, n, t)).unwrap_or_default();
            return Some(view! { <p class="note" data-testid="search-trying">{line}</p> }.into_any());
        };
        let limiting = found.limiting.as_ref().filter(|_| found.hi.is_finite()).map(|(metric, share)| {
            t.search_limiting
                .replace("{metric}", metric)
                .replace("{pct}", &format!("{:.1}", share * 100.0))
                .replace("{hi}", &rate_text(found.hi))
        });
        let rows = found
            .trials
            .iter()
            .map(|r| {
                let stage = stage_text(r.stage, t);
                view! {
                    <tr>
                        <td class="num">{rate_text(r.rate)}</td>
                        <td>{stage}</td>
                        <td class="num">{format!("{:.1}%", r.attainment * 100.0)}</td>
                        <td>{if r.steady { t.search_steady } else { t.search_whole }}</td>
                        <td>
                            {trial_verdict(r, t, lang.get())}
                        </td>
                    </tr>
                }
            })
            .collect_view();
        Some(
            view! {
                <p class="note strong" data-testid="search-found">{found_text(&found, t, lang.get())}</p>
                <p class="note muted">
                    {format!(
                        "SLO {} · ≥ {:.1}% · {}: {} · {}",
                        found.slo,
                        found.attainment * 100.0,
                        t.search_first_guess,
                        found.first_guess,
                        t.search_spent
                            .replace("{n}", &found.spent_requests.to_string())
                            .replace("{s}", &format!("{:.1}", found.spent_s)),
                    )}
                </p>
                <div class="sweep-body">
                    <SearchChart found=found.clone() />
                    <table class="table sweep-table" data-testid="search-runs">
                        <thead>
                            <tr>
                                <th>{t.sweep_rate}</th>
                                <th>{t.search_stage}</th>
                                <th>{t.search_attainment}</th>
                                <th>{t.search_counted}</th>
                                <th></th>
                            </tr>
                        </thead>
                        <tbody>{rows}</tbody>
                    </table>
                </div>
                {limiting.map(|line| view! { <p class="note" data-testid="search-limiting">{line}</p> })}
            }
            .into_any(),
        )
    };
    view! {
        <Show when=move || search.with(Option::is_some)>
            <section class="card" aria-labelledby="search-title" data-testid="search">
                <div class="card-head">
                    <h2 id="search-title">{move || t().search}</h2>
                </div>
                {body}
            </section>
        </Show>
    }
}
