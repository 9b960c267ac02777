//! Every run stamped VALID or INVALID with its reasons, end to end on the planner's simulated
//! engine (a known schedule on a virtual clock: no client lateness, no noise).

use std::cell::Cell;
use std::rc::Rc;

use crate::planner::{cost, limits, sim, spec};
use tokenmeter::bench::base::confidence::Decision;
use tokenmeter::bench::record::phases::Phases;
use tokenmeter::bench::record::run_config::Criteria;
use tokenmeter::bench::run::launch::EngineTarget;
use tokenmeter::bench::run::session;
use tokenmeter::bench::run::target::Listener;
use tokenmeter::bench::{self, LenRange, RunConfig, SessionSpec, Slo};

/// One session of `n` requests at 4 req/s on a simulated engine that is never loaded (20 ms
/// steps, one request at a time at that rate), with `slo`.
fn run(n: usize, slo: Option<&str>, criteria: Criteria) -> bench::BenchResult {
    let workload = spec(4.0, n, LenRange { min: 16, max: 32 }, LenRange { min: 4, max: 8 });
    let parsed: Option<Slo> = slo.map(|s| s.parse().unwrap());
    let mut engine = sim(cost(0.02, 1e-5, 1e-5, 0.0), limits(8, false));
    let prompt = |p: &bench::PlannedRequest| Ok(bench::random_prompt(workload.seed, p.id, p.prompt_len, 151_000));
    let mut target =
        EngineTarget::new(&mut engine, prompt, RunConfig { target: "local".into(), ..Default::default() }, None);
    let session = SessionSpec {
        size_rate: false,
        spec: &workload,
        rates: &[workload.rate],
        slo: parsed.as_ref(),
        slo_text: slo,
        lang: bench::Lang::En,
        baseline: false,
        ignore_eos: true,
        cost_per_hour: None,
        phases: Phases::default(),
        criteria,
    };
    let quiet: Listener = Rc::new(|_| {});
    pollster::block_on(session::run(&mut target, &session, &quiet, &Rc::new(Cell::new(false)))).unwrap().remove(0)
}

#[test]
fn a_p99_slo_is_invalid_on_16_requests_and_valid_on_enough() {
    let slo = Some("ttft_ms=1000");
    let short = run(16, slo, Criteria::default());
    let v = short.validity.clone().expect("stamped at the end of the run");
    assert!(!v.valid);
    let reasons = serde_json::to_value(&v.reasons).unwrap();
    assert_eq!(reasons[0]["reason"], "slo_undecided", "{reasons}");
    assert_eq!((reasons[0]["measured"].as_u64(), reasons[0]["needed"].as_u64()), (Some(16), Some(459)));
    let lines = bench::validity_lines(&short, bench::Lang::En).join("\n");
    assert!(lines.starts_with("Result: INVALID\n  - too few requests for the SLO's P99: 16 measured"), "{lines}");
    // 460 requests, every one within: early stopping supports the claim.
    let long = run(460, slo, Criteria::default());
    let v = long.validity();
    assert!(v.valid, "{:?}", v.reasons);
    assert_eq!(v.slo.map(|c| (c.measured, c.over, c.decision)), Some((460, 0, Decision::Met)));
    // The same run held to LoadGen's 600 s is too short (its arrivals span about 115 s).
    let strict = run(460, slo, Criteria { min_duration_s: Some(600.0), ..Criteria::default() });
    assert!(!strict.validity().valid);
    assert!(strict.validity().text(bench::Lang::En).contains("below the minimum 600 s"), "{:?}", strict.validity());
    // Saved and read back, the stamp is the same.
    let back: bench::BenchResult = serde_json::from_str(&serde_json::to_string(&strict).unwrap()).unwrap();
    assert_eq!(back.validity(), strict.validity());
}

/// A default-sized run (32 requests) without an SLO claims nothing: VALID, its P99 marked as one
/// its count cannot bound (P50 can be).
#[test]
fn a_default_run_without_an_slo_is_valid_with_its_p99_marked() {
    let result = run(32, None, Criteria::default());
    assert!(result.validity().valid, "{:?}", result.validity());
    assert_eq!(bench::validity_lines(&result, bench::Lang::En), ["Result: VALID"]);
    let report = bench::text_report(&result.metrics, None, bench::Lang::En);
    let ttft = report.lines().find(|l| l.starts_with("TTFT")).unwrap();
    let cells: Vec<&str> = ttft.split_whitespace().collect();
    // TTFT mean P50 P90 P95 P99 P99.9
    assert!(!cells[2].ends_with('*') && cells[5].ends_with('*'), "{ttft}");
    assert!(report.contains("* too few values to bound this percentile at 95%"), "{report}");
    let ci = &result.metrics.ttft_ms.ci95.as_ref().unwrap();
    let [lo, hi] = ci.p50.unwrap();
    assert!(lo <= result.metrics.ttft_ms.p50 && result.metrics.ttft_ms.p50 <= hi);
    assert!(ci.p99.is_none());
}
