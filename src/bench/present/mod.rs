//! A result shown to a person or another tool: the text report (en/zh) and CSV, the timeline,
//! the self-contained HTML report and its Pareto chart, and vLLM's result format.

pub mod html;
pub mod pareto;
pub mod report;
pub mod timeline;
pub mod vllm;
