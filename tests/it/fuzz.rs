//! A seeded mutation fuzzer for every parser of untrusted bytes: the safetensors header, the
//! shard index, `config.json`, the SSE parser and the OpenAI chunk parser. No cargo-fuzz (it needs
//! nightly): inputs start from `tests/fuzz-corpus/<target>/`, are mutated by [`Mutator`] (byte
//! edits, splices, JSON tokens and boundary numbers), and each run is checked for what a parser of
//! untrusted input owes: no panic, memory bounded by the input (a counting allocator), an error
//! that is one line of bounded length, and each target's own invariants on what it accepts.
//! Inputs whose outcome is new (an error kind not seen yet) join the corpus, a cheap stand-in for
//! coverage feedback.
//!
//! `cargo test --release --test fuzz` runs each target for a fixed number of executions from a
//! fixed seed (a few seconds). The long mode runs each target for a while from a random seed and
//! prints executions and findings per target; findings are written to `target/fuzz-findings/`:
//!
//! ```sh
//! TOKENMETER_FUZZ_SECS=1800 cargo test --release --test fuzz -- --ignored --nocapture
//! TOKENMETER_FUZZ_SECS=60 TOKENMETER_FUZZ_TARGETS=sse,openai TOKENMETER_FUZZ_SEED=7 cargo test …
//! ```

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::collections::BTreeSet;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use tokenmeter::model::checkpoint::{expected_tensors, Checkpoint};
use tokenmeter::model::safetensors::{header_len, parse_header};
use tokenmeter::model::source::MemStore;
use tokenmeter::model::Qwen3Config;
use tokenmeter::remote::openai::{http_error_text, parse_chunk, parse_models};
use tokenmeter::remote::sse::{SseEvent, SseParser};

// ---- Memory: live and peak bytes allocated by this thread during one execution ----

struct Counting;

thread_local! {
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn count(delta: isize) {
    // `try_with`: allocations while the thread is being torn down are not counted.
    let _ = LIVE.try_with(|live| {
        let now = live.get() + delta;
        live.set(now);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(now)));
    });
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size() as isize);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(-(layout.size() as isize));
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size as isize - layout.size() as isize);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Peak bytes allocated (and not yet freed) by this thread while `f` ran.
fn peak_bytes<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = LIVE.with(Cell::get);
    PEAK.with(|p| p.set(base));
    let out = f();
    (out, (PEAK.with(Cell::get) - base).max(0) as usize)
}

// ---- A small seeded generator and the mutator ----

/// SplitMix64: tiny, seedable, good enough to pick mutations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Tokens worth inserting into any of the formats: JSON structure, the fields the parsers look
/// for, numbers at the edges of u32/u64/i64/f64, and SSE line breaks and fields.
const DICTIONARY: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    "\"",
    ":",
    ",",
    "null",
    "true",
    "false",
    "0",
    "-1",
    "1e309",
    "-0",
    "0.5",
    "4294967295",
    "4294967296",
    "9223372036854775807",
    "9223372036854775808",
    "18446744073709551615",
    "18446744073709551616",
    "2147483648",
    "1048577",
    "\"dtype\"",
    "\"shape\"",
    "\"data_offsets\"",
    "\"BF16\"",
    "\"F16\"",
    "\"F32\"",
    "\"I64\"",
    "\"__metadata__\"",
    "\"weight_map\"",
    "\"model.norm.weight\"",
    "\"lm_head.weight\"",
    "\"model-00001-of-00003.safetensors\"",
    "\"../x\"",
    "\"vocab_size\"",
    "\"num_hidden_layers\"",
    "\"num_attention_heads\"",
    "\"head_dim\"",
    "\"max_position_embeddings\"",
    "\"eos_token_id\"",
    "\"rope_parameters\"",
    "\"rope_type\"",
    "\"tie_word_embeddings\"",
    "\"model_type\"",
    "\"choices\"",
    "\"usage\"",
    "\"delta\"",
    "\"content\"",
    "\"text\"",
    "\"logprobs\"",
    "\"tokens\"",
    "\"error\"",
    "\"message\"",
    "\"finish_reason\"",
    "\"completion_tokens\"",
    "\"data\"",
    "\"id\"",
    "data: ",
    "data:",
    "event: ",
    ": ",
    "\n",
    "\r",
    "\r\n",
    "\n\n",
    "[DONE]",
    "\u{fffd}",
    "\\u0000",
    "\\ud800",
    "你好",
];

struct Mutator {
    rng: Rng,
}

impl Mutator {
    /// One to eight edits of `input`, sometimes spliced with `other`; at most `max_len` bytes.
    fn mutate(&mut self, input: &[u8], other: &[u8], max_len: usize) -> Vec<u8> {
        let mut out = input.to_vec();
        for _ in 0..1 + self.rng.below(8) {
            self.edit(&mut out, other);
        }
        out.truncate(max_len);
        out
    }

    fn edit(&mut self, out: &mut Vec<u8>, other: &[u8]) {
        let rng = &mut self.rng;
        let at = rng.below(out.len() + 1);
        match rng.below(10) {
            0 if !out.is_empty() => {
                let i = rng.below(out.len());
                out[i] ^= 1 << rng.below(8);
            }
            1 if !out.is_empty() => {
                let i = rng.below(out.len());
                out[i] = *rng.pick(&[0, 0x7f, 0x80, 0xff, b'"', b'\\', b'{', b'\n', b'0', b'9']);
            }
            2 if !out.is_empty() => {
                let start = rng.below(out.len());
                let end = (start + 1 + rng.below(16)).min(out.len());
                out.drain(start..end);
            }
            3 | 4 => {
                let token = rng.pick(DICTIONARY).as_bytes();
                out.splice(at..at, token.iter().copied());
            }
            5 => {
                // Replace a number (the digits around `at`) with a boundary number.
                let is_digit = |b: &u8| b.is_ascii_digit();
                let Some(start) = out.iter().skip(at).position(is_digit).map(|p| p + at) else { return };
                let end = out[start..].iter().position(|b| !is_digit(b)).map_or(out.len(), |p| p + start);
                let number = rng.pick(&DICTIONARY[10..22]).as_bytes();
                out.splice(start..end, number.iter().copied());
            }
            6 if !out.is_empty() => {
                // Duplicate a span (repeated keys, repeated events).
                let start = rng.below(out.len());
                let end = (start + 1 + rng.below(64)).min(out.len());
                let span = out[start..end].to_vec();
                let to = rng.below(out.len() + 1);
                out.splice(to..to, span);
            }
            7 if !other.is_empty() => {
                // Splice: our head, the other's tail.
                let cut = rng.below(other.len());
                out.truncate(at);
                out.extend_from_slice(&other[cut..]);
            }
            8 if out.len() >= 8 => {
                // The 8 bytes of a safetensors length prefix, or anywhere: a boundary u64.
                let value: u64 = *rng.pick(&[0, 1, 7, 8, u32::MAX as u64, 1 << 31, 1 << 63, u64::MAX, 100_000_001]);
                let i = if rng.below(2) == 0 { 0 } else { rng.below(out.len() - 7) };
                out[i..i + 8].copy_from_slice(&value.to_le_bytes());
            }
            _ => {
                let byte = rng.next() as u8;
                out.insert(at, byte);
            }
        }
    }
}

// ---- The targets ----

/// What one execution did: accepted (with a short description of what, for feedback), or
/// refused with an error (its text).
enum Outcome {
    Accepted(String),
    Refused(String),
}

struct Target {
    name: &'static str,
    /// Inputs are cut to this length.
    max_len: usize,
    run: fn(&[u8]) -> Outcome,
}

const TARGETS: [Target; 5] = [
    Target { name: "safetensors", max_len: 1 << 14, run: run_safetensors },
    Target { name: "index", max_len: 1 << 14, run: run_index },
    Target { name: "config", max_len: 1 << 13, run: run_config },
    Target { name: "sse", max_len: 1 << 13, run: run_sse },
    Target { name: "openai", max_len: 1 << 12, run: run_openai },
];

/// Error text must be one line, of bounded length, whatever the input held.
fn refused(e: impl std::fmt::Display) -> Outcome {
    let text = e.to_string();
    assert!(!text.contains(['\n', '\r']), "a multi-line error: {text:?}");
    assert!(text.len() <= 2000, "an error of {} bytes", text.len());
    Outcome::Refused(text)
}

/// The whole file: length prefix, header, data. An accepted header must describe tensors that
/// lie in the data section, do not overlap, and whose shapes match their byte counts.
fn run_safetensors(bytes: &[u8]) -> Outcome {
    let len = bytes.len() as u64;
    let n = match header_len("fuzz.safetensors", bytes, len) {
        Ok(n) => n as usize,
        Err(e) => return refused(e),
    };
    let header = match parse_header("fuzz.safetensors", &bytes[8..8 + n], len) {
        Ok(h) => h,
        Err(e) => return refused(e),
    };
    let mut ranges = Vec::new();
    for (name, t) in &header.tensors {
        assert!(8 + n as u64 <= t.begin && t.begin <= t.end && t.end <= len, "{name}: range {t:?}");
        let bytes_by_shape = t.shape.iter().try_fold(t.dtype.size() as u64, |acc, &d| acc.checked_mul(d as u64));
        assert_eq!(bytes_by_shape, Some(t.len_bytes()), "{name}: shape vs bytes");
        if t.end > t.begin {
            ranges.push((t.begin, t.end));
        }
    }
    ranges.sort();
    assert!(ranges.windows(2).all(|w| w[0].1 <= w[1].0), "overlapping tensors accepted");
    Outcome::Accepted(format!("{} tensors", header.tensors.len().min(4)))
}

/// The fixture `tiny-untied` (three shards) with the fuzzed bytes as its index, through the
/// loader's own `Checkpoint::open`. Accepted: every tensor the config implies was found.
fn run_index(bytes: &[u8]) -> Outcome {
    thread_local! {
        static STORE: MemStore = {
            let dir = fixture("tiny-untied");
            let mut store = MemStore::new("fuzz");
            for entry in std::fs::read_dir(&dir).expect("fixture") {
                let path = entry.expect("entry").path();
                let name = path.file_name().unwrap().to_str().unwrap().to_string();
                if name != "model.safetensors.index.json" {
                    store = store.with(&name, std::fs::read(&path).expect("read"));
                }
            }
            store
        };
    }
    let mut store = STORE.with(MemStore::clone);
    store.files.insert("model.safetensors.index.json".into(), std::sync::Arc::new(bytes.to_vec()));
    match pollster::block_on(Checkpoint::open(&store)) {
        Ok(c) => {
            assert!(!c.file_names().is_empty());
            Outcome::Accepted(format!("{} files", c.file_names().len()))
        }
        Err(e) => refused(e),
    }
}

/// `config.json`. An accepted config must be within the limits, so that everything sized from
/// it (widths, the tensor list) is computed without overflow.
fn run_config(bytes: &[u8]) -> Outcome {
    let text = String::from_utf8_lossy(bytes);
    match Qwen3Config::from_json(&text) {
        Ok(cfg) => {
            use tokenmeter::limits::*;
            assert!(cfg.num_hidden_layers <= MAX_LAYERS && cfg.max_position_embeddings <= MAX_POSITIONS);
            assert!(cfg.q_dim() > 0 && cfg.kv_dim() > 0 && cfg.vocab_size <= MAX_VOCAB);
            assert!(cfg.params_per_token() > 0);
            assert_eq!(
                expected_tensors(&cfg).len(),
                2 + 11 * cfg.num_hidden_layers + !cfg.tie_word_embeddings as usize
            );
            Outcome::Accepted(format!("tied {}, eos {}", cfg.tie_word_embeddings, cfg.eos_token_ids.len().min(3)))
        }
        Err(e) => refused(e),
    }
}

/// A response body, fed to the SSE parser in one piece and again in pieces split where the
/// input's own bytes say: both must give the same events (or the same error).
fn run_sse(bytes: &[u8]) -> Outcome {
    let parse = |pieces: &mut dyn Iterator<Item = &[u8]>| -> Result<Vec<SseEvent>, String> {
        let mut parser = SseParser::new();
        let mut out = Vec::new();
        for piece in pieces {
            parser.push(piece, &mut out).map_err(|e| e.to_string())?;
        }
        parser.finish(&mut out).map_err(|e| e.to_string())?;
        Ok(out)
    };
    let whole = parse(&mut std::iter::once(bytes));
    let step = 1 + bytes.first().map_or(0, |&b| b as usize % 7);
    let split = parse(&mut bytes.chunks(step));
    assert_eq!(whole, split, "events depend on how the body was split (pieces of {step})");
    match whole {
        Ok(events) => {
            let data: usize = events.iter().map(|e| e.data.len()).sum();
            assert!(data <= bytes.len(), "more data out than bytes in");
            // Every event's data goes on to the chunk parser, as the stream recorder does.
            let mut chunks = BTreeSet::new();
            for event in events.iter().filter(|e| e.data != "[DONE]") {
                let chunk = parse_chunk(&event.data, None)
                    .map_or_else(refused, |c| Outcome::Accepted(format!("{} tokens", c.tokens.min(3))));
                chunks.insert(kind(&chunk));
            }
            Outcome::Accepted(format!("{} events {chunks:?}", events.len().min(4)))
        }
        Err(e) => refused(e),
    }
}

/// One event's data as the chunk parser gets it, and the same text as an error body and a
/// `/models` answer. A chunk cannot carry more tokens than it has bytes.
fn run_openai(bytes: &[u8]) -> Outcome {
    let text = String::from_utf8_lossy(bytes);
    let message = http_error_text(&text);
    assert!(message.chars().count() <= 301 && !message.contains(['\n', '\r']), "{message:?}");
    if let Err(e) = parse_models(&text) {
        refused(e);
    }
    match parse_chunk(&text, None) {
        Ok(chunk) => {
            assert!(chunk.tokens <= text.len(), "{} tokens from {} bytes", chunk.tokens, text.len());
            let usage = chunk.usage.map(|u| (u.prompt_tokens.is_some(), u.completion_tokens.is_some()));
            let finish = chunk.finish_reason.is_some();
            Outcome::Accepted(format!("{} tokens, usage {usage:?}, finish {finish}", chunk.tokens.min(3)))
        }
        Err(e) => refused(e),
    }
}

// ---- The loop ----

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

fn corpus(target: &str) -> Vec<Vec<u8>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz-corpus").join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("entry").path())
        .collect();
    files.sort();
    let seeds: Vec<Vec<u8>> = files.iter().map(|f| std::fs::read(f).expect("corpus file")).collect();
    assert!(!seeds.is_empty(), "{}: no seeds", dir.display());
    seeds
}

/// An outcome's kind, for feedback: the error text with numbers and quoted parts blanked, so
/// "tensor a: shape [3] …" and "tensor b: shape [4] …" count as one kind.
fn kind(outcome: &Outcome) -> String {
    let text = match outcome {
        Outcome::Accepted(what) => return format!("accepted: {what}"),
        Outcome::Refused(text) => text,
    };
    let mut kind = String::new();
    let mut quoted = false;
    for c in text.chars().take(48) {
        match c {
            '"' => quoted = !quoted,
            _ if quoted => {}
            '0'..='9' => {
                if !kind.ends_with('#') {
                    kind.push('#');
                }
            }
            c => kind.push(c),
        }
    }
    kind
}

/// Peak memory one execution may take: proportional to its input (a parsed JSON value is a
/// few dozen times its text), plus a constant for the fixture shards and buffers and for the
/// config target's check of the tensor list, which holds 11 names per declared layer (about
/// 1.3 KB per layer, so up to about 1.4 MB at `limits::MAX_LAYERS`; a 30-minute run found
/// configs of 922 layers at 1.25 MB against the 1 MiB this constant was).
fn memory_bound(input_len: usize) -> usize {
    (2 << 20) + 256 * input_len
}

/// Inputs kept per target (the seeds and the first inputs of each new outcome kind).
const MAX_CORPUS: usize = 4096;

#[derive(Default)]
struct Stats {
    executions: u64,
    accepted: u64,
    kinds: usize,
    corpus: usize,
    findings: Vec<String>,
}

enum Budget {
    Executions(u64),
    Time(Duration),
}

fn fuzz(target: &Target, seed: u64, budget: Budget) -> Stats {
    let mut corpus = corpus(target.name);
    let mut mutator = Mutator { rng: Rng(seed ^ fnv(target.name.as_bytes())) };
    let mut kinds = BTreeSet::new();
    let mut stats = Stats::default();
    let start = Instant::now();
    let mut index = 0usize;
    loop {
        let done = match budget {
            Budget::Executions(n) => stats.executions >= n,
            Budget::Time(d) => start.elapsed() >= d,
        };
        if done || stats.findings.len() >= 20 {
            break;
        }
        // The seeds as they are first, then mutants of random corpus entries.
        let input = if index < corpus.len() {
            corpus[index].clone()
        } else {
            let base = mutator.rng.below(corpus.len());
            let other = mutator.rng.below(corpus.len());
            mutator.mutate(&corpus[base], &corpus[other], target.max_len)
        };
        index += 1;
        stats.executions += 1;
        let (result, peak) = peak_bytes(|| std::panic::catch_unwind(AssertUnwindSafe(|| (target.run)(&input))));
        let finding = match &result {
            Err(panic) => {
                let message = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                Some(format!("panic: {message}"))
            }
            Ok(_) if peak > memory_bound(input.len()) => {
                Some(format!("{peak} bytes allocated for a {}-byte input", input.len()))
            }
            Ok(_) => None,
        };
        if let Some(what) = finding {
            stats.findings.push(format!("{what} (input saved as {})", save_finding(target.name, &input).display()));
            continue;
        }
        let outcome = result.expect("not a panic");
        stats.accepted += matches!(outcome, Outcome::Accepted(_)) as u64;
        if kinds.insert(kind(&outcome)) && index > corpus.len() && corpus.len() < MAX_CORPUS {
            corpus.push(input);
        }
    }
    stats.kinds = kinds.len();
    stats.corpus = corpus.len();
    stats
}

/// FNV-1a: names findings by content, and gives each target its own stream from one seed.
fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3))
}

/// Writes a failing input to `target/fuzz-findings/<target>-<hash>.bin` for replay.
fn save_finding(target: &str, input: &[u8]) -> PathBuf {
    let hash = fnv(input);
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/fuzz-findings");
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join(format!("{target}-{hash:016x}.bin"));
    let _ = std::fs::write(&path, input);
    path
}

fn report(target: &Target, stats: &Stats, elapsed: Duration) -> String {
    format!(
        "{:<12} {:>9} executions in {:>6.1} s, {:>7} accepted, {:>3} outcome kinds, corpus {:>4}, {} findings",
        target.name,
        stats.executions,
        elapsed.as_secs_f64(),
        stats.accepted,
        stats.kinds,
        stats.corpus,
        stats.findings.len()
    )
}

/// Executions per target in the normal test run: a second or two each.
const SHORT_EXECUTIONS: u64 = 100_000;

fn short_run(name: &str) {
    let target = TARGETS.iter().find(|t| t.name == name).expect("a target");
    let start = Instant::now();
    let stats = fuzz(target, 0x5eed, Budget::Executions(SHORT_EXECUTIONS));
    eprintln!("{}", report(target, &stats, start.elapsed()));
    assert!(stats.findings.is_empty(), "{name}: {:#?}", stats.findings);
    assert!(stats.kinds > 3, "{name}: the mutator reached only {} outcomes", stats.kinds);
}

#[test]
fn fuzz_safetensors_header() {
    short_run("safetensors");
}

#[test]
fn fuzz_shard_index() {
    short_run("index");
}

#[test]
fn fuzz_config_json() {
    short_run("config");
}

#[test]
fn fuzz_sse() {
    short_run("sse");
}

#[test]
fn fuzz_openai_chunks() {
    short_run("openai");
}

/// The long mode: `TOKENMETER_FUZZ_SECS` seconds per target (`TOKENMETER_FUZZ_TARGETS` picks
/// some, `TOKENMETER_FUZZ_SEED` fixes the seed), targets in parallel threads.
#[test]
#[ignore = "long: set TOKENMETER_FUZZ_SECS and run with --ignored"]
fn fuzz_long() {
    let secs: f64 = std::env::var("TOKENMETER_FUZZ_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(60.0);
    let only = std::env::var("TOKENMETER_FUZZ_TARGETS").ok();
    let seed = std::env::var("TOKENMETER_FUZZ_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64)
    });
    let chosen: Vec<&Target> =
        TARGETS.iter().filter(|t| only.as_deref().is_none_or(|o| o.split(',').any(|n| n.trim() == t.name))).collect();
    eprintln!("fuzzing {} target(s) for {secs} s each, seed {seed}", chosen.len());
    let results: Vec<(String, Vec<String>)> = std::thread::scope(|scope| {
        let handles: Vec<_> = chosen
            .iter()
            .map(|&target| {
                scope.spawn(move || {
                    let start = Instant::now();
                    let stats = fuzz(target, seed, Budget::Time(Duration::from_secs_f64(secs)));
                    let line = report(target, &stats, start.elapsed());
                    eprintln!("{line}");
                    (line, stats.findings)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("fuzz thread")).collect()
    });
    let mut failed = false;
    for (line, findings) in &results {
        eprintln!("{line}");
        for finding in findings {
            eprintln!("    {finding}");
            failed = true;
        }
    }
    assert!(!failed, "findings above");
}
