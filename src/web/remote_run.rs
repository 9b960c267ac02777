//! A benchmark run against a remote server, wired as the CLI's `bench --endpoint`: one request
//! alone for the baseline, then the workload per rate through [`crate::remote::browser`]; the
//! results go to the same report, charts and history as the engine's.

use super::charts::ChartData;
use super::settings::RunConfig;
use super::state::{AppState, RunProgress};
use crate::bench::{self, BenchResult, PlannedRequest, WorkloadSpec};
use crate::model::Tokenizer;
use crate::remote::browser::{Client, RunOptions};
use crate::remote::{self, Api, Endpoint, Prompt};
use crate::{Error, Result};
use leptos::prelude::*;
use std::rc::Rc;

/// Per request, from `fetch()` to the end of its stream.
const TIMEOUT_S: f64 = 300.0;

/// Starts a run (or a sweep) against `endpoint`.
pub fn start(state: AppState, config: RunConfig, endpoint: Endpoint) {
    let tokenizer = state.tokenizer.get_value().or_else(|| state.default_tokenizer.get_value());
    super::run::begin(state, &config);
    wasm_bindgen_futures::spawn_local(async move {
        let label = format!("{} @ {}", endpoint.model, endpoint.base_url);
        let client = Client::new(endpoint);
        let outcome = benchmark(state, &config, &client, tokenizer.as_deref()).await;
        super::run::finish(state, &config, &label, None, outcome);
    });
}

async fn benchmark(
    state: AppState,
    config: &RunConfig,
    client: &Client,
    tokenizer: Option<&Tokenizer>,
) -> Result<Vec<(f64, BenchResult)>> {
    let spec = &config.spec;
    let endpoint = client.endpoint();
    // Text prompts through the page's tokenizer (the server re-tokenizes them); chat needs text.
    let text = match endpoint.api {
        Api::Chat => Some(tokenizer.ok_or_else(|| Error::Invalid("chat sends text: no tokenizer is loaded".into()))?),
        Api::Completions => tokenizer.filter(|_| !config.random_prompts),
    };
    let vocab = bench::prompts::FIRST_SPECIAL_TOKEN;
    let prompt = |p: &PlannedRequest| -> Result<Prompt> {
        match text {
            Some(tok) => Ok(Prompt::Text(tok.decode(&bench::text_prompt(p.id, p.prompt_len, &|s| tok.encode(s))?)?)),
            None => Ok(Prompt::Ids(bench::random_prompt(spec.seed, p.id, p.prompt_len, vocab))),
        }
    };
    let cancel = state.cancel.get_value();
    let options = RunOptions { ignore_eos: true, timeout_s: TIMEOUT_S, closed_loop: None };

    // 1. One request alone: the latencies the loaded runs are judged against.
    let alone = PlannedRequest {
        id: u64::MAX,
        arrival_s: Some(0.0),
        prompt_len: spec.input_len.max,
        output_len: spec.output_len.max.max(2),
    };
    let records = client.run(&remote::requests(&[alone], &prompt)?, &options, Rc::new(|_, _| {}), cancel.clone()).await;
    let first = records.first().ok_or_else(|| Error::Invalid("cancelled".into()))?;
    if let Some(e) = &first.error {
        return Err(Error::Invalid(format!("the first request (the baseline, one request alone) failed: {e}")));
    }
    let ms = |s: Option<f64>| s.map_or(f64::NAN, |s| s * 1000.0);
    let baseline = bench::Baseline { ttft_ms: ms(first.ttft_s()), tpot_ms: ms(first.tpot_s()) };

    let mut target = endpoint.describe();
    target["prompts"] = if text.is_some() { "text" } else { "token ids" }.into();
    target["ignore_eos"] = true.into();
    target["timeout_s"] = TIMEOUT_S.into();
    target["client"] = "browser".into();
    let mut results = Vec::new();
    for &rate in &config.rates {
        let spec = WorkloadSpec { rate, ..spec.clone() };
        let requests = remote::requests(&bench::plan(&spec)?, &prompt)?;
        state.progress.set(Some(RunProgress::Requests { finished: 0, total: requests.len() }));
        state.charts.set(ChartData::default());
        let options = RunOptions { closed_loop: remote::closed_loop_limit(&spec), ..options.clone() };
        let on_progress = Rc::new(move |finished, total| {
            state.progress.set(Some(RunProgress::Requests { finished, total }));
        });
        let records = client.run(&requests, &options, on_progress, cancel.clone()).await;

        let mut metrics = bench::summarize(&records, &[], config.slo.as_ref(), super::charts::BUCKET_S);
        metrics.gpu_busy_fraction = f64::NAN; // not measured on a server
        let mut diagnosis = bench::diagnose_in(&metrics, &baseline, state.lang.get_untracked());
        diagnosis.evidence.retain(|line| !line.contains("NaN"));
        let config_json = serde_json::json!({
            "target": target,
            "workload": spec,
            "slo": config.slo_text,
            "timer_resolution_ms": state.timer_resolution_ms.get_untracked(),
        });
        let result = BenchResult {
            config: config_json,
            metrics,
            diagnosis: Some(diagnosis),
            baseline: Some(baseline.clone()),
            requests: records,
            steps: Vec::new(),
        };
        state.sweep.update(|s| {
            if let Some(s) = s {
                s.push(rate, &result);
            }
        });
        results.push((rate, result));
        if cancel.get() {
            break;
        }
    }
    Ok(results)
}
