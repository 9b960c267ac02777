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
use crate::bench::driver::{record_event, request, unsent_record, DriverOptions, Progress};
use crate::bench::session::{Listener, RunConfig, SessionEvent, Target};
use crate::bench::{PlannedRequest, RequestRecord, StepSample, WorkloadSpec};
use crate::engine::{Engine, Executor};
use crate::error::{Error, Result};
use std::cell::Cell;
use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, HashMap};
use std::rc::Rc;

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
    /// Round-robin's next replica.
    turn: usize,
}

impl Fleet {
    pub fn new(replicas: Vec<Engine<SimExecutor>>, router: Router) -> Result<Fleet> {
        if replicas.is_empty() {
            return Err(Error::Invalid("a fleet needs at least one replica".into()));
        }
        Ok(Fleet { replicas, router, turn: 0 })
    }

    /// The replica for a request with this prompt, given the replicas ordered by requests
    /// outstanding (then index).
    fn route(&mut self, prompt: &[u32], load: &BTreeSet<(usize, usize)>) -> usize {
        let n = self.replicas.len();
        match self.router {
            Router::RoundRobin => {
                self.turn = (self.turn + 1) % n;
                (self.turn + n - 1) % n
            }
            Router::LeastOutstanding => load.first().expect("replicas").1,
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

    /// Runs an open-loop plan through the fleet; the records, as [`crate::bench::driver::run`]
    /// makes them, with times from the run's start.
    pub async fn run(
        &mut self,
        plan: &[PlannedRequest],
        options: &DriverOptions<'_>,
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
            e.model.sleep_s(t0 - e.model.now_s()).await;
        }
        let mut records: Vec<RequestRecord> = plan.iter().map(unsent_record).collect();
        // Per replica: plan index by engine id (a replica's ids go on counting from its earlier
        // runs: the warm-up, the baseline, other rates).
        let mut owner: Vec<HashMap<u64, usize>> = vec![HashMap::new(); n];
        // Busy replicas by clock, earliest first (a clock is ≥ 0, so its bits order as it does);
        // each busy replica is in it once.
        let mut busy: BinaryHeap<Reverse<(u64, usize)>> = BinaryHeap::new();
        let mut queued = vec![false; n];
        // What the router knows at an arrival: requests sent less those finished by then. A
        // replica's clock may be past the arrival being routed, so finishes wait in `finishes`
        // until an arrival reaches their time; `load` orders replicas by what is outstanding.
        let mut outstanding = vec![0usize; n];
        let mut load: BTreeSet<(usize, usize)> = (0..n).map(|i| (0, i)).collect();
        let mut finishes: BinaryHeap<Reverse<(u64, usize)>> = BinaryHeap::new();
        let (mut next, mut finished) = (0usize, 0usize);
        let mut steps_since_progress = 0usize;
        while finished < plan.len() {
            if cancelled() {
                for r in records.iter_mut().filter(|r| r.finish_s.is_none() && r.arrival_s.is_finite()) {
                    r.error.get_or_insert_with(|| "cancelled".into());
                }
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
                    let prompt = (options.prompt)(p)?;
                    while let Some(&Reverse((_, i))) = finishes.peek().filter(|Reverse((t, _))| f64::from_bits(*t) <= a)
                    {
                        finishes.pop();
                        load.remove(&(outstanding[i], i));
                        outstanding[i] -= 1;
                        load.insert((outstanding[i], i));
                    }
                    let i = self.route(&prompt, &load);
                    let engine = &mut self.replicas[i];
                    if !engine.has_work() {
                        engine.model.sleep_s(t0 + a - engine.model.now_s()).await;
                    }
                    records[k].prompt_len = prompt.len();
                    records[k].arrival_s = a;
                    let req = request(p, prompt, options, engine.model.cfg());
                    match engine.submit(req) {
                        Ok(eid) => {
                            owner[i].insert(eid, k);
                            load.remove(&(outstanding[i], i));
                            outstanding[i] += 1;
                            load.insert((outstanding[i], i));
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
                        let Some(&k) = owner[i].get(&e.id) else { continue };
                        if record_event(&mut records[k], &e.kind, e.t_s - t0, None) {
                            finishes.push(Reverse(((e.t_s - t0).max(0.0).to_bits(), i)));
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

/// A fleet as a benchmark target: the session's warm-up, baseline, rates, summary and report over
/// [`Fleet::run`].
pub struct FleetTarget<'a> {
    pub fleet: &'a mut Fleet,
    pub prompt: &'a dyn Fn(&PlannedRequest) -> Result<Vec<u32>>,
    pub sampling: crate::engine::SamplingParams,
    /// The run record's target, model and prompts; the fleet adds the replicas' record.
    pub describe: RunConfig,
}

impl Target for FleetTarget<'_> {
    fn run_config(&self) -> RunConfig {
        use crate::bench::session::RecordedExecutor;
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
        let options = DriverOptions { spec, sampling: self.sampling, ignore_eos, prompt: self.prompt, think: None };
        let on_progress = &mut |p: &Progress| listener(SessionEvent::Progress(p));
        let records = self.fleet.run(plan, &options, on_progress, &|| cancel.get()).await?;
        Ok((records, Vec::new()))
    }
}
