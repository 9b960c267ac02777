//! The native client: reqwest on a tokio runtime of its own, so the synchronous CLI can call it.
//! http and https (rustls with the ring provider; the system's roots plus any `--ca-cert`; HTTP/2
//! when the server picks it by ALPN, else HTTP/1.1); proxies from the environment
//! (`HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY`, `NO_PROXY`).
//! Requests are released by the arrival loop both clients share ([`crate::remote::dispatch`]),
//! run on this thread; each request streams in a tokio task of its own. Every request ends
//! within its timeout, and ends as a record: failures are data, the run goes on. What a server's answer may cost is bounded as in the
//! browser ([`crate::remote::bounds`]).

use std::cell::Cell;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::bench::measure::decided::{DecideRule, Decided};
use crate::bench::measure::energy::{EnergySource, GpuReadings};
use crate::bench::measure::saturation::Saturation;
use crate::bench::measure::server_metrics::ServerMetrics;
use crate::bench::run::release::Stop;
use crate::bench::run::target::Listener;
use crate::bench::verdict::quality::Generated;
use crate::bench::{CancelledBy, PlannedRequest, RequestRecord, RunConfig, StepSample, Target, WorkloadSpec};
use crate::error::{Error, Result};
use crate::remote::bounds::{self, CappedBody};
use crate::remote::dispatch::{self, Runtime};
use crate::remote::logprobs::{greedy_body, parse_greedy};
use crate::remote::openai::{http_error_text, parse_models, redact, request_body, snippet, Prompt, RequestError};
use crate::remote::{
    report, tls, Endpoint, RemoteRequest, RemoteSetup, StreamRecorder, SCRAPE_MAX_BYTES, SCRAPE_TIMEOUT_S,
};

pub use crate::remote::tls::Tls;
pub use crate::remote::RunOptions;

pub struct Client {
    endpoint: Endpoint,
    tls: Tls,
    http: reqwest::Client,
    runtime: tokio::runtime::Runtime,
    /// Set from elsewhere (the CLI's Ctrl-C) to stop a run: see [`Client::run_until`].
    interrupt: Arc<AtomicBool>,
    /// Why the last run ended early, if it did ([`RunOptions::saturation_stop`],
    /// [`RunOptions::decide`]).
    stop: std::sync::Mutex<Option<Stop>>,
    /// The last run's scrapes of the server's `/metrics` ([`RunOptions::server_metrics`]).
    server_metrics: std::sync::Mutex<Option<ServerMetrics>>,
    /// The last run's scrapes of a DCGM exporter ([`RunOptions::gpu_metrics`]).
    gpu_metrics: std::sync::Mutex<Option<ServerMetrics>>,
}

impl Client {
    /// A client for `endpoint` with the system's roots.
    pub fn new(endpoint: Endpoint) -> Result<Self> {
        Client::with_tls(endpoint, Tls::default())
    }

    /// A client for `endpoint` that checks https certificates as `tls` says. An unreadable
    /// `ca_cert`, or one without a PEM certificate, is an error here, before anything is sent.
    pub fn with_tls(endpoint: Endpoint, tls: Tls) -> Result<Self> {
        // rustls needs one crypto provider for the process; ring (no C build, no cmake). Another
        // already installed (by a caller) is kept.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| Error::Invalid(format!("cannot start the HTTP runtime: {e}")))?;
        // Proxies come from the environment (reqwest's default, kept on purpose: a benchmark that
        // must go through one should; `NO_PROXY` exempts a server), except for a loopback server,
        // which no proxy can reach on this machine's behalf. One connection per request: a kept-alive connection the server is closing (llama-server closes after 100
        // requests or 5 s idle) fails a request that never reached it, which is not the server's
        // failure; a local connect costs well under a millisecond of TTFT.
        // Redirects are followed within the endpoint's origin only: a response from another
        // server stops here and fails the request (`bounds::check_redirect`).
        let redirects = reqwest::redirect::Policy::custom(|attempt| {
            let from = attempt.previous().first().map(|u| u.as_str().to_string()).unwrap_or_default();
            if attempt.previous().len() > bounds::MAX_REDIRECTS {
                attempt.error(format!("more than {} redirects", bounds::MAX_REDIRECTS))
            } else if bounds::check_redirect(&from, attempt.url().as_str()).is_ok() {
                attempt.follow()
            } else {
                attempt.stop()
            }
        });
        let mut builder = reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .connect_timeout(Duration::from_secs(10))
            .redirect(redirects);
        let provider = rustls::crypto::CryptoProvider::get_default()
            .cloned()
            .unwrap_or_else(|| Arc::new(rustls::crypto::ring::default_provider()));
        if let Some(config) = tls.client_config(provider)? {
            builder = builder.tls_backend_preconfigured(config);
        } else if tls.insecure {
            builder = builder.tls_danger_accept_invalid_certs(true);
        }
        if is_loopback(&endpoint.base_url.to_string()) {
            builder = builder.no_proxy();
        }
        let http = builder.build().map_err(|e| Error::Invalid(format!("cannot build the HTTP client: {e}")))?;
        Ok(Client {
            endpoint,
            tls,
            http,
            runtime,
            interrupt: Arc::new(AtomicBool::new(false)),
            stop: std::sync::Mutex::new(None),
            server_metrics: std::sync::Mutex::new(None),
            gpu_metrics: std::sync::Mutex::new(None),
        })
    }

    /// `flag` stops this client's runs when set from any thread (the CLI's Ctrl-C): requests
    /// not yet sent are dropped, those in flight end as `cancelled`.
    pub fn interrupt_on(&mut self, flag: Arc<AtomicBool>) {
        self.interrupt = flag;
    }

    /// Whether the last run was ended early at saturation, and why; taken once.
    pub fn take_saturation(&self) -> Option<Saturation> {
        Stop::take_saturation(&mut *self.stop.lock().ok()?)
    }

    /// Whether the last run was ended once its SLO attainment was decided; taken once.
    pub fn take_decided(&self) -> Option<Decided> {
        Stop::take_decided(&mut *self.stop.lock().ok()?)
    }

    /// The last run's scrapes of the server's `/metrics`, if it asked for them; taken once.
    pub fn take_server_metrics(&self) -> Option<ServerMetrics> {
        self.server_metrics.lock().map(|mut s| s.take()).unwrap_or(None)
    }

    /// The last run's scrapes of a DCGM exporter, if it asked for them; taken once.
    pub fn take_gpu_metrics(&self) -> Option<ServerMetrics> {
        self.gpu_metrics.lock().map(|mut s| s.take()).unwrap_or(None)
    }

    /// The interrupt flag is set.
    pub fn interrupted(&self) -> bool {
        self.interrupt.load(Ordering::SeqCst)
    }

    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// How https certificates are checked; `None` for an http endpoint (nothing to check).
    pub fn tls(&self) -> Option<&Tls> {
        self.endpoint.base_url.as_str().starts_with("https://").then_some(&self.tls)
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
            let mut response = request.send().await.map_err(|e| failed(redact(&describe(&e), key)))?;
            if let Err(e) = answered_from(&url, &response) {
                return Err(failed(e.to_string()));
            }
            let status = response.status();
            let max = if status.is_success() { bounds::MAX_MODELS_BODY_BYTES } else { bounds::MAX_ERROR_BODY_BYTES };
            let body = read_capped(&mut response, max).await.map_err(|e| failed(redact(&describe(&e), key)))?;
            if !status.is_success() {
                return Err(failed(format!(
                    "HTTP {}: {}",
                    status.as_u16(),
                    redact(&http_error_text(&body.text()), key)
                )));
            }
            if body.is_cut() {
                return Err(failed(format!("the model list is longer than {} MiB", max >> 20)));
            }
            parse_models(&body.text()).map_err(|e| failed(redact(&e.to_string(), key)))
        })
    }

    /// One greedy answer to `prompt`, whole, with the top-`top_k` log-probabilities of every
    /// token ([`crate::remote::logprobs`]): the quality pass's request, never part of a timed run.
    pub fn greedy(
        &self,
        prompt: &Prompt,
        max_tokens: usize,
        top_k: usize,
        ignore_eos: bool,
        timeout_s: f64,
    ) -> Result<Generated> {
        let endpoint = &self.endpoint;
        let url = endpoint.base_url.url(endpoint.api.path());
        let failed = |why: String| Error::Invalid(format!("POST {url} (quality pass): {why}"));
        let key = endpoint.api_key.as_ref();
        let body =
            greedy_body(endpoint.api, &endpoint.model, prompt, max_tokens, ignore_eos, endpoint.thinking, top_k)?;
        let answer = self.runtime.block_on(async {
            let mut request = self
                .http
                .post(&url)
                .timeout(duration(timeout_s))
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body.to_string());
            if let Some(key) = key {
                request = request.bearer_auth(key.expose());
            }
            let mut response = request.send().await.map_err(|e| failed(redact(&describe(&e), key)))?;
            answered_from(&url, &response).map_err(|e| failed(e.to_string()))?;
            let status = response.status();
            let max = if status.is_success() { bounds::MAX_LOGPROBS_BODY_BYTES } else { bounds::MAX_ERROR_BODY_BYTES };
            let body = read_capped(&mut response, max).await.map_err(|e| failed(redact(&describe(&e), key)))?;
            if !status.is_success() {
                return Err(failed(format!(
                    "HTTP {}: {}",
                    status.as_u16(),
                    redact(&http_error_text(&body.text()), key)
                )));
            }
            if body.is_cut() {
                return Err(failed(format!("the answer is longer than {} MiB", max >> 20)));
            }
            Ok(body.text())
        })?;
        parse_greedy(&answer, top_k).map_err(|why| failed(format!("malformed answer: {}", redact(&why, key))))
    }

    /// Sends every request and returns their records, in request order. `on_progress(finished,
    /// total)` runs on the calling thread after each request ends.
    pub fn run(
        &self,
        requests: &[RemoteRequest],
        options: &RunOptions,
        on_progress: &mut dyn FnMut(usize, usize),
    ) -> Vec<RequestRecord> {
        self.run_until(requests, options, on_progress, &|| false)
    }

    /// [`Client::run`] that stops when `stop()` (asked on the calling thread every 50 ms) or the
    /// interrupt flag says so: requests not yet sent get no arrival time (the session drops
    /// them), those in flight end as `cancelled` with what they had received.
    pub fn run_until(
        &self,
        requests: &[RemoteRequest],
        options: &RunOptions,
        on_progress: &mut dyn FnMut(usize, usize),
        stop: &dyn Fn() -> bool,
    ) -> Vec<RequestRecord> {
        let stop = || stop() || self.interrupted();
        // The loop runs on this thread (its futures need not be `Send`); each request's stream
        // runs on the runtime's workers.
        let outcome = self.runtime.block_on(async {
            let tokio = Tokio::new(self, options);
            dispatch::run(&tokio, self.endpoint.api, requests, options, on_progress, &stop).await
        });
        if let Ok(mut last) = self.stop.lock() {
            *last = outcome.stop;
        }
        if let Ok(mut last) = self.server_metrics.lock() {
            *last = outcome.server_metrics;
        }
        if let Ok(mut last) = self.gpu_metrics.lock() {
            *last = outcome.gpu_metrics;
        }
        outcome.records
    }
}

/// The arrival loop's [`Runtime`] on tokio: each request is a task of its own on the runtime's
/// workers, sharing one stop signal.
struct Tokio {
    http: reqwest::Client,
    endpoint: Endpoint,
    ignore_eos: bool,
    timeout_s: f64,
    t0: Instant,
    stop_tx: watch::Sender<Option<CancelledBy>>,
}

impl Tokio {
    fn new(client: &Client, options: &RunOptions) -> Tokio {
        Tokio {
            http: client.http.clone(),
            endpoint: client.endpoint.clone(),
            ignore_eos: options.ignore_eos,
            timeout_s: options.timeout_s,
            t0: Instant::now(),
            stop_tx: watch::channel(None).0,
        }
    }
}

impl Runtime for Tokio {
    fn now_s(&self) -> f64 {
        self.t0.elapsed().as_secs_f64()
    }

    /// To within microseconds: tokio's timer has millisecond granularity (it fires up to 1 ms
    /// late, which would be the client's own lateness), so it sleeps until 2 ms before and yields
    /// to the runtime until the instant.
    async fn sleep_until(&self, at_s: f64) {
        let at = self.t0 + duration(at_s);
        if let Some(early) = at.checked_sub(Duration::from_millis(2)) {
            tokio::time::sleep_until(early.into()).await;
        }
        while Instant::now() < at {
            tokio::task::yield_now().await;
        }
    }

    async fn send(&self, request: RemoteRequest, arrival_s: f64) -> (RequestRecord, String) {
        let (id, prompt_len) = (request.id, request.prompt_len);
        let task = Send {
            http: self.http.clone(),
            endpoint: self.endpoint.clone(),
            request,
            arrival_s,
            ignore_eos: self.ignore_eos,
            timeout_s: self.timeout_s,
            t0: self.t0,
        };
        match tokio::spawn(task.send(self.stop_tx.subscribe())).await {
            Ok(ended) => ended,
            // A panic in the request's task: its record says so, the run goes on.
            Err(e) => {
                let record = RequestRecord {
                    arrival_s,
                    error: Some(RequestError::Request(format!("the request's task failed: {e}")).to_string()),
                    ..RequestRecord::unsent(id, prompt_len)
                };
                (record, String::new())
            }
        }
    }

    fn stop_all(&self, by: CancelledBy) {
        self.stop_tx.send_replace(Some(by));
    }

    async fn scrape(&self, url: &str) -> std::result::Result<String, String> {
        match tokio::time::timeout(duration(SCRAPE_TIMEOUT_S), fetch_metrics(&self.http, url)).await {
            Ok(fetched) => fetched,
            Err(_) => Err(format!("no answer within {SCRAPE_TIMEOUT_S} s")),
        }
    }
}

/// One GET of the metrics text, at most [`SCRAPE_MAX_BYTES`].
async fn fetch_metrics(http: &reqwest::Client, url: &str) -> std::result::Result<String, String> {
    let mut response = http.get(url).send().await.map_err(|e| describe(&e))?;
    if !response.status().is_success() {
        return Err(format!("http {}", response.status().as_u16()));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| describe(&e))? {
        if body.len() + chunk.len() > SCRAPE_MAX_BYTES {
            return Err(format!("the answer is over {SCRAPE_MAX_BYTES} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    String::from_utf8(body).map_err(|_| "the answer is not UTF-8 text".to_string())
}

/// Resolves once the run is stopped, with who stopped it (never, if it ends first).
async fn stopped_by(stop: &mut watch::Receiver<Option<CancelledBy>>) -> CancelledBy {
    let by = stop.wait_for(Option::is_some).await.map_or(None, |by| *by);
    match by {
        Some(by) => by,
        None => std::future::pending().await,
    }
}

/// Resolves `after_s` from now when given (the workload's abort of this request), else never.
async fn aborted_after(after_s: Option<f64>) {
    match after_s {
        Some(after_s) => tokio::time::sleep(duration(after_s)).await,
        None => std::future::pending().await,
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
    /// The request's record, and its reply when a later turn needs it; `stopped` turning to who
    /// stopped the run ends it as cancelled by them, and so does its own planned abort.
    async fn send(self, mut stopped: watch::Receiver<Option<CancelledBy>>) -> (RequestRecord, String) {
        let r = &self.request;
        let exact = self.ignore_eos.then_some(r.max_tokens);
        let mut recorder = StreamRecorder::new(r.id, self.arrival_s, r.prompt_len, exact).max_tokens(r.max_tokens);
        if r.turn.is_some_and(|t| t.has_next) {
            recorder = recorder.keep_reply();
        }
        let endpoint = &self.endpoint;
        let outcome = match request_body(
            endpoint.api,
            &endpoint.model,
            &r.prompt,
            r.max_tokens,
            self.ignore_eos,
            endpoint.thinking,
        ) {
            Ok(body) => {
                recorder.sent(self.t0.elapsed().as_secs_f64());
                let stream = self.stream(&body, &mut recorder);
                let timed = tokio::time::timeout(duration(self.timeout_s), stream);
                let at_s = || self.t0.elapsed().as_secs_f64();
                // Dropping the stream closes its connection: the server sees the abort.
                tokio::select! {
                    outcome = timed => outcome.unwrap_or(Err(RequestError::Timeout(self.timeout_s))),
                    by = stopped_by(&mut stopped) => Err(RequestError::Cancelled { by, at_s: at_s() }),
                    () = aborted_after(r.cancel_after_s) => {
                        Err(RequestError::Cancelled { by: CancelledBy::Workload, at_s: at_s() })
                    }
                }
            }
            Err(e) => Err(RequestError::Request(e.to_string())),
        };
        let key = self.endpoint.api_key.as_ref();
        let (mut record, reply) = recorder.end_with_reply(outcome);
        record.error = record.error.map(|e| redact(&e, key));
        (record, reply)
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
        recorder.headers(self.t0.elapsed().as_secs_f64());
        if let Some(moved) = answered_from(&url, &response)? {
            recorder.redirected(moved);
        }
        let status = response.status();
        if !status.is_success() {
            let text =
                read_capped(&mut response, bounds::MAX_ERROR_BODY_BYTES).await.map(|b| b.text()).unwrap_or_default();
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
            let text =
                read_capped(&mut response, bounds::MAX_ERROR_BODY_BYTES).await.map(|b| b.text()).unwrap_or_default();
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

/// Where `response` (to a request for `url`) came from: `None` when nothing moved, the new URL
/// for a redirect the client followed within the origin, an error for one it stopped at (to
/// another origin; `bounds::check_redirect`).
fn answered_from(url: &str, response: &reqwest::Response) -> Result<Option<String>, RequestError> {
    if response.status().is_redirection() {
        if let Some(location) = response.headers().get(reqwest::header::LOCATION).and_then(|v| v.to_str().ok()) {
            // A relative location stays on the origin, which the policy would have followed.
            let target = response.url().join(location).map_or_else(|_| location.to_string(), |u| u.to_string());
            bounds::check_redirect(url, &target)?;
        }
    }
    if reqwest::Url::parse(url).is_ok_and(|asked| &asked == response.url()) {
        return Ok(None);
    }
    bounds::check_redirect(url, response.url().as_str())
}

/// At most `max` bytes of the body; the rest is never read (the connection is dropped with it).
async fn read_capped(response: &mut reqwest::Response, max: usize) -> Result<CappedBody, reqwest::Error> {
    let mut body = CappedBody::new(max);
    while let Some(bytes) = response.chunk().await? {
        if !body.push(&bytes) {
            break;
        }
    }
    Ok(body)
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

/// The error and its causes on one line ("error sending request …: connection refused"); a
/// certificate the client refused says why and what to do about it ([`tls::advice`]).
fn describe(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    let mut advice = None;
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        advice = advice.or_else(|| rustls_cause(cause).and_then(tls::advice));
        if !text.contains(&cause_text) {
            text = format!("{text}: {cause_text}");
        }
        source = cause.source();
    }
    if let Some(advice) = advice {
        text.push_str(&format!(" ({advice})"));
    } else if text.contains("invalid peer certificate") {
        text.push_str(" (the server's TLS certificate is not trusted: pass its CA with --ca-cert FILE; --insecure skips verification)");
    }
    text
}

/// The rustls error `e` is or wraps: a handshake's error reaches reqwest inside io::Errors
/// (two), whose `source()` skips the error they wrap.
fn rustls_cause<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a rustls::Error> {
    if let Some(rustls) = e.downcast_ref::<rustls::Error>() {
        return Some(rustls);
    }
    let inner: &(dyn std::error::Error + 'static) = e.downcast_ref::<std::io::Error>()?.get_ref()?;
    rustls_cause(inner)
}

/// A server as the benchmark's [`Target`]: the planned requests through this client, stopped by
/// `cancel` or the client's interrupt flag (which then sets `cancel`, so the session ends after
/// this rate with what was measured).
pub struct ServerTarget<'a> {
    pub client: &'a Client,
    pub setup: RemoteSetup<'a>,
}

impl Target for ServerTarget<'_> {
    fn run_config(&self) -> RunConfig {
        let mut config = self.setup.run_config(self.client.endpoint());
        if let Some(tls) = self.client.tls() {
            config.target["tls"] = tls.describe();
        }
        config
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
        cancel: &Rc<Cell<bool>>,
    ) -> Result<(Vec<RequestRecord>, Vec<StepSample>)> {
        let (requests, options) = self.setup.prepare(plan, spec, ignore_eos)?;
        let mut progress = |finished, total| report(listener, finished, total);
        let records = self.client.run_until(&requests, &options, &mut progress, &|| cancel.get());
        if self.client.interrupted() {
            cancel.set(true);
        }
        Ok((records, Vec::new()))
    }

    fn take_saturation(&mut self) -> Option<Saturation> {
        self.client.take_saturation()
    }

    fn decide_early(&mut self, rule: Option<DecideRule>) {
        self.setup.decide = rule;
    }

    fn take_decided(&mut self) -> Option<Decided> {
        self.client.take_decided()
    }

    fn take_server_metrics(&mut self) -> Option<ServerMetrics> {
        self.client.take_server_metrics()
    }

    fn take_gpu_metrics(&mut self) -> Option<GpuReadings> {
        let readings = self.client.take_gpu_metrics()?;
        Some(GpuReadings { source: EnergySource::Dcgm, from: readings.url.clone(), readings, unavailable: None })
    }
}

/// Whether `url` names this machine (localhost, 127.0.0.0/8, ::1).
fn is_loopback(url: &str) -> bool {
    let Ok(url) = reqwest::Url::parse(url) else { return false };
    let host = url.host_str().unwrap_or_default().trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost") || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    #[test]
    fn loopback_servers_are_told_apart() {
        for url in ["http://127.0.0.1:8080/v1", "http://localhost/v1", "https://[::1]:9/v1", "http://127.9.9.9"] {
            assert!(super::is_loopback(url), "{url}");
        }
        for url in ["http://10.0.0.1/v1", "https://api.example.com/v1", "http://localhost.example.com", "nonsense"] {
            assert!(!super::is_loopback(url), "{url}");
        }
    }
}
