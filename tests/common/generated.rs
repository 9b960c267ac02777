//! The generated fixtures at the published widths (`tests/fixtures/real-*`): `config.json` and
//! `reference.json` are committed, the weights are made here, in memory, by the counter-based
//! generator that `tests/fixtures/make_real.py` implements independently (see its docstring), and
//! written into a real safetensors file so they load through the same path as any checkpoint.
//! Shared by the native tests and the browser tests.
#![allow(dead_code)]

use serde::Deserialize;
use tokenmeter::model::checkpoint::expected_tensors;
use tokenmeter::model::source::MemStore;
use tokenmeter::model::Qwen3Config;

/// The generated fixtures, smallest first.
pub const REAL_FIXTURES: [&str; 2] = ["real-gqa16-h128", "real-0.6b-2layers"];

#[derive(Deserialize, Clone)]
pub struct RealCase {
    pub prompt_ids: Vec<u32>,
    pub max_new_tokens: usize,
    pub tokens: Vec<u32>,
    /// Float64 top-1 minus top-2 logit at each generated step.
    pub margins: Vec<f64>,
    pub first_logits_top: Vec<(u32, f64)>,
}

#[derive(Deserialize)]
pub struct RealReference {
    pub seed: u64,
    /// Linear layers have std ~2^boost / sqrt(fan_in).
    pub linear_boost: i32,
    pub cases: Vec<RealCase>,
}

/// Below this float64 margin a step is a near-tie that f32 may legitimately resolve either way:
/// tokens are compared only up to the first such step.
pub const NEAR_TIE: f64 = 1e-3;

impl RealCase {
    /// The generated tokens that a correct f32 engine must reproduce.
    pub fn decided_tokens(&self) -> &[u32] {
        let n = self.margins.iter().position(|&m| m < NEAR_TIE).map_or(self.tokens.len(), |i| i + 1);
        &self.tokens[..n]
    }
}

fn fnv1a64(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3))
}

fn splitmix64(key: u64, index: u64) -> u64 {
    let mut z = key.wrapping_add((index + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Exponent e of the 2^-e step of a matrix's levels (make_real.py's `weight_exponent`).
fn weight_exponent(name: &str, shape: &[usize], boost: i32) -> i32 {
    if name.contains("embed_tokens") || name == "lm_head.weight" {
        return 6;
    }
    (73.9 * (shape[1] as f64).sqrt() / 2f64.powi(boost)).log2().round() as i32
}

/// bf16 bits of one tensor: every value is exact in bf16, so f32 -> bf16 is a truncation.
pub fn tensor_bf16(name: &str, shape: &[usize], seed: u64, boost: i32) -> Vec<u16> {
    let key = fnv1a64(name) ^ seed;
    let n: usize = shape.iter().product();
    let step = if shape.len() == 2 { 2f32.powi(-weight_exponent(name, shape, boost)) } else { 0.0 };
    (0..n as u64)
        .map(|i| {
            let level = (splitmix64(key, i) >> 56) as u32;
            let v = if shape.len() == 1 {
                0.5 + (level >> 1) as f32 * (1.0 / 128.0)
            } else {
                (level as f32 - 127.5) * step
            };
            debug_assert_eq!(v.to_bits() & 0xffff, 0, "{name}: {v} is not exact in bf16");
            (v.to_bits() >> 16) as u16
        })
        .collect()
}

/// A safetensors file holding `tensors` (name, shape, bf16 bits), written by the `safetensors`
/// crate (the format's reference implementation, so our parser reads a file it did not write):
/// tensors in name order as transformers writes them, the header padded to 8 bytes.
pub fn safetensors_bytes(tensors: &[(String, Vec<usize>, Vec<u16>)]) -> Vec<u8> {
    use safetensors::tensor::TensorView;
    let bytes: Vec<(&str, &[usize], Vec<u8>)> = tensors
        .iter()
        .map(|(name, shape, data)| {
            (name.as_str(), shape.as_slice(), data.iter().flat_map(|v| v.to_le_bytes()).collect())
        })
        .collect();
    let views = bytes.iter().map(|(name, shape, data)| {
        (*name, TensorView::new(safetensors::Dtype::BF16, shape.to_vec(), data).expect("bf16 data of its shape"))
    });
    let metadata = std::collections::HashMap::from([("format".to_string(), "pt".to_string())]);
    safetensors::serialize(views, Some(metadata)).expect("a safetensors file")
}

/// The fixture's generated model.safetensors.
pub fn real_safetensors(config_json: &str, reference: &RealReference) -> Vec<u8> {
    let cfg = Qwen3Config::from_json(config_json).expect("fixture config.json parses");
    let tensors: Vec<_> = expected_tensors(&cfg)
        .into_iter()
        .map(|(n, s)| (n.clone(), s.clone(), tensor_bf16(&n, &s, reference.seed, reference.linear_boost)))
        .collect();
    safetensors_bytes(&tensors)
}

/// The fixture as a model folder in memory: its config.json and a generated model.safetensors.
pub fn real_store(name: &str, config_json: &str, reference: &RealReference) -> MemStore {
    MemStore::new(name)
        .with("config.json", config_json.as_bytes().to_vec())
        .with("model.safetensors", real_safetensors(config_json, reference))
}
