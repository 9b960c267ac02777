//! The engine worker: a dedicated Web Worker running the page's own wasm module (as WebLLM runs its
//! engine), which owns the device, the model, the tokenizers, the batcher and the benchmark driver
//! ([`Host`], [`loader`], [`service`]) — so every token's timestamp is taken here, where no chart
//! redraw or other page work can delay it. The page (`web::page::link`) sends [`ToEngine`]
//! commands and draws the [`FromEngine`] updates; the two share only [`crate::web::protocol`].
//!
//! - [`host`]: what the worker holds (device, model, tokenizers, the cache's record).
//! - [`loader`]: start-up (device, the page's tokenizer) and model loading.
//! - [`service`]: the run service, the one owner of a run's life; [`dataset`]: a picked dataset
//!   made into a run's requests.

pub mod dataset;
pub mod host;
pub mod loader;
mod post;
pub mod service;

pub use post::post;
use post::scope;

use crate::bench::run::target::SessionEvent;
use crate::clock::now_s;
use crate::engine::{generate_greedy, Engine};
use crate::model::source::BlobStore;
use crate::web::protocol::{self, ChartData, FromEngine, LoadRequest, LoadWire, RunUpdate, Status, ToEngine};
use crate::Error;
use host::Host;
use service::{Report, Sink};
use std::cell::Cell;
use std::rc::Rc;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

/// The live charts are drawn from the records at most this often (each drawing walks every
/// record so far; the step loop runs between them).
pub const CHARTS_EVERY_S: f64 = 0.1;

/// The worker's entry (called by the bootstrap script once the module is up): takes the page's
/// commands from then on.
pub fn serve() {
    console_error_panic_hook::set_once();
    let host = Rc::new(Host::new());
    let on_message = Closure::<dyn FnMut(web_sys::MessageEvent)>::new(move |event: web_sys::MessageEvent| {
        let data = event.data();
        let json = js_sys::Reflect::get(&data, &"json".into()).ok().and_then(|j| j.as_string()).unwrap_or_default();
        let blobs = js_sys::Reflect::get(&data, &"blobs".into()).ok().map(|b| js_sys::Array::from(&b));
        match protocol::decode::<ToEngine>(&json) {
            Ok(command) => handle(&host, command, blobs.unwrap_or_default()),
            Err(e) => post(&FromEngine::Status(Status::Error(e))),
        }
    });
    scope().set_onmessage(Some(on_message.as_ref().unchecked_ref()));
    // The worker's handler for its whole life.
    on_message.forget();
}

fn handle(host: &Rc<Host>, command: ToEngine, blobs: js_sys::Array) {
    match command {
        ToEngine::Start { switches, page_url } => {
            host.set_page(switches, page_url);
            wasm_bindgen_futures::spawn_local(loader::start(host.clone()));
        }
        ToEngine::Load { request, load, manifest } => {
            host.set_manifest(manifest);
            let request = match request {
                LoadWire::Preset(choice) => LoadRequest::Preset(choice),
                LoadWire::Remote(input) => LoadRequest::Remote(input),
                LoadWire::Local { label, names } => {
                    let files = names.into_iter().zip(blobs.iter().map(JsCast::unchecked_into)).collect();
                    LoadRequest::Local(BlobStore { files, label })
                }
            };
            wasm_bindgen_futures::spawn_local(loader::load(host.clone(), request, load));
        }
        ToEngine::Reload { load, manifest } => {
            host.set_manifest(manifest);
            match host.loaded_request() {
                Some(request) => wasm_bindgen_futures::spawn_local(loader::load(host.clone(), request, load)),
                None => post(&FromEngine::LoadEnded),
            }
        }
        ToEngine::CancelDownload => {
            if let Some(abort) = host.abort() {
                abort.abort();
            }
        }
        ToEngine::Generate { prompt, max_new_tokens } => {
            wasm_bindgen_futures::spawn_local(generate(host.clone(), prompt, max_new_tokens))
        }
        ToEngine::Roofline => {
            let gpu = host.gpu();
            wasm_bindgen_futures::spawn_local(async move {
                let result = match gpu {
                    Some(gpu) => crate::gpu::roofline::measure(&gpu, 3).await.map_err(|e| e.to_string()),
                    None => Err("no GPU device is open".into()),
                };
                post(&FromEngine::Roofline(result));
            });
        }
        ToEngine::Verify => {
            let host = host.clone();
            wasm_bindgen_futures::spawn_local(async move {
                let result = loader::verify_loaded(&host).await.map_err(|e| e.to_string());
                post(&FromEngine::Verified(result));
            });
        }
        ToEngine::Command { cx, command } => {
            if let Err(refused) = service::start(host, *cx, command, run_sink()) {
                post(&FromEngine::Refused(refused));
            }
        }
        ToEngine::Cancel => service::cancel(host),
        ToEngine::Plan { runs, cfg, ttft_slo_ms, min_requests } => {
            wasm_bindgen_futures::spawn_local(async move {
                let planned = crate::planner::capacity::capacity(&runs, &cfg, ttft_slo_ms, min_requests).await;
                post(&FromEngine::Planned(planned.map(Box::new).map_err(|e| e.to_string())));
            });
        }
    }
}

/// The service's reports as [`RunUpdate`]s: the live records drawn into charts here, at most every
/// [`CHARTS_EVERY_S`], so only the drawing crosses to the page; the counts cross at every step.
fn run_sink() -> Sink {
    let charts_at_s = Cell::new(f64::NEG_INFINITY);
    Rc::new(move |report| {
        let update = match report {
            Report::Began { rates, ttft_slo_ms } => RunUpdate::Began { rates: rates.to_vec(), ttft_slo_ms },
            Report::Session(SessionEvent::WarmedUp { .. } | SessionEvent::Baseline(_)) => return,
            Report::Session(SessionEvent::RateStarted { rate, requests }) => {
                charts_at_s.set(f64::NEG_INFINITY);
                RunUpdate::RateStarted { rate, requests }
            }
            Report::Session(SessionEvent::Progress(p)) => {
                let due = !p.records.is_empty() && now_s() - charts_at_s.get() >= CHARTS_EVERY_S;
                let charts = due.then(|| {
                    charts_at_s.set(now_s());
                    Box::new(ChartData::live(p.records, p.steps))
                });
                RunUpdate::Progress { finished: p.finished, total: p.total, charts }
            }
            Report::Session(SessionEvent::RateDone { rate, result }) => {
                RunUpdate::RateDone { rate, result: Box::new(result.clone()) }
            }
            Report::LoadingB(percent) => RunUpdate::LoadingB(percent),
            Report::Ended(ended) => RunUpdate::Ended(ended),
            Report::DeviceLost(fault) => return post(&FromEngine::DeviceLost(fault)),
        };
        post(&FromEngine::Run(update));
    })
}

/// The playground: greedy generation from the chat template, each decoded piece sent as it
/// appears, then the timing line (or the error).
async fn generate(host: Rc<Host>, prompt: String, max_new_tokens: usize) {
    let (Some(mut loaded), Some(tokenizer)) = (host.take_model(), host.tokenizer()) else {
        return post(&FromEngine::Generated("Error: no model is loaded, or it is busy".into()));
    };
    // The model is out of its slot for the whole generation: no borrow spans an await.
    let mut engine = Engine::new(loaded.model);
    let result = async {
        let ids = tokenizer.chat_prompt(&prompt, false)?;
        crate::engine::generate::check_prompt(&engine.model.cfg, &engine.model.limits, &ids, max_new_tokens)?;
        let stop = engine.model.cfg.eos_token_ids.clone();
        let (mut so_far, mut shown, mut last_s) = (Vec::new(), 0, now_s());
        let g = generate_greedy(&mut engine, &ids, max_new_tokens, &stop, &mut |_, id| {
            so_far.push(id);
            // A character split over tokens decodes to U+FFFD until its last byte arrives.
            let Ok(text) = tokenizer.decode(&so_far) else { return };
            if text.len() > shown && !text.ends_with('\u{fffd}') && text.is_char_boundary(shown) {
                let now = now_s();
                post(&FromEngine::Piece { text: text[shown..].to_string(), gap_ms: (now - last_s) * 1e3 });
                (shown, last_s) = (text.len(), now);
            }
        })
        .await?;
        Ok::<_, Error>(format!(
            "{} prompt tokens, {} new tokens; TTFT {:.1} ms, TPOT {:.2} ms",
            ids.len(),
            g.tokens.len(),
            g.ttft_ms(),
            g.tpot_ms()
        ))
    }
    .await;
    loaded.model = engine.model;
    host.put_model(loaded);
    post(&FromEngine::Generated(result.unwrap_or_else(|e| format!("Error: {e}"))));
    loader::forget_faulty_gpu(&host);
}
