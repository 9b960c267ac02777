//! A benchmark run against a remote server, wired as the CLI's `bench --endpoint`: one request
//! alone for the baseline, then the workload per rate through [`crate::remote::browser`]; the
//! results go to the same report, charts and history as the engine's.

use super::settings::RunConfig;
use super::state::AppState;
use crate::bench::{self, BenchResult, PlannedRequest};
use crate::model::Tokenizer;
use crate::remote::browser::{Client, RemoteTarget};
use crate::remote::{Api, Endpoint, Prompt, RemoteSetup};
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
    // Text prompts through the page's tokenizer (the server re-tokenizes them); chat needs text.
    let text = match client.endpoint().api {
        Api::Chat => Some(tokenizer.ok_or_else(|| Error::Invalid("chat sends text: no tokenizer is loaded".into()))?),
        Api::Completions => tokenizer.filter(|_| !config.random_prompts),
    };
    let vocab = bench::prompts::FIRST_SPECIAL_TOKEN;
    let prompt = |p: &PlannedRequest| -> Result<Prompt> {
        if let Some(row) = super::run::dataset_prompt(spec, p) {
            return Ok(Prompt::Text(row.to_string()));
        }
        let ids = bench::with_shared_prefix(spec, p, vocab, &|len| match text {
            Some(tok) => bench::text_prompt(p.id, len, &|s| tok.encode(s)),
            None => Ok(bench::random_prompt(spec.seed, p.id, len, vocab)),
        })?;
        match text {
            Some(tok) => Ok(Prompt::Text(tok.decode(&ids)?)),
            None => Ok(Prompt::Ids(ids)),
        }
    };
    let setup = RemoteSetup {
        prompt: &prompt,
        timeout_s: TIMEOUT_S,
        prompts: if text.is_some() { "text" } else { "token ids" },
        client: "browser",
    };
    let mut target = PageRemote { inner: RemoteTarget { client, setup }, page: super::run::page_record(state) };
    let session = super::run::session_spec(config, state.lang.get_untracked());
    let cancel = state.cancel.get_value();
    let results = bench::session::run(&mut target, &session, &super::run::listener(state), &cancel).await?;
    Ok(config.rates.iter().copied().zip(results).collect())
}

/// The browser client's target with the page's own part of the record (timer resolution).
struct PageRemote<'a> {
    inner: RemoteTarget<'a>,
    page: bench::RunConfig,
}

impl bench::Target for PageRemote<'_> {
    fn run_config(&self) -> bench::RunConfig {
        let own = self.inner.run_config();
        bench::RunConfig { target: own.target, prompts: own.prompts, ..self.page.clone() }
    }

    fn reports_steps(&self) -> bool {
        self.inner.reports_steps()
    }

    async fn run(
        &mut self,
        plan: &[PlannedRequest],
        spec: &bench::WorkloadSpec,
        ignore_eos: bool,
        listener: &bench::session::Listener,
        cancel: &Rc<std::cell::Cell<bool>>,
    ) -> Result<(Vec<bench::RequestRecord>, Vec<bench::StepSample>)> {
        self.inner.run(plan, spec, ignore_eos, listener, cancel).await
    }

    fn take_saturation(&mut self) -> Option<bench::saturation::Saturation> {
        self.inner.take_saturation()
    }
}
