//! The page's room: the views and the page thread's state. It talks to the engine worker only
//! through [`crate::web::protocol`] ([`link`] sends the commands and applies the updates).
//!
//! - [`app`]: the layout; [`state`]: shared signals.
//! - [`link`]: the page's side of the engine worker; [`models`]: start-up and the loads the model
//!   card asks for; [`model_panel`]: the model and adapter cards; [`ready`]: the model card's time
//!   to ready (a load's phases as a bar, a cold load beside a cached one); [`model_sources`]: the model
//!   card's preset, file pickers and URL; [`files`]: picked and dropped model files;
//!   [`no_webgpu`]: the notice of a browser without WebGPU (the server target still runs).
//! - [`settings`]: the workload form and the engine switches, validated as typed, mirrored in
//!   the URL; [`dataset`]: the picker of a dataset file instead of drawn lengths.
//! - [`run`]: Run / Cancel and the page's side of a run (progress, live charts, history).
//! - [`target`]: the in-browser engine or a remote OpenAI-compatible server (URL, model, key
//!   kept in memory only, API style; the HTTP/1.1 connection warning).
//! - [`charts`]: live charts (leptos-chartistry), at most one update per animation frame;
//!   [`timeline`]: the per-request timeline (six SVG paths), redrawn at most every 250 ms.
//! - [`search`]: the search for the highest rate within the SLOs (rate `max`);
//! - [`sweep`]: a rate sweep's table and chart; [`pareto`]: speed per user against throughput
//!   per GPU, in the sweep and history cards.
//! - [`plan`]: the Plan card: what this GPU sustains within a TTFT SLO and how many serve a target
//!   rate, predicted from its runs (`crate::planner::capacity`), drawn beside them.
//! - [`experiment`]: the Experiment card (A/B, A B A B …); [`experiment_result`]: its outcome and
//!   download; [`verdict`]: its verdict per metric.
//! - [`results`]: the report, diagnosis and downloads; [`history`]: saved runs compared.
//! - [`playground`]: one prompt, streamed token by token. [`i18n`]: English and Chinese.

pub mod app;
pub mod charts;
pub mod dataset;
pub mod experiment;
pub mod experiment_result;
pub mod files;
pub mod history;
pub mod i18n;
pub mod link;
pub mod model_panel;
pub mod model_sources;
pub mod models;
pub mod names;
pub mod no_webgpu;
pub mod pareto;
pub mod plan;
pub mod playground;
pub mod ready;
pub mod results;
pub mod run;
pub mod search;
pub mod settings;
pub mod state;
pub mod sweep;
pub mod target;
pub mod timeline;
pub mod verdict;
