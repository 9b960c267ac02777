//! Engine speed against the adapter's roofline: decode throughput at several batch sizes and
//! prefill throughput at several prompt lengths, from the engine's own step timings.
//! Decode is reported as weight bytes streamed per second (memory-bound), prefill as FLOP/s
//! (compute-bound), each next to the probe's copy bandwidth and FMA rate measured in the same run.

use crate::bench::record::run_config::KernelPath;
use crate::engine::{Engine, EventKind, Request, SamplingParams};
use crate::error::Result;
use crate::gpu::roofline::{median, Roofline};
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct DecodeSpeed {
    pub batch: usize,
    /// Tokens each sequence attends to (prompt + tokens decoded so far), at the median step.
    pub context: usize,
    /// Median duration of steps that decoded the whole batch and nothing else (with speculative
    /// decoding: their drafts included, and a draft model's own steps).
    pub step_ms: f64,
    /// Over the timed steps: (slowest − fastest) / median (NaN, `null` in JSON, for fewer than
    /// two). A change smaller than this is not told from noise by one run.
    pub spread: f64,
    /// Tokens out per step (the batch, plus accepted draft tokens on average) / `step_ms`.
    pub tokens_per_s: f64,
    /// Speculative decoding: draft tokens verified, and accepted, per timed step on average (0
    /// without).
    pub drafted_per_step: f64,
    pub accepted_per_step: f64,
    /// Weights + KV read per step / step time.
    pub gb_s: f64,
    /// Weight bytes read per step (every matrix once, scales included: the model's format).
    pub weight_bytes: u64,
    /// `gb_s` over the roofline's copy bandwidth (bytes read + written).
    pub fraction_of_copy: f64,
    /// `gb_s` over the roofline's read bandwidth: the ceiling of a step that reads its bytes.
    pub fraction_of_read: f64,
    /// The step moved its bytes faster than the probe's best read ([`read_probe_fault`]): the
    /// ceiling is wrong, so `fraction_of_read` is no result (the report says so).
    pub read_probe_fault: bool,
    /// One step run kernel by kernel: (kernel, dispatches, total ms), slowest first.
    pub profile: Vec<KernelTime>,
    /// Dispatches in a timed step (one compute pass).
    pub dispatches: usize,
    /// The step's time explained by its bytes and its dispatches ([`StepTime::of`]).
    pub explained: StepTime,
}

/// A step's time explained: its bytes at the probe's read bandwidth, its dispatches at the
/// probe's cost per dispatch in a pass ([`Roofline::dispatch_us`]), and what is left — the
/// kernels' work beyond streaming their bytes, and whatever of the two does not overlap. A
/// negative rest means the bytes and the dispatches' cost overlapped (each a floor, not a sum).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct StepTime {
    pub bytes_ms: f64,
    pub dispatch_ms: f64,
    pub unexplained_ms: f64,
}

impl StepTime {
    /// `step_ms` of `bytes` read at `read_gb_s` and `dispatches` at `dispatch_us` each.
    pub fn of(step_ms: f64, bytes: f64, read_gb_s: f64, dispatches: usize, dispatch_us: f64) -> StepTime {
        let bytes_ms = bytes / read_gb_s / 1e6;
        let dispatch_ms = dispatches as f64 * dispatch_us / 1e3;
        StepTime { bytes_ms, dispatch_ms, unexplained_ms: step_ms - bytes_ms - dispatch_ms }
    }

    /// "2.54 ms = 0.31 ms of bytes + 176 × 12.1 µs = 2.13 ms of dispatches + 0.10 ms unexplained".
    pub fn line(&self, step_ms: f64, dispatches: usize, dispatch_us: f64) -> String {
        format!(
            "{step_ms:.2} ms = {:.2} ms of bytes + {dispatches} × {dispatch_us:.1} µs = {:.2} ms of dispatches + {:.2} ms unexplained",
            self.bytes_ms, self.dispatch_ms, self.unexplained_ms
        )
    }
}

#[cfg(test)]
mod step_time_tests {
    use super::StepTime;

    /// 1.6 GB at 800 GB/s is 2 ms; 176 dispatches at 12.5 µs are 2.2 ms; of a 5 ms step, 0.8 ms is
    /// left. A 3 ms step has -1.2 ms left: the two overlapped.
    #[test]
    fn a_step_is_split_into_bytes_dispatches_and_the_rest() {
        let t = StepTime::of(5.0, 1.6e9, 800.0, 176, 12.5);
        assert!((t.bytes_ms - 2.0).abs() < 1e-12 && (t.dispatch_ms - 2.2).abs() < 1e-12, "{t:?}");
        assert!((t.unexplained_ms - 0.8).abs() < 1e-12, "{t:?}");
        assert!((StepTime::of(3.0, 1.6e9, 800.0, 176, 12.5).unexplained_ms + 1.2).abs() < 1e-12);
        let line = t.line(5.0, 176, 12.5);
        assert_eq!(line, "5.00 ms = 2.00 ms of bytes + 176 × 12.5 µs = 2.20 ms of dispatches + 0.80 ms unexplained");
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct KernelTime {
    pub kernel: &'static str,
    pub dispatches: usize,
    pub ms: f64,
    /// Weight bytes its dispatches read (a matmul's rows as stored; 0 for other kernels).
    pub weight_bytes: u64,
    /// `weight_bytes` ÷ its time, GB/s: how near the matmul came to the read ceiling (`null`
    /// for a kernel that reads no weights).
    pub gb_s: Option<f64>,
    /// The matmuls' multiplies and adds (2 × tokens × rows × K; 0 for other kernels).
    pub flops: u64,
    /// `flops` ÷ its time, GFLOP/s: how near the matmul came to the FMA rate (`null` for a
    /// kernel that is no matmul).
    pub gflop_s: Option<f64>,
    /// For a matmul, the probe's ceiling that binds it ([`KernelTime::priced`]): `read` or `fma`
    /// (`null` for a kernel that is no matmul, or without a roofline).
    pub bound: Option<Ceiling>,
    /// Its rate over that ceiling: `gb_s` ÷ the probe's read, or `gflop_s` ÷ its FMA rate.
    pub fraction_of_bound: Option<f64>,
}

/// A ceiling of the roofline probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Ceiling {
    Read,
    Fma,
}

impl KernelTime {
    /// This kernel with the ceiling that binds it on the probe's roofline (the one rule; the
    /// device check's summary reads `bound` from the JSON): a matmul that does fewer FLOPs a
    /// weight byte than the adapter's FMA rate ÷ read (a decode GEMV: about 1 per token for bf16)
    /// is priced by what it read against the probe's read, any other by what it computed against
    /// the FMA rate (a prefill tile).
    pub fn priced(self, (read_gb_s, fma_gflop_s): (f64, f64)) -> KernelTime {
        let read_bound = (self.flops as f64) < fma_gflop_s / read_gb_s * self.weight_bytes as f64;
        let (bound, fraction_of_bound) = match (self.gb_s, self.gflop_s) {
            (Some(g), _) if read_bound => (Some(Ceiling::Read), Some(g / read_gb_s)),
            (_, Some(f)) => (Some(Ceiling::Fma), Some(f / fma_gflop_s)),
            _ => (None, None),
        };
        KernelTime { bound, fraction_of_bound, ..self }
    }

    /// "matmul_bf16_tiled  168 dispatches  40.12 ms  81.3%" and, for a matmul priced by
    /// [`KernelTime::priced`], its rate against the ceiling that binds it.
    pub fn line(&self, step_total_ms: f64) -> String {
        let rate = match (self.bound, self.fraction_of_bound, self.gb_s, self.gflop_s) {
            (Some(Ceiling::Read), Some(x), Some(g), _) => {
                format!("  {g:>8.1} GB/s of weights = {:>5.1}% of read", 100.0 * x)
            }
            (Some(Ceiling::Fma), Some(x), _, Some(f)) => format!("  {f:>8.0} GFLOP/s = {:>5.1}% of FMA", 100.0 * x),
            _ => String::new(),
        };
        format!(
            "    {:<28} {:>4} dispatches {:>9.2} ms  {:>5.1}%{rate}",
            self.kernel,
            self.dispatches,
            self.ms,
            100.0 * self.ms / step_total_ms
        )
    }
}

/// Per-kernel totals of a profiled step, slowest first, each matmul priced against the roofline's
/// `(read GB/s, FMA GFLOP/s)` ([`KernelTime::priced`]).
pub fn kernel_times(profile: &[crate::gpu::kernels::DispatchTime], roof: (f64, f64)) -> Vec<KernelTime> {
    let mut out: Vec<KernelTime> = Vec::new();
    for d in profile {
        let name = d.kernel.name();
        let k = match out.iter().position(|k| k.kernel == name) {
            Some(i) => &mut out[i],
            None => {
                out.push(KernelTime {
                    kernel: name,
                    dispatches: 0,
                    ms: 0.0,
                    weight_bytes: 0,
                    gb_s: None,
                    flops: 0,
                    gflop_s: None,
                    bound: None,
                    fraction_of_bound: None,
                });
                out.last_mut().expect("just pushed")
            }
        };
        k.dispatches += 1;
        k.ms += d.seconds * 1e3;
        k.weight_bytes += d.work.weight_bytes;
        k.flops += d.work.flops;
    }
    for k in &mut out {
        k.gb_s = (k.weight_bytes > 0 && k.ms > 0.0).then(|| k.weight_bytes as f64 / (k.ms * 1e-3) / 1e9);
        k.gflop_s = (k.flops > 0 && k.ms > 0.0).then(|| k.flops as f64 / (k.ms * 1e-3) / 1e9);
    }
    out.sort_by(|a, b| b.ms.total_cmp(&a.ms));
    out.into_iter().map(|k| k.priced(roof)).collect()
}

#[derive(Debug, Clone, Serialize)]
pub struct PrefillSpeed {
    pub tokens: usize,
    /// Median over the repeats (each a fresh prompt of `tokens` tokens).
    pub ms: f64,
    pub repeats: usize,
    /// Over the repeats: (slowest − fastest) / median, as [`DecodeSpeed::spread`] (NaN, `null`
    /// in JSON, for one).
    pub spread: f64,
    pub tokens_per_s: f64,
    pub gflop_s: f64,
    pub fraction_of_fma: f64,
    /// With `--profile`: one more prompt's first step (all of it where the step takes the
    /// prompt whole) run kernel by kernel, slowest first; empty otherwise.
    pub profile: Vec<KernelTime>,
}

/// A prompt no earlier request of this process had: with `--prefix-cache` the timings measure the
/// cache's bookkeeping, never a hit that would skip part of the prefill being timed.
pub fn fresh_request(prompt_len: usize, new: usize, vocab: usize) -> Request {
    static SALT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let salt = SALT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    Request {
        prompt: (0..prompt_len).map(|i| ((i * 7919 + salt * 104_729) % vocab.min(151_643)) as u32).collect(),
        max_new_tokens: new,
        sampling: SamplingParams::default(),
        stop_ids: vec![],
        ignore_eos: true,
    }
}

/// `batch` sequences of a `prompt`-token prompt, timed over `steps` steps that decode the whole
/// batch and nothing else. Prompts longer than a step's token budget prefill over several steps,
/// while the first ones already decode: each request may generate enough tokens to outlast that
/// (it is cancelled once the timed steps are done). With `profile`, one extra full-batch step in
/// the middle runs kernel by kernel. The context reported is the mean over the batch, at the
/// middle timed step, of prompt + tokens generated, counted from the engine's events.
pub async fn decode(
    engine: &mut Engine,
    roof: &Roofline,
    batch: usize,
    prompt: usize,
    steps: usize,
    profile: bool,
) -> Result<DecodeSpeed> {
    let cfg = engine.model.cfg.clone();
    let per_step = engine.model.limits.max_batched_tokens.max(1);
    let prefill_steps = (batch * prompt).div_ceil(per_step) + batch;
    // A step yields up to 1 + K tokens per sequence with K draft tokens.
    let max_new = (steps + 1 + profile as usize) * (1 + engine.model.limits.speculation.max_draft()) + prefill_steps;
    let mut ids = Vec::with_capacity(batch);
    for _ in 0..batch {
        ids.push(engine.submit(fresh_request(prompt, max_new, cfg.vocab_size))?);
    }
    let mut generated = vec![0usize; batch];
    let mut times = Vec::new();
    let mut contexts = Vec::new();
    let (mut drafted, mut accepted) = (0, 0);
    let mut profiled = false;
    let mut dispatches = 0;
    while engine.has_work() {
        let context = prompt as f64 + generated.iter().sum::<usize>() as f64 / batch as f64;
        let (events, stats) = engine.step().await?;
        for e in &events {
            if let (Some(i), EventKind::FirstToken { .. } | EventKind::Token { .. }) =
                (ids.iter().position(|&id| id == e.id), &e.kind)
            {
                generated[i] += 1;
            }
        }
        if let Some(s) = stats {
            // The whole batch decoding (each sequence one token plus its draft), nothing else.
            if s.decode_tokens - s.drafted_tokens == batch && s.shape.tokens == s.decode_tokens {
                if s.profiled {
                    profiled = true;
                } else if times.len() < steps {
                    times.push(s.duration_s);
                    // The last step recorded: this one, or the next of the same shape (overlap).
                    dispatches = engine.model.step_dispatches;
                    contexts.push(context);
                    drafted += s.drafted_tokens;
                    accepted += s.accepted_tokens;
                }
            }
        }
        // Profile one full-batch step in the middle (kept out of the timings; with CPU/GPU
        // overlap the step already on the GPU is read first, so this may take a call more).
        engine.profile_next = profile && !profiled && times.len() >= steps / 2;
        if times.len() >= steps && (profiled || !profile) {
            for &id in &ids {
                engine.cancel(id);
            }
        }
    }
    let profile =
        if profiled { kernel_times(&engine.last_profile, (roof.read_gb_s, roof.fma_gflop_s)) } else { Vec::new() };
    let context = contexts.get(contexts.len() / 2).copied().unwrap_or(f64::NAN);
    let timed = times.len().max(1) as f64;
    let (drafted_per_step, accepted_per_step) = (drafted as f64 / timed, accepted as f64 / timed);
    let step = median(times.clone());
    let weights = engine.model.weights.bytes_per_token() as f64;
    let kv = batch as f64 * context * crate::engine::kv::KvCache::bytes_per_token(&cfg) as f64;
    let gb_s = (weights + kv) / step / 1e9;
    Ok(DecodeSpeed {
        batch,
        context: context.round() as usize,
        step_ms: step * 1e3,
        spread: spread(&times),
        tokens_per_s: (batch as f64 + accepted_per_step) / step,
        drafted_per_step,
        accepted_per_step,
        gb_s,
        weight_bytes: engine.model.weights.bytes_per_token(),
        fraction_of_copy: gb_s / roof.copy_gb_s,
        fraction_of_read: gb_s / roof.read_gb_s,
        read_probe_fault: read_probe_fault(gb_s / roof.read_gb_s),
        profile,
        dispatches,
        explained: StepTime::of(step * 1e3, weights + kv, roof.read_gb_s, dispatches, roof.dispatch_us),
    })
}

/// A step that moves its bytes faster than the roofline's best read beat a ceiling no kernel can
/// beat: the probe missed the adapter's fastest read pattern. The one rule `speed`, the device
/// check and the page read a fraction of the read ceiling by.
pub fn read_probe_fault(fraction_of_read: f64) -> bool {
    fraction_of_read > 1.0
}

/// (slowest − fastest) / median of timings; NaN for fewer than two.
fn spread(times: &[f64]) -> f64 {
    if times.len() < 2 {
        return f64::NAN;
    }
    let (fastest, slowest) = times.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), &t| (lo.min(t), hi.max(t)));
    (slowest - fastest) / median(times.to_vec())
}

/// One prompt of `tokens` tokens, prefilled in one step (or as many as the step size needs),
/// `repeats` times (a fresh prompt each): the median, and the spread. With `profile`, one more
/// prompt's first step runs kernel by kernel (kept out of the timings).
pub async fn prefill(
    engine: &mut Engine,
    roof: &Roofline,
    tokens: usize,
    repeats: usize,
    profile: bool,
) -> Result<PrefillSpeed> {
    let cfg = engine.model.cfg.clone();
    let mut times = Vec::with_capacity(repeats);
    for _ in 0..repeats.max(1) {
        engine.submit(fresh_request(tokens, 1, cfg.vocab_size))?;
        let mut time = 0.0;
        while engine.has_work() {
            if let (_, Some(s)) = engine.step().await? {
                time += s.duration_s;
            }
        }
        times.push(time);
    }
    let mut kernels = Vec::new();
    if profile {
        engine.submit(fresh_request(tokens, 1, cfg.vocab_size))?;
        engine.profile_next = true;
        while engine.has_work() {
            if let (_, Some(s)) = engine.step().await? {
                if s.profiled {
                    kernels = kernel_times(&engine.last_profile, (roof.read_gb_s, roof.fma_gflop_s));
                }
            }
        }
    }
    let total = median(times.clone());
    let attention = 4.0 * (cfg.num_hidden_layers * cfg.q_dim()) as f64 * (tokens as f64 * tokens as f64 / 2.0);
    // Only the last prompt token goes through the vocabulary projection.
    let head = (cfg.vocab_size * cfg.hidden_size) as f64;
    let flops = 2.0 * (cfg.params_per_token() as f64 - head) * tokens as f64 + 2.0 * head + attention;
    let gflop_s = flops / total / 1e9;
    Ok(PrefillSpeed {
        tokens,
        ms: total * 1e3,
        repeats: times.len(),
        spread: spread(&times),
        tokens_per_s: tokens as f64 / total,
        gflop_s,
        fraction_of_fma: gflop_s / roof.fma_gflop_s,
        profile: kernels,
    })
}

/// `speed`'s defaults (the CLI's flags and the Dawn runner's): decode batch sizes, prefill lengths,
/// decode steps per batch size, prompt tokens per decoding sequence.
pub const DEFAULT_BATCHES: &str = "1,4,16,64";
pub const DEFAULT_PREFILL: &str = "128,512,2048";
pub const DEFAULT_STEPS: usize = 8;
/// Each prefill length is timed this many times (median and spread).
pub const DEFAULT_PREFILL_REPEATS: usize = 3;
pub const DEFAULT_CONTEXT: usize = 16;

/// What one `speed` run measures.
#[derive(Debug, Clone)]
pub struct SpeedPlan {
    pub batches: Vec<usize>,
    pub prefill: Vec<usize>,
    pub steps: usize,
    /// Times each prefill length is timed.
    pub prefill_repeats: usize,
    pub context: usize,
    /// One decode step per batch size also timed kernel by kernel.
    pub profile: bool,
    /// Extra one-workgroup dispatches in every step (`--planted-dispatches N`, 0 normally): the
    /// step's rise against N × the roofline's cost of a dispatch checks that cost.
    pub planted_dispatches: usize,
}

/// The roofline's line in `speed`'s progress (the host's memcpy where it was measured: natively).
pub fn roofline_line(roof: &Roofline, host_copy_gb_s: Option<f64>) -> String {
    format!(
        "roofline: copy {:.2} GB/s (blocked {:.2}, strided {:.2}{}; spread {:.1}%, {} dispatches a timing), \
         read {:.2} GB/s (blocked {:.2}, strided {:.2}, GEMV rows {:.2}{}; spread {:.1}%), FMA {:.1} GFLOP/s (spread {:.1}%), \
         {:.1} µs a dispatch{}",
        roof.copy_gb_s,
        roof.copy_blocked_gb_s,
        roof.copy_strided_gb_s,
        roof.copy_texture_gb_s.map(|t| format!(", texture {t:.2}")).unwrap_or_default(),
        100.0 * roof.copy_spread,
        roof.copy_dispatches,
        roof.read_gb_s,
        roof.read_blocked_gb_s,
        roof.read_strided_gb_s,
        roof.read_rows_gb_s,
        roof.read_rows_texture_gb_s.map(|t| format!(", GEMV rows from a texture {t:.2}")).unwrap_or_default(),
        100.0 * roof.read_spread,
        roof.fma_gflop_s,
        100.0 * roof.fma_spread,
        roof.dispatch_us,
        host_copy_gb_s.map(|h| format!("; host memcpy {h:.2} GB/s")).unwrap_or_default()
    )
}

/// A spread as the progress lines show it: a percentage, or "–" where there is none.
fn shown_spread(spread: f64) -> String {
    if spread.is_finite() {
        format!("{:.0}%", 100.0 * spread)
    } else {
        "–".to_string()
    }
}

/// Every decode batch and prefill length of `plan` on `engine`, a line of progress each to `log`,
/// and the JSON `tokenmeter speed` prints (`scripts/dawn-run speed` prints the same, with
/// `host_copy_gb_s` null: a page cannot time the host's memory).
pub async fn table(
    engine: &mut Engine,
    roof: &Roofline,
    plan: &SpeedPlan,
    host_copy_gb_s: Option<f64>,
    model: Option<String>,
    log: &mut dyn FnMut(String),
) -> Result<serde_json::Value> {
    engine.model.planted_dispatches = plan.planted_dispatches;
    let mut decodes = Vec::new();
    for &b in &plan.batches {
        let d = decode(engine, roof, b, plan.context, plan.steps, plan.profile).await?;
        log(format!(
            "decode batch {:>3} at context {:>5}: {:>8.2} ms/step (spread {:>4}) {:>8.1} tok/s  {:>6.2} GB/s = {}{}",
            b,
            d.context,
            d.step_ms,
            shown_spread(d.spread),
            d.tokens_per_s,
            d.gb_s,
            match d.read_probe_fault {
                false => format!("{:>5.1}% of adapter read", 100.0 * d.fraction_of_read),
                true => format!(
                    "{:.0}% of the probe's read: above its ceiling, a fault of the read probe, not a result",
                    100.0 * d.fraction_of_read
                ),
            },
            host_copy_gb_s.map(|h| format!(", {:>5.1}% of host memcpy", 100.0 * d.gb_s / h)).unwrap_or_default()
        ));
        log(format!("    step: {}", d.explained.line(d.step_ms, d.dispatches, roof.dispatch_us)));
        if d.drafted_per_step > 0.0 {
            log(format!(
                "    speculation: {:.2} draft tokens verified per step, {:.2} accepted ({:.1}%): {:.2} tokens per sequence per step",
                d.drafted_per_step,
                d.accepted_per_step,
                100.0 * d.accepted_per_step / d.drafted_per_step,
                1.0 + d.accepted_per_step / b as f64
            ));
        }
        let total: f64 = d.profile.iter().map(|k| k.ms).sum();
        for k in &d.profile {
            log(k.line(total));
        }
        decodes.push(d);
    }
    let mut prefills = Vec::new();
    for &n in &plan.prefill {
        let p = prefill(engine, roof, n, plan.prefill_repeats, plan.profile).await?;
        log(format!(
            "prefill {:>5} tokens: {:>9.1} ms (spread {:>4}) {:>8.1} tok/s  {:>6.1} GFLOP/s = {:>5.1}% of FMA peak",
            n,
            p.ms,
            shown_spread(p.spread),
            p.tokens_per_s,
            p.gflop_s,
            100.0 * p.fraction_of_fma
        ));
        let total: f64 = p.profile.iter().map(|k| k.ms).sum();
        for k in &p.profile {
            log(k.line(total));
        }
        prefills.push(p);
    }
    let options = engine.model.kernel_options();
    Ok(serde_json::json!({
        "adapter": engine.model.gpu.adapter.name,
        "kernel_family": options.family,
        "kernels": KernelPath::of(&options),
        "weight_format": options.format,
        "weight_bytes_per_token": engine.model.weights.bytes_per_token(),
        "model": model,
        "roofline": roof,
        "host_copy_gb_s": host_copy_gb_s,
        "decode": decodes,
        "prefill": prefills,
        "kernel_trial": engine.model.trial,
        "planted_dispatches": plan.planted_dispatches,
    }))
}

#[cfg(test)]
mod tests {
    use crate::bench::run::speed::Ceiling;

    #[test]
    fn kernel_times_sum_each_kernels_dispatches_and_price_their_weight_reads_and_flops() {
        use crate::bench::run::speed::kernel_times;
        use crate::gpu::kernels::{DispatchTime, Work};
        use crate::gpu::Kernel;
        let d = |kernel, ms: f64, weight_bytes, flops| DispatchTime {
            kernel,
            seconds: ms * 1e-3,
            work: Work { weight_bytes, flops },
        };
        let times = kernel_times(
            &[
                d(Kernel::MatmulGemv, 1.0, 2_000_000, 3_000_000),
                d(Kernel::RmsNorm, 0.5, 0, 0),
                d(Kernel::MatmulGemv, 3.0, 6_000_000, 5_000_000),
            ],
            (4.0, 10.0),
        );
        assert_eq!(times.len(), 2);
        let gemv = &times[0];
        assert_eq!((gemv.kernel, gemv.dispatches, gemv.weight_bytes), ("matmul_bf16_gemv", 2, 8_000_000));
        // 8 MB and 8 MFLOP in 4 ms.
        assert!((gemv.ms - 4.0).abs() < 1e-9 && (gemv.gb_s.unwrap() - 2.0).abs() < 1e-9, "{gemv:?}");
        assert!((gemv.gflop_s.unwrap() - 2.0).abs() < 1e-9, "{gemv:?}");
        assert_eq!((times[1].kernel, times[1].gb_s, times[1].gflop_s), ("rms_norm", None, None));
        // Priced: 1 FLOP a byte against the roofline's 2.5 is read-bound, 2 GB/s of 4.
        assert_eq!((gemv.bound, gemv.fraction_of_bound), (Some(Ceiling::Read), Some(0.5)));
        assert_eq!((times[1].bound, times[1].fraction_of_bound), (None, None));
        let json = serde_json::to_value(gemv).unwrap();
        assert_eq!((json["bound"].as_str(), json["fraction_of_bound"].as_f64()), (Some("read"), Some(0.5)));
    }

    /// A matmul is priced against the ceiling that binds it on the roofline: 4 GB/s of read and
    /// 10 GFLOP/s balance at 2.5 FLOPs a byte.
    #[test]
    fn a_profile_line_prices_a_matmul_by_the_ceiling_its_flops_per_byte_meet() {
        use crate::bench::run::speed::KernelTime;
        let roof = (4.0, 10.0);
        let line = |k: &KernelTime| k.clone().priced(roof).line(8.0);
        let k = KernelTime {
            kernel: "matmul_bf16_tiled",
            dispatches: 3,
            ms: 2.0,
            weight_bytes: 4_000_000,
            gb_s: Some(2.0),
            flops: 8_000_000,
            gflop_s: Some(4.0),
            bound: None,
            fraction_of_bound: None,
        };
        // 2 FLOPs a byte: read-bound.
        let read = line(&k);
        assert_eq!(k.clone().priced(roof).bound, Some(Ceiling::Read));
        assert!(read.ends_with("25.0%       2.0 GB/s of weights =  50.0% of read"), "{read}");
        // 3 FLOPs a byte: FMA-bound.
        let wide = line(&KernelTime { flops: 12_000_000, gflop_s: Some(6.0), ..k.clone() });
        assert!(wide.ends_with("25.0%         6 GFLOP/s =  60.0% of FMA"), "{wide}");
        // Not a matmul: its time only.
        let other = line(&KernelTime { weight_bytes: 0, gb_s: None, flops: 0, gflop_s: None, ..k });
        assert!(other.ends_with("25.0%"), "{other}");
    }

    use crate::bench::run::speed::{spread, PrefillSpeed};

    #[test]
    fn the_spread_is_slowest_less_fastest_over_the_median_and_none_for_one_timing() {
        assert!((spread(&[2.0, 4.0, 3.0]) - 2.0 / 3.0).abs() < 1e-12);
        assert!(spread(&[5.0]).is_nan());
        let one = PrefillSpeed {
            tokens: 16,
            ms: 5.0,
            repeats: 1,
            spread: spread(&[5.0]),
            tokens_per_s: 3200.0,
            gflop_s: 1.0,
            fraction_of_fma: 0.1,
            profile: Vec::new(),
        };
        assert!(serde_json::to_value(&one).unwrap()["spread"].is_null(), "one timing's spread is null in JSON");
    }
}
