//! `plan --calibrate`: a designed set of steps measured now on the GPU engine, for the cost model
//! ([`CostModel::fit`]) — the shapes that tell its terms apart: decode batches of 1 to the engine's
//! max batch (tokens = logit rows = sequences) at a short and a long context (attended keys),
//! prefills of 16 tokens to the step's budget (many tokens, one logit row, keys growing as the
//! square of the length), and mixed steps as a loaded engine runs them (each batch decoding while
//! a long prompt is prefilled in chunks beside it). Every step of the design is a sample, prefill
//! steps of the decodes too.
//! One untimed pass over the same shapes goes first: a kernel's first use compiles its pipeline
//! (seconds on lavapipe), which is no step's cost.

use crate::bench::run::speed::fresh_request;
use crate::engine::forward::EngineLimits;
use crate::engine::{Engine, StepShape};
use crate::error::Result;
use crate::gpu::roofline::median;

/// What a calibration runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Design {
    /// Sequences decoding together.
    pub batches: Vec<usize>,
    /// Prompt tokens of each decoding sequence.
    pub contexts: Vec<usize>,
    /// Decode steps per (batch, context).
    pub decode_steps: usize,
    /// Prompt lengths prefilled alone.
    pub prefills: Vec<usize>,
    /// The prompt prefilled in chunks while each batch decodes (0: no mixed steps).
    pub mixed_prompt: usize,
}

/// Decode steps timed per (batch, context).
const DECODE_STEPS: usize = 32;
/// The short context: each decoding sequence's prompt, and the mixed steps' decoding prompts.
const SHORT_CONTEXT: usize = 16;

impl Design {
    /// For an engine's sizes: batches 1, 2, 4, … and the max batch itself; contexts 16 and 256
    /// (as far as the KV cache holds the largest batch and the model's context allows); prefills
    /// 16, 64, 256, … and the step's token budget itself.
    pub fn for_limits(limits: &EngineLimits, max_context: usize) -> Design {
        let doubling = |from: usize, to: usize, by: usize| {
            let mut v: Vec<usize> =
                std::iter::successors(Some(from), |&x| Some(x * by)).take_while(|&x| x < to).collect();
            v.push(to);
            v
        };
        let max_batch = limits.max_seqs.max(1);
        let batches = doubling(1, max_batch, 2);
        let slots = limits.num_blocks * limits.block_size;
        // The largest batch's prompts and decoded tokens, each rounded up to a block, fit the cache.
        let fits = |context: usize| {
            let per_seq = (context + DECODE_STEPS + 2).div_ceil(limits.block_size) * limits.block_size;
            max_batch * per_seq <= slots && context + DECODE_STEPS + 2 <= max_context
        };
        let contexts: Vec<usize> = [SHORT_CONTEXT, 256].into_iter().filter(|&c| fits(c)).collect();
        let prefills = doubling(16, limits.max_batched_tokens.min(max_context.saturating_sub(2)).max(16), 4);
        // Four chunks of the step's budget, as far as the context allows and the cache holds beside
        // the largest batch at the short context (decoding through the chunks and its own steps).
        let short = (SHORT_CONTEXT + DECODE_STEPS + 4 + 2).div_ceil(limits.block_size) * limits.block_size;
        let room = slots.saturating_sub(max_batch * short).saturating_sub(limits.block_size);
        let mixed_prompt = (4 * limits.max_batched_tokens).min(max_context.saturating_sub(2)).min(room);
        Design { batches, contexts, decode_steps: DECODE_STEPS, prefills, mixed_prompt }
    }
}

/// Runs `design` on `engine` (once untimed, then timed), each (batch, context) and prefill a line
/// to `log`; every timed step's shape and duration.
pub async fn calibrate(
    engine: &mut Engine,
    design: &Design,
    log: &mut dyn FnMut(String),
) -> Result<Vec<(StepShape, f64)>> {
    let mut warm = Vec::new();
    run_design(engine, design, &mut warm, &mut |_| {}).await?;
    let mut steps = Vec::new();
    run_design(engine, design, &mut steps, log).await?;
    Ok(steps)
}

async fn run_design(
    engine: &mut Engine,
    design: &Design,
    steps: &mut Vec<(StepShape, f64)>,
    log: &mut dyn FnMut(String),
) -> Result<()> {
    let vocab = engine.model.cfg.vocab_size;
    for &context in &design.contexts {
        for &batch in &design.batches {
            for _ in 0..batch {
                engine.submit(fresh_request(context, design.decode_steps, vocab))?;
            }
            let ms = drain(engine, steps).await?;
            log(format!("batch {batch:>3} at context {context:>4}: {} steps, median {:.2} ms", ms.len(), median(ms)));
        }
    }
    if design.mixed_prompt > 0 {
        // The batch decodes for as many steps as the long prompt's chunks take, and more.
        let chunks = design.mixed_prompt.div_ceil(engine.model.limits.max_batched_tokens.max(1));
        for &batch in &design.batches {
            for _ in 0..batch {
                engine.submit(fresh_request(SHORT_CONTEXT, design.decode_steps + chunks, vocab))?;
            }
            engine.submit(fresh_request(design.mixed_prompt, 1, vocab))?;
            let ms = drain(engine, steps).await?;
            log(format!(
                "batch {batch:>3} beside a {}-token prefill: {} steps, median {:.2} ms",
                design.mixed_prompt,
                ms.len(),
                median(ms)
            ));
        }
    }
    for &tokens in &design.prefills {
        engine.submit(fresh_request(tokens, 1, vocab))?;
        let ms = drain(engine, steps).await?;
        log(format!("prefill {tokens:>5} tokens: {} steps, {:.2} ms", ms.len(), ms.iter().sum::<f64>()));
    }
    Ok(())
}

/// Steps `engine` until it has no work, keeping each step's shape and duration; the durations in ms.
async fn drain(engine: &mut Engine, steps: &mut Vec<(StepShape, f64)>) -> Result<Vec<f64>> {
    let mut ms = Vec::new();
    while engine.has_work() {
        if let (_, Some(s)) = engine.step().await? {
            if !s.profiled && s.shape.tokens > 0 {
                steps.push((s.shape, s.duration_s));
                ms.push(s.duration_s * 1e3);
            }
        }
    }
    Ok(ms)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Speculation;

    fn limits(max_seqs: usize, max_batched_tokens: usize, num_blocks: usize) -> EngineLimits {
        EngineLimits {
            max_batched_tokens,
            max_seqs,
            block_size: 16,
            num_blocks,
            max_blocks_per_seq: 256,
            speculation: Speculation::Off,
            max_logit_rows: max_seqs,
            prefix_cache: false,
            overlap: true,
        }
    }

    #[test]
    fn the_design_spans_the_engines_sizes_and_stays_inside_its_cache() {
        let d = Design::for_limits(&limits(16, 512, 1024), 4096);
        assert_eq!(d.batches, [1, 2, 4, 8, 16]);
        assert_eq!(d.contexts, [16, 256]);
        assert_eq!(d.prefills, [16, 64, 256, 512]);
        // 4 x 512; the batch's 16 x 64 slots and a block leave 15,344.
        assert_eq!(d.mixed_prompt, 2048);
        // A max batch that is no power of two ends the doubling; 24 sequences of 256 + 10 tokens
        // need 24 x 272 = 6,528 slots: a cache of 300 blocks (4,800) holds only the short context.
        let d = Design::for_limits(&limits(24, 2048, 300), 4096);
        assert_eq!(d.batches, [1, 2, 4, 8, 16, 24]);
        assert_eq!(d.contexts, [16]);
        assert_eq!(d.prefills, [16, 64, 256, 1024, 2048]);
        // The cache (4,800 − 24 x 64 − 16) before the model's context (4,094) and 4 x 2,048.
        assert_eq!(d.mixed_prompt, 3248);
        // A model whose context is short bounds both.
        let d = Design::for_limits(&limits(1, 512, 1024), 200);
        assert_eq!(
            (d.batches.as_slice(), d.contexts.as_slice(), d.prefills.as_slice()),
            (&[1][..], &[16][..], &[16, 64, 198][..])
        );
    }
}
