//! The `tokenmeter` command line: the engine and the benchmark, headless, on the first
//! GPU adapter (lavapipe on machines without a GPU).

#[cfg(target_arch = "wasm32")]
fn main() {}

#[cfg(not(target_arch = "wasm32"))]
fn main() {
    std::process::exit(cli::main());
}

#[cfg(not(target_arch = "wasm32"))]
mod cli;
