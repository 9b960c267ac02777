//! The benchmark: plan a workload, record what happens, aggregate, diagnose, report. It sits on the
//! engine (it knows the GPU only through the engine's events and its run record) and runs on both
//! targets. Two kinds of module: pure functions over plans and records (workload, dataset,
//! prompts, record, stats, metrics, diagnosis, compare, report, html, timeline, sweep, saturation,
//! vllm, ledger), and the ones that drive an engine (driver, session, speed, soak, experiment).
//!
//! - [`workload`]: arrival times and lengths from a seed (Poisson, gamma, constant, closed loops).
//! - [`dataset`]: ShareGPT, JSONL and trace files as workloads (lengths, trace times).
//! - [`prompts`]: every request's prompt ([`PromptSource`]): a dataset row's text, built-in
//!   English/Chinese text, or seeded random token ids, at the planned length.
//! - [`record`]: the raw data, one record per request and one sample per engine step.
//! - [`delivered`]: the load the client delivered (send times) checked against the plan.
//! - [`stats`]: mean, std and percentiles as numpy computes them.
//! - [`metrics`]: `summarize(records, steps) -> BenchmarkMetrics`: TTFT (from arrival, and from
//!   send for servers), TPOT, ITL, E2E, queue or client lateness, goodput.
//! - [`diagnosis`]: saturation first ([`saturation::Load`]), then loaded latencies against the
//!   baseline (the median of requests alone, after a warm-up) -> a verdict and advice.
//! - [`driver`]: releases planned requests into the engine on the wall clock and records events.
//! - [`report`]: text report (en/zh), CSV, and the results JSON shared by app and CLI.
//! - [`quality`]: what a speed-up costs in output: top-1 agreement, KL and perplexity of a
//!   setting against a reference (the engine or the CPU oracle), teacher-forced and free-running.
//! - [`soak`]: thousands of requests under KV pressure, every event checked ([`ledger`]), KV
//!   blocks and resident memory accounted for at the end.
//! - [`saturation`]: when an open-loop rate cannot be sustained (outstanding requests growing).
//! - [`server_metrics`]: a server's Prometheus `/metrics`, scraped during a run, as one set of series.
//! - [`energy`]: the GPUs' average power, energy and joules per output token over a run (DCGM or NVML).
//! - [`phases`]: a warm-up and a cool-down sent but left out of the summary.
//! - [`steady`]: the window in which the requests outstanding hold steady, and the summary over it.
//! - [`sweep`]: several rates in one go, and the knee.
//! - [`max_rate`]: `--rate max`, the highest rate whose SLO attainment meets a target, by real runs.
//! - [`vllm`]: a result as vLLM's `--save-result` JSON.
//! - [`thinking`]: reasoning tokens and the first answer token of a thinking model's reply.
//! - [`timeline`]: one bar per request, split into waiting, prefill and decode (SVG paths).
//! - [`html`]: a self-contained HTML report (SVG charts, timeline, text report, run record).
//! - [`session`]: the one benchmark run (baseline, rates, summary, diagnosis, run record) over a
//!   [`session::Target`]: the engine here, or a server (the remote layer above implements it).

pub mod compare;
pub mod dataset;
pub mod delivered;
pub mod diagnosis;
pub mod driver;
pub mod energy;
pub mod experiment;
pub mod html;
pub mod launch;
pub mod ledger;
pub mod max_rate;
pub mod metrics;
pub mod pareto;
pub mod phases;
pub mod prompts;
pub mod quality;
pub mod record;
pub mod report;
pub mod request;
pub mod rules;
pub mod saturation;
pub mod server_metrics;
pub mod session;
pub mod soak;
pub mod speed;
pub mod stats;
pub mod steady;
pub mod sweep;
pub mod target;
pub mod thinking;
pub mod timeline;
pub mod vllm;
pub mod workload;

pub use diagnosis::{diagnose, diagnose_in, Baseline, Diagnosis, Lang, Verdict};
pub use metrics::{summarize, throughput_bucket_s, BenchmarkMetrics, Cost, LongTasks, Slo, TimePoint};
pub use prompts::{random_prompt, Prompt, PromptSource, TEXT_PROMPTS};
pub use record::{RequestRecord, StepSample, TokenTimes};
pub use report::{csv, run_warnings, text_report, text_report_for, BenchResult, Measured, LATENESS_WARN_MS};
pub use session::{RunConfig, SessionSpec, Target};
pub use stats::{stats, Stats};
pub use workload::{
    check_context, plan, Arrival, ArrivalSpan, Conversations, LenRange, PlannedRequest, SharedPrefix, WorkloadSpec,
};
