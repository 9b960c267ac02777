//! The server's own view of a run: its Prometheus `/metrics` scraped at a fixed period while the
//! run's requests are in flight, on the run's clock, so its queue and batch sit beside the
//! client's TTFT and TPOT. Pure: the text in, samples and a summary out (the remote clients fetch).
//!
//! One canonical series per quantity, read from whichever server exposes it (gauges summed over
//! label sets, e.g. vLLM's per-engine series):
//!
//! | series | vLLM | SGLang | llama.cpp (`--metrics`) | TGI |
//! |---|---|---|---|---|
//! | running | `vllm:num_requests_running` | `sglang:num_running_reqs` | `llamacpp:requests_processing` | `tgi_batch_current_size` |
//! | waiting | `vllm:num_requests_waiting` | `sglang:num_queue_reqs` | `llamacpp:requests_deferred` | `tgi_queue_size` |
//! | KV cache in use (0–1) | `vllm:kv_cache_usage_perc`, `vllm:gpu_cache_usage_perc` | `sglang:token_usage` | – | – |
//! | preemptions (counter) | `vllm:num_preemptions_total` | – | – | – |
//! | prefix-cache hit tokens, queried tokens (counters) | `vllm:prefix_cache_hits_total`, `vllm:prefix_cache_queries_total` | – | `llamacpp:prompt_tokens_cached_total`, that + `llamacpp:prompt_tokens_total` | – |
//!
//! A DCGM exporter (`--gpu-metrics-url`) is scraped by the same loop into the same samples: its
//! `DCGM_FI_DEV_POWER_USAGE` (W, a gauge per GPU) and `DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION` (mJ,
//! a counter since boot per GPU), each summed over its GPUs' label sets; [`crate::bench::measure::energy`]
//! turns them into the run's energy.
//!
//! A quantity no source exposes is absent ("–" in the report), never 0.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One scrape, `t_s` seconds from the run's start (when its answer arrived).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerSample {
    pub t_s: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting: Option<f64>,
    /// Share of the KV cache in use, 0–1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_cache_usage: Option<f64>,
    /// Since the server started (a counter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preemptions_total: Option<f64>,
    /// Prompt tokens served from the prefix cache, and prompt tokens looked up (counters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_cache_hits_total: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_cache_queries_total: Option<f64>,
    /// Power drawn by the GPUs, summed, W (a gauge).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_power_w: Option<f64>,
    /// Energy the GPUs consumed since boot, summed, mJ (a counter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_energy_mj: Option<f64>,
    /// GPUs those sums are over: the label sets of the power or energy series.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus: Option<usize>,
}

/// What a run's scrapes left: where and how often, which metric each series came from, the samples.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerMetrics {
    pub url: String,
    pub period_s: f64,
    /// Canonical series → the server's metric names it was read from.
    pub sources: BTreeMap<String, String>,
    pub samples: Vec<ServerSample>,
    /// Scrapes that failed (timeout, HTTP error, not Prometheus text), and the first reason.
    #[serde(default)]
    pub failed_scrapes: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_error: Option<String>,
}

/// The run as the server saw it: peaks of its gauges, and its counters' growth over the run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerSummary {
    pub samples: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_running: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_waiting: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_kv_cache_usage: Option<f64>,
    /// Preemptions during the run (last − first scrape).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preemptions: Option<f64>,
    /// Prefix-cache hits over lookups during the run, in prompt tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_cache_hit_rate: Option<f64>,
    /// The metric the queue was read from (for the diagnosis's wording).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_source: Option<String>,
}

/// One metric family in a scrape: the sum of its samples' values, and how many samples (label
/// sets) it had.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Family {
    pub sum: f64,
    pub series: usize,
}

/// A metric family's name and the sum of its samples' values, from Prometheus' text format
/// (`name{labels} value [timestamp]`; comments and malformed lines skipped). Histogram and
/// summary parts (`_bucket`, `_sum`, `_count`) are families of their own names.
pub fn parse(text: &str) -> BTreeMap<String, f64> {
    families(text).into_iter().map(|(name, f)| (name, f.sum)).collect()
}

/// [`parse`], keeping how many label sets each family summed.
pub fn families(text: &str) -> BTreeMap<String, Family> {
    let mut out = BTreeMap::<String, Family>::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        // The name ends at `{` or whitespace; labels may hold spaces inside quotes.
        let name_end = line.find(|c: char| c == '{' || c.is_whitespace()).unwrap_or(line.len());
        let (name, rest) = line.split_at(name_end);
        let rest = match rest.strip_prefix('{') {
            Some(labels) => match closing_brace(labels) {
                Some(end) => &labels[end + 1..],
                None => continue,
            },
            None => rest,
        };
        let Some(value) = rest.split_whitespace().next().and_then(|v| v.parse::<f64>().ok()) else { continue };
        if !value.is_finite() || name.is_empty() {
            continue;
        }
        let family = out.entry(name.to_string()).or_default();
        family.sum += value;
        family.series += 1;
    }
    out
}

/// The index of the `}` that closes a label set, skipping quoted values (with `\"` escapes).
fn closing_brace(labels: &str) -> Option<usize> {
    let (mut quoted, mut escaped) = (false, false);
    for (i, c) in labels.char_indices() {
        match (quoted, escaped, c) {
            (true, true, _) => escaped = false,
            (true, false, '\\') => escaped = true,
            (true, false, '"') => quoted = false,
            (false, _, '"') => quoted = true,
            (false, _, '}') => return Some(i),
            _ => {}
        }
    }
    None
}

const RUNNING: &[&str] =
    &["vllm:num_requests_running", "sglang:num_running_reqs", "llamacpp:requests_processing", "tgi_batch_current_size"];
const WAITING: &[&str] =
    &["vllm:num_requests_waiting", "sglang:num_queue_reqs", "llamacpp:requests_deferred", "tgi_queue_size"];
const KV_USAGE: &[&str] = &["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage"];
const PREEMPTIONS: &[&str] = &["vllm:num_preemptions_total"];
/// DCGM exporter's fields: W per GPU (a gauge), and mJ per GPU since boot (a counter).
pub const DCGM_POWER: &str = "DCGM_FI_DEV_POWER_USAGE";
pub const DCGM_ENERGY: &str = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION";

/// The canonical sample of one scrape, and for each series found the metric it came from.
pub fn sample(t_s: f64, counted: &BTreeMap<String, Family>) -> (ServerSample, Vec<(&'static str, String)>) {
    let sums: BTreeMap<&str, f64> = counted.iter().map(|(name, f)| (name.as_str(), f.sum)).collect();
    let mut sources = Vec::new();
    let mut pick = |series: &'static str, names: &[&str]| -> Option<f64> {
        let (name, value) = names.iter().find_map(|n| sums.get(*n).map(|v| (*n, *v)))?;
        sources.push((series, name.to_string()));
        Some(value)
    };
    let running = pick("running", RUNNING);
    let waiting = pick("waiting", WAITING);
    let kv_cache_usage = pick("kv_cache_usage", KV_USAGE);
    let preemptions_total = pick("preemptions_total", PREEMPTIONS);
    let gpu_power_w = pick("gpu_power", &[DCGM_POWER]);
    let gpu_energy_mj = pick("gpu_energy", &[DCGM_ENERGY]);
    let gpus = [DCGM_POWER, DCGM_ENERGY].iter().filter_map(|n| counted.get(*n)).map(|f| f.series).max();
    let (hits, queries) = match (
        sums.get("vllm:prefix_cache_hits_total"),
        sums.get("vllm:prefix_cache_queries_total"),
        sums.get("llamacpp:prompt_tokens_cached_total"),
        sums.get("llamacpp:prompt_tokens_total"),
    ) {
        (Some(&h), Some(&q), _, _) => {
            sources.push(("prefix_cache", "vllm:prefix_cache_hits_total / vllm:prefix_cache_queries_total".into()));
            (Some(h), Some(q))
        }
        (_, _, Some(&cached), Some(&computed)) => {
            sources.push((
                "prefix_cache",
                "llamacpp:prompt_tokens_cached_total / (that + llamacpp:prompt_tokens_total)".into(),
            ));
            (Some(cached), Some(cached + computed))
        }
        _ => (None, None),
    };
    let s = ServerSample {
        t_s,
        running,
        waiting,
        kv_cache_usage,
        preemptions_total,
        prefix_cache_hits_total: hits,
        prefix_cache_queries_total: queries,
        gpu_power_w,
        gpu_energy_mj,
        gpus,
    };
    (s, sources)
}

impl ServerMetrics {
    /// Adds one scrape's text, answered at `t_s`; text with none of the known series is a failed
    /// scrape ("not a server's metrics").
    pub fn push(&mut self, t_s: f64, text: &str) {
        let (s, sources) = sample(t_s, &families(text));
        if sources.is_empty() {
            self.fail(
                "no metric tokenmeter knows (vLLM, SGLang, llama.cpp --metrics, TGI, DCGM exporter) in the answer"
                    .into(),
            );
            return;
        }
        for (series, name) in sources {
            self.sources.entry(series.to_string()).or_insert(name);
        }
        self.samples.push(s);
    }

    pub fn fail(&mut self, why: String) {
        self.failed_scrapes += 1;
        self.first_error.get_or_insert(why);
    }

    pub fn summary(&self) -> ServerSummary {
        let s = &self.samples;
        let max = |f: fn(&ServerSample) -> Option<f64>| s.iter().filter_map(f).reduce(f64::max);
        let growth = |f: fn(&ServerSample) -> Option<f64>| {
            let values: Vec<f64> = s.iter().filter_map(f).collect();
            (values.len() >= 2).then(|| values[values.len() - 1] - values[0])
        };
        let hits = growth(|x| x.prefix_cache_hits_total);
        let queries = growth(|x| x.prefix_cache_queries_total);
        ServerSummary {
            samples: s.len(),
            max_running: max(|x| x.running),
            max_waiting: max(|x| x.waiting),
            max_kv_cache_usage: max(|x| x.kv_cache_usage),
            preemptions: growth(|x| x.preemptions_total),
            prefix_cache_hit_rate: match (hits, queries) {
                (Some(h), Some(q)) if q > 0.0 => Some(h / q),
                _ => None,
            },
            waiting_source: self.sources.get("waiting").cloned(),
        }
    }
}

/// `/metrics` at the root of the endpoint's origin: `http://host:8000/v1` → `http://host:8000/metrics`
/// (where vLLM, SGLang, llama-server and TGI serve it).
pub fn default_url(base_url: &str) -> String {
    let trimmed = base_url.trim_end_matches('/');
    let root = trimmed.strip_suffix("/v1").unwrap_or(trimmed);
    format!("{root}/metrics")
}

#[cfg(test)]
mod tests {
    use super::*;

    const VLLM: &str = r#"# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="Qwen/Qwen3-8B"} 12.0
vllm:num_requests_running{engine="1",model_name="Qwen/Qwen3-8B"} 3.0
vllm:num_requests_waiting{engine="0",model_name="a \"quoted\" } name"} 37.0
vllm:kv_cache_usage_perc{engine="0",model_name="Qwen/Qwen3-8B"} 0.42
vllm:num_preemptions_total{engine="0",model_name="Qwen/Qwen3-8B"} 5.0
vllm:prefix_cache_hits_total{engine="0"} 300
vllm:prefix_cache_queries_total{engine="0"} 1000
vllm:e2e_request_latency_seconds_bucket{le="0.3"} 4
bad line without value
"#;

    #[test]
    fn prometheus_text_sums_label_sets_and_skips_what_is_not_a_sample() {
        let f = parse(VLLM);
        assert_eq!(f["vllm:num_requests_running"], 15.0);
        assert_eq!(f["vllm:num_requests_waiting"], 37.0, "a quoted brace does not end the labels");
        assert_eq!(f["vllm:e2e_request_latency_seconds_bucket"], 4.0);
        assert!(!f.contains_key("bad"));
    }

    #[test]
    fn each_server_maps_to_the_same_series_and_the_summary_is_over_the_run() {
        let mut m = ServerMetrics { url: "x".into(), period_s: 1.0, ..ServerMetrics::default() };
        m.push(0.5, VLLM);
        let later = VLLM
            .replace("} 37.0", "} 2.0")
            .replace(
                "preemptions_total{engine=\"0\",model_name=\"Qwen/Qwen3-8B\"} 5.0",
                "preemptions_total{engine=\"0\"} 9",
            )
            .replace("hits_total{engine=\"0\"} 300", "hits_total{engine=\"0\"} 700")
            .replace("queries_total{engine=\"0\"} 1000", "queries_total{engine=\"0\"} 2000");
        m.push(1.5, &later);
        m.push(2.5, "<html>not metrics</html>");
        let s = m.summary();
        // By hand: peaks 15 running and 37 waiting; 4 preemptions; (700 − 300) / (2000 − 1000).
        assert_eq!((s.samples, s.max_running, s.max_waiting), (2, Some(15.0), Some(37.0)));
        assert_eq!((s.max_kv_cache_usage, s.preemptions), (Some(0.42), Some(4.0)));
        assert_eq!(s.prefix_cache_hit_rate, Some(0.4));
        assert_eq!(s.waiting_source.as_deref(), Some("vllm:num_requests_waiting"));
        assert_eq!((m.failed_scrapes, m.first_error.is_some()), (1, true));

        let llama = "llamacpp:requests_processing 2\nllamacpp:requests_deferred 1\n\
                     llamacpp:prompt_tokens_total 30\nllamacpp:prompt_tokens_cached_total 10\n";
        let (sample, sources) = sample(0.0, &families(llama));
        assert_eq!((sample.running, sample.waiting, sample.kv_cache_usage), (Some(2.0), Some(1.0), None));
        assert_eq!((sample.prefix_cache_hits_total, sample.prefix_cache_queries_total), (Some(10.0), Some(40.0)));
        assert!(sources.iter().any(|(s, n)| *s == "waiting" && n == "llamacpp:requests_deferred"));
    }

    #[test]
    fn the_default_url_is_at_the_origin_root() {
        assert_eq!(default_url("http://h:8000/v1"), "http://h:8000/metrics");
        assert_eq!(default_url("http://h:8000/v1/"), "http://h:8000/metrics");
        assert_eq!(default_url("https://h/api"), "https://h/api/metrics");
    }

    const DCGM: &str = r#"# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).
# TYPE DCGM_FI_DEV_POWER_USAGE gauge
DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-a",modelName="NVIDIA H200",Hostname="h"} 312.5
DCGM_FI_DEV_POWER_USAGE{gpu="1",UUID="GPU-b",modelName="NVIDIA H200",Hostname="h"} 187.5
# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu="0",UUID="GPU-a"} 1000000
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu="1",UUID="GPU-b"} 2500000
DCGM_FI_DEV_GPU_TEMP{gpu="0"} 40
"#;

    #[test]
    fn a_dcgm_exporter_sums_its_gpus_and_a_missing_series_is_none() {
        let (s, sources) = sample(1.0, &families(DCGM));
        // By hand: 312.5 + 187.5 W; 1,000,000 + 2,500,000 mJ; two label sets each.
        assert_eq!((s.gpu_power_w, s.gpu_energy_mj, s.gpus), (Some(500.0), Some(3_500_000.0), Some(2)));
        assert_eq!((s.running, s.waiting), (None, None), "an exporter is not a server");
        assert!(sources.iter().any(|(series, name)| *series == "gpu_energy" && name == DCGM_ENERGY));

        let gauge_only: String = DCGM.lines().filter(|l| !l.contains("ENERGY")).map(|l| format!("{l}\n")).collect();
        let (s, _) = sample(1.0, &families(&gauge_only));
        assert_eq!((s.gpu_power_w, s.gpu_energy_mj, s.gpus), (Some(500.0), None, Some(2)));

        let (s, sources) = sample(1.0, &families("DCGM_FI_DEV_GPU_TEMP{gpu=\"0\"} 40\n"));
        assert_eq!((s.gpu_power_w, s.gpu_energy_mj, s.gpus), (None, None, None));
        assert!(sources.is_empty());
        let mut m = ServerMetrics::default();
        m.push(0.0, "DCGM_FI_DEV_GPU_TEMP 40\n");
        assert_eq!((m.samples.len(), m.failed_scrapes), (0, 1), "an answer without a known series is a failed scrape");
    }
}
