//! Greedy generation of one sequence: prefill the prompt (in chunks of at most
//! `max_batched_tokens`), then decode one token per step, reusing the KV cache.

use super::kv::BlockAllocator;
use super::model::{Batch, Model};
use crate::clock::now_s;
use crate::error::{Error, Result};
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct Generation {
    pub prompt_ids: Vec<u32>,
    pub tokens: Vec<u32>,
    /// Seconds, monotonic: when generation was asked for, and when each token's id reached the CPU.
    pub start_s: f64,
    pub token_times_s: Vec<f64>,
}

impl Generation {
    pub fn ttft_ms(&self) -> f64 {
        self.token_times_s
            .first()
            .map_or(f64::NAN, |t| (t - self.start_s) * 1e3)
    }

    /// (last - first) / (n - 1); NaN with fewer than two tokens.
    pub fn tpot_ms(&self) -> f64 {
        let n = self.token_times_s.len();
        if n < 2 {
            return f64::NAN;
        }
        (self.token_times_s[n - 1] - self.token_times_s[0]) / (n - 1) as f64 * 1e3
    }
}

/// Checks a prompt against the model before any GPU work.
pub fn check_prompt(model: &Model, prompt: &[u32], max_new_tokens: usize) -> Result<()> {
    check_prompt_fits(&model.cfg, prompt, max_new_tokens)?;
    let total = prompt.len() + max_new_tokens;
    let kv_tokens = model.limits.num_blocks * model.limits.block_size;
    if total > kv_tokens {
        return Err(Error::Prompt(format!(
            "{total} tokens do not fit the KV cache ({kv_tokens} token slots)"
        )));
    }
    Ok(())
}

/// The checks that need only the config (done before loading weights).
pub fn check_prompt_fits(
    cfg: &crate::model::Qwen3Config,
    prompt: &[u32],
    max_new_tokens: usize,
) -> Result<()> {
    if prompt.is_empty() {
        return Err(Error::Prompt("the prompt is empty".into()));
    }
    if let Some(&id) = prompt.iter().find(|&&id| id as usize >= cfg.vocab_size) {
        return Err(Error::Prompt(format!(
            "token id {id} is outside the vocabulary (size {})",
            cfg.vocab_size
        )));
    }
    let total = prompt.len() + max_new_tokens;
    if total > cfg.max_position_embeddings {
        return Err(Error::Prompt(format!(
            "{} prompt tokens + {max_new_tokens} new tokens = {total} exceeds max_position_embeddings {}",
            prompt.len(),
            cfg.max_position_embeddings
        )));
    }
    Ok(())
}

/// Greedy decoding of `prompt` for `max_new_tokens` tokens, stopping early at an id in `stop`.
/// `on_token(index, id)` is called as each id arrives.
pub async fn generate_greedy(
    model: &mut Model,
    prompt: &[u32],
    max_new_tokens: usize,
    stop: &[u32],
    on_token: &mut dyn FnMut(usize, u32),
) -> Result<Generation> {
    check_prompt(model, prompt, max_new_tokens)?;
    let start_s = now_s();
    let block_size = model.limits.block_size;
    let mut alloc = BlockAllocator::new(model.limits.num_blocks);
    let needed = (prompt.len() + max_new_tokens).div_ceil(block_size);
    let table = alloc
        .allocate(needed)
        .expect("checked against the cache size");

    let mut out = Generation {
        prompt_ids: prompt.to_vec(),
        tokens: Vec::new(),
        start_s,
        token_times_s: Vec::new(),
    };
    if max_new_tokens == 0 {
        return Ok(out);
    }
    let chunk = model.limits.max_batched_tokens;
    let mut pos = 0;
    let mut next = 0;
    while pos < prompt.len() {
        let end = (pos + chunk).min(prompt.len());
        let tokens = (pos..end)
            .map(|p| [prompt[p], p as u32, 0, 0])
            .collect::<Vec<_>>();
        let last = end == prompt.len();
        let batch = Batch {
            logit_rows: if last {
                vec![(end - pos - 1) as u32]
            } else {
                vec![]
            },
            tokens,
            block_tables: vec![table.clone()],
        };
        let ids = model.step(&batch).await?;
        if last {
            next = ids[0];
        }
        pos = end;
    }
    loop {
        out.tokens.push(next);
        out.token_times_s.push(now_s());
        on_token(out.tokens.len() - 1, next);
        if out.tokens.len() >= max_new_tokens || stop.contains(&next) {
            break;
        }
        let position = (prompt.len() + out.tokens.len() - 1) as u32;
        let batch = Batch {
            tokens: vec![[next, position, 0, 0]],
            logit_rows: vec![0],
            block_tables: vec![table.clone()],
        };
        next = model.step(&batch).await?[0];
    }
    Ok(out)
}
