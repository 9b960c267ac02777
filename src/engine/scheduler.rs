//! Continuous batching, FCFS by arrival. Each step combines the running sequences (decodes and
//! unfinished chunked prefills, in admission order) with newly admitted prefills, under two knobs:
//! `max_seqs` (running sequences) and `max_batched_tokens` (tokens per step). When KV blocks run
//! out, the most recently admitted sequence is preempted: its blocks are freed and it goes back to
//! the front of the queue, to be recomputed (prompt + output so far) when blocks free up.
//! No GPU here: the plan is data, tested on its own.

use super::kv::BlockAllocator;
use super::speculate::{accepted_prefix, ngram_draft};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::VecDeque;

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
    /// Greedy: the most likely token, no draw.
    pub fn is_greedy(&self) -> bool {
        self.temperature <= 0.0 || self.top_k == 1
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
    /// Draft tokens per decoding sequence per step, at most (0: no speculative decoding).
    pub max_draft: usize,
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
            max_draft: 0,
        }
    }

    /// The draft for running sequence `i` this step: only when it is decoding (its one new token
    /// is the last), greedy, and drafting is on; at most `budget - 1` tokens (the budget counts
    /// draft tokens), the tokens it may still generate minus the one the step always yields, and
    /// what the free KV blocks hold beyond the blocks the plain decode needs (a draft never
    /// preempts anyone).
    fn draft_for(&self, i: usize, budget: usize) -> Vec<u32> {
        let seq = &self.running[i];
        if self.max_draft == 0 || seq.computed + 1 != seq.tokens.len() || !seq.sampling.is_greedy() {
            return Vec::new();
        }
        let left = seq.max_new_tokens.saturating_sub(seq.output().len() + 1);
        // Positions up to `tokens.len() + draft` must have blocks, held or free now, leaving free
        // the blocks the sequences after this one need for all their pending tokens (so a draft
        // never makes a later sequence preempt).
        let later: usize =
            self.running[i + 1..].iter().map(|s| self.blocks_for(s.tokens.len()).saturating_sub(s.blocks.len())).sum();
        let free = self.blocks.free().saturating_sub(later);
        let slots = ((seq.blocks.len() + free) * self.block_size).saturating_sub(seq.tokens.len());
        let k = self.max_draft.min(budget.saturating_sub(1)).min(left).min(slots);
        ngram_draft(&seq.tokens, k)
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

    fn preempt_last(&mut self, plan: &mut Plan) {
        let mut seq = self.running.pop().expect("a running sequence");
        self.blocks.release(&mut seq.blocks);
        seq.computed = 0;
        seq.preemptions += 1;
        plan.preempted.push(seq.id);
        self.waiting.push_front(seq);
    }

    /// Decides this step's work and reserves its KV blocks.
    pub fn schedule(&mut self) -> Plan {
        let mut plan = Plan::default();
        let mut budget = self.max_batched_tokens;
        let mut i = 0;
        while i < self.running.len() && budget > 0 {
            let draft = self.draft_for(i, budget);
            let want = (self.running[i].tokens.len() - self.running[i].computed).min(budget) + draft.len();
            let need = self.blocks_for(self.running[i].computed + want).saturating_sub(self.running[i].blocks.len());
            while self.blocks.free() < need && self.running.len() > i + 1 {
                self.preempt_last(&mut plan);
            }
            if self.blocks.free() < need {
                self.preempt_last(&mut plan); // the sequence itself: nothing left to take from
                break;
            }
            let seq = &mut self.running[i];
            seq.blocks.extend(self.blocks.allocate(need).expect("checked"));
            let sample = (seq.computed + want - draft.len() == seq.tokens.len()).then(|| seq.next_draw());
            plan.items.push(Planned { id: seq.id, start: seq.computed, len: want, sample, draft });
            budget -= want;
            i += 1;
        }
        // Admit new work only when nothing had to be preempted (it would only be preempted again).
        while plan.preempted.is_empty() && budget > 0 && self.running.len() < self.max_seqs {
            let Some(seq) = self.waiting.front() else { break };
            let want = (seq.tokens.len() - seq.computed).min(budget);
            let need = self.blocks_for(want);
            if self.blocks.free() < need {
                break;
            }
            let mut seq = self.waiting.pop_front().expect("front exists");
            seq.blocks = self.blocks.allocate(need).expect("checked");
            let sample = (want == seq.tokens.len()).then(|| seq.next_draw());
            plan.items.push(Planned { id: seq.id, start: 0, len: want, sample, draft: Vec::new() });
            if seq.preemptions == 0 {
                plan.admitted.push(seq.id);
            }
            budget -= want;
            self.running.push(seq);
        }
        plan
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
        let mut next = sampled.iter();
        let mut done = Vec::new();
        for item in &plan.items {
            let idx = self.running.iter().position(|s| s.id == item.id).expect("planned sequences are running");
            let seq = &mut self.running[idx];
            seq.computed = item.start + item.len;
            if item.sample.is_none() {
                continue;
            }
            let chosen: Vec<u32> = next.by_ref().take(item.rows()).copied().collect();
            assert_eq!(chosen.len(), item.rows(), "one sampled id per sampling row");
            let accepted = accepted_prefix(&item.draft, &chosen);
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
            if let Some(reason) = reason {
                let mut seq = self.running.remove(idx);
                self.blocks.release(&mut seq.blocks);
                done.push((seq, reason));
            }
        }
        done
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

    impl Scheduler {
        fn schedule_and_commit_once(&mut self) {
            let plan = self.schedule();
            let n = plan.items.iter().map(Planned::rows).sum();
            self.commit(&plan, &vec![7; n]);
        }
    }
}
