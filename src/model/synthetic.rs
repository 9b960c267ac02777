//! Random-weight models with the shapes of a real config: the embedded default model, and the
//! `--synthetic qwen3-0.6b` benchmark shapes. Weights come from a seeded generator per tensor row,
//! so any row range is reproducible without generating the rest.

use super::checkpoint::TensorProvider;
use super::config::Qwen3Config;
use super::safetensors::f32_to_bf16;
use crate::error::Result;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

pub struct SyntheticModel {
    pub config: Qwen3Config,
    pub seed: u64,
}

/// FNV-1a, to derive a stable per-tensor seed from its name.
fn name_hash(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3))
}

impl SyntheticModel {
    pub fn new(config: Qwen3Config, seed: u64) -> Self {
        SyntheticModel { config, seed }
    }

    /// The tiny default model shipped in the app: the real Qwen3 vocabulary (so the real tokenizer
    /// works) on a small random body.
    pub fn embedded_default() -> Self {
        let config = Qwen3Config {
            vocab_size: 151_936,
            hidden_size: 128,
            intermediate_size: 384,
            num_hidden_layers: 4,
            num_attention_heads: 4,
            num_key_value_heads: 2,
            head_dim: 32,
            max_position_embeddings: 4096,
            rms_norm_eps: 1e-6,
            rope_theta: 1_000_000.0,
            // Untied: with a tied head a random model's likeliest next token is the one it just
            // read, and it repeats it forever.
            tie_word_embeddings: false,
            eos_token_ids: vec![151_645, 151_643],
        };
        SyntheticModel::new(config, 0x5eed)
    }

    fn row_values(&self, name: &str, row: usize, len: usize) -> Vec<f32> {
        let mut rng = SmallRng::seed_from_u64(
            name_hash(name) ^ self.seed.rotate_left(17) ^ (row as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15),
        );
        if name.ends_with("norm.weight") {
            return (0..len).map(|_| rng.random_range(0.8f32..1.2)).collect();
        }
        // Linear weights scaled by 1/sqrt(fan_in) keep activations O(1) through the layers. Uniform
        // with the same standard deviation as a normal: a billion of them generate in seconds.
        let std = if name.contains("embed_tokens") { 1.0 } else { 1.0 / (len as f32).sqrt() };
        let half_width = std * 3f32.sqrt();
        (0..len).map(|_| (rng.random::<f32>() * 2.0 - 1.0) * half_width).collect()
    }

    fn row_len(&self, name: &str) -> usize {
        super::checkpoint::expected_tensors(&self.config)
            .into_iter()
            .find(|(n, _)| n == name)
            .map(|(_, shape)| if shape.len() == 1 { shape[0] } else { shape[1] })
            .unwrap_or(self.config.hidden_size)
    }
}

impl TensorProvider for SyntheticModel {
    fn config(&self) -> &Qwen3Config {
        &self.config
    }
    fn lm_head_name(&self) -> &str {
        if self.config.tie_word_embeddings {
            "model.embed_tokens.weight"
        } else {
            "lm_head.weight"
        }
    }
    async fn rows_bf16(&self, name: &str, row_start: usize, rows: usize) -> Result<Vec<u16>> {
        let len = self.row_len(name);
        let mut out = Vec::with_capacity(rows * len);
        for r in row_start..row_start + rows {
            out.extend(self.row_values(name, r, len).into_iter().map(f32_to_bf16));
        }
        Ok(out)
    }
    async fn f32(&self, name: &str) -> Result<Vec<f32>> {
        // Norm weights are stored as bf16 in real checkpoints; round the same way.
        let len = self.row_len(name);
        Ok(self.row_values(name, 0, len).into_iter().map(|x| super::safetensors::bf16_to_f32(f32_to_bf16(x))).collect())
    }
    fn total_bytes(&self) -> u64 {
        super::checkpoint::expected_tensors(&self.config)
            .iter()
            .map(|(_, s)| s.iter().product::<usize>() as u64 * 2)
            .sum()
    }
}
