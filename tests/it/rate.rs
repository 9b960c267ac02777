//! The rate you can sell: each run's steady-state window (on the planner's simulated engine, whose
//! virtual clock makes a run deterministic), the delivered load checked against the plan, and
//! `bench --rate max` against the test server of known capacity.

use super::planner::{cost, limits, session_on, sim, spec};
use tokenmeter::bench::LenRange;

/// A deliberate ramp-up and drain: requests of 200 tokens at 20 ms a step (about 4 s each) at 4
/// a second fill the engine for their first seconds, then hold about 16 outstanding, and drain
/// for seconds after the last arrival. The window opens once the queue has filled and closes at
/// the last arrival; its summary is over the requests that arrived in it.
#[test]
fn the_steady_window_leaves_out_the_ramp_up_and_the_drain() {
    let fixed = |n| LenRange { min: n, max: n };
    let workload = spec(4.0, 160, fixed(32), fixed(200));
    let mut engine = sim(cost(0.02, 1e-5, 0.0, 0.0), limits(64, true));
    let result = pollster::block_on(session_on(&mut engine, &workload));
    let steady = result.metrics.steady.as_ref().expect("a window");
    let requests = &result.requests;
    let e2e_p50 = result.metrics.e2e_ms.p50 / 1000.0;
    let last_arrival = requests.iter().map(|r| r.arrival_s).fold(0.0, f64::max);
    eprintln!(
        "window {:.2}–{:.2} s, level {}, {} requests; E2E p50 {e2e_p50:.2} s; run {:.2} s",
        steady.from_s, steady.to_s, steady.level, steady.requests, result.metrics.duration_s
    );
    assert!(steady.reached(), "{:?}", steady.never);
    // The ramp-up: the outstanding count climbs for about one request's life.
    assert!(steady.from_s > 0.5 * e2e_p50 && steady.from_s < 2.0 * e2e_p50, "{steady:?}");
    // The drain: everything after the last arrival.
    assert_eq!(steady.to_s, last_arrival);
    assert!(result.metrics.duration_s > last_arrival + 0.5 * e2e_p50);
    let arrived_in = requests.iter().filter(|r| r.arrival_s >= steady.from_s).count();
    assert_eq!(steady.requests, arrived_in);
    let summary = steady.summary.as_ref().unwrap();
    assert_eq!(summary.num_requests, arrived_in);
    assert!(arrived_in < requests.len());
    // The level is what the engine holds meanwhile: about rate × E2E (Little's law).
    assert!((steady.level - 4.0 * e2e_p50).abs() <= 0.25 * 4.0 * e2e_p50, "{steady:?}");
    // Saved and read back.
    let json = serde_json::to_value(&result).unwrap();
    assert_eq!(json["summary"]["steady"]["from_s"].as_f64(), Some(steady.from_s));
}

/// A target that stalls 3 s on its first request under `--max-concurrency 1`: the requests behind
/// it wait for the slot, so the stall is in their TTFT from arrival and not from send, and the
/// delivered load's check counts the wait as the plan (not bent), though sends were seconds late.
#[test]
fn a_stall_under_max_concurrency_shows_in_ttft_from_arrival_not_from_send() {
    use super::serving::{bench, read_json, scratch, server, Reply};
    let s = server(Reply { tokens: 2, gap_ms: 5, capacity: None, stall_first_ms: 3000 });
    let out = scratch("stall").join("out.json");
    let args = ["--rate", "20", "--arrival", "constant", "--num-requests", "12", "--max-concurrency", "1"];
    let more = ["--input-len", "4", "--output-len", "2", "--json", out.to_str().unwrap()];
    let (ok, stdout, stderr) = bench(&s.url, &[&args[..], &more[..]].concat());
    assert!(ok, "{stderr}");
    let json = read_json(&out);
    let summary = &json["summary"];
    let (from_arrival, from_send) =
        (summary["ttft_ms"]["p50"].as_f64().unwrap(), summary["ttft_from_send_ms"]["p50"].as_f64().unwrap());
    eprintln!("TTFT p50 from arrival {from_arrival:.1} ms, from send {from_send:.1} ms");
    assert!(from_arrival > 2000.0, "the stall is in TTFT from arrival: {from_arrival} ms");
    assert!(from_send < 500.0, "and not in TTFT from send: {from_send} ms");
    let delivered = &summary["delivered"];
    assert!(delivered["lateness_ms"]["max"].as_f64().unwrap() > 2000.0, "{delivered}");
    assert_eq!(delivered["bent"], false, "a wait for a slot is the plan: {delivered}");
    assert_eq!(delivered["peak_in_flight"], 1, "{delivered}");
    assert!(stdout.contains("Delivered load: ") && stdout.contains("Send lateness: "), "{stdout}");
    assert!(!stdout.contains("bent the load"), "{stdout}");
}
