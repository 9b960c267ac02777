//! A run service's command and its end, as both threads name them: the page sends a [`Command`]
//! with the [`Context`] it read from its own state; the worker's run service answers with a
//! [`Refused`] before anything runs, or with updates ending in exactly one [`Ended`].

use crate::bench::base::field::Field;
use crate::bench::base::rules::Problem;
use crate::bench::traffic::dataset::Dataset;
use crate::bench::traffic::endpoint::NamedTarget;
use crate::bench::verdict::compare::Comparison;
use crate::bench::{self, BenchResult, Lang, WorkloadSpec};
use crate::remote::Endpoint;
use crate::Error;
use std::sync::Arc;

pub use crate::bench::request::{LoadOptions, RunRequest};

/// What the page asks of the service.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub enum Command {
    /// One run, or a sweep when the form has several rates.
    Run { form: Box<RunRequest>, destination: Destination },
    /// A against B (the same workload: A's), `repeats` each, run A B A B … on the page's engine.
    Experiment { a: Box<RunRequest>, b: Box<RunRequest>, repeats: usize },
}

/// Where a run's requests go, with what the request does not hold: a server's key and options (the
/// request names the server: [`RunRequest::target`]).
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub enum Destination {
    /// The page's engine, on the loaded model.
    Engine,
    /// A server, and its `/metrics` URL when the page scrapes it during the run.
    Server(#[serde(with = "endpoint_wire")] Endpoint, Option<String>),
}

impl Destination {
    /// Whether this is where `target` says the requests go: the engine, or the server at the same
    /// root with the same model and API (the service refuses a command where they differ).
    pub fn agrees_with(&self, target: &NamedTarget) -> bool {
        match (self, target) {
            (Destination::Engine, NamedTarget::Engine) => true,
            (Destination::Server(e, _), NamedTarget::Server(s)) => {
                e.base_url == s.base_url && e.api == s.api && s.served_model.as_deref().is_none_or(|m| m == e.model)
            }
            _ => false,
        }
    }
}

/// What the service needs from the page, read when the command is sent.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct Context {
    pub lang: Lang,
    /// The loaded model's name in results (`ModelSource::key`).
    pub model_key: String,
    /// The loaded model: what it was uploaded with and its context length (`None`: no model).
    pub loaded: Option<(LoadOptions, usize)>,
    /// The picked dataset (`None`: lengths are drawn).
    pub dataset: Option<DatasetChoice>,
    /// The page's part of every record (timer resolution, cross-origin isolation).
    pub page: bench::RunConfig,
}

/// Why a command did not start. The worker words what it can in the page's language (the
/// [`Context`]'s): the page shows no sentence of its own language's absence.
#[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Refused {
    /// Another run, load or generation holds the model (the buttons should have said so).
    Busy,
    /// The form asks for other weights, speculation or prefix caching than the loaded model has.
    NeedsReload,
    /// The command was sent to another target than its request names (the page's own slip).
    WrongTarget,
    /// The request breaks rules against what is loaded (the model's context, a server's needs):
    /// each problem on its field, its rule worded in the page's language; `b`: an experiment's
    /// side B (its A is the page's settings).
    Problems { b: bool, problems: Vec<(Field, String)> },
    /// The library refused the workload (a dataset's rows, say), in its words (English, as the
    /// CLI's errors).
    Invalid(String),
}

impl Refused {
    /// `problems` as a refusal, their rules worded in `lang`.
    pub fn problems(problems: &[Problem], lang: Lang, b: bool) -> Refused {
        Refused::Problems { b, problems: problems.iter().map(|p| (p.field, p.text(lang))).collect() }
    }
}

impl From<Error> for Refused {
    fn from(e: Error) -> Refused {
        Refused::Invalid(e.to_string())
    }
}

/// A parsed dataset and its options, as a run takes it (the page's dataset picker reads it).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct DatasetChoice {
    pub data: Arc<Dataset>,
    /// A trace's times are divided by this.
    pub speedup: f64,
    /// Tokens per `hash_ids` block of a shared-block trace (`--trace-block-size`).
    pub block_tokens: usize,
}

/// How a command ended (sent boxed in the last update). What was measured is kept even when it ended at an error.
#[allow(clippy::large_enum_variant)] // one a command, sent boxed
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub enum Ended {
    Run {
        /// (rate, result) for every rate run, the last possibly cut short by Cancel or an error.
        #[serde(with = "crate::bench::traffic::workload::infinite_rate::pairs")]
        results: Vec<(f64, BenchResult)>,
        /// The workload as it ran (a picked dataset's lengths and count in it).
        spec: WorkloadSpec,
        /// The model, or "model @ server".
        label: String,
        /// The engine's batch (none for a server, whose scheduler is its own).
        batch: Option<usize>,
        cancelled: bool,
        error: Option<String>,
        /// A search for the highest rate within the SLOs (`rate max`): what it found, its runs
        /// the results above.
        search: Option<crate::bench::run::max_rate::MaxRate>,
    },
    Experiment(Box<ExperimentEnd>),
}

/// An experiment's end: every finished repetition per side, in the order they ran, and the
/// comparison of them.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct ExperimentEnd {
    pub a: Vec<BenchResult>,
    pub b: Vec<BenchResult>,
    /// The last repetition that ran, finished or not (the charts show it).
    pub last: Option<BenchResult>,
    pub comparison: std::result::Result<Comparison, String>,
    /// Cancelled: only finished repetitions are compared.
    pub cancelled: bool,
    pub error: Option<String>,
    /// B's output quality against A's where B computes differently (a weight format, a kernel
    /// path): measured after the timed runs, untimed; `None` where no pass ran.
    pub quality: Option<std::result::Result<crate::bench::verdict::quality::Quality, String>>,
}

/// An endpoint crosses with its key: the worker sends the requests. (Nothing else serialises a
/// key: results describe the endpoint with [`crate::remote::Endpoint::describe`].)
mod endpoint_wire {
    use crate::remote::{Api, ApiKey, BaseUrl, Endpoint};
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize, Deserialize)]
    struct Wire {
        base_url: String,
        model: String,
        api: Api,
        api_key: Option<String>,
        thinking: Option<bool>,
    }

    pub fn serialize<S: Serializer>(e: &Endpoint, s: S) -> Result<S::Ok, S::Error> {
        Wire {
            base_url: e.base_url.as_str().to_string(),
            model: e.model.clone(),
            api: e.api,
            api_key: e.api_key.as_ref().map(|k| k.expose().to_string()),
            thinking: e.thinking,
        }
        .serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Endpoint, D::Error> {
        let w = Wire::deserialize(d)?;
        Ok(Endpoint {
            base_url: BaseUrl::parse(&w.base_url).map_err(serde::de::Error::custom)?,
            model: w.model,
            api: w.api,
            api_key: w.api_key.and_then(ApiKey::new),
            thinking: w.thinking,
        })
    }
}
