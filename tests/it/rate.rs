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

/// Timing-sensitive: run alone, after the parallel tests (tests/it/main.rs).
mod alone {
    /// A target that stalls 3 s on its first request under `--max-concurrency 1`: the requests behind
    /// it wait for the slot, so the stall is in their TTFT from arrival and not from send, and the
    /// delivered load's check counts the wait as the plan (not bent), though sends were seconds late.
    /// Its bound on lateness beyond the plan is 10 ms of wall clock: it needs the machine to itself
    /// (beside the page's end-to-end test it read 17 ms at p99).
    #[test]
    fn a_stall_under_max_concurrency_shows_in_ttft_from_arrival_not_from_send() {
        use crate::serving::{bench, read_json, scratch, server, Reply};
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
        // This server answers its headers only once it serves a request: the first request's stall is
        // in its time to headers (the wait after the send that the send times cannot show), the others'
        // are not.
        let headers = &delivered["headers_ms"];
        assert!(headers["max"].as_f64().unwrap() > 2500.0 && headers["p50"].as_f64().unwrap() < 500.0, "{delivered}");
        assert!(stdout.contains("Send → headers: P50"), "{stdout}");
    }

    /// `bench --rate max` against the test server of known capacity: 2 slots taken first come, first
    /// served, 5 tokens 6 ms apart (about 65 requests/s). The true highest rate is the same criterion
    /// ([`max_rate::attainment_of`]) on that server's queue simulated on the same seeded arrivals at
    /// each rate (gaps scale as 1/rate), with the service time the runs measured; the rate found is
    /// within 10% of it, within the stated budget of runs. Its TTFT SLO is milliseconds: it needs the
    /// machine to itself (`alone`, as tests/it/main.rs says).
    #[test]
    fn the_highest_rate_found_is_within_10_percent_of_the_true_one() {
        use crate::serving::{read_json, scratch, server, Reply};
        use tokenmeter::bench::run::max_rate::{self, MaxRate};
        use tokenmeter::bench::{plan, BenchResult, RequestRecord, Slo, WorkloadSpec};
        let s = server(Reply { tokens: 5, gap_ms: 6, capacity: Some(2), stall_first_ms: 0 });
        let out = scratch("max-rate").join("out.json");
        let started = std::time::Instant::now();
        let run = std::process::Command::new(env!("CARGO_BIN_EXE_tokenmeter"))
            .args(["bench", "--endpoint", &s.url, "--rate", "max", "--slo", "ttft_ms=60", "--attainment", "0.9"])
            .args(["--num-requests", "100", "--input-len", "4", "--output-len", "5", "--seed", "3"])
            .args(["--json", out.to_str().unwrap()])
            .output()
            .unwrap();
        let (stdout, stderr) = (String::from_utf8_lossy(&run.stdout), String::from_utf8_lossy(&run.stderr));
        assert!(run.status.success(), "{stderr}");
        eprintln!("{stderr}{stdout}({:.0} s)", started.elapsed().as_secs_f64());
        let json = read_json(&out);
        let found: MaxRate = serde_json::from_value(json["max_rate"].clone()).unwrap();
        let results: Vec<BenchResult> = serde_json::from_value(json["results"].clone()).unwrap();
        assert!(found.converged && found.trials.len() <= found.max_runs, "{found:?}");
        assert_eq!(found.trials.len(), results.len(), "every deciding run is a full result");
        assert!(found.trials.iter().all(|t| t.result < results.len()));
        assert_eq!(found.limiting.as_ref().map(|l| l.0.as_str()), Some("ttft_ms"));
        let rate = found.rate.expect("a rate met the SLO");
        assert!(found.lo <= rate && rate < found.hi && found.hi <= found.lo * 1.05 + 1e-9, "{found:?}");
        assert!(stdout.contains("highest rate: ") && stderr.contains("trying "), "{stdout}");
        // The first guess is the probe's: a burst that decides no rate. A run decided while it ran
        // stops there (its requests never sent are not a user's stop), and its decision is its
        // verdict.
        assert!(found.trials[0].stage == max_rate::Stage::Probe && found.first_guess.contains("a probe"), "{found:?}");
        let decided: Vec<_> = found.trials.iter().filter(|t| t.decided.is_some()).collect();
        assert!(!decided.is_empty(), "{found:?}");
        for t in decided {
            let result = &results[t.result];
            assert_eq!(t.met, t.decided.as_ref().unwrap().met);
            let stopped = |r: &tokenmeter::bench::verdict::validity::Invalid| {
                matches!(r, tokenmeter::bench::verdict::validity::Invalid::StoppedByUser { .. })
            };
            assert!(!result.validity().reasons.iter().any(stopped), "{:?}", result.validity());
        }
        // What the search spent: every run's requests, and its seconds.
        assert_eq!(found.spent_requests, results.iter().map(|r| r.requests.len()).sum::<usize>());
        assert!(found.spent_s > 0.0 && stdout.contains(&format!("spent: {} requests", found.spent_requests)));

        // The server's queue, simulated: the slot is held from the first token to the last plus one
        // gap (the server sleeps after each chunk), as the runs measured it.
        let mut held: Vec<f64> =
            results.iter().flat_map(|r| &r.requests).filter_map(|r| Some(r.finish_s? - r.first_token_s?)).collect();
        held.sort_by(f64::total_cmp);
        let service_s = held[held.len() / 2] * 5.0 / 4.0;
        // What a request that finds a slot free waits for its first token all the same (the
        // client's send, a connection, the server's thread): the median over such requests.
        let mut alone: Vec<f64> = results
            .iter()
            .flat_map(|r| {
                let busy = |q: &RequestRecord| {
                    let t = q.sent_s.unwrap_or(q.arrival_s);
                    let holding = |o: &&RequestRecord| {
                        o.id != q.id && o.sent_s.is_some_and(|s| s < t) && o.finish_s.is_some_and(|f| f > t)
                    };
                    r.requests.iter().filter(holding).count() >= 2
                };
                r.requests.iter().filter(move |q| !busy(q)).filter_map(|q| q.ttft_s())
            })
            .collect();
        alone.sort_by(f64::total_cmp);
        let overhead_s = alone[alone.len() / 2];
        // The workload a full run is made of: the first deciding run's, at the count asked.
        let deciding = found.trials.iter().find(|t| t.stage != max_rate::Stage::Probe).unwrap();
        let spec = WorkloadSpec { num_requests: 100, ..results[deciding.result].config.workload.clone().unwrap() };
        let slo: Slo = "ttft_ms=60".parse().unwrap();
        let attained = |rate: f64| {
            let arrivals = plan(&WorkloadSpec { rate, ..spec.clone() }).unwrap();
            let mut free = [0.0f64; 2];
            let records: Vec<RequestRecord> = arrivals
                .iter()
                .map(|p| {
                    let arrival = p.arrival_s.unwrap();
                    let slot = if free[0] <= free[1] { 0 } else { 1 };
                    let start = free[slot].max(arrival);
                    free[slot] = start + service_s;
                    RequestRecord {
                        id: p.id,
                        arrival_s: arrival,
                        sent_s: Some(arrival),
                        first_token_s: Some(start + overhead_s),
                        token_times_s: vec![start + overhead_s, start + service_s],
                        finish_s: Some(start + service_s),
                        output_len: 2,
                        ..RequestRecord::default()
                    }
                })
                .collect();
            max_rate::attainment_of(&records, &slo).0
        };
        let grid = (0..800).map(|k| 1.0 * 1.005f64.powi(k)).take_while(|&r| r < 2.0 / service_s);
        let truth = grid.filter(|&r| attained(r) >= 0.9).fold(0.0, f64::max);
        eprintln!(
            "service {:.1} ms, first token alone {:.2} ms; true highest rate {truth:.2} req/s, found {rate:.2} req/s",
            service_s * 1000.0,
            overhead_s * 1000.0
        );
        assert!((rate - truth).abs() <= 0.1 * truth, "found {rate:.2} req/s, true {truth:.2} req/s");
    }
}

/// `--rate max` is the rate's other form in the run request, with its rules, each on its field.
#[test]
fn rate_max_is_a_form_of_the_rate_with_its_rules() {
    use tokenmeter::bench::base::field::Field;
    use tokenmeter::bench::base::rules::Rule;
    use tokenmeter::bench::request::RunRequest;
    let parse = |pairs: &[(Field, &str)]| {
        RunRequest::parse(&|f| pairs.iter().find(|p| p.0 == f).map(|p| p.1.to_string()), None)
    };
    let slo = (Field::Slo, "ttft_ms=200");
    let max = parse(&[(Field::Rate, "max"), slo, (Field::Attainment, "0.9")]).unwrap();
    assert!(max.rates.is_empty());
    assert_eq!((max.search.map(|s| s.attainment), max.attainment), (Some(0.9), 0.9));
    let broken =
        |pairs: &[(Field, &str)]| parse(pairs).unwrap_err().into_iter().map(|p| (p.field, p.rule)).collect::<Vec<_>>();
    assert!(broken(&[(Field::Rate, "max")]).contains(&(Field::Slo, Rule::RateMaxNeedsSlo)));
    let closed = broken(&[(Field::Rate, "max"), slo, (Field::Arrival, "concurrency")]);
    assert!(closed.contains(&(Field::Arrival, Rule::RateMaxOpenLoop)), "{closed:?}");
    assert!(broken(&[(Field::Rate, "1,max"), slo]).contains(&(Field::Rate, Rule::RateMaxAlone)));
    assert!(broken(&[(Field::Rate, "max"), slo, (Field::Attainment, "1.5")]).iter().any(|p| p.0 == Field::Attainment));
    let given = parse(&[(Field::Rate, "4")]).unwrap();
    assert_eq!((given.search, given.attainment, given.rates), (None, 0.99, vec![4.0]));
    // The CLI names the flag, before anything runs.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tokenmeter"))
        .args(["bench", "--synthetic", "tiny", "--rate", "max"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("--slo: rate max"), "{stderr}");
}

/// The engine's search on the planner's simulated engine (deterministic): the first run is sized
/// by its steps (the planner's fit needs 12), the planner's prediction from them is the first
/// guess, and the search narrows from there.
#[test]
fn the_engines_search_starts_from_the_planners_guess() {
    use std::cell::Cell;
    use std::rc::Rc;
    use tokenmeter::bench::record::phases::Phases;
    use tokenmeter::bench::run::launch::EngineTarget;
    use tokenmeter::bench::run::max_rate::{self, RateSearch, Searcher};
    use tokenmeter::bench::run::target::Listener;
    use tokenmeter::bench::{self, BenchResult, Lang, RunConfig, SessionSpec, Slo};
    let fixed = |n| LenRange { min: n, max: n };
    let mut engine = sim(cost(0.005, 2e-4, 0.0, 0.0), limits(8, true));
    let workload = spec(1.0, 2, fixed(32), fixed(2));
    let prompt = |p: &bench::PlannedRequest| Ok(bench::random_prompt(3, p.id, p.prompt_len, 151_000));
    let describe = RunConfig { target: "local".into(), model: Some("qwen3-0.6b".into()), ..RunConfig::default() };
    let mut target = EngineTarget::new(&mut engine, prompt, describe, None);
    let slo: Slo = "ttft_ms=40".parse().unwrap();
    let session = SessionSpec {
        size_rate: false,
        spec: &workload,
        rates: &[],
        slo: Some(&slo),
        slo_text: Some("ttft_ms=40"),
        lang: Lang::En,
        baseline: true,
        ignore_eos: true,
        cost_per_hour: None,
        phases: Phases::default(),
        criteria: Default::default(),
    };
    let (quiet, cancel): (Listener, _) = (Rc::new(|_| {}), Rc::new(Cell::new(false)));
    let mut results = Vec::new();
    let mut s = Searcher::new(&mut target, &session, RateSearch::new(0.9), &slo, &quiet, &cancel, &mut results);
    pollster::block_on(max_rate::first_run(&mut s)).unwrap();
    // 2 requests of 2 tokens give too few steps: the first run doubled until it gave 12.
    let sized = s.results.last().unwrap();
    assert!(sized.steps.len() >= 12 && sized.requests.len() > 2, "{} steps", sized.steps.len());
    // The planner refuses simulated runs as a source; these stand for measured ones.
    let as_measured: Vec<BenchResult> = s
        .results
        .iter()
        .cloned()
        .map(|r| BenchResult { config: RunConfig { simulated: None, ..r.config }, ..r })
        .collect();
    let cfg = tokenmeter::model::Qwen3Config::preset("qwen3-0.6b").unwrap();
    let guess =
        pollster::block_on(tokenmeter::planner::capacity::predicted_max_rate(&as_measured, &cfg, &slo, 0.9)).unwrap();
    let found = pollster::block_on(max_rate::search(s, guess, "the planner's prediction")).unwrap();
    let rate = found.rate.unwrap();
    eprintln!("guess {guess:.2} req/s, found {rate:.2} req/s in {} runs", found.trials.len());
    assert!(found.converged && found.trials.len() <= found.max_runs, "{found:?}");
    assert!(rate >= guess / 2.0 && rate <= guess * 2.0, "the guess brackets it: {guess} vs {rate}");
    assert!(found.hi <= found.lo * 1.05 + 1e-9);
    assert!(!found.no_limit_found(), "a missed rate bounds it: {found:?}");
}

/// A workload too small to show the limit: with an SLO every rate meets, the search rises until
/// every request is in before the first finishes, then stops there and says so, far inside its
/// budget of runs (it used to double the rate to the budget's end).
#[test]
fn a_search_stops_rising_once_the_whole_workload_is_in_at_once() {
    use std::cell::Cell;
    use std::rc::Rc;
    use tokenmeter::bench::record::phases::Phases;
    use tokenmeter::bench::run::launch::EngineTarget;
    use tokenmeter::bench::run::max_rate::{self, RateSearch, Searcher};
    use tokenmeter::bench::run::target::Listener;
    use tokenmeter::bench::{self, Lang, RunConfig, SessionSpec, Slo};
    let fixed = |n| LenRange { min: n, max: n };
    let mut engine = sim(cost(0.005, 2e-4, 0.0, 0.0), limits(8, true));
    let workload = spec(1.0, 8, fixed(32), fixed(4));
    let prompt = |p: &bench::PlannedRequest| Ok(bench::random_prompt(3, p.id, p.prompt_len, 151_000));
    let describe = RunConfig { target: "local".into(), ..RunConfig::default() };
    let mut target = EngineTarget::new(&mut engine, prompt, describe, None);
    let slo: Slo = "ttft_ms=100000".parse().unwrap();
    let session = SessionSpec {
        size_rate: false,
        spec: &workload,
        rates: &[],
        slo: Some(&slo),
        slo_text: Some("ttft_ms=100000"),
        lang: Lang::En,
        baseline: false,
        ignore_eos: true,
        cost_per_hour: None,
        phases: Phases::default(),
        criteria: Default::default(),
    };
    let (quiet, cancel): (Listener, _) = (Rc::new(|_| {}), Rc::new(Cell::new(false)));
    let mut results = Vec::new();
    let found = {
        let mut s = Searcher::new(&mut target, &session, RateSearch::new(0.9), &slo, &quiet, &cancel, &mut results);
        pollster::block_on(max_rate::first_run(&mut s)).unwrap();
        pollster::block_on(max_rate::search(s, 1.0, "a rising sweep")).unwrap()
    };
    assert!(found.whole_workload_at_once && !found.converged, "{found:?}");
    assert!(found.hi.is_nan() && found.rate == Some(found.lo), "{found:?}");
    assert!(found.no_limit_found(), "every rate met: the headline says no limit was found");
    assert!(found.trials.len() < found.max_runs / 2, "{} runs", found.trials.len());
    // The last run had every request in before the first finished.
    let last = &results[found.trials.last().unwrap().result].requests;
    let last_arrival = last.iter().map(|r| r.arrival_s).fold(0.0, f64::max);
    assert!(last.iter().all(|r| r.finish_s.unwrap() > last_arrival));
}

/// An SLO that one request alone already breaks: the search answers at its baseline, before any
/// run (it used to halve the rate without end, each run longer than the last).
#[test]
fn a_search_for_an_slo_the_baseline_breaks_ends_at_the_baseline() {
    use std::cell::Cell;
    use std::rc::Rc;
    use tokenmeter::bench::record::phases::Phases;
    use tokenmeter::bench::run::launch::EngineTarget;
    use tokenmeter::bench::run::max_rate::{self, RateSearch};
    use tokenmeter::bench::run::target::{Listener, SessionEvent};
    use tokenmeter::bench::{self, Lang, RunConfig, SessionSpec, Slo};
    let mut engine = sim(cost(0.005, 2e-4, 0.0, 0.0), limits(8, true));
    let workload = spec(1.0, 8, LenRange { min: 16, max: 32 }, LenRange { min: 4, max: 8 });
    let prompt = |p: &bench::PlannedRequest| Ok(bench::random_prompt(3, p.id, p.prompt_len, 151_000));
    let mut target =
        EngineTarget::new(&mut engine, prompt, RunConfig { target: "local".into(), ..Default::default() }, None);
    let slo: Slo = "ttft_ms=0.001".parse().unwrap();
    let session = SessionSpec {
        size_rate: false,
        spec: &workload,
        rates: &[],
        slo: Some(&slo),
        slo_text: Some("ttft_ms=0.001"),
        lang: Lang::En,
        baseline: true,
        ignore_eos: true,
        cost_per_hour: None,
        phases: Phases::default(),
        criteria: Default::default(),
    };
    let rates_started = Rc::new(Cell::new(0));
    let counted = rates_started.clone();
    let listener: Listener = Rc::new(move |e| {
        if let SessionEvent::RateStarted { .. } = e {
            counted.set(counted.get() + 1)
        }
    });
    let mut results = Vec::new();
    let cancel = Rc::new(Cell::new(false));
    let search =
        max_rate::find(&mut target, &session, RateSearch::new(0.9), &slo, None, &listener, &cancel, &mut results);
    let found = pollster::block_on(search).unwrap();
    let unreachable = found.unreachable.as_ref().expect("the baseline breaks it");
    assert_eq!((unreachable.objective.as_str(), unreachable.limit_ms), ("ttft_ms", 0.001));
    assert!(unreachable.alone_ms > 0.001, "{unreachable:?}");
    assert_eq!((rates_started.get(), results.len(), found.trials.len(), found.rate), (0, 0, 0, None));
    let text = unreachable.text(Lang::En);
    assert!(text.starts_with("no rate can meet ttft_ms=0.001: one request alone"), "{text}");
    // A reachable SLO still searches.
    let loose: Slo = "ttft_ms=100000".parse().unwrap();
    assert!(max_rate::Unreachable::of(
        &bench::Baseline { ttft_ms: 5.0, tpot_ms: 1.0, requests: 3, error: None },
        &loose,
        8
    )
    .is_none());
}
