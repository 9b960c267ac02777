//! The engine worker's side of start-up and model loading: the device and the page's tokenizer
//! once, then a preset (the embedded default, random weights with Qwen3 shapes), local files, or a
//! URL / Hugging Face repo through the cache. Every checkpoint goes through the shared loader
//! (`Checkpoint::open`, `ForwardPass::load`). A checkpoint that fails its checks never touches the
//! loaded model; one that fails on the GPU (after the old model was freed) brings the previous one
//! back. What the page shows of it arrives as [`FromEngine`] updates.

use super::host::{Host, LoadedModel};
use super::post::post;
use crate::bench::base::field::Field;
use crate::bench::record::ready::{LoadSource, TimeToReady};
use crate::bench::record::run_config::KernelPath;
use crate::clock::now_s;
use crate::engine::trial::{self, Trial, TrialPlan};
use crate::engine::verify::{self, Verification};
use crate::engine::{EngineOptions, ForwardPass};
use crate::gpu::kernels::KernelSwitches;
use crate::gpu::Gpu;
use crate::model::checkpoint::Checkpoint;
use crate::model::synthetic::SyntheticModel;
use crate::model::{ModelStore, Qwen3Config, TensorProvider, Tokenizer};
use crate::web::cache::{RemoteStore, StoreEvents};
use crate::web::protocol::{
    Caps, DownloadProgress, FromEngine, LinkSwitches, LoadOptions, LoadRequest, ModelChoice, ModelInfo, NoWebGpu,
    Status,
};
use crate::web::sources;
use crate::{Error, Result};
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

/// The cache's record kept in the host and sent to the page as it changes.
fn store_events(host: &Rc<Host>, progress: bool) -> StoreEvents {
    let keeper = host.clone();
    StoreEvents {
        on_progress: if progress {
            Box::new(|p: &DownloadProgress| post(&FromEngine::Download(Some(p.clone()))))
        } else {
            Box::new(|_: &DownloadProgress| {})
        },
        on_manifest: Box::new(move |m| {
            keeper.set_manifest(m.clone());
            post(&FromEngine::Manifest(m.clone()));
        }),
    }
}

/// The model folder `input` names, absolute.
fn remote_folder(host: &Host, input: &str) -> Result<String> {
    host.page_relative(&sources::remote_base(input)?)
}

/// The loaded model again, as a second copy with other weights or speculation (an experiment's
/// B), on the worker's device; the loaded one is not touched. `progress` gets percents.
pub async fn load_variant(
    host: &Rc<Host>,
    load: LoadOptions,
    progress: &mut dyn FnMut(u32),
) -> Result<(ForwardPass, Option<Rc<Tokenizer>>)> {
    let request = host.loaded_request().ok_or_else(|| Error::Invalid("no model is loaded".into()))?;
    let gpu = host.gpu().ok_or_else(|| Error::Invalid("no GPU device is open".into()))?;
    let options = options(&request, load, host.switches());
    let mut on_weights = |done: u64, total: u64| progress((done * 100 / total.max(1)) as u32);
    let (mut pass, tokenizer) = match &request {
        LoadRequest::Preset(choice) => {
            let source = Breathing { inner: preset(*choice), last_yield_s: Cell::new(now_s()) };
            (ForwardPass::load(gpu, &source, &options, &mut on_weights).await?, None)
        }
        LoadRequest::Local(store) => {
            let checkpoint = Checkpoint::open(store).await?;
            let tokenizer = read_tokenizer(store).await?;
            (ForwardPass::load(gpu, &checkpoint, &options, &mut on_weights).await?, tokenizer)
        }
        LoadRequest::Remote(input) => {
            let store = cached_store(host, input).await?;
            let checkpoint = Checkpoint::open(&store).await?;
            let tokenizer = read_tokenizer(&store).await?;
            (ForwardPass::load(gpu, &checkpoint, &options, &mut on_weights).await?, tokenizer)
        }
    };
    // B differs from the loaded A only in what the experiment changes: A's kernel choices.
    match host.model_trial() {
        Some(first) => {
            trial::adopt(&mut pass, &first, &options.kernels).await?;
        }
        None => {
            choose_kernels(&mut pass, options.kernels).await?;
        }
    }
    Ok((pass, tokenizer))
}

/// A URL's model read back from the cache the first load filled.
async fn cached_store(host: &Rc<Host>, input: &str) -> Result<RemoteStore> {
    let base = remote_folder(host, input)?;
    let abort = web_sys::AbortController::new().map_err(|e| Error::Invalid(crate::model::source::js_message(&e)))?;
    RemoteStore::new(&base, abort.signal(), host.manifest(), store_events(host, false)).await
}

/// *Check this GPU*: the engine's check of itself on the loaded model (`engine::verify`, what
/// `tokenmeter verify` runs), the CPU oracle reading the weights again from where they came.
pub async fn verify_loaded(host: &Rc<Host>) -> Result<Verification> {
    let request = host.loaded_request().ok_or_else(|| Error::Invalid("no model is loaded".into()))?;
    let mut loaded = host.take_model().ok_or_else(|| Error::Invalid("no model is loaded".into()))?;
    let path = KernelPath::of(&loaded.model.kernel_options()).describe();
    let pass = &mut loaded.model;
    let outcome = match &request {
        LoadRequest::Preset(choice) => verify::run(pass, &preset(*choice), path).await,
        LoadRequest::Local(store) => match Checkpoint::open(store).await {
            Ok(checkpoint) => verify::run(pass, &checkpoint, path).await,
            Err(e) => Err(e),
        },
        LoadRequest::Remote(input) => match cached_store(host, input).await {
            Ok(store) => match Checkpoint::open(&store).await {
                Ok(checkpoint) => verify::run(pass, &checkpoint, path).await,
                Err(e) => Err(e),
            },
            Err(e) => Err(e),
        },
    };
    host.put_model(loaded);
    outcome
}

fn preset(choice: ModelChoice) -> SyntheticModel {
    match choice {
        ModelChoice::Embedded => SyntheticModel::embedded_default(),
        other => SyntheticModel::new(Qwen3Config::preset(other.key()).expect("a known preset"), 0),
    }
}

/// Start-up: the device, then the page's tokenizer; ends with [`FromEngine::Started`]. A browser
/// without WebGPU gets the tokenizer all the same: a server's chat runs send text.
pub async fn start(host: Rc<Host>) {
    let init = async {
        post(&FromEngine::Status(Status::RequestingAdapter));
        let no_webgpu = if !webgpu_exposed() {
            Some(NoWebGpu::Missing)
        } else {
            match Gpu::new().await {
                Ok(gpu) => {
                    let gpu = Rc::new(gpu);
                    post(&FromEngine::Adapter(gpu.adapter.clone()));
                    host.set_gpu(Some(gpu));
                    None
                }
                // On the web, wgpu's request for an adapter fails only when `requestAdapter()`
                // answered null (the device's own failure is another variant).
                Err(Error::NoAdapter(_)) => Some(NoWebGpu::NoAdapter),
                Err(e) => return Err(e),
            }
        };
        post(&FromEngine::Status(Status::LoadingTokenizer));
        let url = host.page_relative("tokenizer.json")?;
        let tokenizer = Rc::new(Tokenizer::from_bytes(&crate::web::browser::fetch_bytes(&url).await?)?);
        host.set_default_tokenizer(tokenizer);
        Ok::<_, Error>(no_webgpu)
    };
    let started = init.await.map_err(|e| e.to_string());
    if let Err(e) = &started {
        post(&FromEngine::Status(Status::Error(e.clone())));
    }
    post(&FromEngine::Started(started));
}

/// Whether the worker's browser exposes WebGPU at all (`navigator.gpu`). Without it wgpu still
/// tries, and fails listing the native backends this build has not.
fn webgpu_exposed() -> bool {
    let navigator = js_sys::Reflect::get(&js_sys::global(), &"navigator".into());
    navigator
        .and_then(|navigator| js_sys::Reflect::get(&navigator, &"gpu".into()))
        .is_ok_and(|gpu| !gpu.is_undefined() && !gpu.is_null())
}

/// The worker's device, or a new one in place of a device that was lost or reported an error
/// (nothing more runs on such a device; the page goes on without a reload).
async fn healthy_gpu(host: &Host) -> Result<Rc<Gpu>> {
    if let Some(gpu) = host.gpu().filter(|gpu| !gpu.is_faulty()) {
        return Ok(gpu);
    }
    // The old device's model goes with it.
    drop(host.take_model());
    post(&FromEngine::Model(None));
    host.set_gpu(None);
    let gpu = Rc::new(Gpu::new().await?);
    post(&FromEngine::Adapter(gpu.adapter.clone()));
    host.set_gpu(Some(gpu.clone()));
    Ok(gpu)
}

/// After a generation or a run: when the device faulted, its model is dropped and the page told;
/// the next load opens a new device.
pub fn forget_faulty_gpu(host: &Host) {
    if let Some(fault) = host.forget_faulty_gpu() {
        post(&FromEngine::DeviceLost(fault));
    }
}

/// Loads `request` in place of the current model; ends with [`FromEngine::LoadEnded`]. On failure
/// the message is in a [`FromEngine::LoadError`] and the previous model is (still, or again) the
/// loaded one.
pub async fn load(host: Rc<Host>, request: LoadRequest, load: LoadOptions) {
    let gpu = match healthy_gpu(&host).await {
        Ok(gpu) => gpu,
        Err(e) => {
            post(&FromEngine::LoadError(Some(e.to_string())));
            post(&FromEngine::Status(Status::Error(e.to_string())));
            post(&FromEngine::LoadEnded);
            return;
        }
    };
    match load_request(&host, gpu, &request, load.clone()).await {
        Ok(()) => host.set_loaded_request(Some(request)),
        Err(failure) => {
            post(&FromEngine::LoadError(Some(failure.error.to_string())));
            match host.loaded_request() {
                Some(previous) if failure.model_freed => {
                    // A load that broke the device brings the previous model back on a new one.
                    let again = match healthy_gpu(&host).await {
                        Ok(gpu) => load_request(&host, gpu, &previous, load).await.map_err(|f| f.error),
                        Err(e) => Err(e),
                    };
                    if let Err(again) = again {
                        post(&FromEngine::Status(Status::Error(again.to_string())));
                    }
                }
                Some(previous) => {
                    post(&FromEngine::Choice(previous.source()));
                    post(&FromEngine::Status(Status::Ready));
                }
                None => post(&FromEngine::Status(Status::Error(failure.error.to_string()))),
            }
        }
    }
    post(&FromEngine::Download(None));
    host.set_abort(None);
    post(&FromEngine::LoadEnded);
}

struct Failure {
    error: Error,
    /// Whether the loaded model had already been freed when it failed.
    model_freed: bool,
}

fn before_free(error: Error) -> Failure {
    Failure { error, model_freed: false }
}

async fn load_request(
    host: &Rc<Host>,
    gpu: Rc<Gpu>,
    request: &LoadRequest,
    load: LoadOptions,
) -> std::result::Result<(), Failure> {
    let name = match request {
        LoadRequest::Preset(choice) => choice.key().to_string(),
        LoadRequest::Local(store) => store.label.clone(),
        LoadRequest::Remote(input) => input.clone(),
    };
    let options = options(request, load, host.switches());
    let started_s = now_s();
    let upload = Upload { host, gpu, request, name: name.clone(), options: &options, started_s };
    match request {
        LoadRequest::Preset(choice) => {
            let source_model = Breathing { inner: preset(*choice), last_yield_s: Cell::new(now_s()) };
            upload.run(&source_model, None, None, TimeToReady::default()).await
        }
        LoadRequest::Local(store) => {
            post(&FromEngine::Status(Status::Opening(name)));
            let checkpoint = Checkpoint::open(store).await.map_err(before_free)?;
            let tokenizer = read_tokenizer(store).await.map_err(before_free)?;
            let kind = checkpoint.dtypes.join("+");
            let before = TimeToReady {
                source: LoadSource::Files,
                stored_bytes: checkpoint.file_bytes(),
                open_s: now_s() - started_s,
                ..TimeToReady::default()
            };
            upload.run(&checkpoint, Some(kind), tokenizer, before).await
        }
        LoadRequest::Remote(input) => {
            let base = remote_folder(host, input).map_err(before_free)?;
            post(&FromEngine::Status(Status::Opening(name)));
            let abort = web_sys::AbortController::new()
                .map_err(|e| before_free(Error::Invalid(crate::model::source::js_message(&e))))?;
            host.set_abort(Some(abort.clone()));
            let store = RemoteStore::new(&base, abort.signal(), host.manifest(), store_events(host, true))
                .await
                .map_err(before_free)?;
            let opened = async {
                let checkpoint = Checkpoint::open(&store).await?;
                let tokenizer = read_tokenizer(&store).await?;
                Ok::<_, Error>((checkpoint, tokenizer))
            };
            let (checkpoint, tokenizer) = opened.await.map_err(before_free)?;
            let before = TimeToReady {
                source: if store.downloaded() > 0 { LoadSource::Network } else { LoadSource::Cache },
                fetched_bytes: store.downloaded(),
                stored_bytes: store.stored(),
                download_s: store.download_s(),
                open_s: (now_s() - started_s - store.download_s()).max(0.0),
                ..TimeToReady::default()
            };
            post(&FromEngine::Download(None));
            host.set_abort(None);
            let kind = checkpoint.dtypes.join("+");
            upload.run(&checkpoint, Some(kind), tokenizer, before).await
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

/// One upload: what it replaces the loaded model with, and how.
struct Upload<'a> {
    host: &'a Host,
    gpu: Rc<Gpu>,
    request: &'a LoadRequest,
    /// The status line's name for it.
    name: String,
    options: &'a EngineOptions,
    /// When the load began (on [`crate::clock`]): its time to ready's start.
    started_s: f64,
}

impl Upload<'_> {
    /// Frees the loaded model and uploads `provider` in its place; `before`, the load's time to
    /// ready until now (source, bytes, download, opening).
    async fn run<P: TensorProvider>(
        self,
        provider: &P,
        weights_kind: Option<String>,
        tokenizer: Option<Rc<Tokenizer>>,
        before: TimeToReady,
    ) -> std::result::Result<(), Failure> {
        let Upload { host, gpu, request, name, options, started_s } = self;
        let source = request.source();
        drop(host.take_model());
        post(&FromEngine::Model(None));
        post(&FromEngine::Choice(source.clone()));
        post(&FromEngine::Status(Status::LoadingWeights(name.clone(), 0)));
        let mut shown = 0;
        let load_from_s = now_s();
        let loaded = ForwardPass::load(gpu, provider, options, &mut |done, total| {
            let percent = (done * 100 / total.max(1)) as u32;
            if percent != shown {
                shown = percent;
                post(&FromEngine::Status(Status::LoadingWeights(name.clone(), percent)));
            }
        })
        .await;
        let mut model = loaded.map_err(|error| Failure { error, model_freed: true })?;
        let after_load = before.after_load(&model.load_times, now_s() - load_from_s);
        post(&FromEngine::Status(Status::ChoosingKernels(name.clone())));
        let trial =
            choose_kernels(&mut model, options.kernels).await.map_err(|error| Failure { error, model_freed: true })?;
        let after_trial = match &trial {
            Some(t) => after_load.after_trial(t),
            None => after_load,
        };
        // The whole as the page waited for it: what came between the phases (freeing the old
        // model, posting updates) is its `other`.
        let ready = TimeToReady { ready_s: now_s() - started_s, ..after_trial };
        host.set_time_to_ready(Some(ready.clone()));
        host.set_model_trial(trial.clone());
        let c = &model.cfg;
        let l = &model.limits;
        post(&FromEngine::Model(Some(ModelInfo {
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
            time_to_ready: Some(ready),
            kernel_trial: trial,
        })));
        host.set_model_tokenizer(tokenizer);
        let capacity = model.limits.clone();
        host.put_model(LoadedModel { model, capacity });
        post(&FromEngine::Status(Status::Ready));
        Ok(())
    }
}

/// The longest a page load spends timing kernel variants: a GPU times them all in well under a
/// second; a software adapter (SwiftShader, lavapipe: ~30 s for all of them) stops at this, keeps
/// the defaults of what it did not time, and says so.
const PAGE_TRIAL_BUDGET_S: f64 = 8.0;

/// The engine's choice among its kernel variants (`engine::trial`) as `?kernel-trial` says: an
/// earlier load's choice with the same key, kept in Cache Storage, or the variants timed now
/// (prompts of 128 and 512 tokens, decode at 1 and the page's default batch; two timings each,
/// within [`PAGE_TRIAL_BUDGET_S`]) and kept. `None` with `off`.
async fn choose_kernels(model: &mut ForwardPass, switches: KernelSwitches) -> Result<Option<Trial>> {
    let batch = Field::MaxBatch.default_value().parse().unwrap_or(1);
    let plan = TrialPlan { repeats: 2, budget_s: PAGE_TRIAL_BUDGET_S, ..TrialPlan::new(&[], batch) };
    trial::choose_kernels(model, &plan, &switches, &PageTrials).await
}

/// The page's kept kernel trials, in Cache Storage (the worker has no localStorage).
struct PageTrials;

impl trial::TrialStore for PageTrials {
    async fn kept(&self, key: &str) -> Option<Trial> {
        crate::web::cache::kept_trial(key).await
    }

    async fn keep(&self, trial: &Trial) {
        // A storage that cannot keep it costs the next load a trial, nothing else.
        let _ = crate::web::cache::keep_trial(trial).await;
    }
}

/// A model source that lets the worker take messages (a Cancel, another command) while weights
/// are generated: generating them is pure CPU work with no await that yields, so every 50 ms this
/// one waits for the event loop.
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
