//! The serving loop: `submit` requests, call `step` until idle; each step schedules, runs one
//! GPU step, samples on the GPU, and returns timestamped events. Timestamps are taken when the
//! step's token ids are back on the CPU — the moment a client would see them.
//!
//! CPU/GPU overlap (`EngineLimits::overlap`): a call submits the next step before it awaits the
//! ids of the one already on the GPU, planned on that one's provisional commit
//! ([`Scheduler::commit_provisional`]: each sampled token is a placeholder the next step's
//! embedding reads on the GPU), so the GPU does not wait while the CPU reads ids, schedules and
//! encodes. Each call still returns one step's events. A sequence whose token at step n is a stop
//! id finishes when n's ids arrive; its row in step n + 1, already running, is discarded, so it
//! leaves the batch at step n + 2 at the latest.
//!
//! The steps run on an [`Executor`]: the GPU forward pass, or the capacity planner's cost model
//! on a virtual clock; every timestamp is the executor's clock.

use super::draft::DraftModel;
use super::executor::Executor;
use super::forward::{Batch, ForwardPass};
use super::scheduler::{FinishReason, Plan, Policy, SamplingParams, Scheduler, Sequence};
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};

/// What a client asks for.
#[derive(Debug, Clone)]
pub struct Request {
    pub prompt: Vec<u32>,
    pub max_new_tokens: usize,
    pub sampling: SamplingParams,
    /// Generation stops at these ids (the model's EOS ids by default) unless `ignore_eos`.
    pub stop_ids: Vec<u32>,
    pub ignore_eos: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EventKind {
    /// First time the request got GPU work (queueing ends); `cached_tokens` of its prompt were
    /// served from the prefix cache (0 without prefix caching).
    Scheduled {
        cached_tokens: u32,
    },
    FirstToken {
        token: u32,
    },
    Token {
        token: u32,
    },
    Finished {
        reason: FinishReason,
    },
    /// KV blocks ran out: the request was evicted and will be recomputed.
    Preempted,
    /// Speculative decoding: this step verified `drafted` guessed tokens and `accepted` of them
    /// were the model's own choices (they follow as `Token`s, with the step's one extra token).
    Speculated {
        drafted: u32,
        accepted: u32,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Event {
    pub id: u64,
    pub t_s: f64,
    #[serde(flatten)]
    pub kind: EventKind,
}

/// Per-step engine state, for charts and diagnosis.
#[derive(Debug, Clone, Default, Serialize)]
pub struct StepStats {
    pub t_s: f64,
    pub duration_s: f64,
    pub running: usize,
    pub waiting: usize,
    /// Tokens of decoding sequences: one each, plus their draft tokens.
    pub decode_tokens: usize,
    /// What the step computed (`shape.tokens`: the batch's tokens), for a cost model
    /// (the `planner` layer above).
    pub shape: StepShape,
    pub kv_blocks_used: usize,
    pub kv_blocks_total: usize,
    /// Free blocks still holding a cached prefix (counted free in `kv_blocks_used`; 0 without
    /// prefix caching).
    pub kv_blocks_cached: usize,
    /// From the step's ids readback resolving (its map callback) to the tokens' timestamp `t_s`:
    /// what the event loop ran in between. `None` for a step that sampled nothing.
    pub readback_lag_s: Option<f64>,
    /// Speculative decoding: draft tokens verified in this step, and how many were accepted.
    pub drafted_tokens: usize,
    pub accepted_tokens: usize,
    /// The step ran kernel by kernel for [`Engine::profile_next`] (its duration is not a step's).
    pub profiled: bool,
}

/// A step's work as a cost model sees it (the `planner` layer's `CostModel`): what the forward pass
/// computed, whatever the scheduler's reasons.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct StepShape {
    /// Tokens through the layers: prefill chunks, one per decoding sequence, draft tokens.
    pub tokens: usize,
    /// Sequences in the batch.
    pub sequences: usize,
    /// Rows through the LM head and the sampler.
    pub logit_rows: usize,
    /// Keys attended, summed over the tokens (a token at position p attends to p + 1): the K/V
    /// a decode reads, the query-key pairs a prefill computes.
    pub attended_keys: u64,
}

impl StepShape {
    /// The shape of a batch's rows (the definition; [`StepWork::shape`] computes it from the
    /// plan without the rows).
    pub fn of(batch: &Batch) -> StepShape {
        StepShape {
            tokens: batch.tokens.len(),
            sequences: batch.block_tables.len(),
            logit_rows: batch.logit_rows.len(),
            attended_keys: batch.tokens.iter().map(|t| t[1] as u64 + 1).sum(),
        }
    }
}

/// A step on the GPU whose ids have not come back (CPU/GPU overlap).
struct InFlight<S> {
    submitted: S,
    plan: Plan,
    /// When its scheduling began.
    start: f64,
    /// Sequence of each logit row, and the sequences its provisional commit finished by length
    /// (shown with their last token): [`Scheduler::commit_provisional`].
    rows: Vec<u64>,
    finishing: Vec<(Sequence, FinishReason)>,
    shape: StepShape,
    decode_tokens: usize,
}

/// The batcher over an [`Executor`]: the GPU forward pass unless said otherwise.
pub struct Engine<X: Executor = ForwardPass> {
    pub model: X,
    scheduler: Scheduler,
    next_id: u64,
    cancelled: Vec<u64>,
    /// Run the next step kernel by kernel and keep each dispatch's wall time in `last_profile`.
    pub profile_next: bool,
    pub last_profile: Vec<crate::gpu::kernels::DispatchTime>,
    /// Speculative decoding with a draft model ([`Engine::set_draft`]).
    draft: Option<DraftModel>,
    /// CPU/GPU overlap: the step submitted last, whose ids the next call reads.
    in_flight: Option<InFlight<X::Submitted>>,
    /// When the last step's ids arrived (0: none yet): a step's duration starts no earlier.
    last_resolved_s: f64,
    /// Steps submitted while the one before was still on the GPU (see [`Engine::overlapped_steps`]).
    overlapped: u64,
}

impl<X: Executor> Engine<X> {
    pub fn new(model: X) -> Engine<X> {
        let l = model.limits();
        let mut scheduler = Scheduler::new(l.max_seqs, l.max_batched_tokens, l.block_size, l.num_blocks);
        if l.prefix_cache {
            scheduler = scheduler.with_prefix_cache();
        }
        // Rows never exceed `max_logit_rows`: at most 1 + K per sequence, and one per token.
        scheduler.max_draft = l.speculation.max_draft();
        if let super::Speculation::Draft { .. } = l.speculation {
            scheduler.proposals = Some(Default::default()); // no drafts until `set_draft`
        }
        Engine {
            model,
            scheduler,
            next_id: 0,
            cancelled: Vec::new(),
            profile_next: false,
            last_profile: Vec::new(),
            draft: None,
            in_flight: None,
            last_resolved_s: 0.0,
            overlapped: 0,
        }
    }

    /// Drafts with `draft` from the next step on (the model was loaded with
    /// `Speculation::Draft`, which sized its logit rows for the K draft tokens).
    pub fn set_draft(&mut self, draft: DraftModel) -> Result<()> {
        if !matches!(self.model.limits().speculation, super::Speculation::Draft { .. }) {
            return Err(Error::Invalid("a draft model needs the engine loaded with Speculation::Draft".into()));
        }
        self.draft = Some(draft);
        Ok(())
    }

    pub fn draft(&self) -> Option<&DraftModel> {
        self.draft.as_ref()
    }

    /// Validates and queues a request; returns its id.
    pub fn submit(&mut self, req: Request) -> Result<u64> {
        super::generate::check_prompt(self.model.cfg(), self.model.limits(), &req.prompt, req.max_new_tokens)?;
        self.scheduler.policy.check_request(req.prompt.len(), req.max_new_tokens, self.scheduler.max_batched_tokens)?;
        if req.max_new_tokens == 0 {
            return Err(Error::Prompt("max_new_tokens must be at least 1".into()));
        }
        let s = req.sampling;
        if !(s.temperature >= 0.0 && s.temperature.is_finite() && s.top_p > 0.0 && s.top_p <= 1.0) {
            return Err(Error::Invalid(format!(
                "sampling settings out of range: {s:?} (temperature >= 0, 0 < top_p <= 1)"
            )));
        }
        let id = self.next_id;
        self.next_id += 1;
        let stop = if req.ignore_eos { Vec::new() } else { req.stop_ids };
        self.scheduler.add(Sequence::new(id, req.prompt, req.max_new_tokens, req.sampling, stop));
        Ok(id)
    }

    /// The scheduling policy for the requests still to come and those queued or running (their
    /// tokens do not depend on it). Refused while a queued request could not be served under it.
    pub fn set_policy(&mut self, policy: Policy) -> Result<()> {
        for seq in self.scheduler.waiting.iter().chain(&self.scheduler.running) {
            policy.check_request(seq.prompt_len, seq.max_new_tokens, self.scheduler.max_batched_tokens)?;
        }
        policy.check_request(1, 1, self.scheduler.max_batched_tokens)?;
        self.scheduler.policy = policy;
        Ok(())
    }

    pub fn policy(&self) -> Policy {
        self.scheduler.policy
    }

    /// Cancels a queued or running request; its `Finished { Cancelled }` comes with the next step.
    pub fn cancel(&mut self, id: u64) -> bool {
        let mut found = self.scheduler.cancel(id).is_some();
        // Finished by length in the step on the GPU, but not shown yet: cancelled instead.
        if let Some(f) = &mut self.in_flight {
            if let Some(i) = f.finishing.iter().position(|(s, _)| s.id == id) {
                f.finishing.remove(i);
                found = true;
            }
        }
        if found {
            self.cancelled.push(id);
        }
        found
    }

    pub fn has_work(&self) -> bool {
        self.scheduler.has_work() || !self.cancelled.is_empty() || self.in_flight.is_some()
    }

    /// The fewest output tokens any request still here has left to produce (0 for one that got
    /// its last token in the step on the GPU, whose finish is not shown yet); `None` when there
    /// is none. Each token is a step of its own, so a planner can bound when the next request can
    /// finish without running the steps (`planner::fleet`).
    pub fn fewest_tokens_left(&self) -> Option<usize> {
        if self.in_flight.as_ref().is_some_and(|f| !f.finishing.is_empty()) {
            return Some(0);
        }
        let left = |s: &Sequence| s.max_new_tokens.saturating_sub(s.output().len());
        self.scheduler.running.iter().chain(&self.scheduler.waiting).map(left).min()
    }

    /// Steps so far that were submitted before the previous step's ids were read (0 without
    /// CPU/GPU overlap).
    pub fn overlapped_steps(&self) -> u64 {
        self.overlapped
    }

    /// Whether the next step may overlap (`EngineLimits::overlap`; never while profiling, which
    /// times kernels one by one, or with a draft model).
    fn overlaps(&self) -> bool {
        self.model.limits().overlap && !self.profile_next && self.draft.is_none()
    }

    pub fn waiting(&self) -> usize {
        self.scheduler.waiting.len()
    }

    pub fn running(&self) -> usize {
        self.scheduler.running.len()
    }

    /// KV blocks held by requests, of all blocks; free blocks that still hold a cached prefix
    /// count as free (they are evicted when needed).
    pub fn kv_blocks(&self) -> (usize, usize) {
        (self.scheduler.blocks.used(), self.scheduler.blocks.total())
    }

    /// `n` KV blocks for work beside the batcher's (a quality pass's teacher-forced sequences:
    /// [`super::logits::LogitSource`]), from its allocator, so that no request's or cached
    /// prefix's K/V is written over; [`Engine::release_blocks`] gives them back.
    pub fn take_blocks(&mut self, n: usize) -> Result<Vec<u32>> {
        self.scheduler.blocks.allocate(n).ok_or_else(|| {
            Error::Prompt(format!(
                "{n} KV blocks wanted, {} free of {}; use more KV blocks",
                self.scheduler.blocks.free(),
                self.scheduler.blocks.total()
            ))
        })
    }

    /// Gives back blocks of [`Engine::take_blocks`].
    pub fn release_blocks(&mut self, mut blocks: Vec<u32>) {
        self.scheduler.blocks.release(&mut blocks);
    }

    /// The KV block allocator, read-only (the soak test checks its free list once idle).
    pub fn kv_allocator(&self) -> &super::kv::BlockAllocator {
        &self.scheduler.blocks
    }

    /// One iteration: schedule, run, sample, record. Returns no stats when there was nothing to
    /// run. With CPU/GPU overlap the step whose events come back is the one submitted by the call
    /// before (or by this call, when the GPU was idle), and the next one is on the GPU meanwhile.
    pub async fn step(&mut self) -> Result<(Vec<Event>, Option<StepStats>)> {
        let start = self.model.now_s();
        let mut events: Vec<Event> = self
            .cancelled
            .drain(..)
            .map(|id| Event { id, t_s: start, kind: EventKind::Finished { reason: FinishReason::Cancelled } })
            .collect();
        if !self.overlaps() {
            if let Some(current) = self.in_flight.take() {
                // Leaving the overlap: this call only reads the step already on the GPU.
                let stats = self.resolve(current, &mut events).await?;
                return Ok((events, Some(stats)));
            }
            return self.step_serial(start, events).await;
        }
        if self.in_flight.is_none() {
            let Some(mut first) = self.launch(start, &mut events)? else { return Ok((events, None)) };
            (first.rows, first.finishing) = self.scheduler.commit_provisional(&first.plan);
            self.in_flight = Some(first);
        }
        let current = self.in_flight.take().expect("a step is on the GPU");
        // The next step goes to the GPU before this one's ids are awaited.
        let next = if self.scheduler.has_work() { self.launch(self.model.now_s(), &mut events)? } else { None };
        self.overlapped += next.is_some() as u64;
        let stats = self.resolve(current, &mut events).await?;
        if let Some(mut next) = next {
            (next.rows, next.finishing) = self.scheduler.commit_provisional(&next.plan);
            self.in_flight = Some(next);
        }
        Ok((events, Some(stats)))
    }

    /// Plans a step on what is committed (provisionally, for a step on the GPU) and submits it;
    /// `None` when there is nothing to run. Its scheduling events are stamped `start`.
    fn launch(&mut self, start: f64, events: &mut Vec<Event>) -> Result<Option<InFlight<X::Submitted>>> {
        let plan = self.scheduler.schedule();
        preempted_events(&plan, start, events);
        if plan.items.is_empty() {
            return Ok(None);
        }
        let work = StepWork { plan: &plan, scheduler: &self.scheduler };
        let shape = work.shape();
        let submitted = self.model.submit(&work)?;
        self.admitted_events(&plan, start, events);
        let decode_tokens = decode_tokens(&plan);
        Ok(Some(InFlight { submitted, plan, start, rows: Vec::new(), finishing: Vec::new(), shape, decode_tokens }))
    }

    /// Awaits a launched step's ids, puts them in place of its placeholders and records its
    /// events (stamped when the ids arrived) and stats.
    async fn resolve(&mut self, current: InFlight<X::Submitted>, events: &mut Vec<Event>) -> Result<StepStats> {
        let sampled = self.model.ids(current.submitted).await?;
        let t = self.model.now_s();
        let (tokens, finished) = self.scheduler.resolve(&current.rows, &sampled, current.finishing);
        events.extend(tokens.into_iter().map(|(id, index, token)| token_event(id, index, token, t)));
        for (seq, reason) in finished {
            events.push(Event { id: seq.id, t_s: t, kind: EventKind::Finished { reason } });
        }
        // The step ran from its submission, or from the end of the step before it on the GPU.
        let began = current.start.max(self.last_resolved_s);
        self.last_resolved_s = t;
        Ok(self.step_stats(t, began, !sampled.is_empty(), current.shape, current.decode_tokens))
    }

    /// The stats of a step whose ids arrived at `t` (it ran from `began`; `sampled`: it sampled
    /// tokens): what it ran, and the queues and KV blocks now. No drafts, not profiled.
    fn step_stats(&self, t: f64, began: f64, sampled: bool, shape: StepShape, decode_tokens: usize) -> StepStats {
        let (used, total) = self.kv_blocks();
        StepStats {
            t_s: t,
            duration_s: t - began,
            running: self.scheduler.running.len(),
            waiting: self.scheduler.waiting.len(),
            decode_tokens,
            shape,
            kv_blocks_used: used,
            kv_blocks_total: total,
            kv_blocks_cached: self.scheduler.blocks.cached_free(),
            readback_lag_s: if sampled { self.model.readback_resolved_s().map(|r| t - r) } else { None },
            drafted_tokens: 0,
            accepted_tokens: 0,
            profiled: false,
        }
    }

    /// `Scheduled` events, stamped `start`, for the sequences `plan` admitted for the first time.
    fn admitted_events(&self, plan: &Plan, start: f64, events: &mut Vec<Event>) {
        for &id in &plan.admitted {
            let cached_tokens = self.scheduler.get(id).expect("admitted sequences are running").cached_tokens as u32;
            events.push(Event { id, t_s: start, kind: EventKind::Scheduled { cached_tokens } });
        }
    }

    /// One step, committed before the next is planned (no overlap).
    async fn step_serial(&mut self, start: f64, mut events: Vec<Event>) -> Result<(Vec<Event>, Option<StepStats>)> {
        if let Some(draft) = &mut self.draft {
            // The draft model's steps are part of this step (and of its duration).
            self.scheduler.proposals = Some(draft.propose(&self.scheduler.running).await?);
        }
        let plan = self.scheduler.schedule();
        preempted_events(&plan, start, &mut events);
        if plan.items.is_empty() {
            return Ok((events, None));
        }
        let work = StepWork { plan: &plan, scheduler: &self.scheduler };
        let shape = work.shape();
        let profiled = self.profile_next;
        let sampled = if self.profile_next {
            self.profile_next = false;
            let (ids, times) = self.model.profile_step(&work).await?;
            self.last_profile = times;
            ids
        } else {
            self.model.step(&work).await?
        };
        let t = self.model.now_s();
        self.admitted_events(&plan, start, &mut events);
        // Output lengths before the commit: what follows is this step's tokens (one, or with a
        // draft up to 1 + accepted), all stamped `t`.
        let before: Vec<(u64, usize, usize)> = plan
            .items
            .iter()
            .filter(|p| p.sample.is_some())
            .map(|p| (p.id, self.scheduler.get(p.id).expect("planned sequence exists").output().len(), p.draft.len()))
            .collect();
        let finished = self.scheduler.commit(&plan, &sampled);
        if let Some(draft) = &mut self.draft {
            draft.forget_gone(&self.scheduler.running);
        }
        let (mut drafted_tokens, mut accepted_tokens) = (0, 0);
        for &(id, from, drafted) in &before {
            let seq = match self.scheduler.get(id) {
                Some(seq) => seq,
                None => &finished.iter().find(|(s, _)| s.id == id).expect("a committed sequence").0,
            };
            if drafted > 0 {
                let accepted = (seq.output().len() - from).saturating_sub(1).min(drafted);
                drafted_tokens += drafted;
                accepted_tokens += accepted;
                let kind = EventKind::Speculated { drafted: drafted as u32, accepted: accepted as u32 };
                events.push(Event { id, t_s: t, kind });
            }
            events
                .extend(seq.output()[from..].iter().enumerate().map(|(i, &token)| token_event(id, from + i, token, t)));
        }
        for (seq, reason) in finished {
            events.push(Event { id: seq.id, t_s: t, kind: EventKind::Finished { reason } });
        }
        let stats = StepStats {
            drafted_tokens,
            accepted_tokens,
            profiled,
            ..self.step_stats(t, start, !sampled.is_empty(), shape, decode_tokens(&plan))
        };
        self.last_resolved_s = t;
        Ok((events, Some(stats)))
    }
}

/// One step's work as the scheduler planned it, for an [`Executor`]: its shape at once, and its
/// per-token rows only for an executor that runs them (the GPU forward pass does; the planner's
/// cost model needs the shape alone, so a simulated step costs per sequence, not per token).
pub struct StepWork<'a> {
    plan: &'a Plan,
    scheduler: &'a Scheduler,
}

impl StepWork<'_> {
    /// [`StepShape::of`] the rows [`StepWork::batch`] would build, from the plan's items: item `i`
    /// runs positions `start..start + len`, which attend to `len·start + len(len+1)/2` keys.
    pub fn shape(&self) -> StepShape {
        let items = &self.plan.items;
        StepShape {
            tokens: items.iter().map(|p| p.len).sum(),
            sequences: items.len(),
            logit_rows: items.iter().map(|p| p.rows()).sum(),
            attended_keys: items
                .iter()
                .map(|p| {
                    let (start, len) = (p.start as u64, p.len as u64);
                    len * start + len * (len + 1) / 2
                })
                .sum(),
        }
    }

    /// Flattens the plan into the GPU's per-token rows.
    pub fn batch(&self) -> Batch {
        let mut batch = Batch::default();
        batch.tokens.reserve(self.plan.items.iter().map(|p| p.len).sum());
        batch.block_tables.reserve(self.plan.items.len());
        for (s, item) in self.plan.items.iter().enumerate() {
            let seq = self.scheduler.get(item.id).expect("planned sequence exists");
            let known = seq.tokens.len();
            for pos in item.start..item.start + item.len {
                let id = if pos < known { seq.tokens[pos] } else { item.draft[pos - known] };
                batch.tokens.push([id, pos as u32, s as u32, 0]);
            }
            batch.block_tables.push(seq.blocks.clone());
            if let Some(u) = item.sample {
                // One row per position whose next token is wanted: the last known token and each
                // draft token (drafts are greedy only, so `u` is unused for them).
                let end = batch.tokens.len() as u32;
                for row in end - item.rows() as u32..end {
                    batch.logit_rows.push(row);
                    batch.sampling.push(seq.sampling.row(u));
                }
            }
        }
        batch
    }
}

/// `Preempted` events, stamped `start`, for the sequences `plan` evicted.
fn preempted_events(plan: &Plan, start: f64, events: &mut Vec<Event>) {
    events.extend(plan.preempted.iter().map(|&id| Event { id, t_s: start, kind: EventKind::Preempted }));
}

/// The event of token `index` of a request's output (0: its first token), stamped `t_s`.
fn token_event(id: u64, index: usize, token: u32, t_s: f64) -> Event {
    let kind = if index == 0 { EventKind::FirstToken { token } } else { EventKind::Token { token } };
    Event { id, t_s, kind }
}

/// Tokens of `plan`'s decoding sequences: one each, plus their draft tokens ([`StepStats`]).
fn decode_tokens(plan: &Plan) -> usize {
    plan.items.iter().filter(|p| p.sample.is_some() && p.len == p.rows()).map(|p| p.len).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shape a step's executor is given without rows is the shape of its rows, over a run
    /// with chunked prefills, decodes, prompt-lookup drafts and preemption (few KV blocks).
    #[test]
    fn step_work_shape_is_the_shape_of_its_rows() {
        let mut scheduler = Scheduler::new(4, 48, 4, 24);
        scheduler.max_draft = 3;
        for id in 0..6u64 {
            // Repeating prompts, so prompt lookup finds drafts.
            let prompt: Vec<u32> = (0..20 + 7 * id as u32).map(|i| i % (3 + id as u32)).collect();
            let sampling = SamplingParams { temperature: 0.0, ..Default::default() };
            scheduler.add(Sequence::new(id, prompt, 12, sampling, Vec::new()));
        }
        let (mut steps, mut drafted, mut preempted) = (0, 0, 0);
        while scheduler.has_work() {
            let plan = scheduler.schedule();
            let work = StepWork { plan: &plan, scheduler: &scheduler };
            let batch = work.batch();
            assert_eq!(work.shape(), StepShape::of(&batch), "step {steps}");
            drafted += plan.items.iter().map(|p| p.draft.len()).sum::<usize>();
            preempted += plan.preempted.len();
            // Each row's id: the row's own position, so some drafts are accepted.
            let sampled: Vec<u32> = batch.logit_rows.iter().map(|&r| batch.tokens[r as usize][1] % 5).collect();
            scheduler.commit(&plan, &sampled);
            steps += 1;
            assert!(steps < 1000, "the run ends");
        }
        assert!(drafted > 0 && preempted > 0, "drafts {drafted}, preemptions {preempted}: the run covers both");
    }
}
