//! Speculative decoding with a draft model: a second, smaller Qwen3 with the target's vocabulary,
//! its own [`ForwardPass`] and its own paged KV cache, proposes K tokens greedily for every
//! decoding sequence before the engine schedules a step; the target verifies them in that step
//! exactly as it verifies a prompt-lookup draft (`Planned::draft`, [`super::scheduler`]).
//!
//! Per step, for the greedy sequences that decode (the ones the scheduler drafts for):
//! 1. Catch up: the draft model runs the tokens of the sequence its cache does not hold — the
//!    whole prompt on first use, then the tokens the target accepted last step — the last one
//!    yielding the first draft token. Its cache is first rolled back to the longest prefix it
//!    shares with the sequence (rejected draft tokens are dropped, their blocks freed).
//! 2. Propose: K − 1 more one-token steps, batched over all those sequences, each feeding the
//!    previous draft token.
//!
//! The cache then holds the sequence plus the first K − 1 draft tokens; what the target accepts
//! of them stays for the next step. Sequences that leave the running set (finished, cancelled,
//! preempted) lose their draft cache. Sampled requests are not drafted for, as with prompt lookup.

use std::collections::HashMap;

use super::forward::{Batch, ForwardPass};
use super::kv::BlockAllocator;
use super::scheduler::Sequence;
use crate::error::{Error, Result};
use crate::model::Qwen3Config;

/// What the draft model's cache holds for one sequence.
struct Cached {
    /// Tokens at positions `0..tokens.len()` of its KV cache (the sequence's tokens, then draft
    /// tokens, possibly since rejected).
    tokens: Vec<u32>,
    blocks: Vec<u32>,
}

/// One sequence being drafted for in this step.
struct Drafting {
    id: u64,
    /// Its tokens not yet in the draft cache (the catch-up), then the draft so far.
    pending: Vec<u32>,
    /// Position of `pending[0]`.
    start: usize,
    /// Draft tokens wanted.
    k: usize,
    draft: Vec<u32>,
}

pub struct DraftModel {
    pub model: ForwardPass,
    /// Draft tokens per sequence per step.
    k: usize,
    blocks: BlockAllocator,
    cached: HashMap<u64, Cached>,
}

impl DraftModel {
    /// `model` drafting `k` tokens for a target with config `target`: refused unless both have
    /// the same vocabulary size (token ids must mean the same; the caller compares tokenizers).
    pub fn new(model: ForwardPass, target: &Qwen3Config, k: usize) -> Result<DraftModel> {
        if model.cfg.vocab_size != target.vocab_size {
            return Err(Error::Invalid(format!(
                "the draft model's vocabulary ({} ids) differs from the target's ({} ids): speculative decoding needs \
                 the same tokenizer",
                model.cfg.vocab_size, target.vocab_size
            )));
        }
        if k == 0 {
            return Err(Error::Invalid("a draft model must propose at least one token per step".into()));
        }
        let blocks = BlockAllocator::new(model.limits.num_blocks);
        Ok(DraftModel { model, k, blocks, cached: HashMap::new() })
    }

    /// KV blocks of the draft model's cache in use.
    pub fn kv_blocks_used(&self) -> usize {
        self.blocks.used()
    }

    /// Frees the cache of every sequence no longer in `running` (finished, cancelled, preempted).
    pub fn forget_gone(&mut self, running: &[Sequence]) {
        let blocks = &mut self.blocks;
        self.cached.retain(|id, cached| {
            let live = running.iter().any(|s| s.id == *id);
            if !live {
                blocks.release(&mut cached.blocks);
            }
            live
        });
    }

    /// Draft tokens for each greedy decoding sequence of `running` (by id), up to K and never
    /// more than the sequence may still generate beyond the token its step always yields.
    pub async fn propose(&mut self, running: &[Sequence]) -> Result<HashMap<u64, Vec<u32>>> {
        self.forget_gone(running);
        let block_size = self.model.limits.block_size;
        let max_positions = self.model.cfg.max_position_embeddings;
        let mut drafting = Vec::new();
        for seq in running {
            let left = seq.max_new_tokens.saturating_sub(seq.output().len() + 1);
            let decoding = seq.computed + 1 == seq.tokens.len();
            // Positions written: the sequence's, then the first k − 1 draft tokens.
            let k = self.k.min(left).min((max_positions + 1).saturating_sub(seq.tokens.len()));
            if !decoding || !seq.sampling.is_greedy() || k == 0 || drafting.len() == self.model.limits.max_seqs {
                continue;
            }
            let cached = self.cached.entry(seq.id).or_insert_with(|| Cached { tokens: Vec::new(), blocks: Vec::new() });
            // Roll back to what the cache shares with the sequence, less its last token at least
            // (it yields the first draft token).
            let shared = cached.tokens.iter().zip(&seq.tokens).take_while(|(a, b)| a == b).count();
            let shared = shared.min(seq.tokens.len() - 1);
            cached.tokens.truncate(shared);
            let keep = shared.div_ceil(block_size);
            if cached.blocks.len() > keep {
                let mut spare = cached.blocks.split_off(keep);
                self.blocks.release(&mut spare);
            }
            let need = (seq.tokens.len() + k - 1).div_ceil(block_size).saturating_sub(cached.blocks.len());
            let Some(more) = self.blocks.allocate(need) else { continue };
            cached.blocks.extend(more);
            let pending = seq.tokens[shared..].to_vec();
            drafting.push(Drafting { id: seq.id, pending, start: shared, k, draft: Vec::new() });
        }
        self.catch_up(&mut drafting).await?;
        for _ in 1..self.k {
            self.extend(&mut drafting).await?;
        }
        Ok(drafting.into_iter().map(|d| (d.id, d.draft)).collect())
    }

    /// Runs every sequence's catch-up tokens, in chunks within the draft model's token budget;
    /// the chunk that ends a sequence's catch-up yields its first draft token.
    async fn catch_up(&mut self, drafting: &mut [Drafting]) -> Result<()> {
        let budget = self.model.limits.max_batched_tokens;
        let mut done = vec![0usize; drafting.len()];
        while drafting.iter().zip(&done).any(|(d, &n)| n < d.pending.len()) {
            let mut batch = Batch::default();
            let mut ends = Vec::new(); // indexes into `drafting`, in logit-row order
            for (i, d) in drafting.iter().enumerate() {
                let take = (d.pending.len() - done[i]).min(budget - batch.tokens.len());
                if take == 0 {
                    continue;
                }
                let slot = batch.block_tables.len() as u32;
                for j in done[i]..done[i] + take {
                    batch.tokens.push([d.pending[j], (d.start + j) as u32, slot, 0]);
                }
                batch.block_tables.push(self.cached[&d.id].blocks.clone());
                done[i] += take;
                if done[i] == d.pending.len() {
                    batch.logit_rows.push(batch.tokens.len() as u32 - 1);
                    ends.push(i);
                }
                if batch.tokens.len() == budget {
                    break;
                }
            }
            let ids = self.model.step(&batch).await?;
            for (&i, &id) in ends.iter().zip(&ids) {
                drafting[i].draft.push(id);
            }
        }
        for d in drafting.iter_mut() {
            let cached = self.cached.get_mut(&d.id).expect("a drafting sequence is cached");
            cached.tokens.extend_from_slice(&d.pending);
            d.start += d.pending.len();
            d.pending.clear();
        }
        Ok(())
    }

    /// One draft token more for each sequence that wants one: its last draft token in, the
    /// next out (one row each, all in one step).
    async fn extend(&mut self, drafting: &mut [Drafting]) -> Result<()> {
        let mut batch = Batch::default();
        let mut rows = Vec::new();
        for (i, d) in drafting.iter().enumerate() {
            if d.draft.len() >= d.k {
                continue;
            }
            let last = *d.draft.last().expect("catch-up yields the first draft token");
            let cached = &self.cached[&d.id];
            let slot = batch.block_tables.len() as u32;
            batch.tokens.push([last, cached.tokens.len() as u32, slot, 0]);
            batch.logit_rows.push(batch.tokens.len() as u32 - 1);
            batch.block_tables.push(cached.blocks.clone());
            rows.push(i);
        }
        if rows.is_empty() {
            return Ok(());
        }
        let ids = self.model.step(&batch).await?;
        for (&i, &id) in rows.iter().zip(&ids) {
            let d = &mut drafting[i];
            let cached = self.cached.get_mut(&d.id).expect("a drafting sequence is cached");
            cached.tokens.push(*d.draft.last().expect("checked"));
            d.draft.push(id);
        }
        Ok(())
    }
}
