//! Engine speed against the adapter's roofline: decode throughput at several batch sizes and
//! prefill throughput at several prompt lengths, from the engine's own step timings.
//! Decode is reported as weight bytes streamed per second (memory-bound), prefill as FLOP/s
//! (compute-bound), each next to the probe's copy bandwidth and FMA rate measured in the same run.

use crate::engine::{Engine, Request, SamplingParams};
use crate::error::Result;
use crate::gpu::roofline::{median, Roofline};
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct DecodeSpeed {
    pub batch: usize,
    /// Tokens each sequence attends to (prompt + tokens decoded so far), at the median step.
    pub context: usize,
    /// Median duration of steps that decoded the whole batch and nothing else.
    pub step_ms: f64,
    pub tokens_per_s: f64,
    /// Weights + KV read per step / step time.
    pub gb_s: f64,
    pub fraction_of_copy: f64,
    /// One step run kernel by kernel: (kernel, dispatches, total ms), slowest first.
    pub profile: Vec<KernelTime>,
}

#[derive(Debug, Clone, Serialize)]
pub struct KernelTime {
    pub kernel: &'static str,
    pub dispatches: usize,
    pub ms: f64,
}

/// Per-kernel totals of a profiled step, slowest first.
pub fn kernel_times(profile: &[(crate::gpu::Kernel, f64)]) -> Vec<KernelTime> {
    let mut out: Vec<KernelTime> = Vec::new();
    for &(kernel, s) in profile {
        match out.iter_mut().find(|k| k.kernel == kernel.name()) {
            Some(k) => {
                k.dispatches += 1;
                k.ms += s * 1e3;
            }
            None => out.push(KernelTime { kernel: kernel.name(), dispatches: 1, ms: s * 1e3 }),
        }
    }
    out.sort_by(|a, b| b.ms.total_cmp(&a.ms));
    out
}

#[derive(Debug, Clone, Serialize)]
pub struct PrefillSpeed {
    pub tokens: usize,
    pub ms: f64,
    pub tokens_per_s: f64,
    pub gflop_s: f64,
    pub fraction_of_fma: f64,
}

fn request(prompt_len: usize, new: usize, vocab: usize, salt: usize) -> Request {
    Request {
        prompt: (0..prompt_len).map(|i| ((i * 7919 + salt * 104_729) % vocab.min(151_643)) as u32).collect(),
        max_new_tokens: new,
        sampling: SamplingParams::default(),
        stop_ids: vec![],
        ignore_eos: true,
    }
}

/// `batch` sequences of a `prompt`-token prompt decoding `steps` tokens each.
/// With `profile`, one extra step in the middle runs kernel by kernel.
pub async fn decode(
    engine: &mut Engine,
    roof: &Roofline,
    batch: usize,
    prompt: usize,
    steps: usize,
    profile: bool,
) -> Result<DecodeSpeed> {
    let cfg = engine.model.cfg.clone();
    for s in 0..batch {
        engine.submit(request(prompt, steps + 1 + profile as usize, cfg.vocab_size, s))?;
    }
    let mut times = Vec::new();
    let mut profiled = false;
    while engine.has_work() {
        let profiling = engine.profile_next;
        let (_, stats) = engine.step().await?;
        if let Some(s) = stats {
            if s.decode_tokens == batch && s.batched_tokens == batch {
                if profiling {
                    profiled = true;
                } else {
                    times.push(s.duration_s);
                    // Profile one full-batch step in the middle (kept out of the timings).
                    engine.profile_next = profile && !profiled && times.len() == steps / 2;
                }
            }
        }
    }
    let profile = if profiled { kernel_times(&engine.last_profile) } else { Vec::new() };
    let timed = times.len();
    let step = median(times);
    let weights = cfg.params_per_token() as f64 * 2.0;
    // The median step's context: the prompt plus half of the timed steps.
    let context = prompt + timed.div_ceil(2);
    let kv = batch as f64 * context as f64 * crate::engine::kv::KvCache::bytes_per_token(&cfg) as f64;
    let gb_s = (weights + kv) / step / 1e9;
    Ok(DecodeSpeed {
        batch,
        context,
        step_ms: step * 1e3,
        tokens_per_s: batch as f64 / step,
        gb_s,
        fraction_of_copy: gb_s / roof.copy_gb_s,
        profile,
    })
}

/// One prompt of `tokens` tokens, prefilled in one step (or as many as the step size needs).
pub async fn prefill(engine: &mut Engine, roof: &Roofline, tokens: usize) -> Result<PrefillSpeed> {
    let cfg = engine.model.cfg.clone();
    engine.submit(request(tokens, 1, cfg.vocab_size, 0))?;
    let mut total = 0.0;
    while engine.has_work() {
        if let (_, Some(s)) = engine.step().await? {
            total += s.duration_s;
        }
    }
    let attention = 4.0 * (cfg.num_hidden_layers * cfg.q_dim()) as f64 * (tokens as f64 * tokens as f64 / 2.0);
    // Only the last prompt token goes through the vocabulary projection.
    let head = (cfg.vocab_size * cfg.hidden_size) as f64;
    let flops = 2.0 * (cfg.params_per_token() as f64 - head) * tokens as f64 + 2.0 * head + attention;
    let gflop_s = flops / total / 1e9;
    Ok(PrefillSpeed {
        tokens,
        ms: total * 1e3,
        tokens_per_s: tokens as f64 / total,
        gflop_s,
        fraction_of_fma: gflop_s / roof.fma_gflop_s,
    })
}
