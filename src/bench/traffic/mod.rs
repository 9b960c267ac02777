//! What is sent, when and where: a workload planned from a seed (arrival times, lengths,
//! conversations), datasets and traces as workloads, every request's prompt, and the endpoint a
//! run request names.

pub mod cancel;
pub mod dataset;
pub mod endpoint;
pub mod prompts;
pub mod workload;
