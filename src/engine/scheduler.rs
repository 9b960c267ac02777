//! Continuous batching, FCFS by arrival. Each step combines the running sequences (decodes and
//! unfinished chunked prefills, in admission order) with newly admitted prefills, under two knobs:
//! `max_seqs` (running sequences) and `max_batched_tokens` (tokens per step). When KV blocks run
//! out, the most recently admitted sequence is preempted: its blocks are freed and it goes back to
//! the front of the queue, to be recomputed (prompt + output so far) when blocks free up.
//! No GPU here: the plan is data, tested on its own.

use super::kv::BlockAllocator;
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

/// Tokens of one sequence in this step: positions `start..start + len`.
#[derive(Debug, Clone, PartialEq)]
pub struct Planned {
    pub id: u64,
    pub start: usize,
    pub len: usize,
    /// The chunk reaches the end of the sequence, so its last token yields the next one, drawn with
    /// this uniform number (see [`SamplingParams`]; 0 when greedy).
    pub sample: Option<f32>,
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
            let want = (self.running[i].tokens.len() - self.running[i].computed).min(budget);
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
            let sample = (seq.computed + want == seq.tokens.len()).then(|| seq.next_draw());
            plan.items.push(Planned { id: seq.id, start: seq.computed, len: want, sample });
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
            plan.items.push(Planned { id: seq.id, start: 0, len: want, sample });
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

    /// Records the step's results; returns the sequences that finished, with why.
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
            let token = *next.next().expect("one sampled id per sampling row");
            seq.tokens.push(token);
            let reason = if seq.stop_ids.contains(&token) {
                Some(FinishReason::Stop)
            } else if seq.output().len() >= seq.max_new_tokens {
                Some(FinishReason::Length)
            } else {
                None
            };
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
            let ids = vec![7; plan.items.iter().filter(|p| p.sample.is_some()).count()];
            for (seq, _) in s.commit(&plan, &ids) {
                finished.push((seq.id, seq.output().to_vec(), seq.preemptions));
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
        assert_eq!(plan.items[0], Planned { id: 0, start: 10, len: 1, sample: Some(0.0) });
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

    impl Scheduler {
        fn schedule_and_commit_once(&mut self) {
            let plan = self.schedule();
            let n = plan.items.iter().filter(|p| p.sample.is_some()).count();
            self.commit(&plan, &vec![7; n]);
        }
    }
}
