//! Where a model comes from, as pure functions the page and the tests share: a Hugging Face
//! repo id or URL turned into the folder URL files are fetched from; picked or dropped files
//! matched to the names the loader asks for; the Cache Storage's contents grouped by model. The
//! loading itself is `crate::model` (`Checkpoint::open`).

use crate::{Error, Result};
use std::collections::{BTreeMap, BTreeSet};

const HF: &str = "https://huggingface.co/";

/// The folder URL (ending in `/`) that `config.json` and the weights are fetched from:
/// `Qwen/Qwen3-0.6B` (or `Qwen/Qwen3-0.6B@rev`) → `https://huggingface.co/Qwen/Qwen3-0.6B/resolve/main/`;
/// a huggingface.co page URL (`…/tree/main`, `…/blob/main/config.json`) → the same; any other
/// http(s) or same-site URL of a folder (or of its `config.json`) → that folder.
pub fn remote_base(input: &str) -> Result<String> {
    let input = input.trim();
    let bad = || {
        Error::Invalid(format!(
            "{input:?} is neither a Hugging Face repo id (owner/name, e.g. Qwen/Qwen3-0.6B) nor a URL of a model folder"
        ))
    };
    if input.is_empty() {
        return Err(bad());
    }
    let folder = |url: &str| {
        let url = url.split(['?', '#']).next().unwrap_or_default();
        let url = url.strip_suffix("config.json").unwrap_or(url);
        if url.ends_with('/') {
            url.to_string()
        } else {
            format!("{url}/")
        }
    };
    for prefix in ["https://huggingface.co/", "https://hf.co/", "https://www.huggingface.co/"] {
        if let Some(path) = input.strip_prefix(prefix) {
            let parts: Vec<&str> = path.split(['?', '#']).next().unwrap_or_default().split('/').collect();
            return match parts.as_slice() {
                [owner, name] | [owner, name, ""] => hf_base(owner, name, "main").ok_or_else(bad),
                [owner, name, "tree" | "resolve" | "blob", revision, ..] => {
                    hf_base(owner, name, revision).ok_or_else(bad)
                }
                _ => Err(bad()),
            };
        }
    }
    if input.starts_with("http://") || input.starts_with("https://") {
        return Ok(folder(input));
    }
    if input.starts_with('/') || input.starts_with("./") || input.starts_with("../") {
        return Ok(folder(input));
    }
    let (repo, revision) = input.split_once('@').unwrap_or((input, "main"));
    match repo.split('/').collect::<Vec<_>>().as_slice() {
        [owner, name] => hf_base(owner, name, revision).ok_or_else(bad),
        _ => Err(bad()),
    }
}

fn hf_base(owner: &str, name: &str, revision: &str) -> Option<String> {
    let ok = |part: &str| {
        !part.is_empty()
            && part.len() <= 96
            && !part.starts_with(['.', '-'])
            && !part.contains("..")
            && part.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    };
    (ok(owner) && ok(name) && ok(revision)).then(|| format!("{HF}{owner}/{name}/resolve/{revision}/"))
}

/// How a cached folder is named in the list: `Qwen/Qwen3-0.6B` for the Hub (with `@rev` when not
/// main), else the URL without its scheme.
pub fn base_label(base: &str) -> String {
    if let Some(path) = base.strip_prefix(HF) {
        let parts: Vec<&str> = path.split('/').collect();
        if let [owner, name, "resolve", revision, ..] = parts.as_slice() {
            return if *revision == "main" { format!("{owner}/{name}") } else { format!("{owner}/{name}@{revision}") };
        }
    }
    let shown = base.split_once("://").map_or(base, |(_, rest)| rest);
    shown.trim_end_matches('/').to_string()
}

/// Whether the loader can use a file of this name.
fn is_model_file(name: &str) -> bool {
    matches!(name, "config.json" | "tokenizer.json" | "model.safetensors.index.json") || name.ends_with(".safetensors")
}

/// Picked or dropped files matched to the names the loader opens.
#[derive(Clone, Debug, PartialEq)]
pub struct PickedFiles {
    /// (loader's name, index in the input list), sorted by name.
    pub files: Vec<(String, usize)>,
    /// The model's name in the page: its folder, or "config.json + N files".
    pub label: String,
    /// Files left out (README.md, generation_config.json, …).
    pub ignored: usize,
}

/// `paths` as the browser gives them (`Qwen3-0.6B/config.json` for a folder, `config.json` for
/// single files). The loader opens files by their base name; other files are ignored; two files
/// with the same needed name (two model folders at once) are an error, as is a missing config.
pub fn pick_model_files(paths: &[String]) -> Result<PickedFiles> {
    let mut chosen: BTreeMap<String, usize> = BTreeMap::new();
    let mut ignored = 0;
    for (i, path) in paths.iter().enumerate() {
        let name = path.rsplit(['/', '\\']).next().unwrap_or(path);
        if !is_model_file(name) {
            ignored += 1;
            continue;
        }
        if let Some(first) = chosen.insert(name.to_string(), i) {
            return Err(Error::Invalid(format!(
                "two files named {name} ({} and {path}): pick one model folder at a time",
                paths[first]
            )));
        }
    }
    if !chosen.contains_key("config.json") {
        return Err(Error::Invalid(format!(
            "no config.json among the {} files: pick a model folder, or its config.json, tokenizer.json and *.safetensors files together",
            paths.len()
        )));
    }
    let folders: BTreeSet<&str> =
        chosen.values().filter_map(|&i| paths[i].rsplit_once('/').map(|(dir, _)| dir)).collect();
    let label = match folders.into_iter().collect::<Vec<_>>().as_slice() {
        [one] if chosen.values().all(|&i| paths[i].contains('/')) => one.to_string(),
        _ => match chosen.len() - 1 {
            1 => "config.json + 1 file".to_string(),
            n => format!("config.json + {n} files"),
        },
    };
    Ok(PickedFiles { files: chosen.into_iter().collect(), label, ignored })
}

/// A model folder in the Cache Storage.
#[derive(Clone, Debug, PartialEq)]
pub struct CachedModel {
    /// The folder URL the files were fetched from (what loading it again asks for).
    pub base: String,
    pub label: String,
    pub files: usize,
    /// Bytes of the files whose size was recorded when downloaded.
    pub bytes: u64,
}

/// The folder of a cached file's URL (up to and including the last `/`).
pub fn url_folder(url: &str) -> &str {
    url.rfind('/').map_or(url, |i| &url[..=i])
}

/// Cached file URLs grouped by folder, with the sizes recorded at download, sorted by label.
pub fn group_cached(urls: &[String], sizes: &BTreeMap<String, u64>) -> Vec<CachedModel> {
    let mut by_base: BTreeMap<&str, CachedModel> = BTreeMap::new();
    for url in urls {
        let base = url_folder(url);
        let entry = by_base.entry(base).or_insert_with(|| CachedModel {
            base: base.to_string(),
            label: base_label(base),
            files: 0,
            bytes: 0,
        });
        entry.files += 1;
        entry.bytes += sizes.get(url).copied().unwrap_or(0);
    }
    let mut models: Vec<CachedModel> = by_base.into_values().collect();
    models.sort_by(|a, b| a.label.cmp(&b.label));
    models
}
