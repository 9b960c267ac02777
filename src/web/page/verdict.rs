//! The verdict table of an A/B comparison, one row per metric: the Experiment card's and, for a
//! saved experiment, the history card's; and the output-quality rows under it.

use super::i18n::{use_text, UiLang};
use crate::bench::verdict::compare::{CompareVerdict, Comparison, MetricComparison};
use crate::bench::verdict::quality::rows;
use crate::bench::verdict::quality::Quality;
use crate::bench::Lang;
use leptos::prelude::*;

/// A metric's name in the table: `ttft_p50_ms` → "TTFT p50 (ms)".
pub fn metric_label(name: &str) -> String {
    match name {
        "output_throughput_tok_s" => "output tok/s".into(),
        "goodput_req_s" => "goodput (req/s)".into(),
        _ => {
            let mut parts = name.split('_');
            let (metric, pct, unit) = (parts.next(), parts.next(), parts.next());
            match (metric, pct, unit) {
                (Some(m), Some(p), Some(u)) => format!("{} {p} ({u})", m.to_uppercase()),
                _ => name.to_string(),
            }
        }
    }
}

fn number(x: f64) -> String {
    if !x.is_finite() {
        return "–".into();
    }
    if x.abs() >= 100.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

fn verdict_class(v: CompareVerdict) -> &'static str {
    match v {
        CompareVerdict::Better => "better",
        CompareVerdict::Worse => "worse",
        CompareVerdict::WithinMargin | CompareVerdict::NoDetectableDifference | CompareVerdict::NotMeasured => "same",
        CompareVerdict::TooFewRepetitions => "unsure",
    }
}

/// The verdict per metric: A, B, B − A, its interval and the verdict with what it rests on
/// (`MetricComparison::verdict_text`: the margin, the repetitions that would tell; `data-verdict`
/// holds the English word, whatever the page's language).
#[component]
pub fn VerdictTable(comparison: Comparison) -> impl IntoView {
    let t = use_text();
    let lang = expect_context::<UiLang>().0;
    let margin = comparison.margin;
    let rows = comparison
        .metrics
        .into_iter()
        .map(|m: MetricComparison| {
            let verdict = m.verdict;
            let english = verdict.label(Lang::En);
            view! {
                <tr data-testid="verdict-row">
                    <th scope="row">{metric_label(&m.metric)}</th>
                    <td class="num">{number(m.a)}</td>
                    <td class="num">{number(m.b)}</td>
                    <td class="num">{number(m.diff)}</td>
                    <td class="num">"[" {number(m.ci_low)} ", " {number(m.ci_high)} "]"</td>
                    <td class=format!("delta {}", verdict_class(verdict)) data-testid="verdict" data-verdict=english>
                        {move || m.verdict_text(margin, lang.get())}
                    </td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <div class="table-scroll">
            <table class="table verdicts" data-testid="verdict-table">
                <thead>
                    <tr>
                        <th scope="col">{move || t().metric}</th>
                        <th scope="col">"A"</th>
                        <th scope="col">"B"</th>
                        <th scope="col">"B − A"</th>
                        <th scope="col">{move || t().interval}</th>
                        <th scope="col">{move || t().verdict}</th>
                    </tr>
                </thead>
                <tbody>{rows}</tbody>
            </table>
        </div>
    }
}

/// B's output quality against A's under the verdicts (`quality::report::rows`, the CLI's rows in
/// the page's language): each row's value and the line saying what it means.
#[component]
pub fn QualityTable(quality: Quality) -> impl IntoView {
    let t = use_text();
    let lang = expect_context::<UiLang>().0;
    let rows = move || {
        rows(&quality, lang.get())
            .into_iter()
            .map(|(row, value, meaning)| {
                view! {
                    <tr data-testid="quality-row">
                        <th scope="row">
                            {row}
                            <span class="meaning">{meaning}</span>
                        </th>
                        <td class="num">{value}</td>
                    </tr>
                }
            })
            .collect_view()
    };
    view! {
        <h3>{move || t().quality_heading}</h3>
        <div class="table-scroll">
            <table class="table quality" data-testid="quality-table">
                <thead>
                    <tr>
                        <th scope="col">{move || t().metric}</th>
                        <th scope="col">"B / A"</th>
                    </tr>
                </thead>
                <tbody>{rows}</tbody>
            </table>
        </div>
    }
}
