//! What a speed-up costs in output: a *test* setting against a *reference* over the same token
//! sequences, apart from any timed run.
//!
//! Teacher-forced: each prompt followed by the reference's own greedy continuation, and a short
//! passage of English text (through the model's tokenizer; seeded token ids where there is none).
//! At every position predicting a continuation or passage token, both next-token distributions
//! (softmax in f64 of the logit rows) give: whether their top-1 tokens agree, KL(reference ‖ test)
//! in nats, and the log-probability the test gives the reference's top-1. Free-running: each
//! generates greedily on its own; whether the outputs are identical, and where they first part.
//!
//! The maths are pure functions over logit rows ([`position`], [`perplexity`], ...); [`measure`]
//! runs them over two [`LogitSource`]s (the engine, the CPU oracle). Between two servers, which
//! return top-k log-probabilities of their own greedy outputs rather than logit rows,
//! [`compare_served`] makes the same summary from those ([`served`]). [`computes_differently`] is
//! the one rule for when `compare` runs a pass without being asked; [`Gate`] turns bounds into a
//! failing exit for CI.

use serde::{Deserialize, Serialize};

mod report;
pub mod served;
pub use report::{html_section, rows, text_report};
pub use served::{compare_served, top_k_kl, Generated, TokenLogprobs};

use crate::bench::base::stats::{nan_as_null, stats};
use crate::bench::traffic::prompts::{random_prompt, FIRST_SPECIAL_TOKEN};
use crate::engine::{Engine, LogitSource, Speculation};
use crate::error::{Error, Result};
use crate::gpu::kernels::KernelOptions;
use crate::model::reference::argmax;
use crate::model::Tokenizer;

/// The passage the perplexities are measured on (plain English, written for this).
pub const PASSAGE: &str = "The river rose slowly through the night, and by morning the low fields were under water. \
     Farmers walked the high road with their animals, talking about the weather and the price of grain. \
     In the village the baker opened early, because people always want bread when the news is bad. \
     By noon the rain had stopped, the sun came out, and children were throwing stones into the brown water.";

/// Token ids of the passage when the model has no tokenizer: seeded ids (not text, so their
/// perplexity only compares the two settings; it says nothing of language).
pub const PASSAGE_IDS: usize = 64;
const PASSAGE_SEED: u64 = 0x7e57;

/// What to measure on: prompts, continuation length and the passage.
#[derive(Clone, Debug)]
pub struct QualityInputs {
    pub prompts: Vec<Vec<u32>>,
    /// Greedy tokens per prompt (the continuation the test is teacher-forced on, and the length
    /// of the free-running outputs).
    pub new_tokens: usize,
    pub passage: Vec<u32>,
    /// How the passage was made: [`PassageKind`].
    pub passage_kind: PassageKind,
}

/// A pass's sizes unless asked otherwise (`compare --quality-prompts`, `--quality-tokens`; the
/// page's Experiment card).
pub const DEFAULT_PROMPTS: usize = 4;
pub const DEFAULT_NEW_TOKENS: usize = 16;

impl QualityInputs {
    /// The workload's first `prompts` prompts as the timed runs sent them (`made_with`), `new_tokens`
    /// greedy tokens each, and the passage through `tokenizer`, within `max_positions`.
    pub fn for_workload(
        spec: &crate::bench::traffic::workload::WorkloadSpec,
        made_with: &crate::bench::traffic::prompts::PromptSource<'_>,
        tokenizer: Option<&Tokenizer>,
        vocab: usize,
        max_positions: usize,
        (prompts, new_tokens): (usize, usize),
    ) -> Result<QualityInputs> {
        let planned = crate::bench::traffic::workload::plan(spec)?;
        let prompts = planned.iter().take(prompts).map(|p| made_with.ids(p)).collect::<Result<Vec<_>>>()?;
        let (passage, passage_kind) = passage(tokenizer, vocab, max_positions)?;
        Ok(QualityInputs { prompts, new_tokens, passage, passage_kind })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PassageKind {
    /// [`PASSAGE`] through the model's tokenizer.
    Text,
    /// [`PASSAGE_IDS`] seeded token ids: the model has no tokenizer (or one larger than its
    /// vocabulary, which the engine does not use).
    TokenIds,
    /// No passage: a pass between servers ([`served`]), which cannot be teacher-forced.
    None,
}

/// What a pass compared: whole next-token distributions, a server's top-k, or outputs only.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Basis {
    /// Whole logit rows, teacher-forced on the reference's continuations and the passage (the
    /// engine, the CPU oracle).
    #[default]
    Logits,
    /// Servers' top-`k` log-probabilities of their own greedy outputs, at the positions up to and
    /// including each output's first divergence ([`served`]).
    TopLogprobs { k: usize },
    /// Greedy outputs alone: a server returned no log-probabilities. Agreement is on the text,
    /// and a first divergence is a character index.
    Outputs,
}

/// The passage for a model of `vocab_size` ids and `max_len` positions: [`PASSAGE`] through
/// `tokenizer` when the model's vocabulary covers it (as prompts are made, see
/// [`crate::bench::traffic::prompts::PromptSource::for_model`]), else seeded ids.
pub fn passage(tokenizer: Option<&Tokenizer>, vocab_size: usize, max_len: usize) -> Result<(Vec<u32>, PassageKind)> {
    let (mut ids, kind) = match tokenizer.filter(|t| t.vocab_size() <= vocab_size) {
        Some(t) => (t.encode(PASSAGE)?, PassageKind::Text),
        None => {
            (random_prompt(PASSAGE_SEED, 0, PASSAGE_IDS, vocab_size.min(FIRST_SPECIAL_TOKEN)), PassageKind::TokenIds)
        }
    };
    ids.truncate(max_len);
    Ok((ids, kind))
}

/// One position: both top-1 tokens, KL(reference ‖ test) and the test's log-probability of the
/// reference's top-1 (nats).
/// Between servers the top-1 fields are indices of [`Quality::tokens`], and the log-probability
/// is NaN (null in JSON) where the test did not return the reference's top-1 among its top-k.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Position {
    pub reference_top1: u32,
    pub test_top1: u32,
    #[serde(with = "nan_as_null")]
    pub kl: f64,
    #[serde(with = "nan_as_null")]
    pub test_logprob: f64,
}

/// `log softmax(row)` in f64.
pub fn log_softmax(row: &[f32]) -> Vec<f64> {
    let max = row.iter().map(|&v| v as f64).fold(f64::NEG_INFINITY, f64::max);
    let log_sum = row.iter().map(|&v| (v as f64 - max).exp()).sum::<f64>().ln();
    row.iter().map(|&v| v as f64 - max - log_sum).collect()
}

/// KL(p ‖ q) = Σ p·(log p − log q) of two log-distributions, in nats (0 exactly when equal).
pub fn kl_divergence(log_p: &[f64], log_q: &[f64]) -> f64 {
    let kl: f64 = log_p.iter().zip(log_q).filter(|(p, _)| p.is_finite()).map(|(p, q)| p.exp() * (p - q)).sum();
    kl.max(0.0) // rounding may leave −1e-17 where the distributions are nearly equal
}

/// One position from the two logit rows.
pub fn position(reference: &[f32], test: &[f32]) -> Position {
    let (log_p, log_q) = (log_softmax(reference), log_softmax(test));
    let reference_top1 = argmax(reference);
    Position {
        reference_top1,
        test_top1: argmax(test),
        kl: kl_divergence(&log_p, &log_q),
        test_logprob: log_q[reference_top1 as usize],
    }
}

/// exp(−mean log p) of the log-probabilities a model gave the tokens that came.
pub fn perplexity(logprobs: &[f64]) -> f64 {
    (-logprobs.iter().sum::<f64>() / logprobs.len() as f64).exp()
}

/// Where two outputs first differ (a shorter one differs where it ends); `None` when equal.
pub fn first_divergence<T: PartialEq>(a: &[T], b: &[T]) -> Option<usize> {
    let common = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    (common < a.len().max(b.len())).then_some(common)
}

/// The summary of a test setting against a reference.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Quality {
    pub reference: String,
    pub test: String,
    /// What was compared: logit rows, a server's top-k, or outputs alone (JSON from before servers
    /// were compared has none: logit rows).
    #[serde(default)]
    pub basis: Basis,
    /// Positions compared: teacher-forced (continuations and passage), or between servers those
    /// up to each first divergence.
    pub positions: usize,
    /// Share of positions whose top-1 tokens agree.
    pub top1_agreement: f64,
    /// KL(reference ‖ test) over the positions, nats.
    #[serde(with = "nan_as_null")]
    pub kl_mean: f64,
    #[serde(with = "nan_as_null")]
    pub kl_p99: f64,
    #[serde(with = "nan_as_null")]
    pub kl_max: f64,
    /// Mean log-probability the test gives the reference's top-1 token (between servers: over
    /// the positions where the test returned it).
    #[serde(with = "nan_as_null")]
    pub test_logprob_mean: f64,
    pub passage: PassageKind,
    pub passage_tokens: usize,
    /// Perplexity of each on the passage's next tokens.
    #[serde(with = "nan_as_null")]
    pub reference_perplexity: f64,
    #[serde(with = "nan_as_null")]
    pub test_perplexity: f64,
    /// Free-running: requests, tokens each, and the share whose greedy outputs are identical.
    pub requests: usize,
    pub new_tokens: usize,
    pub identical_fraction: f64,
    /// The median first divergence (token index) of the requests that diverge; `None` when none does.
    pub median_first_divergence: Option<f64>,
    /// Raw data: every position (continuations first, then the passage) and each request's first
    /// divergence.
    pub per_position: Vec<Position>,
    pub first_divergences: Vec<Option<usize>>,
    /// Between servers: the mean share of the reference's probability its returned top-k held
    /// at the positions compared (the top-k KL sees only that much; the rest is one bucket).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_k_mass: Option<f64>,
    /// Between servers: the token texts the positions' top-1 numbers index.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tokens: Vec<String>,
}

/// Summarises positions and free-running outcomes (pure).
pub fn summarize(
    names: (&str, &str),
    per_position: Vec<Position>,
    passage_logprobs: (&[f64], &[f64]),
    first_divergences: Vec<Option<usize>>,
    inputs: &QualityInputs,
) -> Quality {
    let q = summarize_positions(names, per_position, first_divergences, inputs.new_tokens, Basis::Logits);
    Quality {
        passage: inputs.passage_kind,
        passage_tokens: inputs.passage.len(),
        reference_perplexity: perplexity(passage_logprobs.0),
        test_perplexity: perplexity(passage_logprobs.1),
        ..q
    }
}

/// The summary of positions and free-running outcomes without a passage (pure; [`summarize`]
/// adds the passage's perplexities). No positions (outputs alone) leaves agreement and KL NaN.
pub fn summarize_positions(
    names: (&str, &str),
    per_position: Vec<Position>,
    first_divergences: Vec<Option<usize>>,
    new_tokens: usize,
    basis: Basis,
) -> Quality {
    let kl = stats(&per_position.iter().map(|p| p.kl).collect::<Vec<_>>());
    let agree = per_position.iter().filter(|p| p.reference_top1 == p.test_top1).count();
    let n = per_position.len();
    let logprobs: Vec<f64> = per_position.iter().map(|p| p.test_logprob).filter(|l| !l.is_nan()).collect();
    let diverged: Vec<f64> = first_divergences.iter().flatten().map(|&d| d as f64).collect();
    let requests = first_divergences.len();
    Quality {
        reference: names.0.to_string(),
        test: names.1.to_string(),
        basis,
        positions: n,
        top1_agreement: agree as f64 / n as f64,
        kl_mean: kl.mean,
        kl_p99: kl.p99,
        kl_max: per_position.iter().map(|p| p.kl).fold(f64::NAN, f64::max),
        test_logprob_mean: logprobs.iter().sum::<f64>() / logprobs.len() as f64,
        passage: PassageKind::None,
        passage_tokens: 0,
        reference_perplexity: f64::NAN,
        test_perplexity: f64::NAN,
        requests,
        new_tokens,
        identical_fraction: (requests - diverged.len()) as f64 / requests as f64,
        median_first_divergence: (!diverged.is_empty()).then(|| stats(&diverged).p50),
        per_position,
        first_divergences,
        top_k_mass: None,
        tokens: Vec::new(),
    }
}

/// The quality pass: `test` against `reference` over `inputs` (see the module documentation).
pub async fn measure<R: LogitSource, T: LogitSource>(
    names: (&str, &str),
    reference: &mut R,
    test: &mut T,
    inputs: &QualityInputs,
) -> Result<Quality> {
    let vocab = reference.vocab_size();
    if test.vocab_size() != vocab {
        return Err(Error::Invalid(format!(
            "quality: {} and {} have vocabularies of {} and {} ids; their next-token distributions do not compare",
            names.0,
            names.1,
            vocab,
            test.vocab_size()
        )));
    }
    if inputs.prompts.is_empty() || inputs.new_tokens == 0 || inputs.passage.len() < 2 {
        return Err(Error::Invalid("quality: needs a prompt, a new token and a passage of two tokens".into()));
    }
    let continuations = reference.greedy(&inputs.prompts, inputs.new_tokens).await?;
    let own = test.greedy(&inputs.prompts, inputs.new_tokens).await?;
    let first_divergences = continuations.iter().zip(&own).map(|(a, b)| first_divergence(a, b)).collect();
    let rows = |logits: &[f32]| logits.chunks_exact(vocab).map(<[f32]>::to_vec).collect::<Vec<_>>();
    let mut per_position = Vec::new();
    for (prompt, continuation) in inputs.prompts.iter().zip(&continuations) {
        // Positions prompt.len() − 1 onwards predict the continuation's tokens.
        let sequence: Vec<u32> = prompt.iter().chain(&continuation[..continuation.len() - 1]).copied().collect();
        let positions: Vec<usize> = (prompt.len() - 1..sequence.len()).collect();
        let (r, t) = (reference.logits_at(&sequence, &positions).await?, test.logits_at(&sequence, &positions).await?);
        per_position.extend(rows(&r).iter().zip(rows(&t)).map(|(r, t)| position(r, &t)));
    }
    let positions: Vec<usize> = (0..inputs.passage.len() - 1).collect();
    let (r, t) =
        (reference.logits_at(&inputs.passage, &positions).await?, test.logits_at(&inputs.passage, &positions).await?);
    let (mut passage_r, mut passage_t) = (Vec::new(), Vec::new());
    for (k, (r, t)) in rows(&r).iter().zip(rows(&t)).enumerate() {
        per_position.push(position(r, &t));
        let next = inputs.passage[k + 1] as usize;
        passage_r.push(log_softmax(r)[next]);
        passage_t.push(log_softmax(&t)[next]);
    }
    Ok(summarize(names, per_position, (&passage_r, &passage_t), first_divergences, inputs))
}

/// What a setting computes with, as far as its numbers go: the model, the kernel path in force
/// with its weight format, and speculative decoding. Batch and KV sizes, overlap, prefix caching
/// and the scheduling policy change which tokens share a step, not this.
#[derive(Clone, Debug, PartialEq)]
pub struct Numerics {
    pub model: Option<String>,
    pub kernels: KernelOptions,
    pub speculation: Speculation,
}

impl Numerics {
    /// `engine`'s, loaded from `model` (a path or a synthetic shape's name).
    pub fn of(model: Option<String>, engine: &Engine) -> Numerics {
        // Bounds checks injected or not, the arithmetic is the same.
        let kernels = KernelOptions { unchecked: false, ..engine.model.kernel_options() };
        Numerics { model, kernels, speculation: engine.model.limits.speculation.clone() }
    }
}

/// The rule for running a quality pass unasked: the two settings differ in what they compute.
pub fn computes_differently(a: &Numerics, b: &Numerics) -> bool {
    a != b
}

/// Bounds a test setting must stay within (`compare --min-top1 --max-kl`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Gate {
    pub min_top1: Option<f64>,
    pub max_kl: Option<f64>,
}

impl Gate {
    pub fn is_set(&self) -> bool {
        self.min_top1.is_some() || self.max_kl.is_some()
    }

    /// Every bound a pass falls outside, a line each, as [`Error::QualityGate`].
    pub fn check(&self, passes: &[Quality]) -> Result<()> {
        let mut outside = Vec::new();
        for q in passes {
            let who = format!("{} against {}", q.test, q.reference);
            if q.basis == Basis::Outputs && self.is_set() {
                outside.push(format!(
                    "{who}: no log-probabilities came back (greedy agreement only), so --min-top1 and --max-kl \
                     cannot be checked"
                ));
                continue;
            }
            if let Some(min) = self.min_top1.filter(|&min| q.top1_agreement.is_nan() || q.top1_agreement < min) {
                outside.push(format!("{who}: top-1 agreement {:.4} is below --min-top1 {min}", q.top1_agreement));
            }
            if let Some(max) = self.max_kl.filter(|&max| q.kl_mean.is_nan() || q.kl_mean > max) {
                // Six decimals, or an exponent where they would show 0.000000 (servers' top-k KL).
                let kl =
                    if q.kl_mean.abs() < 1e-3 { format!("{:.3e}", q.kl_mean) } else { format!("{:.6}", q.kl_mean) };
                outside.push(format!("{who}: mean KL {kl} is above --max-kl {max}"));
            }
        }
        if outside.is_empty() {
            Ok(())
        } else {
            Err(Error::QualityGate(outside.join("\n")))
        }
    }
}
