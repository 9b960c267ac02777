//! The browser entry point (built by trunk for wasm32). Natively there is nothing to run.

// A function a reader can hold: at most 150 lines (clippy.toml), held by CI's `-D warnings`.
#![warn(clippy::too_many_lines)]

fn main() {
    #[cfg(target_arch = "wasm32")]
    tokenmeter::web::start();
    #[cfg(not(target_arch = "wasm32"))]
    eprintln!("tokenmeter-web is the browser app: run ./scripts/serve (or use the `tokenmeter` CLI)");
}

/// The engine worker's entry, called by its bootstrap script (`web::page::link`) once this module is up
/// in the worker.
#[cfg(target_arch = "wasm32")]
#[wasm_bindgen::prelude::wasm_bindgen]
pub fn tokenmeter_worker() {
    tokenmeter::web::worker::serve();
}
