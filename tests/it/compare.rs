//! `compare` on the real engine: a 2× change in batch size on a fixture model is detected, in
//! the right direction, through the same code as `tokenmeter compare` (bench::run::experiment).

use crate::common;

use common::*;
use std::cell::Cell;
use std::rc::Rc;
use tokenmeter::bench::run::experiment::{run_alternating, Experiment, ExperimentSpec};
use tokenmeter::bench::run::launch::EngineTarget;
use tokenmeter::bench::run::target::Listener;
use tokenmeter::bench::verdict::compare::CompareVerdict;
use tokenmeter::bench::{self, Arrival, LenRange, RunConfig, WorkloadSpec};
use tokenmeter::engine::{Engine, EngineOptions, ForwardPass};
use tokenmeter::model::checkpoint::Checkpoint;
use tokenmeter::model::source::DirStore;

async fn engine(max_seqs: usize) -> Engine {
    let store = DirStore::new(fixture_dir("tiny-gqa-tied")).unwrap();
    let ckpt = Checkpoint::open(&store).await.unwrap();
    let options = EngineOptions { max_seqs, ..Default::default() };
    Engine::new(ForwardPass::load(gpu(), &ckpt, &options, &mut |_, _| {}).await.unwrap())
}

/// All 12 requests at once, 16–24 output tokens: one sequence per step serves them one after
/// another, two per step in half the waves.
fn spec() -> WorkloadSpec {
    WorkloadSpec {
        cancel: None,
        arrival: Arrival::Poisson,
        rate: f64::INFINITY,
        burstiness: 1.0,
        concurrency: 1,
        span: Default::default(),
        num_requests: 12,
        input_len: LenRange { min: 8, max: 24 },
        output_len: LenRange { min: 16, max: 24 },
        seed: 3,
        dataset: None,
        max_concurrency: None,
        saturation_stop: false,
        shared_prefix: None,
        conversations: None,
    }
}

async fn experiment(first: usize, second: usize) -> Experiment {
    let spec = spec();
    let (mut ea, mut eb) = (engine(first).await, engine(second).await);
    let prompt = |p: &bench::PlannedRequest| Ok(bench::random_prompt(spec.seed, p.id, p.prompt_len, 512));
    let target =
        |engine| EngineTarget::new(engine, prompt, RunConfig { target: "local".into(), ..RunConfig::default() }, None);
    let (mut a, mut b) = (target(&mut ea), target(&mut eb));
    let x = ExperimentSpec {
        spec: &spec,
        slo: None,
        slo_text: None,
        repeats: 8,
        ignore_eos: true,
        lang: bench::Lang::En,
        warmup: true,
        criteria: Default::default(),
    };
    let quiet: Listener = Rc::new(|_| {});
    run_alternating(&mut a, &mut b, &x, &quiet, &Rc::new(Cell::new(false)), &mut |_, _, _| {}).await.unwrap()
}

/// Measures a speed difference: needs the machine to itself (scripts/test runs the `alone` tests
/// after the others, one at a time; see tests/it/main.rs).
mod alone {
    use super::*;

    #[test]
    fn doubling_the_batch_is_detected_and_swapping_flips_it() {
        pollster::block_on(async {
            let x = experiment(1, 2).await;
            let verdict =
                |x: &Experiment, name: &str| x.comparison.metrics.iter().find(|m| m.metric == name).unwrap().verdict;
            let report = tokenmeter::bench::verdict::compare::text_report(&x.comparison, bench::Lang::En);
            eprintln!("{report}");
            assert_eq!(x.a.len(), 8);
            assert_eq!(x.a[0].config.engine.as_ref().unwrap().max_seqs, 1);
            assert_eq!(x.b[0].config.engine.as_ref().unwrap().max_seqs, 2);
            // Twice the sequences per step. Where a step's cost is mostly fixed (a GPU, dispatch and
            // readback), the queue drains in half the waves: throughput better. Where it grows with
            // the tokens (lavapipe on 2 busy cores: TPOT +100%, throughput +5% measured under load),
            // every token waits for the other sequence's work: TPOT worse. Either way the change is
            // detected, and a detected metric is never one its own medians contradict.
            let tpot = verdict(&x, "tpot_p50_ms");
            let throughput = verdict(&x, "output_throughput_tok_s");
            assert!(
                tpot == CompareVerdict::Worse || throughput == CompareVerdict::Better,
                "a doubled batch went undetected (TPOT p50 {tpot:?}, throughput {throughput:?})\n{report}"
            );
            for m in &x.comparison.metrics {
                let expected =
                    if m.higher_is_better == (m.b > m.a) { CompareVerdict::Better } else { CompareVerdict::Worse };
                if matches!(m.verdict, CompareVerdict::Better | CompareVerdict::Worse) {
                    assert_eq!(m.verdict, expected, "{}\n{report}", m.metric);
                }
            }
            // The same runs with A and B swapped: every verdict flips.
            let comparison = tokenmeter::bench::run::experiment::compare_results(
                &x.b,
                &x.a,
                None,
                &tokenmeter::bench::verdict::compare::CompareOptions::default(),
            )
            .unwrap();
            for (ab, ba) in x.comparison.metrics.iter().zip(&comparison.metrics) {
                let flipped = match ab.verdict {
                    CompareVerdict::Better => CompareVerdict::Worse,
                    CompareVerdict::Worse => CompareVerdict::Better,
                    v => v,
                };
                assert_eq!(ba.verdict, flipped, "{}", ab.metric);
            }
            // Results of another workload are refused.
            let mut other = x.b.clone();
            other[0].config.workload.as_mut().unwrap().seed = 4;
            let err = tokenmeter::bench::run::experiment::compare_results(&x.a, &other, None, &Default::default())
                .unwrap_err();
            assert!(err.to_string().contains("workloads differ"), "{err}");
        });
    }
}

/// `tokenmeter compare` with `--dataset` on both sides: A and B run the file's requests (its
/// lengths), and the dataset is recorded in each result's workload as `bench`
/// records it.
#[test]
fn compare_runs_a_dataset_on_both_sides() {
    let dir = std::env::temp_dir().join(format!("tokenmeter-compare-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let data = dir.join("lengths.jsonl");
    let rows = [(6, 3), (9, 2), (5, 4)];
    let text: String = rows.iter().map(|(i, o)| format!("{{\"input_len\": {i}, \"output_len\": {o}}}\n")).collect();
    std::fs::write(&data, text).unwrap();
    let out = dir.join("out.json");
    let model = fixture_dir("tiny-gqa-tied");
    let side = |batch: usize| {
        format!("--model {} --dataset {} --rate inf --max-batch {batch}", model.display(), data.display())
    };
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_tokenmeter"))
        .args(["compare", "--a", &side(1), "--b", &side(4), "--repeats", "2", "--json", out.to_str().unwrap()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&status.stderr);
    assert!(status.status.success(), "{stderr}");
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    for (k, side) in ["A", "B"].into_iter().enumerate() {
        assert_eq!(json["arms"][k]["name"], side);
        let results = json["arms"][k]["runs"].as_array().unwrap();
        assert_eq!(results.len(), 2, "{side}: two repetitions");
        for r in results {
            let workload = &r["run_config"]["workload"];
            assert_eq!(workload["dataset"]["format"], "jsonl", "{side}: {workload}");
            assert_eq!(workload["dataset"]["rows_kept"], 3, "{side}: {workload}");
            let mut lens: Vec<(u64, u64)> = r["requests"]
                .as_array()
                .unwrap()
                .iter()
                .map(|q| (q["prompt_len"].as_u64().unwrap(), q["output_len"].as_u64().unwrap()))
                .collect();
            lens.sort();
            let mut expected = rows.to_vec();
            expected.sort();
            assert_eq!(lens, expected, "{side}: the dataset's lengths");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `tokenmeter compare` A/Bs a kernel switch from flags alone: the GPU kernel family forced on both
/// sides (`--kernels gpu`), fused on one and off on the other; each repetition's run record says
/// which path ran (the switches in force, not only the flags).
#[test]
fn compare_ab_tests_a_kernel_switch_from_flags() {
    let dir = std::env::temp_dir().join(format!("tokenmeter-compare-switch-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("out.json");
    let model = fixture_dir("tiny-gqa-tied");
    let side = |fused: &str| {
        format!(
            "--model {} --kernels gpu --weight-storage buffer --fused {fused} --rate inf --num-requests 4 \
             --input-len 12 --output-len 4",
            model.display()
        )
    };
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_tokenmeter"))
        .args(["compare", "--a", &side("on"), "--b", &side("off"), "--repeats", "2", "--json", out.to_str().unwrap()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&status.stderr);
    assert!(status.status.success(), "{stderr}");
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    for (k, (side, fused)) in [("A", true), ("B", false)].into_iter().enumerate() {
        assert_eq!(json["arms"][k]["name"], side);
        let results = json["arms"][k]["runs"].as_array().unwrap();
        assert_eq!(results.len(), 2, "{side}: two repetitions");
        for r in results {
            let kernels = &r["run_config"]["kernels"];
            assert_eq!(kernels["family"], "gpu", "{side}: {kernels}");
            assert_eq!(kernels["weights"], "buffer", "{side}: {kernels}");
            assert_eq!(kernels["fused"], fused, "{side}: {kernels}");
            assert_eq!(r["requests"].as_array().unwrap().len(), 4, "{side}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `requests` of a `bench --json` result with every latency multiplied by `factor`: each time after
/// the arrival moves to arrival + factor × (time − arrival), as if the engine ran `factor`× slower.
fn slowed(result: &serde_json::Value, factor: f64) -> serde_json::Value {
    let mut r = result.clone();
    for q in r["requests"].as_array_mut().unwrap() {
        let arrival = q["arrival_s"].as_f64().unwrap();
        let scale = |v: &mut serde_json::Value| {
            if let Some(t) = v.as_f64() {
                *v = serde_json::json!(arrival + factor * (t - arrival));
            }
        };
        for key in ["scheduled_s", "first_token_s", "finish_s"] {
            scale(&mut q[key]);
        }
        q["token_times_s"].as_array_mut().unwrap().iter_mut().for_each(scale);
    }
    r
}

/// A three-way `compare` of saved results (`--results NAME=FILE`): one measured run, repeated with
/// a few percent of drift as A and as B (no change), and 2× slower as C (a planted change). C is
/// worse than A on the latencies and the throughput, B shows no difference on any metric, and
/// the intervals are shared by the two comparisons.
#[test]
fn a_three_way_compare_finds_the_planted_2x_change_and_only_it() {
    let dir = std::env::temp_dir().join(format!("tokenmeter-compare-3way-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let measured = dir.join("measured.json");
    let model = fixture_dir("tiny-gqa-tied");
    let bench = std::process::Command::new(env!("CARGO_BIN_EXE_tokenmeter"))
        .args(["bench", "--model", model.to_str().unwrap(), "--rate", "inf", "--num-requests", "16"])
        // Requests of one length, all in one wave: each side's percentiles then bootstrap tightly
        // (C's e2e p50 interval ±8% of A's value). Mixed lengths (8:32 in, 4:16 out) made the
        // median jump between the waves' requests, and once the planted 2× fell inside the
        // family-wise interval (a fresh-clone CI run at d9b55db): noise, not the change.
        .args(["--input-len", "16", "--output-len", "8", "--json", measured.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(bench.status.success(), "{}", String::from_utf8_lossy(&bench.stderr));
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&measured).unwrap()).unwrap();
    let run = if json.is_array() { json[0].clone() } else { json };
    let arm = |name: &str, factors: [f64; 4]| {
        let path = dir.join(format!("{name}.json"));
        let reps: Vec<serde_json::Value> = factors.iter().map(|&f| slowed(&run, f)).collect();
        std::fs::write(&path, serde_json::to_string(&reps).unwrap()).unwrap();
        format!("{name}={}", path.display())
    };
    let a = arm("A", [1.0, 1.03, 0.98, 1.01]);
    let b = arm("B", [1.01, 0.99, 1.02, 0.985]);
    let c = arm("C", [2.0, 2.04, 1.98, 2.02]);
    let out = dir.join("out.json");
    let compare = std::process::Command::new(env!("CARGO_BIN_EXE_tokenmeter"))
        .args(["compare", "--results", &a, "--results", &b, "--results", &c, "--json", out.to_str().unwrap()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&compare.stdout);
    assert!(compare.status.success(), "{}", String::from_utf8_lossy(&compare.stderr));
    assert!(stdout.contains("3 settings against A") && stdout.contains("C against A"), "{stdout}");
    let x: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(x["reference"], "A");
    let versus = x["versus"].as_array().unwrap();
    assert_eq!(versus.len(), 2);
    let verdict = |v: &serde_json::Value, metric: &str| -> String {
        let m = v["comparison"]["metrics"].as_array().unwrap().iter().find(|m| m["metric"] == metric).unwrap();
        m["verdict"].as_str().unwrap().to_string()
    };
    let (vb, vc) = (&versus[0], &versus[1]);
    assert_eq!((vb["name"].as_str(), vc["name"].as_str()), (Some("B"), Some("C")));
    for v in versus {
        assert_eq!(v["comparison"]["comparisons"], 2, "the interval covers both comparisons");
    }
    for m in vb["comparison"]["metrics"].as_array().unwrap() {
        let v = m["verdict"].as_str().unwrap();
        let no_difference = ["no difference beyond the margin", "too few repetitions to tell", "not measured"];
        assert!(no_difference.contains(&v), "B: {} {v}\n{stdout}", m["metric"]);
    }
    for metric in ["ttft_p50_ms", "e2e_p50_ms", "e2e_p90_ms", "output_throughput_tok_s"] {
        assert_eq!(verdict(vc, metric), "worse", "C: {metric}\n{stdout}");
    }
    // --reference picks another; a name that is not there is refused by name.
    let refused = std::process::Command::new(env!("CARGO_BIN_EXE_tokenmeter"))
        .args(["compare", "--results", &a, "--results", &b, "--reference", "Z"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && stderr.contains("--reference \"Z\"") && stderr.contains("A, B"), "{stderr}");
    // Every run here is VALID: --require-valid lets the comparison through. A setting with a run
    // stamped INVALID is named with its reasons, and --require-valid refuses it with exit code 4,
    // after the report.
    let require = |a: &str, b: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_tokenmeter"))
            .args(["compare", "--results", a, "--results", b, "--require-valid"])
            .output()
            .unwrap()
    };
    let valid = require(&a, &b);
    assert!(valid.status.success(), "{}", String::from_utf8_lossy(&valid.stderr));
    assert!(!String::from_utf8_lossy(&valid.stdout).contains("INVALID"));
    let mut reps: Vec<serde_json::Value> = (0..3).map(|_| run.clone()).collect();
    reps[1]["validity"] = serde_json::json!({
        "valid": false,
        "reasons": [{"reason": "failures", "failed": 2, "requests": 16}]
    });
    let d = dir.join("D.json");
    std::fs::write(&d, serde_json::to_string(&reps).unwrap()).unwrap();
    let invalid = require(&a, &format!("D={}", d.display()));
    let (stdout, stderr) = (String::from_utf8_lossy(&invalid.stdout), String::from_utf8_lossy(&invalid.stderr));
    assert_eq!(invalid.status.code(), Some(4), "{stderr}");
    assert!(stdout.contains("! D's run 2 of 3 is INVALID: 2 of 16 requests failed"), "{stdout}");
    assert!(stdout.contains("D against A") || stdout.contains("==="), "the report first: {stdout}");
    assert!(stderr.contains("error: --require-valid: D's run 2 of 3 is INVALID"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `compare --config NAME=OPTIONS` three times: three settings run in turn on the engine, each
/// recorded under its name, two compared with the reference chosen by `--reference`.
#[test]
fn compare_runs_three_named_settings_in_turn() {
    let dir = std::env::temp_dir().join(format!("tokenmeter-compare-configs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("out.json");
    let model = fixture_dir("tiny-gqa-tied");
    let side = |batch: usize| {
        format!(
            "--model {} --rate inf --num-requests 4 --input-len 8 --output-len 4 --max-batch {batch}",
            model.display()
        )
    };
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_tokenmeter"))
        .args(["compare", "--config", &format!("one={}", side(1)), "--config", &format!("two={}", side(2))])
        .args(["--config", &format!("four={}", side(4)), "--reference", "two", "--repeats", "2"])
        .args(["--json", out.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(status.status.success(), "{}", String::from_utf8_lossy(&status.stderr));
    let x: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(x["reference"], "two");
    for (k, (name, batch)) in [("one", 1), ("two", 2), ("four", 4)].into_iter().enumerate() {
        assert_eq!(x["arms"][k]["name"], name);
        let runs = x["arms"][k]["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 2, "{name}: two repetitions");
        assert_eq!(runs[0]["run_config"]["engine"]["max_seqs"], batch, "{name}");
    }
    let names: Vec<&str> = x["versus"].as_array().unwrap().iter().map(|v| v["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["one", "four"]);
    let _ = std::fs::remove_dir_all(&dir);
}
