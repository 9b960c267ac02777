//! The inference engine: the GPU forward pass over a paged KV cache, and generation on top of it.

pub mod generate;
pub mod kv;
pub mod model;

pub use generate::{generate_greedy, Generation};
pub use model::{Batch, Model, ModelOptions};
