//! The native client: reqwest on a tokio runtime of its own, so the synchronous CLI can call it.
//! Open-loop requests are released at their planned arrival times whatever is in flight;
//! closed loops keep N in flight. Every request ends within its timeout, and ends as a record:
//! failures are data, the run goes on.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, Semaphore};

use std::cell::Cell;
use std::rc::Rc;

use crate::bench::session::Listener;
use crate::bench::{PlannedRequest, RequestRecord, RunConfig, StepSample, Target, WorkloadSpec};
use crate::error::{Error, Result};
use crate::remote::openai::{http_error_text, parse_models, redact, request_body, snippet, RequestError};
use crate::remote::{report, Endpoint, RemoteRequest, RemoteSetup, StreamRecorder};

pub use crate::remote::RunOptions;

pub struct Client {
    endpoint: Endpoint,
    http: reqwest::Client,
    runtime: tokio::runtime::Runtime,
}

impl Client {
    pub fn new(endpoint: Endpoint) -> Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| Error::Invalid(format!("cannot start the HTTP runtime: {e}")))?;
        // No proxy: a benchmark measures the server, not a proxy in between. One connection per
        // request: a kept-alive connection the server is closing (llama-server closes after 100
        // requests or 5 s idle) fails a request that never reached it, which is not the server's
        // failure; a local connect costs well under a millisecond of TTFT.
        let http = reqwest::Client::builder()
            .no_proxy()
            .pool_max_idle_per_host(0)
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| Error::Invalid(format!("cannot build the HTTP client: {e}")))?;
        Ok(Client { endpoint, http, runtime })
    }

    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// The `model` every request names (for instance once `GET /v1/models` has said).
    pub fn set_model(&mut self, model: String) {
        self.endpoint.model = model;
    }

    /// `GET /v1/models`: the ids the server serves.
    pub fn models(&self, timeout_s: f64) -> Result<Vec<String>> {
        let url = self.endpoint.base_url.url("models");
        let failed = |why: String| Error::Invalid(format!("GET {url}: {why}"));
        let key = self.endpoint.api_key.as_ref();
        self.runtime.block_on(async {
            let mut request = self.http.get(&url).timeout(duration(timeout_s));
            if let Some(key) = key {
                request = request.bearer_auth(key.expose());
            }
            let response = request.send().await.map_err(|e| failed(redact(&describe(&e), key)))?;
            let status = response.status();
            let body = response.text().await.map_err(|e| failed(redact(&describe(&e), key)))?;
            if !status.is_success() {
                return Err(failed(format!("HTTP {}: {}", status.as_u16(), redact(&http_error_text(&body), key))));
            }
            parse_models(&body).map_err(|e| failed(redact(&e.to_string(), key)))
        })
    }

    /// Sends every request and returns their records, in request order. `on_progress(finished,
    /// total)` runs on the calling thread after each request ends.
    pub fn run(
        &self,
        requests: &[RemoteRequest],
        options: &RunOptions,
        on_progress: &mut dyn FnMut(usize, usize),
    ) -> Vec<RequestRecord> {
        self.runtime.block_on(self.run_async(requests, options, on_progress))
    }

    async fn run_async(
        &self,
        requests: &[RemoteRequest],
        options: &RunOptions,
        on_progress: &mut dyn FnMut(usize, usize),
    ) -> Vec<RequestRecord> {
        let t0 = Instant::now();
        let (done_tx, mut done_rx) = mpsc::unbounded_channel::<(usize, RequestRecord)>();
        let in_flight = options.closed_loop.map(|n| Arc::new(Semaphore::new(n.max(1))));
        let mut records: Vec<Option<RequestRecord>> = vec![None; requests.len()];
        let mut finished = 0;
        for (index, request) in requests.iter().enumerate() {
            // A closed loop waits here for a free slot, recording what ends meanwhile.
            let permit = match &in_flight {
                Some(slots) => loop {
                    tokio::select! {
                        permit = slots.clone().acquire_owned() => break Some(permit.expect("never closed")),
                        Some((i, record)) = done_rx.recv() => {
                            records[i] = Some(record);
                            finished += 1;
                            on_progress(finished, requests.len());
                        }
                    }
                },
                None => None,
            };
            let arrival_s = match (permit.is_some(), request.arrival_s) {
                (false, Some(planned)) => planned,
                _ => t0.elapsed().as_secs_f64(),
            };
            let task = Send {
                http: self.http.clone(),
                endpoint: self.endpoint.clone(),
                request: request.clone(),
                arrival_s,
                ignore_eos: options.ignore_eos,
                timeout_s: options.timeout_s,
                t0,
            };
            let done_tx = done_tx.clone();
            tokio::spawn(async move {
                tokio::time::sleep_until((t0 + duration(task.arrival_s)).into()).await;
                let record = task.send().await;
                drop(permit);
                let _ = done_tx.send((index, record));
            });
        }
        drop(done_tx);
        while let Some((i, record)) = done_rx.recv().await {
            records[i] = Some(record);
            finished += 1;
            on_progress(finished, requests.len());
        }
        records.into_iter().map(|r| r.expect("every task sends its record")).collect()
    }
}

/// One request, owned by its task.
struct Send {
    http: reqwest::Client,
    endpoint: Endpoint,
    request: RemoteRequest,
    arrival_s: f64,
    ignore_eos: bool,
    timeout_s: f64,
    t0: Instant,
}

impl Send {
    async fn send(self) -> RequestRecord {
        let r = &self.request;
        let exact = self.ignore_eos.then_some(r.max_tokens);
        let mut recorder = StreamRecorder::new(r.id, self.arrival_s, r.prompt_len, exact);
        let endpoint = &self.endpoint;
        let outcome = match request_body(endpoint.api, &endpoint.model, &r.prompt, r.max_tokens, self.ignore_eos) {
            Ok(body) => {
                recorder.sent(self.t0.elapsed().as_secs_f64());
                let stream = self.stream(&body, &mut recorder);
                tokio::time::timeout(duration(self.timeout_s), stream)
                    .await
                    .unwrap_or(Err(RequestError::Timeout(self.timeout_s)))
            }
            Err(e) => Err(RequestError::Request(e.to_string())),
        };
        let key = self.endpoint.api_key.as_ref();
        let mut record = recorder.end(outcome);
        record.error = record.error.map(|e| redact(&e, key));
        record
    }

    async fn stream(&self, body: &serde_json::Value, recorder: &mut StreamRecorder) -> Result<(), RequestError> {
        let url = self.endpoint.base_url.url(self.endpoint.api.path());
        let mut request = self
            .http
            .post(&url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .body(body.to_string());
        if let Some(key) = &self.endpoint.api_key {
            request = request.bearer_auth(key.expose());
        }
        let mut response = request.send().await.map_err(classify)?;
        let status = response.status();
        if !status.is_success() {
            let text = response.text().await.unwrap_or_default();
            let hint =
                if status.as_u16() == 404 { " (is the endpoint the API root, e.g. http://host:port/v1?)" } else { "" };
            return Err(RequestError::Http {
                status: status.as_u16(),
                body: format!("{}{hint}", http_error_text(&text)),
            });
        }
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        if !content_type.contains("text/event-stream") {
            let text = response.text().await.unwrap_or_default();
            let shown = if content_type.is_empty() { "no content type" } else { content_type.as_str() };
            return Err(RequestError::NotEventStream(format!("{shown}: {}", snippet(&text))));
        }
        // A read that fails once the answer has begun (reset, EOF inside a chunk) cut the stream.
        let cut = |e: reqwest::Error| RequestError::ClosedEarly(describe(&e));
        while let Some(bytes) = response.chunk().await.map_err(cut)? {
            recorder.receive(self.t0.elapsed().as_secs_f64(), &bytes)?;
            if recorder.is_done() {
                break;
            }
        }
        Ok(())
    }
}

fn duration(seconds: f64) -> Duration {
    Duration::try_from_secs_f64(seconds.max(0.0)).unwrap_or(Duration::MAX)
}

fn classify(e: reqwest::Error) -> RequestError {
    let text = describe(&e);
    if e.is_connect() {
        RequestError::Connect(text)
    } else if e.is_builder() {
        RequestError::Request(text)
    } else {
        RequestError::Network(text)
    }
}

/// The error and its causes on one line ("error sending request …: connection refused").
fn describe(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text = format!("{text}: {cause_text}");
        }
        source = cause.source();
    }
    text
}

/// A server as the benchmark's [`Target`]: the planned requests through this client (no
/// cancelling natively; the CLI runs to the end).
pub struct RemoteTarget<'a> {
    pub client: &'a Client,
    pub setup: RemoteSetup<'a>,
}

impl Target for RemoteTarget<'_> {
    fn run_config(&self) -> RunConfig {
        self.setup.run_config(self.client.endpoint())
    }

    fn reports_steps(&self) -> bool {
        false
    }

    async fn run(
        &mut self,
        plan: &[PlannedRequest],
        spec: &WorkloadSpec,
        ignore_eos: bool,
        listener: &Listener,
        _cancel: &Rc<Cell<bool>>,
    ) -> Result<(Vec<RequestRecord>, Vec<StepSample>)> {
        let (requests, options) = self.setup.prepare(plan, spec, ignore_eos)?;
        let records = self.client.run(&requests, &options, &mut |finished, total| report(listener, finished, total));
        Ok((records, Vec::new()))
    }
}
