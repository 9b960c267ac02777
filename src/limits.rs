//! Every bound on what comes from outside the program, in one place: `config.json`, safetensors
//! headers and the shard index, JSON files, the command line and the page's form. A value past a
//! bound is refused with a message that names the value and the bound, before anything is sized
//! from it; sizes computed from checked values use checked arithmetic (see [`product`]), so
//! nothing wraps on wasm32's 32-bit `usize` either.
//!
//! The maxima are generous for real checkpoints and workloads (each says what it leaves room
//! for); what they exclude is a number that would only ever allocate, wrap or wait forever. Bounds
//! that depend on the adapter (`maxStorageBufferBindingSize`) are checked where the buffers are
//! planned, with [`fits_binding`].

use crate::error::{Error, Result};

/// Weights the CPU oracle (`model::reference::CpuModel`, f32 loops) may hold as a quality pass's
/// reference: 2 GiB of f32 (a 2-layer model at Qwen3-0.6B's widths fits; the whole 0.6B does not).
pub const CPU_ORACLE_MAX_WEIGHTS: u64 = 1 << 29;

// ---- Files read whole (everything else is read by range) ----

/// `config.json`: a few KiB in every published checkpoint.
pub const CONFIG_JSON_MAX_BYTES: u64 = 1 << 20;
/// `tokenizer.json`: Qwen3's is 11 MB, the largest vocabularies about 35 MB.
pub const TOKENIZER_JSON_MAX_BYTES: u64 = 64 << 20;
/// `model.safetensors.index.json`: one line per tensor; a 1,000-layer checkpoint stays under 2 MB.
pub const INDEX_JSON_MAX_BYTES: u64 = 16 << 20;
/// A saved results file that `compare --a-json/--b-json` reads (whole).
pub const RESULTS_JSON_MAX_BYTES: u64 = 512 << 20;

/// A safetensors JSON header (the format's reference implementation allows 100 MB): the largest
/// published shards have a few MB; parsed, a header takes several times its size.
pub const SAFETENSORS_HEADER_MAX_BYTES: u64 = 32 << 20;

/// Dimensions of one tensor: Qwen3's have 1 or 2, any published checkpoint at most 5.
pub const MAX_TENSOR_RANK: usize = 8;

// ---- config.json ----

/// `max_position_embeddings`: Qwen3 has 40,960; the 1M-context Qwen2.5 models 1,010,000.
pub const MAX_POSITIONS: usize = 1 << 20;
/// `num_hidden_layers`: the deepest published dense models have under 130.
pub const MAX_LAYERS: usize = 1024;
/// `num_attention_heads`, `num_key_value_heads`: 128 at most in published models.
pub const MAX_HEADS: usize = 1024;
/// `hidden_size`, `intermediate_size`: 16,384 and 53,248 in the largest dense models.
pub const MAX_WIDTH: usize = 1 << 18;
/// `vocab_size`: Qwen3 has 151,936, the largest published vocabularies 262,144.
pub const MAX_VOCAB: usize = 1 << 22;

// ---- Engine settings (CLI flags, the page's form) ----

/// Tokens per KV block: vLLM offers up to 256.
pub const MAX_BLOCK_SIZE: usize = 4096;
/// `--kv-blocks`: the adapter lowers it further (blocks per layer within one binding).
pub const MAX_KV_BLOCKS: usize = 1 << 24;
/// Sequences per step (`--max-batch`).
pub const MAX_SEQS: usize = 65_535;
/// Tokens per step (`--max-batched-tokens`): the engine's own cap (one dispatch dimension).
pub const MAX_BATCHED_TOKENS: usize = 65_535;
/// Prompt and output lengths, `--max-new-tokens`, `--context`: no sequence is longer than
/// [`MAX_POSITIONS`], which also bounds a remote request's body (a prompt of this many ids is
/// about 7 MB of JSON).
pub const MAX_TOKENS: usize = MAX_POSITIONS;
/// `tokenmeter speed --steps`.
pub const MAX_SPEED_STEPS: usize = 100_000;

// ---- Workloads ----

/// Requests per run: each keeps its token timestamps in the results (a plan's fleet keeps a
/// summary per request past 100,000: `bench::TokenTimes`).
pub const MAX_REQUESTS: usize = 1_000_000;
/// Closed-loop users (`--concurrency`).
pub const MAX_CONCURRENCY: usize = 10_000;
/// Simulated replicas in a capacity plan (`tokenmeter plan --replicas`).
pub const MAX_REPLICAS: usize = 10_000;
/// Different shared prompt prefixes in one workload (`--prefix-groups`).
pub const MAX_PREFIX_GROUPS: usize = 10_000;
/// Slowest arrival rate (requests/s): one request per 1,000 s.
pub const MIN_RATE: f64 = 1e-3;
/// Gamma shape (`--burstiness`): 1 is Poisson; past these the gaps are all 0 or all equal.
pub const MIN_BURSTINESS: f64 = 1e-3;
pub const MAX_BURSTINESS: f64 = 1e6;
/// Latest planned arrival, in seconds: a benchmark is released within a day.
pub const MAX_SCHEDULE_S: f64 = 86_400.0;
/// A dataset or trace file (`--dataset`): ShareGPT's V3 file is about 670 MB.
pub const DATASET_MAX_BYTES: u64 = 1 << 30;
/// Rows (conversations, JSONL lines) read from a dataset before sampling.
pub const MAX_DATASET_ROWS: usize = 2_000_000;
/// `--trace-speedup`: how much faster (or slower, below 1) a trace is replayed.
pub const MIN_TRACE_SPEEDUP: f64 = 1e-3;
pub const MAX_TRACE_SPEEDUP: f64 = 1e6;
/// A remote request's timeout, in seconds.
pub const MAX_TIMEOUT_S: f64 = 86_400.0;
/// Sampling temperature.
pub const MAX_TEMPERATURE: f64 = 1e3;

/// `value` as a count in `[min, max]`, or an [`Error::Invalid`] naming `name` and the range.
pub fn count(name: &str, value: u64, min: usize, max: usize) -> Result<usize> {
    match usize::try_from(value) {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(Error::Invalid(format!("{name} {value}: {}", count_range(min, max)))),
    }
}

/// Parses a whole number in `[min, max]`; the message says the range (for clap's value parsers
/// and the page's fields, which add the name themselves).
pub fn parse_count(text: &str, min: usize, max: usize) -> Result<usize, String> {
    match text.trim().parse::<u64>().ok().and_then(|n| usize::try_from(n).ok()) {
        Some(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(count_range(min, max)),
    }
}

fn count_range(min: usize, max: usize) -> String {
    format!("must be a whole number from {min} to {max}")
}

/// `value` in `[min, max]` (finite), or an [`Error::Invalid`] naming `name` and the range.
pub fn number(name: &str, value: f64, min: f64, max: f64) -> Result<f64> {
    match value.is_finite() && value >= min && value <= max {
        true => Ok(value),
        false => Err(Error::Invalid(format!("{name} {}: must be a number from {min} to {max}", show(value)))),
    }
}

/// A number for a message: as typed when short, else in exponent form (1e-300, not 300 digits).
pub fn show(x: f64) -> String {
    let plain = x.to_string();
    if plain.len() <= 12 {
        plain
    } else {
        format!("{x:e}")
    }
}

/// Longest piece of a file's own text (a tensor or file name, a dtype) quoted in a message.
pub const MAX_SHOWN_CHARS: usize = 200;

/// Text from a file, safe to put in a one-line message: control characters escaped (`\n`, not a
/// line break) and at most [`MAX_SHOWN_CHARS`] characters.
pub fn printable(text: &str) -> String {
    let mut out = String::new();
    for (i, c) in text.chars().enumerate() {
        if i == MAX_SHOWN_CHARS {
            out.push('…');
            break;
        }
        match c.is_control() {
            true => out.extend(c.escape_default()),
            false => out.push(c),
        }
    }
    out
}

/// Parses a number in `[min, max]`; the message says the range.
pub fn parse_number(text: &str, min: f64, max: f64) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(x) if x.is_finite() && x >= min && x <= max => Ok(x),
        _ => Err(format!("must be a number from {min} to {max}")),
    }
}

/// The product of `factors` (a size in elements or bytes), or an error naming `what` when it
/// does not fit a `u64`.
pub fn product(what: &str, factors: &[u64]) -> Result<u64> {
    factors
        .iter()
        .try_fold(1u64, |acc, &f| acc.checked_mul(f))
        .ok_or_else(|| Error::Invalid(format!("{what}: {factors:?} overflows a 64-bit size")))
}

/// A buffer of `bytes` for `what` must fit one storage binding of the adapter.
pub fn fits_binding(what: &str, bytes: u64, binding: u64) -> Result<()> {
    match bytes <= binding {
        true => Ok(()),
        false => Err(Error::AdapterLimit(format!(
            "{what} needs a {bytes}-byte buffer, above maxStorageBufferBindingSize {binding}"
        ))),
    }
}

/// A file read whole must be at most `max` bytes; checked from its size, before reading.
pub fn file_size(path: &str, len: u64, max: u64) -> Result<()> {
    match len <= max {
        true => Ok(()),
        false => Err(Error::Io {
            path: path.into(),
            message: format!("{len} bytes, above the {max}-byte limit for this file (read whole)"),
        }),
    }
}

/// Reads a regular file of at most `max` bytes. Anything else (a FIFO, a device, a folder) is
/// refused from its metadata, before it is opened: opening a FIFO blocks until a writer comes.
#[cfg(not(target_arch = "wasm32"))]
pub fn read_file(path: &std::path::Path, max: u64) -> Result<Vec<u8>> {
    use std::io::Read;
    let shown = path.display().to_string();
    let io = |e: std::io::Error| Error::Io { path: shown.clone(), message: e.to_string() };
    let len = regular_file_len(path)?;
    file_size(&shown, len, max)?;
    let mut bytes = Vec::with_capacity(len as usize);
    // `take`: a file that grew since its metadata was read still stops at the limit.
    std::fs::File::open(path).map_err(io)?.take(max + 1).read_to_end(&mut bytes).map_err(io)?;
    file_size(&shown, bytes.len() as u64, max)?;
    Ok(bytes)
}

/// The length of a regular file, from its metadata (symbolic links followed); an error for
/// anything else.
#[cfg(not(target_arch = "wasm32"))]
pub fn regular_file_len(path: &std::path::Path) -> Result<u64> {
    let shown = path.display().to_string();
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(Error::NotFound { path: shown }),
        Err(e) => return Err(Error::Io { path: shown, message: e.to_string() }),
    };
    if !meta.is_file() {
        let kind = if meta.is_dir() { "a folder" } else { "a FIFO, socket or device" };
        return Err(Error::Io { path: shown, message: format!("not a regular file ({kind})") });
    }
    Ok(meta.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_numbers_name_their_range() {
        assert_eq!(count("--block-size", 16, 1, MAX_BLOCK_SIZE).unwrap(), 16);
        let e = count("--block-size", 1 << 57, 1, MAX_BLOCK_SIZE).unwrap_err().to_string();
        assert_eq!(e, "--block-size 144115188075855872: must be a whole number from 1 to 4096");
        assert_eq!(parse_count(" 7 ", 1, 9), Ok(7));
        for bad in ["-5", "0", "10", "1e3", "", "18446744073709551616"] {
            assert_eq!(parse_count(bad, 1, 9), Err("must be a whole number from 1 to 9".into()), "{bad}");
        }
        assert_eq!(parse_number("0.5", 0.0, 1.0), Ok(0.5));
        for bad in ["nan", "inf", "-0.1", "1e-300x", "2"] {
            assert!(parse_number(bad, 0.0, 1.0).is_err(), "{bad}");
        }
        let e = number("--timeout-s", 1e300, 1e-3, MAX_TIMEOUT_S).unwrap_err().to_string();
        assert_eq!(e, "--timeout-s 1e300: must be a number from 0.001 to 86400");
    }

    #[test]
    fn file_text_in_messages_stays_on_one_line() {
        assert_eq!(printable("model.norm.weight"), "model.norm.weight");
        assert_eq!(printable("a\nb\r\u{1b}"), "a\\nb\\r\\u{1b}");
        assert_eq!(printable(&"x".repeat(1000)).chars().count(), MAX_SHOWN_CHARS + 1);
    }

    #[test]
    fn products_do_not_wrap() {
        assert_eq!(product("x", &[3, 4]).unwrap(), 12);
        assert!(product("tensor a", &[1 << 63, 2]).unwrap_err().to_string().contains("overflows"));
        assert!(fits_binding("block tables", 1 << 31, 1 << 30).unwrap_err().to_string().contains("maxStorage"));
    }
}
