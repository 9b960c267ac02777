//! The model and its loading, as both threads name them: which model ([`ModelChoice`],
//! [`ModelSource`], [`LoadRequest`]), what the loaded one is ([`ModelInfo`]), the status line, the
//! link's engine switches, why there is no WebGPU, a download's progress and the model cache's
//! record.

use crate::gpu::kernels::KernelSwitches;
use crate::model::source::BlobStore;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

pub use crate::bench::request::{Caps, LoadOptions};

/// The models the page offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
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
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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

/// What the loaded model is, for the model card and the status line.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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
    pub load: LoadOptions,
    pub kv_tokens: usize,
    pub caps: Caps,
    /// Its shape, for the Plan card's simulator.
    pub config: crate::model::Qwen3Config,
    /// Its load, phase by phase, from the load's start to the first token.
    #[serde(default)]
    pub time_to_ready: Option<crate::bench::record::ready::TimeToReady>,
    /// How its kernels were chosen (`engine::trial`); absent with `?kernel-trial=off`.
    #[serde(default)]
    pub kernel_trial: Option<crate::engine::trial::Trial>,
}

/// The status line.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Status {
    Starting,
    RequestingAdapter,
    LoadingTokenizer,
    /// Fetching or reading files and checking them.
    Opening(String),
    /// Weights generated or read and uploaded so far, in percent.
    LoadingWeights(String, u32),
    /// The engine timing its kernel variants on this adapter (`engine::trial`).
    ChoosingKernels(String),
    Ready,
    /// A model named by the link waits for the user's yes (the page's `PendingLink`).
    AwaitingConfirmation,
    /// Start-up found no WebGPU ([`NoWebGpu`]): only a server can be run.
    NoWebGpu,
    Error(String),
}

/// The kernel and engine switches a link may carry, as the CLI's flags: `?kernels=gpu|cpu`,
/// `?fused=off`, `?prefill-tiles=off`, `?subgroups=off`, `?matmul-tile=4`, `?gemv-max-m=N`,
/// `?weight-storage=buffer|texture` ([`KernelSwitches::from_query`]) and `?overlap=off`. Every
/// model the page loads gets them ([`crate::engine::EngineOptions`]), and they stay in the link.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LinkSwitches {
    pub kernels: KernelSwitches,
    /// `Some(false)`: CPU/GPU overlap off.
    pub overlap: Option<bool>,
}

impl LinkSwitches {
    /// The link's pairs for the switches set.
    pub fn query_pairs(&self) -> Vec<(&'static str, String)> {
        let mut pairs = self.kernels.query_pairs();
        if self.overlap == Some(false) {
            pairs.push(("overlap", "off".to_string()));
        }
        pairs
    }
}

/// Why the page's engine has no GPU device. wgpu's own error lists the native backends it was
/// built without, which tells a user nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum NoWebGpu {
    /// `navigator.gpu` is absent in the worker: the browser has no WebGPU, or it is turned off.
    Missing,
    /// `navigator.gpu` is there, but `requestAdapter()` answered null: no GPU or driver the
    /// browser supports.
    NoAdapter,
}

impl NoWebGpu {
    /// The name in the notice's `data-why` (what the end-to-end test reads).
    pub fn key(self) -> &'static str {
        match self {
            NoWebGpu::Missing => "missing",
            NoWebGpu::NoAdapter => "no-adapter",
        }
    }
}

/// What the model cache holds besides the bytes: each file's size, and the files the server said it
/// does not have (a single-file model has no index), so opening a cached model needs no request.
/// The page keeps it (in localStorage: `web::cache`); the worker gets it with each load and sends
/// it back as downloads change it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub sizes: BTreeMap<String, u64>,
    pub missing: BTreeSet<String>,
}

/// A download in progress.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DownloadProgress {
    pub file: String,
    pub file_bytes: u64,
    /// From Content-Length, when the server sends it.
    pub file_total: Option<u64>,
    /// Bytes of every file of this load so far, and the seconds they took.
    pub bytes: u64,
    pub elapsed_s: f64,
}

impl DownloadProgress {
    /// Fraction of the current file, when its size is known.
    pub fn fraction(&self) -> Option<f64> {
        self.file_total.filter(|&t| t > 0).map(|t| (self.file_bytes as f64 / t as f64).min(1.0))
    }

    /// "model.safetensors · 12.6 / 1192.6 MB · 35.2 MB/s · ETA 34 s".
    pub fn text(&self) -> String {
        let mb = |b: u64| b as f64 / 1e6;
        let rate = if self.elapsed_s > 0.0 { self.bytes as f64 / self.elapsed_s } else { 0.0 };
        let size = match self.file_total {
            Some(total) => format!("{:.1} / {:.1} MB", mb(self.file_bytes), mb(total)),
            None => format!("{:.1} MB", mb(self.file_bytes)),
        };
        let eta = match self.file_total {
            Some(total) if rate > 0.0 => {
                let seconds = total.saturating_sub(self.file_bytes) as f64 / rate;
                if seconds >= 90.0 {
                    format!(" · ETA {:.0} min", seconds / 60.0)
                } else {
                    format!(" · ETA {seconds:.0} s")
                }
            }
            _ => String::new(),
        };
        format!("{} · {size} · {:.1} MB/s{eta}", self.file, rate / 1e6)
    }
}
