//! Continuous batching under a scheduling policy ([`Policy`]: fcfs, prefill-first, decode-first).
//! Each step combines the running sequences (decodes and unfinished chunked prefills, in admission
//! order) with newly admitted prefills, under two knobs:
//! `max_seqs` (running sequences) and `max_batched_tokens` (tokens per step). When KV blocks run
//! out, the most recently admitted sequence is preempted: its blocks are freed and it goes back to
//! the front of the queue, to be recomputed (prompt + output so far) when blocks free up.
//! No GPU here: the plan is data, tested on its own.

use super::kv::{block_hash, BlockAllocator};
use super::speculate::{accepted_prefix, ngram_draft};
use crate::gpu::kernels::RowSample;
use crate::gpu::PREVIOUS_ID;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::{HashMap, VecDeque};

#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SamplingParams {
    /// 0: greedy.
    pub temperature: f32,
    /// 0: off.
    pub top_k: u32,
    /// 1: off.
    pub top_p: f32,
    pub seed: u64,
}

impl SamplingParams {
    /// The sampling kernel's settings for one logit row, `u` its uniform draw.
    pub fn row(&self, u: f32) -> RowSample {
        RowSample { temperature: self.temperature, top_k: self.top_k, top_p: self.top_p, u }
    }

    /// Greedy (the most likely token, no draw) as the sampling kernel decides it:
    /// [`RowSample::is_greedy`], the one definition.
    pub fn is_greedy(&self) -> bool {
        self.row(0.0).is_greedy()
    }
}

impl Default for SamplingParams {
    fn default() -> Self {
        SamplingParams { temperature: 0.0, top_k: 0, top_p: 1.0, seed: 0 }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// `max_new_tokens` reached.
    Length,
    /// A stop id (EOS) was generated.
    Stop,
    Cancelled,
}

/// A token [`Scheduler::resolve`] put in place of its placeholder: (sequence id, index in its
/// output, token).
pub type Resolved = (u64, usize, u32);

/// A request in the engine: prompt + output so far, and where its KV lives.
#[derive(Debug)]
pub struct Sequence {
    pub id: u64,
    /// Prompt followed by the generated tokens.
    pub tokens: Vec<u32>,
    pub prompt_len: usize,
    pub max_new_tokens: usize,
    /// Tokens whose K/V are in the cache.
    pub computed: usize,
    pub blocks: Vec<u32>,
    pub sampling: SamplingParams,
    pub stop_ids: Vec<u32>,
    pub preemptions: u32,
    /// Draft tokens proposed for this sequence and how many of them the model confirmed
    /// (speculative decoding; both 0 without it).
    pub drafted: usize,
    pub accepted: usize,
    /// Prompt tokens served from the prefix cache at its first admission (0 without caching).
    pub cached_tokens: usize,
    /// Hashes of its leading full blocks whose every slot is committed (prefix caching): block
    /// `i` is registered under `block_hashes[i]`.
    block_hashes: Vec<u64>,
    rng: StdRng,
}

impl Sequence {
    pub fn new(id: u64, prompt: Vec<u32>, max_new_tokens: usize, sampling: SamplingParams, stop_ids: Vec<u32>) -> Self {
        Sequence {
            id,
            prompt_len: prompt.len(),
            tokens: prompt,
            max_new_tokens,
            computed: 0,
            blocks: Vec::new(),
            rng: StdRng::seed_from_u64(sampling.seed),
            sampling,
            stop_ids,
            preemptions: 0,
            drafted: 0,
            accepted: 0,
            cached_tokens: 0,
            block_hashes: Vec::new(),
        }
    }

    pub fn output(&self) -> &[u32] {
        &self.tokens[self.prompt_len..]
    }

    /// The uniform number the next token's draw uses (0 when greedy). The generator advances only
    /// when a token is actually drawn, so a preempted-and-recomputed sequence draws the same numbers
    /// as an undisturbed one.
    fn next_draw(&mut self) -> f32 {
        if self.sampling.is_greedy() {
            0.0
        } else {
            self.rng.random::<f32>()
        }
    }
}

/// In which order a step's token budget goes to the three kinds of work (docs/ARCHITECTURE.md,
/// "Scheduler rules"). Every order serves each kind in admission (or queue) order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Order {
    /// Running sequences in admission order, each with its decode or next prefill chunk, then
    /// admissions from the queue.
    #[default]
    Fcfs,
    /// Unfinished prefills of running sequences, then admissions, then decodes with what is left.
    PrefillFirst,
    /// Decodes of running sequences, then their unfinished prefills, then admissions.
    DecodeFirst,
}

impl Order {
    pub const NAMES: [&'static str; 3] = ["fcfs", "prefill-first", "decode-first"];

    pub fn name(self) -> &'static str {
        match self {
            Order::Fcfs => "fcfs",
            Order::PrefillFirst => "prefill-first",
            Order::DecodeFirst => "decode-first",
        }
    }
}

impl std::str::FromStr for Order {
    type Err = crate::error::Error;
    fn from_str(s: &str) -> crate::error::Result<Order> {
        match s {
            "fcfs" => Ok(Order::Fcfs),
            "prefill-first" => Ok(Order::PrefillFirst),
            "decode-first" => Ok(Order::DecodeFirst),
            other => Err(crate::error::Error::Invalid(format!(
                "unknown scheduling policy {:?} (one of {})",
                crate::limits::printable(other),
                Order::NAMES.join(", ")
            ))),
        }
    }
}

/// How the scheduler orders and cuts work. The default is the engine's original behaviour: FCFS,
/// chunked prefill, chunks limited only by the step's token budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct Policy {
    pub order: Order,
    /// A prefill longer than what is left of the step's budget is split over steps. Off: a
    /// sequence's whole prefill (its prompt, or prompt + output after a preemption) runs in one step.
    pub chunked_prefill: bool,
    /// At most this many prefill tokens of one sequence per step (chunked prefill only); `None`:
    /// as many as the budget leaves.
    pub prefill_chunk: Option<usize>,
}

impl Default for Policy {
    fn default() -> Self {
        Policy { order: Order::Fcfs, chunked_prefill: true, prefill_chunk: None }
    }
}

impl Policy {
    /// The longest request (prompt + new tokens) this policy can always serve with
    /// `max_batched_tokens` per step: without chunked prefill, a recompute after preemption is
    /// prompt + output so far (at most `max_new_tokens − 1` of it) in one step.
    pub fn check_request(
        &self,
        prompt_len: usize,
        max_new_tokens: usize,
        max_batched_tokens: usize,
    ) -> crate::error::Result<()> {
        match self.refusal(prompt_len, max_new_tokens, max_batched_tokens) {
            None => Ok(()),
            Some(r @ PolicyRefusal::PrefillPastStep { .. }) => Err(crate::error::Error::Prompt(r.to_string())),
            Some(r @ PolicyRefusal::ZeroChunk) => Err(crate::error::Error::Invalid(r.to_string())),
        }
    }

    /// Why this policy refuses such a request, as data ([`check_request`](Self::check_request)'s
    /// reason; the benchmark words it in each language).
    pub fn refusal(
        &self,
        prompt_len: usize,
        max_new_tokens: usize,
        max_batched_tokens: usize,
    ) -> Option<PolicyRefusal> {
        let longest_prefill = prompt_len + max_new_tokens.saturating_sub(1);
        if !self.chunked_prefill && longest_prefill > max_batched_tokens {
            return Some(PolicyRefusal::PrefillPastStep {
                prompt_len,
                max_new_tokens,
                longest_prefill,
                max_batched_tokens,
            });
        }
        (self.prefill_chunk == Some(0)).then_some(PolicyRefusal::ZeroChunk)
    }
}

/// Why a [`Policy`] refuses a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PolicyRefusal {
    /// Without chunked prefill, a prefill (a recompute after preemption too) past one step.
    PrefillPastStep {
        prompt_len: usize,
        max_new_tokens: usize,
        longest_prefill: usize,
        max_batched_tokens: usize,
    },
    ZeroChunk,
}

impl std::fmt::Display for PolicyRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PolicyRefusal::PrefillPastStep { prompt_len, max_new_tokens, longest_prefill, max_batched_tokens } => {
                write!(
                f,
                "without chunked prefill, {prompt_len} prompt tokens + {max_new_tokens} new tokens need prefills of up \
                 to {longest_prefill} tokens in one step, above max_batched_tokens {max_batched_tokens}"
            )
            }
            PolicyRefusal::ZeroChunk => f.write_str("the prefill chunk must be at least 1 token"),
        }
    }
}

/// Which running sequences a pass of [`Scheduler::schedule`] serves.
#[derive(Clone, Copy)]
enum Work {
    Both,
    /// One token left to compute: the sequence's last sampled token (or a prompt's last token).
    Decodes,
    /// More than one token left: an unfinished prefill (or a recompute after preemption).
    Prefills,
}

impl Work {
    fn includes(self, remaining: usize) -> bool {
        match self {
            Work::Both => true,
            Work::Decodes => remaining == 1,
            Work::Prefills => remaining > 1,
        }
    }
}

/// Tokens of one sequence in this step: positions `start..start + len`, the last `draft.len()`
/// of them speculative (not yet in the sequence).
#[derive(Debug, Clone, PartialEq)]
pub struct Planned {
    pub id: u64,
    pub start: usize,
    pub len: usize,
    /// The chunk reaches the end of the sequence, so its last token yields the next one, drawn with
    /// this uniform number (see [`SamplingParams`]; 0 when greedy). With a draft, every draft
    /// position yields one too (greedy only): `1 + draft.len()` logit rows.
    pub sample: Option<f32>,
    /// Tokens guessed to follow the sequence (speculative decoding), verified by this step.
    pub draft: Vec<u32>,
}

impl Planned {
    /// Logit rows (ids read back) this item needs.
    pub fn rows(&self) -> usize {
        if self.sample.is_some() {
            1 + self.draft.len()
        } else {
            0
        }
    }
}

#[derive(Debug, Default)]
pub struct Plan {
    pub items: Vec<Planned>,
    pub preempted: Vec<u64>,
    /// Sequences scheduled for the first time.
    pub admitted: Vec<u64>,
}

pub struct Scheduler {
    pub max_seqs: usize,
    pub max_batched_tokens: usize,
    pub block_size: usize,
    pub waiting: VecDeque<Sequence>,
    pub running: Vec<Sequence>,
    pub blocks: BlockAllocator,
    pub policy: Policy,
    /// Draft tokens per decoding sequence per step, at most (0: no speculative decoding).
    pub max_draft: usize,
    /// Drafts a draft model proposed for this step, by sequence id (`super::draft`); `None`:
    /// drafts by prompt lookup.
    pub proposals: Option<HashMap<u64, Vec<u32>>>,
}

impl Scheduler {
    pub fn new(max_seqs: usize, max_batched_tokens: usize, block_size: usize, num_blocks: usize) -> Self {
        Scheduler {
            max_seqs,
            max_batched_tokens,
            block_size,
            waiting: VecDeque::new(),
            running: Vec::new(),
            blocks: BlockAllocator::new(num_blocks),
            policy: Policy::default(),
            max_draft: 0,
            proposals: None,
        }
    }

    /// The draft for running sequence `i` this step: only when it is decoding (its one new token
    /// is the last), greedy, and drafting is on; at most `budget - 1` tokens (the budget counts
    /// draft tokens), the tokens it may still generate minus the one the step always yields, and
    /// what the free KV blocks hold beyond the blocks the plain decode needs (a draft never
    /// preempts anyone).
    fn draft_for(&self, i: usize, budget: usize, plan: &Plan) -> Vec<u32> {
        let seq = &self.running[i];
        if self.max_draft == 0 || seq.computed + 1 != seq.tokens.len() || !seq.sampling.is_greedy() {
            return Vec::new();
        }
        let left = seq.max_new_tokens.saturating_sub(seq.output().len() + 1);
        // Positions up to `tokens.len() + draft` must have blocks, held or free now, leaving free
        // the blocks the sequences not yet planned in this step need for all their pending tokens
        // (so a draft never makes another sequence preempt, whatever the policy's order).
        let later: usize = (self.running.iter().enumerate())
            .filter(|&(j, s)| j != i && !plan.items.iter().any(|p| p.id == s.id))
            .map(|(_, s)| self.blocks_for(s.tokens.len()).saturating_sub(s.blocks.len()))
            .sum();
        let free = self.blocks.free().saturating_sub(later);
        let slots = ((seq.blocks.len() + free) * self.block_size).saturating_sub(seq.tokens.len());
        let k = self.max_draft.min(budget.saturating_sub(1)).min(left).min(slots);
        match &self.proposals {
            None => ngram_draft(&seq.tokens, k),
            Some(proposals) => proposals.get(&seq.id).map_or_else(Vec::new, |d| d[..k.min(d.len())].to_vec()),
        }
    }

    pub fn add(&mut self, seq: Sequence) {
        self.waiting.push_back(seq);
    }

    pub fn has_work(&self) -> bool {
        !self.waiting.is_empty() || !self.running.is_empty()
    }

    fn blocks_for(&self, tokens: usize) -> usize {
        tokens.div_ceil(self.block_size)
    }

    /// Caches full blocks for later sequences with the same prefix (see [`BlockAllocator`]).
    pub fn with_prefix_cache(mut self) -> Self {
        self.blocks = BlockAllocator::with_prefix_cache(self.blocks.total());
        self
    }

    /// Preempts `running[i]`: its blocks are released and it goes back to the front of the queue.
    fn preempt(&mut self, i: usize, plan: &mut Plan) {
        let mut seq = self.running.remove(i);
        self.blocks.release(&mut seq.blocks);
        seq.block_hashes.clear();
        seq.computed = 0;
        seq.preemptions += 1;
        plan.preempted.push(seq.id);
        self.waiting.push_front(seq);
    }

    /// Tokens of this sequence's next piece of work: its prefill chunk, or 1 for a decode.
    fn chunk(&self, remaining: usize, budget: usize) -> usize {
        let cap =
            if self.policy.chunked_prefill { self.policy.prefill_chunk.unwrap_or(usize::MAX) } else { usize::MAX };
        remaining.min(budget).min(cap)
    }

    /// Decides this step's work and reserves its KV blocks. The policy sets the order in which
    /// running decodes, running prefills and admissions take the step's token budget.
    pub fn schedule(&mut self) -> Plan {
        let mut plan = Plan::default();
        let mut budget = self.max_batched_tokens;
        match self.policy.order {
            Order::Fcfs => {
                self.serve_running(&mut plan, &mut budget, Work::Both);
                self.admit(&mut plan, &mut budget);
            }
            Order::DecodeFirst => {
                self.serve_running(&mut plan, &mut budget, Work::Decodes);
                self.serve_running(&mut plan, &mut budget, Work::Prefills);
                self.admit(&mut plan, &mut budget);
            }
            Order::PrefillFirst => {
                self.serve_running(&mut plan, &mut budget, Work::Prefills);
                self.admit(&mut plan, &mut budget);
                self.serve_running(&mut plan, &mut budget, Work::Decodes);
            }
        }
        plan
    }

    /// Plans the running sequences of kind `work` that this step has not planned yet, in admission
    /// order. A sequence short of KV blocks takes them from the most recently admitted running
    /// sequence not yet planned in this step, or, when there is none, is preempted itself.
    fn serve_running(&mut self, plan: &mut Plan, budget: &mut usize, work: Work) {
        let mut i = 0;
        while i < self.running.len() && *budget > 0 {
            let seq = &self.running[i];
            let remaining = seq.tokens.len() - seq.computed;
            let planned = |plan: &Plan, id: u64| plan.items.iter().any(|p| p.id == id);
            if planned(plan, seq.id) || !work.includes(remaining) {
                i += 1;
                continue;
            }
            let draft = self.draft_for(i, *budget, plan);
            let want = self.chunk(remaining, *budget) + draft.len();
            let need = self.blocks_for(seq.computed + want).saturating_sub(seq.blocks.len());
            while self.blocks.free() < need {
                let victim = (0..self.running.len()).rev().find(|&j| j != i && !planned(plan, self.running[j].id));
                let Some(j) = victim else { break };
                self.preempt(j, plan);
                if j < i {
                    i -= 1;
                }
            }
            if self.blocks.free() < need {
                self.preempt(i, plan); // nothing left to take from
                break;
            }
            let seq = &mut self.running[i];
            if need > 0 {
                seq.blocks.extend(self.blocks.allocate(need).expect("checked"));
            }
            let sample = (seq.computed + want - draft.len() == seq.tokens.len()).then(|| seq.next_draw());
            plan.items.push(Planned { id: seq.id, start: seq.computed, len: want, sample, draft });
            *budget -= want;
            i += 1;
        }
    }

    /// Admits waiting sequences in queue order. New work is admitted only when nothing had to be
    /// preempted (it would only be preempted again); without chunked prefill, only a sequence
    /// whose whole prefill fits what is left of the budget (the queue waits behind it otherwise).
    fn admit(&mut self, plan: &mut Plan, budget: &mut usize) {
        while plan.preempted.is_empty() && *budget > 0 && self.running.len() < self.max_seqs {
            let Some(seq) = self.waiting.front() else { break };
            // Cached full blocks of its tokens, leaving at least the last token to compute (its
            // logits give the next token).
            let hits = self.blocks.lookup(&seq.tokens, self.block_size, (seq.tokens.len() - 1) / self.block_size);
            let cached = hits.len() * self.block_size;
            let remaining = seq.tokens.len() - cached;
            if !self.policy.chunked_prefill && remaining > *budget {
                break;
            }
            let want = self.chunk(remaining, *budget);
            let need = self.blocks_for(cached + want) - hits.len();
            // Hits nobody holds are counted free; sharing them takes them out of the pool.
            let revived = hits.iter().filter(|&&(_, b)| self.blocks.refcount(b) == 0).count();
            if self.blocks.free() < need + revived {
                break;
            }
            let mut seq = self.waiting.pop_front().expect("front exists");
            for &(hash, block) in &hits {
                self.blocks.share(block);
                seq.blocks.push(block);
                seq.block_hashes.push(hash);
            }
            seq.blocks.extend(self.blocks.allocate(need).expect("checked"));
            seq.computed = cached;
            let sample = (cached + want == seq.tokens.len()).then(|| seq.next_draw());
            plan.items.push(Planned { id: seq.id, start: cached, len: want, sample, draft: Vec::new() });
            if seq.preemptions == 0 {
                seq.cached_tokens = cached;
                plan.admitted.push(seq.id);
            }
            *budget -= want;
            self.running.push(seq);
        }
    }

    pub fn get(&self, id: u64) -> Option<&Sequence> {
        self.running.iter().find(|s| s.id == id).or_else(|| self.waiting.iter().find(|s| s.id == id))
    }

    /// Records the step's results (`sampled`: `item.rows()` ids per item, in plan order); returns
    /// the sequences that finished, with why.
    ///
    /// A drafted item accepts the longest prefix of its draft that equals the model's own choices,
    /// plus the model's token after that prefix. Its KV for rejected draft positions stays in the
    /// cache but beyond `computed`, so nothing reads it before the positions are written again, and
    /// blocks past those `computed` needs go back to the free list.
    pub fn commit(&mut self, plan: &Plan, sampled: &[u32]) -> Vec<(Sequence, FinishReason)> {
        // The first row of the next item that samples.
        let mut row = 0;
        let mut done = Vec::new();
        for item in &plan.items {
            let rows = row..row + item.rows();
            row = rows.end;
            let Some(idx) = self.running.iter().position(|s| s.id == item.id) else {
                // Gone since the plan was made (CPU/GPU overlap: it stopped at the step before, or
                // was cancelled): its rows are discarded.
                continue;
            };
            let seq = &mut self.running[idx];
            seq.computed = item.start + item.len;
            if item.sample.is_none() {
                self.register_full_blocks(idx);
                continue;
            }
            let chosen = sampled.get(rows).expect("one sampled id per sampling row");
            let accepted = accepted_prefix(&item.draft, chosen);
            seq.drafted += item.draft.len();
            seq.accepted += accepted;
            seq.computed -= item.draft.len() - accepted;
            let keep = seq.computed.div_ceil(self.block_size);
            if seq.blocks.len() > keep {
                let mut spare = seq.blocks.split_off(keep);
                self.blocks.release(&mut spare);
            }
            let mut reason = None;
            for &token in &chosen[..=accepted] {
                seq.tokens.push(token);
                reason = if seq.stop_ids.contains(&token) {
                    Some(FinishReason::Stop)
                } else if seq.output().len() >= seq.max_new_tokens {
                    Some(FinishReason::Length)
                } else {
                    None
                };
                if reason.is_some() {
                    break;
                }
            }
            self.register_full_blocks(idx);
            if let Some(reason) = reason {
                let mut seq = self.running.remove(idx);
                self.blocks.release(&mut seq.blocks);
                done.push((seq, reason));
            }
        }
        done
    }

    /// CPU/GPU overlap: commits a step whose ids are still on the GPU, so that the next step can
    /// be planned before they arrive. Row `r`'s token is the placeholder `PREVIOUS_ID | r`, which
    /// the next step's embedding reads from the GPU (`embed.wgsl`); lengths, positions and blocks
    /// are exact, only stop ids are unknown. Returns each row's sequence id, for
    /// [`Scheduler::resolve`], and the sequences that reached `max_new_tokens` (they finish now, but
    /// their last token is only known then). Not with drafts or prefix caching (both need the ids).
    pub fn commit_provisional(&mut self, plan: &Plan) -> (Vec<u64>, Vec<(Sequence, FinishReason)>) {
        assert!(!self.blocks.prefix_caching(), "prefix caching hashes the real ids");
        assert!(plan.items.iter().all(|p| p.draft.is_empty()), "a draft is verified against the real ids");
        // Row r of the step is item r's (one each): sequences gone since planning skip theirs.
        let rows: Vec<u64> = plan.items.iter().filter(|p| p.sample.is_some()).map(|p| p.id).collect();
        let placeholders: Vec<u32> = (0..rows.len() as u32).map(|r| PREVIOUS_ID | r).collect();
        let finished = self.commit(plan, &placeholders);
        (rows, finished)
    }

    /// CPU/GPU overlap: puts the ids of a step committed by [`Scheduler::commit_provisional`] in
    /// place of its placeholders (`rows[r]`: the sequence of row `r`, `ids[r]` its id). The
    /// sequence is wherever it is now: running, queued again after a preemption, or in `finishing`
    /// (finished by length at the provisional commit). One whose new token is a stop id finishes
    /// now; its row in the step already planned after this one is discarded when that commits
    /// (it is gone from `running`), and its blocks, freed now, are reused only by steps queued
    /// after that one. A sequence cancelled meanwhile is skipped. Returns `(id, output index,
    /// token)` of each token, in row order, and every sequence that finished: the stopped ones,
    /// then all of `finishing` (whose reason becomes `Stop` when its last token is one).
    pub fn resolve(
        &mut self,
        rows: &[u64],
        ids: &[u32],
        mut finishing: Vec<(Sequence, FinishReason)>,
    ) -> (Vec<Resolved>, Vec<(Sequence, FinishReason)>) {
        assert_eq!(rows.len(), ids.len(), "one id per provisional row");
        let (mut tokens, mut done) = (Vec::new(), Vec::new());
        for (r, (&id, &token)) in rows.iter().zip(ids).enumerate() {
            let placeholder = PREVIOUS_ID | r as u32;
            enum At {
                Running(usize),
                Waiting(usize),
                Finishing(usize),
            }
            let at = if let Some(i) = self.running.iter().position(|s| s.id == id) {
                At::Running(i)
            } else if let Some(i) = self.waiting.iter().position(|s| s.id == id) {
                At::Waiting(i)
            } else if let Some(i) = finishing.iter().position(|(s, _)| s.id == id) {
                At::Finishing(i)
            } else {
                continue; // cancelled
            };
            let seq = match at {
                At::Running(i) => &mut self.running[i],
                At::Waiting(i) => &mut self.waiting[i],
                At::Finishing(i) => &mut finishing[i].0,
            };
            let Some(p) = seq.tokens.iter().rposition(|&t| t == placeholder) else { continue };
            debug_assert_eq!(p + 1, seq.tokens.len(), "a placeholder is the sequence's last token");
            seq.tokens[p] = token;
            tokens.push((id, p - seq.prompt_len, token));
            if !seq.stop_ids.contains(&token) {
                continue;
            }
            match at {
                At::Running(i) => {
                    let mut seq = self.running.remove(i);
                    self.blocks.release(&mut seq.blocks);
                    done.push((seq, FinishReason::Stop));
                }
                At::Waiting(i) => done.push((self.waiting.remove(i).expect("found"), FinishReason::Stop)),
                At::Finishing(i) => finishing[i].1 = FinishReason::Stop,
            }
        }
        done.extend(finishing);
        (tokens, done)
    }

    /// Prefix caching: registers `running[idx]`'s full blocks whose every slot holds committed K/V
    /// of a known token (never a rolled-back draft position or a partly computed block).
    fn register_full_blocks(&mut self, idx: usize) {
        if !self.blocks.prefix_caching() {
            return;
        }
        let seq = &mut self.running[idx];
        let full = seq.computed.min(seq.tokens.len()) / self.block_size;
        while seq.block_hashes.len() < full {
            let i = seq.block_hashes.len();
            let tokens = &seq.tokens[i * self.block_size..(i + 1) * self.block_size];
            let hash = block_hash(seq.block_hashes.last().copied().unwrap_or(0), tokens);
            self.blocks.register(seq.blocks[i], hash, tokens);
            seq.block_hashes.push(hash);
        }
    }

    /// Removes a request wherever it is; false when unknown (or already finished).
    pub fn cancel(&mut self, id: u64) -> Option<Sequence> {
        if let Some(i) = self.waiting.iter().position(|s| s.id == id) {
            return self.waiting.remove(i);
        }
        let i = self.running.iter().position(|s| s.id == id)?;
        let mut seq = self.running.remove(i);
        self.blocks.release(&mut seq.blocks);
        Some(seq)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn seq(id: u64, prompt: usize, new: usize) -> Sequence {
        Sequence::new(id, (0..prompt as u32).collect(), new, SamplingParams::default(), vec![])
    }

    /// (id, output, preemptions) of a finished sequence.
    type Finished = (u64, Vec<u32>, u32);

    /// Runs the scheduler with a fake model that always answers 7.
    fn drain(s: &mut Scheduler) -> (Vec<Plan>, Vec<Finished>) {
        let (mut plans, mut finished) = (Vec::new(), Vec::new());
        for _ in 0..10_000 {
            if !s.has_work() {
                break;
            }
            let plan = s.schedule();
            assert!(plan.items.iter().map(|p| p.len).sum::<usize>() <= s.max_batched_tokens);
            assert!(s.running.len() <= s.max_seqs);
            let ids = vec![7; plan.items.iter().map(Planned::rows).sum()];
            for (seq, _) in s.commit(&plan, &ids) {
                finished.push((seq.id, seq.output().to_vec(), seq.preemptions));
            }
            for seq in &s.running {
                assert_eq!(seq.blocks.len(), seq.computed.div_ceil(s.block_size), "blocks beyond the KV in use");
            }
            plans.push(plan);
        }
        assert!(!s.has_work(), "did not drain");
        (plans, finished)
    }

    #[test]
    fn chunked_prefill_interleaves_with_decodes() {
        let mut s = Scheduler::new(4, 64, 16, 1000);
        s.add(seq(0, 10, 20));
        s.schedule_and_commit_once();
        s.add(seq(1, 300, 5));
        let plan = s.schedule();
        // The decode of 0 and a 63-token chunk of 1's prompt share the step.
        assert_eq!(plan.items[0], Planned { id: 0, start: 10, len: 1, sample: Some(0.0), draft: vec![] });
        assert_eq!((plan.items[1].id, plan.items[1].len, plan.items[1].sample), (1, 63, None));
    }

    #[test]
    fn preemption_recomputes_and_loses_nothing() {
        // 6 blocks of 4 tokens: three sequences of 8 + 8 tokens cannot all stay resident.
        let mut s = Scheduler::new(8, 64, 4, 6);
        for id in 0..3 {
            s.add(seq(id, 8, 8));
        }
        let (plans, finished) = drain(&mut s);
        let preemptions: usize = plans.iter().map(|p| p.preempted.len()).sum();
        assert!(preemptions > 0);
        let mut ids: Vec<u64> = finished.iter().map(|f| f.0).collect();
        ids.sort();
        assert_eq!(ids, vec![0, 1, 2], "each finished exactly once");
        assert!(finished.iter().all(|f| f.1 == vec![7; 8]));
        assert_eq!(s.blocks.free(), 6, "all blocks returned");
    }

    #[test]
    fn max_seqs_bounds_the_batch() {
        let mut s = Scheduler::new(2, 512, 16, 100);
        for id in 0..5 {
            s.add(seq(id, 3, 4));
        }
        let (plans, finished) = drain(&mut s);
        assert_eq!(finished.len(), 5);
        assert!(plans.iter().all(|p| p.items.len() <= 2));
        // FCFS: requests are admitted in arrival order.
        let admitted: Vec<u64> = plans.iter().flat_map(|p| p.admitted.clone()).collect();
        assert_eq!(admitted, vec![0, 1, 2, 3, 4]);
    }

    /// The scheduler before policies existed (FCFS only), kept as the oracle that `Order::Fcfs`
    /// with the default policy plans exactly as it did.
    fn original_fcfs_schedule(s: &mut Scheduler) -> Plan {
        let mut plan = Plan::default();
        let mut budget = s.max_batched_tokens;
        let mut i = 0;
        while i < s.running.len() && budget > 0 {
            let want = (s.running[i].tokens.len() - s.running[i].computed).min(budget);
            let need = s.blocks_for(s.running[i].computed + want).saturating_sub(s.running[i].blocks.len());
            while s.blocks.free() < need && s.running.len() > i + 1 {
                let last = s.running.len() - 1;
                s.preempt(last, &mut plan);
            }
            if s.blocks.free() < need {
                s.preempt(i, &mut plan);
                break;
            }
            let seq = &mut s.running[i];
            seq.blocks.extend(s.blocks.allocate(need).expect("checked"));
            let sample = (seq.computed + want == seq.tokens.len()).then(|| seq.next_draw());
            plan.items.push(Planned { id: seq.id, start: seq.computed, len: want, sample, draft: Vec::new() });
            budget -= want;
            i += 1;
        }
        while plan.preempted.is_empty() && budget > 0 && s.running.len() < s.max_seqs {
            let Some(seq) = s.waiting.front() else { break };
            let want = (seq.tokens.len() - seq.computed).min(budget);
            let need = s.blocks_for(want);
            if s.blocks.free() < need {
                break;
            }
            let mut seq = s.waiting.pop_front().expect("front exists");
            seq.blocks = s.blocks.allocate(need).expect("checked");
            let sample = (want == seq.tokens.len()).then(|| seq.next_draw());
            plan.items.push(Planned { id: seq.id, start: 0, len: want, sample, draft: Vec::new() });
            if seq.preemptions == 0 {
                plan.admitted.push(seq.id);
            }
            budget -= want;
            s.running.push(seq);
        }
        plan
    }

    /// A fake model whose next token depends on the whole sequence so far, so that a wrong
    /// position, chunk or recompute changes the output.
    fn next_token(tokens: &[u32]) -> u32 {
        tokens.iter().fold(17u32, |h, &t| h.wrapping_mul(31).wrapping_add(t)) % 1000
    }

    /// A seeded mix of requests arriving over the first steps, under KV pressure.
    fn random_scheduler(seed: u64, policy: Policy) -> (Scheduler, Vec<(usize, Sequence)>) {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut s = Scheduler::new(rng.random_range(1..6), rng.random_range(8..80), 4, rng.random_range(12..40));
        s.policy = policy;
        let arrivals = (0..rng.random_range(1..12))
            .map(|id| {
                let prompt = rng.random_range(1..20);
                let tokens = (0..prompt).map(|_| rng.random_range(0..1000)).collect();
                (
                    rng.random_range(0..10),
                    Sequence::new(id, tokens, rng.random_range(1..12), SamplingParams::default(), vec![]),
                )
            })
            .collect();
        (s, arrivals)
    }

    /// Runs to the end with [`next_token`]; returns each step's plan and each id's output.
    fn run_with(
        mut s: Scheduler,
        mut arrivals: Vec<(usize, Sequence)>,
        schedule: fn(&mut Scheduler) -> Plan,
    ) -> (Vec<Plan>, std::collections::BTreeMap<u64, Vec<u32>>) {
        let (mut plans, mut outputs) = (Vec::new(), std::collections::BTreeMap::new());
        for step in 0..10_000 {
            for (_, seq) in arrivals.extract_if(.., |(at, _)| *at <= step) {
                s.add(seq);
            }
            if !s.has_work() && arrivals.is_empty() {
                break;
            }
            let plan = schedule(&mut s);
            assert!(plan.items.iter().map(|p| p.len).sum::<usize>() <= s.max_batched_tokens);
            assert!(s.running.len() <= s.max_seqs);
            let ids: Vec<u32> = plan
                .items
                .iter()
                .filter(|p| p.sample.is_some())
                .map(|p| next_token(&s.get(p.id).expect("planned").tokens[..p.start + p.len]))
                .collect();
            for (seq, _) in s.commit(&plan, &ids) {
                outputs.insert(seq.id, seq.output().to_vec());
            }
            plans.push(plan);
        }
        assert!(!s.has_work(), "did not drain");
        (plans, outputs)
    }

    fn all_policies() -> Vec<Policy> {
        let mut out = Vec::new();
        for order in [Order::Fcfs, Order::PrefillFirst, Order::DecodeFirst] {
            for (chunked_prefill, prefill_chunk) in [(true, None), (true, Some(3)), (false, None)] {
                out.push(Policy { order, chunked_prefill, prefill_chunk });
            }
        }
        out
    }

    #[test]
    fn fcfs_plans_exactly_as_before_policies() {
        for seed in 0..300 {
            let (s, arrivals) = random_scheduler(seed, Policy::default());
            let (ref_s, ref_arrivals) = random_scheduler(seed, Policy::default());
            let (plans, outputs) = run_with(s, arrivals, Scheduler::schedule);
            let (ref_plans, ref_outputs) = run_with(ref_s, ref_arrivals, original_fcfs_schedule);
            let (got, want): (Vec<_>, Vec<_>) = (
                plans.iter().map(|p| (&p.items, &p.preempted, &p.admitted)).collect(),
                ref_plans.iter().map(|p| (&p.items, &p.preempted, &p.admitted)).collect(),
            );
            assert_eq!(got, want, "seed {seed}");
            assert_eq!(outputs, ref_outputs);
        }
    }

    #[test]
    fn policies_change_order_never_tokens() {
        let mut orders_differ = 0;
        for seed in 0..300 {
            let (s, arrivals) = random_scheduler(seed, Policy::default());
            // Without chunking, every prefill (prompt + output after a preemption) must fit a step.
            let fits = arrivals.iter().all(|(_, q)| q.prompt_len + q.max_new_tokens - 1 <= s.max_batched_tokens);
            let (base_plans, base) = run_with(s, arrivals, Scheduler::schedule);
            for policy in all_policies().into_iter().filter(|p| p.chunked_prefill || fits) {
                let (s, arrivals) = random_scheduler(seed, policy);
                let (plans, outputs) = run_with(s, arrivals, Scheduler::schedule);
                assert_eq!(outputs, base, "seed {seed}, {policy:?}");
                let items = |p: &Vec<Plan>| p.iter().map(|p| p.items.clone()).collect::<Vec<_>>();
                orders_differ += usize::from(items(&plans) != items(&base_plans));
            }
        }
        assert!(orders_differ > 100, "the policies should plan differently ({orders_differ} runs did)");
    }

    /// Every id in `STOPS` ends a sequence (about one token in 17 of [`next_token`]'s).
    fn with_stops(mut arrivals: Vec<(usize, Sequence)>) -> Vec<(usize, Sequence)> {
        for (_, seq) in &mut arrivals {
            seq.stop_ids = (0..1000).filter(|t| t % 17 == 3).collect();
        }
        arrivals
    }

    /// (output, reason) of each finished sequence.
    type Outcomes = BTreeMap<u64, (Vec<u32>, FinishReason)>;

    /// Runs with [`next_token`] one step at a time, each committed before the next is planned;
    /// also returns how many preemptions there were.
    fn run_serial(mut s: Scheduler, mut arrivals: Vec<(usize, Sequence)>) -> (Outcomes, u32) {
        let (mut out, mut preemptions) = (BTreeMap::new(), 0);
        for step in 0..10_000 {
            for (_, seq) in arrivals.extract_if(.., |(at, _)| *at <= step) {
                s.add(seq);
            }
            if !s.has_work() && arrivals.is_empty() {
                break;
            }
            let plan = s.schedule();
            let ids: Vec<u32> = (plan.items.iter().filter(|p| p.sample.is_some()))
                .map(|p| next_token(&s.get(p.id).expect("planned").tokens[..p.start + p.len]))
                .collect();
            for (seq, reason) in s.commit(&plan, &ids) {
                preemptions += seq.preemptions;
                assert!(out.insert(seq.id, (seq.output().to_vec(), reason)).is_none(), "finished twice");
            }
        }
        assert!(!s.has_work(), "did not drain");
        (out, preemptions)
    }

    /// Runs as the engine does with CPU/GPU overlap: step n + 1 is planned on step n's provisional
    /// commit and "submitted" (its ids computed, placeholders read from n's ids as the embedding
    /// reads them on the GPU) before n's ids are resolved. `cancel`: (call, id) cancels `id` at the
    /// start of that call, while its step is in flight. Returns the outcomes, and the tokens each
    /// id got after its cancellation (none, when right).
    fn run_overlapped(
        mut s: Scheduler,
        mut arrivals: Vec<(usize, Sequence)>,
        cancel: Option<(usize, u64)>,
    ) -> (Outcomes, usize) {
        // The fake GPU: ids of a plan's rows, with `prev` the ids of the step before it.
        let gpu = |s: &Scheduler, plan: &Plan, prev: &[u32]| -> Vec<u32> {
            (plan.items.iter().filter(|p| p.sample.is_some()))
                .map(|p| {
                    let tokens = &s.get(p.id).expect("planned").tokens[..p.start + p.len];
                    let real: Vec<u32> = (tokens.iter())
                        .map(|&t| if t & PREVIOUS_ID != 0 { prev[(t & !PREVIOUS_ID) as usize] } else { t })
                        .collect();
                    next_token(&real)
                })
                .collect()
        };
        type InFlight = (Vec<u64>, Vec<u32>, Vec<(Sequence, FinishReason)>);
        let (mut out, mut late) = (BTreeMap::new(), 0);
        let mut in_flight: Option<InFlight> = None;
        let mut cancelled = None;
        for call in 0..10_000 {
            for (_, seq) in arrivals.extract_if(.., |(at, _)| *at <= call) {
                s.add(seq);
            }
            if let Some((_, id)) = cancel.filter(|&(at, _)| at == call) {
                if s.cancel(id).is_some() {
                    cancelled = Some(id);
                }
                if let Some(f) = &mut in_flight {
                    if let Some(i) = f.2.iter().position(|(q, _)| q.id == id) {
                        f.2.remove(i);
                        cancelled = Some(id);
                    }
                }
            }
            if in_flight.is_none() {
                if !s.has_work() {
                    if arrivals.is_empty() {
                        break;
                    }
                    continue;
                }
                let plan = s.schedule();
                let ids = gpu(&s, &plan, &[]);
                let (rows, finishing) = s.commit_provisional(&plan);
                in_flight = Some((rows, ids, finishing));
            }
            let (rows, ids, finishing) = in_flight.take().expect("launched");
            let next = s.has_work().then(|| s.schedule()).filter(|p| !p.items.is_empty()).map(|plan| {
                let next_ids = gpu(&s, &plan, &ids);
                (plan, next_ids)
            });
            let (tokens, done) = s.resolve(&rows, &ids, finishing);
            late += tokens.iter().filter(|t| Some(t.0) == cancelled).count();
            for (seq, reason) in done {
                assert!(out.insert(seq.id, (seq.output().to_vec(), reason)).is_none(), "finished twice");
            }
            if let Some((plan, next_ids)) = next {
                let (rows, finishing) = s.commit_provisional(&plan);
                in_flight = Some((rows, next_ids, finishing));
            }
            for seq in s.running.iter().chain(&s.waiting) {
                assert!(seq.tokens.iter().rev().skip(1).all(|&t| t & PREVIOUS_ID == 0), "an unresolved placeholder");
            }
        }
        assert!(!s.has_work() && in_flight.is_none(), "did not drain");
        assert_eq!(s.blocks.free(), s.blocks.total(), "blocks left held");
        (out, late)
    }

    #[test]
    fn overlapped_steps_give_the_same_tokens_and_reasons() {
        let (mut stopped, mut preempted) = (0, 0);
        for seed in 0..300 {
            for policy in all_policies().into_iter().filter(|p| p.chunked_prefill) {
                // As drawn, and with about half the KV blocks (more preemptions).
                for scarce in [false, true] {
                    let setup = || {
                        let (mut s, arrivals) = random_scheduler(seed, policy);
                        if scarce {
                            s.blocks = BlockAllocator::new(s.blocks.total() / 2 + 3);
                        }
                        (s, with_stops(arrivals))
                    };
                    let (s, arrivals) = setup();
                    let (serial, preemptions) = run_serial(s, arrivals);
                    let (s, arrivals) = setup();
                    let (overlapped, _) = run_overlapped(s, arrivals, None);
                    assert_eq!(overlapped, serial, "seed {seed}, {policy:?}, scarce blocks {scarce}");
                    stopped += serial.values().filter(|o| o.1 == FinishReason::Stop).count();
                    preempted += preemptions;
                }
            }
        }
        assert!(stopped > 500, "too few stops exercised ({stopped})");
        assert!(preempted > 0, "no preemption exercised");
    }

    #[test]
    fn a_sequence_cancelled_while_its_step_is_in_flight_gets_no_more_tokens() {
        let mut cancelled_mid_run = 0;
        for seed in 0..200 {
            for call in [1, 2, 4] {
                let (s, arrivals) = random_scheduler(seed, Policy::default());
                let (serial, _) = run_serial(s, with_stops(arrivals));
                let (s, arrivals) = random_scheduler(seed, Policy::default());
                let (overlapped, late) = run_overlapped(s, with_stops(arrivals), Some((call, 0)));
                assert_eq!(late, 0, "seed {seed}: tokens after the cancellation");
                // Everyone else is unaffected; 0 finished normally only if it was done before.
                for (id, outcome) in &serial {
                    if *id != 0 {
                        assert_eq!(overlapped.get(id), Some(outcome), "seed {seed}, id {id}");
                    }
                }
                cancelled_mid_run += usize::from(!overlapped.contains_key(&0));
            }
        }
        assert!(cancelled_mid_run > 100, "too few cancellations exercised ({cancelled_mid_run})");
    }

    /// Running, in admission order: 1 with 12 prompt tokens left, 0 decoding; waiting: 2 (30
    /// tokens). Budget 32 tokens.
    fn crafted(order: Order, prefill_chunk: Option<usize>) -> Vec<(u64, usize, usize)> {
        let mut s = Scheduler::new(8, 32, 16, 1000);
        s.add(seq(1, 40, 5));
        s.add(seq(0, 4, 20));
        s.policy.prefill_chunk = Some(28);
        s.schedule_and_commit_once(); // 1: 28 prompt tokens; 0: its 4, and its first token
        s.add(seq(2, 30, 5));
        assert_eq!(
            s.running.iter().map(|q| (q.id, q.tokens.len() - q.computed)).collect::<Vec<_>>(),
            [(1, 12), (0, 1)]
        );
        s.policy = Policy { order, chunked_prefill: true, prefill_chunk };
        let plan = s.schedule();
        plan.items.iter().map(|p| (p.id, p.start, p.len)).collect()
    }

    #[test]
    fn each_order_has_its_defining_property() {
        // fcfs: running sequences in admission order (1's chunk, 0's decode), then the queue.
        assert_eq!(crafted(Order::Fcfs, None), [(1, 28, 12), (0, 4, 1), (2, 0, 19)]);
        // decode-first: the decode before any prefill.
        assert_eq!(crafted(Order::DecodeFirst, None), [(0, 4, 1), (1, 28, 12), (2, 0, 19)]);
        // prefill-first: running prefills, then admissions; the decode gets what is left (nothing).
        assert_eq!(crafted(Order::PrefillFirst, None), [(1, 28, 12), (2, 0, 20)]);
        // With 8-token chunks there is budget left over for the decode.
        assert_eq!(crafted(Order::PrefillFirst, Some(8)), [(1, 28, 8), (2, 0, 8), (0, 4, 1)]);
        assert_eq!(crafted(Order::DecodeFirst, Some(8)), [(0, 4, 1), (1, 28, 8), (2, 0, 8)]);
        assert_eq!(crafted(Order::Fcfs, Some(8)), [(1, 28, 8), (0, 4, 1), (2, 0, 8)]);
    }

    fn items(plan: &Plan) -> Vec<(u64, usize, usize)> {
        plan.items.iter().map(|p| (p.id, p.start, p.len)).collect()
    }

    #[test]
    fn without_chunked_prefill_a_prompt_waits_for_a_whole_step() {
        let mut s = Scheduler::new(8, 64, 16, 1000);
        s.policy.chunked_prefill = false;
        s.policy.prefill_chunk = Some(4); // ignored without chunking
        s.add(seq(0, 10, 20));
        s.schedule_and_commit_once();
        s.add(seq(1, 64, 5));
        // 0's decode takes 1 token, so 1's 64-token prompt does not fit what is left: it waits.
        assert_eq!(items(&s.schedule()), vec![(0, 10, 1)]);
        let mut s = Scheduler::new(8, 64, 16, 1000);
        s.policy = Policy { order: Order::PrefillFirst, chunked_prefill: false, prefill_chunk: None };
        s.add(seq(0, 10, 20));
        s.schedule_and_commit_once();
        s.add(seq(1, 64, 5));
        // Prefill-first gives it the whole step.
        assert_eq!(items(&s.schedule()), vec![(1, 0, 64)]);
        assert!(Policy { chunked_prefill: false, ..Policy::default() }.check_request(60, 6, 64).is_err());
        assert!(Policy { chunked_prefill: false, ..Policy::default() }.check_request(60, 5, 64).is_ok());
        assert!(Policy::default().check_request(600, 6, 64).is_ok());
    }

    #[test]
    fn drafts_count_in_the_budget_and_accepted_tokens_skip_steps() {
        // The fake model always answers 7; a prompt of 7s makes every draft right.
        let plain = {
            let mut s = Scheduler::new(4, 6, 4, 100);
            s.add(Sequence::new(0, vec![7; 5], 20, SamplingParams::default(), vec![]));
            drain(&mut s).0.len()
        };
        let mut s = Scheduler::new(4, 6, 4, 100);
        s.max_draft = 8;
        s.add(Sequence::new(0, vec![7; 5], 20, SamplingParams::default(), vec![]));
        s.schedule_and_commit_once(); // the prefill
        let plan = s.schedule();
        // Budget 6: the last token plus 5 of the 8 allowed draft tokens.
        assert_eq!(plan.items[0], Planned { id: 0, start: 5, len: 6, sample: Some(0.0), draft: vec![7; 5] });
        s.commit(&plan, &[7; 6]);
        assert_eq!((s.running[0].output().len(), s.running[0].drafted, s.running[0].accepted), (7, 5, 5));
        let (plans, finished) = drain(&mut s);
        assert_eq!(finished[0].1, vec![7; 20], "max_new_tokens still holds");
        assert!(plans.len() + 2 < plain, "{} speculative steps, {plain} plain", plans.len() + 2);
        assert_eq!(s.blocks.free(), 100);
    }

    #[test]
    fn rejected_drafts_roll_back_and_free_their_blocks() {
        // The prompt repeats 1 2 3, so the draft after "... 1 2" is "3 1 2"; the model says 7.
        let mut s = Scheduler::new(4, 64, 2, 100);
        s.max_draft = 3;
        s.add(Sequence::new(0, vec![1, 2, 3, 1, 2], 5, SamplingParams::default(), vec![]));
        s.schedule_and_commit_once();
        assert_eq!(s.running[0].tokens, vec![1, 2, 3, 1, 2, 7]);
        // The trigram "1 2 7" and bigram "2 7" are new; the unigram 7 too: no draft.
        let plan = s.schedule();
        assert!(plan.items[0].draft.is_empty());
        s.commit(&plan, &[3]);
        // Now "... 2 7 3": unigram 3 occurred at 2, followed by "1 2 7".
        let before = s.blocks.free();
        let plan = s.schedule();
        assert_eq!(plan.items[0].draft, vec![1, 2]); // 5 new at most: 2 made, 1 always yielded
        s.commit(&plan, &[9, 9, 9]);
        let seq = &s.running[0];
        assert_eq!((seq.tokens.len(), seq.computed, seq.drafted, seq.accepted), (8, 7, 2, 0));
        assert_eq!(seq.blocks.len(), 4, "blocks for 7 computed tokens of 2");
        assert_eq!(s.blocks.free(), before - 1, "only the plain decode's block is kept");
        // Sampled requests are never drafted.
        let mut s = Scheduler::new(4, 64, 2, 100);
        s.max_draft = 3;
        let sampled = SamplingParams { temperature: 1.0, ..SamplingParams::default() };
        s.add(Sequence::new(0, vec![7; 6], 4, sampled, vec![]));
        s.schedule_and_commit_once();
        assert!(s.schedule().items[0].draft.is_empty());
    }

    #[test]
    fn a_draft_never_takes_blocks_another_sequence_needs() {
        // 6 blocks of 2: sequences 0 (3-token prompt) and 1 (4) hold 2 each after prefill, 2 free;
        // 1's next token needs one of them, so 0's draft may use only the other.
        let mut s = Scheduler::new(4, 64, 2, 6);
        s.max_draft = 4;
        s.add(Sequence::new(0, vec![7; 3], 8, SamplingParams::default(), vec![]));
        s.add(Sequence::new(1, vec![7; 4], 8, SamplingParams::default(), vec![]));
        s.schedule_and_commit_once(); // 0: 4 tokens (2 blocks), 1: 5 tokens (2 blocks); 2 free
        let plan = s.schedule();
        assert!(plan.preempted.is_empty(), "{plan:?}");
        assert_eq!(plan.items[0].draft.len(), 2, "0 may take one block, 1 needs the other");
        let (_, finished) = drain_after(&mut s, plan);
        assert!(finished.iter().all(|f| f.1 == vec![7; 8]));
    }

    fn drain_after(s: &mut Scheduler, plan: Plan) -> (Vec<Plan>, Vec<Finished>) {
        let ids = vec![7; plan.items.iter().map(Planned::rows).sum()];
        let mut finished: Vec<Finished> =
            s.commit(&plan, &ids).into_iter().map(|(q, _)| (q.id, q.output().to_vec(), q.preemptions)).collect();
        let (plans, more) = drain(s);
        finished.extend(more);
        (plans, finished)
    }

    /// The invariant of prefix caching: a step writes K/V only into blocks its sequence holds
    /// alone and that are not in the prefix table.
    fn assert_writes_private(s: &Scheduler, plan: &Plan) {
        for item in &plan.items {
            let seq = s.get(item.id).expect("planned");
            for b in item.start / s.block_size..=(item.start + item.len - 1) / s.block_size {
                let block = seq.blocks[b];
                assert_eq!(s.blocks.refcount(block), 1, "seq {} writes shared block {block}", item.id);
                assert!(!s.blocks.is_cached(block), "seq {} writes cached block {block}", item.id);
            }
        }
    }

    /// Every block unheld, each id once, nothing referenced.
    fn assert_all_free(s: &Scheduler) {
        let mut free = s.blocks.free_ids();
        free.sort_unstable();
        assert_eq!(free, (0..s.blocks.total() as u32).collect::<Vec<_>>());
        assert!((0..s.blocks.total() as u32).all(|b| s.blocks.refcount(b) == 0));
    }

    /// Like [`run_with`] with prefix caching: prompts built from `groups` shared prefixes, the
    /// write invariant checked every step; returns the outputs and the cached tokens per id.
    fn run_cached(seed: u64, cache: bool, max_draft: usize) -> (BTreeMap<u64, Vec<u32>>, BTreeMap<u64, usize>) {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut s = Scheduler::new(rng.random_range(1..6), rng.random_range(8..80), 4, rng.random_range(12..40));
        s.max_draft = max_draft;
        if cache {
            s = s.with_prefix_cache();
        }
        let prefixes: Vec<Vec<u32>> = (0..rng.random_range(1..4))
            .map(|_| (0..rng.random_range(0..14)).map(|_| rng.random_range(0..5)).collect())
            .collect();
        let mut arrivals: Vec<(usize, Sequence)> = (0..rng.random_range(1..12))
            .map(|id| {
                let mut tokens = prefixes[rng.random_range(0..prefixes.len())].clone();
                tokens.extend((0..rng.random_range(1..8)).map(|_| rng.random_range(0..5)));
                (
                    rng.random_range(0..10),
                    Sequence::new(id, tokens, rng.random_range(1..12), SamplingParams::default(), vec![]),
                )
            })
            .collect();
        let (mut outputs, mut cached) = (BTreeMap::new(), BTreeMap::new());
        for step in 0..10_000 {
            for (_, seq) in arrivals.extract_if(.., |(at, _)| *at <= step) {
                s.add(seq);
            }
            if !s.has_work() && arrivals.is_empty() {
                break;
            }
            let plan = s.schedule();
            assert_writes_private(&s, &plan);
            // Rows: a token that depends on the whole sequence (drafts are judged on it too).
            let mut ids = Vec::new();
            for p in plan.items.iter().filter(|p| p.sample.is_some()) {
                let mut seen = s.get(p.id).expect("planned").tokens.clone();
                for i in 0..p.rows() {
                    let t = next_token(&seen) % 5;
                    ids.push(t);
                    seen.push(p.draft.get(i).copied().unwrap_or(t));
                }
            }
            for (seq, _) in s.commit(&plan, &ids) {
                cached.insert(seq.id, seq.cached_tokens);
                outputs.insert(seq.id, seq.output().to_vec());
            }
        }
        assert!(!s.has_work(), "did not drain");
        assert_all_free(&s);
        (outputs, cached)
    }

    #[test]
    fn prefix_caching_changes_no_token_and_never_writes_a_shared_block() {
        let (mut hits, mut with_drafts) = (0, 0);
        for seed in 0..300 {
            for max_draft in [0, 3] {
                let (plain, none) = run_cached(seed, false, max_draft);
                assert!(none.values().all(|&c| c == 0));
                let (cached, hit) = run_cached(seed, true, max_draft);
                assert_eq!(cached, plain, "seed {seed}, drafts {max_draft}");
                let n = hit.values().filter(|&&c| c > 0).count();
                hits += n;
                with_drafts += if max_draft > 0 { n } else { 0 };
            }
        }
        assert!(hits > 300 && with_drafts > 100, "too few hits to mean anything: {hits} ({with_drafts} with drafts)");
    }

    #[test]
    fn a_second_identical_prompt_hits_every_full_block_but_the_last_token() {
        for (prompt, want) in [(9, 8), (8, 4), (3, 0)] {
            let mut s = Scheduler::new(4, 64, 4, 20).with_prefix_cache();
            s.add(seq(0, prompt, 2));
            drain(&mut s);
            assert_eq!(s.blocks.cached_free(), (prompt + 1) / 4, "full blocks of prompt + first token kept");
            s.add(seq(1, prompt, 2));
            let plan = s.schedule();
            assert_eq!(items(&plan), [(1, want, prompt - want)], "prompt {prompt}");
            assert_eq!(s.running[0].cached_tokens, want);
            assert_writes_private(&s, &plan);
            drain_after(&mut s, plan);
            assert_all_free(&s);
        }
    }

    #[test]
    fn shared_blocks_are_counted_once_and_freed_by_the_last_holder() {
        let mut s = Scheduler::new(4, 64, 4, 20).with_prefix_cache();
        s.add(seq(0, 9, 3));
        s.schedule_and_commit_once(); // 9 computed of 10 tokens: blocks 0 and 1 full, cached
        s.add(seq(1, 9, 3));
        let plan = s.schedule();
        assert_eq!(items(&plan), [(0, 9, 1), (1, 8, 1)]);
        let (a, b) = (&s.running[0].blocks, &s.running[1].blocks);
        assert_eq!(a[..2], b[..2], "the first two blocks are shared");
        assert_ne!(a[2], b[2]);
        assert_eq!(s.blocks.refcount(a[0]), 2);
        assert_eq!(s.blocks.used(), 4, "3 + 1 blocks, the shared ones once");
        drain_after(&mut s, plan);
        assert_all_free(&s);
    }

    #[test]
    fn evicts_the_least_recently_released_blocks_first() {
        // 6 blocks of 2 tokens. Prompts A and B leave 2 cached blocks each (B released last).
        let mut s = Scheduler::new(4, 64, 2, 6).with_prefix_cache();
        let a: Vec<u32> = vec![1, 2, 3, 4];
        let b: Vec<u32> = vec![5, 6, 7, 8];
        for (id, p) in [(0, &a), (1, &b)] {
            s.add(Sequence::new(id, p.clone(), 1, SamplingParams::default(), vec![]));
            drain(&mut s);
        }
        assert_eq!((s.blocks.cached_free(), s.blocks.free()), (4, 6));
        // A new 6-token prompt takes the 2 never-cached blocks and must evict one more: A's tail
        // (released before its head, and before all of B).
        s.add(Sequence::new(2, vec![9; 6], 1, SamplingParams::default(), vec![]));
        drain(&mut s);
        let hit = |s: &Scheduler, p: &[u32]| s.blocks.lookup(p, 2, 2).len();
        assert_eq!((hit(&s, &a), hit(&s, &b)), (1, 2), "A lost its second block only");
        // A 4-token prompt needs 2 blocks, all free ones are cached: A's head, then B's tail go
        // (B's head was released after its tail, the 9s after both).
        s.add(Sequence::new(3, vec![8; 4], 1, SamplingParams::default(), vec![]));
        drain(&mut s);
        assert_eq!((hit(&s, &a), hit(&s, &b), s.blocks.lookup(&[9; 6], 2, 3).len()), (0, 1, 3));
        assert_all_free(&s);
    }

    #[test]
    fn preemption_and_cancel_release_shared_blocks() {
        // 8 blocks of 4: four requests sharing an 8-token prefix, under pressure.
        let mut s = Scheduler::new(8, 64, 4, 8).with_prefix_cache();
        for id in 0..4 {
            let mut tokens: Vec<u32> = (0..8).collect();
            tokens.push(100 + id as u32);
            s.add(Sequence::new(id, tokens, 10, SamplingParams::default(), vec![]));
        }
        s.schedule_and_commit_once();
        assert!(s.cancel(1).is_some());
        let (plans, finished) = drain(&mut s);
        assert!(plans.iter().any(|p| !p.preempted.is_empty()), "no preemption: the test is too easy");
        assert_eq!(finished.len(), 3);
        assert!(finished.iter().all(|f| f.1 == vec![7; 10]));
        assert_all_free(&s);
    }

    impl Scheduler {
        fn schedule_and_commit_once(&mut self) {
            let plan = self.schedule();
            let n = plan.items.iter().map(Planned::rows).sum();
            self.commit(&plan, &vec![7; n]);
        }
    }
}
