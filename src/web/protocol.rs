//! The messages between the page and its engine worker, the one module both threads share: the
//! page (`web::page`) sends [`ToEngine`] commands, the worker (`web::worker`) answers with
//! [`FromEngine`] updates. What they carry is the library's types or the plain types defined here
//! ([`model`], [`run`], [`charts`]), so neither side imports the other. Each message is JSON (the
//! types below, which the browser tests round-trip) beside a list of `Blob`s for the one command
//! that carries files (a local model's): a `Blob` is a handle, so the weights are never copied into
//! either heap by the crossing.

pub mod charts;
pub mod model;
pub mod run;

pub use charts::ChartData;
pub use model::{
    Caps, DownloadProgress, LinkSwitches, LoadOptions, LoadRequest, Manifest, ModelChoice, ModelInfo, ModelSource,
    NoWebGpu, Status,
};
pub use run::{Command, Context, DatasetChoice, Destination, Ended, ExperimentEnd, Refused, RunRequest};

use crate::bench::BenchResult;
use crate::gpu::context::AdapterSummary;
use crate::gpu::roofline::Roofline;
use serde::{Deserialize, Serialize};

/// What the page asks of the engine worker.
#[derive(Debug, Serialize, Deserialize)]
pub enum ToEngine {
    /// Open the device and read the page's tokenizer (`tokenizer.json` beside `page_url`, read
    /// without a device too: a server's chat runs need it); answered by [`FromEngine::Started`].
    Start { switches: LinkSwitches, page_url: String },
    /// Load a model in place of the loaded one, uploaded with `load`; answered by updates, then
    /// [`FromEngine::LoadEnded`]. `manifest`: the page's record of the model cache (kept in
    /// localStorage, which a worker has not).
    Load { request: LoadWire, load: LoadOptions, manifest: Manifest },
    /// The loaded model again, uploaded with other weights, speculation or prefix caching.
    Reload { load: LoadOptions, manifest: Manifest },
    /// Stop the download in progress (the load then fails with "cancelled").
    CancelDownload,
    /// Greedy generation from the chat template around `prompt` (the playground).
    Generate { prompt: String, max_new_tokens: usize },
    /// The roofline probe on the worker's device.
    Roofline,
    /// *Check this GPU*: the engine checks itself on the loaded model (`engine::verify`);
    /// answered by [`FromEngine::Verified`].
    Verify,
    /// A run, a sweep or an experiment (the run service's [`Command`]); answered by
    /// [`FromEngine::Refused`] or by [`FromEngine::Run`] updates ending with `Ended`.
    Command { cx: Box<Context>, command: Command },
    /// Stop the run in progress at its next step.
    Cancel,
    /// The Plan card: the capacity planner on `runs` (this GPU's, one workload at several rates)
    /// with the loaded model's shape; answered by [`FromEngine::Planned`]. Its simulation is CPU
    /// work of a second or more, kept off the page's thread.
    Plan { runs: Vec<BenchResult>, cfg: Box<crate::model::Qwen3Config>, ttft_slo_ms: f64, min_requests: usize },
}

/// A model load, as it crosses: a local model's files are the message's blobs, in `names` order.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum LoadWire {
    Preset(ModelChoice),
    Local { label: String, names: Vec<String> },
    Remote(String),
}

/// What the engine worker tells the page.
#[derive(Debug, Serialize, Deserialize)]
pub enum FromEngine {
    /// The device the worker opened (at start, and again after a lost one was replaced).
    Adapter(AdapterSummary),
    Status(Status),
    /// Start-up ended: the tokenizer is ready, and the device too (`None`) or why the browser
    /// offers none; or why start-up failed.
    Started(Result<Option<NoWebGpu>, String>),
    /// The loaded model (`None`: none, or it is being replaced).
    Model(Option<ModelInfo>),
    /// The model loaded or being loaded, by name.
    Choice(ModelSource),
    LoadError(Option<String>),
    Download(Option<DownloadProgress>),
    /// The model cache's record changed: the page keeps it.
    Manifest(Manifest),
    /// A load ended, loaded or not (its outcome came in the updates before).
    LoadEnded,
    /// A piece of the playground's answer as it appeared, and ms since the previous piece.
    Piece {
        text: String,
        gap_ms: f64,
    },
    /// The playground's generation ended: its timing line, or the error.
    Generated(String),
    Roofline(Result<Roofline, String>),
    Verified(Result<crate::engine::verify::Verification, String>),
    /// The device was lost or reported an error: its model is gone; the next load opens a new one.
    DeviceLost(String),
    /// A command did not start.
    Refused(Refused),
    /// The Plan card's capacity, or why there is none.
    Planned(Result<Box<crate::planner::capacity::Capacity>, String>),
    Run(RunUpdate),
}

/// What the page draws of a command in progress: the service's reports, owned, with the live
/// records already drawn into charts (by the worker, off the page's thread).
#[derive(Debug, Serialize, Deserialize)]
pub enum RunUpdate {
    /// The rates it will run and the TTFT SLO.
    Began {
        #[serde(with = "crate::bench::traffic::workload::infinite_rate::list")]
        rates: Vec<f64>,
        ttft_slo_ms: Option<f64>,
    },
    RateStarted {
        #[serde(with = "crate::bench::traffic::workload::infinite_rate")]
        rate: f64,
        requests: usize,
    },
    /// Requests ended so far; the charts of the records so far, drawn by the worker at most every
    /// 0.1 s (none for a server, which streams no live records).
    Progress {
        finished: usize,
        total: usize,
        charts: Option<Box<ChartData>>,
    },
    RateDone {
        #[serde(with = "crate::bench::traffic::workload::infinite_rate")]
        rate: f64,
        result: Box<BenchResult>,
    },
    /// An experiment uploads B's own copy of the model: percent done.
    LoadingB(u32),
    Ended(Box<Ended>),
}

/// The wire form of a message: JSON (always valid: every type here serialises).
pub fn encode<T: Serialize>(message: &T) -> String {
    serde_json::to_string(message).expect("every protocol message serialises")
}

/// A message back from its JSON, or why not (a page and a worker from different builds).
pub fn decode<T: for<'de> Deserialize<'de>>(json: &str) -> Result<T, String> {
    serde_json::from_str(json).map_err(|e| format!("a message between the page and its engine did not parse: {e}"))
}
