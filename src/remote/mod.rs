//! The same benchmark against any OpenAI-compatible server (vLLM, SGLang, llama.cpp's
//! llama-server, …): the workload generator plans the requests, each one is streamed, and its
//! record is built from the token stream's own timestamps, so the summary, report, JSON and CSV
//! are the engine's.
//!
//! Everything but the HTTP client and its timers is target-independent (no tokio, no reqwest), so
//! the browser drives the same code with `fetch` and a `ReadableStream`:
//! - [`sse`]: incremental server-sent-events parsing.
//! - [`openai`]: base URL, API key handling, request bodies, chunks, model lists, error kinds.
//! - [`logprobs`]: the quality pass's greedy request with top-k log-probabilities, and its answer.
//! - [`bounds`]: what a server's answer may cost (error bodies, tokens per request, redirects).
//! - [`conversation`]: a multi-turn conversation's later turns, made from the replies.
//! - [`stream`]: one request's [`RequestRecord`](crate::bench::RequestRecord) from the bytes and
//!   their arrival times.
//! - [`dispatch`]: the arrival loop both clients run (one function releases every request, by the
//!   release rules the engine's driver follows too: [`crate::bench::run::release`]), with the
//!   saturation stop, interruption, the `/metrics` scrapes, and one record per request
//!   ([`RequestRecord::unsent`](crate::bench::RequestRecord::unsent) for those never sent). A
//!   client gives it a [`dispatch::Runtime`]: a clock, timers, one request's stream and one
//!   scrape.
//! - [`simulated`]: a server and its runtime on a virtual clock, for the loop's tests.
//! - `native` (not wasm): that runtime with reqwest on tokio; each request streams in a task of
//!   its own, with a per-request timeout.
//! - `browser` (wasm only): the same with `fetch`, a `ReadableStream` reader and an
//!   `AbortController`, plus the HTTP/1.1 connection-limit check the page warns with.

pub mod bounds;
pub mod conversation;
pub mod dispatch;
pub mod logprobs;
pub mod openai;
pub mod simulated;
pub mod sse;
pub mod stream;

#[cfg(not(target_arch = "wasm32"))]
pub mod native;
#[cfg(not(target_arch = "wasm32"))]
pub mod tls;

#[cfg(target_arch = "wasm32")]
pub mod browser;

use serde_json::{json, Value};

use crate::bench::measure::decided::DecideRule;
use crate::bench::run::driver::Progress;
use crate::bench::run::release::Pace;
use crate::bench::run::target::{Listener, SessionEvent};
use crate::bench::traffic::workload::{conversation_turns, Turn};
use crate::bench::{PlannedRequest, RunConfig, WorkloadSpec};
use crate::error::{Error, Result};
use conversation::RemoteTurn;
pub use openai::{Api, ApiKey, BaseUrl, Prompt, RequestError};
pub use stream::StreamRecorder;

/// Where requests go. The key lives here only: [`Endpoint::describe`] says whether there is one.
#[derive(Clone, Debug)]
pub struct Endpoint {
    pub base_url: BaseUrl,
    /// The `model` field of every request (`GET /v1/models` lists what the server serves).
    pub model: String,
    pub api: Api,
    pub api_key: Option<ApiKey>,
    /// Chat only: ask the server's chat template to turn a thinking model's thinking on or off
    /// (`"chat_template_kwargs": {"enable_thinking": …}`, which vLLM, SGLang and llama-server
    /// read); `None` sends nothing and leaves the server's default.
    pub thinking: Option<bool>,
}

impl Endpoint {
    /// What a run against it is named after: "qwen3 @ http://host:8000/v1" (the page's history).
    pub fn label(&self) -> String {
        format!("{} @ {}", self.model, self.base_url)
    }

    /// For `run_config.target` of the results JSON: everything but the key.
    pub fn describe(&self) -> Value {
        json!({
            "kind": "openai",
            "base_url": self.base_url,
            "model": self.model,
            "api": self.api,
            "api_key": if self.api_key.is_some() { "set (not recorded)" } else { "none" },
            "thinking": self.thinking,
        })
    }
}

/// What both clients' [`Target`](crate::bench::Target)s share: how prompts are made, the
/// per-request timeout, and the run record's target.
pub struct RemoteSetup<'a> {
    pub prompt: &'a dyn Fn(&PlannedRequest) -> Result<Prompt>,
    pub timeout_s: f64,
    /// What the prompts are ([`crate::bench::PromptSource::kind`]), for the record.
    pub prompts: &'static str,
    /// "native" (the CLI) or "browser" (the page), for the record.
    pub client: &'static str,
    /// GPUs behind the endpoint, when the user says (`--gpus`), for the record.
    pub gpus: Option<usize>,
    /// The server's Prometheus `/metrics` to scrape during each run (`--server-metrics`).
    pub server_metrics: Option<String>,
    /// A DCGM exporter's `/metrics` to scrape during each run, for its GPUs' power and energy
    /// (`--gpu-metrics-url`; native only: an exporter allows no page's origin).
    pub gpu_metrics: Option<String>,
    /// Stop each run once its SLO attainment is decided (a `--rate max` trial:
    /// [`crate::bench::Target::decide_early`]); `None` for any other run.
    pub decide: Option<DecideRule>,
}

/// How requests are sent, by either client.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// Send `"ignore_eos": true`, so outputs have the planned lengths.
    pub ignore_eos: bool,
    /// Per request, from sending (`fetch()` in the page) to the end of the stream.
    pub timeout_s: f64,
    /// Requests in flight at most (closed loops); `None` releases each at its arrival time.
    pub closed_loop: Option<usize>,
    /// Open loops: requests in flight at most; one due while all are busy waits for a slot
    /// before it is sent (both clients; in the page, an HTTP/1.1 origin's 6 connections are a
    /// limit of their own, after `fetch()`).
    pub max_concurrency: Option<usize>,
    /// Open loops: stop sending once requests outstanding keep growing
    /// ([`crate::bench::measure::saturation`]; both clients).
    pub saturation_stop: bool,
    /// Scrape this Prometheus `/metrics` URL while the run is in flight
    /// ([`crate::bench::measure::server_metrics`]).
    pub server_metrics: Option<String>,
    /// Scrape this DCGM exporter's `/metrics` too, by the same loop ([`crate::bench::measure::energy`]).
    pub gpu_metrics: Option<String>,
    /// Stop once the run's SLO attainment is decided ([`crate::bench::measure::decided`]).
    pub decide: Option<DecideRule>,
}

/// How often the server's `/metrics` is scraped during a run, and the bounds of one scrape.
pub const SCRAPE_PERIOD_S: f64 = 0.5;
pub const SCRAPE_TIMEOUT_S: f64 = 2.0;
pub const SCRAPE_MAX_BYTES: usize = 4 << 20;

impl RemoteSetup<'_> {
    /// The plan's requests with their prompts, and how to send them.
    pub fn prepare(
        &self,
        plan: &[PlannedRequest],
        spec: &WorkloadSpec,
        ignore_eos: bool,
    ) -> Result<(Vec<RemoteRequest>, RunOptions)> {
        let pace = Pace::of(spec);
        let options = RunOptions {
            ignore_eos,
            timeout_s: self.timeout_s,
            closed_loop: pace.closed_loop,
            max_concurrency: pace.max_concurrency,
            saturation_stop: pace.saturation_stop,
            server_metrics: self.server_metrics.clone(),
            gpu_metrics: self.gpu_metrics.clone(),
            decide: self.decide.clone(),
        };
        let mut requests = match conversation_turns(spec) {
            Some(turns) => turn_requests(plan, &turns, self.prompt)?,
            None => requests(plan, self.prompt)?,
        };
        for r in &mut requests {
            r.cancel_after_s = spec.cancel_after_s(r.id);
        }
        Ok((requests, options))
    }

    /// The target's part of the run record: the endpoint without its key, the client, the timeout.
    pub fn run_config(&self, endpoint: &Endpoint) -> RunConfig {
        let mut target = endpoint.describe();
        target["client"] = self.client.into();
        target["timeout_s"] = self.timeout_s.into();
        RunConfig { target, prompts: Some(self.prompts.to_string()), gpus: self.gpus, ..RunConfig::default() }
    }
}

/// A client's progress (requests ended so far) as the session's event: a server has no live
/// records to chart.
pub fn report(listener: &Listener, finished: usize, total: usize) {
    listener(SessionEvent::Progress(&Progress { records: &[], steps: &[], finished, total }));
}

/// One planned request, ready to send.
#[derive(Clone, Debug, PartialEq)]
pub struct RemoteRequest {
    pub id: u64,
    /// Seconds from the start; `None` when a closed loop releases it.
    pub arrival_s: Option<f64>,
    pub prompt: Prompt,
    /// Planned prompt tokens (token ids: exact; text: as the client's tokenizer counted them).
    pub prompt_len: usize,
    pub max_tokens: usize,
    /// Its place in a conversation; its `prompt` is then the turn's own new text, and a later
    /// turn's whole prompt is made when the turn before it ends ([`conversation::next_turn`]).
    pub turn: Option<RemoteTurn>,
    /// The workload aborts it this long after it is sent, closing its stream
    /// ([`WorkloadSpec::cancel_after_s`]); `None`: it runs to its end.
    pub cancel_after_s: Option<f64>,
}

/// The plan's requests with their prompts.
pub fn requests(
    plan: &[PlannedRequest],
    prompt: &dyn Fn(&PlannedRequest) -> Result<Prompt>,
) -> Result<Vec<RemoteRequest>> {
    plan.iter()
        .map(|p| {
            Ok(RemoteRequest {
                id: p.id,
                arrival_s: p.arrival_s,
                prompt: prompt(p)?,
                prompt_len: p.prompt_len,
                max_tokens: p.output_len,
                turn: None,
                cancel_after_s: None,
            })
        })
        .collect()
}

/// The plan's requests as the turns of conversations: each with its own new text as its prompt
/// (of the turn's new length) and its place in its conversation. Text only: a reply cannot
/// follow token ids.
pub fn turn_requests(
    plan: &[PlannedRequest],
    turns: &[Turn],
    prompt: &dyn Fn(&PlannedRequest) -> Result<Prompt>,
) -> Result<Vec<RemoteRequest>> {
    plan.iter()
        .zip(turns)
        .zip(RemoteTurn::all(turns))
        .map(|((p, t), turn)| {
            let own = prompt(&PlannedRequest { prompt_len: t.new_len, ..p.clone() })?;
            if let Prompt::Ids(_) = own {
                return Err(Error::Invalid(
                    "conversations against a server need text prompts (its replies come back as text), not token ids: \
                     give a tokenizer"
                        .into(),
                ));
            }
            Ok(RemoteRequest {
                id: p.id,
                arrival_s: p.arrival_s,
                prompt: own,
                prompt_len: t.new_len,
                max_tokens: p.output_len,
                turn: Some(turn),
                cancel_after_s: None,
            })
        })
        .collect()
}
