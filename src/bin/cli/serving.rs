//! `bench` flags for comparing with other serving benchmarks: datasets and traces instead of
//! synthetic lengths, vLLM's open loop with a concurrency cap, vLLM-compatible result files and
//! the saturation stop of a rate sweep.

use clap::Args;
use tokenmeter::bench::traffic::dataset::{self, Attach, DatasetFormat};
use tokenmeter::bench::WorkloadSpec;
use tokenmeter::limits::{self, parse_count, parse_number};
use tokenmeter::model::Tokenizer;
use tokenmeter::{Error, Result};

#[derive(Args)]
pub struct ServingArgs {
    /// Requests from a file instead of --input-len/--output-len draws: a ShareGPT JSON list,
    /// a JSONL of {prompt | input_len, output_len}, or a trace JSONL of {timestamp (ms),
    /// input_length, output_length} replayed at its recorded times.
    #[arg(long)]
    pub dataset: Option<std::path::PathBuf>,
    /// sharegpt, jsonl or trace (default: guessed from the content when that is unambiguous).
    #[arg(long, requires = "dataset")]
    pub dataset_format: Option<String>,
    /// Replay a trace this many times faster (2 = twice the recorded rate; default 1). Trace
    /// datasets only.
    #[arg(long, requires = "dataset", allow_negative_numbers = true,
          value_parser = |s: &str| parse_number(s, limits::MIN_TRACE_SPEEDUP, limits::MAX_TRACE_SPEEDUP))]
    pub trace_speedup: Option<f64>,
    /// A trace's `hash_ids` each stand for this many prompt tokens (Mooncake's: 512). Equal ids
    /// become equal blocks of tokens, so the prefix cache meets the sharing the trace recorded.
    #[arg(long, requires = "dataset", allow_negative_numbers = true,
          value_parser = |s: &str| parse_count(s, 1, limits::MAX_TOKENS))]
    pub trace_block_size: Option<usize>,
    /// Open loops: at most N requests in flight (arrivals stay Poisson/gamma/constant/trace; a
    /// request due while N are busy waits for a slot, as vLLM's --max-concurrency).
    #[arg(long, allow_negative_numbers = true, value_parser = |s: &str| parse_count(s, 1, limits::MAX_CONCURRENCY))]
    pub max_concurrency: Option<usize>,
    /// Layout of the --json file: tokenmeter (default) or vllm (vLLM's --save-result fields; a
    /// sweep writes one JSON object per line, as vLLM's --append-result).
    #[arg(long, default_value = "tokenmeter")]
    pub save_result_format: String,
    /// Let an open-loop rate run to its end even when the target cannot keep up (by default it
    /// stops early once requests in flight keep growing: see the report's saturation line).
    #[arg(long)]
    pub no_saturation_stop: bool,
}

/// How `--json` is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SaveFormat {
    Tokenmeter,
    Vllm,
}

impl ServingArgs {
    pub fn save_format(&self) -> Result<SaveFormat> {
        match self.save_result_format.as_str() {
            "tokenmeter" => Ok(SaveFormat::Tokenmeter),
            "vllm" => Ok(SaveFormat::Vllm),
            other => Err(Error::Invalid(format!("--save-result-format {other:?}: expected tokenmeter or vllm"))),
        }
    }

    /// The file's rows, read and parsed (before any model or server is touched). `--trace-speedup`
    /// on a dataset that is not a trace (named or guessed) is refused: it would do nothing.
    pub fn read(&self) -> Result<Option<dataset::Dataset>> {
        let Some(path) = &self.dataset else { return Ok(None) };
        let format = self.dataset_format.as_deref().map(str::parse::<DatasetFormat>).transpose()?;
        let bytes = limits::read_file(path, limits::DATASET_MAX_BYTES)?;
        let data = dataset::parse(&path.display().to_string(), &bytes, format)?;
        if self.trace_speedup.is_some() && data.format != DatasetFormat::Trace {
            return Err(Error::Invalid(format!(
                "--trace-speedup scales a trace's recorded times; {} is a {} dataset (pass a trace, or drop \
                 --trace-speedup)",
                path.display(),
                data.format.name()
            )));
        }
        if self.trace_block_size.is_some() && !data.rows.iter().any(|r| r.hash_ids.is_some()) {
            return Err(Error::Invalid(format!(
                "--trace-block-size sizes a trace's hash_ids; {} has none (drop --trace-block-size)",
                path.display()
            )));
        }
        Ok(Some(data))
    }
}

/// `spec` with the dataset's requests ([`WorkloadSpec::attach_dataset`]): lengths measured by
/// `tokenizer` (named in the record), at most `num_requests` (all usable rows when not given), a
/// trace's arrivals; whole conversations within `context` tokens (the model's; a server's is not
/// known: the workload limit). Says on stderr what was taken.
pub fn attach(
    spec: &mut WorkloadSpec,
    rates: &[f64],
    data: &dataset::Dataset,
    args: &ServingArgs,
    num_requests: Option<usize>,
    tokenizer: Option<(&Tokenizer, &str)>,
    context: Option<usize>,
) -> Result<()> {
    spec.attach_dataset(
        data,
        &Attach {
            tokenizer,
            num_requests,
            trace_speedup: args.trace_speedup.unwrap_or(1.0),
            block_tokens: args.trace_block_size.unwrap_or(dataset::DEFAULT_BLOCK_TOKENS),
            context,
            rates: rates.len(),
        },
    )?;
    let selected = spec.dataset.as_ref().expect("attached");
    if let Some(c) = spec.conversations.as_ref().filter(|c| c.from_dataset) {
        eprintln!("dataset: whole conversations of {} to {} turns", c.turns.min, c.turns.max);
    }
    eprintln!(
        "dataset: {} ({}): {} requests of {} usable rows ({} read); lengths measured by {}",
        selected.file,
        selected.format.name(),
        selected.items.len(),
        selected.rows_kept,
        selected.rows_read,
        selected.lengths_measured_by
    );
    Ok(())
}

/// Lines after a rate's report: a saturation stop, and the client's own lateness when it is
/// above 1 ms at p99 ([`tokenmeter::bench::run_warnings`]); then the run's verdict on itself,
/// VALID or INVALID with its reasons ([`tokenmeter::bench::validity_lines`]).
pub fn warnings(result: &tokenmeter::bench::BenchResult, lang: tokenmeter::bench::Lang) {
    for line in tokenmeter::bench::run_warnings(result, lang) {
        println!("! {line}");
    }
    for line in tokenmeter::bench::validity_lines(result, lang) {
        println!("{line}");
    }
}
