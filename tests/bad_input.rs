//! Bad input gets one clear line on stderr and exit code 1 or 2 from the CLI, within seconds —
//! never a panic or a hang.
#![cfg(not(target_arch = "wasm32"))]

mod common;

use common::fixture_dir;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// A scratch copy of a fixture, to break.
fn scratch(name: &str, from: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tokenmeter-bad-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for entry in std::fs::read_dir(fixture_dir(from)).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, dir.join(path.file_name().unwrap())).unwrap();
    }
    dir
}

fn generate(model: &Path, extra: &[&str]) -> (i32, String) {
    let start = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_tokenmeter"))
        .arg("generate")
        .arg("--model")
        .arg(model)
        .args(extra)
        .output()
        .expect("runs");
    assert!(start.elapsed() < Duration::from_secs(30), "took {:?}", start.elapsed());
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!stderr.contains("panicked"), "panic: {stderr}");
    (out.status.code().unwrap_or(-1), stderr)
}

fn expect_error(model: &Path, extra: &[&str], needle: &str) {
    let (code, stderr) = generate(model, extra);
    assert!((1..=2).contains(&code), "exit code {code} for {needle:?}; stderr: {stderr}");
    let line = stderr.lines().rfind(|l| l.starts_with("error: ")).unwrap_or_else(|| panic!("no error line: {stderr}"));
    assert!(line.contains(needle), "wanted {needle:?} in {line:?}");
}

const IDS: [&str; 2] = ["--prompt-ids", "1,2,3"];

fn edit_header(path: &Path, f: impl FnOnce(&mut serde_json::Value)) {
    let bytes = std::fs::read(path).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let mut header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    f(&mut header);
    let mut text = serde_json::to_string(&header).unwrap();
    while text.len() < n {
        text.push(' '); // keep the data section where it was
    }
    let mut out = (text.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(text.as_bytes());
    out.extend_from_slice(&bytes[8 + n..]);
    std::fs::write(path, out).unwrap();
}

#[test]
fn good_model_works() {
    let (code, stderr) =
        generate(&fixture_dir("tiny-mha"), &["--prompt-ids", "1,2,3", "--max-new-tokens", "2", "--json"]);
    assert_eq!(code, 0, "{stderr}");
}

#[test]
fn truncated_file() {
    let dir = scratch("truncated", "tiny-mha");
    let f = dir.join("model.safetensors");
    let bytes = std::fs::read(&f).unwrap();
    std::fs::write(&f, &bytes[..bytes.len() - 1000]).unwrap();
    expect_error(&dir, &IDS, "outside");
    std::fs::write(&f, &bytes[..5]).unwrap();
    expect_error(&dir, &IDS, "shorter than the 8-byte header length");
}

#[test]
fn header_length_past_the_end() {
    let dir = scratch("header", "tiny-mha");
    let f = dir.join("model.safetensors");
    let mut bytes = std::fs::read(&f).unwrap();
    let lie = (bytes.len() as u64 * 2).to_le_bytes();
    bytes[..8].copy_from_slice(&lie);
    std::fs::write(&f, &bytes).unwrap();
    expect_error(&dir, &IDS, "past the end of the file");
}

#[test]
fn offsets_past_the_end() {
    let dir = scratch("offsets", "tiny-mha");
    edit_header(&dir.join("model.safetensors"), |h| {
        h["model.norm.weight"]["data_offsets"] = serde_json::json!([10_000_000, 10_000_064]);
    });
    expect_error(&dir, &IDS, "outside the");
}

#[test]
fn unknown_dtype() {
    let dir = scratch("dtype", "tiny-mha");
    edit_header(&dir.join("model.safetensors"), |h| h["model.norm.weight"]["dtype"] = "F8_E4M3".into());
    expect_error(&dir, &IDS, "unsupported dtype F8_E4M3");
}

#[test]
fn config_disagrees_with_shapes() {
    let dir = scratch("config", "tiny-mha");
    let path = dir.join("config.json");
    let text =
        std::fs::read_to_string(&path).unwrap().replace("\"intermediate_size\": 64", "\"intermediate_size\": 72");
    std::fs::write(&path, text).unwrap();
    expect_error(&dir, &IDS, "does not match the config");
}

#[test]
fn missing_tensor() {
    let dir = scratch("missing", "tiny-mha");
    edit_header(&dir.join("model.safetensors"), |h| {
        h.as_object_mut().unwrap().remove("model.layers.1.mlp.up_proj.weight").unwrap();
    });
    expect_error(&dir, &IDS, "model.layers.1.mlp.up_proj.weight is missing");
}

#[test]
fn missing_shard() {
    let dir = scratch("shard", "tiny-untied");
    std::fs::remove_file(dir.join("model-00002-of-00003.safetensors")).unwrap();
    expect_error(&dir, &IDS, "model-00002-of-00003.safetensors");
}

#[test]
fn broken_json() {
    let dir = scratch("json", "tiny-mha");
    std::fs::write(dir.join("config.json"), "{\"vocab_size\": 256,").unwrap();
    expect_error(&dir, &IDS, "invalid JSON");
}

#[test]
fn empty_folder() {
    let dir = std::env::temp_dir().join(format!("tokenmeter-empty-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    expect_error(&dir, &IDS, "no config.json");
}

#[test]
fn path_does_not_exist() {
    expect_error(Path::new("/nonexistent/model"), &IDS, "not found");
}

#[test]
fn prompt_longer_than_the_context() {
    let ids: Vec<String> = (0..600).map(|i| (i % 200).to_string()).collect();
    expect_error(&fixture_dir("tiny-mha"), &["--prompt-ids", &ids.join(",")], "max_position_embeddings 512");
}

#[test]
fn token_outside_the_vocabulary() {
    expect_error(&fixture_dir("tiny-mha"), &["--prompt-ids", "1,256,3"], "outside the vocabulary");
}

#[test]
fn text_prompt_without_tokenizer() {
    expect_error(&fixture_dir("tiny-mha"), &["--prompt", "hello"], "tokenizer.json");
}
