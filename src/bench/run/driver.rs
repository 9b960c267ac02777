//! The benchmark driver: releases the planned requests into the engine as a [`Release`] says (on
//! the engine's clock: the wall clock, so queueing is real, or the capacity planner's virtual
//! one), steps the engine, and records every event with its timestamp. Times are seconds from the
//! benchmark's start. What is the driver's own: submitting to the [`Engine`], stepping it,
//! recording token events, a later conversation turn's prompt (the turn before's prompt and output
//! ids, then its own), and watching for saturation before every release.

use crate::bench::base::thinking::ThinkTags;
use crate::bench::measure::decided::DecideRule;
use crate::bench::record::raw::{Cancelled, RequestRecord, StepSample, TokenTimes};
use crate::bench::run::release::{Due, Pace, Release, Released, Stop, TURN_BEFORE_FAILED};
use crate::bench::traffic::cancel::CancelledBy;
use crate::bench::traffic::prompts::Prompt;
use crate::bench::traffic::workload::{conversation_turns, PlannedRequest, Turn, WorkloadSpec};
use crate::engine::{Engine, Event, EventKind, Executor, Request, SamplingParams, StepStats};
use crate::error::Result;

/// What the driver needs besides the plan.
pub struct DriverOptions<'a> {
    pub spec: &'a WorkloadSpec,
    pub sampling: SamplingParams,
    pub ignore_eos: bool,
    /// The prompt of each planned request.
    pub prompt: &'a dyn Fn(&PlannedRequest) -> Result<Vec<u32>>,
    /// The model's thinking tags, to split each reply into reasoning and answer
    /// ([`crate::bench::base::thinking`]); `None` (no tokenizer that has them): no split.
    pub think: Option<ThinkTags>,
    /// Stop once the run's SLO attainment is decided ([`Pace::decide`]).
    pub decide: Option<DecideRule>,
}

/// Live view for charts and progress, after every step.
pub struct Progress<'a> {
    pub records: &'a [RequestRecord],
    pub steps: &'a [StepSample],
    pub finished: usize,
    pub total: usize,
}

/// Runs the plan to completion (or until `cancelled()` says stop, which cancels what is left, or
/// the GPU device faults, which fails what is in flight and leaves the rest unsent).
pub async fn run<X: Executor>(
    engine: &mut Engine<X>,
    plan: &[PlannedRequest],
    options: &DriverOptions<'_>,
    on_progress: &mut dyn FnMut(&Progress),
    cancelled: &dyn Fn() -> bool,
) -> Result<(Vec<RequestRecord>, Vec<StepSample>)> {
    let (records, steps, _) = run_watched(engine, plan, options, on_progress, cancelled).await?;
    Ok((records, steps))
}

/// [`run`], which also watches an open loop for saturation when `options.spec.saturation_stop`,
/// and the run's SLO attainment when `options.decide` ([`Release::watch`], at every pass of the
/// loop): once requests outstanding keep growing or the attainment is decided, nothing more is
/// released (those requests keep no arrival time and are dropped by the session), those in
/// flight are cancelled (a queue that grew for seconds would take as long to drain; a decided
/// run needs nothing more), and why it stopped is returned.
pub async fn run_watched<X: Executor>(
    engine: &mut Engine<X>,
    plan: &[PlannedRequest],
    options: &DriverOptions<'_>,
    on_progress: &mut dyn FnMut(&Progress),
    cancelled: &dyn Fn() -> bool,
) -> Result<(Vec<RequestRecord>, Vec<StepSample>, Option<Stop>)> {
    let mut run = Run::new(plan, options)?;
    // The engine's clock: the wall clock, or the capacity planner's virtual one.
    let t0 = engine.model.now_s();
    let mut stop: Option<Stop> = None;
    let mut slept_until = f64::NEG_INFINITY;
    while !run.release.done() {
        if cancelled() || stop.is_some() {
            let by = stop.as_ref().map_or(CancelledBy::User, Stop::by);
            run.cancel_in_flight(engine, by, engine.model.now_s() - t0);
            break;
        }
        // 1. Release what is due.
        // Never earlier than a time the driver slept until: `t0 + next − t0` may round an ulp
        // short of `next` (on the planner's virtual clock it then never came due).
        let now = (engine.model.now_s() - t0).max(slept_until);
        stop = run.release.watch(now);
        if stop.is_some() {
            continue;
        }
        while let Some(released) = run.release.next(now) {
            run.submit(engine, released, now);
        }
        run.cancel_due(engine, now);
        // 2. Run a step, or wait for the next arrival.
        if !engine.has_work() {
            if let Some(next) = run.release.next_due_s() {
                engine.model.sleep_s(next - (engine.model.now_s() - t0)).await;
                slept_until = next;
            }
            continue;
        }
        let (events, stats) = match engine.step().await {
            Ok(stepped) => stepped,
            // A device fault ends the run with what was measured: the requests in flight fail with
            // its message, and the session, seeing the fault, stops after keeping this result.
            Err(e) if engine.model.is_faulty() => {
                run.fail_in_flight(&e.to_string());
                break;
            }
            Err(e) => return Err(e),
        };
        run.record_step(&events, stats.as_ref(), t0);
        let finished = run.release.ended();
        on_progress(&Progress { records: &run.records, steps: &run.steps, finished, total: plan.len() });
    }
    let (records, steps) = run.finish();
    Ok((records, steps, stop))
}

/// One run's state between steps: the release, the records, what is in flight.
struct Run<'a> {
    plan: &'a [PlannedRequest],
    options: &'a DriverOptions<'a>,
    /// Conversations: each request's turn (its session, the turn before it, the think time).
    turns: Option<Vec<Turn>>,
    /// Each request's own prompt: its new text (a later turn's history goes before it when the turn
    /// is released, since its earlier turns' prompt and reply are known only then).
    prompts: Vec<Vec<u32>>,
    /// The prompt each released turn was sent with (the next turn's history starts with it).
    sent_prompts: Vec<Vec<u32>>,
    records: Vec<RequestRecord>,
    steps: Vec<StepSample>,
    /// Each request's output ids, kept to split thinking from answer at the end and to carry a
    /// reply into its conversation's next turn.
    output_ids: Vec<Vec<u32>>,
    /// Engine id → index in the plan, for the requests in the engine (a cancelled one leaves).
    by_engine_id: Vec<(u64, usize)>,
    /// When each request the workload aborts is due to be cancelled (its submission plus its
    /// drawn delay), once submitted; and the earliest of them still pending (infinite: none), so
    /// that a pass of the loop without one due costs one comparison.
    cancel_at_s: Vec<Option<f64>>,
    next_cancel_s: f64,
    release: Release,
}

impl<'a> Run<'a> {
    fn new(plan: &'a [PlannedRequest], options: &'a DriverOptions<'a>) -> Result<Self> {
        let turns = conversation_turns(options.spec);
        let own = |i: usize, p: &PlannedRequest| match &turns {
            Some(t) => PlannedRequest { prompt_len: t[i].new_len, ..p.clone() },
            None => p.clone(),
        };
        let prompts: Vec<Vec<u32>> =
            plan.iter().enumerate().map(|(i, p)| (options.prompt)(&own(i, p))).collect::<Result<_>>()?;
        let mut records: Vec<RequestRecord> = plan
            .iter()
            .zip(&prompts)
            .map(|(p, ids)| RequestRecord {
                prompt_digest: Some(Prompt::digest_ids(ids)),
                ..RequestRecord::unsent(p.id, p.prompt_len)
            })
            .collect();
        if let Some(turns) = &turns {
            for (r, t) in records.iter_mut().zip(turns) {
                (r.session, r.turn) = (Some(t.session), Some(t.turn));
            }
        }
        let keep_ids = options.think.is_some() || turns.is_some();
        let due =
            plan.iter().enumerate().map(|(i, p)| Due::of(p.arrival_s, previous_turn(turns.as_deref(), i))).collect();
        Ok(Run {
            release: Release::new(due, Pace { decide: options.decide.clone(), ..Pace::of(options.spec) }),
            plan,
            options,
            sent_prompts: vec![Vec::new(); if turns.is_some() { plan.len() } else { 0 }],
            output_ids: vec![Vec::new(); if keep_ids { plan.len() } else { 0 }],
            turns,
            prompts,
            records,
            steps: Vec::new(),
            by_engine_id: Vec::new(),
            cancel_at_s: vec![None; plan.len()],
            next_cancel_s: f64::INFINITY,
        })
    }

    /// Submits a request released at `now`: a later turn with its conversation's history.
    fn submit<X: Executor>(&mut self, engine: &mut Engine<X>, Released { index: i, arrival_s }: Released, now: f64) {
        let prompt = match previous_turn(self.turns.as_deref(), i) {
            Some((prev, _)) => [&self.sent_prompts[prev][..], &self.output_ids[prev], &self.prompts[i]].concat(),
            None => self.prompts[i].clone(),
        };
        self.records[i].prompt_len = prompt.len();
        if self.turns.is_some() {
            self.sent_prompts[i] = prompt.clone();
        }
        let req = request(&self.plan[i], prompt, self.options, engine.model.cfg());
        // The request's clock starts when it was due (its planned arrival; a later turn's reply
        // plus think time), so the driver's own lateness counts.
        self.records[i].arrival_s = arrival_s;
        match engine.submit(req) {
            Ok(eid) => {
                self.by_engine_id.push((eid, i));
                self.cancel_at_s[i] = self.options.spec.cancel_after_s(self.plan[i].id).map(|after_s| now + after_s);
                self.next_cancel_s = self.next_cancel_s.min(self.cancel_at_s[i].unwrap_or(f64::INFINITY));
            }
            Err(e) => {
                self.records[i].error = Some(e.to_string());
                self.ended(i, now);
            }
        }
    }

    /// Request `i` ended at `at_s`: the turn after it, if any, is dated at its finish plus the
    /// think time, or, when it failed, fails at `at_s` with the turns after it.
    fn ended(&mut self, i: usize, at_s: f64) {
        let Some(next) = self.release.end(i, &self.records[i]) else { return };
        match (&self.records[i].error, self.records[i].finish_s) {
            (None, Some(finish_s)) => {
                self.release.date(next, finish_s);
            }
            _ => {
                for turn in self.release.fail(next) {
                    (self.records[turn].arrival_s, self.records[turn].error) = (at_s, Some(TURN_BEFORE_FAILED.into()));
                }
            }
        }
    }

    /// Records a step's events and its sample, on the run's clock (`t0` is its start).
    fn record_step(&mut self, events: &[Event], stats: Option<&StepStats>, t0: f64) {
        for e in events {
            let Some(&(_, i)) = self.by_engine_id.iter().find(|(eid, _)| *eid == e.id) else { continue };
            if record_event(&mut self.records[i], &e.kind, e.t_s - t0, self.output_ids.get_mut(i), TokenTimes::Every) {
                self.ended(i, e.t_s - t0);
            }
        }
        if let Some(s) = stats {
            self.steps.push(StepSample {
                t_s: s.t_s - t0,
                duration_s: s.duration_s,
                running: s.running,
                waiting: s.waiting,
                batched_tokens: s.shape.tokens,
                kv_blocks_used: s.kv_blocks_used,
                kv_blocks_total: s.kv_blocks_total,
                kv_blocks_cached: s.kv_blocks_cached,
                shape: Some(s.shape),
                readback_lag_s: s.readback_lag_s,
                drafted_tokens: s.drafted_tokens,
                accepted_tokens: s.accepted_tokens,
            });
        }
    }

    /// Cancels what is in flight, at `at_s` (the run was stopped, or saturated).
    fn cancel_in_flight<X: Executor>(&mut self, engine: &mut Engine<X>, by: CancelledBy, at_s: f64) {
        for &(eid, i) in &self.by_engine_id {
            if self.records[i].finish_s.is_none() && engine.cancel(eid) {
                self.records[i].cancelled = Some(Cancelled { by, at_s });
            }
        }
    }

    /// Cancels the requests the workload aborts that are due by `now` and still in the engine
    /// (checked once a pass of the loop, so up to a step late; the record keeps the time it was
    /// cancelled). The engine frees their KV blocks; their later events are not theirs any more.
    fn cancel_due<X: Executor>(&mut self, engine: &mut Engine<X>, now: f64) {
        if now < self.next_cancel_s {
            return;
        }
        let mut next = f64::INFINITY;
        let mut k = 0;
        while k < self.by_engine_id.len() {
            let (eid, i) = self.by_engine_id[k];
            match self.cancel_at_s[i] {
                Some(at_s) if at_s <= now => {
                    self.cancel_at_s[i] = None;
                    let r = &self.records[i];
                    if r.finish_s.is_none() && r.error.is_none() && engine.cancel(eid) {
                        self.records[i].cancelled = Some(Cancelled { by: CancelledBy::Workload, at_s: now });
                        self.by_engine_id.swap_remove(k);
                        self.ended(i, now);
                        continue;
                    }
                }
                Some(at_s) => next = next.min(at_s),
                None => {}
            }
            k += 1;
        }
        self.next_cancel_s = next;
    }

    /// Fails what is in flight with `message` (the device faulted).
    fn fail_in_flight(&mut self, message: &str) {
        for &(_, i) in &self.by_engine_id {
            if self.records[i].finish_s.is_none() && self.records[i].error.is_none() {
                self.records[i].error = Some(message.to_string());
            }
        }
    }

    /// The records, each reply split into reasoning and answer where the model thinks, and the steps.
    fn finish(mut self) -> (Vec<RequestRecord>, Vec<StepSample>) {
        if let Some(tags) = self.options.think {
            for (r, ids) in self.records.iter_mut().zip(&self.output_ids) {
                let (reasoning, answer) = tags.split(ids);
                r.reasoning_tokens = reasoning;
                r.first_answer_s = answer.filter(|_| reasoning > 0).and_then(|k| r.token_times_s.get(k).copied());
            }
        }
        (self.records, self.steps)
    }
}

/// The turn before request `i` in its conversation (`turns`), and the think time after it.
fn previous_turn(turns: Option<&[Turn]>, i: usize) -> Option<(usize, f64)> {
    turns.and_then(|t| t[i].prev.map(|prev| (prev, t[i].think_s)))
}

/// The engine request for planned request `p` with this `prompt`: its output length, the run's
/// sampling seeded per request, the model's stop ids.
pub fn request(
    p: &PlannedRequest,
    prompt: Vec<u32>,
    options: &DriverOptions<'_>,
    cfg: &crate::model::Qwen3Config,
) -> Request {
    Request {
        prompt,
        max_new_tokens: p.output_len,
        sampling: SamplingParams { seed: options.sampling.seed.wrapping_add(p.id), ..options.sampling },
        stop_ids: cfg.eos_token_ids.clone(),
        ignore_eos: options.ignore_eos,
    }
}

/// Records one engine event at `t` (seconds from the run's start) in its request's record, and
/// the token in `ids` when given; true when the request finished.
pub fn record_event(
    r: &mut RequestRecord,
    kind: &EventKind,
    t: f64,
    ids: Option<&mut Vec<u32>>,
    times: TokenTimes,
) -> bool {
    match *kind {
        EventKind::Scheduled { cached_tokens } => {
            r.scheduled_s = Some(t);
            r.cached_tokens = Some(cached_tokens as usize);
        }
        EventKind::FirstToken { token } | EventKind::Token { token } => {
            if matches!(kind, EventKind::FirstToken { .. }) {
                r.first_token_s = Some(t);
            }
            r.output_len += 1;
            if times == TokenTimes::Every {
                r.token_times_s.push(t);
            }
            if let Some(ids) = ids {
                ids.push(token);
            }
        }
        EventKind::Preempted => {
            r.preemptions += 1;
            r.preempted_s.push(t);
        }
        EventKind::Speculated { drafted, accepted } => {
            r.draft_steps += 1;
            r.drafted_tokens += drafted as usize;
            r.accepted_tokens += accepted as usize;
        }
        EventKind::Finished { .. } => {
            r.finish_s = Some(t);
            return true;
        }
    }
    false
}
