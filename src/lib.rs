//! tokenmeter: an LLM inference benchmark lab. Qwen3 runs through WGSL compute shaders on WebGPU
//! (in the browser) or Vulkan (natively); the same code serves the CLI and the app.
//!
//! Module map (arrows go one way: ui -> engine -> model/gpu):
//! - [`model`]: config, validated safetensors, byte sources, weight upload, tokenizer, CPU reference.
//! - [`gpu`]: device, the kernel table (one WGSL file per family), readback.
//! - [`engine`]: the forward pass over a paged KV cache, generation.
//! - [`clock`]: monotonic seconds on both targets.
//! - [`remote`]: the benchmark against an OpenAI-compatible server (SSE, bodies, records; native client).
//! - `web` (wasm only): the page.

pub mod bench;
pub mod clock;
pub mod engine;
pub mod error;
pub mod gpu;
pub mod model;
pub mod remote;
#[cfg(target_arch = "wasm32")]
pub mod web;

pub use error::{Error, Result};
