//! The page's side of start-up and model loading: the timer, the engine worker started and told
//! the link's switches, then the model named in the URL (or the default) — after the user's yes
//! when it would be downloaded; the loads the model card asks for; the status line; and
//! [`apply`], the worker's updates (all but a command's own) into the page's signals. The loading
//! itself runs in the engine worker (`web::worker::loader`).

use super::i18n::Text;
use super::state::{AppState, PendingLink, Phase, Piece};
use crate::web::cache;
use crate::web::protocol::{
    FromEngine, LoadOptions, LoadRequest, LoadWire, ModelChoice, ModelSource, NoWebGpu, Status, ToEngine,
};
use crate::web::sources;
use leptos::prelude::*;

/// The smallest step of `performance.now()` seen in a few thousand reads, in ms (about 0.005 when
/// the page is cross-origin isolated, 0.1 or more when not).
pub fn timer_resolution_ms() -> Option<f64> {
    let performance = web_sys::window()?.performance()?;
    let mut smallest = f64::INFINITY;
    let mut last = performance.now();
    let deadline = last + 20.0;
    for _ in 0..200_000 {
        let now = performance.now();
        if now > last {
            smallest = smallest.min(now - last);
            last = now;
        }
        if now > deadline {
            break;
        }
    }
    smallest.is_finite().then_some(smallest)
}

/// The timer, the engine worker, then (once it has its device and tokenizer: [`started`]) the
/// model named in the URL.
pub fn start(state: AppState) {
    state.timer_resolution_ms.set(timer_resolution_ms());
    refresh_cached(state);
    match super::link::spawn(state, apply) {
        Ok(link) => {
            state.engine.set_value(Some(link));
            let page_url = cache::page_url();
            super::link::send(state, &ToEngine::Start { switches: state.switches, page_url });
        }
        Err(e) => {
            state.status.set(Status::Error(e.to_string()));
            state.phase.set(Phase::Idle);
        }
    }
}

/// Start-up ended in the worker: the model named in the URL (or the default); without WebGPU, the
/// server target; or the error.
pub fn started(state: AppState, outcome: Result<Option<NoWebGpu>, String>) {
    match outcome {
        // The status already says why.
        Err(_) => return state.phase.set(Phase::Idle),
        Ok(Some(why)) => {
            // No model can load here; a server needs none (the notice says so).
            state.no_webgpu.set(Some(why));
            state.target.kind.set("remote".into());
            state.status.set(Status::NoWebGpu);
            return state.phase.set(Phase::Idle);
        }
        Ok(None) => {}
    }
    wasm_bindgen_futures::spawn_local(async move {
        let request = match state.choice.get_untracked() {
            ModelSource::Remote { input } => match needs_confirmation(&input).await {
                Some(pending) => {
                    // Nothing is fetched from the link's server until the user says yes.
                    state.pending_link.set(Some(pending));
                    state.status.set(Status::AwaitingConfirmation);
                    state.phase.set(Phase::Idle);
                    return;
                }
                None => LoadRequest::Remote(input),
            },
            ModelSource::Preset(choice) => LoadRequest::Preset(choice),
            ModelSource::Local { .. } => LoadRequest::Preset(ModelChoice::Embedded),
        };
        load(state, request);
    });
}

/// What the confirmation shows for a model the page's link names, or `None` when loading it
/// downloads nothing (all in the cache already) or cannot start (a malformed name, whose load
/// then says why). The size is the cache manifest's when an earlier download recorded it, else
/// unknown: asking the server would contact it before the user agreed.
async fn needs_confirmation(input: &str) -> Option<PendingLink> {
    let base = cache::absolute(&sources::remote_base(input).ok()?, &cache::page_url()).ok()?;
    let cached = cache::list().await.unwrap_or_default();
    if cached.iter().any(|c| c.base == base && c.files > 0) {
        return None;
    }
    let manifest = cache::load_manifest();
    let sizes: Vec<u64> = manifest
        .sizes
        .iter()
        .filter(|(url, _)| sources::url_folder(url) == base && url.ends_with(".safetensors"))
        .map(|(_, &size)| size)
        .collect();
    let bytes = (!sizes.is_empty()).then(|| sizes.iter().sum());
    Some(PendingLink { input: input.to_string(), base, bytes })
}

/// The user's answer to the link's model: yes loads it (downloading), no loads the embedded one.
pub fn answer_link(state: AppState, download: bool) {
    let Some(pending) = state.pending_link.get_untracked() else { return };
    state.pending_link.set(None);
    if download {
        load(state, LoadRequest::Remote(pending.input));
    } else {
        load(state, LoadRequest::Preset(ModelChoice::Embedded));
    }
}

/// Re-reads the list of cached models.
pub fn refresh_cached(state: AppState) {
    wasm_bindgen_futures::spawn_local(async move {
        // Without Cache Storage the list stays empty; downloads then say why they fail.
        state.cached.set(cache::list().await.unwrap_or_default());
    });
}

/// The page's side of a lost device: no model, and the status says why.
pub fn device_lost(state: AppState, fault: String) {
    state.watch.with_value(|w| {
        if let Some(watch) = &w.conditions {
            watch.device_lost(fault.clone());
        }
    });
    state.model_info.set(None);
    state.status.set(Status::Error(fault));
}

/// Loads `request` in place of the current model, in the engine worker. On failure the message
/// is in `load_error` and the previous model is (still, or again) the loaded one.
pub fn load(state: AppState, request: LoadRequest) {
    if state.adapter.with_untracked(Option::is_none) {
        // Start-up has not opened a device yet (or could not).
        return;
    }
    let Some(link) = super::link::get(state) else { return };
    // Any load (one the user chose) answers the link's question.
    state.pending_link.set(None);
    state.phase.set(Phase::Loading);
    state.load_error.set(None);
    // What the worker's first update will say, said now: until then the status line would still
    // read "Ready" for the model being replaced.
    state.status.set(match &request {
        LoadRequest::Preset(choice) => Status::LoadingWeights(choice.key().to_string(), 0),
        LoadRequest::Local(store) => Status::Opening(store.label.clone()),
        LoadRequest::Remote(input) => Status::Opening(input.clone()),
    });
    if let LoadRequest::Preset(choice) = &request {
        state.choice.set(ModelSource::Preset(*choice));
    }
    let load = LoadOptions::from_settings(state.settings);
    let manifest = cache::load_manifest();
    let (request, blobs) = match request {
        LoadRequest::Preset(choice) => (LoadWire::Preset(choice), Vec::new()),
        LoadRequest::Remote(input) => (LoadWire::Remote(input), Vec::new()),
        LoadRequest::Local(store) => {
            let (names, blobs) = store.files.into_iter().unzip();
            (LoadWire::Local { label: store.label, names }, blobs)
        }
    };
    link.send(&ToEngine::Load { request, load, manifest }, &blobs);
}

/// Uploads the loaded model again, with the weights and speculation the settings ask for.
pub fn reload(state: AppState) {
    let Some(link) = super::link::get(state) else { return };
    state.phase.set(Phase::Loading);
    state.load_error.set(None);
    if let Some(name) = state.model_info.with_untracked(|m| m.as_ref().map(|m| m.name.clone())) {
        state.status.set(Status::LoadingWeights(name, 0));
    }
    let load = LoadOptions::from_settings(state.settings);
    link.send(&ToEngine::Reload { load, manifest: cache::load_manifest() }, &[]);
}

/// Cancels a download in progress (the load then fails with "cancelled").
pub fn cancel_download(state: AppState) {
    super::link::send(state, &ToEngine::CancelDownload);
}

/// A preset's name in the status line and the picker.
pub fn preset_label(choice: ModelChoice, t: &Text) -> &'static str {
    match choice {
        ModelChoice::Embedded => t.model_embedded,
        ModelChoice::Qwen3_0_6b => t.model_06b,
        ModelChoice::Qwen3_1_7b => t.model_17b,
    }
}

fn preset_short(choice: ModelChoice, t: &Text) -> &'static str {
    match choice {
        ModelChoice::Embedded => t.model_embedded_short,
        ModelChoice::Qwen3_0_6b => t.model_06b_short,
        ModelChoice::Qwen3_1_7b => t.model_17b_short,
    }
}

fn source_label(source: &ModelSource, t: &Text) -> String {
    match source {
        ModelSource::Preset(choice) => preset_label(*choice, t).into(),
        ModelSource::Local { label } => label.clone(),
        ModelSource::Remote { input } => input.clone(),
    }
}

/// The status line's text: adapter and model, or what is happening.
pub fn status_text(state: AppState, t: &Text) -> String {
    let adapter = state.adapter.get().map(|a| format!("{} ({}, {})", a.name, a.backend, a.device_type));
    let adapter = adapter.unwrap_or_default();
    match state.status.get() {
        Status::Starting => t.starting.into(),
        Status::RequestingAdapter => t.requesting_adapter.into(),
        // Without WebGPU there is no adapter to name.
        Status::LoadingTokenizer if adapter.is_empty() => t.loading_tokenizer.into(),
        Status::LoadingTokenizer => format!("{adapter} · {}", t.loading_tokenizer),
        Status::Opening(name) => format!("{adapter} · {name} · {}", t.opening_files),
        Status::LoadingWeights(_, percent) => {
            let source = source_label(&state.choice.get(), t);
            let doing = if matches!(state.choice.get(), ModelSource::Preset(_)) {
                t.generating_weights
            } else {
                t.uploading_weights
            };
            format!("{adapter} · {source} · {doing} {percent}%")
        }
        Status::ChoosingKernels(_) => {
            let source = source_label(&state.choice.get(), t);
            format!("{adapter} · {source} · {}", t.choosing_kernels)
        }
        Status::Ready => match state.model_info.get() {
            Some(m) => {
                let name = match &m.source {
                    ModelSource::Preset(choice) => preset_short(*choice, t).to_string(),
                    _ => m.name.clone(),
                };
                format!(
                    "{}: {name}, {} ({} {}, {} {}, {} {}) {} {adapter}",
                    t.ready,
                    m.weights_kind.as_deref().unwrap_or(t.random_weights),
                    m.layers,
                    t.layers,
                    t.hidden,
                    m.hidden,
                    t.vocab,
                    m.vocab,
                    t.on
                )
            }
            None => t.ready.into(),
        },
        Status::AwaitingConfirmation => format!("{adapter} · {}", t.link_model_waiting),
        Status::NoWebGpu => t.no_webgpu_status.into(),
        Status::Error(message) => format!("{}: {message}", t.error),
    }
}

/// One update from the engine, into the page's state (a command's own go to its view: see
/// [`super::link`]).
pub fn apply(state: AppState, update: FromEngine) {
    match update {
        FromEngine::Adapter(adapter) => state.adapter.set(Some(adapter)),
        FromEngine::Status(status) => state.status.set(status),
        FromEngine::Started(outcome) => started(state, outcome),
        FromEngine::Model(info) => {
            // A check was of the model it ran on.
            state.verification.set(None);
            if let Some((name, ready)) = info.as_ref().and_then(|m| Some((m.name.clone(), m.time_to_ready.clone()?))) {
                state.loads.update(|loads| loads.push((name, ready)));
            }
            state.model_info.set(info);
        }
        FromEngine::Choice(source) => state.choice.set(source),
        FromEngine::LoadError(error) => state.load_error.set(error),
        FromEngine::Download(progress) => state.download.set(progress),
        FromEngine::Manifest(manifest) => crate::web::cache::save_manifest(&manifest),
        FromEngine::LoadEnded => {
            refresh_cached(state);
            state.phase.set(Phase::Idle);
        }
        FromEngine::Piece { text, gap_ms } => {
            state.playground.answer.update(|a| a.push_str(&text));
            state.playground.pieces.update(|p| p.push(Piece { text, gap_ms }));
        }
        FromEngine::Generated(timing) => {
            state.playground.timing.set(timing);
            state.phase.set(Phase::Idle);
        }
        FromEngine::Roofline(result) => {
            state.roofline.set(Some(result));
            state.phase.set(Phase::Idle);
        }
        FromEngine::Verified(result) => {
            state.verification.set(Some(result));
            state.phase.set(Phase::Idle);
        }
        FromEngine::DeviceLost(fault) => device_lost(state, fault),
        FromEngine::Planned(planned) => {
            state.planned.set(Some(planned.map(|c| *c)));
            state.phase.set(Phase::Idle);
        }
        // The link hands these to the command's view.
        FromEngine::Refused(_) | FromEngine::Run(_) => {}
    }
}
