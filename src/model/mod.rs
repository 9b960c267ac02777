//! Everything about the checkpoint: config, validated safetensors, where bytes come from,
//! the tensor list the config implies, upload to the GPU, the tokenizer, and a CPU reference.

pub mod checkpoint;
pub mod config;
pub mod json;
pub mod quant;
pub mod reference;
pub mod safetensors;
pub mod source;
pub mod synthetic;
pub mod tokenizer;
pub mod weights;

pub use checkpoint::{expected_tensors, Checkpoint, TensorProvider};
pub use config::Qwen3Config;
pub use source::{ByteSource, MemStore, ModelStore};
pub use tokenizer::Tokenizer;
