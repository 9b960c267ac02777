//! Next-token distributions of given token sequences, from whatever can compute them: the engine
//! (its forward pass, one prefill in chunks) or the CPU oracle ([`CpuModel`]). A quality pass
//! (`bench::verdict::quality`) compares two of them over the same sequences; it never runs inside a timed
//! run.

use super::batcher::{Engine, Request};
use super::forward::Batch;
use super::generate::{check_prompt, check_prompt_fits, generate};
use super::scheduler::SamplingParams;
use crate::error::{Error, Result};
use crate::model::reference::CpuModel;

/// A model that gives next-token logits and greedy continuations.
#[allow(async_fn_in_trait)] // used generically (no `dyn`), on one thread
pub trait LogitSource {
    /// Columns of a logit row.
    fn vocab_size(&self) -> usize;

    /// The logits of the token after each of `positions` of `tokens` (one sequence, from position
    /// 0; `positions` ascending): `(positions.len(), vocab)`.
    async fn logits_at(&mut self, tokens: &[u32], positions: &[usize]) -> Result<Vec<f32>>;

    /// Each prompt's greedy continuation, `new_tokens` ids (EOS does not stop it).
    async fn greedy(&mut self, prompts: &[Vec<u32>], new_tokens: usize) -> Result<Vec<Vec<u32>>>;
}

/// `positions` must index `tokens`, ascending (the callers build them; a bad list is an error
/// rather than a wrong row).
fn check_positions(tokens: &[u32], positions: &[usize]) -> Result<()> {
    let ascending = positions.windows(2).all(|w| w[0] < w[1]);
    if !ascending || positions.last().is_some_and(|&p| p >= tokens.len()) {
        return Err(Error::Invalid(format!(
            "logit positions must ascend below the sequence's {} tokens",
            tokens.len()
        )));
    }
    Ok(())
}

impl LogitSource for Engine {
    fn vocab_size(&self) -> usize {
        self.model.cfg.vocab_size
    }

    /// The sequence is prefilled in chunks of at most `min(max_batched_tokens, max_logit_rows)`
    /// tokens, each step reading back the rows of its wanted positions, in KV blocks taken from
    /// the batcher's allocator (so no request's or cached prefix's K/V is overwritten).
    async fn logits_at(&mut self, tokens: &[u32], positions: &[usize]) -> Result<Vec<f32>> {
        if self.has_work() {
            return Err(Error::Invalid("logits of a sequence: the engine is serving requests".into()));
        }
        check_positions(tokens, positions)?;
        check_prompt(&self.model.cfg, &self.model.limits, tokens, 0)?;
        let limits = self.model.limits.clone();
        let chunk = limits.max_batched_tokens.min(limits.max_logit_rows);
        let blocks = self.take_blocks(tokens.len().div_ceil(limits.block_size))?;
        let mut out = Vec::with_capacity(positions.len() * self.vocab_size());
        let mut result = Ok(());
        for start in (0..tokens.len()).step_by(chunk) {
            if positions.last().is_none_or(|&p| p < start) {
                break; // nothing wanted past here
            }
            let end = (start + chunk).min(tokens.len());
            let rows: Vec<u32> =
                positions.iter().filter(|&&p| (start..end).contains(&p)).map(|&p| (p - start) as u32).collect();
            let batch = Batch {
                tokens: (start..end).map(|p| [tokens[p], p as u32, 0, 0]).collect(),
                logit_rows: rows,
                block_tables: vec![blocks.clone()],
                sampling: Vec::new(),
            };
            let step = if batch.logit_rows.is_empty() {
                self.model.step(&batch).await.map(|_| ())
            } else {
                self.model.step_logits(&batch).await.map(|rows| out.extend(rows))
            };
            if let Err(e) = step {
                result = Err(e);
                break;
            }
        }
        self.release_blocks(blocks);
        result.map(|()| out)
    }

    async fn greedy(&mut self, prompts: &[Vec<u32>], new_tokens: usize) -> Result<Vec<Vec<u32>>> {
        let requests = prompts
            .iter()
            .map(|prompt| Request {
                prompt: prompt.clone(),
                max_new_tokens: new_tokens,
                sampling: SamplingParams::default(),
                stop_ids: Vec::new(),
                ignore_eos: true,
            })
            .collect();
        Ok(generate(self, requests, &mut |_| {}).await?.into_iter().map(|c| c.tokens).collect())
    }
}

impl LogitSource for CpuModel {
    fn vocab_size(&self) -> usize {
        self.cfg.vocab_size
    }

    async fn logits_at(&mut self, tokens: &[u32], positions: &[usize]) -> Result<Vec<f32>> {
        check_positions(tokens, positions)?;
        check_prompt_fits(&self.cfg, tokens, 0)?;
        Ok(self.forward_at(tokens, positions))
    }

    async fn greedy(&mut self, prompts: &[Vec<u32>], new_tokens: usize) -> Result<Vec<Vec<u32>>> {
        prompts
            .iter()
            .map(|prompt| {
                check_prompt_fits(&self.cfg, prompt, new_tokens)?;
                Ok(CpuModel::greedy(self, prompt, new_tokens))
            })
            .collect()
    }
}
