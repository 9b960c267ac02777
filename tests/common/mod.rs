//! Shared by the native tests: one GPU device for the whole test binary, fixture loading.
#![allow(dead_code)]

pub mod checks;
pub mod cli;
mod data;
pub mod generated;

#[allow(unused_imports)] // each test binary uses some of them
pub use data::{random, worst};

use serde::Deserialize;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use tokenmeter::gpu::Gpu;

pub fn gpu() -> Arc<Gpu> {
    static GPU: OnceLock<Arc<Gpu>> = OnceLock::new();
    GPU.get_or_init(|| {
        Arc::new(pollster::block_on(Gpu::new()).expect("a GPU adapter (lavapipe: apt install mesa-vulkan-drivers)"))
    })
    .clone()
}

/// `tests/fixtures/<name>` of the checkout the tests were built in, or of `TOKENMETER_REPO` (a test
/// binary built here and run on another machine: `scripts/device-check`).
pub fn fixture_dir(name: &str) -> PathBuf {
    let repo =
        std::env::var_os("TOKENMETER_REPO").map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from);
    repo.join("tests/fixtures").join(name)
}

pub const FIXTURES: [&str; 3] = ["tiny-gqa-tied", "tiny-untied", "tiny-mha"];

#[derive(Deserialize)]
pub struct Case {
    pub prompt_ids: Vec<u32>,
    pub max_new_tokens: usize,
    pub tokens: Vec<u32>,
    pub min_margin: f32,
    pub first_logits_top: Vec<(u32, f32)>,
}

#[derive(Deserialize)]
pub struct Reference {
    pub cases: Vec<Case>,
}

pub fn reference(name: &str) -> Reference {
    let text = std::fs::read_to_string(fixture_dir(name).join("reference.json")).expect("reference.json");
    serde_json::from_str(&text).expect("reference.json parses")
}

/// A generated fixture's reference.json (`tests/fixtures/real-*`).
pub fn real_reference(name: &str) -> generated::RealReference {
    let text = std::fs::read_to_string(fixture_dir(name).join("reference.json")).expect("reference.json");
    serde_json::from_str(&text).expect("reference.json parses")
}

/// A generated fixture written out as a model folder (config.json, model.safetensors) in `dir`,
/// for the CLI, which reads models from folders.
pub fn write_real_fixture(name: &str, dir: &std::path::Path) {
    let config = std::fs::read_to_string(fixture_dir(name).join("config.json")).expect("config.json");
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("model.safetensors"), generated::real_safetensors(&config, &real_reference(name))).unwrap();
    std::fs::write(dir.join("config.json"), config).unwrap();
}

/// The llama-server binary (`TOKENMETER_LLAMA_SERVER`), or None (skip `what`) when the environment
/// does not name one; with `TOKENMETER_REQUIRE_PEER=1` a missing binary fails instead.
pub fn llama_server(what: &str) -> Option<PathBuf> {
    let required = std::env::var("TOKENMETER_REQUIRE_PEER").is_ok_and(|v| v == "1");
    match std::env::var_os("TOKENMETER_LLAMA_SERVER").map(PathBuf::from) {
        Some(path) if path.is_file() => Some(path),
        other => {
            let why = format!("TOKENMETER_LLAMA_SERVER={other:?} is not a file (scripts/peer builds it)");
            assert!(!required, "TOKENMETER_REQUIRE_PEER=1 but {why}");
            eprintln!("note: skipping {what}: {why}");
            None
        }
    }
}

/// The engine over fixture `name`'s checkpoint (a folder under tests/fixtures) with `options`.
pub async fn engine(name: &str, options: tokenmeter::engine::EngineOptions) -> tokenmeter::engine::Engine {
    use tokenmeter::model::checkpoint::Checkpoint;
    let store = tokenmeter::model::source::DirStore::new(fixture_dir(name)).unwrap();
    let ckpt = Checkpoint::open(&store).await.unwrap();
    let pass = tokenmeter::engine::ForwardPass::load(gpu(), &ckpt, &options, &mut |_, _| {}).await.unwrap();
    tokenmeter::engine::Engine::new(pass)
}

/// A greedy request for `n` new tokens that ignores EOS.
pub fn greedy(prompt: &[u32], n: usize) -> tokenmeter::engine::Request {
    tokenmeter::engine::Request {
        prompt: prompt.to_vec(),
        max_new_tokens: n,
        sampling: tokenmeter::engine::SamplingParams::default(),
        stop_ids: vec![],
        ignore_eos: true,
    }
}

/// Reads one HTTP/1.1 request (head and `Content-Length` body) for the tests' mock servers;
/// `None` when the connection closes first.
pub fn read_request(reader: &mut impl std::io::BufRead) -> Option<(String, Vec<u8>)> {
    let (mut head, mut content_length) = (String::new(), 0);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return None;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            content_length = v.trim().parse().unwrap();
        }
        head.push_str(&line);
        if line == "\r\n" {
            break;
        }
    }
    let mut body = vec![0; content_length];
    reader.read_exact(&mut body).ok()?;
    Some((head, body))
}
