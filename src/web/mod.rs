//! The page (wasm only): the live benchmark dashboard. Press Run and watch TTFT, TPOT and
//! throughput move as simulated users arrive, then read the report and compare runs; or type a
//! prompt in the playground. Models: the embedded default (the real Qwen3 tokenizer on a small
//! random-weight Qwen3) or random weights with Qwen3-0.6B/1.7B shapes, on the browser's WebGPU.
//!
//! Two threads, two rooms, one protocol between them:
//! - [`page`]: the views and the page thread's state (signals), and its link to the worker.
//! - [`worker`]: the engine worker, a dedicated Web Worker on the page's own module that owns the
//!   device, the model and every run (so every timestamp is taken off the page's thread).
//! - [`protocol`]: the messages between them, carrying library types or plain types of its own.
//!   No file of one room imports the other (`tests/it/layers.rs` checks it).
//! - Below both: [`browser`] (fetch, the query string, localStorage, downloads), [`cache`] (the
//!   model cache) and [`sources`] (where a model comes from, as pure functions).
//!
//! User- and model-provided text is always rendered as text, never as HTML.

pub mod browser;
pub mod cache;
pub mod page;
pub mod protocol;
pub mod sources;
pub mod worker;

/// The page's start (the module's `main`). In the engine worker, which runs the same module, there
/// is no window and nothing to mount: [`worker::serve`] is its entry.
pub fn start() {
    console_error_panic_hook::set_once();
    if web_sys::window().is_some() {
        leptos::mount::mount_to_body(page::app::App);
    }
}
