//! The benchmark driver: releases each planned request into the engine at its arrival time (wall
//! clock, so queueing is real), steps the engine, and records every event with its timestamp.
//! Times are seconds from the benchmark's start. For closed loops, `sequential` releases the next
//! request when the previous finishes and `concurrency` keeps N requests in flight; an open loop's
//! `max_concurrency` holds a due request back while that many are in flight.

use crate::bench::base::thinking::ThinkTags;
use crate::bench::measure::saturation::{Detector, Saturation};
use crate::bench::record::raw::{RequestRecord, StepSample, TokenTimes};
use crate::bench::traffic::prompts::Prompt;
use std::collections::VecDeque;

use crate::bench::traffic::workload::{conversation_turns, Arrival, PlannedRequest, Turn, WorkloadSpec};
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

/// [`run`], which also watches an open loop for saturation when `options.spec.saturation_stop`
/// ([`crate::bench::measure::saturation`]): once requests outstanding keep growing, nothing more is
/// released (those requests keep no arrival time and are dropped by the session), those in
/// flight are cancelled (a queue that grew for seconds would take as long to drain), and the
/// verdict is returned.
pub async fn run_watched<X: Executor>(
    engine: &mut Engine<X>,
    plan: &[PlannedRequest],
    options: &DriverOptions<'_>,
    on_progress: &mut dyn FnMut(&Progress),
    cancelled: &dyn Fn() -> bool,
) -> Result<(Vec<RequestRecord>, Vec<StepSample>, Option<Saturation>)> {
    let mut run = Run::new(plan, options)?;
    // The engine's clock: the wall clock, or the capacity planner's virtual one.
    let t0 = engine.model.now_s();
    let watch = options.spec.saturation_stop && options.spec.arrival.open_loop();
    let mut detector = Detector::new();
    let mut saturation = None;
    let mut slept_until = f64::NEG_INFINITY;
    while run.finished < plan.len() {
        if cancelled() || saturation.is_some() {
            run.cancel_in_flight(engine);
            break;
        }
        // 1. Release what is due.
        // Never earlier than a time the driver slept until: `t0 + next − t0` may round an ulp
        // short of `next` (on the planner's virtual clock it then never came due).
        let now = (engine.model.now_s() - t0).max(slept_until);
        if watch && saturation.is_none() {
            // Open-loop arrivals are in time order.
            let due = plan.partition_point(|p| p.arrival_s.is_some_and(|a| a <= now));
            saturation = detector.observe(now, due.saturating_sub(run.finished));
            if saturation.is_some() {
                continue;
            }
        }
        run.release_due(engine, now);
        // 2. Run a step, or wait for the next arrival.
        if !engine.has_work() {
            if let Some(next) = run.next_due() {
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
        on_progress(&Progress { records: &run.records, steps: &run.steps, finished: run.finished, total: plan.len() });
    }
    let (records, steps) = run.finish();
    Ok((records, steps, saturation))
}

/// One run's state between steps: the records, what is not yet released, what is in flight.
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
    /// Requests not yet released, in plan order.
    unreleased: VecDeque<usize>,
    /// Engine id → index in the plan.
    by_engine_id: Vec<(u64, usize)>,
    /// A closed loop's requests in flight at most.
    closed_limit: usize,
    /// An open loop's `max_concurrency`: a request due while that many are in flight waits for one
    /// to finish; its clock still starts at its planned arrival, so the wait is in its TTFT.
    open_limit: usize,
    finished: usize,
    in_flight: usize,
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
        let spec = options.spec;
        Ok(Run {
            plan,
            options,
            sent_prompts: vec![Vec::new(); if turns.is_some() { plan.len() } else { 0 }],
            output_ids: vec![Vec::new(); if keep_ids { plan.len() } else { 0 }],
            turns,
            prompts,
            records,
            steps: Vec::new(),
            unreleased: (0..plan.len()).collect(),
            by_engine_id: Vec::new(),
            closed_limit: match spec.arrival {
                Arrival::Sequential => 1,
                Arrival::Concurrency => spec.concurrency,
                _ => usize::MAX,
            },
            open_limit: spec.max_concurrency.filter(|_| spec.arrival.open_loop()).unwrap_or(usize::MAX),
            finished: 0,
            in_flight: 0,
        })
    }

    /// The turn before request `i` in its conversation, and the think time after it.
    fn previous_turn(&self, i: usize) -> Option<(usize, f64)> {
        self.turns.as_ref().and_then(|t| t[i].prev.map(|prev| (prev, t[i].think_s)))
    }

    /// When request `i` is due, if it is by `now` (and a slot is free); an error when it never
    /// will be (the turn before it failed).
    fn due(&self, i: usize, now: f64) -> std::result::Result<Option<f64>, String> {
        match self.previous_turn(i) {
            Some((prev, think_s)) => match (&self.records[prev].error, self.records[prev].finish_s) {
                (Some(_), _) => Err("the turn before it failed".to_string()),
                (None, Some(done)) => Ok((done + think_s <= now).then_some(done + think_s)),
                (None, None) => Ok(None),
            },
            None => Ok(match self.plan[i].arrival_s {
                Some(a) => (a <= now && self.in_flight < self.open_limit).then_some(a),
                None => (self.in_flight < self.closed_limit).then_some(now),
            }),
        }
    }

    /// Submits every request due by `now`, in plan order. Without conversations, what is due is a
    /// prefix of the rest (open-loop arrivals in time order; a closed loop's next when a slot is
    /// free): stop at the first not due. With them, a later turn waits for its own conversation:
    /// look at every one.
    fn release_due<X: Executor>(&mut self, engine: &mut Engine<X>, now: f64) {
        let mut k = 0;
        while k < self.unreleased.len() {
            let i = self.unreleased[k];
            let arrival_s = match self.due(i, now) {
                Ok(Some(arrival_s)) => arrival_s,
                Ok(None) if self.turns.is_some() => {
                    k += 1;
                    continue;
                }
                Ok(None) => break,
                Err(why) => {
                    self.unreleased.remove(k);
                    (self.records[i].arrival_s, self.records[i].error) = (now, Some(why));
                    self.finished += 1;
                    continue;
                }
            };
            self.unreleased.remove(k);
            self.submit(engine, i, arrival_s);
        }
    }

    /// Submits request `i`, due at `arrival_s`: a later turn with its conversation's history.
    fn submit<X: Executor>(&mut self, engine: &mut Engine<X>, i: usize, arrival_s: f64) {
        let prompt = match self.previous_turn(i) {
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
                self.in_flight += 1;
            }
            Err(e) => {
                self.records[i].error = Some(e.to_string());
                self.finished += 1;
            }
        }
    }

    /// The next time something is due: an arrival, or a finished turn's think time.
    fn next_due(&self) -> Option<f64> {
        self.unreleased
            .iter()
            .filter_map(|&i| match self.previous_turn(i) {
                Some((prev, think_s)) => self.records[prev].finish_s.map(|done| done + think_s),
                None => self.plan[i].arrival_s,
            })
            .reduce(f64::min)
    }

    /// Records a step's events and its sample, on the run's clock (`t0` is its start).
    fn record_step(&mut self, events: &[Event], stats: Option<&StepStats>, t0: f64) {
        for e in events {
            let Some(&(_, i)) = self.by_engine_id.iter().find(|(eid, _)| *eid == e.id) else { continue };
            if record_event(&mut self.records[i], &e.kind, e.t_s - t0, self.output_ids.get_mut(i), TokenTimes::Every) {
                self.finished += 1;
                self.in_flight -= 1;
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

    /// Cancels what is in flight (the run was stopped, or saturated).
    fn cancel_in_flight<X: Executor>(&mut self, engine: &mut Engine<X>) {
        for &(eid, i) in &self.by_engine_id {
            if self.records[i].finish_s.is_none() && engine.cancel(eid) {
                self.records[i].error = Some("cancelled".into());
            }
        }
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
