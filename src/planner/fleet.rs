//! A fleet: N simulated replicas of the engine behind a router, on one virtual timeline.
//!
//! Each replica is an `Engine<SimExecutor>` with its own clock: the end of its last step. The
//! loop takes the earliest thing that happens next — the next arrival, or the step of the busy
//! replica whose clock is earliest — so every replica runs its own batcher at its own pace, and an
//! arrival is routed with what the router could know then. A request routed to a replica in the
//! middle of a step waits for the step's end (as on a real engine); one routed to an idle replica
//! starts at its arrival.
//!
//! Open-loop arrivals only (a closed loop's users and conversations belong to one engine's
//! driver); no steps are kept (they are per replica), so a fleet's results have no GPU-busy figure.

use super::SimExecutor;
use crate::bench::record::run_config::RunConfig;
use crate::bench::run::driver::{record_event, request, DriverOptions, Progress};
use crate::bench::run::target::{Listener, SessionEvent, Target};
use crate::bench::{PlannedRequest, RequestRecord, StepSample, TokenTimes, WorkloadSpec};
use crate::engine::{Engine, Executor};
use crate::error::{Error, Result};
use std::cell::Cell;
use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// How a request picks its replica.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Router {
    /// In turn.
    RoundRobin,
    /// The replica with the fewest requests sent and not finished at the arrival (ties: the
    /// lowest index).
    LeastOutstanding,
    /// By the prompt's first 64 tokens (a hash), so that prompts sharing a prefix meet its cached
    /// KV blocks on one replica (`--prefix-cache`).
    PrefixAffinity,
}

/// Tokens of the prompt that [`Router::PrefixAffinity`] hashes.
const AFFINITY_TOKENS: usize = 64;

impl Router {
    pub fn name(self) -> &'static str {
        match self {
            Router::RoundRobin => "round-robin",
            Router::LeastOutstanding => "least-outstanding",
            Router::PrefixAffinity => "prefix-affinity",
        }
    }
}

impl std::str::FromStr for Router {
    type Err = Error;

    fn from_str(s: &str) -> Result<Router> {
        [Router::RoundRobin, Router::LeastOutstanding, Router::PrefixAffinity]
            .into_iter()
            .find(|r| r.name() == s)
            .ok_or_else(|| {
                Error::Invalid(format!("--router {s:?}: expected round-robin, least-outstanding or prefix-affinity"))
            })
    }
}

pub struct Fleet {
    pub replicas: Vec<Engine<SimExecutor>>,
    pub router: Router,
    /// What each record keeps of its tokens' times (every one, or a summary at scale).
    pub token_times: TokenTimes,
    /// With a router that decides without the replicas' state, route every request up front and
    /// run each replica alone, on threads ([`Fleet::run_apart`]); false: every router on the
    /// shared timeline (what the tests check the replicas apart against). Default true.
    pub apart: bool,
    /// Round-robin's next replica.
    turn: usize,
}

impl Fleet {
    pub fn new(replicas: Vec<Engine<SimExecutor>>, router: Router) -> Result<Fleet> {
        if replicas.is_empty() {
            return Err(Error::Invalid("a fleet needs at least one replica".into()));
        }
        Ok(Fleet { replicas, router, token_times: TokenTimes::Every, apart: true, turn: 0 })
    }

    /// The replica for a request with this prompt, given what the router knows of the loads.
    fn route(&mut self, prompt: &[u32], loads: &Loads) -> usize {
        let n = self.replicas.len();
        match self.router {
            Router::RoundRobin => {
                self.turn = (self.turn + 1) % n;
                (self.turn + n - 1) % n
            }
            Router::LeastOutstanding => loads.least(),
            Router::PrefixAffinity => {
                // FNV-1a over the first tokens' bytes.
                let mut h: u64 = 0xcbf2_9ce4_8422_2325;
                for b in prompt.iter().take(AFFINITY_TOKENS).flat_map(|t| t.to_le_bytes()) {
                    h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
                }
                (h % n as u64) as usize
            }
        }
    }

    /// Runs an open-loop plan through the fleet; the records, as [`crate::bench::run::driver::run`]
    /// makes them, with times from the run's start.
    pub async fn run(
        &mut self,
        plan: &[PlannedRequest],
        options: &DriverOptions<'_>,
        prompt: &PromptFn<'_>,
        on_progress: &mut dyn FnMut(&Progress),
        cancelled: &dyn Fn() -> bool,
    ) -> Result<Vec<RequestRecord>> {
        if !options.spec.arrival.open_loop() || options.spec.conversations.is_some() {
            return Err(Error::Invalid(
                "a fleet plan takes open-loop arrivals (poisson, gamma, constant, a trace), without --turns".into(),
            ));
        }
        let n = self.replicas.len();
        // One start for every replica's clock.
        let t0 = self.replicas.iter().map(|e| e.model.now_s()).fold(0.0, f64::max);
        for e in &mut self.replicas {
            e.model.idle_until(t0);
        }
        if self.apart {
            return match self.router {
                Router::LeastOutstanding => self.run_lazy(t0, plan, options, prompt, on_progress, cancelled),
                _ => self.run_apart(t0, plan, options, prompt, on_progress, cancelled),
            };
        }
        let mut records: Vec<RequestRecord> = plan.iter().map(|p| RequestRecord::unsent(p.id, p.prompt_len)).collect();
        // Per replica: plan index by engine id (a replica's ids go on counting from its earlier
        // runs: the warm-up, the baseline, other rates).
        let mut owner: Vec<Owner> = vec![Owner::default(); n];
        // Busy replicas by clock, earliest first (a clock is ≥ 0, so its bits order as it does);
        // each busy replica is in it once.
        let mut busy: BinaryHeap<Reverse<(u64, usize)>> = BinaryHeap::new();
        let mut queued = vec![false; n];
        let mut loads = Loads::new(n);
        let (mut next, mut finished) = (0usize, 0usize);
        let mut steps_since_progress = 0usize;
        while finished < plan.len() {
            if cancelled() {
                mark_cancelled(&mut records);
                break;
            }
            let earliest = busy.peek().map(|&Reverse((clock, i))| (f64::from_bits(clock), i));
            let arrival = plan.get(next).map(|p| p.arrival_s.unwrap_or(0.0));
            // The arrival first when it is no later than the earliest busy replica's clock.
            let release = arrival.filter(|&a| earliest.is_none_or(|(clock, _)| t0 + a <= clock));
            match (release, earliest) {
                (Some(a), _) => {
                    let k = next;
                    next += 1;
                    let p = &plan[k];
                    let prompt = prompt(p)?;
                    loads.count_finishes_to(a);
                    let i = self.route(&prompt, &loads);
                    let engine = &mut self.replicas[i];
                    if !engine.has_work() {
                        engine.model.idle_until(t0 + a);
                    }
                    records[k].prompt_len = prompt.len();
                    records[k].arrival_s = on_clock(t0, a);
                    let req = request(p, prompt, options, engine.model.cfg());
                    match engine.submit(req) {
                        Ok(eid) => {
                            owner[i].submitted(eid, k);
                            loads.sent(i);
                            if !queued[i] {
                                queued[i] = true;
                                busy.push(Reverse((engine.model.now_s().to_bits(), i)));
                            }
                        }
                        Err(e) => {
                            records[k].error = Some(e.to_string());
                            finished += 1;
                        }
                    }
                }
                (None, Some((_, i))) => {
                    busy.pop();
                    let engine = &mut self.replicas[i];
                    let (events, _) = engine.step().await?;
                    for e in events {
                        let Some(k) = owner[i].get(e.id) else { continue };
                        if record_event(&mut records[k], &e.kind, e.t_s - t0, None, self.token_times) {
                            loads.finished_at(i, e.t_s - t0);
                            finished += 1;
                        }
                    }
                    if engine.has_work() {
                        busy.push(Reverse((engine.model.now_s().to_bits(), i)));
                    } else {
                        queued[i] = false;
                    }
                    steps_since_progress += 1;
                    if steps_since_progress >= 256 {
                        steps_since_progress = 0;
                        on_progress(&Progress { records: &records, steps: &[], finished, total: plan.len() });
                    }
                }
                (None, None) => break,
            }
        }
        on_progress(&Progress { records: &records, steps: &[], finished, total: plan.len() });
        Ok(records)
    }
}

impl Fleet {
    /// [`Fleet::run`] for a router that decides without the replicas' state (round-robin,
    /// prefix-affinity): each replica's requests are known up front, so each replica runs alone —
    /// the same steps, at the same virtual times, as on the shared timeline — and the replicas run
    /// on as many threads as the machine has. Progress reports counts only (no records until the
    /// end).
    fn run_apart(
        &mut self,
        t0: f64,
        plan: &[PlannedRequest],
        options: &DriverOptions<'_>,
        prompt: &PromptFn<'_>,
        on_progress: &mut dyn FnMut(&Progress),
        cancelled: &dyn Fn() -> bool,
    ) -> Result<Vec<RequestRecord>> {
        let n = self.replicas.len();
        let mut mine: Vec<Vec<usize>> = vec![Vec::new(); n];
        let none = Loads::new(0);
        for (k, p) in plan.iter().enumerate() {
            let i = match self.router {
                Router::PrefixAffinity => self.route(&prompt(p)?, &none),
                _ => self.route(&[], &none),
            };
            mine[i].push(k);
        }
        let shared = Shared {
            plan,
            spec: options.spec,
            sampling: options.sampling,
            ignore_eos: options.ignore_eos,
            prompt,
            times: self.token_times,
            t0,
            finished: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
        };
        let mut records: Vec<RequestRecord> = plan.iter().map(|p| RequestRecord::unsent(p.id, p.prompt_len)).collect();
        let mut replicas: Vec<(&mut Engine<SimExecutor>, &[usize])> =
            self.replicas.iter_mut().zip(&mine).map(|(e, m)| (e, m.as_slice())).collect();
        let results = shared.run_all(&mut replicas, cancelled, on_progress);
        for result in results {
            for (k, record) in result? {
                records[k] = record;
            }
        }
        if cancelled() || shared.stop.load(Ordering::Relaxed) {
            mark_cancelled(&mut records);
        }
        let finished = records.iter().filter(|r| r.finish_s.is_some() || r.error.is_some()).count();
        on_progress(&Progress { records: &records, steps: &[], finished, total: plan.len() });
        Ok(records)
    }
}

impl Fleet {
    /// [`Fleet::run`] for least-outstanding routing, with each replica's steps taken only when
    /// they can matter: at an arrival the router needs every replica's requests outstanding, and
    /// a replica none of whose requests can have finished by then (each output token is a step of
    /// at least [`SimExecutor::shortest_token_step_s`]) still has the count it had. So a replica
    /// runs its steps up to an arrival only when it may have finished a request by then, or when
    /// the request is routed to it; at the end every replica runs to its end. The steps, their
    /// virtual times and the routing are those of the shared timeline (a test checks the records
    /// are equal), and a replica takes its steps in runs, not one at a time between 1,000 others.
    fn run_lazy(
        &mut self,
        t0: f64,
        plan: &[PlannedRequest],
        options: &DriverOptions<'_>,
        prompt: &PromptFn<'_>,
        on_progress: &mut dyn FnMut(&Progress),
        cancelled: &dyn Fn() -> bool,
    ) -> Result<Vec<RequestRecord>> {
        let n = self.replicas.len();
        let mut lazy = Lazy {
            t0,
            times: self.token_times,
            records: plan.iter().map(|p| RequestRecord::unsent(p.id, p.prompt_len)).collect(),
            owner: vec![Owner::default(); n],
            loads: Loads::new(n),
            wake: BinaryHeap::new(),
            wake_at: vec![f64::INFINITY; n],
            finished: 0,
        };
        let total = plan.len();
        for (k, p) in plan.iter().enumerate() {
            if cancelled() {
                mark_cancelled(&mut lazy.records);
                on_progress(&Progress { records: &lazy.records, steps: &[], finished: lazy.finished, total });
                return Ok(lazy.records);
            }
            let a = p.arrival_s.unwrap_or(0.0);
            // Every replica that may have finished a request by `a` takes its steps up to it. One
            // already at or past `a` has nothing more to do before this arrival (a step starting
            // at `a` runs after it, as on the shared timeline), however early its bound says it
            // may finish (the bound is a hair early: with one token left it is its own clock): it
            // waits for a later arrival.
            let mut later = Vec::new();
            while let Some(&Reverse((bits, i))) = lazy.wake.peek().filter(|Reverse((t, _))| f64::from_bits(*t) <= a) {
                lazy.wake.pop();
                if lazy.wake_at[i].to_bits() != bits {
                    continue; // stale
                }
                if self.replicas[i].model.now_s() >= t0 + a {
                    later.push(Reverse((bits, i)));
                } else {
                    lazy.advance(i, a, &mut self.replicas[i])?;
                }
            }
            lazy.wake.extend(later);
            lazy.loads.count_finishes_to(a);
            let text = prompt(p)?;
            let i = self.route(&text, &lazy.loads);
            let engine = &mut self.replicas[i];
            lazy.advance(i, a, engine)?;
            if !engine.has_work() {
                engine.model.idle_until(t0 + a);
            }
            lazy.records[k].prompt_len = text.len();
            lazy.records[k].arrival_s = on_clock(t0, a);
            match engine.submit(request(p, text, options, engine.model.cfg())) {
                Ok(eid) => {
                    lazy.owner[i].submitted(eid, k);
                    lazy.loads.sent(i);
                }
                Err(e) => {
                    lazy.records[k].error = Some(e.to_string());
                    lazy.finished += 1;
                }
            }
            // Its new request may be the one to finish first (no steps: its clock is at `a`).
            lazy.advance(i, a, engine)?;
            if k % 1024 == 0 {
                on_progress(&Progress { records: &lazy.records, steps: &[], finished: lazy.finished, total });
            }
        }
        // No more arrivals: each replica runs to its end.
        for (i, engine) in self.replicas.iter_mut().enumerate() {
            if cancelled() {
                mark_cancelled(&mut lazy.records);
                break;
            }
            lazy.advance(i, f64::INFINITY, engine)?;
            on_progress(&Progress { records: &lazy.records, steps: &[], finished: lazy.finished, total });
        }
        on_progress(&Progress { records: &lazy.records, steps: &[], finished: lazy.finished, total });
        Ok(lazy.records)
    }
}

/// What a least-outstanding router knows at an arrival: each replica's requests sent less those
/// finished by then, in order (ties: the lowest index). A replica may have run past the arrival
/// being routed, so its finishes wait until an arrival reaches their time.
struct Loads {
    outstanding: Vec<usize>,
    order: BTreeSet<(usize, usize)>,
    /// Finishes (seconds from the run's start; ≥ 0, so their bits order as they do) not counted.
    finishes: BinaryHeap<Reverse<(u64, usize)>>,
}

impl Loads {
    fn new(replicas: usize) -> Loads {
        Loads {
            outstanding: vec![0; replicas],
            order: (0..replicas).map(|i| (0, i)).collect(),
            finishes: BinaryHeap::new(),
        }
    }

    /// The replica with the fewest requests outstanding.
    fn least(&self) -> usize {
        self.order.first().expect("replicas").1
    }

    /// A request sent to replica `i`.
    fn sent(&mut self, i: usize) {
        self.set(i, self.outstanding[i] + 1);
    }

    /// Replica `i` finished a request at `t_s`, counted off once an arrival reaches it.
    fn finished_at(&mut self, i: usize, t_s: f64) {
        self.finishes.push(Reverse((t_s.max(0.0).to_bits(), i)));
    }

    /// Counts off every finish up to `t_s`.
    fn count_finishes_to(&mut self, t_s: f64) {
        while let Some(&Reverse((_, i))) = self.finishes.peek().filter(|Reverse((t, _))| f64::from_bits(*t) <= t_s) {
            self.finishes.pop();
            self.set(i, self.outstanding[i] - 1);
        }
    }

    fn set(&mut self, i: usize, outstanding: usize) {
        self.order.remove(&(self.outstanding[i], i));
        self.outstanding[i] = outstanding;
        self.order.insert((outstanding, i));
    }
}

/// What [`Fleet::run_lazy`] keeps.
struct Lazy {
    t0: f64,
    times: TokenTimes,
    records: Vec<RequestRecord>,
    /// Per replica: plan index by engine id.
    owner: Vec<Owner>,
    loads: Loads,
    /// The earliest a replica's requests can finish (from the run's start), one entry per
    /// replica with work; an entry that no longer matches `wake_at` is stale.
    wake: BinaryHeap<Reverse<(u64, usize)>>,
    wake_at: Vec<f64>,
    finished: usize,
}

impl Lazy {
    /// Replica `i`'s steps that start before `until` (from the run's start), their events
    /// recorded; then when it can next finish a request.
    fn advance(&mut self, i: usize, until: f64, engine: &mut Engine<SimExecutor>) -> Result<()> {
        let t0 = self.t0;
        while engine.has_work() && engine.model.now_s() < t0 + until {
            let (events, _) = ready(engine.step())??;
            for e in events {
                let Some(k) = self.owner[i].get(e.id) else { continue };
                if record_event(&mut self.records[k], &e.kind, e.t_s - t0, None, self.times) {
                    self.loads.finished_at(i, e.t_s - t0);
                    self.finished += 1;
                }
            }
        }
        self.wake_at[i] = match engine.fewest_tokens_left() {
            Some(left) => {
                // A hair early, so that rounding never puts a possible finish before it.
                let step_s = engine.model.shortest_token_step_s() * (1.0 - 1e-9);
                (engine.model.now_s() - t0 + left.saturating_sub(1) as f64 * step_s - 1e-9).max(0.0)
            }
            None => f64::INFINITY,
        };
        if self.wake_at[i].is_finite() {
            self.wake.push(Reverse((self.wake_at[i].to_bits(), i)));
        }
        Ok(())
    }
}

/// An arrival `a` seconds after the run's start as the replicas' clocks read it, less the start:
/// the record's times are all `clock - t0`, so a request scheduled at its arrival has a queue time
/// of exactly 0 (not `(t0 + a) - t0 - a`, a rounding error either side of it).
fn on_clock(t0: f64, a: f64) -> f64 {
    (t0 + a) - t0
}

/// Which request (a plan index, or a position in a replica's own list) each of a replica's engine
/// ids is. The engine numbers the requests it accepts in turn, counting on from its earlier runs
/// (the warm-up, the baseline, other rates), so a request's place is its id less the first id
/// submitted here: no hashing on a path taken for every token.
#[derive(Clone, Default)]
struct Owner {
    first: Option<u64>,
    index: Vec<usize>,
}

impl Owner {
    fn submitted(&mut self, eid: u64, k: usize) {
        let first = *self.first.get_or_insert(eid);
        debug_assert_eq!(eid - first, self.index.len() as u64, "the engine numbers requests in turn");
        self.index.push(k);
    }

    fn get(&self, eid: u64) -> Option<usize> {
        self.first.and_then(|f| eid.checked_sub(f)).and_then(|i| self.index.get(i as usize)).copied()
    }
}

/// Requests sent and not finished when the run was cancelled fail as "cancelled".
fn mark_cancelled(records: &mut [RequestRecord]) {
    for r in records.iter_mut().filter(|r| r.finish_s.is_none() && r.arrival_s.is_finite()) {
        r.error.get_or_insert_with(|| "cancelled".into());
    }
}

/// A request's prompt, from any thread.
pub type PromptFn<'a> = dyn Fn(&PlannedRequest) -> Result<Vec<u32>> + Sync + 'a;

/// What every replica running alone reads.
struct Shared<'a> {
    plan: &'a [PlannedRequest],
    spec: &'a WorkloadSpec,
    sampling: crate::engine::SamplingParams,
    ignore_eos: bool,
    prompt: &'a PromptFn<'a>,
    times: TokenTimes,
    t0: f64,
    /// Requests finished, over all replicas (for progress).
    finished: AtomicUsize,
    /// Cancelled: every replica stops at its next step.
    stop: AtomicBool,
}

impl Shared<'_> {
    /// One replica alone with its requests (`mine`: plan indices, in arrival order), as the
    /// shared timeline runs it: before an arrival at `a`, the replica takes every step that
    /// starts before `a`; an arrival at an idle replica starts at its arrival time.
    fn replica_alone(&self, engine: &mut Engine<SimExecutor>, mine: &[usize]) -> Result<Vec<(usize, RequestRecord)>> {
        let mut records: Vec<(usize, RequestRecord)> =
            mine.iter().map(|&k| (k, RequestRecord::unsent(self.plan[k].id, self.plan[k].prompt_len))).collect();
        let mut owner = Owner::default();
        let step = |engine: &mut Engine<SimExecutor>, records: &mut Vec<(usize, RequestRecord)>, owner: &Owner| {
            let (events, _) = ready(engine.step())??;
            for e in events {
                let Some(j) = owner.get(e.id) else { continue };
                if record_event(&mut records[j].1, &e.kind, e.t_s - self.t0, None, self.times) {
                    self.finished.fetch_add(1, Ordering::Relaxed);
                }
            }
            Ok::<(), Error>(())
        };
        let options = DriverOptions {
            spec: self.spec,
            sampling: self.sampling,
            ignore_eos: self.ignore_eos,
            prompt: &|p| (self.prompt)(p),
            think: None,
            decide: None,
        };
        for (j, &k) in mine.iter().enumerate() {
            let p = &self.plan[k];
            let a = p.arrival_s.unwrap_or(0.0);
            while engine.has_work() && engine.model.now_s() < self.t0 + a {
                if self.stop.load(Ordering::Relaxed) {
                    return Ok(records);
                }
                step(engine, &mut records, &owner)?;
            }
            if !engine.has_work() {
                engine.model.idle_until(self.t0 + a);
            }
            let prompt = (self.prompt)(p)?;
            let r = &mut records[j].1;
            r.prompt_len = prompt.len();
            r.arrival_s = on_clock(self.t0, a);
            match engine.submit(request(p, prompt, &options, engine.model.cfg())) {
                Ok(eid) => owner.submitted(eid, j),
                Err(e) => {
                    r.error = Some(e.to_string());
                    self.finished.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        while engine.has_work() {
            if self.stop.load(Ordering::Relaxed) {
                break;
            }
            step(engine, &mut records, &owner)?;
        }
        Ok(records)
    }
}

impl Shared<'_> {
    /// Every replica alone, on as many threads as the machine has; progress as counts meanwhile.
    #[cfg(not(target_arch = "wasm32"))]
    fn run_all(
        &self,
        replicas: &mut [(&mut Engine<SimExecutor>, &[usize])],
        cancelled: &dyn Fn() -> bool,
        on_progress: &mut dyn FnMut(&Progress),
    ) -> Vec<Result<Vec<(usize, RequestRecord)>>> {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(replicas.len()).max(1);
        let per = replicas.len().div_ceil(threads);
        std::thread::scope(|scope| {
            let handles: Vec<_> = replicas
                .chunks_mut(per)
                .map(|chunk| {
                    scope.spawn(move || -> Result<Vec<(usize, RequestRecord)>> {
                        let mut all = Vec::new();
                        for (e, m) in chunk.iter_mut() {
                            all.extend(self.replica_alone(e, m)?);
                        }
                        Ok(all)
                    })
                })
                .collect();
            while !handles.iter().all(|h| h.is_finished()) {
                std::thread::sleep(std::time::Duration::from_millis(50));
                if cancelled() {
                    self.stop.store(true, Ordering::Relaxed);
                }
                let finished = self.finished.load(Ordering::Relaxed);
                on_progress(&Progress { records: &[], steps: &[], finished, total: self.plan.len() });
            }
            handles.into_iter().map(|h| h.join().expect("a replica's thread panicked")).collect()
        })
    }

    /// Every replica alone, one after another (the browser's engine is not `Send`; the page's
    /// thread has no other to share with).
    #[cfg(target_arch = "wasm32")]
    fn run_all(
        &self,
        replicas: &mut [(&mut Engine<SimExecutor>, &[usize])],
        _cancelled: &dyn Fn() -> bool,
        _on_progress: &mut dyn FnMut(&Progress),
    ) -> Vec<Result<Vec<(usize, RequestRecord)>>> {
        replicas.iter_mut().map(|(e, m)| self.replica_alone(e, m)).collect()
    }
}

/// The output of a future that never waits (the simulated executor's: its clock is virtual).
fn ready<F: std::future::Future>(future: F) -> Result<F::Output> {
    let mut future = std::pin::pin!(future);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match future.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(out) => Ok(out),
        std::task::Poll::Pending => {
            Err(Error::Invalid("a simulated step waited: the planner's clock is virtual".into()))
        }
    }
}

/// A fleet as a benchmark target: the session's warm-up, baseline, rates, summary and report over
/// [`Fleet::run`].
pub struct FleetTarget<'a> {
    pub fleet: &'a mut Fleet,
    pub prompt: &'a PromptFn<'a>,
    pub sampling: crate::engine::SamplingParams,
    /// The run record's target, model and prompts; the fleet adds the replicas' record.
    pub describe: RunConfig,
}

impl Target for FleetTarget<'_> {
    fn run_config(&self) -> RunConfig {
        use crate::bench::record::run_config::RecordedExecutor;
        let first = &self.fleet.replicas[0];
        RunConfig {
            engine: Some(first.model.limits().clone()),
            scheduler: Some(first.policy()),
            gpus: Some(self.fleet.replicas.len()),
            router: Some(self.fleet.router.name().to_string()),
            ..first.model.record(self.describe.clone())
        }
    }

    fn reports_steps(&self) -> bool {
        false
    }

    async fn run(
        &mut self,
        plan: &[PlannedRequest],
        spec: &WorkloadSpec,
        ignore_eos: bool,
        listener: &Listener,
        cancel: &Rc<Cell<bool>>,
    ) -> Result<(Vec<RequestRecord>, Vec<StepSample>)> {
        let options = DriverOptions {
            spec,
            sampling: self.sampling,
            ignore_eos,
            prompt: &|p| (self.prompt)(p),
            think: None,
            decide: None,
        };
        let on_progress = &mut |p: &Progress| listener(SessionEvent::Progress(p));
        let records = self.fleet.run(plan, &options, self.prompt, on_progress, &|| cancel.get()).await?;
        Ok((records, Vec::new()))
    }
}
