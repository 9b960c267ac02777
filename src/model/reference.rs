//! The CPU oracle: plain f32 loops for every kernel and the whole Qwen3 forward pass, written for
//! clarity, not speed. GPU kernels and the GPU model are tested against these.

use super::checkpoint::TensorProvider;
use super::config::{inv_freq, Qwen3Config};
use super::quant::dequantise;
use super::safetensors::bf16_to_f32;
use crate::error::Result;
use crate::gpu::WeightFormat;

/// W (n, k) bf16 @ x (m, k) -> y (m, n)
pub fn matmul(x: &[f32], m: usize, k: usize, w: &[u16], n: usize) -> Vec<f32> {
    let mut y = vec![0f32; m * n];
    for i in 0..m {
        for o in 0..n {
            let mut acc = 0f32;
            for j in 0..k {
                acc += x[i * k + j] * bf16_to_f32(w[o * k + j]);
            }
            y[i * n + o] = acc;
        }
    }
    y
}

/// W (n, k) f32 @ x (m, k) -> y (m, n): the whole model's matmuls, on weights as the GPU computes
/// with them (bf16 or dequantised int8 / int4, see `model::quant`).
pub fn matmul_f32(x: &[f32], m: usize, k: usize, w: &[f32], n: usize) -> Vec<f32> {
    let mut y = vec![0f32; m * n];
    for i in 0..m {
        for o in 0..n {
            y[i * n + o] = x[i * k..][..k].iter().zip(&w[o * k..][..k]).map(|(a, b)| a * b).sum();
        }
    }
    y
}

/// Row-wise RMSNorm: y (rows, width) = weight * x / sqrt(mean(x^2) + eps)
pub fn rms_norm(x: &[f32], width: usize, weight: &[f32], eps: f32) -> Vec<f32> {
    x.chunks_exact(width)
        .flat_map(|row| {
            let mean = row.iter().map(|v| v * v).sum::<f32>() / width as f32;
            let scale = 1.0 / (mean + eps).sqrt();
            row.iter().zip(weight).map(move |(v, w)| w * (v * scale))
        })
        .collect()
}

/// Rotate-half RoPE of one head in place at position `pos`.
pub fn rope(head: &mut [f32], pos: usize, inv_freq: &[f32]) {
    let half = head.len() / 2;
    for d in 0..half {
        let angle = pos as f32 * inv_freq[d];
        let (s, c) = (angle.sin(), angle.cos());
        let (x1, x2) = (head[d], head[d + half]);
        head[d] = x1 * c - x2 * s;
        head[d + half] = x2 * c + x1 * s;
    }
}

/// Causal GQA attention of one query head over keys/values at positions 0..=pos.
/// `keys`/`values`: (positions, head_dim) for this query's kv head.
pub fn attention_head(q: &[f32], keys: &[f32], values: &[f32], head_dim: usize) -> Vec<f32> {
    let scale = 1.0 / (head_dim as f32).sqrt();
    let scores: Vec<f32> =
        keys.chunks_exact(head_dim).map(|k| q.iter().zip(k).map(|(a, b)| a * b).sum::<f32>() * scale).collect();
    let max = scores.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
    let exps: Vec<f32> = scores.iter().map(|s| (s - max).exp()).collect();
    let sum: f32 = exps.iter().sum();
    let mut out = vec![0f32; head_dim];
    for (p, v) in exps.iter().zip(values.chunks_exact(head_dim)) {
        for d in 0..head_dim {
            out[d] += p / sum * v[d];
        }
    }
    out
}

pub fn silu(x: f32) -> f32 {
    x / (1.0 + (-x).exp())
}

/// Index of the largest value, lowest index on ties.
pub fn argmax(row: &[f32]) -> u32 {
    let mut best = 0;
    for (i, v) in row.iter().enumerate() {
        if *v > row[best] {
            best = i;
        }
    }
    best as u32
}

struct Layer {
    input_layernorm: Vec<f32>,
    post_attention_layernorm: Vec<f32>,
    q_norm: Vec<f32>,
    k_norm: Vec<f32>,
    q_proj: Vec<f32>,
    k_proj: Vec<f32>,
    v_proj: Vec<f32>,
    o_proj: Vec<f32>,
    gate_proj: Vec<f32>,
    up_proj: Vec<f32>,
    down_proj: Vec<f32>,
}

/// The whole model on the CPU (small models only: tests).
pub struct CpuModel {
    pub cfg: Qwen3Config,
    embed_tokens: Vec<f32>,
    lm_head: Vec<f32>,
    norm: Vec<f32>,
    layers: Vec<Layer>,
}

impl CpuModel {
    pub async fn load<P: TensorProvider>(src: &P) -> Result<CpuModel> {
        Self::load_as(src, WeightFormat::Bf16).await
    }

    /// The model whose matrices are `format`'s dequantised weights, as the GPU computes with them
    /// (q, k and v, and gate and up, are quantised apart: their rows stay apart when fused).
    pub async fn load_as<P: TensorProvider>(src: &P, format: WeightFormat) -> Result<CpuModel> {
        let cfg = src.config().clone();
        let all = |name: String, rows: usize| async move {
            let bits = src.rows_bf16(&name, 0, rows).await?;
            Ok::<_, crate::error::Error>(dequantise(&bits, bits.len() / rows.max(1), format))
        };
        let (h, q, kv, i) = (cfg.hidden_size, cfg.q_dim(), cfg.kv_dim(), cfg.intermediate_size);
        let mut layers = Vec::new();
        for l in 0..cfg.num_hidden_layers {
            let p = format!("model.layers.{l}");
            layers.push(Layer {
                input_layernorm: src.f32(&format!("{p}.input_layernorm.weight")).await?,
                post_attention_layernorm: src.f32(&format!("{p}.post_attention_layernorm.weight")).await?,
                q_norm: src.f32(&format!("{p}.self_attn.q_norm.weight")).await?,
                k_norm: src.f32(&format!("{p}.self_attn.k_norm.weight")).await?,
                q_proj: all(format!("{p}.self_attn.q_proj.weight"), q).await?,
                k_proj: all(format!("{p}.self_attn.k_proj.weight"), kv).await?,
                v_proj: all(format!("{p}.self_attn.v_proj.weight"), kv).await?,
                o_proj: all(format!("{p}.self_attn.o_proj.weight"), h).await?,
                gate_proj: all(format!("{p}.mlp.gate_proj.weight"), i).await?,
                up_proj: all(format!("{p}.mlp.up_proj.weight"), i).await?,
                down_proj: all(format!("{p}.mlp.down_proj.weight"), h).await?,
            });
        }
        Ok(CpuModel {
            embed_tokens: all("model.embed_tokens.weight".into(), cfg.vocab_size).await?,
            lm_head: all(src.lm_head_name().into(), cfg.vocab_size).await?,
            norm: src.f32("model.norm.weight").await?,
            layers,
            cfg,
        })
    }

    /// Logits (tokens.len(), vocab) for every position of `tokens`, full causal recompute.
    pub fn forward(&self, tokens: &[u32]) -> Vec<f32> {
        self.forward_at(tokens, &(0..tokens.len()).collect::<Vec<_>>())
    }

    /// Logits (positions.len(), vocab) after each of `positions` of `tokens`: the layers over all
    /// of them, the vocabulary-wide head only where asked (at Qwen3's vocabulary it dominates).
    pub fn forward_at(&self, tokens: &[u32], positions: &[usize]) -> Vec<f32> {
        let c = &self.cfg;
        let (t, h, hd) = (tokens.len(), c.hidden_size, c.head_dim);
        let (nh, nkv) = (c.num_attention_heads, c.num_key_value_heads);
        let eps = c.rms_norm_eps as f32;
        let freqs = inv_freq(hd, c.rope_theta);
        let mut x: Vec<f32> =
            tokens.iter().flat_map(|&id| self.embed_tokens[id as usize * h..][..h].iter().copied()).collect();
        for layer in &self.layers {
            // 1. Attention block: norm, projections, per-head q/k norm, RoPE, causal GQA attention.
            let normed = rms_norm(&x, h, &layer.input_layernorm, eps);
            let mut q = matmul_f32(&normed, t, h, &layer.q_proj, nh * hd);
            let mut k = matmul_f32(&normed, t, h, &layer.k_proj, nkv * hd);
            let v = matmul_f32(&normed, t, h, &layer.v_proj, nkv * hd);
            for pos in 0..t {
                for head in 0..nh {
                    let s = &mut q[(pos * nh + head) * hd..][..hd];
                    s.copy_from_slice(&rms_norm(s, hd, &layer.q_norm, eps));
                    rope(s, pos, &freqs);
                }
                for head in 0..nkv {
                    let s = &mut k[(pos * nkv + head) * hd..][..hd];
                    s.copy_from_slice(&rms_norm(s, hd, &layer.k_norm, eps));
                    rope(s, pos, &freqs);
                }
            }
            let mut attn = vec![0f32; t * nh * hd];
            for pos in 0..t {
                for head in 0..nh {
                    let kvh = head / (nh / nkv);
                    let gather = |m: &[f32]| -> Vec<f32> {
                        (0..=pos).flat_map(|j| m[(j * nkv + kvh) * hd..][..hd].to_vec()).collect()
                    };
                    let o = attention_head(&q[(pos * nh + head) * hd..][..hd], &gather(&k), &gather(&v), hd);
                    attn[(pos * nh + head) * hd..][..hd].copy_from_slice(&o);
                }
            }
            let o = matmul_f32(&attn, t, nh * hd, &layer.o_proj, h);
            x.iter_mut().zip(&o).for_each(|(a, b)| *a += b);
            // 2. MLP block: norm, SwiGLU, down projection, residual.
            let normed = rms_norm(&x, h, &layer.post_attention_layernorm, eps);
            let i = c.intermediate_size;
            let gate = matmul_f32(&normed, t, h, &layer.gate_proj, i);
            let up = matmul_f32(&normed, t, h, &layer.up_proj, i);
            let act: Vec<f32> = gate.iter().zip(&up).map(|(g, u)| silu(*g) * u).collect();
            let down = matmul_f32(&act, t, i, &layer.down_proj, h);
            x.iter_mut().zip(&down).for_each(|(a, b)| *a += b);
        }
        let rows: Vec<f32> = positions.iter().flat_map(|&p| x[p * h..][..h].iter().copied()).collect();
        let normed = rms_norm(&rows, h, &self.norm, eps);
        matmul_f32(&normed, positions.len(), h, &self.lm_head, c.vocab_size)
    }

    /// Weights the oracle holds, as f32 (every matrix, the head apart from the embedding).
    pub fn weights_of(cfg: &Qwen3Config) -> u64 {
        cfg.params_per_token() + (cfg.vocab_size * cfg.hidden_size) as u64
    }

    /// Whether the oracle can hold `cfg`'s model: at most [`crate::limits::CPU_ORACLE_MAX_WEIGHTS`].
    pub fn check_fits(cfg: &Qwen3Config) -> Result<()> {
        let (weights, max) = (Self::weights_of(cfg), crate::limits::CPU_ORACLE_MAX_WEIGHTS);
        if weights > max {
            return Err(crate::error::Error::Invalid(format!(
                "the CPU oracle holds every weight as f32 and runs plain loops: {:.0} M weights ({:.1} GB) is past its \
                 {} M ({:.1} GB); use a smaller model, or the engine as reference (no --quality-oracle)",
                weights as f64 / 1e6,
                weights as f64 * 4.0 / 1e9,
                max >> 20,
                max as f64 * 4.0 / 1e9
            )));
        }
        Ok(())
    }

    /// Greedy continuation by full recompute: `steps` new ids.
    pub fn greedy(&self, prompt: &[u32], steps: usize) -> Vec<u32> {
        let mut ids = prompt.to_vec();
        for _ in 0..steps {
            let logits = self.forward_at(&ids, &[ids.len() - 1]);
            ids.push(argmax(&logits));
        }
        ids[prompt.len()..].to_vec()
    }
}

/// Sampling as `sample.wgsl` defines it, by sorting: top-k (ties kept), then top-p (smallest top
/// set with mass >= top_p), then the first index whose running kept mass exceeds `u * kept mass`.
pub fn sample(logits: &[f32], s: &crate::gpu::kernels::RowSample) -> u32 {
    if s.is_greedy() {
        return argmax(logits);
    }
    let max = logits.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
    let z: Vec<f64> = logits.iter().map(|l| ((l - max) / s.temperature) as f64).collect();
    let mut sorted = z.clone();
    sorted.sort_by(|a, b| b.partial_cmp(a).expect("no NaN"));
    let mut tau = *sorted.last().expect("non-empty");
    if s.top_k > 0 && (s.top_k as usize) < z.len() {
        tau = sorted[s.top_k as usize - 1];
    }
    if s.top_p < 1.0 {
        let kept: f64 = sorted.iter().filter(|&&v| v >= tau).map(|v| v.exp()).sum();
        let mut acc = 0.0;
        for &v in &sorted {
            acc += v.exp();
            if acc >= s.top_p as f64 * kept {
                tau = tau.max(v);
                break;
            }
        }
    }
    let total: f64 = z.iter().filter(|&&v| v >= tau).map(|v| v.exp()).sum();
    let target = s.u as f64 * total;
    let mut acc = 0.0;
    let mut pick = 0;
    for (i, &v) in z.iter().enumerate() {
        if v >= tau {
            acc += v.exp();
            pick = i;
            if acc > target {
                break;
            }
        }
    }
    pick as u32
}
