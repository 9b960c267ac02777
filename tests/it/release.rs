//! One release loop: the engine's driver (on the capacity planner's virtual clock) and the
//! servers' arrival loop (on a simulated server's) release the same plan alike — Poisson arrivals
//! under a `max_concurrency` cap, two-turn conversations — when every request takes the same time
//! on both. Both follow `bench::run::release`; this holds them to it from the outside.

use crate::planner::{cost, greedy_options, limits, sim, spec};
use tokenmeter::bench::run::driver;
use tokenmeter::bench::run::release::Pace;
use tokenmeter::bench::traffic::workload::{conversation_turns, Conversations};
use tokenmeter::bench::{self, LenRange, PlannedRequest, WorkloadSpec};
use tokenmeter::remote::simulated::SimulatedServer;
use tokenmeter::remote::{dispatch, turn_requests, Api, Prompt, RunOptions};

/// One engine step, whatever its shape: a power of two, so sums of steps are exact.
const STEP_S: f64 = 1.0 / 64.0;
/// Each request's output: a prefill and three decodes, so it takes 4 steps on the engine.
const OUTPUT_LEN: usize = 4;
const SERVICE_S: f64 = OUTPUT_LEN as f64 * STEP_S;

/// `(id, released at, clock start)` of each request, by release time, then id.
type Releases = Vec<(u64, f64, f64)>;

/// Poisson arrivals of two-turn conversations, `cap` requests in flight at most.
fn workload(rate: f64, cap: usize, think_time_s: f64) -> WorkloadSpec {
    let fixed = |n| LenRange { min: n, max: n };
    let mut spec = spec(rate, 40, fixed(16), fixed(OUTPUT_LEN));
    spec.max_concurrency = Some(cap);
    spec.conversations = Some(Conversations { turns: fixed(2), think_time_s, from_dataset: false });
    spec
}

fn by_release(mut releases: Releases) -> Releases {
    releases.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
    releases
}

/// Through the engine: every step takes [`STEP_S`]; a request is released at the start of the
/// step that schedules it.
fn engine_releases(spec: &WorkloadSpec, plan: &[PlannedRequest]) -> Releases {
    let mut engine = sim(cost(STEP_S, 0.0, 0.0, 0.0), limits(16, false));
    let prompt = |p: &PlannedRequest| Ok(bench::random_prompt(spec.seed, p.id, p.prompt_len, 151_000));
    let options = greedy_options(spec, &prompt);
    let (records, _) = pollster::block_on(driver::run(&mut engine, plan, &options, &mut |_| {}, &|| false)).unwrap();
    assert!(records.iter().all(|r| r.succeeded() && r.e2e_s().is_some()), "{records:?}");
    by_release(records.iter().map(|r| (r.id, r.scheduled_s.unwrap(), r.arrival_s)).collect())
}

/// Through a server that answers every request [`SERVICE_S`] after it is sent.
fn server_releases(spec: &WorkloadSpec, plan: &[PlannedRequest]) -> Releases {
    let turns = conversation_turns(spec).unwrap();
    let requests = turn_requests(plan, &turns, &|p| Ok(Prompt::Text(format!("p{}|", p.id)))).unwrap();
    let pace = Pace::of(spec);
    let options =
        RunOptions { closed_loop: pace.closed_loop, max_concurrency: pace.max_concurrency, ..RunOptions::default() };
    let server = SimulatedServer::new(|_| Some(SERVICE_S));
    let outcome =
        server.block_on(dispatch::run(&server, Api::Completions, &requests, &options, &mut |_, _| {}, &|| false));
    let records = outcome.records;
    assert!(records.iter().all(|r| r.succeeded()), "{records:?}");
    by_release(records.iter().map(|r| (r.id, r.sent_s.unwrap(), r.arrival_s)).collect())
}

fn assert_same(engine: &Releases, server: &Releases) {
    let same =
        |e: &(u64, f64, f64), s: &(u64, f64, f64)| e.0 == s.0 && (e.1 - s.1).abs() < 1e-9 && (e.2 - s.2).abs() < 1e-9;
    for (k, (e, s)) in engine.iter().zip(server).enumerate() {
        assert!(
            same(e, s),
            "release {k}: the engine released {e:?}, the server {s:?}\nengine: {engine:?}\nserver: {server:?}"
        );
    }
    assert_eq!(engine.len(), server.len());
}

/// The cap of 1 makes the engine idle at every release, so a request takes its 4 steps from its
/// release exactly as on the server, at any time: the plan's own Poisson arrivals and think times.
/// Later turns wait for the slot too, their clocks still starting at the end of the turn before
/// plus the think time.
#[test]
fn the_engine_and_a_server_release_a_capped_conversation_plan_alike() {
    let spec = workload(10.0, 1, 0.05);
    let plan = bench::plan(&spec).unwrap();
    let (engine, server) = (engine_releases(&spec, &plan), server_releases(&spec, &plan));
    assert_same(&engine, &server);
    let turns = conversation_turns(&spec).unwrap();
    let waited = |later: bool| {
        server.iter().any(|&(id, sent, arrival)| turns[id as usize].prev.is_some() == later && sent > arrival + 1e-9)
    };
    assert!(waited(false) && waited(true), "a first turn and a later one each waited for the slot: {server:?}");
}

/// Two slots: the engine batches, so a request takes its 4 steps from its release only when
/// released at a step's start; arrivals rounded to the step and no think time keep every release
/// there.
#[test]
fn the_engine_and_a_server_release_alike_with_two_slots_on_the_step_grid() {
    let spec = workload(24.0, 2, 0.0);
    let mut plan = bench::plan(&spec).unwrap();
    for p in &mut plan {
        p.arrival_s = p.arrival_s.map(|a| (a / STEP_S).round() * STEP_S);
    }
    let (engine, server) = (engine_releases(&spec, &plan), server_releases(&spec, &plan));
    assert_same(&engine, &server);
    let turns = conversation_turns(&spec).unwrap();
    assert!(
        server.iter().any(|&(id, sent, arrival)| turns[id as usize].prev.is_some() && sent > arrival + 1e-9),
        "a later turn waited for a slot: {server:?}"
    );
}
