//! Running requests to completion through the engine (CLI `generate`, tests, the playground).

use super::batcher::{Engine, Event, EventKind, Request};
use super::forward::EngineLimits;
use super::scheduler::{FinishReason, SamplingParams};
use crate::clock::now_s;
use crate::error::{Error, Result};
use crate::model::Qwen3Config;
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct Completion {
    pub id: u64,
    pub prompt_ids: Vec<u32>,
    pub tokens: Vec<u32>,
    /// Seconds, monotonic: when the request was submitted, and when each token's id reached the CPU.
    pub start_s: f64,
    pub token_times_s: Vec<f64>,
    pub finish: Option<FinishReason>,
    pub preemptions: u32,
    /// Speculative decoding: draft tokens verified for this request, and accepted.
    pub drafted_tokens: usize,
    pub accepted_tokens: usize,
    /// Prompt tokens served from the prefix cache (0 without it).
    pub cached_tokens: usize,
}

impl Completion {
    /// The completion as `generate --json` prints it (the CLI's and `scripts/dawn-run`'s, one line
    /// each): ids, tokens, times, how it finished; `text` when a tokenizer decoded it.
    pub fn json_line(&self, text: Option<String>) -> serde_json::Value {
        let mut line = serde_json::json!({
            "id": self.id,
            "prompt_ids": self.prompt_ids,
            "tokens": self.tokens,
            "ttft_ms": self.ttft_ms(),
            "tpot_ms": if self.tokens.len() > 1 { serde_json::json!(self.tpot_ms()) } else { serde_json::Value::Null },
            "finish": self.finish,
            "preemptions": self.preemptions,
            "cached_tokens": self.cached_tokens,
        });
        if let Some(text) = text {
            line["text"] = text.into();
        }
        line
    }

    /// [`crate::latency::ttft_s`] from submission; NaN before the first token.
    pub fn ttft_ms(&self) -> f64 {
        crate::latency::ttft_s(self.start_s, self.token_times_s.first().copied()).map_or(f64::NAN, |s| s * 1e3)
    }

    /// [`crate::latency::tpot_s`] over the tokens so far; NaN with fewer than two.
    pub fn tpot_ms(&self) -> f64 {
        let times = &self.token_times_s;
        crate::latency::tpot_s(times.first().copied(), times.last().copied(), times.len()).map_or(f64::NAN, |s| s * 1e3)
    }
}

/// Checks a prompt against the model before any GPU work.
pub fn check_prompt(cfg: &Qwen3Config, limits: &EngineLimits, prompt: &[u32], max_new_tokens: usize) -> Result<()> {
    check_prompt_fits(cfg, prompt, max_new_tokens)?;
    let total = prompt.len().saturating_add(max_new_tokens);
    let kv_tokens = limits.num_blocks.saturating_mul(limits.block_size);
    if total > kv_tokens {
        return Err(Error::Prompt(format!(
            "{total} tokens do not fit the KV cache ({kv_tokens} token slots); use more KV blocks"
        )));
    }
    Ok(())
}

/// The checks that need only the config (done before loading weights).
pub fn check_prompt_fits(cfg: &Qwen3Config, prompt: &[u32], max_new_tokens: usize) -> Result<()> {
    if prompt.is_empty() {
        return Err(Error::Prompt("the prompt is empty".into()));
    }
    if let Some(&id) = prompt.iter().find(|&&id| id as usize >= cfg.vocab_size) {
        return Err(Error::Prompt(format!("token id {id} is outside the vocabulary (size {})", cfg.vocab_size)));
    }
    // Saturating: `max_new_tokens` may come from outside unchecked (the library's callers).
    let total = prompt.len().saturating_add(max_new_tokens);
    if total > cfg.max_position_embeddings {
        return Err(Error::Prompt(format!(
            "{} prompt tokens + {max_new_tokens} new tokens = {total} exceeds max_position_embeddings {}",
            prompt.len(),
            cfg.max_position_embeddings
        )));
    }
    Ok(())
}

/// Submits all requests at once and steps the engine until they finish; results in submission order.
pub async fn generate(
    engine: &mut Engine,
    requests: Vec<Request>,
    on_event: &mut dyn FnMut(&Event),
) -> Result<Vec<Completion>> {
    let start_s = now_s();
    let mut out = Vec::with_capacity(requests.len());
    for req in requests {
        let prompt_ids = req.prompt.clone();
        let id = engine.submit(req)?;
        out.push(Completion {
            id,
            prompt_ids,
            tokens: vec![],
            start_s,
            token_times_s: vec![],
            finish: None,
            preemptions: 0,
            drafted_tokens: 0,
            accepted_tokens: 0,
            cached_tokens: 0,
        });
    }
    let first = out.first().map_or(0, |c| c.id);
    while out.iter().any(|c| c.finish.is_none()) {
        let (events, _) = engine.step().await?;
        for e in &events {
            let Some(c) = e.id.checked_sub(first).and_then(|i| out.get_mut(i as usize)) else { continue };
            match e.kind {
                EventKind::FirstToken { token } | EventKind::Token { token } => {
                    c.tokens.push(token);
                    c.token_times_s.push(e.t_s);
                }
                EventKind::Finished { reason } => c.finish = Some(reason),
                EventKind::Preempted => c.preemptions += 1,
                EventKind::Speculated { drafted, accepted } => {
                    c.drafted_tokens += drafted as usize;
                    c.accepted_tokens += accepted as usize;
                }
                EventKind::Scheduled { cached_tokens } => c.cached_tokens = cached_tokens as usize,
            }
            on_event(e);
        }
        if !engine.has_work() && out.iter().any(|c| c.finish.is_none()) {
            return Err(Error::Invalid("the engine went idle with requests unfinished".into()));
        }
    }
    Ok(out)
}

/// One greedy request, with `on_token(index, id)` as each id arrives.
pub async fn generate_greedy(
    engine: &mut Engine,
    prompt: &[u32],
    max_new_tokens: usize,
    stop_ids: &[u32],
    on_token: &mut dyn FnMut(usize, u32),
) -> Result<Completion> {
    let req = Request {
        prompt: prompt.to_vec(),
        max_new_tokens,
        sampling: SamplingParams::default(),
        stop_ids: stop_ids.to_vec(),
        ignore_eos: false,
    };
    let mut n = 0;
    let mut done = generate(engine, vec![req], &mut |e| {
        if let EventKind::FirstToken { token } | EventKind::Token { token } = e.kind {
            on_token(n, token);
            n += 1;
        }
    })
    .await?;
    Ok(done.remove(0))
}
