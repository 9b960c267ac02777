//! `tokenmeter speed`, `roofline` and `adapter`: the engine against the adapter's own roofline.

use super::model::{choose_kernels, engine_options, load_with, open, ModelArgs, Opened};
use clap::Args;
use tokenmeter::bench::run::speed;
use tokenmeter::engine::trial::TrialPlan;
use tokenmeter::gpu::Gpu;
use tokenmeter::limits::{self, parse_count};
use tokenmeter::Result;

#[derive(Args)]
pub(crate) struct SpeedArgs {
    #[command(flatten)]
    pub(crate) model: ModelArgs,
    /// Decode batch sizes.
    #[arg(long, value_delimiter = ',', default_value = speed::DEFAULT_BATCHES, allow_negative_numbers = true,
          value_parser = |s: &str| parse_count(s, 1, limits::MAX_SEQS))]
    pub(crate) batches: Vec<usize>,
    /// Prefill lengths.
    #[arg(long, value_delimiter = ',', default_value = speed::DEFAULT_PREFILL, allow_negative_numbers = true,
          value_parser = |s: &str| parse_count(s, 1, limits::MAX_BATCHED_TOKENS))]
    pub(crate) prefill: Vec<usize>,
    /// Decode steps per batch size.
    #[arg(long, default_value_t = speed::DEFAULT_STEPS, allow_negative_numbers = true,
          value_parser = |s: &str| parse_count(s, 1, limits::MAX_SPEED_STEPS))]
    pub(crate) steps: usize,
    /// Times each prefill length is timed (its median and spread are reported).
    #[arg(long, default_value_t = speed::DEFAULT_PREFILL_REPEATS, allow_negative_numbers = true,
          value_parser = |s: &str| parse_count(s, 1, limits::MAX_SPEED_STEPS))]
    pub(crate) prefill_repeats: usize,
    /// Prompt tokens per decoding sequence (decode speed at a longer context: try 2048).
    #[arg(long, default_value_t = speed::DEFAULT_CONTEXT, allow_negative_numbers = true,
          value_parser = |s: &str| parse_count(s, 1, limits::MAX_TOKENS))]
    pub(crate) context: usize,
    /// Also time one decode step per batch size kernel by kernel and print where it goes.
    #[arg(long)]
    pub(crate) profile: bool,
    /// N extra one-workgroup dispatches in every step, each behind a barrier as a step's own: the
    /// step's rise, against N × the roofline's cost of a dispatch, checks the attribution.
    #[arg(long, default_value_t = 0, value_parser = |s: &str| parse_count(s, 0, 100_000))]
    pub(crate) planted_dispatches: usize,
}

/// Host memory copy of 256 MiB (read + written bytes), median of 8: the machine's own bandwidth,
/// measured outside the GPU stack.
pub(crate) fn host_copy_gb_s() -> f64 {
    let n = 256 << 20;
    let src = vec![1u8; n];
    let mut dst = vec![0u8; n];
    let mut times: Vec<f64> = (0..8)
        .map(|_| {
            let t = std::time::Instant::now();
            dst.copy_from_slice(std::hint::black_box(&src));
            std::hint::black_box(&dst);
            t.elapsed().as_secs_f64()
        })
        .collect();
    times.sort_by(|a, b| a.partial_cmp(b).expect("no NaN"));
    2.0 * n as f64 / times[4] / 1e9
}

/// The machine's 1-minute load average (Linux's /proc/loadavg; `None` elsewhere): printed beside
/// speed figures, so that a slow run on a busy machine is read as such.
fn load_1m() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg").ok()?.split_whitespace().next()?.parse().ok()
}

pub(crate) async fn roofline() -> Result<()> {
    let gpu = Gpu::new().await?;
    let r = tokenmeter::gpu::roofline::measure(&gpu, 8).await?;
    let host = host_copy_gb_s();
    let out = serde_json::json!({ "adapter": gpu.adapter.name, "roofline": r, "host_copy_gb_s": host });
    println!("{}", serde_json::to_string_pretty(&out).expect("serialisable"));
    Ok(())
}

pub(crate) async fn main(mut args: SpeedArgs) -> Result<()> {
    let biggest_prefill = args.prefill.iter().copied().max().unwrap_or(0);
    args.model.max_batched_tokens = args.model.max_batched_tokens.max(biggest_prefill);
    let max_batch = args.batches.iter().copied().max().unwrap_or(1);
    let loaded = open(&args.model).await?;
    let (cfg, tokenizer) = match &loaded {
        Opened::Disk(c, t) => (&c.config, t.as_ref().as_ref()),
        Opened::Synthetic(s) => (&s.config, None),
    };
    let draft = args.model.spec.open_draft(cfg, tokenizer).await?;
    let mut model = match &loaded {
        Opened::Disk(c, _) => load_with(&args.model, c, max_batch).await?,
        Opened::Synthetic(s) => load_with(&args.model, s, max_batch).await?,
    };
    choose_kernels(&args.model, &mut model, &TrialPlan::new(&args.prefill, max_batch)).await?;
    let load_before = load_1m();
    let roof = tokenmeter::gpu::roofline::measure(&model.gpu, 8).await?;
    let host = host_copy_gb_s();
    eprintln!("{}", speed::roofline_line(&roof, Some(host)));
    let mut engine = args.model.spec.engine(model, draft, &engine_options(&args.model, max_batch)).await?;
    let plan = speed::SpeedPlan {
        batches: args.batches,
        prefill: args.prefill,
        steps: args.steps,
        prefill_repeats: args.prefill_repeats,
        context: args.context,
        profile: args.profile,
        planted_dispatches: args.planted_dispatches,
    };
    let name = args.model.model.as_ref().map(|p| p.display().to_string()).or(args.model.synthetic.clone());
    let mut out = speed::table(&mut engine, &roof, &plan, Some(host), name, &mut |line| eprintln!("{line}")).await?;
    let load_after = load_1m();
    let shown = |l: Option<f64>| l.map_or("–".to_string(), |l| format!("{l:.2}"));
    eprintln!("machine load (1-minute average): {} before, {} after", shown(load_before), shown(load_after));
    out["machine_load_1m"] = serde_json::json!({ "before": load_before, "after": load_after });
    println!("{}", serde_json::to_string_pretty(&out).expect("serialisable"));
    Ok(())
}

pub(crate) async fn adapter() -> Result<()> {
    let gpu = Gpu::new().await?;
    println!("{}", serde_json::to_string_pretty(&gpu.adapter).expect("serialisable"));
    Ok(())
}
