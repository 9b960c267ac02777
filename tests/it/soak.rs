//! Soak tests, bounded to run in the normal suite (each well under a minute on lavapipe):
//! - `tokenmeter soak` on the tiny fixture: hundreds of Poisson requests on 48 KV blocks, so
//!   sequences are preempted; every event checked, every block returned, memory flat. The full
//!   2,000-request soak is the same command without `--num-requests` (BENCHMARKS.md has its figures).
//! - The remote benchmark session against a real llama-server that is killed and restarted in
//!   the middle of a Poisson run: the run completes and every request is recorded once, as a
//!   success or as a failure with its error kind. Skipped without the server, as in
//!   tests/it/remote.rs, unless TOKENMETER_REQUIRE_PEER=1.

use crate::common;

use std::cell::Cell;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::rc::Rc;
use std::thread;
use std::time::{Duration, Instant};

use common::fixture_dir;
use tokenmeter::bench::run::session;
use tokenmeter::bench::run::target::Listener;
use tokenmeter::bench::{random_prompt, Arrival, LenRange, SessionSpec, WorkloadSpec};
use tokenmeter::remote::native::{Client, ServerTarget};
use tokenmeter::remote::{Api, BaseUrl, Endpoint, Prompt, RemoteSetup};

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tokenmeter-soak-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs `tokenmeter soak` on the tiny fixture; returns (exit code, stdout, stderr, report JSON).
fn soak(name: &str, args: &[&str]) -> (i32, String, String, serde_json::Value) {
    let json = scratch(name).join("soak.json");
    let model = fixture_dir("tiny-gqa-tied");
    let out = Command::new(env!("CARGO_BIN_EXE_tokenmeter"))
        .arg("soak")
        .arg("--model")
        .arg(&model)
        .args(args)
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    let (stdout, stderr) =
        (String::from_utf8_lossy(&out.stdout).to_string(), String::from_utf8_lossy(&out.stderr).to_string());
    let report = std::fs::read_to_string(&json).map_or(serde_json::Value::Null, |t| serde_json::from_str(&t).unwrap());
    (out.status.code().unwrap_or(-1), stdout, stderr, report)
}

#[test]
fn engine_soak_under_kv_pressure() {
    let start = Instant::now();
    let (code, stdout, stderr, r) =
        soak("engine", &["--num-requests", "400", "--rate", "50", "--seed", "11", "--warmup", "100"]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    eprintln!("{stdout}(in {:.1} s)", start.elapsed().as_secs_f64());
    assert_eq!(r["violation_count"], 0, "{}", r["violations"]);
    assert_eq!(r["failures"], serde_json::json!([]));
    assert_eq!((r["requests"].as_u64(), r["finished"].as_u64()), (Some(400), Some(400)));
    // Each kind of request was there: preempted ones, ones ended by a stop id, golden ones.
    assert!(r["preemptions"].as_u64().unwrap() > 0);
    assert!(r["finished_by_stop"].as_u64().unwrap() > 0);
    assert_eq!(r["golden_checked"], 40, "one request in 10 is a reference case");
    assert_eq!((r["kv_blocks_in_use_at_end"].as_u64(), r["kv_blocks_total"].as_u64()), (Some(0), Some(48)));
    let (warm, end) = (r["rss_after_warmup_bytes"].as_u64().unwrap(), r["rss_end_bytes"].as_u64().unwrap());
    assert!(end <= warm + 32_000_000, "RSS {warm} -> {end} bytes");
    // Output tokens: every Length-finished request made exactly its planned count, which the
    // ledger checked; the total is the sum of what the requests made.
    assert!(r["output_tokens"].as_u64().unwrap() >= 400);
}

#[test]
fn engine_soak_under_kv_pressure_with_prefix_cache() {
    // Random prompts behind two shared 16-token prefixes hit the cache while blocks are
    // preempted, evicted and shared; the golden requests (reference prompts, exact outputs) run
    // among them.
    let start = Instant::now();
    let args = ["--num-requests", "200", "--rate", "50", "--seed", "12", "--warmup", "50", "--prefix-cache"];
    let args = [&args[..], &["--input-len", "20:64", "--shared-prefix-len", "16", "--prefix-groups", "2"]].concat();
    let (code, stdout, stderr, r) = soak("prefix", &args);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    eprintln!("{stdout}(in {:.1} s)", start.elapsed().as_secs_f64());
    assert_eq!(r["violation_count"], 0, "{}", r["violations"]);
    assert_eq!(r["finished"].as_u64(), Some(200));
    assert!(r["preemptions"].as_u64().unwrap() > 0);
    assert_eq!(r["golden_checked"], 20);
    assert!(r["cached_prompt_tokens"].as_u64().unwrap() > 0, "no prefix cache hit");
    assert_eq!((r["kv_blocks_in_use_at_end"].as_u64(), r["kv_blocks_total"].as_u64()), (Some(0), Some(48)));
}

/// A quarter of the requests cancelled 5–40 ms after submission, under KV pressure: the ledger
/// expects exactly their cancelled finishes (a golden one's tokens must still be a prefix of its
/// reference), every block comes back, and the rest finish.
#[test]
fn engine_soak_with_cancellations() {
    let args = ["--num-requests", "200", "--rate", "50", "--seed", "13", "--warmup", "50"];
    let args = [&args[..], &["--cancel-share", "0.25", "--cancel-after-ms", "5:40"]].concat();
    let (code, stdout, stderr, r) = soak("cancel", &args);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert_eq!(r["violation_count"], 0, "{}", r["violations"]);
    let (finished, cancelled) = (r["finished"].as_u64().unwrap(), r["cancelled"].as_u64().unwrap());
    assert!(cancelled > 10 && finished + cancelled == 200, "{finished} finished, {cancelled} cancelled");
    assert!(r["preemptions"].as_u64().unwrap() > 0);
    assert_eq!((r["kv_blocks_in_use_at_end"].as_u64(), r["kv_blocks_total"].as_u64()), (Some(0), Some(48)));
    assert!(stdout.contains(&format!("Cancelled by the workload: {cancelled}")), "{stdout}");
}

#[test]
fn engine_soak_fails_when_it_proves_nothing_or_requests_are_refused() {
    // A cache large enough for everything: no preemption, so the run does not count as a soak.
    let (code, stdout, stderr, r) = soak("roomy", &["--num-requests", "20", "--kv-blocks", "2000"]);
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    assert!(stderr.contains("no request was preempted"), "{stderr}");
    assert_eq!(r["preemptions"], 0);
    // A cache too small for the 332-token reference case (request 30): it is refused, which is a
    // violation.
    let (code, stdout, stderr, r) = soak("tiny-cache", &["--num-requests", "40", "--kv-blocks", "24"]);
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    assert!(stderr.contains("refused") && stderr.contains("do not fit the KV cache"), "{stderr}");
    assert!(r["violation_count"].as_u64().unwrap() > 0);
}

// ---------------------------------------------------------------------------------------------
// llama-server killed and restarted mid-run.

/// A llama-server process, killed when dropped (also when the test panics).
struct Peer(Child);

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts llama-server on `port` and waits until it answers /health.
fn start_peer(server: &Path, port: u16) -> Peer {
    let gguf = fixture_dir("peer/qwen3-tiny.gguf");
    let child = Command::new(server)
        .arg("-m")
        .arg(&gguf)
        .args(["--alias", "qwen3-tiny", "--host", "127.0.0.1", "--port", &port.to_string()])
        .args(["-t", "1", "-c", "4096", "-np", "4", "--no-webui"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("llama-server starts");
    let mut peer = Peer(child);
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(60) {
        if let Ok(Some(status)) = peer.0.try_wait() {
            panic!("llama-server exited at start (port {port} not free again?): {status}");
        }
        if health_ok(port) {
            return peer;
        }
        thread::sleep(Duration::from_millis(50));
    }
    panic!("llama-server did not come up on port {port} within 60 s");
}

fn health_ok(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else { return false };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let request = format!("GET /health HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\nconnection: close\r\n\r\n");
    let mut reply = String::new();
    s.write_all(request.as_bytes()).is_ok() && s.read_to_string(&mut reply).is_ok() && reply.starts_with("HTTP/1.1 200")
}

#[test]
fn llama_server_killed_and_restarted_mid_soak() {
    let Some(server) = common::llama_server("the llama-server soak") else { return };
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let first = start_peer(&server, port);
    // 120 requests over about 12 s; the server dies at 4 s and is started again at 6 s.
    let spec = WorkloadSpec {
        cancel: None,
        arrival: Arrival::Poisson,
        rate: 10.0,
        burstiness: 1.0,
        concurrency: 1,
        num_requests: 120,
        input_len: LenRange { min: 8, max: 32 },
        output_len: LenRange { min: 8, max: 24 },
        seed: 5,
        span: Default::default(),
        dataset: None,
        max_concurrency: None,
        saturation_stop: false,
        shared_prefix: None,
        conversations: None,
    };
    let (kill_at, restart_at) = (Duration::from_secs(4), Duration::from_secs(6));
    let t0 = Instant::now();
    let faults = thread::spawn(move || {
        thread::sleep(kill_at.saturating_sub(t0.elapsed()));
        drop(first); // SIGKILL: streams in flight are cut, new connections refused
        let down_s = t0.elapsed().as_secs_f64();
        thread::sleep(restart_at.saturating_sub(t0.elapsed()));
        let second = start_peer(&server, port);
        (second, down_s, t0.elapsed().as_secs_f64())
    });
    let endpoint = Endpoint {
        base_url: BaseUrl::parse(&format!("http://127.0.0.1:{port}/v1")).unwrap(),
        model: "qwen3-tiny".into(),
        api: Api::Completions,
        api_key: None,
        thinking: None,
    };
    let client = Client::new(endpoint).unwrap();
    let prompt = |p: &tokenmeter::bench::PlannedRequest| {
        Ok(Prompt::Ids(random_prompt(
            spec.seed,
            p.id,
            p.prompt_len,
            tokenmeter::bench::traffic::prompts::FIRST_SPECIAL_TOKEN,
        )))
    };
    let setup = RemoteSetup {
        prompt: &prompt,
        timeout_s: 10.0,
        prompts: "token ids",
        client: "native",
        gpus: None,
        server_metrics: None,
        gpu_metrics: None,
        decide: None,
    };
    let mut target = ServerTarget { client: &client, setup };
    let session_spec = SessionSpec {
        size_rate: false,
        spec: &spec,
        rates: &[spec.rate],
        slo: None,
        slo_text: None,
        lang: tokenmeter::bench::Lang::En,
        baseline: false,
        ignore_eos: true,
        cost_per_hour: None,
        phases: Default::default(),
        criteria: Default::default(),
    };
    let listener: Listener = Rc::new(|_| {});
    let cancel = Rc::new(Cell::new(false));
    // The client's clock starts a moment after the test's: arrivals are on a clock up to that
    // moment late, which the margins below absorb.
    let results = pollster::block_on(session::run(&mut target, &session_spec, &listener, &cancel)).unwrap();
    let (_second, down_s, up_s) = faults.join().expect("the fault thread ran");
    assert_eq!(results.len(), 1);
    let result = &results[0];
    let records = &result.requests;

    // Every planned request recorded exactly once.
    let mut ids: Vec<u64> = records.iter().map(|r| r.id).collect();
    ids.sort_unstable();
    assert_eq!(ids, (0..120).collect::<Vec<u64>>(), "each request once");
    let (done, failed): (Vec<_>, Vec<_>) = records.iter().partition(|r| r.succeeded());
    eprintln!(
        "killed at {down_s:.2} s, up again at {up_s:.2} s: {} succeeded, {} failed ({:?})",
        done.len(),
        failed.len(),
        failed.iter().map(|r| (r.id, r.arrival_s, r.error_kind().unwrap())).collect::<Vec<_>>()
    );
    for r in &done {
        assert_eq!(Some(r.output_len), r.requested_output_len, "request {} ran short", r.id);
        assert!(r.token_times_s.windows(2).all(|w| w[0] <= w[1]), "request {}", r.id);
    }
    // The outage failed requests, each with a kind that says what happened, and only requests
    // that were in flight at the kill (sent at most 10 s, the timeout, before) or sent while the
    // server was down.
    assert!(!failed.is_empty(), "the outage failed nothing");
    for r in &failed {
        let kind = r.error_kind().unwrap();
        assert!(["connect", "stream closed early", "network", "http 503"].contains(&kind), "{:?}", r.error);
        assert!(
            r.arrival_s <= up_s + 0.5,
            "request {} arrived at {} s, after the restart: {:?}",
            r.id,
            r.arrival_s,
            r.error
        );
    }
    // Before the kill and after the restart, the server answered.
    assert!(done.iter().any(|r| r.finish_s.unwrap() < down_s), "nothing succeeded before the kill");
    let after: Vec<_> = records.iter().filter(|r| r.arrival_s > up_s + 0.5).collect();
    assert!(!after.is_empty() && after.iter().all(|r| r.succeeded()), "the client did not recover after the restart");
    // The result kept them all, and its summary counts what the records say.
    assert_eq!((result.metrics.completed, result.metrics.failed), (done.len(), failed.len()));
}
