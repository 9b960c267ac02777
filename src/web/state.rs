//! The page's shared state. The GPU, the tokenizer and the loaded model live outside the
//! reactive graph (`StoredValue::new_local`, they are not `Send`); a task that needs the model
//! takes it out of its slot and puts it back when done, so no `RefCell` borrow spans an await.
//! Views see only snapshots, through signals.

use super::charts::ChartData;
use super::history::Entry;
use super::settings::{Caps, Settings};
use super::sources::{CachedModel, DownloadProgress};
use super::sweep::SweepView;
use super::target::TargetSettings;
use crate::bench::Lang;
use crate::engine::forward::EngineLimits;
use crate::engine::ForwardPass;
use crate::gpu::kernels::KernelSwitches;
use crate::gpu::Gpu;
use crate::model::source::BlobStore;
use crate::model::Tokenizer;
use leptos::prelude::*;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;

/// The models the page offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ModelChoice {
    Embedded,
    Qwen3_0_6b,
    Qwen3_1_7b,
}

impl ModelChoice {
    pub const ALL: [ModelChoice; 3] = [ModelChoice::Embedded, ModelChoice::Qwen3_0_6b, ModelChoice::Qwen3_1_7b];

    /// The name in the URL and in the results JSON (the CLI's `--synthetic` names).
    pub fn key(self) -> &'static str {
        match self {
            ModelChoice::Embedded => "embedded",
            ModelChoice::Qwen3_0_6b => "qwen3-0.6b",
            ModelChoice::Qwen3_1_7b => "qwen3-1.7b",
        }
    }

    pub fn from_key(key: &str) -> Option<ModelChoice> {
        ModelChoice::ALL.into_iter().find(|m| m.key() == key)
    }
}

/// What the loaded model is, by name: the key in the URL (`model=`) and in the results JSON.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum ModelSource {
    Preset(ModelChoice),
    /// Files picked or dropped (not restorable from a link).
    Local {
        label: String,
    },
    /// A Hugging Face repo id or a folder URL, as typed.
    Remote {
        input: String,
    },
}

impl ModelSource {
    pub fn key(&self) -> String {
        match self {
            ModelSource::Preset(choice) => choice.key().into(),
            ModelSource::Local { label } => format!("local:{label}"),
            ModelSource::Remote { input } => input.clone(),
        }
    }

    /// A `model=` value: a preset name, or anything with a `/` (a repo id or URL).
    pub fn from_key(key: &str) -> Option<ModelSource> {
        match ModelChoice::from_key(key) {
            Some(choice) => Some(ModelSource::Preset(choice)),
            None if key.contains('/') && !key.starts_with("local:") => Some(ModelSource::Remote { input: key.into() }),
            None => None,
        }
    }
}

/// A load the page can repeat: to restore the previous model when a new one fails on the GPU.
#[derive(Clone)]
pub enum LoadRequest {
    Preset(ModelChoice),
    Local(BlobStore),
    Remote(String),
}

impl LoadRequest {
    pub fn source(&self) -> ModelSource {
        match self {
            LoadRequest::Preset(choice) => ModelSource::Preset(*choice),
            LoadRequest::Local(store) => ModelSource::Local { label: store.label.clone() },
            LoadRequest::Remote(input) => ModelSource::Remote { input: input.clone() },
        }
    }
}

/// A model named by the page's link (`?model=<URL or repo>`), not yet in the cache: nothing is
/// downloaded until the user says yes.
#[derive(Clone, Debug, PartialEq)]
pub struct PendingLink {
    /// As the link gave it (shown as text).
    pub input: String,
    /// The folder URL the files would come from (shown as text).
    pub base: String,
    /// The weights' size, when the server says it before the download.
    pub bytes: Option<u64>,
}

/// A model on the GPU, with the engine sizes it was loaded for (a run may use less).
pub struct LoadedModel {
    pub model: ForwardPass,
    pub capacity: EngineLimits,
}

/// What the loaded model is, for the model card and the status line.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ModelInfo {
    pub source: ModelSource,
    /// The status line's name for it.
    pub name: String,
    /// Random weights (presets), or the checkpoint's dtypes ("BF16").
    pub weights_kind: Option<String>,
    pub layers: usize,
    pub hidden: usize,
    pub vocab: usize,
    pub weight_bytes: u64,
    /// The weights and speculation it was uploaded with.
    pub load: super::settings::LoadOptions,
    pub kv_tokens: usize,
    pub caps: Caps,
    /// Its shape, for the Plan card's simulator.
    pub config: crate::model::Qwen3Config,
}

/// The status line.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Status {
    Starting,
    RequestingAdapter,
    LoadingTokenizer,
    /// Fetching or reading files and checking them.
    Opening(String),
    /// Weights generated or read and uploaded so far, in percent.
    LoadingWeights(String, u32),
    Ready,
    /// A model named by the link waits for the user's yes (see [`PendingLink`]).
    AwaitingConfirmation,
    /// Start-up found no WebGPU ([`super::no_webgpu::NoWebGpu`]): only a server can be run.
    NoWebGpu,
    Error(String),
}

/// What the page is busy with; the buttons follow it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Idle,
    Loading,
    Running,
    Generating,
    /// The roofline probe (adapter card).
    Measuring,
    /// The Plan card's simulation (in the engine worker, which nothing else then shares).
    Planning,
}

/// Progress of a benchmark run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunProgress {
    Baseline,
    Requests { finished: usize, total: usize },
}

#[derive(Clone, Copy)]
pub struct AppState {
    pub lang: RwSignal<Lang>,
    pub status: RwSignal<Status>,
    pub adapter: RwSignal<Option<crate::gpu::context::AdapterSummary>>,
    /// Why the engine has no device, when start-up found no WebGPU (the engine target is off).
    pub no_webgpu: RwSignal<Option<super::no_webgpu::NoWebGpu>>,
    /// The model loaded (or being loaded).
    pub choice: RwSignal<ModelSource>,
    /// Why the last model load failed (the previous model stays loaded).
    pub load_error: RwSignal<Option<String>>,
    pub download: RwSignal<Option<DownloadProgress>>,
    /// A model named by the link, waiting for the user's yes before any download.
    pub pending_link: RwSignal<Option<PendingLink>>,
    pub cached: RwSignal<Vec<CachedModel>>,
    /// performance.now()'s step in ms, measured at start.
    pub timer_resolution_ms: RwSignal<Option<f64>>,
    pub model_info: RwSignal<Option<ModelInfo>>,
    pub phase: RwSignal<Phase>,
    pub settings: Settings,
    /// Where runs send their requests: this engine or a server.
    pub target: TargetSettings,
    /// A dataset file instead of drawn lengths (the settings card's picker).
    pub dataset: super::dataset::DatasetState,
    pub progress: RwSignal<Option<RunProgress>>,
    pub run_error: RwSignal<Option<String>>,
    /// What the charts show: the live run, or the run in the report.
    pub charts: RwSignal<ChartData>,
    /// The rate sweep in progress or last done (`None`: the last run had one rate).
    pub sweep: RwSignal<Option<SweepView>>,
    /// The run in the report.
    pub shown: RwSignal<Option<Arc<Entry>>>,
    pub history: RwSignal<Vec<Arc<Entry>>>,
    /// Set when older runs had to go to make room in localStorage.
    pub history_dropped: RwSignal<bool>,
    /// The engine switches of the link (`?kernels=`, …), parsed once at start and sent to the
    /// engine worker: every model it loads gets them.
    pub switches: LinkSwitches,
    /// The roofline probe's result on the adapter card (None: not measured; Err: why it failed).
    pub roofline: RwSignal<Option<std::result::Result<crate::gpu::roofline::Roofline, String>>>,
    /// The playground's answer as it streams.
    pub playground: Generation,
    /// The Plan card's last answer from the worker (None: none asked for, or it is being computed).
    pub planned: RwSignal<Option<std::result::Result<crate::planner::capacity::Capacity, String>>>,
    /// The engine worker, and the command in progress's view (see [`super::link`]).
    pub engine: StoredValue<Option<Rc<super::link::Link>>, LocalStorage>,
    /// The run in progress: long tasks of each rate done so far, and the watch of the current one
    /// (the main thread's, so the page's side).
    pub long_tasks: StoredValue<LongTaskLog, LocalStorage>,
}

/// The playground's output: the answer so far, its pieces with their gaps, the timing line.
#[derive(Clone, Copy)]
pub struct Generation {
    pub answer: RwSignal<String>,
    pub pieces: RwSignal<Vec<Piece>>,
    pub timing: RwSignal<String>,
}

/// One piece of the answer as it appeared: its text and the time since the previous piece.
#[derive(Clone, Debug, PartialEq)]
pub struct Piece {
    pub text: String,
    pub gap_ms: f64,
}

/// The engine's side: what a run, a load or a generation works with, in the engine worker
/// ([`super::worker`]), outside any reactive graph (none of it is `Send`). The loaders
/// ([`super::loader`]) fill it, the run service ([`super::service`]) and the playground borrow the
/// model from it. A task that needs the model takes it out of its slot and puts it back when done,
/// so no `RefCell` borrow spans an await.
pub struct Host {
    model: RefCell<Option<LoadedModel>>,
    gpu: RefCell<Option<Rc<Gpu>>>,
    /// The loaded model's own tokenizer, if it has one.
    tokenizer: RefCell<Option<Rc<Tokenizer>>>,
    default_tokenizer: RefCell<Option<Rc<Tokenizer>>>,
    /// How the loaded model was loaded, to load it again.
    loaded_request: RefCell<Option<LoadRequest>>,
    /// Aborts the download in progress.
    abort: RefCell<Option<web_sys::AbortController>>,
    /// Set by Cancel; the run in progress stops at its next step.
    cancel: Rc<Cell<bool>>,
    /// The engine switches of the page's link: every model loaded gets them.
    switches: Cell<LinkSwitches>,
    /// The page's URL, which relative URLs (the page's tokenizer, a model folder) are against.
    page_url: RefCell<String>,
    /// The model cache's record, as the page last sent it or a download changed it.
    manifest: RefCell<super::cache::Manifest>,
}

impl Default for Host {
    fn default() -> Host {
        Host::new()
    }
}

impl Host {
    pub fn new() -> Host {
        Host {
            model: RefCell::new(None),
            gpu: RefCell::new(None),
            tokenizer: RefCell::new(None),
            default_tokenizer: RefCell::new(None),
            loaded_request: RefCell::new(None),
            abort: RefCell::new(None),
            cancel: Rc::new(Cell::new(false)),
            switches: Cell::new(LinkSwitches::default()),
            page_url: RefCell::new(String::new()),
            manifest: RefCell::new(Default::default()),
        }
    }

    /// The page's link and URL, sent at start.
    pub fn set_page(&self, switches: LinkSwitches, page_url: String) {
        self.switches.set(switches);
        *self.page_url.borrow_mut() = page_url;
    }

    pub fn switches(&self) -> LinkSwitches {
        self.switches.get()
    }

    /// `url` made absolute against the page's URL.
    pub fn page_relative(&self, url: &str) -> crate::Result<String> {
        super::cache::absolute(url, &self.page_url.borrow())
    }

    pub fn manifest(&self) -> super::cache::Manifest {
        self.manifest.borrow().clone()
    }

    pub fn set_manifest(&self, manifest: super::cache::Manifest) {
        *self.manifest.borrow_mut() = manifest;
    }

    /// Takes the model out of its slot (None when absent or already taken).
    pub fn take_model(&self) -> Option<LoadedModel> {
        self.model.borrow_mut().take()
    }

    pub fn put_model(&self, loaded: LoadedModel) {
        *self.model.borrow_mut() = Some(loaded);
    }

    pub fn gpu(&self) -> Option<Rc<Gpu>> {
        self.gpu.borrow().clone()
    }

    pub fn set_gpu(&self, gpu: Option<Rc<Gpu>>) {
        *self.gpu.borrow_mut() = gpu;
    }

    /// The tokenizer runs use: the model's own, else the page's Qwen3 one.
    pub fn tokenizer(&self) -> Option<Rc<Tokenizer>> {
        self.tokenizer.borrow().clone().or_else(|| self.default_tokenizer())
    }

    /// What [`Host::tokenizer`] is, for messages and records.
    pub fn tokenizer_name(&self) -> &'static str {
        if self.tokenizer.borrow().is_some() {
            "the model's tokenizer.json"
        } else {
            "the page's Qwen3 tokenizer.json"
        }
    }

    /// The model's own tokenizer, or `None` for the page's default.
    pub fn set_model_tokenizer(&self, tokenizer: Option<Rc<Tokenizer>>) {
        *self.tokenizer.borrow_mut() = tokenizer;
    }

    pub fn default_tokenizer(&self) -> Option<Rc<Tokenizer>> {
        self.default_tokenizer.borrow().clone()
    }

    pub fn set_default_tokenizer(&self, tokenizer: Rc<Tokenizer>) {
        *self.default_tokenizer.borrow_mut() = Some(tokenizer);
    }

    pub fn loaded_request(&self) -> Option<LoadRequest> {
        self.loaded_request.borrow().clone()
    }

    pub fn set_loaded_request(&self, request: Option<LoadRequest>) {
        *self.loaded_request.borrow_mut() = request;
    }

    pub fn abort(&self) -> Option<web_sys::AbortController> {
        self.abort.borrow().clone()
    }

    pub fn set_abort(&self, abort: Option<web_sys::AbortController>) {
        *self.abort.borrow_mut() = abort;
    }

    /// When the device was lost or reported an error: drops it and its model (the next load opens
    /// a new device) and says why.
    pub fn forget_faulty_gpu(&self) -> Option<String> {
        let fault = self.gpu()?.fault()?;
        drop(self.take_model());
        self.set_gpu(None);
        Some(fault.to_string())
    }

    /// The run's cancel flag (shared with the session).
    pub fn cancel_flag(&self) -> Rc<Cell<bool>> {
        self.cancel.clone()
    }
}

/// The kernel and engine switches a link may carry, as the CLI's flags: `?kernels=gpu|cpu`,
/// `?fused=off`, `?prefill-tiles=off`, `?subgroups=off`, `?matmul-tile=4`, `?gemv-max-m=N`,
/// `?weight-storage=buffer|texture` ([`KernelSwitches::from_query`]) and `?overlap=off`. Every
/// model the page loads gets them ([`crate::engine::EngineOptions`]), and they stay in the link.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LinkSwitches {
    pub kernels: KernelSwitches,
    /// `Some(false)`: CPU/GPU overlap off.
    pub overlap: Option<bool>,
}

impl LinkSwitches {
    /// From the page's query string; a value that does not parse leaves the defaults and says
    /// which key was wrong.
    pub fn from_query() -> (LinkSwitches, Option<String>) {
        let query = super::browser::query_param;
        let parsed = KernelSwitches::from_query(query).and_then(|kernels| {
            let overlap = query("overlap")
                .map(|v| crate::gpu::kernels::parse_on_off(&v).map_err(|e| format!("?overlap=: {e}")))
                .transpose()?;
            Ok(LinkSwitches { kernels, overlap })
        });
        match parsed {
            Ok(s) => (s, None),
            Err(e) => (LinkSwitches::default(), Some(format!("the link's engine switches were ignored: {e}"))),
        }
    }

    /// The link's pairs for the switches set.
    pub fn query_pairs(&self) -> Vec<(&'static str, String)> {
        let mut pairs = self.kernels.query_pairs();
        if self.overlap == Some(false) {
            pairs.push(("overlap", "off".to_string()));
        }
        pairs
    }
}

/// See [`AppState::long_tasks`].
#[derive(Default)]
pub struct LongTaskLog {
    pub watch: Option<super::browser::LongTaskWatch>,
    /// (rate, what its run saw), in the order the rates ran.
    pub done: Vec<(f64, crate::bench::LongTasks)>,
}

impl AppState {
    pub fn new(lang: Lang, choice: ModelSource, history: Vec<Arc<Entry>>) -> AppState {
        let (switches, switch_error) = LinkSwitches::from_query();
        AppState {
            lang: RwSignal::new(lang),
            status: RwSignal::new(Status::Starting),
            adapter: RwSignal::new(None),
            no_webgpu: RwSignal::new(None),
            choice: RwSignal::new(choice),
            load_error: RwSignal::new(switch_error),
            download: RwSignal::new(None),
            pending_link: RwSignal::new(None),
            cached: RwSignal::new(Vec::new()),
            timer_resolution_ms: RwSignal::new(None),
            model_info: RwSignal::new(None),
            phase: RwSignal::new(Phase::Loading),
            settings: Settings::from_query(),
            target: TargetSettings::from_query(),
            dataset: super::dataset::DatasetState::new(),
            progress: RwSignal::new(None),
            run_error: RwSignal::new(None),
            charts: RwSignal::new(ChartData::default()),
            sweep: RwSignal::new(None),
            shown: RwSignal::new(None),
            history: RwSignal::new(history),
            history_dropped: RwSignal::new(false),
            switches,
            roofline: RwSignal::new(None),
            playground: Generation {
                answer: RwSignal::new(String::new()),
                pieces: RwSignal::new(Vec::new()),
                timing: RwSignal::new(String::new()),
            },
            planned: RwSignal::new(None),
            engine: StoredValue::new_local(None),
            long_tasks: StoredValue::new_local(LongTaskLog::default()),
        }
    }
}
