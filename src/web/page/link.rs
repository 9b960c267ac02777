//! The page's side of the engine worker (`web::worker`): starts it on the page's own wasm
//! module, sends [`ToEngine`] commands, and hands each [`FromEngine`] update of a command in
//! progress to that command's view ([`RunSink`]), every other to the page's `apply` (in
//! `models.rs`), which turns it into the page's signals.

use super::state::{AppState, Phase};
use crate::model::source::js_message;
use crate::web::protocol::{self, FromEngine, Refused, RunUpdate, Status, ToEngine};
use crate::{Error, Result};
use leptos::prelude::*;
use std::cell::RefCell;
use std::rc::Rc;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

/// A command's view of its updates (the run card's, the experiment's).
pub type RunSink = Rc<dyn Fn(RunUpdate)>;

/// Where a command's refusal is said.
pub type RefusedTo = Rc<dyn Fn(Refused)>;

/// The worker, what waits for it to be up, and the command in progress's view.
pub struct Link {
    worker: web_sys::Worker,
    /// Messages sent before the worker's module was up, in order.
    queued: RefCell<Option<Vec<js_sys::Object>>>,
    /// The command in progress: its updates' view, and where a refusal is said.
    run: RefCell<Option<(RunSink, RefusedTo)>>,
    /// Closures the worker calls, kept as long as it lives.
    _on_message: Closure<dyn FnMut(web_sys::MessageEvent)>,
    _on_error: Closure<dyn FnMut(web_sys::ErrorEvent)>,
}

/// The worker's script: the page's own module (`glue`), its compiled wasm sent by the page as the
/// first message, then the engine's loop (`web::worker::serve`, through the
/// binary's `tokenmeter_worker`).
fn bootstrap(glue: &str) -> String {
    format!(
        "import init, {{ tokenmeter_worker }} from {glue:?};\n\
         self.onmessage = async ({{ data }}) => {{\n\
           self.onmessage = null;\n\
           await init({{ module_or_path: data }});\n\
           tokenmeter_worker();\n\
           self.postMessage({{ ready: true }});\n\
         }};\n"
    )
}

/// The URL of the page's wasm-bindgen module (`tokenmeter-web[-HASH].js`), from the resources the
/// page loaded: trunk names it with a hash, `scripts/build-web` without.
fn glue_url() -> Result<String> {
    let window = web_sys::window().ok_or_else(|| Error::Invalid("no window".into()))?;
    let performance = window.performance().ok_or_else(|| Error::Invalid("no performance".into()))?;
    let found = performance.get_entries_by_type("resource").iter().find_map(|entry| {
        let name = entry.unchecked_into::<web_sys::PerformanceEntry>().name();
        let file = name.split(['?', '#']).next()?.rsplit('/').next()?.to_string();
        (file.starts_with("tokenmeter-web") && file.ends_with(".js")).then_some(name)
    });
    match found {
        Some(url) => Ok(url),
        None => crate::web::cache::absolute("tokenmeter-web.js", &crate::web::cache::page_url()),
    }
}

/// Starts the worker. From then on a command's updates go to its view, and every other update to
/// `apply` (`models::apply`, which writes it into `state`).
pub fn spawn(state: AppState, apply: fn(AppState, FromEngine)) -> Result<Rc<Link>> {
    let js = |what: &'static str| move |e: JsValue| Error::Invalid(format!("{what}: {}", js_message(&e)));
    let parts = js_sys::Array::of1(&JsValue::from_str(&bootstrap(&glue_url()?)));
    let options = web_sys::BlobPropertyBag::new();
    options.set_type("text/javascript");
    let script =
        web_sys::Blob::new_with_str_sequence_and_options(&parts, &options).map_err(js("the worker's script"))?;
    let url = web_sys::Url::create_object_url_with_blob(&script).map_err(js("the worker's script"))?;
    let worker_options = web_sys::WorkerOptions::new();
    worker_options.set_type(web_sys::WorkerType::Module);
    worker_options.set_name("tokenmeter engine");
    let worker = web_sys::Worker::new_with_options(&url, &worker_options).map_err(js("the engine worker"))?;
    let _ = web_sys::Url::revoke_object_url(&url);
    let on_message = Closure::<dyn FnMut(web_sys::MessageEvent)>::new(move |event: web_sys::MessageEvent| {
        on_message(state, apply, event.data())
    });
    let on_error = Closure::<dyn FnMut(web_sys::ErrorEvent)>::new(move |event: web_sys::ErrorEvent| {
        event.prevent_default();
        let why = format!("the engine worker failed: {}", event.message());
        state.status.set(Status::Error(why.clone()));
        state.load_error.set(Some(why));
        state.phase.set(Phase::Idle);
    });
    worker.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
    worker.set_onerror(Some(on_error.as_ref().unchecked_ref()));
    worker.post_message(&wasm_bindgen::module()).map_err(js("the engine worker"))?;
    Ok(Rc::new(Link {
        worker,
        queued: RefCell::new(Some(Vec::new())),
        run: RefCell::new(None),
        _on_message: on_message,
        _on_error: on_error,
    }))
}

impl Link {
    /// Sends `command` (with `blobs`: a local model's files), or queues it until the worker is up.
    pub fn send(&self, command: &ToEngine, blobs: &[web_sys::Blob]) {
        let envelope = js_sys::Object::new();
        let _ = js_sys::Reflect::set(&envelope, &"json".into(), &protocol::encode(command).into());
        let list: js_sys::Array = blobs.iter().collect();
        let _ = js_sys::Reflect::set(&envelope, &"blobs".into(), &list);
        if let Some(queue) = self.queued.borrow_mut().as_mut() {
            queue.push(envelope);
            return;
        }
        // Fails only when the message cannot be cloned, which JSON and Blobs always can.
        let _ = self.worker.post_message(&envelope);
    }

    /// The worker's module is up: what was queued goes now.
    fn up(&self) {
        for envelope in self.queued.borrow_mut().take().unwrap_or_default() {
            let _ = self.worker.post_message(&envelope);
        }
    }

    /// Sends a command for the run service; its updates go to `sink`, a refusal to `refused`.
    pub fn command(&self, command: ToEngine, sink: RunSink, refused: RefusedTo) {
        *self.run.borrow_mut() = Some((sink, refused));
        self.send(&command, &[]);
    }
}

/// The page's link to its engine (none when the worker could not start: the status says why).
pub fn get(state: AppState) -> Option<Rc<Link>> {
    state.engine.get_value()
}

/// Sends `command` when the engine is there.
pub fn send(state: AppState, command: &ToEngine) {
    if let Some(link) = get(state) {
        link.send(command, &[]);
    }
}

fn on_message(state: AppState, apply: fn(AppState, FromEngine), data: JsValue) {
    if js_sys::Reflect::get(&data, &"ready".into()).is_ok_and(|r| r.is_truthy()) {
        if let Some(link) = get(state) {
            link.up();
        }
        return;
    }
    let json = js_sys::Reflect::get(&data, &"json".into()).ok().and_then(|j| j.as_string()).unwrap_or_default();
    match protocol::decode::<FromEngine>(&json) {
        // A command's own updates go to its view.
        Ok(FromEngine::Refused(refused)) => {
            if let Some((_, refused_to)) = get(state).and_then(|link| link.run.borrow_mut().take()) {
                refused_to(refused);
            }
        }
        Ok(FromEngine::Run(update)) => {
            let sink = get(state).and_then(|link| link.run.borrow().as_ref().map(|(sink, _)| sink.clone()));
            if let Some(sink) = sink {
                sink(update);
            }
        }
        Ok(update) => apply(state, update),
        Err(e) => state.status.set(Status::Error(e)),
    }
}
