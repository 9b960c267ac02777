//! The benchmark: plan a workload, record what happens, aggregate, judge, present. It sits on the
//! engine (it knows the GPU only through the engine's events and its run record) and runs on both
//! targets. Its files stand on floors, each importing only the floors below it (held by
//! `tests/it/layers.rs`):
//!
//! | floor | what it holds |
//! |---|---|
//! | [`request`] | one run request parsed from the CLI's flags or the page's fields, every problem on its field |
//! | [`run`] | the [`run::target::Target`] trait, the engine's driver and launcher, the session, `--rate max`, experiments, the soak, `speed` |
//! | [`present`] | the text report and CSV, the timeline, the HTML report, the Pareto chart, vLLM's format |
//! | [`result`] | [`BenchResult`], the results JSON |
//! | [`verdict`] | the diagnosis, a sweep's knee, A/B comparisons, output quality |
//! | [`measure`] | metrics, the steady window, the delivered load, saturation, energy, server metrics |
//! | [`record`] | raw per-request records and engine steps, phases, the run record |
//! | [`traffic`] | workloads, datasets, prompts, the endpoint |
//! | [`base`] | statistics, the report language, fields and rules, seeded streams, thinking tags, markup escaping |
//!
//! The names below are re-exported for the layers above `bench`; inside `bench`, files name each
//! other by their real paths.

pub mod base;
pub mod measure;
pub mod present;
pub mod record;
pub mod request;
pub mod result;
pub mod run;
pub mod traffic;
pub mod verdict;

pub use base::lang::Lang;
pub use base::stats::{stats, Stats};
pub use measure::metrics::{summarize, throughput_bucket_s, BenchmarkMetrics, Cost, LongTasks, Slo, TimePoint};
pub use present::report::{
    csv, run_warnings, text_report, text_report_for, validity_lines, Measured, LATENESS_WARN_MS,
};
pub use record::raw::{Cancelled, RequestRecord, StepSample, TokenTimes};
pub use record::run_config::RunConfig;
pub use result::BenchResult;
pub use run::session::SessionSpec;
pub use run::target::Target;
pub use traffic::cancel::{Cancellations, CancelledBy, DelayRange};
pub use traffic::prompts::{random_prompt, Prompt, PromptSource, TEXT_PROMPTS};
pub use traffic::workload::{
    check_context, plan, Arrival, ArrivalSpan, Conversations, LenRange, PlannedRequest, SharedPrefix, WorkloadSpec,
};
pub use verdict::diagnosis::{diagnose, diagnose_in, Baseline, Diagnosis, Verdict};
