//! One error type for everything a user can get wrong: files, configs, prompts, adapters.
//! Each variant says what and where; `Display` is the one line the CLI prints and the UI shows.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum Error {
    #[error("{path}: {message}")]
    Io { path: String, message: String },
    #[error("{path}: not found")]
    NotFound { path: String },
    #[error("{path}: invalid JSON: {message}")]
    Json { path: String, message: String },
    #[error("config.json: {0}")]
    Config(String),
    #[error("{file}: invalid safetensors: {message}")]
    Safetensors { file: String, message: String },
    #[error("{file}: tensor {tensor}: unsupported dtype {dtype} (supported: BF16, F16, F32)")]
    Dtype { file: String, tensor: String, dtype: String },
    #[error("tensor {tensor} is missing (the config implies it; looked in {looked_in})")]
    MissingTensor { tensor: String, looked_in: String },
    #[error("tensor {tensor}: shape {found:?} does not match the config, which implies {expected:?}")]
    Shape { tensor: String, expected: Vec<usize>, found: Vec<usize> },
    #[error("tokenizer.json: {0}")]
    Tokenizer(String),
    #[error("the model does not fit the adapter: {0}")]
    AdapterLimit(String),
    #[error("no GPU adapter: {0}")]
    NoAdapter(String),
    #[error("GPU error: {0}")]
    Gpu(String),
    #[error("prompt: {0}")]
    Prompt(String),
    #[error("{0}")]
    Invalid(String),
    /// A setting outside the bounds of a quality gate (`compare --min-top1 --max-kl`): a line per
    /// bound crossed, naming it and the value.
    #[error("{0}")]
    QualityGate(String),
    /// A decision that rests on a run stamped INVALID, where the caller asked for valid runs only
    /// (`compare --require-valid`): a line per invalid run with its reasons.
    #[error("{0}")]
    InvalidRun(String),
    #[error("cancelled")]
    Cancelled,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
