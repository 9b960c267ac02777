//! The browser's client: `fetch` with a `ReadableStream` reader feeding the shared
//! [`StreamRecorder`], so a request's record is built exactly as natively, released by the
//! arrival loop both clients share ([`crate::remote::dispatch`]). Every request ends within its
//! timeout (an `AbortController`), and ends as a record: failures are
//! data, the run goes on. What a server's answer may cost is bounded as natively
//! ([`crate::remote::bounds`]): bodies are read through a reader and dropped past their cap,
//! and an answer redirected to another origin fails its request.
//!
//! What the browser hides: `fetch` says only "Failed to fetch" for a refused connection, a DNS
//! error or a server that does not allow this page's origin (CORS), and it queues requests to an
//! HTTP/1.1 origin beyond 6 connections inside the browser, where the page cannot time it. The
//! record's `scheduled_s` is when `fetch()` was called; see [`http1_limit_exceeded`].

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;

use crate::bench::measure::decided::{DecideRule, Decided};
use crate::bench::measure::saturation::Saturation;
use crate::bench::measure::server_metrics::ServerMetrics;
use crate::bench::run::release::Stop as Stopped;
use crate::bench::run::target::Listener;
use crate::bench::{Arrival, CancelledBy, PlannedRequest, RequestRecord, RunConfig, StepSample, Target, WorkloadSpec};
use crate::error::{Error, Result};
use crate::remote::bounds::{self, CappedBody};
use crate::remote::dispatch::{self, Runtime};
use crate::remote::openai::{http_error_text, parse_models, redact, request_body, snippet, ApiKey, RequestError};
use crate::remote::{report, Endpoint, RemoteRequest, RemoteSetup, StreamRecorder, SCRAPE_MAX_BYTES, SCRAPE_TIMEOUT_S};

/// Connections Chromium (and Firefox, Safari) open to one HTTP/1.1 origin at most.
pub const HTTP1_CONNECTIONS: usize = 6;

pub use crate::remote::RunOptions;

/// Requests the workload keeps in flight, roughly: the closed loop's N, or for open loops the
/// rate times `request_s` (the expected duration of one request), never more than the requests.
pub fn expected_concurrency(spec: &WorkloadSpec, request_s: f64) -> f64 {
    let n = spec.num_requests as f64;
    match spec.arrival {
        Arrival::Sequential => 1.0,
        Arrival::Concurrency => (spec.concurrency as f64).min(n),
        Arrival::Poisson | Arrival::Gamma | Arrival::Constant => (spec.rate * request_s).min(n),
        // A trace's mean rate: its requests over its span.
        Arrival::Trace => {
            let last_s = spec.dataset.as_ref().and_then(|d| d.items.iter().filter_map(|i| i.arrival_s).next_back());
            match last_s {
                Some(span) if span > 0.0 => (n / span * request_s).min(n),
                _ => n,
            }
        }
    }
    .min(spec.max_concurrency.map_or(f64::INFINITY, |m| m as f64))
}

/// The expected concurrency when it exceeds what the browser opens to one HTTP/1.1 origin
/// (`http://` endpoints: browsers speak HTTP/2 only over TLS); `None` when it fits.
pub fn http1_limit_exceeded(base_url: &str, expected: f64) -> Option<f64> {
    let http1 = base_url.trim().to_ascii_lowercase().starts_with("http://");
    (http1 && expected > HTTP1_CONNECTIONS as f64).then_some(expected)
}

use crate::clock::now_s;

/// `fetch(url, init)` of the global scope: a window's, a worker's or Node's (no `window` needed).
pub fn scope_fetch(url: &str, init: &web_sys::RequestInit) -> std::result::Result<js_sys::Promise, String> {
    let scope = js_sys::global();
    let fetch = js_sys::Reflect::get(&scope, &JsValue::from_str("fetch")).map_err(|e| js_text(&e, None))?;
    let fetch: js_sys::Function = fetch.dyn_into().map_err(|_| "no fetch() in this scope".to_string())?;
    let promise = fetch.call2(&scope, &JsValue::from_str(url), init).map_err(|e| js_text(&e, None))?;
    Ok(js_sys::Promise::from(promise))
}

fn sleep_s(seconds: f64) -> gloo_timers::future::TimeoutFuture {
    let ms = (seconds * 1000.0).clamp(0.0, u32::MAX as f64) as u32;
    gloo_timers::future::TimeoutFuture::new(ms)
}

/// Resolves in the next task: a message to itself through a `MessageChannel` (not a timer:
/// timers set from timers are clamped to 4 ms after five levels).
async fn next_task() {
    let promise = js_sys::Promise::new(&mut |resolve, _| match web_sys::MessageChannel::new() {
        Ok(channel) => {
            channel.port1().set_onmessage(Some(&resolve));
            if channel.port2().post_message(&JsValue::UNDEFINED).is_err() {
                let _ = resolve.call0(&JsValue::UNDEFINED);
            }
        }
        Err(_) => {
            let _ = resolve.call0(&JsValue::UNDEFINED);
        }
    });
    let _ = JsFuture::from(promise).await;
}

/// Until `deadline_s` on the page's clock. `setTimeout` takes whole milliseconds (a truncated
/// delay fires up to 1 ms early, a rounded-up one up to 1 ms late), so the timer is set for 1–2 ms
/// before the deadline and the rest is waited out task by task (other tasks run in between).
async fn sleep_until(deadline_s: f64) {
    let ahead = deadline_s - now_s();
    if ahead > 0.002 {
        sleep_s(ahead - 0.001).await;
    }
    while now_s() < deadline_s {
        next_task().await;
    }
}

/// The text of a JS error (its `message` when it has one), with the key scrubbed.
fn js_text(e: &JsValue, key: Option<&ApiKey>) -> String {
    let text = e
        .dyn_ref::<js_sys::Error>()
        .map(|e| String::from(e.message()))
        .or_else(|| e.as_string())
        .unwrap_or_else(|| format!("{e:?}"));
    redact(&text, key)
}

/// A run's stop (the user's Cancel, or a saturation stop): nothing more is sent, and the fetches
/// in flight are aborted at once. One for the run, instead of a timer per request polling a flag
/// (2,000 streams would be 20,000 timer callbacks a second).
#[derive(Default)]
struct Stop {
    /// Who stopped the run, once it is stopped.
    by: Cell<Option<CancelledBy>>,
    /// The controllers of the fetches in flight, by a key their [`Deadline`] holds.
    in_flight: RefCell<std::collections::HashMap<u64, web_sys::AbortController>>,
    next_key: Cell<u64>,
}

impl Stop {
    fn is_set(&self) -> bool {
        self.by.get().is_some()
    }

    fn trigger(&self, by: CancelledBy) {
        if self.by.replace(Some(by)).is_none() {
            let controllers: Vec<_> = self.in_flight.borrow_mut().drain().map(|(_, c)| c).collect();
            for controller in controllers {
                controller.abort();
            }
        }
    }
}

/// Aborts a fetch after its timeout (one timer), at the workload's planned abort of the request
/// (another), or when the run's [`Stop`] is triggered; remembers which timer fired.
struct Deadline {
    controller: web_sys::AbortController,
    fired: Rc<Cell<bool>>,
    _timer: gloo_timers::callback::Timeout,
    /// Set when the workload's abort fired.
    withdrawn: Rc<Cell<bool>>,
    _withdraw: Option<gloo_timers::callback::Timeout>,
    /// The run's stop and this fetch's key in it.
    stop: Option<(Rc<Stop>, u64)>,
}

impl Drop for Deadline {
    fn drop(&mut self) {
        if let Some((stop, key)) = &self.stop {
            stop.in_flight.borrow_mut().remove(key);
        }
    }
}

impl Deadline {
    fn new(timeout_s: f64, stop: Option<Rc<Stop>>) -> Result<Self> {
        Deadline::aborting(timeout_s, None, stop)
    }

    /// [`Deadline::new`] that also aborts the fetch `cancel_after_s` from now when given.
    fn aborting(timeout_s: f64, cancel_after_s: Option<f64>, stop: Option<Rc<Stop>>) -> Result<Self> {
        let controller = web_sys::AbortController::new()
            .map_err(|e| Error::Invalid(format!("AbortController: {}", js_text(&e, None))))?;
        let aborts_after = |after_s: f64, flag: &Rc<Cell<bool>>| {
            let (controller, flag) = (controller.clone(), flag.clone());
            let ms = (after_s * 1000.0).ceil().clamp(0.0, u32::MAX as f64) as u32;
            gloo_timers::callback::Timeout::new(ms, move || {
                flag.set(true);
                controller.abort();
            })
        };
        let (fired, withdrawn) = (Rc::new(Cell::new(false)), Rc::new(Cell::new(false)));
        let timer = aborts_after(timeout_s, &fired);
        let withdraw = cancel_after_s.map(|after_s| aborts_after(after_s, &withdrawn));
        let stop = stop.map(|stop| {
            let key = stop.next_key.get();
            stop.next_key.set(key + 1);
            if stop.is_set() {
                controller.abort();
            } else {
                stop.in_flight.borrow_mut().insert(key, controller.clone());
            }
            (stop, key)
        });
        Ok(Deadline { controller, fired, _timer: timer, withdrawn, _withdraw: withdraw, stop })
    }

    fn signal(&self) -> web_sys::AbortSignal {
        self.controller.signal()
    }
}

/// A request to send: the endpoint's headers, a JSON body or none.
fn request_init(
    endpoint: &Endpoint,
    body: Option<&str>,
    signal: &web_sys::AbortSignal,
) -> Result<web_sys::RequestInit> {
    let headers = web_sys::Headers::new().map_err(|e| Error::Invalid(format!("Headers: {}", js_text(&e, None))))?;
    let set = |name: &str, value: &str| {
        headers.set(name, value).map_err(|e| Error::Invalid(format!("header {name}: {}", js_text(&e, None))))
    };
    if body.is_some() {
        set("Content-Type", "application/json")?;
        set("Accept", "text/event-stream")?;
    }
    if let Some(key) = &endpoint.api_key {
        // Scrubbed: a key with characters a header cannot hold would otherwise echo it.
        headers
            .set("Authorization", &format!("Bearer {}", key.expose()))
            .map_err(|_| Error::Invalid("the API key has characters an HTTP header cannot hold".into()))?;
    }
    let init = web_sys::RequestInit::new();
    init.set_method(if body.is_some() { "POST" } else { "GET" });
    init.set_headers(&headers);
    if let Some(body) = body {
        init.set_body(&JsValue::from_str(body));
    }
    init.set_signal(Some(signal));
    Ok(init)
}

/// At most `max` bytes of `response`'s body, read through its stream; the rest is cancelled, never
/// read (`Response.text()` would read an endless body whole).
async fn read_capped(response: &web_sys::Response, max: usize) -> std::result::Result<CappedBody, JsValue> {
    let mut body = CappedBody::new(max);
    let Some(stream) = response.body() else { return Ok(body) };
    let reader: web_sys::ReadableStreamDefaultReader = stream.get_reader().unchecked_into();
    loop {
        let chunk = JsFuture::from(reader.read()).await?;
        let done = js_sys::Reflect::get(&chunk, &JsValue::from_str("done")).ok().and_then(|d| d.as_bool());
        if done != Some(false) {
            return Ok(body);
        }
        let value = js_sys::Reflect::get(&chunk, &JsValue::from_str("value")).unwrap_or(JsValue::UNDEFINED);
        let bytes = value.dyn_into::<js_sys::Uint8Array>().map(|a| a.to_vec()).unwrap_or_default();
        if !body.push(&bytes) {
            let _ = reader.cancel();
            return Ok(body);
        }
    }
}

/// The start of a body read for its message (an error, or a 200 that is not a stream).
async fn text(response: &web_sys::Response) -> String {
    read_capped(response, bounds::MAX_ERROR_BODY_BYTES).await.map(|b| b.text()).unwrap_or_default()
}

/// Where `response` (to a request for `url`) came from: `None` when nothing moved, the new URL
/// after a redirect within the endpoint's origin, an error when it left it. `fetch` has already
/// followed the redirect; the answer is not taken.
fn answered_from(url: &str, response: &web_sys::Response) -> std::result::Result<Option<String>, RequestError> {
    if !response.redirected() {
        return Ok(None);
    }
    bounds::check_redirect(url, &response.url())
}

/// What a rejected `fetch()` means, as far as the browser says.
fn fetch_failed(text: String) -> RequestError {
    RequestError::Connect(format!(
        "{text} (the server is unreachable, or it does not allow this page's origin: start it with CORS enabled)"
    ))
}

/// A client for one endpoint.
#[derive(Clone, Debug)]
pub struct Client {
    endpoint: Endpoint,
    /// Why the last run ended early, if it did ([`RunOptions::saturation_stop`],
    /// [`RunOptions::decide`]).
    stop: RefCell<Option<Stopped>>,
    /// The last run's scrapes of the server's `/metrics` ([`RunOptions::server_metrics`]).
    server_metrics: RefCell<Option<ServerMetrics>>,
}

impl Client {
    pub fn new(endpoint: Endpoint) -> Self {
        Client { endpoint, stop: RefCell::new(None), server_metrics: RefCell::new(None) }
    }

    /// The last run's scrapes of the server's `/metrics`, if it asked for them; taken once.
    pub fn take_server_metrics(&self) -> Option<ServerMetrics> {
        self.server_metrics.borrow_mut().take()
    }

    /// Whether the last run was ended early at saturation, and why; taken once.
    pub fn take_saturation(&self) -> Option<Saturation> {
        Stopped::take_saturation(&mut self.stop.borrow_mut())
    }

    /// Whether the last run was ended once its SLO attainment was decided; taken once.
    pub fn take_decided(&self) -> Option<Decided> {
        Stopped::take_decided(&mut self.stop.borrow_mut())
    }

    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// `GET /v1/models`: the ids the server serves.
    pub async fn models(&self, timeout_s: f64) -> Result<Vec<String>> {
        let url = self.endpoint.base_url.url("models");
        let key = self.endpoint.api_key.as_ref();
        let failed = |why: String| Error::Invalid(format!("GET {url}: {}", redact(&why, key)));
        let deadline = Deadline::new(timeout_s, None)?;
        let init = request_init(&self.endpoint, None, &deadline.signal())?;
        let response = JsFuture::from(scope_fetch(&url, &init).map_err(failed)?).await.map_err(|e| {
            if deadline.fired.get() {
                failed(RequestError::Timeout(timeout_s).to_string())
            } else {
                failed(fetch_failed(js_text(&e, key)).to_string())
            }
        })?;
        let response: web_sys::Response = response.unchecked_into();
        answered_from(&url, &response).map_err(|e| failed(e.to_string()))?;
        let max = if response.ok() { bounds::MAX_MODELS_BODY_BYTES } else { bounds::MAX_ERROR_BODY_BYTES };
        let body = read_capped(&response, max).await.map_err(|e| failed(js_text(&e, key)))?;
        if !response.ok() {
            return Err(failed(format!("HTTP {}: {}", response.status(), http_error_text(&body.text()))));
        }
        if body.is_cut() {
            return Err(failed(format!("the model list is longer than {} MiB", max >> 20)));
        }
        parse_models(&body.text()).map_err(|e| failed(e.to_string()))
    }

    /// Sends every request and returns their records, in request order: the shared arrival loop
    /// ([`crate::remote::dispatch`]) on the page's clock and `fetch`. Setting `cancel` stops
    /// sending and aborts what is in flight; requests never sent (cancelled, or after a
    /// saturation stop, see [`Client::take_saturation`]) have no arrival time. `on_progress(finished,
    /// total)` runs after each request ends.
    pub async fn run(
        &self,
        requests: &[RemoteRequest],
        options: &RunOptions,
        on_progress: Rc<dyn Fn(usize, usize)>,
        cancel: Rc<Cell<bool>>,
    ) -> Vec<RequestRecord> {
        let page = Page {
            endpoint: self.endpoint.clone(),
            ignore_eos: options.ignore_eos,
            timeout_s: options.timeout_s,
            t0: now_s(),
            stop: Rc::new(Stop::default()),
        };
        let outcome = dispatch::run(
            &page,
            self.endpoint.api,
            requests,
            options,
            &mut |finished, total| on_progress(finished, total),
            &|| cancel.get(),
        )
        .await;
        *self.stop.borrow_mut() = outcome.stop;
        *self.server_metrics.borrow_mut() = outcome.server_metrics;
        outcome.records
    }
}

/// One GET of a `/metrics` URL from the page (a simple request: no headers, so no preflight;
/// the server must allow the page's origin), bounded by [`SCRAPE_TIMEOUT_S`] and
/// [`SCRAPE_MAX_BYTES`].
async fn scrape_once(url: &str) -> std::result::Result<String, String> {
    let deadline = Deadline::new(SCRAPE_TIMEOUT_S, None).map_err(|e| e.to_string())?;
    let init = web_sys::RequestInit::new();
    init.set_method("GET");
    init.set_signal(Some(&deadline.signal()));
    let response = JsFuture::from(scope_fetch(url, &init)?).await.map_err(|e| {
        if deadline.fired.get() {
            format!("no answer within {SCRAPE_TIMEOUT_S} s")
        } else {
            fetch_failed(js_text(&e, None)).to_string()
        }
    })?;
    let response: web_sys::Response = response.unchecked_into();
    if !response.ok() {
        return Err(format!("http {}", response.status()));
    }
    let body = read_capped(&response, SCRAPE_MAX_BYTES).await.map_err(|e| js_text(&e, None))?;
    if body.is_cut() {
        return Err(format!("the answer is over {SCRAPE_MAX_BYTES} bytes"));
    }
    Ok(body.text())
}

/// The arrival loop's [`Runtime`] in the page: `fetch` with a reader, the page's timers, and one
/// [`Stop`] for the run.
struct Page {
    endpoint: Endpoint,
    ignore_eos: bool,
    timeout_s: f64,
    /// The run's start on the page's clock.
    t0: f64,
    stop: Rc<Stop>,
}

impl Runtime for Page {
    fn now_s(&self) -> f64 {
        now_s() - self.t0
    }

    async fn sleep_until(&self, at_s: f64) {
        sleep_until(self.t0 + at_s).await;
    }

    async fn send(&self, request: RemoteRequest, arrival_s: f64) -> (RequestRecord, String) {
        let ignore_eos = self.ignore_eos;
        let exact = ignore_eos.then_some(request.max_tokens);
        let mut recorder =
            StreamRecorder::new(request.id, arrival_s, request.prompt_len, exact).max_tokens(request.max_tokens);
        if request.turn.is_some_and(|t| t.has_next) {
            recorder = recorder.keep_reply();
        }
        let endpoint = &self.endpoint;
        let outcome = match request_body(
            endpoint.api,
            &endpoint.model,
            &request.prompt,
            request.max_tokens,
            ignore_eos,
            endpoint.thinking,
        ) {
            Ok(body) => self.stream(&body.to_string(), request.cancel_after_s, &mut recorder).await,
            Err(e) => Err(RequestError::Request(e.to_string())),
        };
        let key = endpoint.api_key.as_ref();
        let (mut record, reply) = recorder.end_with_reply(outcome);
        record.error = record.error.map(|e| redact(&e, key));
        (record, reply)
    }

    fn stop_all(&self, by: CancelledBy) {
        self.stop.trigger(by);
    }

    async fn scrape(&self, url: &str) -> std::result::Result<String, String> {
        scrape_once(url).await
    }
}

impl Page {
    /// One request's stream; `cancel_after_s`: the workload aborts it that long after it is sent.
    async fn stream(
        &self,
        body: &str,
        cancel_after_s: Option<f64>,
        recorder: &mut StreamRecorder,
    ) -> std::result::Result<(), RequestError> {
        let key = self.endpoint.api_key.as_ref();
        let timeout_s = self.timeout_s;
        let deadline = Deadline::aborting(timeout_s, cancel_after_s, Some(self.stop.clone()))
            .map_err(|e| RequestError::Request(e.to_string()))?;
        let cancelled = |by| RequestError::Cancelled { by, at_s: now_s() - self.t0 };
        let init = request_init(&self.endpoint, Some(body), &deadline.signal())
            .map_err(|e| RequestError::Request(e.to_string()))?;
        let url = self.endpoint.base_url.url(self.endpoint.api.path());
        // An abort is the timeout, the workload's abort or the run's stop; anything else is the
        // text the browser gave.
        let aborted = |e: &JsValue, otherwise: fn(String) -> RequestError| {
            if deadline.fired.get() {
                RequestError::Timeout(timeout_s)
            } else if deadline.withdrawn.get() {
                cancelled(CancelledBy::Workload)
            } else if let Some(by) = self.stop.by.get() {
                cancelled(by)
            } else {
                otherwise(js_text(e, key))
            }
        };
        recorder.sent(now_s() - self.t0);
        let response = JsFuture::from(scope_fetch(&url, &init).map_err(RequestError::Request)?)
            .await
            .map_err(|e| aborted(&e, fetch_failed))?;
        recorder.headers(now_s() - self.t0);
        let response: web_sys::Response = response.unchecked_into();
        match answered_from(&url, &response) {
            Ok(Some(moved)) => recorder.redirected(moved),
            Ok(None) => {}
            Err(e) => {
                deadline.controller.abort();
                return Err(e);
            }
        }
        let status = response.status();
        if !response.ok() {
            let body = redact(&http_error_text(&text(&response).await), key);
            let hint = if status == 404 { " (is the endpoint the API root, e.g. http://host:port/v1?)" } else { "" };
            return Err(RequestError::Http { status, body: format!("{body}{hint}") });
        }
        let content_type = response.headers().get("content-type").ok().flatten().unwrap_or_default();
        if !content_type.contains("text/event-stream") {
            let body = redact(&snippet(&text(&response).await), key);
            let shown = if content_type.is_empty() { "no content type" } else { content_type.as_str() };
            return Err(RequestError::NotEventStream(format!("{shown}: {body}")));
        }
        let stream = response.body().ok_or_else(|| RequestError::ClosedEarly("the response has no body".into()))?;
        let reader: web_sys::ReadableStreamDefaultReader = stream.get_reader().unchecked_into();
        let closed_early = RequestError::ClosedEarly;
        loop {
            if let Some(by) = self.stop.by.get() {
                deadline.controller.abort();
                return Err(cancelled(by));
            }
            let chunk = JsFuture::from(reader.read()).await.map_err(|e| aborted(&e, closed_early))?;
            let done = js_sys::Reflect::get(&chunk, &JsValue::from_str("done")).ok().and_then(|d| d.as_bool());
            if done != Some(false) {
                break;
            }
            let value = js_sys::Reflect::get(&chunk, &JsValue::from_str("value")).unwrap_or(JsValue::UNDEFINED);
            let bytes = value.dyn_into::<js_sys::Uint8Array>().map(|a| a.to_vec()).unwrap_or_default();
            recorder.receive(now_s() - self.t0, &bytes)?;
            if recorder.is_done() {
                // Nothing after [DONE] matters; let the connection go.
                let _ = reader.cancel();
                break;
            }
        }
        Ok(())
    }
}

/// A server as the benchmark's [`Target`], from the page: the planned requests through this
/// client; setting `cancel` stops sending and aborts the requests in flight.
pub struct ServerTarget<'a> {
    pub client: &'a Client,
    pub setup: RemoteSetup<'a>,
}

impl Target for ServerTarget<'_> {
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
        cancel: &Rc<Cell<bool>>,
    ) -> Result<(Vec<RequestRecord>, Vec<StepSample>)> {
        let (requests, options) = self.setup.prepare(plan, spec, ignore_eos)?;
        let listener = listener.clone();
        let on_progress = Rc::new(move |finished, total| report(&listener, finished, total));
        let records = self.client.run(&requests, &options, on_progress, cancel.clone()).await;
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
}
