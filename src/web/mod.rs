//! The page (wasm only): the live benchmark dashboard. Press Run and watch TTFT, TPOT and
//! throughput move as simulated users arrive, then read the report and compare runs; or type a
//! prompt in the playground. Models: the embedded default (the real Qwen3 tokenizer on a small
//! random-weight Qwen3) or random weights with Qwen3-0.6B/1.7B shapes, on the browser's WebGPU.
//!
//! - [`app`]: the layout; [`state`]: shared signals, and the engine's side ([`state::Host`]).
//! - [`worker`]: the engine worker, a dedicated Web Worker on the page's own module that owns the
//!   device, the model and every run (so every timestamp is taken off the page's thread);
//!   [`link`]: the page's side of it; [`protocol`]: the messages between them.
//! - [`models`]: start-up and the loads the model card asks for (page side); [`loader`]: adapter,
//!   tokenizer and model loading (worker side); [`no_webgpu`]: a browser without WebGPU (why,
//!   and the page's notice; the server target still runs).
//! - [`settings`]: the workload form and the engine switches, validated as typed, mirrored in
//!   the URL; [`dataset`]: a dataset file instead of drawn lengths.
//! - [`service`]: the run service (in the worker), the one owner of a run's life (the engine's run
//!   or sweep, a server's, the experiment): commands in, updates out, no signals; [`run`]: Run / Cancel and
//!   the page's side of a run (progress, live charts, history).
//! - [`target`]: the in-browser engine or a remote OpenAI-compatible server (URL, model, key
//!   kept in memory only, API style; the HTTP/1.1 connection warning).
//! - [`charts`]: live charts (leptos-chartistry), at most one update per animation frame;
//!   [`timeline`]: the per-request timeline (five SVG paths), redrawn at most every 250 ms.
//! - [`pareto`]: speed per user against throughput per GPU, in the sweep and history cards.
//! - [`plan`]: the Plan card: what this GPU sustains within a TTFT SLO and how many serve a target
//!   rate, predicted from its runs (`crate::planner::capacity`), drawn beside them.
//! - [`experiment`]: the Experiment card (A/B, A B A B …, a verdict per metric).
//! - [`results`]: the report, diagnosis and downloads; [`history`]: saved runs compared.
//! - [`playground`]: one prompt, streamed token by token. [`i18n`]: English and Chinese.
//!
//! User- and model-provided text is always rendered as text, never as HTML.

pub mod app;
pub mod browser;
pub mod cache;
pub mod charts;
pub mod dataset;
pub mod experiment;
pub mod files;
pub mod history;
pub mod i18n;
pub mod link;
pub mod loader;
pub mod model_panel;
pub mod models;
pub mod no_webgpu;
pub mod pareto;
pub mod plan;
pub mod playground;
pub mod protocol;
pub mod results;
pub mod run;
pub mod service;
pub mod settings;
pub mod sources;
pub mod state;
pub mod sweep;
pub mod target;
pub mod timeline;
pub mod worker;

pub use browser::fetch_bytes;

/// The page's start (the module's `main`). In the engine worker, which runs the same module, there
/// is no window and nothing to mount: [`worker::serve`] is its entry.
pub fn start() {
    console_error_panic_hook::set_once();
    if web_sys::window().is_some() {
        leptos::mount::mount_to_body(app::App);
    }
}
