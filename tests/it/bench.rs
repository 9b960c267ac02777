//! The benchmark end to end on a fixture model: real arrivals into the real engine, then the
//! recorded timestamps are checked for consistency and the summary recomputed from them.

use crate::common;

use common::*;
use tokenmeter::bench::base::thinking::ThinkTags;
use tokenmeter::bench::run::driver;
use tokenmeter::bench::{self, Arrival, LenRange, WorkloadSpec};
use tokenmeter::engine::{Engine, EngineOptions, ForwardPass, SamplingParams};
use tokenmeter::model::checkpoint::Checkpoint;
use tokenmeter::model::source::DirStore;

async fn run(spec: &WorkloadSpec, max_seqs: usize) -> (Vec<bench::RequestRecord>, Vec<bench::StepSample>) {
    drive(&mut tiny_engine(max_seqs).await, spec).await
}

/// The tiny fixture's engine, `max_seqs` sequences a step.
pub(crate) async fn tiny_engine(max_seqs: usize) -> Engine {
    let store = DirStore::new(fixture_dir("tiny-gqa-tied")).unwrap();
    let ckpt = Checkpoint::open(&store).await.unwrap();
    let options = EngineOptions { max_seqs, ..Default::default() };
    Engine::new(ForwardPass::load(gpu(), &ckpt, &options, &mut |_, _| {}).await.unwrap())
}

/// `spec`'s plan through the driver on `engine`, greedy, ignoring EOS, random prompts.
pub(crate) async fn drive(
    engine: &mut Engine,
    spec: &WorkloadSpec,
) -> (Vec<bench::RequestRecord>, Vec<bench::StepSample>) {
    let plan = bench::plan(spec).unwrap();
    let prompt = |p: &bench::PlannedRequest| Ok(bench::random_prompt(spec.seed, p.id, p.prompt_len, 512));
    let options = driver::DriverOptions {
        decide: None,
        spec,
        sampling: SamplingParams::default(),
        ignore_eos: true,
        prompt: &prompt,
        think: None,
    };
    driver::run(engine, &plan, &options, &mut |_| {}, &|| false).await.unwrap()
}

fn spec(arrival: Arrival, rate: f64) -> WorkloadSpec {
    WorkloadSpec {
        cancel: None,
        arrival,
        rate,
        burstiness: 1.0,
        concurrency: 3,
        span: tokenmeter::bench::ArrivalSpan::Drawn,
        num_requests: 12,
        input_len: LenRange { min: 4, max: 40 },
        output_len: LenRange { min: 3, max: 12 },
        seed: 7,
        dataset: None,
        max_concurrency: None,
        saturation_stop: false,
        shared_prefix: None,
        conversations: None,
    }
}

#[test]
fn timestamps_are_consistent_and_the_summary_recomputes() {
    pollster::block_on(async {
        for s in [spec(Arrival::Poisson, 50.0), spec(Arrival::Concurrency, 1.0), spec(Arrival::Sequential, 1.0)] {
            let (records, steps) = run(&s, 16).await;
            let plan = bench::plan(&s).unwrap();
            for (r, p) in records.iter().zip(&plan) {
                assert!(r.error.is_none(), "{:?}", r.error);
                assert_eq!(r.token_times_s.len(), p.output_len, "one timestamp per output token");
                assert_eq!(r.output_len, p.output_len);
                assert!(r.token_times_s.windows(2).all(|w| w[0] <= w[1]), "non-decreasing");
                assert_eq!(r.first_token_s, r.token_times_s.first().copied());
                assert_eq!(r.finish_s, r.token_times_s.last().copied());
                let (arrival, scheduled, first) = (r.arrival_s, r.scheduled_s.unwrap(), r.first_token_s.unwrap());
                assert!(arrival <= scheduled + 1e-9 && scheduled <= first, "{arrival} {scheduled} {first}");
                if let Some(a) = p.arrival_s {
                    assert_eq!(a, r.arrival_s, "the clock starts at the planned arrival");
                }
            }
            let m = bench::summarize(&records, &steps, None, 0.25);
            let ttft: Vec<f64> = records.iter().map(|r| (r.first_token_s.unwrap() - r.arrival_s) * 1e3).collect();
            let mean = ttft.iter().sum::<f64>() / ttft.len() as f64;
            assert!((m.ttft_ms.mean - mean).abs() <= 0.01 * mean, "{} vs {mean}", m.ttft_ms.mean);
            let out: usize = records.iter().map(|r| r.output_len).sum();
            let end = records.iter().filter_map(|r| r.finish_s).fold(0.0, f64::max);
            assert!((m.output_throughput - out as f64 / end).abs() <= 0.01 * m.output_throughput);
            assert_eq!(m.completed, records.len());
        }
    });
}

#[test]
fn concurrent_decodes_overlap_when_the_batch_allows() {
    pollster::block_on(async {
        let s = spec(Arrival::Poisson, f64::INFINITY);
        let (batched, _) = run(&s, 16).await;
        let (serial, _) = run(&s, 1).await;
        let overlaps = |rs: &[bench::RequestRecord]| {
            rs.iter().any(|a| {
                rs.iter().any(|b| {
                    a.id != b.id
                        && a.first_token_s.unwrap() < b.finish_s.unwrap()
                        && b.first_token_s.unwrap() < a.finish_s.unwrap()
                })
            })
        };
        assert!(overlaps(&batched), "with max_batch 16 decode intervals overlap");
        assert!(!overlaps(&serial), "with max_batch 1 they cannot");
    });
}

/// One session over the engine: the baseline, one result per rate with its run record, events in
/// order, and a cancel during the first rate that ends the session after it.
#[test]
fn a_session_records_what_ran_and_stops_when_cancelled() {
    use std::cell::{Cell, RefCell};
    use std::rc::Rc;
    use tokenmeter::bench::run::target::{Listener, SessionEvent};
    use tokenmeter::bench::run::{launch::EngineTarget, session};
    use tokenmeter::bench::{Lang, RunConfig, SessionSpec};
    pollster::block_on(async {
        let store = DirStore::new(fixture_dir("tiny-gqa-tied")).unwrap();
        let ckpt = Checkpoint::open(&store).await.unwrap();
        let mut engine =
            Engine::new(ForwardPass::load(gpu(), &ckpt, &EngineOptions::default(), &mut |_, _| {}).await.unwrap());
        let workload = spec(Arrival::Poisson, 50.0);
        let prompt = |p: &bench::PlannedRequest| Ok(bench::random_prompt(workload.seed, p.id, p.prompt_len, 512));
        let mut target = EngineTarget::new(
            &mut engine,
            prompt,
            RunConfig { target: "local".into(), model: Some("tiny-gqa-tied".into()), ..RunConfig::default() },
            None,
        );
        let rates = [50.0, f64::INFINITY];
        let s = SessionSpec {
            size_rate: false,
            spec: &workload,
            rates: &rates,
            slo: None,
            slo_text: Some("ttft_ms=500"),
            lang: Lang::En,
            baseline: true,
            ignore_eos: true,
            cost_per_hour: None,
            phases: Default::default(),
            criteria: Default::default(),
        };
        let events = Rc::new(RefCell::new(Vec::new()));
        let log = events.clone();
        let listener: Listener = Rc::new(move |e| {
            log.borrow_mut().push(match e {
                SessionEvent::WarmedUp { requests, .. } => format!("warm-up {requests}"),
                SessionEvent::Baseline(b) => format!("baseline {} {}", b.ttft_ms > 0.0 && b.tpot_ms > 0.0, b.requests),
                SessionEvent::RateStarted { rate, requests } => format!("start {rate} {requests}"),
                SessionEvent::Progress(_) => "progress".into(),
                SessionEvent::RateDone { rate, result } => format!("done {rate} {}", result.requests.len()),
            })
        });
        let cancel = Rc::new(Cell::new(false));
        let results = session::run(&mut target, &s, &listener, &cancel).await.unwrap();
        assert_eq!(results.len(), 2);
        for (result, rate) in results.iter().zip(rates) {
            let rc = &result.config;
            assert_eq!(rc.target, "local");
            assert_eq!(rc.workload.as_ref().unwrap().rate, rate);
            assert_eq!(rc.slo.as_deref(), Some("ttft_ms=500"));
            assert_eq!(rc.adapter.as_ref().unwrap().name, gpu().adapter.name);
            assert_eq!(rc.kernels.as_ref().unwrap().family, gpu().kernel_family.name());
            assert!(rc.engine.as_ref().unwrap().max_seqs > 0 && rc.tool_version.is_some());
            assert!(result.baseline.is_some() && result.diagnosis.is_some());
            assert_eq!(result.metrics.completed, 12);
        }
        let events = events.borrow().clone();
        let order: Vec<&str> = events.iter().filter(|e| *e != "progress").map(String::as_str).collect();
        assert_eq!(order, ["warm-up 8", "baseline true 3", "start 50 12", "done 50 12", "start inf 12", "done inf 12"]);

        // Cancelled during the first rate: that rate's result holds what was sent, and no second.
        let cancel_now = cancel.clone();
        let listener: Listener = Rc::new(move |e| {
            if let SessionEvent::Progress(p) = e {
                if p.finished >= 2 {
                    cancel_now.set(true);
                }
            }
        });
        cancel.set(false);
        let results = session::run(&mut target, &s, &listener, &cancel).await.unwrap();
        assert_eq!(results.len(), 1);
        assert!(results[0].requests.iter().all(|r| r.arrival_s.is_finite()));
        assert!(results[0].metrics.completed < 12, "{} completed after the cancel", results[0].metrics.completed);
        // A user's stop: the requests in flight were cancelled by the user, and the run says so.
        let by_user = results[0].metrics.cancelled.get("user").copied().unwrap_or(0);
        let validity = results[0].validity();
        assert!(!validity.valid && validity.text(Lang::En).contains("stopped before it ended"), "{validity:?}");
        assert_eq!(results[0].metrics.failed, 0, "a stop fails nothing ({by_user} cancelled by the user)");

        // No rate given (the page's first run): one rate, the one the baseline alone sustains, in
        // the result and in the request recorded to run it again.
        cancel.set(false);
        let saved = bench::record::run_config::SavedRequest {
            command: "bench".into(),
            args: vec!["--num-requests".into(), "12".into()],
            dataset_sha256: None,
        };
        drop(target);
        let config = RunConfig { target: "local".into(), request: Some(saved), ..RunConfig::default() };
        let mut target = EngineTarget::new(&mut engine, prompt, config, None);
        let sized = SessionSpec { size_rate: true, ..s };
        let quiet: Listener = Rc::new(|_| {});
        let results = session::run(&mut target, &sized, &quiet, &cancel).await.unwrap();
        assert_eq!(results.len(), 1, "one rate, not the two given");
        let (rc, baseline) = (&results[0].config, results[0].baseline.as_ref().unwrap());
        let z = rc.sized_rate.expect("sized");
        assert_eq!(Some(z.alone_s), baseline.alone_s(workload.output_len.max));
        assert_eq!(rc.workload.as_ref().unwrap().rate, 1.0 / z.alone_s);
        let args = &rc.request.as_ref().unwrap().args;
        assert_eq!(args[2..], ["--rate".to_string(), z.text()], "{args:?}");
    });
}

/// The warm-up before the baseline takes every path the workload takes: no pipeline is used for
/// the first time (a driver's compilation, ~a second on llvmpipe) during the baseline or the run.
/// Structural, not timed: the device's count of pipelines ever recorded into a step
/// (`Gpu::pipelines_used`) must not change after the warm-up. On a device of its own, so that
/// other tests' dispatches do not count.
#[test]
fn no_pipeline_is_first_used_during_the_baseline_or_the_run() {
    use std::cell::RefCell;
    use std::rc::Rc;
    use std::sync::Arc;
    use tokenmeter::bench::run::target::{Listener, SessionEvent};
    use tokenmeter::bench::run::{launch::EngineTarget, session};
    use tokenmeter::bench::{Lang, RunConfig, SessionSpec};
    use tokenmeter::gpu::Gpu;
    pollster::block_on(async {
        let own = Arc::new(Gpu::new().await.unwrap());
        let store = DirStore::new(fixture_dir("tiny-gqa-tied")).unwrap();
        let ckpt = Checkpoint::open(&store).await.unwrap();
        let options = EngineOptions { max_seqs: 8, max_batched_tokens: 96, ..EngineOptions::default() };
        let mut engine = Engine::new(ForwardPass::load(own.clone(), &ckpt, &options, &mut |_, _| {}).await.unwrap());
        let after_load = own.pipelines_used();
        // Prompts of 3 to 150 tokens (chunked past 96), outputs of 1 to 24, arriving fast enough
        // that steps mix prefills and decodes of many sizes.
        let workload = bench::WorkloadSpec {
            num_requests: 24,
            input_len: LenRange { min: 3, max: 150 },
            output_len: LenRange { min: 1, max: 24 },
            ..spec(Arrival::Poisson, 40.0)
        };
        let prompt = |p: &bench::PlannedRequest| Ok(bench::random_prompt(workload.seed, p.id, p.prompt_len, 512));
        let mut target =
            EngineTarget::new(&mut engine, prompt, RunConfig { target: "local".into(), ..RunConfig::default() }, None);
        let s = SessionSpec {
            size_rate: false,
            spec: &workload,
            rates: &[40.0],
            slo: None,
            slo_text: None,
            lang: Lang::En,
            baseline: true,
            ignore_eos: false,
            cost_per_hour: None,
            phases: Default::default(),
            criteria: Default::default(),
        };
        let seen = Rc::new(RefCell::new(Vec::new()));
        let log = seen.clone();
        let gpu = own.clone();
        let listener: Listener = Rc::new(move |e| match e {
            SessionEvent::WarmedUp { .. } => log.borrow_mut().push(("warmed up", gpu.pipelines_used())),
            SessionEvent::Baseline(_) => log.borrow_mut().push(("baseline", gpu.pipelines_used())),
            SessionEvent::RateDone { .. } => log.borrow_mut().push(("run", gpu.pipelines_used())),
            _ => {}
        });
        let cancel = Rc::new(std::cell::Cell::new(false));
        let results = session::run(&mut target, &s, &listener, &cancel).await.unwrap();
        assert_eq!(results[0].metrics.completed, 24);
        let seen = seen.borrow().clone();
        let warmed = seen[0].1;
        assert!(warmed > after_load, "the warm-up used pipelines the load's step did not: {after_load} -> {seen:?}");
        assert_eq!(seen.iter().map(|s| s.0).collect::<Vec<_>>(), ["warmed up", "baseline", "run"]);
        assert!(seen.iter().all(|s| s.1 == warmed), "pipelines first used after the warm-up: {seen:?}");
    });
}

/// The thinking split on the engine ([`tokenmeter::bench::base::thinking`]): the fixture's greedy reply
/// is generated once, then the same request runs through the driver with tags planted on that
/// reply's own ids (its first id opens the thinking, a later one closes it), so the reply
/// contains both tags. By hand: the tokens up to the closing one are reasoning, the next is the
/// first answer token, later than the first token.
#[test]
fn a_reply_with_think_tags_is_split_into_reasoning_and_answer() {
    pollster::block_on(async {
        let mut s = spec(Arrival::Sequential, 1.0);
        (s.num_requests, s.input_len, s.output_len) = (1, LenRange { min: 16, max: 16 }, LenRange { min: 12, max: 12 });
        let store = DirStore::new(fixture_dir("tiny-gqa-tied")).unwrap();
        let ckpt = Checkpoint::open(&store).await.unwrap();
        let mut engine =
            Engine::new(ForwardPass::load(gpu(), &ckpt, &EngineOptions::default(), &mut |_, _| {}).await.unwrap());
        let plan = bench::plan(&s).unwrap();
        let prompt = |p: &bench::PlannedRequest| Ok(bench::random_prompt(s.seed, p.id, p.prompt_len, 512));
        let mut reply = Vec::new();
        tokenmeter::engine::generate::generate_greedy(
            &mut engine,
            &prompt(&plan[0]).unwrap(),
            12,
            &[],
            &mut |_, id| reply.push(id),
        )
        .await
        .unwrap();
        // The closing tag: the first id, from the third on, not seen before it (so it closes there).
        let close_at = (2..reply.len() - 1).find(|&k| !reply[..k].contains(&reply[k])).expect("a varied reply");
        let tags = ThinkTags { open: reply[0], close: reply[close_at] };
        let options = driver::DriverOptions {
            decide: None,
            spec: &s,
            sampling: SamplingParams::default(),
            ignore_eos: true,
            prompt: &prompt,
            think: Some(tags),
        };
        let (records, _) = driver::run(&mut engine, &plan, &options, &mut |_| {}, &|| false).await.unwrap();
        let r = &records[0];
        assert_eq!(r.token_times_s.len(), 12);
        assert_eq!(r.reasoning_tokens, close_at + 1, "reply {reply:?}, closed at {close_at}");
        assert_eq!(r.first_answer_s, Some(r.token_times_s[close_at + 1]));
        assert!(r.ttfat_s().unwrap() > r.ttft_s().unwrap());
        let m = bench::summarize(&records, &[], None, 0.25);
        let t = m.thinking.expect("the reply thought");
        assert_eq!((t.reasoning_tokens, t.answer_tokens, t.requests_thinking), (close_at + 1, 11 - close_at, 1));
        // Without tags, no split.
        let plain = driver::DriverOptions { think: None, ..options };
        let (records, _) = driver::run(&mut engine, &plan, &plain, &mut |_| {}, &|| false).await.unwrap();
        assert_eq!((records[0].reasoning_tokens, records[0].first_answer_s), (0, None));
    });
}

/// `bench --warmup-requests 3 --cooldown-s …`: every request is sent and kept with its phase, and
/// the summary is over the measured ones alone, on a clock from the first measured arrival — it
/// recomputes from the saved requests through `phases::measured`.
#[test]
fn warm_up_and_cool_down_requests_are_kept_but_not_measured() {
    let (result, stdout) = bench_on_fixture(
        "phases",
        &["--rate", "20", "--num-requests", "12", "--seed", "5", "--input-len", "8:24", "--output-len", "4:8"],
        &["--no-baseline", "--warmup-requests", "3", "--cooldown-s", "0.05"],
    );
    let model = fixture_dir("tiny-gqa-tied");
    use tokenmeter::bench::record::phases::{measured, Phase, Phases};
    assert_eq!(result.requests.len(), 12, "every request is kept");
    let warm = result.requests.iter().filter(|r| r.phase == Some(Phase::Warmup)).count();
    let cool = result.requests.iter().filter(|r| r.phase == Some(Phase::Cooldown)).count();
    assert_eq!(warm, 3);
    assert!(cool >= 1, "the last arrival is in its own cool-down");
    let x = result.metrics.excluded.expect("the summary says what it left out");
    assert_eq!((x.warmup, x.cooldown), (warm, cool));
    assert_eq!(result.metrics.num_requests, 12 - warm - cool);
    assert_eq!(result.config.phases, Some(Phases { warmup_requests: 3, warmup_s: 0.0, cooldown_s: 0.05 }));
    let (kept, steps, _) = measured(&result.requests, &result.steps).unwrap();
    let again = bench::summarize(&kept, &steps, None, result.metrics.timeseries_bucket_s);
    assert_eq!(again.ttft_ms.p50, result.metrics.ttft_ms.p50);
    assert_eq!(again.output_throughput, result.metrics.output_throughput);
    assert!(stdout.contains("Not measured (warm-up + cool-down"), "{stdout}");
    // A warm-up that leaves nothing to measure is refused before anything runs.
    let refused = std::process::Command::new(env!("CARGO_BIN_EXE_tokenmeter"))
        .args(["bench", "--model", model.to_str().unwrap(), "--num-requests", "4", "--warmup-requests", "4"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && stderr.contains("leaves none of the 4 requests"), "{stderr}");
}

/// `bench --turns 3 --prefix-cache`: requests grouped into conversations of three turns; each
/// later turn's prompt is the turn before's prompt, its reply and new text (so its length is their
/// sum, by the plan), sent after the turn before finished; with the prefix cache, later turns
/// find their history's blocks cached. The summary has a line per turn.
#[test]
fn conversations_carry_their_history_and_the_prefix_cache_finds_it() {
    let (result, stdout) = bench_on_fixture(
        "turns",
        &["--rate", "8", "--num-requests", "9", "--turns", "3", "--think-time-s", "0.02"],
        &["--input-len", "40", "--output-len", "24", "--prefix-cache", "--no-baseline"],
    );
    let mut requests = result.requests.clone();
    requests.sort_by_key(|r| (r.session, r.turn));
    assert_eq!(requests.len(), 9);
    for r in &requests {
        assert!(r.succeeded(), "{:?}", r.error);
        let (session, turn) = (r.session.unwrap(), r.turn.unwrap());
        assert_eq!(session, r.id / 3, "sessions of three consecutive requests");
        // 40 new tokens a turn, 24-token replies: 40, 104, 168.
        assert_eq!(r.prompt_len, 40 + 64 * turn as usize, "request {}", r.id);
        if turn > 0 {
            let before = requests.iter().find(|q| q.session == Some(session) && q.turn == Some(turn - 1)).unwrap();
            assert!(r.arrival_s >= before.finish_s.unwrap(), "a turn is sent after the one before finished");
            assert!(r.cached_tokens.unwrap() > 0, "turn {turn} of session {session} found no cached history");
        } else {
            assert_eq!(r.cached_tokens, Some(0));
        }
    }
    let c = result.metrics.conversations.expect("a per-turn summary");
    assert_eq!((c.sessions, c.completed_sessions, c.per_turn.len()), (3, 3, 3));
    assert!(c.per_turn[2].prefix_cache_hit_rate.unwrap() > c.per_turn[0].prefix_cache_hit_rate.unwrap());
    assert!(stdout.contains("Conversations: 3 (3 complete)") && stdout.contains("turn 3: 3 requests"), "{stdout}");
    // Against a server without text prompts it is refused, with the reason (each turn sends the
    // server's reply back as text), before anything is sent.
    let refused = std::process::Command::new(env!("CARGO_BIN_EXE_tokenmeter"))
        .args(["bench", "--endpoint", "http://127.0.0.1:9/v1", "--turns", "2"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && stderr.contains("--turns: conversations against a server send text"),
        "{stderr}"
    );
}

/// A Mooncake-style trace with `hash_ids` (blocks of 32 tokens), sent one request at a time with
/// the prefix cache and a KV cache larger than its blocks: four documents of three blocks, the
/// first block shared by all (a system prompt), each document asked four times with a block of its
/// own after it. By hand: the first request finds nothing, the first of each other document its
/// first block (32), every repeat its document (96) — 3 × 32 + 12 × 96 = 1,248 of 16 × 116 =
/// 1,856 prompt tokens. The engine's measured hit rate is within 2 points of that.
#[test]
fn a_shared_block_trace_hits_the_prefix_cache_as_its_ids_imply() {
    let dir = std::env::temp_dir().join(format!("tokenmeter-blocks-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let trace = dir.join("mooncake.jsonl");
    let rows: Vec<String> = (0..16u64)
        .map(|i| {
            let doc = i % 4;
            let ids = [1, 10 + doc, 20 + doc, 100 + i];
            format!("{{\"timestamp\": {}, \"input_length\": 116, \"output_length\": 4, \"hash_ids\": {ids:?}}}", i * 10)
        })
        .collect();
    std::fs::write(&trace, rows.join("\n")).unwrap();
    let (result, stdout) = bench_on_fixture(
        "blocks",
        &["--dataset", trace.to_str().unwrap(), "--trace-block-size", "32", "--max-concurrency", "1"],
        &["--prefix-cache", "--no-baseline"],
    );
    let m = &result.metrics;
    let implied = m.prefix_cache_implied_rate.expect("the trace's implied rate");
    assert!((implied - 1248.0 / 1856.0).abs() < 1e-12, "implied {implied}");
    let measured = m.prefix_cache_hit_rate.expect("the engine's hit rate");
    assert!((measured - implied).abs() <= 0.02, "measured {measured} against implied {implied}");
    assert!(stdout.contains("the trace's block ids imply 67.2% for an unbounded cache"), "{stdout}");
    // `--max-concurrency 1` holds the engine to one request at a time (all 16 are due by 0.15 s).
    let mut requests = result.requests.clone();
    requests.sort_by_key(|r| r.id);
    for pair in requests.windows(2) {
        let first_token = pair[1].first_token_s.unwrap();
        assert!(first_token > pair[0].finish_s.unwrap(), "request {} overlapped the one before", pair[1].id);
    }
    // The block size is recorded with the workload.
    let dataset = result.config.workload.as_ref().and_then(|w| w.dataset.as_ref()).expect("dataset");
    assert_eq!(dataset.block_tokens, Some(32));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `tokenmeter bench` on the tiny fixture with `args` and `more` (two slices, for line length):
/// its one result from `--json`, and its stdout. Without the check before the run (`verify.rs`
/// tests it; here it would cost seconds a run).
fn bench_on_fixture(name: &str, args: &[&str], more: &[&str]) -> (bench::BenchResult, String) {
    let dir = std::env::temp_dir().join(format!("tokenmeter-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("out.json");
    let model = fixture_dir("tiny-gqa-tied");
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_tokenmeter"))
        .args(["bench", "--model", model.to_str().unwrap(), "--no-verify"])
        .args(args)
        .args(more)
        .args(["--json", out.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let result = serde_json::from_value(if json.is_array() { json[0].clone() } else { json }).unwrap();
    (result, String::from_utf8_lossy(&run.stdout).into_owned())
}

/// A target that answers every request at once (TTFT 10 ms, a token every 5 ms) and keeps the
/// ids of what it was sent, run by run.
struct Recorder {
    runs: Vec<Vec<u64>>,
}

impl tokenmeter::bench::Target for Recorder {
    fn run_config(&self) -> bench::RunConfig {
        bench::RunConfig::default()
    }

    fn reports_steps(&self) -> bool {
        false
    }

    async fn run(
        &mut self,
        plan: &[bench::PlannedRequest],
        _spec: &WorkloadSpec,
        _ignore_eos: bool,
        _listener: &tokenmeter::bench::run::target::Listener,
        _cancel: &std::rc::Rc<std::cell::Cell<bool>>,
    ) -> tokenmeter::Result<(Vec<bench::RequestRecord>, Vec<bench::StepSample>)> {
        self.runs.push(plan.iter().map(|p| p.id).collect());
        let records = plan
            .iter()
            .map(|p| {
                let arrival = p.arrival_s.unwrap_or(0.0);
                let times: Vec<f64> = (0..p.output_len).map(|k| arrival + 0.01 + 0.005 * k as f64).collect();
                bench::RequestRecord {
                    id: p.id,
                    arrival_s: arrival,
                    scheduled_s: Some(arrival),
                    first_token_s: times.first().copied(),
                    finish_s: times.last().copied(),
                    token_times_s: times,
                    prompt_len: p.prompt_len,
                    output_len: p.output_len,
                    ..Default::default()
                }
            })
            .collect();
        Ok((records, Vec::new()))
    }
}

/// The baseline's requests alone each have a prompt of their own (a prompt is drawn by its id),
/// none of them a warm-up's: with the prefix cache on, a repeated prompt would be a cache hit
/// and the baseline a cached TTFT (it was: 210 ms against 4.4 s uncached on a 1,120-token prompt).
#[test]
fn the_baseline_requests_have_prompts_of_their_own() {
    pollster::block_on(async {
        let s = spec(Arrival::Poisson, 50.0);
        let mut target = Recorder { runs: Vec::new() };
        let session = bench::SessionSpec {
            size_rate: false,
            spec: &s,
            rates: &[50.0],
            slo: None,
            slo_text: None,
            lang: bench::Lang::En,
            baseline: true,
            ignore_eos: true,
            cost_per_hour: None,
            phases: Default::default(),
            criteria: Default::default(),
        };
        let quiet: tokenmeter::bench::run::target::Listener = std::rc::Rc::new(|_| {});
        let cancel = std::rc::Rc::new(std::cell::Cell::new(false));
        bench::run::session::run(&mut target, &session, &quiet, &cancel).await.unwrap();
        // The warm-up, three baseline runs of one request, the rate.
        assert_eq!(target.runs.len(), 5, "{:?}", target.runs);
        let baseline: Vec<u64> = target.runs[1..4].iter().map(|run| run[0]).collect();
        let mut distinct = baseline.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), 3, "baseline ids {baseline:?}");
        assert!(baseline.iter().all(|id| !target.runs[0].contains(id)), "a warm-up prompt reused: {:?}", target.runs);
    });
}

/// `tokenmeter speed` times each prefill length `--prefill-repeats` times and reports the median
/// with its spread, as it does each decode batch over its steps: a figure from one timing has no
/// spread (`null`), not 0.
#[test]
fn speed_reports_each_figure_with_its_spread() {
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_tokenmeter"))
        .args(["speed", "--synthetic", "tiny", "--batches", "1,2", "--prefill", "16,40", "--steps", "3"])
        .args(["--prefill-repeats", "3", "--profile"])
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let three: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    for p in three["prefill"].as_array().unwrap() {
        assert_eq!(p["repeats"], 3, "{p}");
        let (ms, spread) = (p["ms"].as_f64().unwrap(), p["spread"].as_f64().expect("a spread over 3 timings"));
        assert!(ms > 0.0 && spread >= 0.0, "{p}");
    }
    // The roofline's cost of a dispatch, and each decode step explained by it and its bytes: the
    // three parts add up to the step, the dispatches are the step's own (6 a layer and more).
    let dispatch_us = three["roofline"]["dispatch_us"].as_f64().expect("the dispatch probe");
    assert!(dispatch_us > 0.0 && dispatch_us < 10_000.0, "{}", three["roofline"]);
    for d in three["decode"].as_array().unwrap() {
        assert!(d["spread"].as_f64().is_some_and(|s| s >= 0.0), "{d}");
        let part = |key: &str| d["explained"][key].as_f64().unwrap_or_else(|| panic!("{key}: {d}"));
        let sum = part("bytes_ms") + part("dispatch_ms") + part("unexplained_ms");
        assert!((sum - d["step_ms"].as_f64().unwrap()).abs() < 1e-9, "{d}");
        let dispatches = d["dispatches"].as_u64().unwrap() as f64;
        assert!(dispatches >= 12.0 && (part("dispatch_ms") - dispatches * dispatch_us / 1e3).abs() < 1e-9, "{d}");
    }
    // The profile's matmuls: a bf16 weight (2 bytes) does a multiply and an add per token, so a
    // decode step of b tokens does b FLOPs a weight byte, and a prefill step of t tokens at most t
    // (its vocabulary projection takes only the last token).
    let sums = |speed: &serde_json::Value| {
        let profile =
            speed["profile"].as_array().filter(|p| !p.is_empty()).unwrap_or_else(|| panic!("no profile: {speed}"));
        let sum = |key: &str| profile.iter().map(|k| k[key].as_u64().unwrap()).sum::<u64>();
        (sum("flops"), sum("weight_bytes"))
    };
    for d in three["decode"].as_array().unwrap() {
        let (flops, bytes) = sums(d);
        assert!(bytes > 0 && flops == d["batch"].as_u64().unwrap() * bytes, "{flops} FLOPs, {bytes} bytes: {d}");
    }
    for p in three["prefill"].as_array().unwrap() {
        let (flops, bytes) = sums(p);
        let tokens = p["tokens"].as_u64().unwrap();
        assert!(flops > bytes && flops < tokens * bytes, "{flops} FLOPs, {bytes} bytes: {p}");
    }
    // One timing has no spread (`null`): `bench::run::speed`'s unit test, without a second run of
    // the CLI (its roofline probe costs most of this test's seconds).
}

/// `bench` records its model load in the results JSON (`run_config.time_to_ready`) and prints it
/// at the head of its report: a fixture folder's bytes read from disk, nothing downloaded, every
/// phase timed; the embedded default says it has no download at all.
#[test]
fn bench_records_the_model_loads_time_to_ready() {
    let dir = std::env::temp_dir().join(format!("tokenmeter-ready-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let fixture = fixture_dir("tiny-gqa-tied");
    let weights = std::fs::metadata(fixture.join("model.safetensors")).unwrap().len();
    for folder in [Some(fixture.to_str().unwrap()), None] {
        let json = dir.join(format!("{}.json", folder.is_some()));
        let mut args = vec!["bench", "--rate", "inf", "--num-requests", "2", "--input-len", "8", "--output-len", "2"];
        args.extend(["--no-baseline", "--no-verify", "--json", json.to_str().unwrap()]);
        if let Some(folder) = folder {
            args.extend(["--model", folder]);
        }
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_tokenmeter")).args(&args).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let stdout = String::from_utf8_lossy(&out.stdout);
        let result: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let ready = &result["run_config"]["time_to_ready"];
        let at = |key: &str| ready[key].as_f64().unwrap_or_else(|| panic!("{key} missing: {ready}"));
        assert_eq!((at("fetched_bytes"), at("download_s")), (0.0, 0.0), "nothing is downloaded: {ready}");
        assert!(at("first_step_s") > 0.0 && at("open_s") >= 0.0 && at("upload_s") >= 0.0, "{ready}");
        let phases: f64 = ["open_s", "read_s", "upload_s", "pipelines_s", "first_step_s"].into_iter().map(&at).sum();
        assert!(
            at("ready_s") >= phases - 1e-9,
            "the whole ({}) is short of its phases ({phases}): {ready}",
            at("ready_s")
        );
        assert!(stdout.contains("Time to ready: "), "{}", stdout);
        match folder {
            Some(_) => {
                assert_eq!(ready["source"], "disk", "{ready}");
                assert_eq!(at("stored_bytes"), weights as f64, "{ready}");
                // Every matrix row came from the file (norms aside): most of its bytes.
                assert!(at("read_bytes") > 0.9 * weights as f64 && at("read_bytes") <= weights as f64, "{ready}");
                assert!(stdout.contains("  no download: a folder on disk (247 kB)"), "{}", stdout);
            }
            None => {
                assert_eq!((ready["source"].as_str(), at("stored_bytes")), (Some("generated"), 0.0), "{ready}");
                assert!(stdout.contains("  no download: the weights are generated"), "{}", stdout);
            }
        }
    }
}
