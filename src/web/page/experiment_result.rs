//! What the Experiment card shows once an experiment ends (or is cancelled): what B changed, the
//! verdict per metric, B's output quality, the text report and the JSON download.

use super::experiment::{changes_text, ExperimentState, Outcome};
use super::i18n::use_text;
use super::state::AppState;
use super::verdict::{QualityTable, VerdictTable};
use crate::bench::run::experiment::invalid_runs;
use crate::bench::verdict::compare::text_report;
use crate::web::browser;
use leptos::prelude::*;

/// The JSON download: B's changes, every repetition of both sides, and the comparison.
fn outcome_json(o: &Outcome) -> String {
    let value = serde_json::json!({
        "b_differs_in": o
            .changes
            .iter()
            .map(|(f, a, b)| (f.key().to_string(), serde_json::json!({ "a": a, "b": b })))
            .collect::<serde_json::Map<_, _>>(),
        "cancelled": o.cancelled,
        "a": o.a,
        "b": o.b,
        "comparison": o.comparison.as_ref().ok(),
        "invalid": invalid_runs([("A", o.a.as_slice()), ("B", o.b.as_slice())]),
        "error": o.comparison.as_ref().err(),
        "quality": o.quality.as_ref().and_then(|q| q.as_ref().ok()),
        "quality_error": o.quality.as_ref().and_then(|q| q.as_ref().err()),
    });
    serde_json::to_string_pretty(&value).expect("serialisable")
}

/// The outcome: what B changed, whether the run was cut short, the verdict table, B's quality
/// against A's, the text report and the JSON download (or why the comparison failed).
#[component]
pub fn ExperimentResult(
    state: AppState,
    /// The card's state: its outcome, `None` until an experiment ends.
    x: ExperimentState,
) -> impl IntoView {
    let t = use_text();
    let download_error = RwSignal::new(None::<String>);
    let download = move |_| {
        if let Some(o) = x.outcome.get_untracked() {
            let name = format!("tokenmeter-experiment-{}.json", browser::now_ms() as u64);
            let outcome = browser::download(&name, "application/json", &outcome_json(&o));
            download_error.set(outcome.err().map(|e| e.to_string()));
        }
    };
    move || {
        let o = x.outcome.get()?;
        let lang = state.lang.get();
        // The repetitions stamped INVALID that the verdicts rest on, each with its reasons.
        let invalid = invalid_runs([("A", o.a.as_slice()), ("B", o.b.as_slice())])
            .into_iter()
            .map(|run| view! { <li>{run.text(lang)}</li> })
            .collect_view();
        let cut = o
            .cancelled
            .then(|| t().experiment_cut.replace("{a}", &o.a.len().to_string()).replace("{b}", &o.b.len().to_string()));
        let body = match &o.comparison {
            Ok(c) => {
                let report = text_report(c, lang);
                let quality = o.quality.clone().map(|q| match q {
                    Ok(q) => view! { <QualityTable quality=q /> }.into_any(),
                    Err(e) => view! { <p class="error" role="alert">{t().quality_failed} ": " {e}</p> }.into_any(),
                });
                view! {
                    <VerdictTable comparison=c.clone() />
                    {quality}
                    <pre class="text-report" data-testid="experiment-report">{report}</pre>
                }
                .into_any()
            }
            Err(e) => view! {
                <p class="error" role="alert">{t().experiment_failed} ": " {e.clone()}</p>
            }
            .into_any(),
        };
        Some(view! {
            <div class="experiment-result" data-testid="experiment-result">
                <p class="note">{t().b_differs} " " {changes_text(&o.changes, t())}</p>
                {cut.map(|c| view! { <p class="note warn">{c}</p> })}
                <ul class="run-warnings" data-testid="experiment-invalid">{invalid}</ul>
                {body}
                <div class="row">
                    <button class="small" data-testid="download-experiment" on:click=download>
                        {t().download_experiment}
                    </button>
                </div>
                <p class="error" role="alert">{move || download_error.get()}</p>
            </div>
        })
    }
}
