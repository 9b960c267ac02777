//! Two deployments compared: `compare` with servers as its settings, for speed and for output
//! quality (`bench::verdict::quality::served`). The top-k KL and the served pass against hand-computed
//! values; the refusals that need no server; and against the llama.cpp peer serving one model as
//! F16, Q8_0 and Q4_0 (tests/fixtures/peer/make_precisions.py): an endpoint against itself agrees
//! fully, Q8_0 is closer to F16 than Q4_0 by KL, and a gate Q8_0 meets fails Q4_0.

use crate::common;
use crate::remote::{start_peer_serving, PEER};

use tokenmeter::bench::verdict::quality::{compare_served, top_k_kl, Basis, Gate, Generated, TokenLogprobs};

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-12
}

fn top(list: &[(&str, f64)]) -> Vec<(String, f64)> {
    list.iter().map(|&(t, p)| (t.to_string(), p.ln())).collect()
}

/// KL over two top-k lists: a bucket per token both hold, one for the rest on each side.
#[test]
fn top_k_kl_against_hand_computed_values() {
    // Shared {a}: p = (0.5, rest 0.5), q = (0.4, rest 0.6):
    // 0.5 ln(0.5/0.4) + 0.5 ln(0.5/0.6) = 0.020410997...
    let (reference, test) = (top(&[("a", 0.5), ("b", 0.3)]), top(&[("a", 0.4), ("c", 0.4)]));
    let kl = top_k_kl(&reference, &test);
    assert!(close(kl, 0.5 * (0.5f64 / 0.4).ln() + 0.5 * (0.5f64 / 0.6).ln()), "{kl}");
    assert!(close(kl, 0.020_410_997_26), "{kl}");
    // Shared {a, b}, the rest 0.2 on both sides: 0.5 ln(5/4) + 0.3 ln(3/4) = 0.025267153...
    let kl = top_k_kl(&reference, &top(&[("b", 0.4), ("a", 0.4)]));
    assert!(close(kl, 0.5 * 1.25f64.ln() + 0.3 * 0.75f64.ln()) && close(kl, 0.025_267_153_921_6), "{kl}");
    // The same lists: 0 exactly, whatever their order.
    assert_eq!(top_k_kl(&reference, &top(&[("b", 0.3), ("a", 0.5)])), 0.0);
    // A reference sure of "a" leaves no rest: it is floored at 1e-6, on both sides alike:
    // ln(1/0.9) + 1e-6 ln(1e-6/0.1).
    let kl = top_k_kl(&top(&[("a", 1.0)]), &top(&[("a", 0.9)]));
    assert!(close(kl, (1.0f64 / 0.9).ln() + 1e-6 * (1e-6f64 / 0.1).ln()), "{kl}");
    // Nothing shared: one bucket each side, both the whole mass: 0 (the lower bound says nothing).
    assert_eq!(top_k_kl(&top(&[("a", 0.9)]), &top(&[("b", 0.9)])), 0.0);
}

fn token(text: &str, alternatives: &[(&str, f64)]) -> TokenLogprobs {
    let top = top(alternatives);
    let logprob = top.iter().find(|(t, _)| t == text).map_or(-5.0, |&(_, l)| l);
    TokenLogprobs { token: text.into(), logprob, top }
}

/// The served pass: positions up to and including the first divergence, top-1 there, the KL's
/// mean over them; outputs without log-probabilities compare their text alone.
#[test]
fn served_pass_compares_up_to_the_first_divergence() {
    let r = Generated {
        text: "xyz".into(),
        tokens: Some(vec![
            token("x", &[("x", 0.6), ("y", 0.3)]),
            token("y", &[("y", 0.5), ("w", 0.4)]),
            token("z", &[("z", 0.9)]),
        ]),
    };
    let t = Generated {
        text: "xwq".into(),
        tokens: Some(vec![
            token("x", &[("x", 0.6), ("y", 0.3)]),
            token("w", &[("w", 0.5), ("y", 0.4)]),
            token("q", &[("q", 0.9)]),
        ]),
    };
    let q = compare_served(("f16", "q4"), &[r.clone(), r.clone()], &[r.clone(), t], 3, 2).unwrap();
    assert_eq!(q.basis, Basis::TopLogprobs { k: 2 });
    // Request 0: all three positions, agreeing; request 1: positions 0 and 1 (its divergence).
    assert_eq!((q.positions, q.first_divergences.clone()), (5, vec![None, Some(1)]), "{q:?}");
    assert!(close(q.top1_agreement, 4.0 / 5.0) && close(q.identical_fraction, 0.5));
    assert_eq!(q.median_first_divergence, Some(1.0));
    // Only position 1 of request 1 differs: shared {y, w}, the rest 0.1 on both sides.
    let at_divergence = 0.5 * (0.5f64 / 0.4).ln() + 0.4 * (0.4f64 / 0.5).ln();
    assert!(close(q.kl_mean, at_divergence / 5.0) && close(q.kl_max, at_divergence), "{q:?}");
    // The test's log-probability of the reference's top-1: y at 0.4 where they part.
    assert!(close(q.test_logprob_mean, (0.6f64.ln() + 0.5f64.ln() + 0.9f64.ln() + 0.6f64.ln() + 0.4f64.ln()) / 5.0));
    assert_eq!(q.tokens[q.per_position[4].test_top1 as usize], "w");
    // The reference's top-2 held 0.9, 0.9, 0.9, 0.9 and 0.9 of its mass at the five positions.
    assert!(close(q.top_k_mass.unwrap(), 0.9), "{:?}", q.top_k_mass);
    // Itself: top-1 1, KL 0 exactly.
    let same = compare_served(("a", "b"), std::slice::from_ref(&r), std::slice::from_ref(&r), 3, 2).unwrap();
    assert_eq!((same.top1_agreement, same.kl_max, same.identical_fraction), (1.0, 0.0, 1.0));
    // No log-probabilities from one side: the text alone, a divergence in characters, and a gate
    // cannot pass on what was not measured.
    let bare = Generated { text: "xy!".into(), tokens: None };
    let q = compare_served(("a", "b"), &[r], &[bare], 3, 2).unwrap();
    assert_eq!((q.basis, q.positions, q.first_divergences.clone()), (Basis::Outputs, 0, vec![Some(2)]));
    assert!(q.top1_agreement.is_nan());
    let err = Gate { min_top1: Some(0.9), max_kl: None }.check(std::slice::from_ref(&q)).unwrap_err().to_string();
    assert!(err.contains("b against a: no log-probabilities came back"), "{err}");
    let text = tokenmeter::bench::verdict::quality::text_report(&[q], tokenmeter::bench::Lang::En);
    assert!(text.contains("greedy outputs only") && !text.contains("KL mean"), "{text}");
    assert!(compare_served(("a", "b"), &[], &[], 3, 2).is_err());
}

/// Runs `tokenmeter compare` over `settings` (NAME, the setting's own flags, each given the same
/// workload); (exit code, stdout, stderr, the JSON written).
fn compare(name: &str, settings: &[(&str, String)], extra: &[&str]) -> (i32, String, String, serde_json::Value) {
    let out = std::env::temp_dir().join(format!("tokenmeter-servers-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&out).unwrap();
    let (json, html) = (out.join("compare.json"), out.join("compare.html"));
    let workload = "--rate inf --num-requests 4 --input-len 8 --output-len 8 --random-prompts";
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_tokenmeter"));
    command.arg("compare");
    for (name, flags) in settings {
        command.args(["--config", &format!("{name}={flags} {workload}")]);
    }
    let run = command
        .args(["--repeats", "2", "--quality-prompts", "4", "--quality-tokens", "16"])
        .args(["--json", json.to_str().unwrap(), "--html", html.to_str().unwrap()])
        .args(extra)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout).to_string();
    let stderr = String::from_utf8_lossy(&run.stderr).to_string();
    let value = std::fs::read_to_string(&json).map(|t| serde_json::from_str(&t).unwrap()).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&out);
    (run.status.code().unwrap_or(-1), stdout, stderr, value)
}

/// A setting is a server or the engine, never both; nor may settings of both kinds meet. Both are
/// refused before anything is sent (no server listens at the URL).
#[test]
fn servers_and_engines_do_not_mix() {
    let url = "http://127.0.0.1:9/v1";
    let (code, _, stderr, _) = compare(
        "mixed-flags",
        &[("a", format!("--endpoint {url}")), ("b", format!("--endpoint {url} --weights int8 --max-batch 2"))],
        &[],
    );
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--config b: --max-batch, --weights set the engine in this process"), "{stderr}");
    let (code, _, stderr, _) = compare("mixed-kinds", &[("a", format!("--endpoint {url}")), ("b", String::new())], &[]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("a is a server (--endpoint) and the others the engine"), "{stderr}");
    let (code, _, stderr, _) =
        compare("top-k-engine", &[("a", String::new()), ("b", String::new())], &["--quality-top-k", "5"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--quality-top-k is for servers"), "{stderr}");
}

/// The acceptance's server line: the peer serving F16, Q8_0 and Q4_0 of one model; an endpoint
/// against itself agrees fully; Q8_0 is closer to F16 than Q4_0 by KL; `--max-kl` between the two
/// fails the run (exit 3) on Q4_0 alone. The speed rows are there too, from the remote path.
#[test]
fn llama_server_deployments_compared_for_speed_and_quality() {
    let Some(server) = common::llama_server("the llama-server tests") else { return };
    let _one_at_a_time = PEER.lock().unwrap_or_else(|e| e.into_inner());
    let f16 = start_peer_serving(&server, "qwen3-tiny-f16.gguf", None, &[]);
    let q8 = start_peer_serving(&server, "qwen3-tiny.gguf", None, &[]);
    let q4 = start_peer_serving(&server, "qwen3-tiny-q4_0.gguf", None, &[]);
    let side = |url: &str| format!("--endpoint {url}");

    // The same endpoint twice, asked for (the same deployment is not measured unasked).
    let (code, stdout, stderr, json) =
        compare("itself", &[("one", side(&f16.url)), ("two", side(&f16.url))], &["--quality"]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let pass = &json["quality"][0];
    assert_eq!(pass["basis"]["kind"], "top_logprobs", "{pass}");
    assert_eq!((pass["top1_agreement"].as_f64(), pass["identical_fraction"].as_f64()), (Some(1.0), Some(1.0)));
    // llama-server recomputes the same positions the same way: no rounding to forgive.
    assert_eq!(pass["kl_max"].as_f64(), Some(0.0), "{pass}");
    assert_eq!(pass["positions"].as_u64(), Some(4 * 16));

    let settings = [("f16", side(&f16.url)), ("q8_0", side(&q8.url)), ("q4_0", side(&q4.url))];
    let (code, stdout, stderr, json) = compare("precisions", &settings, &[]);
    let shown = format!("{stdout}\n{stderr}");
    assert_eq!(code, 0, "{shown}");
    let passes = json["quality"].as_array().expect("unasked: the deployments differ");
    let field = |k: usize, f: &str| passes[k][f].as_f64().unwrap_or(f64::NAN);
    let (kl8, kl4) = (field(0, "kl_mean"), field(1, "kl_mean"));
    assert!(kl8 > 0.0 && kl4 > kl8, "Q8_0 closer to F16 than Q4_0: {kl8} vs {kl4}\n{shown}");
    assert!(
        stdout.contains("output quality (not timed)") && stdout.contains("KL(f16 ‖ q4_0) over the returned top-20")
    );
    assert!(stdout.contains("3 settings against f16") && stdout.contains("output_throughput"), "{stdout}");
    assert_eq!(json["arms"].as_array().map(Vec::len), Some(3));
    eprintln!(
        "q8_0 against f16: top-1 {:.4}, KL {kl8:.3e}; q4_0: top-1 {:.4}, KL {kl4:.3e}",
        field(0, "top1_agreement"),
        field(1, "top1_agreement")
    );

    // A bound between the two: Q8_0 meets it, Q4_0 fails the run.
    let bound = format!("{}", (kl8 * kl4).sqrt());
    let (code, stdout, stderr, json) = compare("gate", &settings, &["--max-kl", &bound]);
    assert_eq!(code, 3, "{stdout}\n{stderr}");
    let gate: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error: ")).collect();
    assert_eq!(gate.len(), 1, "{stderr}");
    assert!(gate[0].contains("q4_0 against f16: mean KL") && gate[0].contains("above --max-kl"), "{stderr}");
    assert_eq!(json["quality"].as_array().map(Vec::len), Some(2), "the report is written before the gate fails");
}
