//! Opening a checkpoint: `config.json`, then the safetensors file or shards, every header
//! validated, then every tensor the config implies checked for presence and shape — all before
//! a single weight byte is read.

use super::config::Qwen3Config;
use super::safetensors::{self, Dtype, TensorInfo};
use super::source::{ByteSource, ModelStore};
use crate::error::{Error, Result};
use crate::limits;
use std::collections::BTreeMap;

/// Source of weights for upload: a checkpoint on disk or in the browser, or a synthetic model.
#[allow(async_fn_in_trait)]
pub trait TensorProvider {
    fn config(&self) -> &Qwen3Config;
    /// The tensor that serves as `lm_head`: `lm_head.weight`, or the embedding when tied and absent.
    fn lm_head_name(&self) -> &str;
    /// Rows `[row_start, row_start + rows)` of a 2-D tensor (or the whole of a 1-D one with
    /// `row_start = 0, rows = 1`) as bf16 bits.
    async fn rows_bf16(&self, name: &str, row_start: usize, rows: usize) -> Result<Vec<u16>>;
    /// A small tensor (norm weights) as f32.
    async fn f32(&self, name: &str) -> Result<Vec<f32>>;
    /// Bytes the upload will read, for progress.
    fn total_bytes(&self) -> u64;
    /// For generated (synthetic) matrices: how the GPU can make them itself instead of an upload.
    fn random_spec(&self, _name: &str) -> Option<crate::gpu::fill::RandomSpec> {
        None
    }
}

/// Names and shapes of every tensor the config implies (the lm_head only when untied).
pub fn expected_tensors(cfg: &Qwen3Config) -> Vec<(String, Vec<usize>)> {
    let (h, q, kv, i, hd) = (cfg.hidden_size, cfg.q_dim(), cfg.kv_dim(), cfg.intermediate_size, cfg.head_dim);
    let mut out = vec![
        ("model.embed_tokens.weight".to_string(), vec![cfg.vocab_size, h]),
        ("model.norm.weight".to_string(), vec![h]),
    ];
    for l in 0..cfg.num_hidden_layers {
        let p = format!("model.layers.{l}");
        out.extend([
            (format!("{p}.input_layernorm.weight"), vec![h]),
            (format!("{p}.post_attention_layernorm.weight"), vec![h]),
            (format!("{p}.self_attn.q_proj.weight"), vec![q, h]),
            (format!("{p}.self_attn.k_proj.weight"), vec![kv, h]),
            (format!("{p}.self_attn.v_proj.weight"), vec![kv, h]),
            (format!("{p}.self_attn.o_proj.weight"), vec![h, q]),
            (format!("{p}.self_attn.q_norm.weight"), vec![hd]),
            (format!("{p}.self_attn.k_norm.weight"), vec![hd]),
            (format!("{p}.mlp.gate_proj.weight"), vec![i, h]),
            (format!("{p}.mlp.up_proj.weight"), vec![i, h]),
            (format!("{p}.mlp.down_proj.weight"), vec![h, i]),
        ]);
    }
    if !cfg.tie_word_embeddings {
        out.push(("lm_head.weight".to_string(), vec![cfg.vocab_size, h]));
    }
    out
}

pub struct Checkpoint<F: ByteSource> {
    pub config: Qwen3Config,
    /// (file name, handle) per safetensors file.
    files: Vec<(String, F)>,
    tensors: BTreeMap<String, (usize, TensorInfo)>,
    lm_head: String,
    /// Dtypes found, e.g. "BF16"; F16/F32 weights are rounded to bf16 on upload.
    pub dtypes: Vec<&'static str>,
    total_bytes: u64,
}

const INDEX: &str = "model.safetensors.index.json";
const SINGLE: &str = "model.safetensors";

impl<F: ByteSource> Checkpoint<F> {
    pub async fn open<S: ModelStore<File = F>>(store: &S) -> Result<Self> {
        let location = store.location();
        let config_bytes = store.read_all("config.json", limits::CONFIG_JSON_MAX_BYTES).await?.ok_or_else(|| {
            Error::Invalid(format!("{location}: no config.json (is this a Hugging Face model folder?)"))
        })?;
        let config = Qwen3Config::from_json(&String::from_utf8_lossy(&config_bytes))?;

        // Which files hold the weights.
        let (file_names, index_map) = match store.read_all(INDEX, limits::INDEX_JSON_MAX_BYTES).await? {
            Some(bytes) => {
                let v = super::json::parse_unique(&bytes)
                    .map_err(|e| Error::Json { path: INDEX.into(), message: e.to_string() })?;
                let map = v
                    .get("weight_map")
                    .and_then(|m| m.as_object())
                    .ok_or_else(|| Error::Json { path: INDEX.into(), message: "no \"weight_map\" object".into() })?;
                let mut index = BTreeMap::new();
                for (tensor, file) in map {
                    let file = file.as_str().ok_or_else(|| Error::Json {
                        path: INDEX.into(),
                        message: format!("weight_map[{}] is not a file name", limits::printable(tensor)),
                    })?;
                    // A plain name in the folder: no paths, no hidden files, nothing unprintable.
                    let plain = !file.is_empty()
                        && file.len() <= 255
                        && !file.starts_with('.')
                        && !file.contains(['/', '\\'])
                        && !file.chars().any(char::is_control);
                    if !plain {
                        return Err(Error::Json {
                            path: INDEX.into(),
                            message: format!("suspicious shard name \"{}\"", limits::printable(file)),
                        });
                    }
                    index.insert(tensor.clone(), file.to_string());
                }
                let mut names: Vec<String> = index.values().cloned().collect();
                names.sort();
                names.dedup();
                (names, Some(index))
            }
            None => (vec![SINGLE.to_string()], None),
        };

        let mut files = Vec::new();
        let mut tensors = BTreeMap::new();
        for name in &file_names {
            let file = match store.open(name).await? {
                Some(f) => f,
                None if index_map.is_none() => {
                    return Err(Error::Invalid(format!("{location}: no {SINGLE} or {INDEX}")));
                }
                None => return Err(Error::NotFound { path: format!("{location}/{name} (listed in {INDEX})") }),
            };
            let len = file.len();
            let first = file.read(0, len.min(8) as usize).await?;
            let n = safetensors::header_len(name, &first, len)?;
            let json = file.read(8, n as usize).await?;
            let header = safetensors::parse_header(name, &json, len)?;
            for (tensor, info) in header.tensors {
                if let Some(index) = &index_map {
                    match index.get(&tensor) {
                        Some(f) if f == name => {}
                        Some(f) => {
                            return Err(Error::Json {
                                path: INDEX.into(),
                                message: format!("{} is mapped to {f} but found in {name}", limits::printable(&tensor)),
                            })
                        }
                        None => continue, // not in the index: ignore, as transformers does
                    }
                }
                if tensors.insert(tensor.clone(), (files.len(), info)).is_some() {
                    let tensor = limits::printable(&tensor);
                    return Err(Error::Invalid(format!("tensor {tensor} appears in more than one file")));
                }
            }
            files.push((name.clone(), file));
        }
        if let Some(index) = &index_map {
            if let Some((t, f)) = index.iter().find(|(t, _)| !tensors.contains_key(*t)) {
                let tensor = limits::printable(t);
                return Err(Error::MissingTensor { tensor, looked_in: format!("{f} (per {INDEX})") });
            }
        }

        let looked_in = format!("{location}/{}", file_names.join(", "));
        let mut total_bytes = 0;
        let mut dtypes = Vec::new();
        for (name, shape) in expected_tensors(&config) {
            let (_, info) = tensors
                .get(&name)
                .ok_or_else(|| Error::MissingTensor { tensor: name.clone(), looked_in: looked_in.clone() })?;
            if info.shape != shape {
                return Err(Error::Shape { tensor: name, expected: shape, found: info.shape.clone() });
            }
            total_bytes += info.len_bytes();
            if !dtypes.contains(&info.dtype.name()) {
                dtypes.push(info.dtype.name());
            }
        }
        let lm_head = match tensors.get("lm_head.weight") {
            Some((_, info)) => {
                let shape = vec![config.vocab_size, config.hidden_size];
                if info.shape != shape {
                    return Err(Error::Shape {
                        tensor: "lm_head.weight".into(),
                        expected: shape,
                        found: info.shape.clone(),
                    });
                }
                if config.tie_word_embeddings {
                    total_bytes += info.len_bytes();
                }
                "lm_head.weight"
            }
            None => "model.embed_tokens.weight",
        };
        Ok(Checkpoint { config, files, tensors, lm_head: lm_head.into(), dtypes, total_bytes })
    }

    /// The size of its safetensors files, bytes: what a load from them reads from disk at most.
    pub fn file_bytes(&self) -> u64 {
        self.files.iter().map(|(_, f)| f.len()).sum()
    }

    pub fn file_names(&self) -> Vec<String> {
        self.files.iter().map(|(n, _)| n.clone()).collect()
    }

    fn info(&self, name: &str) -> Result<&(usize, TensorInfo)> {
        self.tensors
            .get(name)
            .ok_or_else(|| Error::MissingTensor { tensor: name.into(), looked_in: "the checkpoint".into() })
    }

    async fn read_range(&self, name: &str, row_start: usize, rows: usize) -> Result<(Dtype, Vec<u8>)> {
        let (file, info) = self.info(name)?;
        let row_elems: usize = info.shape.iter().skip(1).product();
        let row_bytes = (row_elems * info.dtype.size()) as u64;
        let begin = info.begin + row_start as u64 * row_bytes;
        let len = rows as u64 * row_bytes;
        assert!(begin + len <= info.end, "{name}: rows {row_start}+{rows} out of range");
        let bytes = self.files[*file].1.read(begin, len as usize).await?;
        Ok((info.dtype, bytes))
    }
}

impl<F: ByteSource> TensorProvider for Checkpoint<F> {
    fn config(&self) -> &Qwen3Config {
        &self.config
    }
    fn lm_head_name(&self) -> &str {
        &self.lm_head
    }
    async fn rows_bf16(&self, name: &str, row_start: usize, rows: usize) -> Result<Vec<u16>> {
        let (dtype, bytes) = self.read_range(name, row_start, rows).await?;
        Ok(safetensors::to_bf16_bits(dtype, &bytes))
    }
    async fn f32(&self, name: &str) -> Result<Vec<f32>> {
        let rows = self.info(name)?.1.shape.first().copied().unwrap_or(1);
        let (dtype, bytes) = self.read_range(name, 0, rows).await?;
        Ok(safetensors::to_f32(dtype, &bytes))
    }
    fn total_bytes(&self) -> u64 {
        self.total_bytes
    }
}
