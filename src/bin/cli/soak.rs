//! `tokenmeter soak --model DIR`: thousands of requests through the batcher at Poisson arrivals,
//! on a KV cache small enough that sequences are preempted, with every event checked, every KV
//! block accounted for and resident memory watched ([`tokenmeter::bench::run::soak`]). Prints the
//! figures; exits 1 when a check fails. The model folder's `reference.json` (the test fixtures
//! have one) adds requests whose greedy tokens must come out exactly.

use clap::Args;
use serde::Deserialize;
use std::sync::Arc;
use tokenmeter::bench::base::rules::Rule;
use tokenmeter::bench::run::soak::{self, Golden, SoakSpec};
use tokenmeter::bench::{Arrival, Cancellations, DelayRange, Lang, LenRange, WorkloadSpec};
use tokenmeter::engine::{Engine, EngineOptions, ForwardPass};
use tokenmeter::gpu::Gpu;
use tokenmeter::limits::{self, parse_count, parse_number};
use tokenmeter::model::checkpoint::Checkpoint;
use tokenmeter::model::source::DirStore;
use tokenmeter::{Error, Result};

#[derive(Args)]
pub struct SoakArgs {
    /// A Hugging Face model folder (a small one: tests/fixtures/tiny-gqa-tied).
    #[arg(long)]
    model: std::path::PathBuf,
    #[arg(long, default_value_t = 2000, allow_negative_numbers = true,
          value_parser = |s: &str| parse_count(s, 1, limits::MAX_REQUESTS))]
    num_requests: usize,
    /// Poisson arrivals per second.
    #[arg(long, default_value_t = 50.0, allow_negative_numbers = true,
          value_parser = |s: &str| parse_number(s, 1e-3, 1e6))]
    rate: f64,
    /// Prompt tokens: N or MIN:MAX.
    #[arg(long, default_value = "4:64")]
    input_len: String,
    /// Output tokens: N or MIN:MAX.
    #[arg(long, default_value = "4:32")]
    output_len: String,
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    seed: u64,
    /// KV blocks: few, so that sequences are preempted (the longest request must still fit).
    #[arg(long, default_value_t = 48, allow_negative_numbers = true,
          value_parser = |s: &str| parse_count(s, 1, limits::MAX_KV_BLOCKS))]
    kv_blocks: usize,
    #[arg(long, default_value_t = 8, allow_negative_numbers = true,
          value_parser = |s: &str| parse_count(s, 1, limits::MAX_BLOCK_SIZE))]
    block_size: usize,
    #[arg(long, default_value_t = 16, allow_negative_numbers = true,
          value_parser = |s: &str| parse_count(s, 1, limits::MAX_SEQS))]
    max_batch: usize,
    #[arg(long, default_value_t = 64, allow_negative_numbers = true,
          value_parser = |s: &str| parse_count(s, 1, limits::MAX_BATCHED_TOKENS))]
    max_batched_tokens: usize,
    /// Prefix caching (with --shared-prefix-len the random prompts share blocks; the golden
    /// requests repeat the reference prompts).
    #[arg(long)]
    prefix_cache: bool,
    /// Every random prompt starts with the same N tokens (counted in --input-len); 0: none.
    #[arg(long, default_value_t = 0, allow_negative_numbers = true,
          value_parser = |s: &str| parse_count(s, 0, limits::MAX_TOKENS))]
    shared_prefix_len: usize,
    /// With --shared-prefix-len: G different prefixes, request i taking prefix i mod G.
    #[arg(long, default_value_t = 1, allow_negative_numbers = true,
          value_parser = |s: &str| parse_count(s, 1, limits::MAX_PREFIX_GROUPS))]
    prefix_groups: usize,
    /// Requests that finish before the resident-memory baseline (default: a quarter, at most 200).
    /// lavapipe compiles shaders and grows its caches during the first few dozen requests.
    #[arg(long, allow_negative_numbers = true, value_parser = |s: &str| parse_count(s, 0, limits::MAX_REQUESTS))]
    warmup: Option<usize>,
    /// Fail when resident memory grows more than this after warm-up (MB).
    #[arg(long, default_value_t = 32.0, allow_negative_numbers = true,
          value_parser = |s: &str| parse_number(s, 0.0, 1e6))]
    rss_bound_mb: f64,
    /// Cancellations as a workload: abort this share of the requests (0 to 1, drawn from --seed)
    /// --cancel-after-ms after each is submitted; the ledger then expects their cancelled finish
    /// and the KV check that every block comes back covers them.
    #[arg(long, allow_negative_numbers = true)]
    cancel_share: Option<f64>,
    /// With --cancel-share: milliseconds after the submission, one value (50) or a range (50:200).
    #[arg(long)]
    cancel_after_ms: Option<String>,
    /// Write the report (figures, resident-memory samples, violations) as JSON here.
    #[arg(long)]
    json: Option<std::path::PathBuf>,
    #[command(flatten)]
    switches: super::switches::SwitchArgs,
}

/// The cases of a fixture's `reference.json`, as far as the soak needs them.
#[derive(Deserialize)]
struct Reference {
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    prompt_ids: Vec<u32>,
    tokens: Vec<u32>,
}

fn golden(dir: &std::path::Path) -> Result<Vec<Golden>> {
    let path = dir.join("reference.json");
    if !path.is_file() {
        return Ok(Vec::new());
    }
    let bytes = limits::read_file(&path, limits::INDEX_JSON_MAX_BYTES)?;
    let reference: Reference = serde_json::from_slice(&bytes)
        .map_err(|e| Error::Invalid(format!("{}: not a reference file: {e}", path.display())))?;
    Ok(reference.cases.into_iter().map(|c| Golden { prompt: c.prompt_ids, tokens: c.tokens }).collect())
}

/// The exit status: 0 passed, 1 a check failed (or the engine failed), 2 bad flags.
pub fn main(args: SoakArgs) -> i32 {
    match pollster::block_on(run(args)) {
        Ok(true) => 0,
        Ok(false) => 1,
        Err(e) => {
            eprintln!("error: {e}");
            if matches!(e, Error::Invalid(_)) {
                2
            } else {
                1
            }
        }
    }
}

/// The workload's cancellations from the two flags (both or neither).
fn cancellations(args: &SoakArgs) -> Result<Option<Cancellations>> {
    let invalid = |rule: Rule| Error::Invalid(rule.text(Lang::En));
    match (args.cancel_share, &args.cancel_after_ms) {
        (None, None) => Ok(None),
        (Some(share), Some(after)) => {
            let after_s = DelayRange::parse_ms(after).map_err(invalid)?;
            Ok(Some(Cancellations { share, after_s }))
        }
        _ => Err(invalid(Rule::CancelNeedsBoth)),
    }
}

/// Whether every check passed.
async fn run(args: SoakArgs) -> Result<bool> {
    let workload = WorkloadSpec {
        cancel: cancellations(&args)?,
        arrival: Arrival::Poisson,
        rate: args.rate,
        burstiness: 1.0,
        concurrency: 1,
        num_requests: args.num_requests,
        input_len: args.input_len.parse::<LenRange>()?,
        output_len: args.output_len.parse::<LenRange>()?,
        seed: args.seed,
        span: Default::default(),
        dataset: None,
        max_concurrency: None,
        saturation_stop: false,
        shared_prefix: (args.shared_prefix_len > 0)
            .then_some(tokenmeter::bench::SharedPrefix { len: args.shared_prefix_len, groups: args.prefix_groups }),
        conversations: None,
    };
    workload.validate()?;
    let store = DirStore::new(args.model.clone())?;
    let checkpoint = Checkpoint::open(&store).await?;
    let options = EngineOptions {
        max_batched_tokens: args.max_batched_tokens,
        max_seqs: args.max_batch,
        block_size: args.block_size,
        kv_blocks: Some(args.kv_blocks),
        prefix_cache: args.prefix_cache,
        overlap: args.switches.overlap(),
        kernels: args.switches.kernels(),
        ..EngineOptions::default()
    };
    let gpu = Arc::new(Gpu::new().await?);
    let mut engine = Engine::new(ForwardPass::load(gpu, &checkpoint, &options, &mut |_, _| {}).await?);
    let vocab = engine.model.cfg.vocab_size as u32;
    let spec = SoakSpec {
        workload,
        // One request in 5 stops at any of 64 ids spread over the vocabulary (about 1 token in 8
        // of a 512-token vocabulary), so stops happen at random lengths.
        stop_every: 5,
        stop_ids: (0..vocab).step_by((vocab as usize / 64).max(1)).collect(),
        golden: golden(&args.model)?,
        golden_every: 10,
        warmup_requests: args.warmup.unwrap_or((args.num_requests / 4).min(200)),
        rss_every_s: 0.5,
        max_idle_steps: 1000,
    };
    let workload_cancels = spec.workload.cancel.is_some();
    let l = &engine.model.limits;
    eprintln!(
        "soak: {} requests, Poisson {}/s, {} KV blocks of {} tokens, {} sequences and {} tokens per step, on {}",
        args.num_requests,
        args.rate,
        l.num_blocks,
        l.block_size,
        l.max_seqs,
        l.max_batched_tokens,
        engine.model.gpu.adapter.name
    );
    let mut next_print = 0;
    let report = soak::run(&mut engine, &spec, &mut |p| {
        if p.finished >= next_print || p.finished == p.total {
            next_print = p.finished + (p.total / 20).max(1);
            let rss = p.rss_bytes.map_or("-".to_string(), |b| format!("{:.1} MB", b as f64 / 1e6));
            eprintln!("[soak] {}/{} finished, {} preemptions, RSS {rss}", p.finished, p.total, p.preemptions);
        }
    })
    .await?;
    let mb = |b: Option<u64>| b.map_or("-".to_string(), |b| format!("{:.1} MB", b as f64 / 1e6));
    println!(
        "Requests: {} ({} finished, {} by a stop id, {} golden)",
        report.requests, report.finished, report.finished_by_stop, report.golden_checked
    );
    if workload_cancels {
        println!("Cancelled by the workload: {}", report.cancelled);
    }
    println!("Duration: {:.1} s, {} steps", report.duration_s, report.steps);
    println!("Tokens: {} prompt, {} output", report.prompt_tokens, report.output_tokens);
    println!("Preemptions: {}", report.preemptions);
    if args.prefix_cache {
        println!("Prompt tokens served from the prefix cache: {}", report.cached_prompt_tokens);
    }
    println!("KV blocks in use at the end: {} of {}", report.kv_blocks_in_use_at_end, report.kv_blocks_total);
    println!(
        "RSS: {} after warm-up, {} at the end, {} peak; growth {}",
        mb(report.rss_after_warmup_bytes),
        mb(report.rss_end_bytes),
        mb(report.rss_peak_after_warmup_bytes),
        report.rss_growth_bytes().map_or("-".to_string(), |g| format!("{:+.2} MB", g as f64 / 1e6))
    );
    let failures = report.failures((args.rss_bound_mb * 1e6) as u64);
    if let Some(path) = &args.json {
        let mut json = serde_json::to_value(&report).expect("serialisable");
        json["failures"] = serde_json::json!(failures);
        json["rss_bound_mb"] = args.rss_bound_mb.into();
        let text = serde_json::to_string_pretty(&json).expect("serialisable");
        std::fs::write(path, text).map_err(|e| Error::Invalid(format!("{}: {e}", path.display())))?;
    }
    if failures.is_empty() {
        println!("Soak: passed");
        return Ok(true);
    }
    for f in &failures {
        eprintln!("soak failure: {f}");
    }
    println!("Soak: FAILED ({} checks)", failures.len());
    Ok(false)
}
