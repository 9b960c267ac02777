//! Starting up (adapter, tokenizer, timer) and loading a model: a preset (the embedded default,
//! random weights with Qwen3 shapes), local files, or a URL / Hugging Face repo through the
//! cache. Every checkpoint goes through the shared loader (`Checkpoint::open`, `ForwardPass::load`).
//! A checkpoint that fails its checks never touches the loaded model; one that fails on the GPU
//! (after the old model was freed) brings the previous one back.

use super::cache::{self, RemoteStore};
use super::i18n::Text;
use super::settings::{Caps, LoadOptions};
use super::sources;
use super::state::{
    AppState, Host, LinkSwitches, LoadRequest, LoadedModel, ModelChoice, ModelInfo, ModelSource, PendingLink, Phase,
    Status,
};
use crate::clock::now_s;
use crate::engine::{EngineOptions, ForwardPass};
use crate::gpu::Gpu;
use crate::model::checkpoint::Checkpoint;
use crate::model::synthetic::SyntheticModel;
use crate::model::{ModelStore, Qwen3Config, TensorProvider, Tokenizer};
use crate::{Error, Result};
use leptos::prelude::*;
use std::cell::Cell;
use std::rc::Rc;

/// Engine sizes a model is loaded for: room for the settings' largest max batch and max batched
/// tokens, so changing them needs no reload. The KV budget is the CLI's for real shapes and a
/// quarter of it for the tiny default (which needs little). Weights and speculation are the
/// settings' (`load`): changing them needs an upload.
fn options(request: &LoadRequest, load: LoadOptions, switches: LinkSwitches) -> EngineOptions {
    let kv_budget_bytes = match request {
        LoadRequest::Preset(ModelChoice::Embedded) => 128 << 20,
        _ => EngineOptions::default().kv_budget_bytes,
    };
    EngineOptions {
        max_seqs: 64,
        max_batched_tokens: 2048,
        kv_budget_bytes,
        weights: load.weights,
        speculation: load.speculation,
        prefix_cache: load.prefix_cache,
        overlap: switches.overlap != Some(false),
        kernels: switches.kernels,
        ..EngineOptions::default()
    }
}

/// The loaded model again, as a second copy with other weights or speculation (an experiment's
/// B), on the page's device; the loaded one is not touched. `progress` gets percents.
pub async fn load_variant(
    host: &Host,
    load: LoadOptions,
    progress: &mut dyn FnMut(u32),
) -> Result<(ForwardPass, Option<Rc<Tokenizer>>)> {
    let request = host.loaded_request().ok_or_else(|| Error::Invalid("no model is loaded".into()))?;
    let gpu = host.gpu().ok_or_else(|| Error::Invalid("no GPU device is open".into()))?;
    let options = options(&request, load, host.switches);
    let mut on_weights = |done: u64, total: u64| progress((done * 100 / total.max(1)) as u32);
    match &request {
        LoadRequest::Preset(choice) => {
            let model = match choice {
                ModelChoice::Embedded => SyntheticModel::embedded_default(),
                other => SyntheticModel::new(Qwen3Config::preset(other.key()).expect("a known preset"), 0),
            };
            let source = Breathing { inner: model, last_yield_s: Cell::new(now_s()) };
            Ok((ForwardPass::load(gpu, &source, &options, &mut on_weights).await?, None))
        }
        LoadRequest::Local(store) => {
            let checkpoint = Checkpoint::open(store).await?;
            let tokenizer = read_tokenizer(store).await?;
            Ok((ForwardPass::load(gpu, &checkpoint, &options, &mut on_weights).await?, tokenizer))
        }
        LoadRequest::Remote(input) => {
            // Read back from the cache the first load filled.
            let base = sources::remote_base(input)?;
            let abort =
                web_sys::AbortController::new().map_err(|e| Error::Invalid(crate::model::source::js_message(&e)))?;
            let store = RemoteStore::new(&base, abort.signal(), Box::new(|_: &sources::DownloadProgress| {})).await?;
            let checkpoint = Checkpoint::open(&store).await?;
            let tokenizer = read_tokenizer(&store).await?;
            Ok((ForwardPass::load(gpu, &checkpoint, &options, &mut on_weights).await?, tokenizer))
        }
    }
}

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

/// The adapter and the tokenizer once, then the model named in the URL (or the default).
pub fn start(state: AppState) {
    state.timer_resolution_ms.set(timer_resolution_ms());
    refresh_cached(state);
    wasm_bindgen_futures::spawn_local(async move {
        let init = async {
            state.status.set(Status::RequestingAdapter);
            let gpu = Rc::new(Gpu::new().await?);
            state.adapter.set(Some(gpu.adapter.clone()));
            state.host().set_gpu(Some(gpu));
            state.status.set(Status::LoadingTokenizer);
            let tokenizer = Rc::new(Tokenizer::from_bytes(&super::browser::fetch_bytes("tokenizer.json").await?)?);
            state.host().set_default_tokenizer(tokenizer);
            Ok::<_, Error>(())
        };
        match init.await {
            Ok(()) => {
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
            }
            Err(e) => {
                state.status.set(Status::Error(e.to_string()));
                state.phase.set(Phase::Idle);
            }
        }
    });
}

/// What the confirmation shows for a model the page's link names, or `None` when loading it
/// downloads nothing (all in the cache already) or cannot start (a malformed name, whose load
/// then says why). The size is the cache manifest's when an earlier download recorded it, else
/// unknown: asking the server would contact it before the user agreed.
async fn needs_confirmation(input: &str) -> Option<PendingLink> {
    let base = cache::absolute(&sources::remote_base(input).ok()?).ok()?;
    let cached = cache::list().await.unwrap_or_default();
    if cached.iter().any(|c| c.base == base && c.files > 0) {
        return None;
    }
    let manifest = cache::Manifest::load();
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

/// The page's device, or a new one in place of a device that was lost or reported an error
/// (nothing more runs on such a device; the page goes on without a reload).
async fn healthy_gpu(state: AppState) -> Result<Rc<Gpu>> {
    if let Some(gpu) = state.host().gpu().filter(|gpu| !gpu.is_faulty()) {
        return Ok(gpu);
    }
    // The old device's model goes with it.
    drop(state.host().take_model());
    state.model_info.set(None);
    state.host().set_gpu(None);
    let gpu = Rc::new(Gpu::new().await?);
    state.adapter.set(Some(gpu.adapter.clone()));
    state.host().set_gpu(Some(gpu.clone()));
    Ok(gpu)
}

/// After a generation: when the device faulted, its model is dropped and the status says why;
/// the next load opens a new device.
pub fn forget_faulty_gpu(state: AppState) {
    if let Some(fault) = state.host().forget_faulty_gpu() {
        device_lost(state, fault);
    }
}

/// The page's side of a lost device: no model, and the status says why.
pub fn device_lost(state: AppState, fault: String) {
    state.model_info.set(None);
    state.status.set(Status::Error(fault));
}

/// Loads `request` in place of the current model. On failure the message is in `load_error`
/// and the previous model is (still, or again) the loaded one.
pub fn load(state: AppState, request: LoadRequest) {
    if state.host().gpu().is_none() && state.adapter.with_untracked(Option::is_none) {
        // Start-up has not opened a device yet (or could not).
        return;
    }
    // Any load (one the user chose) answers the link's question.
    state.pending_link.set(None);
    state.phase.set(Phase::Loading);
    state.load_error.set(None);
    wasm_bindgen_futures::spawn_local(async move {
        let gpu = match healthy_gpu(state).await {
            Ok(gpu) => gpu,
            Err(e) => {
                state.load_error.set(Some(e.to_string()));
                state.status.set(Status::Error(e.to_string()));
                state.phase.set(Phase::Idle);
                return;
            }
        };
        match load_request(state, gpu.clone(), &request).await {
            Ok(()) => state.host().set_loaded_request(Some(request)),
            Err(failure) => {
                state.load_error.set(Some(failure.error.to_string()));
                let previous = state.host().loaded_request();
                match previous {
                    Some(previous) if failure.model_freed => {
                        // A load that broke the device brings the previous model back on a new one.
                        let again = match healthy_gpu(state).await {
                            Ok(gpu) => load_request(state, gpu, &previous).await.map_err(|f| f.error),
                            Err(e) => Err(e),
                        };
                        if let Err(again) = again {
                            state.status.set(Status::Error(again.to_string()));
                        }
                    }
                    Some(previous) => {
                        state.choice.set(previous.source());
                        state.status.set(Status::Ready);
                    }
                    None => state.status.set(Status::Error(failure.error.to_string())),
                }
            }
        }
        state.download.set(None);
        state.host().set_abort(None);
        refresh_cached(state);
        state.phase.set(Phase::Idle);
    });
}

/// Cancels a download in progress (the load then fails with "cancelled").
pub fn cancel_download(state: AppState) {
    if let Some(abort) = state.host().abort() {
        abort.abort();
    }
}

struct Failure {
    error: Error,
    /// Whether the loaded model had already been freed when it failed.
    model_freed: bool,
}

fn before_free(error: Error) -> Failure {
    Failure { error, model_freed: false }
}

async fn load_request(state: AppState, gpu: Rc<Gpu>, request: &LoadRequest) -> std::result::Result<(), Failure> {
    let source = request.source();
    let name = match request {
        LoadRequest::Preset(choice) => choice.key().to_string(),
        LoadRequest::Local(store) => store.label.clone(),
        LoadRequest::Remote(input) => input.clone(),
    };
    let options = options(request, LoadOptions::from_settings(state.settings), state.host().switches);
    match request {
        LoadRequest::Preset(choice) => {
            let model = match choice {
                ModelChoice::Embedded => SyntheticModel::embedded_default(),
                other => SyntheticModel::new(Qwen3Config::preset(other.key()).expect("a known preset"), 0),
            };
            let source_model = Breathing { inner: model, last_yield_s: Cell::new(now_s()) };
            upload(state, gpu, &source_model, source, name, None, None, &options).await
        }
        LoadRequest::Local(store) => {
            state.status.set(Status::Opening(name.clone()));
            let checkpoint = Checkpoint::open(store).await.map_err(before_free)?;
            let tokenizer = read_tokenizer(store).await.map_err(before_free)?;
            let kind = checkpoint.dtypes.join("+");
            upload(state, gpu, &checkpoint, source, name, Some(kind), tokenizer, &options).await
        }
        LoadRequest::Remote(input) => {
            let base = sources::remote_base(input).map_err(before_free)?;
            state.status.set(Status::Opening(name.clone()));
            let abort = web_sys::AbortController::new()
                .map_err(|e| before_free(Error::Invalid(crate::model::source::js_message(&e))))?;
            state.host().set_abort(Some(abort.clone()));
            let progress = Box::new(move |p: &sources::DownloadProgress| state.download.set(Some(p.clone())));
            let store = RemoteStore::new(&base, abort.signal(), progress).await.map_err(before_free)?;
            let opened = async {
                let checkpoint = Checkpoint::open(&store).await?;
                let tokenizer = read_tokenizer(&store).await?;
                Ok::<_, Error>((checkpoint, tokenizer))
            };
            let (checkpoint, tokenizer) = opened.await.map_err(before_free)?;
            state.download.set(None);
            state.host().set_abort(None);
            let kind = checkpoint.dtypes.join("+");
            upload(state, gpu, &checkpoint, source, name, Some(kind), tokenizer, &options).await
        }
    }
}

/// The model's own `tokenizer.json`, when it has one.
async fn read_tokenizer<S: ModelStore>(store: &S) -> Result<Option<Rc<Tokenizer>>> {
    match store.read_all("tokenizer.json", crate::limits::TOKENIZER_JSON_MAX_BYTES).await? {
        Some(bytes) => Ok(Some(Rc::new(Tokenizer::from_bytes(&bytes)?))),
        None => Ok(None),
    }
}

/// Frees the loaded model and uploads `provider` in its place.
#[allow(clippy::too_many_arguments)]
async fn upload<P: TensorProvider>(
    state: AppState,
    gpu: Rc<Gpu>,
    provider: &P,
    source: ModelSource,
    name: String,
    weights_kind: Option<String>,
    tokenizer: Option<Rc<Tokenizer>>,
    options: &EngineOptions,
) -> std::result::Result<(), Failure> {
    drop(state.host().take_model());
    state.model_info.set(None);
    state.choice.set(source.clone());
    state.status.set(Status::LoadingWeights(name.clone(), 0));
    let mut shown = 0;
    let loaded = ForwardPass::load(gpu, provider, options, &mut |done, total| {
        let percent = (done * 100 / total.max(1)) as u32;
        if percent != shown {
            shown = percent;
            state.status.set(Status::LoadingWeights(name.clone(), percent));
        }
    })
    .await;
    let model = loaded.map_err(|error| Failure { error, model_freed: true })?;
    let c = &model.cfg;
    let l = &model.limits;
    state.model_info.set(Some(ModelInfo {
        source,
        name,
        weights_kind,
        layers: c.num_hidden_layers,
        hidden: c.hidden_size,
        vocab: c.vocab_size,
        weight_bytes: model.weights.bytes,
        load: LoadOptions {
            weights: options.weights,
            speculation: options.speculation.clone(),
            prefix_cache: options.prefix_cache,
        },
        kv_tokens: l.num_blocks * l.block_size,
        caps: Caps {
            max_batch: l.max_seqs,
            max_batched_tokens: l.max_batched_tokens,
            max_position: c.max_position_embeddings,
        },
        config: c.clone(),
    }));
    state.host().set_model_tokenizer(tokenizer);
    let capacity = model.limits.clone();
    state.host().put_model(LoadedModel { model, capacity });
    state.status.set(Status::Ready);
    Ok(())
}

/// A model source that lets the page repaint while weights are generated: generating them is
/// pure CPU work with no await that yields, so every 50 ms this one waits for the event loop.
struct Breathing {
    inner: SyntheticModel,
    last_yield_s: Cell<f64>,
}

impl TensorProvider for Breathing {
    fn config(&self) -> &Qwen3Config {
        self.inner.config()
    }
    fn lm_head_name(&self) -> &str {
        self.inner.lm_head_name()
    }
    async fn rows_bf16(&self, name: &str, row_start: usize, rows: usize) -> Result<Vec<u16>> {
        if now_s() - self.last_yield_s.get() > 0.05 {
            gloo_timers::future::TimeoutFuture::new(0).await;
            self.last_yield_s.set(now_s());
        }
        self.inner.rows_bf16(name, row_start, rows).await
    }
    async fn f32(&self, name: &str) -> Result<Vec<f32>> {
        self.inner.f32(name).await
    }
    fn total_bytes(&self) -> u64 {
        self.inner.total_bytes()
    }
    // Matrices the GPU can generate itself skip the CPU (and the yields) entirely.
    fn random_spec(&self, name: &str) -> Option<crate::gpu::fill::RandomSpec> {
        self.inner.random_spec(name)
    }
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
        Status::Error(message) => format!("{}: {message}", t.error),
    }
}
