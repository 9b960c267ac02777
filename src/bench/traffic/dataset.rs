//! Real prompt and response lengths, and replayed traces, instead of synthetic lengths:
//!
//! - **ShareGPT** (vLLM's `--dataset-name sharegpt` layout): a JSON list of
//!   `{"conversations": [{"from": "human", "value": "…"}, {"from": "gpt", "value": "…"}, …]}`.
//!   The prompt is the first human turn (`from` = `human` or `user`; the first turn when no turn
//!   says), the output length is the next turn's length in tokens.
//! - **JSONL**: one `{"prompt": "…", "output_len": N}` or `{"input_len": N, "output_len": N}`
//!   per line.
//! - **trace** (Mooncake-style JSONL): one `{"timestamp": MS, "input_length": N,
//!   "output_length": N}` per line, timestamps in milliseconds, not decreasing; request i is
//!   released at `(timestamp_i − timestamp_0) / 1000 / speedup` seconds. A row may carry
//!   `hash_ids`: one id per block of `block_tokens` prompt tokens (512 unless told; the last block
//!   may be short), equal ids meaning equal content. Its prompt is then built block by block, each
//!   block's tokens a function of its id alone (the prompts' job, on this floor), so prompts share
//!   exactly the blocks the trace says they share, and [`DatasetWorkload::implied_hit_tokens`]
//!   gives what an unbounded prefix cache would reuse. Other fields are ignored.
//!
//! Text is measured with the tokenizer the caller passes (the model's for the engine, the
//! `--tokenizer` file for a server); rows with lengths only get synthetic prompts of that length
//! (built where every request's prompt is). Parsing is pure (bytes in), so the page and the CLI share it.
//!
//! ShareGPT rows are filtered as vLLM's `vllm/benchmarks/datasets.py` (`ShareGPTDataset`,
//! `is_valid_sequence`; vllm-project/vllm at commit f2e97ddaf5902a9727f48b70d001b6117b8b8b12)
//! does: conversations with fewer than 2 turns are dropped, then prompts under 4 tokens, outputs
//! under 4 tokens, prompts over 1,024 tokens and prompt + output over 2,048 tokens. The rows left
//! are shuffled with the workload's seed (vLLM shuffles too, with its own generator, so the
//! chosen rows differ from vLLM's) and the first `--num-requests` are sent.

use std::str::FromStr;
use std::sync::Arc;

use rand::seq::SliceRandom;
use serde::{Deserialize, Serialize};

use crate::bench::base::streams::stream;
use crate::error::{Error, Result};
use crate::limits;

/// Which layout a dataset file has.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DatasetFormat {
    #[serde(rename = "sharegpt")]
    ShareGpt,
    Jsonl,
    Trace,
}

impl FromStr for DatasetFormat {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "sharegpt" => Ok(DatasetFormat::ShareGpt),
            "jsonl" => Ok(DatasetFormat::Jsonl),
            "trace" => Ok(DatasetFormat::Trace),
            _ => Err(Error::Invalid(format!("dataset format {s:?}: expected sharegpt, jsonl or trace"))),
        }
    }
}

impl DatasetFormat {
    pub fn name(self) -> &'static str {
        match self {
            DatasetFormat::ShareGpt => "sharegpt",
            DatasetFormat::Jsonl => "jsonl",
            DatasetFormat::Trace => "trace",
        }
    }
}

/// One row as read, before lengths are measured.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DatasetRow {
    /// 1-based line of the file (ShareGPT: 1-based index of the conversation in the list).
    pub at: usize,
    pub prompt: Option<String>,
    /// ShareGPT: the answer, measured for the output length.
    pub completion: Option<String>,
    pub input_len: Option<usize>,
    pub output_len: Option<usize>,
    pub timestamp_ms: Option<f64>,
    /// Traces: the prompt's block ids (`hash_ids`), in order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash_ids: Option<Vec<u64>>,
    /// ShareGPT: the conversation's later (user, answer) pairs after the first, in order: its
    /// later turns when whole conversations are asked for ([`Select::conversations`]).
    pub later: Vec<(String, String)>,
}

/// A file's rows.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Dataset {
    pub file: String,
    pub format: DatasetFormat,
    pub rows: Vec<DatasetRow>,
    /// ShareGPT conversations dropped for having fewer than 2 turns.
    pub dropped_short_conversations: usize,
}

/// One request of a dataset, lengths measured.
#[derive(Clone, Debug, PartialEq)]
pub struct DatasetItem {
    /// The prompt's text; `None` when the row gives only a length (synthetic prompt).
    pub prompt: Option<Arc<str>>,
    pub prompt_len: usize,
    pub output_len: usize,
    /// Trace rows: seconds from the first row, speedup applied.
    pub arrival_s: Option<f64>,
    /// Whole conversations: (the conversation's index in the selection, the turn in it). The
    /// prompt is then that turn's new user text, sent after the conversation so far.
    pub conversation: Option<(u64, u32)>,
    /// A trace row's block ids: its prompt is these blocks' tokens, in order
    /// ([`DatasetWorkload::block_tokens`] each, the last cut to `prompt_len`).
    pub blocks: Option<Arc<[u64]>>,
}

/// The dataset part of a workload: what the record says about it, and (not recorded) its items.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DatasetWorkload {
    /// The file's name as given (a path in the CLI, a file name in the page).
    pub file: String,
    pub format: DatasetFormat,
    /// Rows in the file (ShareGPT: conversations).
    pub rows_read: usize,
    /// Rows left after the filters, before `num_requests` were taken.
    pub rows_kept: usize,
    /// The filters applied, in words.
    pub filters: String,
    /// What measured the lengths of rows with text: "none (lengths given)" or the tokenizer.
    pub lengths_measured_by: String,
    /// Trace replay: recorded gaps divided by this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_speedup: Option<f64>,
    /// ShareGPT's whole conversations were taken, each turn a request ([`Select::conversations`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub whole_conversations: bool,
    /// A trace with `hash_ids`: the tokens of one block ([`Select::block_tokens`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_tokens: Option<usize>,
    /// The requests, in the order sent; empty in a record read back from JSON.
    #[serde(skip)]
    pub items: Arc<Vec<DatasetItem>>,
}

/// The format, from the content: a JSON list is ShareGPT; JSON lines are a trace when the first
/// one has `timestamp`, JSONL when it has `prompt` or `input_len`. Anything else is ambiguous.
pub fn guess_format(bytes: &[u8]) -> Result<DatasetFormat> {
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(1 << 20)]);
    let trimmed = text.trim_start_matches('\u{feff}').trim_start();
    if trimmed.starts_with('[') {
        return Ok(DatasetFormat::ShareGpt);
    }
    if trimmed.starts_with('{') {
        let first = trimmed.lines().next().unwrap_or_default();
        if let Ok(serde_json::Value::Object(map)) = serde_json::from_str::<serde_json::Value>(first) {
            let trace = map.contains_key("timestamp");
            let jsonl = map.contains_key("prompt") || map.contains_key("input_len");
            match (trace, jsonl) {
                (true, false) => return Ok(DatasetFormat::Trace),
                (false, true) => return Ok(DatasetFormat::Jsonl),
                _ => {}
            }
        }
    }
    Err(Error::Invalid(
        "cannot tell the dataset's format from its content: pass --dataset-format sharegpt, jsonl or trace".into(),
    ))
}

/// Reads `bytes` (the file `file`) as `format`, or as [`guess_format`] says. Every malformed row
/// is an error naming the file and line.
pub fn parse(file: &str, bytes: &[u8], format: Option<DatasetFormat>) -> Result<Dataset> {
    limits::file_size(file, bytes.len() as u64, limits::DATASET_MAX_BYTES)?;
    let format = match format {
        Some(f) => f,
        None => guess_format(bytes).map_err(|e| Error::Invalid(format!("{file}: {e}")))?,
    };
    let text = std::str::from_utf8(bytes).map_err(|e| {
        let line = bytes[..e.valid_up_to()].iter().filter(|&&b| b == b'\n').count() + 1;
        Error::Invalid(format!("{file} line {line}: not UTF-8 text"))
    })?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    match format {
        DatasetFormat::ShareGpt => parse_sharegpt(file, text),
        DatasetFormat::Jsonl | DatasetFormat::Trace => parse_lines(file, text, format),
    }
}

#[derive(Deserialize)]
struct Conversation {
    conversations: Option<Vec<Turn>>,
}

#[derive(Deserialize)]
struct Turn {
    from: Option<String>,
    value: String,
}

fn parse_sharegpt(file: &str, text: &str) -> Result<Dataset> {
    // serde_json's errors carry the line and column in the whole file.
    let list: Vec<Conversation> = serde_json::from_str(text).map_err(|e| {
        json_error(file, &e, "expected a ShareGPT list of {\"conversations\": [{\"from\", \"value\"}, ...]}")
    })?;
    if list.len() > limits::MAX_DATASET_ROWS {
        return Err(Error::Invalid(format!(
            "{file}: {} conversations, above the limit of {}",
            list.len(),
            limits::MAX_DATASET_ROWS
        )));
    }
    let mut rows = Vec::new();
    let mut dropped = 0;
    for (index, entry) in list.into_iter().enumerate() {
        let turns = entry.conversations.unwrap_or_default();
        if turns.len() < 2 {
            dropped += 1;
            continue;
        }
        let human = |t: &Turn| t.from.as_deref().is_some_and(|f| f.eq_ignore_ascii_case("human") || f == "user");
        let first = turns.iter().position(human).unwrap_or(0);
        let Some(answer) = turns.get(first + 1) else {
            dropped += 1;
            continue;
        };
        // Later pairs: a user turn (or an unlabelled one) and the answer after it, until the
        // conversation stops alternating.
        let later = turns[first + 2..]
            .chunks_exact(2)
            .take_while(|pair| pair[0].from.is_none() || human(&pair[0]))
            .map(|pair| (pair[0].value.clone(), pair[1].value.clone()))
            .collect();
        rows.push(DatasetRow {
            at: index + 1,
            prompt: Some(turns[first].value.clone()),
            completion: Some(answer.value.clone()),
            input_len: None,
            output_len: None,
            timestamp_ms: None,
            hash_ids: None,
            later,
        });
    }
    Ok(Dataset { file: file.to_string(), format: DatasetFormat::ShareGpt, rows, dropped_short_conversations: dropped })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonlRow {
    prompt: Option<String>,
    input_len: Option<u64>,
    #[serde(alias = "output_tokens")]
    output_len: u64,
}

#[derive(Deserialize)]
struct TraceRow {
    timestamp: f64,
    input_length: u64,
    output_length: u64,
    #[serde(default)]
    hash_ids: Option<Vec<u64>>,
}

fn parse_lines(file: &str, text: &str, format: DatasetFormat) -> Result<Dataset> {
    let mut rows = Vec::new();
    let mut last_ms = f64::NEG_INFINITY;
    for (index, line_text) in text.lines().enumerate() {
        let line = index + 1;
        if line_text.trim().is_empty() {
            continue;
        }
        if rows.len() >= limits::MAX_DATASET_ROWS {
            return Err(Error::Invalid(format!("{file}: more than {} rows", limits::MAX_DATASET_ROWS)));
        }
        let bad = |why: String| Error::Invalid(format!("{file} line {line}: {why}"));
        let length = |name: &str, n: u64| {
            if n < 1 || n > limits::MAX_TOKENS as u64 {
                Err(bad(format!("{name} {n}: must be from 1 to {} tokens", limits::MAX_TOKENS)))
            } else {
                Ok(n as usize)
            }
        };
        let row = match format {
            DatasetFormat::Jsonl => {
                let r: JsonlRow = serde_json::from_str(line_text).map_err(|e| {
                    bad(format!(
                        "expected {{\"prompt\": \"...\", \"output_len\": N}} or {{\"input_len\": N, \"output_len\": N}}: {}",
                        limits::printable(&e.to_string())
                    ))
                })?;
                let input_len = match (&r.prompt, r.input_len) {
                    (Some(_), Some(_)) => return Err(bad("give prompt or input_len, not both".into())),
                    (None, None) => return Err(bad("no prompt and no input_len".into())),
                    (Some(p), None) if p.is_empty() => return Err(bad("the prompt is empty".into())),
                    (_, Some(n)) => Some(length("input_len", n)?),
                    (Some(_), None) => None,
                };
                DatasetRow {
                    at: line,
                    prompt: r.prompt,
                    completion: None,
                    input_len,
                    output_len: Some(length("output_len", r.output_len)?),
                    timestamp_ms: None,
                    hash_ids: None,
                    later: Vec::new(),
                }
            }
            DatasetFormat::Trace => {
                let r: TraceRow = serde_json::from_str(line_text).map_err(|e| {
                    bad(format!(
                        "expected {{\"timestamp\": MS, \"input_length\": N, \"output_length\": N}}: {}",
                        limits::printable(&e.to_string())
                    ))
                })?;
                if !r.timestamp.is_finite() || r.timestamp < 0.0 {
                    return Err(bad(format!("timestamp {}: must be milliseconds ≥ 0", limits::show(r.timestamp))));
                }
                if r.timestamp < last_ms {
                    return Err(bad(format!(
                        "timestamp {} is before the previous row's {} (a trace is in time order)",
                        limits::show(r.timestamp),
                        limits::show(last_ms)
                    )));
                }
                last_ms = r.timestamp;
                DatasetRow {
                    at: line,
                    prompt: None,
                    completion: None,
                    input_len: Some(length("input_length", r.input_length)?),
                    output_len: Some(length("output_length", r.output_length)?),
                    timestamp_ms: Some(r.timestamp),
                    hash_ids: match r.hash_ids {
                        Some(ids) if ids.is_empty() => return Err(bad("hash_ids is empty".into())),
                        ids => ids,
                    },
                    later: Vec::new(),
                }
            }
            DatasetFormat::ShareGpt => unreachable!("parsed as a list"),
        };
        rows.push(row);
    }
    if rows.is_empty() {
        return Err(Error::Invalid(format!("{file}: no rows")));
    }
    Ok(Dataset { file: file.to_string(), format, rows, dropped_short_conversations: 0 })
}

/// `serde_json`'s error as one line naming the file and line.
fn json_error(file: &str, e: &serde_json::Error, expected: &str) -> Error {
    Error::Invalid(format!(
        "{file} line {} column {}: {expected}: {}",
        e.line(),
        e.column(),
        limits::printable(&e.to_string())
    ))
}

/// Counts a text's tokens.
pub type CountTokens<'a> = dyn Fn(&str) -> Result<usize> + 'a;

/// How a dataset becomes requests.
pub struct Select<'a> {
    /// Counts a text's tokens; `None` when no tokenizer is at hand (then text rows are an error).
    pub count_tokens: Option<&'a CountTokens<'a>>,
    /// Says what `count_tokens` is, for the record ("the model's tokenizer.json", a path).
    pub tokenizer: &'a str,
    /// At most this many requests; `None`: every row kept (up to the workload limit).
    pub num_requests: Option<usize>,
    pub seed: u64,
    /// Traces: the recorded gaps are divided by this.
    pub trace_speedup: f64,
    /// Traces with `hash_ids`: the prompt tokens one id stands for (Mooncake's traces: 512,
    /// [`DEFAULT_BLOCK_TOKENS`]). A row must have one id per block: `ceil(input_length / this)`.
    pub block_tokens: usize,
    /// ShareGPT only: whole conversations, each turn a request, a turn's request (the
    /// conversation so far, its new text and its answer) at most this many tokens; `None`: the
    /// first turn of each, as vLLM takes.
    pub conversations: Option<usize>,
}

impl Dataset {
    /// The rows as requests: lengths measured, vLLM's filters applied (ShareGPT), shuffled with
    /// the seed (ShareGPT and JSONL; a trace keeps its order), at most `num_requests`.
    pub fn select(&self, s: &Select) -> Result<DatasetWorkload> {
        let file = &self.file;
        let speedup =
            limits::number("trace speedup", s.trace_speedup, limits::MIN_TRACE_SPEEDUP, limits::MAX_TRACE_SPEEDUP)?;
        let has_blocks = self.rows.iter().any(|r| r.hash_ids.is_some());
        if has_blocks && !(1..=limits::MAX_TOKENS).contains(&s.block_tokens) {
            return Err(Error::Invalid(format!(
                "trace block size {}: must be from 1 to {} tokens",
                s.block_tokens,
                limits::MAX_TOKENS
            )));
        }
        let has_text = self.rows.iter().any(|r| r.prompt.is_some());
        if has_text && s.count_tokens.is_none() {
            return Err(Error::Invalid(format!(
                "{file}: its prompts are text, which needs a tokenizer to measure (for a server: --tokenizer \
                 tokenizer.json)"
            )));
        }
        let measure = |row: &DatasetRow, text: &str| -> Result<usize> {
            let count = s.count_tokens.expect("checked above");
            count(text).map_err(|e| Error::Invalid(format!("{file} {}: {e}", self.place(row))))
        };
        let first_ms = self.rows.first().and_then(|r| r.timestamp_ms).unwrap_or(0.0);
        if s.conversations.is_some() && self.format != DatasetFormat::ShareGpt {
            return Err(Error::Invalid(format!(
                "{file}: whole conversations come from a ShareGPT dataset; this one is {}",
                self.format.name()
            )));
        }
        // One turn: its lengths measured, `None` when vLLM's filters drop it.
        let turn = |row: &DatasetRow, prompt: Option<&str>, completion: Option<&str>| -> Result<Option<DatasetItem>> {
            let prompt_len = match (prompt, row.input_len) {
                (Some(p), _) => measure(row, p)?,
                (None, Some(n)) => n,
                (None, None) => unreachable!("every row has a prompt or a length"),
            };
            let output_len = match (completion, row.output_len) {
                (_, Some(n)) => n,
                (Some(c), None) => measure(row, c)?,
                (None, None) => unreachable!("every row has an output length or a completion"),
            };
            if self.format == DatasetFormat::ShareGpt && !vllm_valid(prompt_len, output_len) {
                return Ok(None);
            }
            if prompt_len == 0 {
                return Err(Error::Invalid(format!("{file} {}: the prompt encodes to no tokens", self.place(row))));
            }
            if prompt_len > limits::MAX_TOKENS {
                return Err(Error::Invalid(format!(
                    "{file} {}: a prompt of {prompt_len} tokens, above the limit of {}",
                    self.place(row),
                    limits::MAX_TOKENS
                )));
            }
            let arrival_s = row.timestamp_ms.map(|ms| (ms - first_ms) / 1000.0 / speedup);
            if let Some(t) = arrival_s.filter(|&t| t > limits::MAX_SCHEDULE_S) {
                return Err(Error::Invalid(format!(
                    "{file} {}: replayed at {} s, above the limit of {} s (raise --trace-speedup)",
                    self.place(row),
                    limits::show(t.round()),
                    limits::MAX_SCHEDULE_S
                )));
            }
            let blocks = match &row.hash_ids {
                Some(ids) if ids.len() != prompt_len.div_ceil(s.block_tokens) => {
                    return Err(Error::Invalid(format!(
                        "{file} {}: {} hash_ids for a prompt of {prompt_len} tokens, which is {} blocks of {} \
                         (the trace's block size differs? set it: --trace-block-size, or the page's Trace block size)",
                        self.place(row),
                        ids.len(),
                        prompt_len.div_ceil(s.block_tokens),
                        s.block_tokens
                    )))
                }
                ids => ids.as_deref().map(Arc::from),
            };
            let prompt = prompt.map(Arc::from);
            Ok(Some(DatasetItem { prompt, prompt_len, output_len, arrival_s, conversation: None, blocks }))
        };
        // Each row's requests: its first turn, or its whole conversation up to the first turn
        // the filters drop or whose request would pass the bound.
        let mut groups: Vec<Vec<DatasetItem>> = Vec::with_capacity(self.rows.len());
        for row in &self.rows {
            let first = turn(row, row.prompt.as_deref(), row.completion.as_deref())?;
            let Some(bound) = s.conversations else {
                groups.extend(first.map(|item| vec![item]));
                continue;
            };
            let mut turns: Vec<DatasetItem> = Vec::new();
            let mut history = 0usize;
            let later = row.later.iter().map(|(user, answer)| turn(row, Some(user), Some(answer)));
            for item in std::iter::once(Ok(first)).chain(later) {
                let Some(item) = item? else { break };
                let request = history + item.prompt_len + item.output_len;
                if request > bound {
                    break;
                }
                history = request;
                turns.push(item);
            }
            if !turns.is_empty() {
                groups.push(turns);
            }
        }
        let rows_kept = groups.len();
        if groups.is_empty() {
            return Err(Error::Invalid(format!("{file}: no row is left after the filters ({})", self.filters())));
        }
        if self.format != DatasetFormat::Trace {
            groups.shuffle(&mut stream(s.seed, STREAM_DATASET, 0));
        }
        let whole = s.conversations.is_some();
        let mut items: Vec<DatasetItem> = groups
            .into_iter()
            .enumerate()
            .flat_map(|(session, turns)| {
                turns.into_iter().enumerate().map(move |(turn, item)| DatasetItem {
                    conversation: whole.then_some((session as u64, turn as u32)),
                    ..item
                })
            })
            .collect();
        items.truncate(s.num_requests.unwrap_or(usize::MAX).min(limits::MAX_REQUESTS));
        Ok(DatasetWorkload {
            file: file.clone(),
            format: self.format,
            rows_read: self.rows.len() + self.dropped_short_conversations,
            rows_kept,
            filters: match s.conversations {
                Some(bound) => format!(
                    "{}; whole conversations: each turn filtered alike, a conversation ends before a turn the \
                     filters drop or whose request passes {bound} tokens",
                    self.filters()
                ),
                None => self.filters(),
            },
            whole_conversations: whole,
            lengths_measured_by: if has_text { s.tokenizer.to_string() } else { "none (lengths given)".into() },
            trace_speedup: (self.format == DatasetFormat::Trace).then_some(speedup),
            block_tokens: has_blocks.then_some(s.block_tokens),
            items: Arc::new(items),
        })
    }

    /// Where a row is, for messages: "line N", or "conversation N" (ShareGPT).
    pub fn place(&self, row: &DatasetRow) -> String {
        match self.format {
            DatasetFormat::ShareGpt => format!("conversation {}", row.at),
            DatasetFormat::Jsonl | DatasetFormat::Trace => format!("line {}", row.at),
        }
    }

    fn filters(&self) -> String {
        match self.format {
            DatasetFormat::ShareGpt => "vLLM's ShareGPT filters: conversations of 2+ turns; prompt >= 4 tokens, \
                                        output >= 4, prompt <= 1024, prompt + output <= 2048"
                .into(),
            DatasetFormat::Jsonl | DatasetFormat::Trace => "none".into(),
        }
    }
}

/// vLLM's `is_valid_sequence` with its defaults (min 4, prompt ≤ 1,024, total ≤ 2,048).
fn vllm_valid(prompt_len: usize, output_len: usize) -> bool {
    !(prompt_len < 4 || output_len < 4 || prompt_len > 1024 || prompt_len + output_len > 2048)
}

const STREAM_DATASET: u64 = 4;

/// Mooncake's traces' block: 512 tokens a hash id.
pub const DEFAULT_BLOCK_TOKENS: usize = 512;

/// How an edge (the CLI's flags, the page's picker) asks for a dataset's rows as a run's requests.
pub struct Attach<'a> {
    /// Measures rows with text, and its name for the record.
    pub tokenizer: Option<(&'a crate::model::Tokenizer, &'a str)>,
    /// At most this many requests; `None`: every usable row.
    pub num_requests: Option<usize>,
    pub trace_speedup: f64,
    pub block_tokens: usize,
    /// The model's context (bounds whole conversations); `None` for a server.
    pub context: Option<usize>,
    /// How many rates the run asks for (a trace replays its own times: at most one).
    pub rates: usize,
}

impl DatasetWorkload {
    /// Whole conversations: the fewest and most turns a conversation has (1 and 1 otherwise).
    pub fn conversation_sizes(&self) -> crate::bench::traffic::workload::LenRange {
        let mut sizes = self.items.chunk_by(|a, b| a.conversation.map(|c| c.0) == b.conversation.map(|c| c.0));
        let first = sizes.next().map_or(1, <[_]>::len);
        let (min, max) = sizes.fold((first, first), |(lo, hi), s| (lo.min(s.len()), hi.max(s.len())));
        crate::bench::traffic::workload::LenRange { min, max }
    }

    /// A trace with `hash_ids`: for each request, in the order sent, the prompt tokens an
    /// unbounded prefix cache holds when it arrives: its leading blocks, as long as their chain of
    /// ids (this block's and every one before it) was sent by an earlier request. A prefix cache
    /// matches a block only after the same blocks before it, so an id met after another prefix
    /// does not count. An upper bound for any real cache at this block size: one that evicts, or
    /// that must compute a prompt's last token itself, reuses less. `None` without block ids.
    pub fn implied_hit_tokens(&self) -> Option<Vec<usize>> {
        let block = self.block_tokens?;
        let mut seen: std::collections::HashSet<&[u64]> = std::collections::HashSet::new();
        let hits = self.items.iter().map(|item| {
            let Some(blocks) = item.blocks.as_deref() else { return 0 };
            let shared = (1..=blocks.len()).take_while(|&n| seen.contains(&blocks[..n])).count();
            for n in shared + 1..=blocks.len() {
                seen.insert(&blocks[..n]);
            }
            (shared * block).min(item.prompt_len)
        });
        Some(hits.collect())
    }

    /// [`DatasetWorkload::implied_hit_tokens`] of requests `ids` over their prompt tokens: the
    /// prefix-cache hit rate the trace implies for them. `None` without block ids.
    pub fn implied_hit_rate(&self, ids: impl Iterator<Item = u64>) -> Option<f64> {
        let hits = self.implied_hit_tokens()?;
        let (hit, prompt) = ids
            .filter_map(|id| Some((hits.get(id as usize)?, self.items[id as usize].prompt_len)))
            .fold((0usize, 0usize), |(h, p), (hit, len)| (h + hit, p + len));
        (prompt > 0).then(|| hit as f64 / prompt as f64)
    }

    /// The smallest and largest prompt and output lengths, for the workload's ranges.
    pub fn length_ranges(&self) -> ((usize, usize), (usize, usize)) {
        let span = |f: fn(&DatasetItem) -> usize| {
            let values = self.items.iter().map(f);
            (values.clone().min().unwrap_or(1), values.max().unwrap_or(1))
        };
        (span(|i| i.prompt_len), span(|i| i.output_len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Result<usize> {
        Ok(text.split_whitespace().count())
    }

    fn select(d: &Dataset, n: Option<usize>) -> Result<DatasetWorkload> {
        select_conversations(d, n, None)
    }

    /// `conversations`: whole conversations, bounded at that many tokens.
    fn select_conversations(d: &Dataset, n: Option<usize>, conversations: Option<usize>) -> Result<DatasetWorkload> {
        d.select(&Select {
            count_tokens: Some(&words),
            tokenizer: "words",
            num_requests: n,
            seed: 1,
            trace_speedup: 1.0,
            block_tokens: DEFAULT_BLOCK_TOKENS,
            conversations,
        })
    }

    #[test]
    fn sharegpt_loads_with_vllms_filters() {
        let long = "w ".repeat(1100);
        let text = format!(
            r#"[
  {{"id": "a", "conversations": [{{"from": "human", "value": "one two three four five"}}, {{"from": "gpt", "value": "a b c d e f"}}]}},
  {{"id": "b", "conversations": [{{"from": "human", "value": "too short"}}]}},
  {{"id": "c", "conversations": [{{"from": "human", "value": "x y"}}, {{"from": "gpt", "value": "a b c d"}}]}},
  {{"id": "d", "conversations": [{{"from": "system", "value": "be nice"}}, {{"from": "human", "value": "p q r s"}}, {{"from": "gpt", "value": "a b c"}}]}},
  {{"id": "e", "conversations": [{{"from": "human", "value": "{long}"}}, {{"from": "gpt", "value": "a b c d"}}]}},
  {{"conversations": [{{"value": "u v w x y"}}, {{"value": "1 2 3 4 5 6 7"}}]}}
]"#
        );
        let d = parse("share.json", text.as_bytes(), None).unwrap();
        assert_eq!(d.format, DatasetFormat::ShareGpt);
        assert_eq!((d.rows.len(), d.dropped_short_conversations), (5, 1));
        assert_eq!(d.rows[1].at, 3, "conversation 3 (the second was dropped)");
        assert_eq!(d.rows[2].prompt.as_deref(), Some("p q r s"), "the first human turn, not the system turn");
        let w = select(&d, None).unwrap();
        // Kept: a (5, 6) and the unlabelled one (5, 7); c (prompt 2), d (output 3), e (prompt 1100) dropped.
        assert_eq!((w.rows_read, w.rows_kept), (6, 2));
        let mut lens: Vec<_> = w.items.iter().map(|i| (i.prompt_len, i.output_len)).collect();
        lens.sort();
        assert_eq!(lens, vec![(5, 6), (5, 7)]);
        assert!(w.items.iter().all(|i| i.prompt.is_some() && i.arrival_s.is_none()));
        assert_eq!(select(&d, Some(1)).unwrap().items.len(), 1);
        assert_eq!(w.lengths_measured_by, "words");
        // Text needs a tokenizer.
        let none = d.select(&Select {
            count_tokens: None,
            tokenizer: "",
            num_requests: None,
            seed: 1,
            trace_speedup: 1.0,
            block_tokens: DEFAULT_BLOCK_TOKENS,
            conversations: None,
        });
        assert!(none.unwrap_err().to_string().contains("needs a tokenizer"));
    }

    /// Whole conversations: every turn a request, grouped and marked (conversation, turn); a
    /// conversation ends before a turn the filters drop or whose request passes the bound; only
    /// ShareGPT has them.
    #[test]
    fn sharegpt_whole_conversations_are_turns_in_order() {
        let turn = |from: &str, value: &str| format!(r#"{{"from": "{from}", "value": "{value}"}}"#);
        let conversation = |turns: &[String]| format!(r#"{{"conversations": [{}]}}"#, turns.join(", "));
        let text = format!(
            "[{}, {}, {}]",
            // 3 turns; the fourth's answer is 2 words, under the filters' 4.
            conversation(&[
                turn("human", "a b c d"),
                turn("gpt", "1 2 3 4 5"),
                turn("human", "e f g h i"),
                turn("gpt", "1 2 3 4"),
                turn("human", "j k l m"),
                turn("gpt", "1 2 3 4 5 6"),
                turn("human", "n o p q"),
                turn("gpt", "1 2"),
            ]),
            // Its second turn makes a request of 9 + 4 + 8 = 21 tokens.
            conversation(&[
                turn("human", "r s t u"),
                turn("gpt", "1 2 3 4 5"),
                turn("human", "v w x y"),
                turn("gpt", "1 2 3 4 5 6 7 8")
            ]),
            // Its first turn is filtered: dropped.
            conversation(&[turn("human", "z"), turn("gpt", "1 2 3 4")]),
        );
        let d = parse("share.json", text.as_bytes(), None).unwrap();
        assert_eq!(d.rows[0].later.len(), 3);
        let whole = |n, bound| select_conversations(&d, n, Some(bound));
        let w = whole(None, 40).unwrap();
        assert!(w.whole_conversations && w.filters.contains("whole conversations"));
        assert_eq!(w.rows_kept, 2);
        let mut marks: Vec<(u64, u32, usize, usize)> = w
            .items
            .iter()
            .map(|i| (i.conversation.unwrap().0, i.conversation.unwrap().1, i.prompt_len, i.output_len))
            .collect();
        // Shuffled by conversation, turns in order within each.
        let first = marks[0].0;
        assert!(marks.windows(2).all(|p| p[0].0 < p[1].0 || (p[0].0 == p[1].0 && p[0].1 + 1 == p[1].1)), "{marks:?}");
        marks.sort();
        let lens: Vec<(u32, usize, usize)> = marks.iter().map(|m| (m.1, m.2, m.3)).collect();
        assert_eq!(lens.len(), 5, "{marks:?}");
        assert!(lens.contains(&(2, 4, 6)) && lens.contains(&(1, 4, 8)) && first <= 1, "{lens:?}");
        // A bound of 20: the first ends before its third turn (18 + 4 + 6), the second before its second (21).
        assert_eq!(whole(None, 20).unwrap().items.len(), 3);
        assert_eq!(whole(Some(2), 40).unwrap().items.len(), 2, "cut to the requests asked for");
        let jsonl = parse("p.jsonl", b"{\"input_len\": 4, \"output_len\": 5}\n", None).unwrap();
        let refused = jsonl.select(&Select {
            count_tokens: None,
            tokenizer: "",
            num_requests: None,
            seed: 1,
            trace_speedup: 1.0,
            block_tokens: DEFAULT_BLOCK_TOKENS,
            conversations: Some(40),
        });
        assert!(refused.unwrap_err().to_string().contains("whole conversations come from a ShareGPT dataset"));
    }

    #[test]
    fn jsonl_and_trace_load() {
        let jsonl =
            "{\"prompt\": \"hello there world\", \"output_len\": 5}\n\n{\"input_len\": 40, \"output_len\": 9}\n";
        let d = parse("p.jsonl", jsonl.as_bytes(), None).unwrap();
        assert_eq!(d.format, DatasetFormat::Jsonl);
        let w = select(&d, None).unwrap();
        let mut lens: Vec<_> = w.items.iter().map(|i| (i.prompt.is_some(), i.prompt_len, i.output_len)).collect();
        lens.sort();
        assert_eq!(lens, vec![(false, 40, 9), (true, 3, 5)]);

        let trace = "{\"timestamp\": 1000, \"input_length\": 10, \"output_length\": 2, \"hash_ids\": [7]}\n\
                     {\"timestamp\": 1500, \"input_length\": 20, \"output_length\": 3}\n\
                     {\"timestamp\": 3000, \"input_length\": 30, \"output_length\": 4}\n";
        let d = parse("t.jsonl", trace.as_bytes(), None).unwrap();
        assert_eq!(d.format, DatasetFormat::Trace);
        let w = d
            .select(&Select {
                count_tokens: None,
                tokenizer: "",
                num_requests: None,
                seed: 1,
                trace_speedup: 2.0,
                block_tokens: DEFAULT_BLOCK_TOKENS,
                conversations: None,
            })
            .unwrap();
        let times: Vec<_> = w.items.iter().map(|i| i.arrival_s.unwrap()).collect();
        assert_eq!(times, vec![0.0, 0.25, 1.0], "in order, from the first row, twice as fast");
        assert_eq!(w.items[2].prompt_len, 30);
        assert_eq!(w.trace_speedup, Some(2.0));
        assert_eq!(w.lengths_measured_by, "none (lengths given)");
    }

    #[test]
    fn malformed_files_name_the_line() {
        let cases: [(&str, Option<DatasetFormat>, &str); 9] = [
            ("{\"prompt\": \"a\", \"output_len\": 5}\n{\"prompt\": \"b\"}\n", None, "p.jsonl line 2"),
            ("{\"prompt\": \"a\", \"output_len\": 5}\n{\"prompt\": \"a\", \"output_len\": 5, \"typo\": 1}\n", None, "line 2"),
            ("{\"input_len\": 0, \"output_len\": 5}\n", None, "line 1: input_len 0"),
            ("{\"timestamp\": 5, \"input_length\": 1, \"output_length\": 1}\n{\"timestamp\": 4, \"input_length\": 1, \"output_length\": 1}\n", None, "line 2: timestamp 4 is before"),
            ("{\"timestamp\": 5, \"input_length\": 1, \"output_length\": 1}\n\n\nnot json\n", None, "line 4"),
            ("{\"timestamp\": -1, \"input_length\": 1, \"output_length\": 1}\n", None, "line 1: timestamp -1"),
            ("[\n {\"conversations\": [{\"from\": \"human\", \"value\": \"a\"}, {\"from\": \"gpt\"}]}\n]", None, "line 2"),
            ("[\n {\"conversations\": [\n", None, "line 3"),
            ("hello", None, "cannot tell the dataset's format"),
        ];
        for (text, format, expected) in cases {
            let err = parse("p.jsonl", text.as_bytes(), format).unwrap_err().to_string();
            assert!(err.contains(expected), "{text:?} -> {err}");
            assert!(err.starts_with("p.jsonl"), "{err}");
            assert!(!err.contains('\n'), "one line: {err}");
        }
        assert!(parse("x", b"\xff\xfe", Some(DatasetFormat::Jsonl))
            .unwrap_err()
            .to_string()
            .contains("line 1: not UTF-8"));
        // Ambiguous first line.
        let both = "{\"timestamp\": 1, \"prompt\": \"a\", \"output_len\": 1}\n";
        assert!(guess_format(both.as_bytes()).is_err());
        assert!(parse("x", both.as_bytes(), Some(DatasetFormat::Jsonl)).unwrap_err().to_string().contains("line 1"));
    }

    #[test]
    fn traces_beyond_a_day_are_refused() {
        let trace = "{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1}\n\
                     {\"timestamp\": 90000000, \"input_length\": 1, \"output_length\": 1}\n";
        let d = parse("t", trace.as_bytes(), None).unwrap();
        let select = |speedup| {
            d.select(&Select {
                count_tokens: None,
                tokenizer: "",
                num_requests: None,
                seed: 0,
                trace_speedup: speedup,
                block_tokens: DEFAULT_BLOCK_TOKENS,
                conversations: None,
            })
        };
        assert!(select(1.0).unwrap_err().to_string().contains("line 2: replayed at 90000 s"));
        assert!(select(2.0).is_ok());
        assert!(select(0.0).unwrap_err().to_string().contains("trace speedup"));
    }

    /// Rows of (input_length, hash_ids) one second apart, selected with blocks of `block`.
    fn block_trace(rows: &[(usize, &[u64])], block: usize) -> Result<DatasetWorkload> {
        let lines: Vec<String> = rows
            .iter()
            .enumerate()
            .map(|(i, (len, ids))| {
                format!(
                    "{{\"timestamp\": {}, \"input_length\": {len}, \"output_length\": 2, \"hash_ids\": {ids:?}}}",
                    i * 1000
                )
            })
            .collect();
        let d = parse("mooncake.jsonl", lines.join("\n").as_bytes(), None)?;
        d.select(&Select {
            count_tokens: None,
            tokenizer: "",
            num_requests: None,
            seed: 0,
            trace_speedup: 1.0,
            block_tokens: block,
            conversations: None,
        })
    }

    #[test]
    fn hash_ids_give_the_hits_an_unbounded_prefix_cache_would_have() {
        // Blocks of 4. Row 1 shares row 0's first two blocks; row 2 repeats row 0 whole (its
        // short last block too: 10 tokens); row 3 holds block 2 after another first block, which
        // a prefix cache cannot reuse; row 4 shares row 3's first block only.
        let rows: [(usize, &[u64]); 5] =
            [(10, &[1, 2, 3]), (12, &[1, 2, 4]), (10, &[1, 2, 3]), (8, &[5, 2]), (6, &[5, 6])];
        let w = block_trace(&rows, 4).unwrap();
        assert_eq!(w.block_tokens, Some(4));
        assert_eq!(w.items[1].blocks.as_deref(), Some(&[1, 2, 4][..]));
        // By hand: 0, 2 blocks = 8, the whole 10, 0, 1 block = 4.
        assert_eq!(w.implied_hit_tokens().unwrap(), [0, 8, 10, 0, 4]);
        // Without hash_ids: nothing implied.
        let plain = block_trace(&[], 4);
        assert!(plain.is_err(), "an empty trace is refused");
    }

    #[test]
    fn hash_ids_that_do_not_fit_the_prompt_are_refused() {
        let too_many = block_trace(&[(8, &[1, 2, 3])], 4).unwrap_err().to_string();
        assert!(too_many.contains("line 1: 3 hash_ids for a prompt of 8 tokens, which is 2 blocks of 4"), "{too_many}");
        assert!(too_many.contains("--trace-block-size"), "{too_many}");
        let too_few = block_trace(&[(9, &[1, 2])], 4).unwrap_err().to_string();
        assert!(too_few.contains("2 hash_ids for a prompt of 9 tokens, which is 3 blocks"), "{too_few}");
        assert!(block_trace(&[(9, &[1])], 0).unwrap_err().to_string().contains("trace block size 0"));
        let empty =
            parse("t", b"{\"timestamp\": 0, \"input_length\": 4, \"output_length\": 1, \"hash_ids\": []}", None);
        assert!(empty.unwrap_err().to_string().contains("line 1: hash_ids is empty"));
        // Mooncake's own block size, as the default.
        let w = block_trace(&[(1025, &[1, 2, 3])], DEFAULT_BLOCK_TOKENS).unwrap();
        assert_eq!(w.implied_hit_tokens().unwrap(), [0]);
    }
}
