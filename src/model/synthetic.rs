//! Random-weight models with the shapes of a real config: the embedded default model, and the
//! `--synthetic qwen3-0.6b` benchmark shapes. Weights come from a seeded generator per tensor row,
//! so any row range is reproducible without generating the rest.

use super::checkpoint::TensorProvider;
use super::config::Qwen3Config;
use super::safetensors::f32_to_bf16;
use crate::error::Result;
use crate::gpu::fill::{random_bf16, RandomSpec};
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

    /// Norm weights, near 1 (host-generated: they are small).
    fn norm_values(&self, name: &str, len: usize) -> Vec<f32> {
        let mut rng = SmallRng::seed_from_u64(name_hash(name) ^ self.seed.rotate_left(17));
        (0..len).map(|_| rng.random_range(0.8f32..1.2)).collect()
    }

    /// Matrices: uniform on 256 levels, made by the GPU (`shaders/fill.wgsl`) or, bit for bit the
    /// same, by [`random_bf16`] on the host. Scaled by 1/sqrt(fan_in) so activations stay O(1)
    /// through the layers, with the standard deviation of the usual normal initialisation.
    fn matrix_spec(&self, name: &str) -> RandomSpec {
        let fan_in = self.row_len(name) as f32;
        let std = if name.contains("embed_tokens") { 1.0 } else { 1.0 / fan_in.sqrt() };
        let h = name_hash(name) ^ self.seed.rotate_left(17);
        RandomSpec { seed: (h ^ (h >> 32)) as u32, scale: std * 3f32.sqrt() / 127.5 }
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
        if name.ends_with("norm.weight") {
            return Ok(self.norm_values(name, len).into_iter().map(f32_to_bf16).collect());
        }
        let spec = self.matrix_spec(name);
        let mut out = Vec::with_capacity(rows * len);
        for r in row_start..row_start + rows {
            out.extend((0..len).map(|c| random_bf16(spec, r as u32, c as u32)));
        }
        Ok(out)
    }
    async fn f32(&self, name: &str) -> Result<Vec<f32>> {
        // Norm weights are stored as bf16 in real checkpoints; round the same way.
        let len = self.row_len(name);
        Ok(self.norm_values(name, len).into_iter().map(|x| super::safetensors::bf16_to_f32(f32_to_bf16(x))).collect())
    }
    fn random_spec(&self, name: &str) -> Option<RandomSpec> {
        (!name.ends_with("norm.weight")).then(|| self.matrix_spec(name))
    }
    fn total_bytes(&self) -> u64 {
        super::checkpoint::expected_tensors(&self.config)
            .iter()
            .map(|(_, s)| s.iter().product::<usize>() as u64 * 2)
            .sum()
    }
}
