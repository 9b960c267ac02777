//! The results schema: one run's measurements, diagnosis and run record, as the JSON the page
//! and the CLI both write and read.

use serde::{Deserialize, Serialize};

use crate::bench::base::lang::Lang;
use crate::bench::measure::decided::Decided;
use crate::bench::measure::energy::GpuReadings;
use crate::bench::measure::metrics::BenchmarkMetrics;
use crate::bench::measure::saturation::Saturation;
use crate::bench::measure::server_metrics::ServerMetrics;
use crate::bench::record::raw::{RequestRecord, StepSample};
use crate::bench::record::run_config::RunConfig;
use crate::bench::verdict::diagnosis::{Baseline, Diagnosis};
use crate::bench::verdict::validity::{self, Evidence, Validity};

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
    /// Set when a `--rate max` trial was ended once its SLO attainment was decided; the requests
    /// not yet sent then were never sent (and are not in `requests`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided: Option<Decided>,
    /// The server's own `/metrics`, scraped during the run (`--server-metrics`); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_metrics: Option<ServerMetrics>,
    /// The GPUs' power and energy readings during the run (`--gpu-metrics-url`, or NVML on the
    /// engine's GPU); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_metrics: Option<GpuReadings>,
    /// VALID or INVALID with its reasons ([`validity`]), as judged when the run ended
    /// ([`BenchResult::stamp`]); absent in results saved before it existed, which
    /// [`BenchResult::validity`] judges when read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validity: Option<Validity>,
}

impl BenchResult {
    /// The run's verdict on itself: as stamped, or judged now from its records.
    pub fn validity(&self) -> Validity {
        self.validity.clone().unwrap_or_else(|| self.judge())
    }

    /// Judges the run ([`validity::judge`]) and records the verdict in the result.
    pub fn stamp(&mut self) {
        self.validity = Some(self.judge());
    }

    fn judge(&self) -> Validity {
        let (measured, measured_from_s) = crate::bench::record::phases::measured(&self.requests, &self.steps)
            .map_or_else(|| (self.requests.clone(), 0.0), |(kept, _, excluded)| (kept, excluded.measured_from_s));
        let slo = self.config.slo.as_deref().and_then(|s| s.parse::<crate::bench::measure::metrics::Slo>().ok());
        validity::judge(&Evidence {
            metrics: &self.metrics,
            measured: &measured,
            measured_from_s,
            slo: slo.as_ref(),
            criteria: self.config.criteria.unwrap_or_default(),
            saturation: self.saturation.as_ref(),
            decided: self.decided.as_ref(),
            conditions: self.metrics.browser_conditions.as_ref(),
        })
    }

    /// Requests were sent and none succeeded: a failed run, which the page marks as such and
    /// keeps out of the Pareto chart and the capacity plan.
    pub fn failed(&self) -> bool {
        self.metrics.completed == 0 && self.metrics.failed > 0
    }
}

/// A session in which requests were sent and none succeeded: its one error, as the CLI and the
/// page say it.
#[derive(Clone, Debug, PartialEq)]
pub struct NoneSucceeded {
    pub sent: usize,
    /// Each kind of error ([`RequestRecord::error_kind`]) and how many requests ended with it.
    pub kinds: Vec<(String, usize)>,
    /// The first failed request's own message (a server's, a browser's CORS hint), if any.
    pub first: Option<String>,
}

impl NoneSucceeded {
    /// Of a session's results (every rate): `Some` when requests were sent, none succeeded and
    /// some failed (a run whose requests were all cancelled failed nothing). `sent` counts the
    /// requests not cancelled.
    pub fn of(results: &[BenchResult]) -> Option<NoneSucceeded> {
        let sent: usize = results.iter().map(|r| r.metrics.failed).sum();
        if sent == 0 || results.iter().any(|r| r.metrics.completed > 0) {
            return None;
        }
        let mut kinds = std::collections::BTreeMap::new();
        for (kind, n) in results.iter().flat_map(|r| &r.metrics.errors) {
            *kinds.entry(kind.clone()).or_insert(0) += n;
        }
        let first = results.iter().flat_map(|r| &r.requests).find_map(|q| q.error.clone());
        Some(NoneSucceeded { sent, kinds: kinds.into_iter().collect(), first })
    }

    pub fn text(&self, lang: Lang) -> String {
        let kinds: Vec<String> = self.kinds.iter().map(|(kind, n)| format!("{kind} × {n}")).collect();
        let first = self.first.as_deref().map(|e| format!(": {e}")).unwrap_or_default();
        match lang {
            Lang::En => format!("none of the {} requests succeeded ({}){first}", self.sent, kinds.join(", ")),
            Lang::Zh => format!("{} 个请求全部失败（{}）{first}", self.sent, kinds.join("，")),
        }
    }
}

#[cfg(test)]
mod tests {
    // By their real paths: `super` here is `bench/mod.rs`, which the floors check reads as an import.
    use crate::bench::base::lang::Lang;
    use crate::bench::measure::metrics::summarize;
    use crate::bench::record::raw::RequestRecord;
    use crate::bench::record::run_config::RunConfig;
    use crate::bench::result::{BenchResult, NoneSucceeded};

    fn result(records: Vec<RequestRecord>) -> BenchResult {
        BenchResult {
            decided: None,
            config: RunConfig::default(),
            metrics: summarize(&records, &[], None, 0.25),
            diagnosis: None,
            baseline: None,
            requests: records,
            steps: Vec::new(),
            saturation: None,
            server_metrics: None,
            gpu_metrics: None,
            validity: None,
        }
    }

    fn failed(id: u64, error: &str) -> RequestRecord {
        RequestRecord { arrival_s: 0.0, error: Some(error.into()), ..RequestRecord::unsent(id, 8) }
    }

    #[test]
    fn a_session_whose_every_request_failed_says_so_with_the_first_cause() {
        let refused = "connect: connection refused (is the server up? a browser needs CORS)";
        let results = [result(vec![failed(0, refused), failed(1, "timeout after 300 s")])];
        let none = NoneSucceeded::of(&results).expect("every request failed");
        assert_eq!(none.sent, 2);
        assert_eq!(none.first.as_deref(), Some(refused));
        let en = none.text(Lang::En);
        assert!(en.starts_with("none of the 2 requests succeeded (") && en.ends_with(refused), "{en}");
        assert!(none.text(Lang::Zh).starts_with("2 个请求全部失败"), "{}", none.text(Lang::Zh));
        assert!(results[0].failed());
        let mut ok = failed(2, "");
        (ok.error, ok.first_token_s, ok.finish_s, ok.output_len) = (None, Some(0.1), Some(0.2), 1);
        ok.token_times_s = vec![0.1];
        let mixed = [result(vec![failed(0, refused), ok])];
        assert_eq!(NoneSucceeded::of(&mixed), None, "one succeeded");
        assert!(!mixed[0].failed());
        assert_eq!(NoneSucceeded::of(&[]), None, "nothing sent");
        let mut cancelled = failed(3, "");
        cancelled.error = None;
        cancelled.cancelled = Some(crate::bench::record::raw::Cancelled {
            by: crate::bench::traffic::cancel::CancelledBy::User,
            at_s: 0.1,
        });
        let stopped = [result(vec![cancelled])];
        assert_eq!(NoneSucceeded::of(&stopped), None, "cancelled, not failed");
        assert!(!stopped[0].failed());
    }
}
