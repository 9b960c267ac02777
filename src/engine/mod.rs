//! The inference engine: the GPU forward pass over a paged KV cache, and generation on top of it.

#[allow(clippy::module_inception)]
pub mod engine;
pub mod generate;
pub mod kv;
pub mod model;
pub mod scheduler;

pub use engine::{Engine, Event, EventKind, Request, StepStats};
pub use generate::{generate, generate_greedy, Completion};
pub use model::{Batch, Model, ModelOptions};
pub use scheduler::{FinishReason, SamplingParams};
