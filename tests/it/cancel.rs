//! Cancellations as a workload (`--cancel-share`, `--cancel-after-ms`): the requests the seed
//! chooses are aborted that long after they are sent — on the engine through `Engine::cancel`,
//! against a server by closing the request's stream — and recorded as cancelled, not failed; the
//! engine's KV blocks all come back.

use crate::bench::{drive, tiny_engine};
use crate::serving::{bench, read_json, scratch, server, Reply};

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use tokenmeter::bench::{self, Arrival, Cancellations, CancelledBy, DelayRange, LenRange, RequestRecord, WorkloadSpec};

/// A quarter of the requests, 50 ms after each is sent.
const QUARTER_AFTER_50_MS: Cancellations =
    Cancellations { share: 0.25, after_s: DelayRange { min_s: 0.05, max_s: 0.05 } };

fn spec(num_requests: usize, output_len: usize, cancel: Option<Cancellations>) -> WorkloadSpec {
    WorkloadSpec {
        arrival: Arrival::Poisson,
        rate: 40.0,
        burstiness: 1.0,
        concurrency: 1,
        span: bench::ArrivalSpan::Drawn,
        num_requests,
        input_len: LenRange { min: 4, max: 4 },
        output_len: LenRange { min: output_len, max: output_len },
        seed: 0,
        dataset: None,
        max_concurrency: None,
        saturation_stop: false,
        shared_prefix: None,
        conversations: None,
        cancel,
    }
}

/// The ids the workload's seed chooses to cancel.
fn chosen(spec: &WorkloadSpec) -> BTreeSet<u64> {
    (0..spec.num_requests as u64).filter(|&id| spec.cancel_after_s(id).is_some()).collect()
}

fn cancelled_ids(records: &[RequestRecord]) -> BTreeSet<u64> {
    records.iter().filter(|r| r.cancelled_by() == Some(CancelledBy::Workload)).map(|r| r.id).collect()
}

/// 40 requests of 300 tokens (far longer than 50 ms of decoding on any adapter here): exactly the
/// chosen ones end cancelled, each at least 50 ms after it was released and with fewer tokens
/// than asked; the others complete; none fails; every KV block is free at the end.
#[test]
fn the_engine_cancels_the_chosen_requests_and_frees_their_blocks() {
    pollster::block_on(async {
        let spec = spec(40, 300, Some(QUARTER_AFTER_50_MS));
        let chosen = chosen(&spec);
        assert!((4..=18).contains(&chosen.len()), "the seed's draw of a quarter of 40: {}", chosen.len());
        let mut engine = tiny_engine(16).await;
        let (records, steps) = drive(&mut engine, &spec).await;
        assert_eq!(cancelled_ids(&records), chosen);
        for r in records.iter().filter(|r| chosen.contains(&r.id)) {
            let at_s = r.cancelled.unwrap().at_s;
            assert!(at_s >= r.arrival_s + 0.05, "request {} cancelled {at_s} s, before its 50 ms", r.id);
            assert!(r.output_len < 300 && r.finish_s.is_none() && r.error.is_none(), "{r:?}");
        }
        let m = bench::summarize(&records, &steps, None, 0.25);
        assert_eq!((m.completed, m.failed), (40 - chosen.len(), 0), "{:?}", m.errors);
        assert_eq!(m.cancelled.get("workload"), Some(&chosen.len()));
        let blocks = engine.kv_allocator();
        assert_eq!(blocks.free_ids().len(), blocks.total(), "KV blocks still in use after the run");
        assert!(!engine.has_work());
    });
}

/// The same workload against a server whose replies last 200 ms: the chosen requests are closed
/// 50 ms after their send (the server sees the connection go), counted as cancelled by the
/// workload in the JSON and the report, and none fails.
#[test]
fn a_server_run_closes_the_chosen_streams() {
    let s = server(Reply { tokens: 20, gap_ms: 10, capacity: None, stall_first_ms: 0 });
    let dir = scratch("cancel");
    let out = dir.join("out.json");
    let args = [
        "--rate",
        "40",
        "--num-requests",
        "40",
        "--input-len",
        "4",
        "--output-len",
        "20",
        "--cancel-share",
        "0.25",
        "--cancel-after-ms",
        "50",
        "--json",
        out.to_str().unwrap(),
    ];
    let (ok, stdout, stderr) = bench(&s.url, &args);
    assert!(ok, "{stderr}");
    let json = read_json(&out);
    let chosen = chosen(&spec(40, 20, Some(QUARTER_AFTER_50_MS)));
    let records: Vec<RequestRecord> = serde_json::from_value(json["requests"].clone()).unwrap();
    assert_eq!(cancelled_ids(&records), chosen);
    for r in records.iter().filter(|r| chosen.contains(&r.id)) {
        let (at_s, sent_s) = (r.cancelled.unwrap().at_s, r.sent_s.unwrap());
        assert!(at_s >= sent_s + 0.05 && r.output_len < 20, "{r:?}");
    }
    let summary = &json["summary"];
    assert_eq!(summary["failed"], 0, "{summary}");
    assert_eq!(summary["cancelled"]["workload"], chosen.len());
    assert_eq!(json["run_config"]["workload"]["cancel"]["share"], 0.25);
    let n = chosen.len();
    assert!(stdout.contains(&format!("Cancelled: {n} (by the workload × {n};")), "{stdout}");
    // Every closed stream ended its server thread early: none is left in flight.
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(s.in_flight.load(Ordering::SeqCst), 0);
    assert!(s.aborted.load(Ordering::SeqCst) >= 1, "the server never saw a closed stream");
}

/// Bad pairs are one clear error each, before anything is sent.
#[test]
fn a_share_without_a_delay_or_out_of_range_is_refused() {
    for (args, says) in [
        (&["--cancel-share", "0.25"][..], "give both the share and the delay"),
        (&["--cancel-share", "1.5", "--cancel-after-ms", "50"][..], "from 0 to 1"),
        (&["--cancel-share", "0", "--cancel-after-ms", "50"][..], "must be above 0"),
        (&["--cancel-share", "0.5", "--cancel-after-ms", "200:50"][..], "cancel after \"200:50\""),
    ] {
        let (ok, _, stderr) = bench("http://127.0.0.1:9/v1", args);
        assert!(!ok && stderr.contains(says), "{args:?}: {stderr}");
    }
}
