//! The capacity planner: the engine's own batcher on a virtual clock, checked against hand-computed
//! timelines; a cost model fitted on a simulated run's steps recovers the model that made them and
//! replays the run; the GPU engine records each step's shape; `tokenmeter plan` end to end.

use crate::common;

use common::*;
use std::cell::Cell;
use std::rc::Rc;
use tokenmeter::bench::record::phases::Phases;
use tokenmeter::bench::run::driver;
use tokenmeter::bench::run::target::Listener;
use tokenmeter::bench::run::{launch::EngineTarget, session};
use tokenmeter::bench::{self, Arrival, LenRange, RunConfig, SessionSpec, WorkloadSpec};
use tokenmeter::engine::forward::EngineLimits;
use tokenmeter::engine::{Engine, EngineOptions, SamplingParams, Speculation, StepShape};
use tokenmeter::model::Qwen3Config;
use tokenmeter::planner::{self, CostModel, SimExecutor};

pub(crate) fn cost(step_s: f64, token_s: f64, logit_row_s: f64, attended_key_s: f64) -> CostModel {
    CostModel {
        step_s,
        token_s,
        logit_row_s,
        attended_key_s,
        layer_pass_s: [0.0; 5],
        lm_head_pass_s: [0.0; 5],
        matmuls: None,
        source: "test".into(),
        steps: 0,
        held_back: 0,
        held_back_median_error: 0.0,
        held_back_p90_error: 0.0,
    }
}

pub(crate) fn limits(max_seqs: usize, overlap: bool) -> EngineLimits {
    EngineLimits {
        max_batched_tokens: 512,
        max_seqs,
        block_size: 16,
        num_blocks: 2048,
        max_blocks_per_seq: 40960 / 16,
        speculation: Speculation::Off,
        max_logit_rows: max_seqs,
        prefix_cache: false,
        overlap,
    }
}

pub(crate) fn sim(cost: CostModel, limits: EngineLimits) -> Engine<SimExecutor> {
    let cfg = Qwen3Config::preset("qwen3-0.6b").unwrap();
    Engine::new(SimExecutor::new(cfg, limits, cost, RunConfig::default()))
}

pub(crate) fn spec(rate: f64, num_requests: usize, input_len: LenRange, output_len: LenRange) -> WorkloadSpec {
    WorkloadSpec {
        cancel: None,
        arrival: Arrival::Poisson,
        rate,
        burstiness: 1.0,
        concurrency: 1,
        span: bench::ArrivalSpan::Drawn,
        num_requests,
        input_len,
        output_len,
        seed: 3,
        dataset: None,
        max_concurrency: None,
        saturation_stop: false,
        shared_prefix: None,
        conversations: None,
    }
}

/// Greedy, EOS ignored: every request runs to its output length.
pub(crate) fn greedy_options<'a>(
    spec: &'a WorkloadSpec,
    prompt: &'a dyn Fn(&bench::PlannedRequest) -> tokenmeter::Result<Vec<u32>>,
) -> driver::DriverOptions<'a> {
    driver::DriverOptions {
        spec,
        sampling: SamplingParams::default(),
        ignore_eos: true,
        prompt,
        think: None,
        decide: None,
    }
}

async fn drive(engine: &mut Engine<SimExecutor>, spec: &WorkloadSpec) -> Vec<bench::RequestRecord> {
    let plan = bench::plan(spec).unwrap();
    let prompt = |p: &bench::PlannedRequest| Ok(bench::random_prompt(spec.seed, p.id, p.prompt_len, 151_000));
    let options = greedy_options(spec, &prompt);
    driver::run(engine, &plan, &options, &mut |_| {}, &|| false).await.unwrap().0
}

/// Two requests at once, 16 prompt tokens and 8 output tokens each; 10 ms a step + 1 ms a
/// token: the prefill of both (32 tokens) takes 42 ms, each decode of both 12 ms. So TTFT 42 ms,
/// token k at 42 + 12 (k − 1) ms, E2E 126 ms — with CPU/GPU overlap (the next step queued
/// behind the one running) and without.
#[test]
fn the_virtual_clock_times_steps_by_the_cost_model() {
    for overlap in [false, true] {
        let mut engine = sim(cost(0.010, 0.001, 0.0, 0.0), limits(16, overlap));
        let fixed = |n| LenRange { min: n, max: n };
        let records = pollster::block_on(drive(&mut engine, &spec(f64::INFINITY, 2, fixed(16), fixed(8))));
        for r in &records {
            assert_eq!(r.arrival_s, 0.0);
            let want: Vec<f64> = (0..8).map(|k| 0.042 + 0.012 * k as f64).collect();
            assert_eq!(r.token_times_s.len(), 8, "overlap {overlap}: {r:?}");
            for (got, want) in r.token_times_s.iter().zip(&want) {
                assert!(
                    (got - want).abs() < 1e-12,
                    "overlap {overlap}: tokens at {:?}, want {want:?}",
                    r.token_times_s
                );
            }
            assert!((r.e2e_s().unwrap() - 0.126).abs() < 1e-12 && (r.tpot_s().unwrap() - 0.012).abs() < 1e-12);
        }
        assert_eq!(engine.overlapped_steps() > 0, overlap);
    }
    // One request, then a second 5 ms later, which waits for the first's prefill (10 + 16 ms):
    // it is scheduled at that step's end, and prefilled beside the first's decode.
    // The clock far from 0 (a session's later rate): an arrival computed as start + offset
    // must still come due (it once rounded an ulp short, and the driver slept by 0 forever).
    let mut engine = sim(cost(0.010, 0.001, 0.0, 0.0), limits(16, false));
    pollster::block_on(tokenmeter::engine::Executor::sleep_s(&engine.model, 1_234.567_891));
    let fixed = |n| LenRange { min: n, max: n };
    let mut two = spec(1.0, 2, fixed(16), fixed(2));
    two.arrival = Arrival::Constant;
    two.rate = 200.0; // arrivals 5 ms apart
    let records = pollster::block_on(drive(&mut engine, &two));
    let arrivals: Vec<f64> = records.iter().map(|r| r.arrival_s).collect();
    assert!((arrivals[1] - arrivals[0] - 0.005).abs() < 1e-12, "{arrivals:?}");
    // The first: prefill 26 ms; then its decode with the second's prefill (1 + 16 tokens): 27 ms.
    // Requests 100 ms apart, each done in 26 + 11 ms: the engine idles until each arrival.
    let mut apart = spec(10.0, 4, fixed(16), fixed(2));
    apart.arrival = Arrival::Constant;
    let spaced = pollster::block_on(drive(&mut engine, &apart));
    for r in &spaced {
        assert!((r.e2e_s().unwrap() - 0.037).abs() < 1e-9, "{r:?}");
    }
    let first = &records[0];
    assert!((first.first_token_s.unwrap() - arrivals[0] - 0.026).abs() < 1e-12, "{first:?}");
    assert!((first.finish_s.unwrap() - first.first_token_s.unwrap() - 0.027).abs() < 1e-12, "{first:?}");
    // The second is scheduled when the first's prefill ends and gets its first token 27 ms later.
    let second = &records[1];
    assert!((second.scheduled_s.unwrap() - first.first_token_s.unwrap()).abs() < 1e-12, "{second:?}");
    assert!((second.first_token_s.unwrap() - first.finish_s.unwrap()).abs() < 1e-12, "{second:?}");
}

/// Eight requests at once, 16 prompt tokens and 2 output tokens each, over four replicas (10 ms a
/// step + 1 ms a token). Round-robin and least-outstanding give each replica two: a 32-token
/// prefill (42 ms), then one decode of both (12 ms). Prefix affinity sends each of two prefix
/// groups to one replica: four requests prefilled together (74 ms), or all eight (138 ms) when
/// both groups hash to the same one. One replica alone: 138 ms.
#[test]
fn a_fleet_routes_requests_by_its_router() {
    let fixed = |n| LenRange { min: n, max: n };
    let workload = spec(f64::INFINITY, 8, fixed(16), fixed(2));
    let plan = bench::plan(&workload).unwrap();
    // Prompts of 16 tokens, the same within a group (request id mod 2).
    let prompt = |p: &bench::PlannedRequest| Ok(vec![100 + (p.id % 2) as u32; p.prompt_len]);
    let options = greedy_options(&workload, &prompt);
    let ttfts = |replicas: usize, router: planner::Router| {
        let engines = (0..replicas).map(|_| sim(cost(0.010, 0.001, 0.0, 0.0), limits(16, true))).collect();
        let mut fleet = planner::Fleet::new(engines, router).unwrap();
        // Twice on the same fleet (as a session runs its warm-up, baseline and rates): the second
        // run's engine ids continue from the first's, and its timeline is the same.
        let runs: Vec<Vec<(u64, f64)>> = (0..2)
            .map(|_| {
                let records = pollster::block_on(fleet.run(&plan, &options, &prompt, &mut |_| {}, &|| false)).unwrap();
                assert!(records.iter().all(|r| r.succeeded() && r.output_len == 2), "{records:?}");
                records.iter().map(|r| (r.id, r.ttft_s().unwrap())).collect()
            })
            .collect();
        for ((id, a), (_, b)) in runs[0].iter().zip(&runs[1]) {
            assert!((a - b).abs() < 1e-9, "request {id}: TTFT {a} in the first run, {b} in the second");
        }
        runs[0].clone()
    };
    let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
    for router in [planner::Router::RoundRobin, planner::Router::LeastOutstanding] {
        let got = ttfts(4, router);
        assert!(got.iter().all(|&(_, t)| close(t, 0.042)), "{router:?}: {got:?}");
    }
    let got = ttfts(1, planner::Router::RoundRobin);
    assert!(got.iter().all(|&(_, t)| close(t, 0.138)), "one replica: {got:?}");
    let got = ttfts(4, planner::Router::PrefixAffinity);
    let group = |g: u64| got.iter().filter(|(id, _)| id % 2 == g).map(|&(_, t)| t).collect::<Vec<_>>();
    for g in 0..2 {
        let times = group(g);
        assert!(times.iter().all(|&t| close(t, times[0])), "a group's requests are batched together: {got:?}");
        assert!(close(times[0], 0.074) || close(times[0], 0.138), "{got:?}");
    }
    // Closed loops belong to one engine's driver.
    let closed = WorkloadSpec { arrival: Arrival::Sequential, ..workload.clone() };
    let mut fleet =
        planner::Fleet::new(vec![sim(cost(0.01, 0.0, 0.0, 0.0), limits(4, true))], planner::Router::RoundRobin)
            .unwrap();
    let options = driver::DriverOptions { spec: &closed, ..options };
    let e = pollster::block_on(fleet.run(&plan, &options, &prompt, &mut |_| {}, &|| false)).unwrap_err();
    assert!(e.to_string().contains("open-loop"), "{e}");
}

/// Replicas run apart (requests routed up front, each replica alone, on threads; for
/// least-outstanding, each replica's steps taken only when a finish may matter to the router)
/// take the steps they take on the shared timeline, one step at a time: the same records, time
/// for time, for every router, at a load where requests queue and batch. A summary keeps each
/// record's times and counts, without its tokens' times.
#[test]
fn replicas_apart_run_as_on_one_timeline() {
    let workload = spec(300.0, 600, LenRange { min: 16, max: 200 }, LenRange { min: 1, max: 40 });
    let plan = bench::plan(&workload).unwrap();
    let prompt = |p: &bench::PlannedRequest| Ok(vec![100 + (p.id % 5) as u32; p.prompt_len]);
    let options = greedy_options(&workload, &prompt);
    let run = |router: planner::Router, apart: bool, times: bench::TokenTimes| {
        let engines = (0..7).map(|_| sim(cost(0.004, 0.0002, 0.0005, 1e-7), limits(8, true))).collect();
        let mut fleet = planner::Fleet::new(engines, router).unwrap();
        fleet.apart = apart;
        fleet.token_times = times;
        pollster::block_on(fleet.run(&plan, &options, &prompt, &mut |_| {}, &|| false)).unwrap()
    };
    for router in [planner::Router::RoundRobin, planner::Router::PrefixAffinity] {
        let shared = run(router, false, bench::TokenTimes::Every);
        assert!(shared.iter().all(|r| r.succeeded()), "{router:?}");
        let batched = shared.iter().filter(|r| r.queue_s().unwrap() > 0.0).count();
        assert!(batched > 50, "{router:?}: {batched} requests waited; the load is too light to compare");
        assert_eq!(run(router, true, bench::TokenTimes::Every), shared, "{router:?}");
        let summary = run(router, true, bench::TokenTimes::Summary);
        for (s, r) in summary.iter().zip(&shared) {
            assert!(s.token_times_s.is_empty(), "{router:?}");
            assert_eq!(RequestRecordTimes::of(s), RequestRecordTimes::of(r), "{router:?}");
        }
    }
}

/// Least-outstanding routing with each replica's steps taken only when one of its requests may
/// have finished (`Fleet::run_lazy`) routes as the shared timeline does, step by step: long
/// outputs, so that most replicas sit out most arrivals, and the loads the router reads decide.
#[test]
fn least_outstanding_run_lazily_routes_as_on_one_timeline() {
    let workload = spec(40.0, 800, LenRange { min: 16, max: 64 }, LenRange { min: 30, max: 300 });
    let plan = bench::plan(&workload).unwrap();
    let prompt = |p: &bench::PlannedRequest| Ok(vec![7; p.prompt_len]);
    let options = greedy_options(&workload, &prompt);
    let run = |lazy: bool| {
        let engines = (0..12).map(|_| sim(cost(0.004, 0.0002, 0.0005, 1e-7), limits(8, true))).collect();
        let mut fleet = planner::Fleet::new(engines, planner::Router::LeastOutstanding).unwrap();
        fleet.apart = lazy;
        pollster::block_on(fleet.run(&plan, &options, &prompt, &mut |_| {}, &|| false)).unwrap()
    };
    let shared = run(false);
    assert!(shared.iter().all(|r| r.succeeded()));
    let busy = shared.iter().filter(|r| r.queue_s().unwrap() > 0.0).count();
    assert!(busy > 20, "{busy} requests waited: the replicas are too idle for the loads to decide");
    assert_eq!(run(true), shared);
}

/// An arrival a hair (0.1 ns) before a replica's step ends, with that replica's request one
/// token from its end: the replica, past the arrival once it has taken its step, can finish
/// nothing more before it (its bound on the next finish is its own clock less a hair). The lazy
/// run must go on to the next arrival rather than wake that replica again and again (it spun for
/// ever once, 12,216 requests into a plan of 100,000), and route as the shared timeline does.
#[test]
fn least_outstanding_lazily_never_wakes_a_replica_past_the_arrival_twice() {
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let workload = spec(1.0, 2, LenRange { min: 1, max: 1 }, LenRange { min: 2, max: 2 });
        let plan: Vec<bench::PlannedRequest> = [0.0, 1.0 - 1e-10]
            .iter()
            .enumerate()
            .map(|(id, &a)| bench::PlannedRequest { id: id as u64, arrival_s: Some(a), prompt_len: 1, output_len: 2 })
            .collect();
        let prompt = |_: &bench::PlannedRequest| Ok(vec![7]);
        let options = greedy_options(&workload, &prompt);
        let run = |lazy: bool| {
            let engines = (0..2).map(|_| sim(cost(1.0, 0.0, 0.0, 0.0), limits(4, true))).collect();
            let mut fleet = planner::Fleet::new(engines, planner::Router::LeastOutstanding).unwrap();
            fleet.apart = lazy;
            pollster::block_on(fleet.run(&plan, &options, &prompt, &mut |_| {}, &|| false)).unwrap()
        };
        let _ = done.send((run(true), run(false)));
    });
    let (lazy, shared) = finished
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the lazy least-outstanding run did not end within a minute: it spins on a replica past the arrival");
    assert_eq!(lazy, shared);
    // The second request found the first still running (it ends at 2 s) and went to the other
    // replica: its first token one step after its arrival.
    assert_eq!(lazy[0].finish_s, Some(2.0), "{lazy:?}");
    assert!((lazy[1].first_token_s.unwrap() - 2.0).abs() < 1e-6, "{lazy:?}");
}

/// A request that finds its replica idle is scheduled at its arrival: a queue time of exactly
/// 0, whatever the replicas' clocks read at the run's start (here 0.2 s, after earlier work:
/// 0.2 + 0.1 − 0.2 is not 0.1 in floating point, and a report's mean queue once read "-0.00").
#[test]
fn a_request_at_an_idle_replica_waits_exactly_nothing() {
    use tokenmeter::engine::Executor;
    let workload = spec(1.0, 20, LenRange { min: 4, max: 4 }, LenRange { min: 2, max: 2 });
    let plan: Vec<bench::PlannedRequest> = (0..20)
        .map(|id| bench::PlannedRequest { id, arrival_s: Some(0.1 + 0.7 * id as f64), prompt_len: 4, output_len: 2 })
        .collect();
    let prompt = |_: &bench::PlannedRequest| Ok(vec![7; 4]);
    let options = greedy_options(&workload, &prompt);
    for router in [planner::Router::RoundRobin, planner::Router::LeastOutstanding] {
        for apart in [true, false] {
            let engines: Vec<_> = (0..2)
                .map(|_| {
                    let engine = sim(cost(0.01, 0.0, 0.0, 0.0), limits(4, true));
                    pollster::block_on(engine.model.sleep_s(0.2));
                    engine
                })
                .collect();
            let mut fleet = planner::Fleet::new(engines, router).unwrap();
            fleet.apart = apart;
            let records = pollster::block_on(fleet.run(&plan, &options, &prompt, &mut |_| {}, &|| false)).unwrap();
            let queues: Vec<f64> = records.iter().map(|r| r.queue_s().unwrap()).collect();
            assert!(queues.iter().all(|&q| q == 0.0), "{router:?}, apart {apart}: queue times {queues:?}");
        }
    }
}

/// What a summary keeps of a record.
#[derive(Debug, PartialEq)]
struct RequestRecordTimes(f64, Option<f64>, Option<f64>, Option<f64>, usize);

impl RequestRecordTimes {
    fn of(r: &bench::RequestRecord) -> Self {
        RequestRecordTimes(r.arrival_s, r.scheduled_s, r.first_token_s, r.finish_s, r.output_len)
    }
}

/// The planner's scheduler is the engine's: with every request there at once (nothing depends on
/// timing), the GPU engine on the tiny fixture and the simulated one with its limits run the same
/// steps, shape for shape, under each policy — and the policies' steps differ.
#[test]
fn the_plan_schedules_as_the_engine_does() {
    use tokenmeter::engine::{Order, Policy};
    let workload = spec(f64::INFINITY, 6, LenRange { min: 20, max: 100 }, LenRange { min: 5, max: 12 });
    let plan = bench::plan(&workload).unwrap();
    let prompt = |p: &bench::PlannedRequest| Ok(bench::random_prompt(workload.seed, p.id, p.prompt_len, 512));
    let options = greedy_options(&workload, &prompt);
    let policies = [
        Policy::default(),
        Policy { order: Order::DecodeFirst, chunked_prefill: true, prefill_chunk: Some(16) },
        Policy { order: Order::PrefillFirst, chunked_prefill: false, prefill_chunk: None },
    ];
    let mut schedules = Vec::new();
    pollster::block_on(async {
        let mut gpu =
            engine("tiny-gqa-tied", EngineOptions { max_seqs: 4, max_batched_tokens: 128, ..Default::default() }).await;
        let limits = gpu.model.limits.clone();
        for policy in policies {
            gpu.set_policy(policy).unwrap();
            let (_, gpu_steps) = driver::run(&mut gpu, &plan, &options, &mut |_| {}, &|| false).await.unwrap();
            let mut planned = Engine::new(SimExecutor::new(
                gpu.model.cfg.clone(),
                limits.clone(),
                cost(0.01, 1e-4, 1e-4, 1e-7),
                RunConfig::default(),
            ));
            planned.set_policy(policy).unwrap();
            let (_, sim_steps) = driver::run(&mut planned, &plan, &options, &mut |_| {}, &|| false).await.unwrap();
            let shapes = |steps: &[bench::StepSample]| steps.iter().map(|s| s.shape.unwrap()).collect::<Vec<_>>();
            assert_eq!(shapes(&sim_steps), shapes(&gpu_steps), "{policy:?}");
            schedules.push(shapes(&gpu_steps));
        }
    });
    assert!(schedules[0] != schedules[1] && schedules[0] != schedules[2] && schedules[1] != schedules[2]);
}

fn quiet() -> Listener {
    Rc::new(|_| {})
}

pub(crate) async fn session_on(engine: &mut Engine<SimExecutor>, spec: &WorkloadSpec) -> bench::BenchResult {
    let prompt = |p: &bench::PlannedRequest| Ok(bench::random_prompt(spec.seed, p.id, p.prompt_len, 151_000));
    let mut target = EngineTarget::new(
        engine,
        prompt,
        RunConfig { target: "local".into(), model: Some("qwen3-0.6b".into()), ..RunConfig::default() },
        None,
    );
    let session = SessionSpec {
        size_rate: false,
        spec,
        rates: &[spec.rate],
        slo: None,
        slo_text: None,
        lang: bench::Lang::En,
        baseline: false,
        ignore_eos: true,
        cost_per_hour: None,
        phases: Phases::default(),
        criteria: Default::default(),
    };
    let cancel = Rc::new(Cell::new(false));
    session::run(&mut target, &session, &quiet(), &cancel).await.unwrap().remove(0)
}

/// A run timed by a known cost model, as if measured: the model fitted on its steps is that
/// model, and replaying the workload on it predicts the run.
#[test]
fn a_cost_model_fitted_on_a_runs_steps_replays_the_run() {
    let truth = cost(0.005, 1e-4, 2e-4, 1e-8);
    let workload = spec(20.0, 40, LenRange { min: 16, max: 400 }, LenRange { min: 4, max: 40 });
    let measured = pollster::block_on(session_on(&mut sim(truth.clone(), limits(8, true)), &workload));
    assert!(measured.config.simulated.is_some(), "the record says it was simulated");
    // A simulated run is not something to fit on...
    let e = planner::measured_steps(std::slice::from_ref(&measured), "sim.json").unwrap_err().to_string();
    assert!(e.contains("simulated"), "{e}");
    // ...so it is dressed as a measured one.
    let mut as_measured = measured.clone();
    as_measured.config.simulated = None;
    let steps = planner::measured_steps(std::slice::from_ref(&as_measured), "run.json").unwrap();
    assert_eq!(steps.len(), measured.steps.len());
    assert!(steps.len() > 50, "{} steps", steps.len());
    let fit = CostModel::fit(&steps, None, "run.json").unwrap();
    for (got, want) in [
        (fit.step_s, truth.step_s),
        (fit.token_s, truth.token_s),
        (fit.logit_row_s, truth.logit_row_s),
        (fit.attended_key_s, truth.attended_key_s),
    ] {
        assert!((got - want).abs() <= 1e-6 * want, "{}", fit.describe());
    }
    assert!(fit.held_back_p90_error < 1e-6, "{}", fit.describe());
    let predicted = pollster::block_on(session_on(&mut sim(fit, limits(8, true)), &workload));
    for row in planner::agreement(&measured.metrics, &predicted.metrics) {
        assert!(row.error().abs() < 1e-6 || row.measured == 0.0, "{row:?}");
    }
    // A cost model twice as slow is seen as such.
    let slow = cost(0.010, 2e-4, 4e-4, 2e-8);
    let predicted = pollster::block_on(session_on(&mut sim(slow, limits(8, true)), &workload));
    let rows = planner::agreement(&measured.metrics, &predicted.metrics);
    let tpot = rows.iter().find(|r| r.metric == "TPOT p50 (ms)").unwrap();
    assert!(tpot.error() > 0.9, "{tpot:?}");
}

/// The Plan card's capacity: a run timed by a known cost model, as if measured. Replayed on the
/// model fitted on its steps, the run's own rate predicts the run; the sustained rate is where the
/// predicted TTFT p99 crosses the SLO, between the two grid rates around it; replicas are the
/// target over it, rounded up.
#[test]
fn the_capacity_of_one_gpu_is_predicted_from_its_runs() {
    use tokenmeter::bench::verdict::sweep::SloCrossing;
    let truth = cost(0.005, 1e-4, 2e-4, 1e-8);
    let workload = spec(8.0, 40, LenRange { min: 16, max: 400 }, LenRange { min: 4, max: 40 });
    let mut measured = pollster::block_on(session_on(&mut sim(truth, limits(8, true)), &workload));
    measured.config.simulated = None;
    let cfg = Qwen3Config::preset("qwen3-0.6b").unwrap();
    let plan =
        |slo_ms: f64| pollster::block_on(planner::capacity::capacity(std::slice::from_ref(&measured), &cfg, slo_ms, 0));
    let loose = plan(1e9).unwrap();
    let at_run = loose.predicted.iter().find(|(rate, _)| *rate == 8.0).expect("the run's rate is on the grid");
    for row in planner::agreement(&measured.metrics, &at_run.1) {
        assert!(row.error().abs() < 1e-6 || row.measured == 0.0, "{row:?}");
    }
    assert_eq!(loose.crossing, SloCrossing::AboveHighest);
    assert_eq!((loose.requests, loose.measured_requests), (40, 40));
    let rates: Vec<f64> = loose.predicted.iter().map(|(rate, _)| *rate).collect();
    assert!(rates.len() >= 11 && rates[0] == 1.0 && *rates.last().unwrap() == 32.0, "{rates:?}");
    // An SLO halfway between two neighbours' TTFT p99, where it rises past the run's rate.
    let p99: Vec<f64> = loose.predicted.iter().map(|(_, m)| m.ttft_ms.p99).collect();
    let k = (0..p99.len() - 1).rev().find(|&k| p99[k + 1] > p99[k] * 1.5).expect("TTFT rises with the rate");
    let slo = (p99[k] + p99[k + 1]) / 2.0;
    let tight = plan(slo).unwrap();
    let sustained = tight.sustained().unwrap_or_else(|| panic!("{:?} for {slo} ms over {p99:?}", tight.crossing));
    assert!(sustained > rates[k] && sustained < rates[k + 1], "{sustained} between {} and {}", rates[k], rates[k + 1]);
    assert_eq!(tight.replicas_for(10.0 * sustained), Some(10));
    assert_eq!(tight.replicas_for(2.5 * sustained), Some(3));
    assert_eq!(plan(p99[0] / 2.0).unwrap().crossing, SloCrossing::BelowLowest);
    // Closed loops and servers are refused.
    let mut closed = measured.clone();
    closed.config.workload.as_mut().unwrap().arrival = Arrival::Concurrency;
    let refused = pollster::block_on(planner::capacity::capacity(&[closed], &cfg, 100.0, 0));
    assert!(refused.unwrap_err().to_string().contains("closed loop"));
}

/// The GPU engine records what each step computed: a 20-token prefill (keys 1 + … + 20 = 210)
/// with its one logit row, then a decode at position 20 (21 keys).
#[test]
fn the_engine_records_each_steps_shape() {
    pollster::block_on(async {
        let mut engine = engine("tiny-gqa-tied", EngineOptions { overlap: false, ..Default::default() }).await;
        engine.submit(greedy(&(1..=20).collect::<Vec<u32>>(), 3)).unwrap();
        let mut shapes = Vec::new();
        while engine.has_work() {
            if let (_, Some(stats)) = engine.step().await.unwrap() {
                shapes.push(stats.shape);
            }
        }
        let shape = |tokens, attended_keys| StepShape { tokens, sequences: 1, logit_rows: 1, attended_keys };
        assert_eq!(shapes, vec![shape(20, 210), shape(1, 21), shape(1, 22)]);
    });
}

/// `tokenmeter args…`: whether it succeeded, stdout, stderr.
fn tokenmeter(args: &[&str]) -> (bool, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tokenmeter")).args(args).output().unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.success(), text(&out.stdout), text(&out.stderr))
}

/// The workload of the runs `plan` is made from: 10 requests at 8 req/s, no baseline, and no check
/// before the run (`verify.rs` tests it; here it would cost seconds a run).
const MEASURED_WORKLOAD: [&str; 10] = [
    "--rate",
    "8",
    "--num-requests",
    "10",
    "--input-len",
    "16:64",
    "--output-len",
    "8:16",
    "--no-baseline",
    "--no-verify",
];

/// `tokenmeter plan --from` a measured run: `--replay` prints predicted beside measured and
/// writes a result labelled simulated; a bigger batch is planned without running it; a results
/// file without step shapes is refused with the reason.
#[test]
fn plan_from_a_measured_run() {
    let dir = std::env::temp_dir().join(format!("tokenmeter-plan-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = |name: &str| dir.join(name).to_str().unwrap().to_string();
    let (measured, planned, old_file) = (path("measured.json"), path("planned.json"), path("old.json"));
    let model = fixture_dir("tiny-gqa-tied");
    let workload = MEASURED_WORKLOAD;
    let (ok, _, stderr) =
        tokenmeter(&[&["bench", "--model", model.to_str().unwrap()][..], &workload, &["--json", &measured]].concat());
    assert!(ok, "{stderr}");
    let (ok, stdout, stderr_replay) = tokenmeter(&["plan", "--from", &measured, "--replay", "--json", &planned]);
    assert!(ok, "{stderr_replay}");
    assert!(stderr_replay.contains("cost model:") && stderr_replay.contains("held-back"), "{stderr_replay}");
    assert!(stdout.contains("predicted beside measured") && stdout.contains("TTFT p99"), "{stdout}");
    assert!(stdout.contains("SIMULATED by tokenmeter plan") || stderr_replay.contains("SIMULATED by tokenmeter plan"));
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&planned).unwrap()).unwrap();
    let config = &json["run_config"];
    assert!(config["simulated"]["steps"].as_u64().unwrap() >= tokenmeter::engine::cost::MIN_STEPS as u64, "{config}");
    assert_eq!(json["summary"]["completed"], 10, "{}", json["summary"]);
    // A batch the run never had, on the saved run's model (found from its record).
    let (ok, _, stderr) = tokenmeter(&[&["plan", "--from", &measured, "--max-batch", "32"][..], &workload].concat());
    assert!(ok, "{stderr}");
    // Four replicas behind a router.
    let fleet = path("fleet.json");
    let (ok, _, stderr) = tokenmeter(
        &[
            &["plan", "--from", &measured, "--replicas", "4", "--router", "round-robin", "--json", &fleet][..],
            &workload,
        ]
        .concat(),
    );
    assert!(ok, "{stderr}");
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&fleet).unwrap()).unwrap();
    assert_eq!((&json["run_config"]["gpus"], &json["run_config"]["router"]), (&4.into(), &"round-robin".into()));
    assert_eq!(json["summary"]["completed"], 10, "{}", json["summary"]);
    cli::expect_error(&["plan", "--from", &measured, "--replicas", "2", "--router", "random"], "--router");
    // The fewest replicas for a rate under SLOs: that many meet them, one fewer does not. The rate
    // is twice what one replica could serve if it did nothing but its requests' tokens and logit
    // rows (52 tokens and 12 rows a request on average, at the fitted costs): beyond one replica
    // on any machine, however fast.
    let fitted = |unit: &str| -> f64 {
        let at = stderr_replay.find(unit).unwrap_or_else(|| panic!("no '{unit}' in {stderr_replay}"));
        stderr_replay[..at].rsplit(' ').nth(1).unwrap().parse().unwrap()
    };
    let service_us = 52.0 * fitted("µs a token") + 12.0 * fitted("µs a logit row");
    let rate = format!("{:.0}", 2e6 / service_us);
    let found = path("found.json");
    let load = ["--rate", &rate, "--num-requests", "200", "--slo", "ttft_ms=300", "--json", &found];
    let (ok, _, stderr) =
        tokenmeter(&[&["plan", "--from", &measured, "--find-replicas"][..], &workload[4..], &load].concat());
    assert!(ok, "{stderr}");
    let tried: std::collections::HashMap<usize, f64> = stderr
        .lines()
        .filter_map(|l| {
            let (n, rest) = l.split_once(" replica")?;
            let pct = rest.split_once(": ")?.1.split_once('%')?.0;
            Some((n.parse().ok()?, pct.parse().ok()?))
        })
        .collect();
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&found).unwrap()).unwrap();
    let n = json["run_config"]["gpus"].as_u64().unwrap() as usize;
    let fewest = format!("fewest replicas for {rate} req/s with 99.0% within the SLO: {n} ");
    assert!(stderr.contains(&fewest), "{stderr}");
    assert!(tried[&n] >= 99.0 && json["summary"]["slo_attainment"].as_f64().unwrap() >= 0.99, "{stderr}");
    assert!(n == 1 || tried[&(n - 1)] < 99.0, "{stderr}");
    assert!(n > 1, "{rate} req/s is beyond one replica of the tiny model on this adapter: {stderr}");
    // Steps without shapes (a result saved before they were recorded) are refused, with why.
    let mut old: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&measured).unwrap()).unwrap();
    for step in old["steps"].as_array_mut().unwrap() {
        step.as_object_mut().unwrap().remove("shape");
    }
    std::fs::write(&old_file, old.to_string()).unwrap();
    cli::expect_error(&["plan", "--from", &old_file], "records each step's shape");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `tokenmeter plan --calibrate`: the cost model fitted on a designed set of steps run now on this
/// adapter (decode batches 1, 2, 4 at contexts 16 and 256, and beside a long prefill; prefills to
/// the step's budget), and the
/// plan recorded as simulated on it. It takes the place of `--from`, not both.
#[test]
fn plan_calibrated_now() {
    let dir = std::env::temp_dir().join(format!("tokenmeter-calibrate-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("calibrated.json").to_str().unwrap().to_string();
    let model = fixture_dir("tiny-gqa-tied");
    let model = model.to_str().unwrap();
    let engine = ["--max-batch", "4", "--max-batched-tokens", "64"];
    let workload = MEASURED_WORKLOAD;
    let (ok, _, stderr) =
        tokenmeter(&[&["plan", "--calibrate", "--model", model][..], &engine, &workload, &["--json", &out]].concat());
    assert!(ok, "{stderr}");
    assert!(
        stderr
            .contains("calibrating: decode batches [1, 2, 4] at contexts [16, 256], 32 steps each; prefills [16, 64]"),
        "{stderr}"
    );
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let config = &json["run_config"];
    let simulated = &config["simulated"];
    assert!(simulated["source"].as_str().unwrap().starts_with("a calibration on "), "{simulated}");
    // Two contexts x three batches and three batches beside a long prefill (each at least its 8
    // decode steps), and two prefills.
    assert!(simulated["steps"].as_u64().unwrap() >= 9 * 8 + 2, "{simulated}");
    for term in ["step_s", "token_s", "logit_row_s", "attended_key_s"] {
        let v = simulated[term].as_f64().unwrap();
        assert!(v.is_finite() && v >= 0.0, "{term}: {simulated}");
    }
    assert!(!config["adapter"]["name"].as_str().unwrap().is_empty() && config["kernels"].is_object(), "{config}");
    assert_eq!(config["engine"]["max_seqs"], 4, "{config}");
    assert_eq!(json["summary"]["completed"], 10, "{}", json["summary"]);
    cli::expect_error(&["plan", "--calibrate", "--from", &out], "--from");
    cli::expect_error(&["plan", "--replay", "--calibrate"], "--calibrate");
    cli::expect_error(&["plan", "--rate", "1"], "--calibrate");
    let _ = std::fs::remove_dir_all(&dir);
}
