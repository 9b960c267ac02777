//! The `tokenmeter` command line: the engine and the benchmark, headless, on the first
//! GPU adapter (lavapipe on machines without a GPU).

// A function a reader can hold: at most 150 lines (clippy.toml), held by CI's `-D warnings`.
#![warn(clippy::too_many_lines)]

#[cfg(target_arch = "wasm32")]
fn main() {}

#[cfg(not(target_arch = "wasm32"))]
fn main() {
    std::process::exit(cli::main());
}

#[cfg(not(target_arch = "wasm32"))]
mod cli;
