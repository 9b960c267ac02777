//! Numbers on the command line past [`tokenmeter::limits`]: each is refused with one `error:`
//! line naming the flag and its range, exit code 2, within seconds and 200 MB. Before the bounds
//! they wrapped (prompt + max new tokens, input + output length), divided by zero (block size),
//! panicked in `Duration` (rate), allocated without bound (request count, remote prompt bodies) or
//! waited for decades (rate 1e-9).

use crate::common;

use common::cli::{expect_error, run};
use common::fixture_dir;

fn tiny() -> String {
    fixture_dir("tiny-mha").to_str().expect("a UTF-8 path").to_string()
}

#[test]
fn generate_flags() {
    let model = tiny();
    let generate = |extra: &[&str], needle: &str| {
        expect_error(&[&["generate", "--model", &model, "--prompt-ids", "1,2,3"], extra].concat(), needle)
    };
    generate(&["--max-new-tokens", "18446744073709551615"], "must be a whole number from 1 to 1048576");
    generate(&["--max-new-tokens", "0"], "'--max-new-tokens <MAX_NEW_TOKENS>': must be a whole number from 1");
    // A negative number was clap's three-line "unexpected argument" with a tip.
    generate(&["--max-new-tokens", "-5"], "invalid value '-5' for '--max-new-tokens");
    generate(
        &["--block-size", "144115188075855872"],
        "'--block-size <BLOCK_SIZE>': must be a whole number from 1 to 4096",
    );
    generate(&["--block-size", "0"], "--block-size");
    generate(&["--kv-blocks", "0"], "--kv-blocks");
    generate(&["--max-batch", "18446744073709551615"], "--max-batch");
    generate(&["--max-batched-tokens", "-1"], "--max-batched-tokens");
    generate(&["--temperature", "nan"], "'--temperature <TEMPERATURE>': must be a number from 0 to 1000");
    generate(&["--top-p", "-0.5"], "--top-p");
    generate(&["--seed", "-1"], "--seed");
    generate(&["--weights", "int2"], "unknown weight format \"int2\": expected bf16, int8 or int4");
    generate(&["--weights", ""], "expected bf16, int8 or int4");
    // The kernel switches, each a value parsed here (no environment read below the binary).
    generate(&["--kernels", "tpu"], "unknown kernel family \"tpu\": expected gpu or cpu");
    generate(&["--fused", "maybe"], "'--fused <on|off>': expected on or off, not \"maybe\"");
    generate(&["--prefill-tiles", ""], "--prefill-tiles");
    generate(&["--weight-storage", "disk"], "unknown weight storage \"disk\": expected buffer or texture");
    generate(&["--matmul-tile", "16"], "unknown matmul tile \"16\": expected 4 or 8");
    generate(&["--gemv-max-m", "0"], "'--gemv-max-m <N>': must be a whole number from 1");
    generate(&["--overlap", "2"], "--overlap");
    // The engine's own check still names max_position_embeddings for a plausible count.
    generate(&["--max-new-tokens", "1000"], "exceeds max_position_embeddings 512");
}

#[test]
fn bench_flags() {
    let bench =
        |extra: &[&str], needle: &str| expect_error(&[&["bench", "--synthetic", "tiny"], extra].concat(), needle);
    bench(&["--rate", "1e-300"], "rate 1e-300: must be at least 0.001 requests/s");
    bench(&["--rate", "1e-9"], "rate 0.000000001: must be at least 0.001");
    bench(&["--rate", "-4"], "rate -4: must be at least");
    bench(&["--rate", "0.01", "--num-requests", "1000"], "rate 0.01: 1000 requests would arrive over about 99900 s");
    bench(&["--num-requests", "18446744073709551615"], "--num-requests: must be a whole number from 1 to 100000");
    bench(&["--num-requests", "10000000000"], "--num-requests");
    bench(
        &["--input-len", "18446744073709551615"],
        "length range 18446744073709551615:18446744073709551615: above the limit of 1048576 tokens",
    );
    bench(&["--output-len", "1:18446744073709551615"], "above the limit of 1048576 tokens");
    bench(&["--input-len", "-5"], "length range \"-5\"");
    bench(&["--burstiness", "1e-300"], "--burstiness: must be a number from 0.001 to 1000000");
    bench(&["--cost-per-hour", "-2"], "--cost-per-hour: must be a number from 0 to 1000000");
    bench(&["--cost-per-hour", "inf"], "--cost-per-hour: must be a number from 0 to 1000000");
    bench(&["--arrival", "concurrency", "--concurrency", "18446744073709551615"], "--concurrency");
    // Within the bounds, still above the model's context: the config check names it.
    bench(&["--input-len", "1000000"], "above the model's context (max_position_embeddings");
    bench(&["--shared-prefix-len", "18446744073709551615"], "--shared-prefix-len: must be a whole number");
    bench(&["--shared-prefix-len", "128"], "shared prefix length 128: must be from 1 to one below the shortest input");
    bench(&["--prefix-groups", "2"], "--prefix-groups: prefix groups: goes with a shared prefix length");
    bench(&["--shared-prefix-len", "8", "--prefix-groups", "0"], "--prefix-groups");
}

#[test]
fn remote_bench_flags() {
    // Port 9 (discard): nothing should ever be sent, the flags are refused first.
    let remote = |extra: &[&str], needle: &str| {
        expect_error(&[&["bench", "--endpoint", "http://127.0.0.1:9/v1"], extra].concat(), needle)
    };
    // Over 4 GiB building the request bodies.
    remote(&["--input-len", "100000000"], "length range 100000000:100000000: above the limit of 1048576 tokens");
    remote(&["--rate", "1e-300"], "rate 1e-300: must be at least 0.001");
    remote(&["--timeout-s", "1e300"], "--timeout-s 1e300: must be a number from 0.001 to 86400");
    remote(&["--timeout-s", "-1"], "--timeout-s -1: must be a number");
}

#[test]
fn speed_flags() {
    let speed =
        |extra: &[&str], needle: &str| expect_error(&[&["speed", "--synthetic", "tiny"], extra].concat(), needle);
    // Printed NaN and exited 0.
    speed(&["--steps", "0"], "'--steps <STEPS>': must be a whole number from 1 to 100000");
    speed(&["--batches", "1,0"], "--batches");
    speed(&["--prefill", "100000"], "--prefill");
    speed(&["--context", "18446744073709551615"], "--context");
}

#[test]
fn usage_errors_are_one_line_and_help_is_not_an_error() {
    expect_error(&["generate", "--frobnicate"], "unexpected argument '--frobnicate'");
    expect_error(&["generate", "--model"], "a value is required for '--model <MODEL>'");
    let help = run(&["--help"]);
    assert_eq!(help.code, 0, "{}", help.stderr);
    let bare = run(&[]);
    assert_eq!(bare.code, 2);
    assert!(bare.stderr.contains("Usage:"), "{}", bare.stderr);
}

/// `--trace-speedup` on a dataset that is not a trace did nothing, silently; it is refused, named
/// or guessed format alike, while a trace still takes it.
#[test]
fn trace_speedup_needs_a_trace() {
    let dir = std::env::temp_dir().join(format!("tokenmeter-bad-flags-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let lengths = dir.join("lengths.jsonl");
    std::fs::write(&lengths, "{\"input_len\": 5, \"output_len\": 3}\n").unwrap();
    let lengths = lengths.to_str().unwrap();
    let bench = |extra: &[&str], needle: &str| {
        expect_error(&[&["bench", "--synthetic", "tiny", "--dataset", lengths], extra].concat(), needle)
    };
    bench(&["--trace-speedup", "2"], "--trace-speedup scales a trace's recorded times");
    bench(&["--dataset-format", "jsonl", "--trace-speedup", "2"], "is a jsonl dataset");
    // A trace is not refused for it: the run gets past the dataset to the next error (a rate sweep).
    let trace = dir.join("trace.jsonl");
    std::fs::write(&trace, "{\"timestamp\": 10, \"input_length\": 5, \"output_length\": 3}\n").unwrap();
    expect_error(
        &[
            "bench",
            "--synthetic",
            "tiny",
            "--dataset",
            trace.to_str().unwrap(),
            "--trace-speedup",
            "2",
            "--rate",
            "1,2",
        ],
        "replays the recorded times",
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--speculate draft:…` is checked before any weight is uploaded: its form, a synthetic shape's
/// name, and a draft folder whose vocabulary differs from the target's.
#[test]
fn speculate_flags() {
    let model = tiny(); // tiny-mha: 256 ids
    let generate = |speculate: &str, needle: &str| {
        expect_error(&["generate", "--model", &model, "--prompt-ids", "1,2,3", "--speculate", speculate], needle)
    };
    generate("draft:4", "expected ngram:K or draft:MODEL:K with K from 1 to 16, or off");
    generate("draft:x:17", "with K from 1 to 16");
    generate("draft:synthetic:x:4", "--speculate draft:synthetic:x: unknown synthetic model \"x\"");
    let gqa = format!("draft:{}:4", fixture_dir("tiny-gqa-tied").display());
    generate(&gqa, "vocab_size 512 differs from the target's 256");
    generate("draft:/no/such/folder:4", "/no/such/folder");
}
