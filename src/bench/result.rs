//! The results schema: one run's measurements, diagnosis and run record, as the JSON the page
//! and the CLI both write and read.

use serde::{Deserialize, Serialize};

use crate::bench::measure::energy::GpuReadings;
use crate::bench::measure::metrics::BenchmarkMetrics;
use crate::bench::measure::saturation::Saturation;
use crate::bench::measure::server_metrics::ServerMetrics;
use crate::bench::record::raw::{RequestRecord, StepSample};
use crate::bench::record::run_config::RunConfig;
use crate::bench::verdict::diagnosis::{Baseline, Diagnosis};

/// Everything about one run; the raw records stay so any figure can be recomputed.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BenchResult {
    /// What ran: target, model, adapter, kernel path, engine limits, workload, SLOs, version
    /// (`run_config`; results saved before it was typed have `config`, which still loads).
    #[serde(rename = "run_config", alias = "config")]
    pub config: RunConfig,
    #[serde(rename = "summary")]
    pub metrics: BenchmarkMetrics,
    pub diagnosis: Option<Diagnosis>,
    pub baseline: Option<Baseline>,
    pub requests: Vec<RequestRecord>,
    pub steps: Vec<StepSample>,
    /// Set when the rate was ended early because the target could not sustain it; the requests
    /// not yet due then were never sent (and are not in `requests`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saturation: Option<Saturation>,
    /// The server's own `/metrics`, scraped during the run (`--server-metrics`); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_metrics: Option<ServerMetrics>,
    /// The GPUs' power and energy readings during the run (`--gpu-metrics-url`, or NVML on the
    /// engine's GPU); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_metrics: Option<GpuReadings>,
}
