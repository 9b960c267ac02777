//! Bad input gets one clear line on stderr and exit code 1 or 2 from the CLI, within seconds and
//! 200 MB — never a panic, a hang or a huge allocation. Files, configs and headers here; flags in
//! `tests/it/bad_flags.rs`.

use crate::common;

use common::{cli, fixture_dir};
use std::path::{Path, PathBuf};

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
    let model = model.to_str().expect("a UTF-8 path");
    let out = cli::run(&[&["generate", "--model", model], extra].concat());
    assert!(!out.stderr.contains("panicked"), "panic: {}", out.stderr);
    (out.code, out.stderr)
}

/// One `error:` line with `needle`, exit 1 or 2, within seconds and 200 MB ([`cli::expect_error`]).
fn expect_error(model: &Path, extra: &[&str], needle: &str) {
    let model = model.to_str().expect("a UTF-8 path");
    cli::expect_error(&[&["generate", "--model", model], extra].concat(), needle);
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

/// `config.json` of a scratch copy with `edit` applied to its JSON.
fn edit_config(dir: &Path, edit: impl FnOnce(&mut serde_json::Map<String, serde_json::Value>)) {
    let path = dir.join("config.json");
    let mut config: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    edit(config.as_object_mut().unwrap());
    std::fs::write(&path, serde_json::to_string(&config).unwrap()).unwrap();
}

#[test]
fn config_sizes_past_their_limits() {
    let dir = scratch("config-limits", "tiny-mha");
    let cases: [(&str, serde_json::Value, &str); 7] = [
        // Sized the block tables past any buffer (a wgpu panic), then a host allocation abort.
        ("max_position_embeddings", (1u64 << 31).into(), "max_position_embeddings = 2147483648 is above the limit"),
        ("max_position_embeddings", (1u64 << 62).into(), "is above the limit of 1048576"),
        // Over 4 GiB of tensor names before any check.
        ("num_hidden_layers", (1u64 << 31).into(), "num_hidden_layers = 2147483648 is above the limit of 1024"),
        // num_attention_heads * head_dim wrapped to 0.
        ("num_attention_heads", (1u64 << 63).into(), "num_attention_heads = 9223372036854775808 is above"),
        ("vocab_size", (1u64 << 40).into(), "vocab_size = 1099511627776 is above the limit"),
        ("hidden_size", serde_json::json!(-1), "hidden_size must be a non-negative integer, found -1"),
        ("intermediate_size", serde_json::json!(1e300), "intermediate_size must be a non-negative integer"),
    ];
    for (field, value, needle) in cases {
        let original = std::fs::read(dir.join("config.json")).unwrap();
        edit_config(&dir, |c| {
            c.insert(field.into(), value);
        });
        expect_error(&dir, &IDS, needle);
        std::fs::write(dir.join("config.json"), original).unwrap();
    }
}

#[test]
fn config_fields_of_the_wrong_type() {
    let dir = scratch("config-types", "tiny-mha");
    let cases: [(&str, serde_json::Value, &str); 6] = [
        // Was silently 0.
        ("eos_token_id", (1u64 << 40).into(), "eos_token_id must be a token id"),
        ("eos_token_id", serde_json::json!([2, "3"]), "eos_token_id must be a token id"),
        // Wrongly typed optional fields were ignored (the default taken instead).
        ("tie_word_embeddings", "yes".into(), "tie_word_embeddings must be true or false, found \"yes\""),
        ("attention_bias", "true".into(), "attention_bias must be true or false"),
        ("hidden_act", 7.into(), "hidden_act must be a string, found 7"),
        ("rope_parameters", "default".into(), "rope_parameters must be an object"),
    ];
    for (field, value, needle) in cases {
        let original = std::fs::read(dir.join("config.json")).unwrap();
        edit_config(&dir, |c| {
            c.remove("rope_theta");
            c.insert(field.into(), value);
        });
        expect_error(&dir, &IDS, needle);
        std::fs::write(dir.join("config.json"), original).unwrap();
    }
}

#[test]
fn header_shape_that_wraps_to_zero_bytes() {
    let dir = scratch("wrap", "tiny-mha");
    edit_header(&dir.join("model.safetensors"), |h| {
        h["zeros"] = serde_json::json!({"dtype": "BF16", "shape": [1u64 << 63], "data_offsets": [0, 0]});
    });
    expect_error(&dir, &IDS, "tensor zeros: shape [9223372036854775808] overflows");
}

#[test]
fn header_naming_a_tensor_twice() {
    let dir = scratch("duplicate", "tiny-mha");
    let path = dir.join("model.safetensors");
    let bytes = std::fs::read(&path).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header = std::str::from_utf8(&bytes[8..8 + n]).unwrap();
    // The same name again, first: serde_json's map would keep the last silently.
    let text = header.replacen('{', r#"{"model.norm.weight":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},"#, 1);
    let mut out = (text.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(text.as_bytes());
    out.extend_from_slice(&bytes[8 + n..]);
    std::fs::write(&path, out).unwrap();
    expect_error(&dir, &IDS, "duplicate key \"model.norm.weight\"");
}

#[test]
fn index_naming_a_tensor_twice() {
    let dir = scratch("duplicate-index", "tiny-untied");
    let path = dir.join("model.safetensors.index.json");
    let text = std::fs::read_to_string(&path).unwrap();
    let text = text.replacen(
        "\"weight_map\": {",
        "\"weight_map\": {\"lm_head.weight\": \"model-00001-of-00003.safetensors\", ",
        1,
    );
    assert!(text.contains("\"lm_head.weight\": \"model-00001"), "the index changed shape: {text}");
    std::fs::write(&path, text).unwrap();
    expect_error(&dir, &IDS, "duplicate key \"lm_head.weight\"");
}

fn mkfifo(path: &Path) {
    let _ = std::fs::remove_file(path);
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo {}", path.display());
}

#[test]
fn fifos_and_devices_are_refused_not_read() {
    // Opening a FIFO for reading waits for a writer: the CLI hung.
    for name in ["config.json", "model.safetensors", "tokenizer.json"] {
        let dir = scratch(&format!("fifo-{name}"), "tiny-mha");
        mkfifo(&dir.join(name));
        expect_error(&dir, &IDS, &format!("{name}: not a regular file (a FIFO, socket or device)"));
    }
    let dir = scratch("device", "tiny-mha");
    std::fs::remove_file(dir.join("model.safetensors")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", dir.join("model.safetensors")).unwrap();
    expect_error(&dir, &IDS, "model.safetensors: not a regular file");
    let dir = scratch("folder", "tiny-mha");
    std::fs::remove_file(dir.join("config.json")).unwrap();
    std::fs::create_dir(dir.join("config.json")).unwrap();
    expect_error(&dir, &IDS, "config.json: not a regular file (a folder)");
}

#[test]
fn oversized_json_files_are_refused_by_size() {
    // 1.5 GB, sparse: it used to be read whole before the JSON error.
    let big = 1_500_000_000;
    for (name, limit) in [("config.json", "1048576"), ("tokenizer.json", "67108864")] {
        let dir = scratch(&format!("big-{name}"), "tiny-mha");
        std::fs::File::create(dir.join(name)).unwrap().set_len(big).unwrap();
        expect_error(&dir, &IDS, &format!("1500000000 bytes, above the {limit}-byte limit"));
    }
    let dir = scratch("big-index", "tiny-untied");
    std::fs::File::create(dir.join("model.safetensors.index.json")).unwrap().set_len(big).unwrap();
    expect_error(&dir, &IDS, "model.safetensors.index.json: 1500000000 bytes, above the 16777216-byte limit");
}

#[test]
fn positions_at_the_limit_still_run() {
    // The largest max_position_embeddings the bounds allow, with one-token blocks: the block
    // tables and split-attention partials are sized from it and must fit the adapter (max_seqs
    // is lowered until they do), not panic in wgpu's validation as 2^31 did.
    let dir = scratch("positions-limit", "tiny-mha");
    edit_config(&dir, |c| {
        c.insert("max_position_embeddings".into(), tokenmeter::limits::MAX_POSITIONS.into());
    });
    for block_size in ["16", "1"] {
        let (code, stderr) =
            generate(&dir, &["--prompt-ids", "1,2,3", "--max-new-tokens", "2", "--block-size", block_size]);
        assert_eq!(code, 0, "block size {block_size}: {stderr}");
    }
}

/// The page checks a downloading safetensors file from its first bytes, in whatever chunks they
/// arrive: a good header passes, a bad one fails before the data.
#[test]
fn a_header_is_checked_from_the_first_bytes_in_any_chunks() {
    use tokenmeter::model::safetensors::HeaderWatch;
    let file = std::fs::read(fixture_dir("tiny-gqa-tied").join("model.safetensors")).unwrap();
    let n = u64::from_le_bytes(file[..8].try_into().unwrap()) as usize;
    for chunk in [1, 3, 8, 9, 4096, file.len()] {
        let mut watch = HeaderWatch::new("model.safetensors", Some(file.len() as u64));
        for piece in file.chunks(chunk) {
            watch.feed(piece).unwrap();
        }
        assert!(watch.checked(), "chunks of {chunk}");
        watch.finish().unwrap();
    }
    // A header length past the limit fails on the 8th byte, whatever follows.
    let mut huge = (1u64 << 40).to_le_bytes().to_vec();
    huge.extend_from_slice(&[b' '; 64]);
    let mut watch = HeaderWatch::new("model.safetensors", None);
    let err = huge.chunks(5).try_for_each(|c| watch.feed(c)).unwrap_err().to_string();
    assert!(err.contains("limit"), "{err}");
    // A header that is not JSON fails once it is in, before any data.
    let mut garbled = file[..8 + n].to_vec();
    garbled[8] = b'[';
    let mut watch = HeaderWatch::new("model.safetensors", Some(file.len() as u64));
    assert!(watch.feed(&garbled).is_err());
    // A file that ends inside its header is not one.
    let mut watch = HeaderWatch::new("model.safetensors", None);
    watch.feed(&file[..8 + n / 2]).unwrap();
    assert!(!watch.checked() && watch.finish().is_err());
    // An HTML error page served as the file: its first 8 bytes give an absurd length.
    let mut watch = HeaderWatch::new("model.safetensors", Some(2000));
    assert!(watch.feed(b"<!DOCTYPE html><html>").is_err());
}
