//! tokenmeter: an LLM inference benchmark lab. Qwen3 runs through WGSL compute shaders on WebGPU
//! (in the browser) or Vulkan (natively); the same code serves the CLI and the app.
//!
//! Module map, ground floor first; each uses only those above it in this list (`clock`, `error`,
//! `latency` and `limits` everywhere):
//! - [`gpu`]: device, weight formats, the kernels (registry, options, pipelines, recorder, one
//!   module per op), readback, roofline.
//! - [`model`]: config, validated safetensors, byte sources, weight upload, tokenizer, CPU reference.
//! - [`engine`]: the forward pass over a paged KV cache, the continuous batcher, its scheduler,
//!   generation.
//! - [`bench`]: workloads, records, metrics, diagnosis, reports, and the one benchmark session.
//! - [`planner`]: the capacity planner: a step-cost model fitted on measured steps, and the engine
//!   on a virtual clock it advances.
//! - [`remote`]: the benchmark against an OpenAI-compatible server (SSE, bodies, records, clients).
//! - `web` (wasm only): the page; `src/bin`: the CLI.
//! - [`clock`]: monotonic seconds on both targets; [`latency`]: the TTFT and TPOT definitions;
//!   [`limits`]: every bound on outside input (configs, headers, flags, form fields, file sizes).

// A function a reader can hold: at most 150 lines (clippy.toml), held by CI's `-D warnings`.
#![warn(clippy::too_many_lines)]

pub mod bench;
pub mod clock;
pub mod engine;
pub mod error;
pub mod gpu;
pub mod latency;
pub mod limits;
pub mod model;
pub mod planner;
pub mod remote;
#[cfg(target_arch = "wasm32")]
pub mod web;

pub use error::{Error, Result};
