//! A benchmark run against a remote server, wired as the CLI's `bench --endpoint`: one request
//! alone for the baseline, then the workload per rate through [`crate::remote::browser`]; the
//! results go to the same report, charts and history as the engine's.

use super::settings::RunForm;
use super::state::AppState;
use crate::bench::{self, BenchResult, PlannedRequest, PromptSource};
use crate::model::Tokenizer;
use crate::remote::browser::{Client, RemoteTarget};
use crate::remote::{Api, Endpoint, RemoteSetup};
use crate::{Error, Result};
use leptos::prelude::*;
use std::rc::Rc;

/// Per request, from `fetch()` to the end of its stream.
const TIMEOUT_S: f64 = 300.0;

/// Starts a run (or a sweep) against `endpoint`.
pub fn start(state: AppState, config: RunForm, endpoint: Endpoint) {
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
    config: &RunForm,
    client: &Client,
    tokenizer: Option<&Tokenizer>,
) -> Result<Vec<(f64, BenchResult)>> {
    // Text prompts through the page's tokenizer (the server re-tokenizes them); chat needs text.
    let api = client.endpoint().api;
    if api == Api::Chat && tokenizer.is_none() {
        return Err(Error::Invalid("chat sends text: no tokenizer is loaded".into()));
    }
    let random_ids = config.random_prompts && api == Api::Completions;
    let prompts = PromptSource::for_server(&config.spec, tokenizer, random_ids, None);
    let prompt = |p: &PlannedRequest| prompts.prompt(p);
    let setup = RemoteSetup { prompt: &prompt, timeout_s: TIMEOUT_S, prompts: prompts.kind(), client: "browser" };
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
