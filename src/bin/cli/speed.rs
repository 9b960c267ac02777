//! `tokenmeter speed`, `roofline` and `adapter`: the engine against the adapter's own roofline.

use super::model::{engine_options, load_with, open, ModelArgs, Opened};
use clap::Args;
use tokenmeter::gpu::Gpu;
use tokenmeter::limits::{self, parse_count};
use tokenmeter::Result;

#[derive(Args)]
pub(crate) struct SpeedArgs {
    #[command(flatten)]
    pub(crate) model: ModelArgs,
    /// Decode batch sizes.
    #[arg(long, value_delimiter = ',', default_value = "1,4,16,64", allow_negative_numbers = true,
          value_parser = |s: &str| parse_count(s, 1, limits::MAX_SEQS))]
    pub(crate) batches: Vec<usize>,
    /// Prefill lengths.
    #[arg(long, value_delimiter = ',', default_value = "128,512,2048", allow_negative_numbers = true,
          value_parser = |s: &str| parse_count(s, 1, limits::MAX_BATCHED_TOKENS))]
    pub(crate) prefill: Vec<usize>,
    /// Decode steps per batch size.
    #[arg(long, default_value_t = 8, allow_negative_numbers = true,
          value_parser = |s: &str| parse_count(s, 1, limits::MAX_SPEED_STEPS))]
    pub(crate) steps: usize,
    /// Prompt tokens per decoding sequence (decode speed at a longer context: try 2048).
    #[arg(long, default_value_t = 16, allow_negative_numbers = true,
          value_parser = |s: &str| parse_count(s, 1, limits::MAX_TOKENS))]
    pub(crate) context: usize,
    /// Also time one decode step per batch size kernel by kernel and print where it goes.
    #[arg(long)]
    pub(crate) profile: bool,
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

pub(crate) async fn roofline() -> Result<()> {
    let gpu = Gpu::new().await?;
    let r = tokenmeter::gpu::roofline::measure(&gpu, 8).await?;
    let host = host_copy_gb_s();
    let out = serde_json::json!({ "adapter": gpu.adapter.name, "roofline": r, "host_copy_gb_s": host });
    println!("{}", serde_json::to_string_pretty(&out).expect("serialisable"));
    Ok(())
}

pub(crate) async fn main(mut args: SpeedArgs) -> Result<()> {
    use tokenmeter::bench::speed;
    let biggest_prefill = args.prefill.iter().copied().max().unwrap_or(0);
    args.model.max_batched_tokens = args.model.max_batched_tokens.max(biggest_prefill);
    let max_batch = args.batches.iter().copied().max().unwrap_or(1);
    let loaded = open(&args.model).await?;
    let (cfg, tokenizer) = match &loaded {
        Opened::Disk(c, t) => (&c.config, t.as_ref().as_ref()),
        Opened::Synthetic(s) => (&s.config, None),
    };
    let draft = args.model.spec.open_draft(cfg, tokenizer).await?;
    let model = match &loaded {
        Opened::Disk(c, _) => load_with(&args.model, c, max_batch).await?,
        Opened::Synthetic(s) => load_with(&args.model, s, max_batch).await?,
    };
    let roof = tokenmeter::gpu::roofline::measure(&model.gpu, 8).await?;
    let host = host_copy_gb_s();
    eprintln!(
        "roofline: copy {:.2} GB/s (blocked {:.2}, strided {:.2}{}), FMA {:.1} GFLOP/s; host memcpy {host:.2} GB/s",
        roof.copy_gb_s,
        roof.copy_blocked_gb_s,
        roof.copy_strided_gb_s,
        roof.copy_texture_gb_s.map(|t| format!(", texture {t:.2}")).unwrap_or_default(),
        roof.fma_gflop_s
    );
    let mut engine = args.model.spec.engine(model, draft, &engine_options(&args.model, max_batch)).await?;
    let mut decode = Vec::new();
    for &b in &args.batches {
        let d = speed::decode(&mut engine, &roof, b, args.context, args.steps, args.profile).await?;
        eprintln!(
            "decode batch {:>3} at context {:>5}: {:>8.2} ms/step {:>8.1} tok/s  {:>6.2} GB/s = {:>5.1}% of adapter copy, {:>5.1}% of host memcpy",
            b, d.context, d.step_ms, d.tokens_per_s, d.gb_s, 100.0 * d.fraction_of_copy, 100.0 * d.gb_s / host
        );
        if d.drafted_per_step > 0.0 {
            eprintln!(
                "    speculation: {:.2} draft tokens verified per step, {:.2} accepted ({:.1}%): {:.2} tokens per sequence per step",
                d.drafted_per_step,
                d.accepted_per_step,
                100.0 * d.accepted_per_step / d.drafted_per_step,
                1.0 + d.accepted_per_step / b as f64
            );
        }
        let total: f64 = d.profile.iter().map(|k| k.ms).sum();
        for k in &d.profile {
            eprintln!(
                "    {:<16} {:>4} dispatches {:>9.2} ms  {:>5.1}%",
                k.kernel,
                k.dispatches,
                k.ms,
                100.0 * k.ms / total
            );
        }
        decode.push(d);
    }
    let mut prefill = Vec::new();
    for &n in &args.prefill {
        let p = speed::prefill(&mut engine, &roof, n).await?;
        eprintln!(
            "prefill {:>5} tokens: {:>9.1} ms {:>8.1} tok/s  {:>6.1} GFLOP/s = {:>5.1}% of FMA peak",
            n,
            p.ms,
            p.tokens_per_s,
            p.gflop_s,
            100.0 * p.fraction_of_fma
        );
        prefill.push(p);
    }
    let out = serde_json::json!({
        "adapter": engine.model.gpu.adapter.name,
        "kernel_family": engine.model.kernel_options().family,
        "kernels": tokenmeter::bench::session::KernelPath::of(&engine.model.kernel_options()),
        "weight_format": engine.model.kernel_options().format,
        "weight_bytes_per_token": engine.model.weights.bytes_per_token(),
        "model": args.model.model.as_ref().map(|p| p.display().to_string()).or(args.model.synthetic.clone()),
        "roofline": roof,
        "host_copy_gb_s": host,
        "decode": decode,
        "prefill": prefill,
    });
    println!("{}", serde_json::to_string_pretty(&out).expect("serialisable"));
    Ok(())
}

pub(crate) async fn adapter() -> Result<()> {
    let gpu = Gpu::new().await?;
    println!("{}", serde_json::to_string_pretty(&gpu.adapter).expect("serialisable"));
    Ok(())
}
