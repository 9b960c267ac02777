//! A run as vLLM's `--save-result` JSON (`tokenmeter bench --save-result-format vllm`), so the
//! plotting scripts and dashboards teams keep for vLLM can read tokenmeter's runs.
//!
//! Field names and layout follow `vllm/benchmarks/serve.py` (vllm-project/vllm at commit
//! def9ce85ba1079af970a58ed3d42dd861ae35d58): `main_async`'s `result_json` (date, endpoint_type,
//! backend, label, model_id, tokenizer_id, num_prompts, request_rate, burstiness,
//! max_concurrency) merged with `benchmark()`'s result (duration, completed, failed, token
//! totals, throughputs, the per-request lists `input_lens`, `output_lens`, `ttfts`, `itls`,
//! `generated_texts`, `errors`, `max_output_tokens_per_s`, `max_concurrent_requests`) and
//! `mean_/median_/std_/p99_{ttft,tpot,itl,e2el}_ms` (vLLM writes p99 by default, `--metric-percentiles 99`).
//!
//! Where tokenmeter differs, and says so in the file's own `tokenmeter_notes`:
//! - `ttfts` and `e2el` are from when the request was sent (as vLLM measures them) for a server,
//!   from the planned arrival for the engine (which has no send);
//! - `generated_texts` are empty strings: tokenmeter does not keep output text;
//! - a statistic over no values is `null` (vLLM writes 0);
//! - `max_output_tokens_per_s` counts every streamed token (a chunk of several counts as
//!   several; vLLM counts one per chunk); `max_concurrent_requests` is, as in vLLM, the most
//!   successful requests active in any one-second bucket.
//! - requests a stopped or saturated run never sent are not in the lists.

use serde_json::{json, Map, Value};

use crate::bench::base::stats::stats;
use crate::bench::record::raw::RequestRecord;
use crate::bench::result::BenchResult;

/// The TTFT vLLM would report: from the send (server) or from arrival (engine).
fn ttft_s(r: &RequestRecord) -> Option<f64> {
    r.ttft_from_send_s().or_else(|| r.ttft_s())
}

/// When vLLM's clock starts for a request: the send, or the arrival for the engine.
fn start_s(r: &RequestRecord) -> f64 {
    r.sent_s.unwrap_or(r.arrival_s)
}

/// One rate's result in vLLM's layout; `date` as vLLM writes it (`%Y%m%d-%H%M%S`).
pub fn result_json(result: &BenchResult, date: &str) -> Value {
    let config = &result.config;
    let m = &result.metrics;
    let server = config.is_server();
    let api = config.target.get("api").and_then(Value::as_str).unwrap_or("completions");
    let backend = match (server, api) {
        (true, "chat") => "openai-chat",
        (true, _) => "openai",
        (false, _) => "tokenmeter-engine",
    };
    let model_id = match server {
        true => config.target.get("model").cloned().unwrap_or(Value::Null),
        false => config.model.clone().map_or(Value::Null, Value::String),
    };
    let workload = config.workload.as_ref();
    let rate = workload.map(|w| w.rate).filter(|r| r.is_finite()).map_or(json!("inf"), |r| json!(r));
    let mut requests: Vec<&RequestRecord> = result.requests.iter().collect();
    requests.sort_by_key(|r| r.id);
    let ok: Vec<&RequestRecord> = requests.iter().copied().filter(|r| r.succeeded()).collect();

    let mut out = Map::new();
    out.insert("date".into(), date.into());
    out.insert("endpoint_type".into(), backend.into());
    out.insert("backend".into(), backend.into());
    out.insert("label".into(), Value::Null);
    out.insert("model_id".into(), model_id.clone());
    out.insert(
        "tokenizer_id".into(),
        workload.and_then(|w| w.dataset.as_ref()).map_or(model_id, |d| json!(d.lengths_measured_by)),
    );
    out.insert("num_prompts".into(), json!(workload.map_or(requests.len(), |w| w.num_requests)));
    out.insert("request_rate".into(), rate);
    out.insert("burstiness".into(), json!(workload.map_or(1.0, |w| w.burstiness)));
    out.insert("max_concurrency".into(), json!(workload.and_then(|w| w.max_concurrency)));
    out.insert("duration".into(), json!(m.duration_s));
    out.insert("completed".into(), json!(m.completed));
    out.insert("failed".into(), json!(m.failed));
    out.insert("total_input_tokens".into(), json!(m.total_input_tokens));
    out.insert("total_output_tokens".into(), json!(m.total_output_tokens));
    out.insert("request_throughput".into(), json!(m.request_throughput));
    out.insert("request_goodput".into(), json!(m.goodput));
    out.insert("output_throughput".into(), json!(m.output_throughput));
    out.insert("total_token_throughput".into(), json!(m.total_token_throughput));
    out.insert("input_lens".into(), json!(requests.iter().map(|r| r.prompt_len).collect::<Vec<_>>()));
    let output_lens: Vec<usize> = requests.iter().map(|r| if r.succeeded() { r.output_len } else { 0 }).collect();
    out.insert("output_lens".into(), json!(output_lens));
    out.insert("ttfts".into(), json!(requests.iter().map(|r| ttft_s(r).unwrap_or(0.0)).collect::<Vec<_>>()));
    out.insert("itls".into(), json!(requests.iter().map(|r| r.itl_s().collect::<Vec<_>>()).collect::<Vec<_>>()));
    out.insert("generated_texts".into(), json!(requests.iter().map(|_| "").collect::<Vec<_>>()));
    let errors: Vec<String> = requests
        .iter()
        .map(|r| match r.error_kind() {
            None => String::new(),
            Some(_) => r.error.clone().unwrap_or_else(|| "unfinished".into()),
        })
        .collect();
    out.insert("errors".into(), json!(errors));
    let (peak_tokens, peak_concurrency) = peaks(&ok);
    out.insert("max_output_tokens_per_s".into(), json!(peak_tokens));
    out.insert("max_concurrent_requests".into(), json!(peak_concurrency));

    let ttfts: Vec<f64> = ok.iter().filter_map(|r| ttft_s(r)).collect();
    let tpots: Vec<f64> = ok.iter().filter_map(|r| r.tpot_s()).collect();
    let itls: Vec<f64> = ok.iter().flat_map(|r| r.itl_s()).collect();
    let e2els: Vec<f64> = ok.iter().filter_map(|r| Some(r.finish_s? - start_s(r))).collect();
    for (name, values) in [("ttft", &ttfts), ("tpot", &tpots), ("itl", &itls), ("e2el", &e2els)] {
        let s = stats(values);
        let ms = |x: f64| if x.is_finite() { json!(x * 1000.0) } else { Value::Null };
        out.insert(format!("mean_{name}_ms"), ms(s.mean));
        out.insert(format!("median_{name}_ms"), ms(s.p50));
        out.insert(format!("std_{name}_ms"), ms(s.std));
        out.insert(format!("p99_{name}_ms"), ms(s.p99));
    }
    out.insert(
        "tokenmeter_notes".into(),
        json!({
            "ttft_measured_from": if server { "send" } else { "arrival (the engine has no send)" },
            "generated_texts": "not kept by tokenmeter (empty strings)",
            "empty_statistics": "null (vLLM writes 0)",
            "saturation": result.saturation.as_ref().map(|s| s.reason.clone()),
            "tool_version": config.tool_version,
        }),
    );
    Value::Object(out)
}

/// vLLM's peaks over one-second buckets from the earliest start among successful requests:
/// most output tokens in a bucket, most requests active in a bucket.
fn peaks(ok: &[&RequestRecord]) -> (f64, usize) {
    let Some(first) = ok.iter().map(|r| start_s(r)).reduce(f64::min) else { return (0.0, 0) };
    let last = ok.iter().filter_map(|r| r.finish_s).fold(first, f64::max);
    let buckets = (last - first).ceil() as usize + 1;
    let (mut tokens, mut active) = (vec![0.0; buckets], vec![0usize; buckets]);
    for r in ok {
        for (t, n) in r.timed_tokens() {
            if let Some(b) = tokens.get_mut((t - first).max(0.0) as usize) {
                *b += n as f64;
            }
        }
        let from = (start_s(r) - first) as usize;
        let to = ((r.finish_s.unwrap_or(first) - first) as usize).min(buckets - 1);
        for slot in active.iter_mut().take(to + 1).skip(from) {
            *slot += 1;
        }
    }
    (tokens.iter().copied().fold(0.0, f64::max), active.into_iter().max().unwrap_or(0))
}

/// `YYYYmmdd-HHMMSS` (UTC) of a Unix time in seconds, as vLLM's `date` field (vLLM uses local time).
pub fn date_of_unix(seconds: u64) -> String {
    let days = (seconds / 86_400) as i64;
    let (h, mi, s) = ((seconds % 86_400) / 3600, (seconds % 3600) / 60, seconds % 60);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}{m:02}{d:02}-{h:02}{mi:02}{s:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_vllms_format() {
        assert_eq!(date_of_unix(0), "19700101-000000");
        assert_eq!(date_of_unix(1_798_712_125), "20261231-101525");
        assert_eq!(date_of_unix(951_782_400), "20000229-000000");
    }

    #[test]
    fn per_request_lists_and_statistics() {
        let ok = |id: u64, sent: f64, times: Vec<f64>| RequestRecord {
            id,
            arrival_s: sent - 0.01,
            sent_s: Some(sent),
            scheduled_s: Some(sent),
            first_token_s: times.first().copied(),
            finish_s: times.last().copied(),
            output_len: times.len(),
            token_times_s: times,
            prompt_len: 7,
            ..RequestRecord::default()
        };
        let failed = RequestRecord {
            id: 1,
            arrival_s: 0.0,
            sent_s: Some(0.0),
            prompt_len: 5,
            error: Some("http 500: boom".into()),
            ..RequestRecord::default()
        };
        let requests = vec![ok(2, 0.5, vec![0.6, 0.7, 0.9]), failed, ok(0, 0.0, vec![0.2, 0.3])];
        let metrics = crate::bench::measure::metrics::summarize(&requests, &[], None, 0.25);
        let config = crate::bench::record::run_config::RunConfig {
            target: json!({"kind": "openai", "model": "m", "api": "chat"}),
            ..Default::default()
        };
        let result = BenchResult {
            decided: None,
            config,
            metrics,
            diagnosis: None,
            baseline: None,
            requests,
            steps: vec![],
            saturation: None,
            server_metrics: None,
            gpu_metrics: None,
            validity: None,
        };
        let v = result_json(&result, "20261201-070000");
        assert_eq!(v["backend"], "openai-chat");
        assert_eq!(v["model_id"], "m");
        assert_eq!(v["input_lens"], json!([7, 5, 7]), "in request order");
        assert_eq!(v["output_lens"], json!([2, 0, 3]));
        assert_eq!(v["errors"], json!(["", "http 500: boom", ""]));
        let ttfts: Vec<f64> = serde_json::from_value(v["ttfts"].clone()).unwrap();
        assert!((ttfts[0] - 0.2).abs() < 1e-12 && ttfts[1] == 0.0 && (ttfts[2] - 0.1).abs() < 1e-12, "{ttfts:?}");
        assert_eq!(v["itls"][1], json!([]));
        assert!((v["mean_ttft_ms"].as_f64().unwrap() - 150.0).abs() < 1e-9);
        assert!((v["median_ttft_ms"].as_f64().unwrap() - 150.0).abs() < 1e-9);
        assert!((v["std_ttft_ms"].as_f64().unwrap() - 50.0).abs() < 1e-9);
        // TPOTs 100 ms and 150 ms; E2ELs from the send: 300 ms and 400 ms.
        assert!((v["mean_tpot_ms"].as_f64().unwrap() - 125.0).abs() < 1e-9);
        assert!((v["p99_e2el_ms"].as_f64().unwrap() - 399.0).abs() < 1e-9);
        assert_eq!(v["max_concurrent_requests"], 2);
        assert_eq!(v["max_output_tokens_per_s"], 5.0);
        assert_eq!(v["request_rate"], "inf");
        assert_eq!(v["tokenmeter_notes"]["ttft_measured_from"], "send");
    }
}
