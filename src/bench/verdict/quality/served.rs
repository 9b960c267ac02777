//! The quality pass between two servers, from what an OpenAI-compatible API returns: each
//! setting's greedy output of the same prompts at temperature 0, with the top-k log-probabilities
//! of every generated token where the server gives them (`logprobs`).
//!
//! A server gives no logit rows and cannot be teacher-forced, so the positions compared are those
//! where both saw the same context: each output up to and including its first divergence (the
//! tokens before it are equal, so the context there is the same prompt plus the same tokens).
//! At each: whether the top-1 tokens agree, and KL(reference ‖ test) over the returned top-k
//! ([`top_k_kl`]: the tokens both lists hold, and the rest of the mass in one bucket on each
//! side). Without log-probabilities from both, greedy agreement alone, on the output text.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::{first_divergence, kl_divergence, summarize_positions, Basis, Position, Quality};
use crate::error::{Error, Result};

/// The smallest mass the rest of the vocabulary (outside the returned top-k) is given, on each
/// side: servers round the log-probabilities they return (llama-server to f32), so a smaller
/// remainder cannot be told from 0, and a remainder of 0 on one side only would make the KL
/// infinite.
pub const TAIL_FLOOR: f64 = 1e-6;

/// One generated token as a server returned it: the token (its text, or its bytes where they are
/// not UTF-8: the remote layer's `openai::parse_greedy`), its log-probability and the top-k
/// alternatives at that position, likeliest first as sent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TokenLogprobs {
    pub token: String,
    pub logprob: f64,
    pub top: Vec<(String, f64)>,
}

/// One greedy output of a server: its text, and per generated token its log-probabilities where
/// the server returned them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Generated {
    pub text: String,
    pub tokens: Option<Vec<TokenLogprobs>>,
}

/// The likeliest token of a position: the best of its top-k, else the token itself.
fn top1(t: &TokenLogprobs) -> &str {
    t.top.iter().max_by(|a, b| a.1.total_cmp(&b.1)).map_or(t.token.as_str(), |(token, _)| token.as_str())
}

/// Probabilities by token (a token listed twice, as two ids of the same text can be, counts once
/// with their sum).
fn probabilities(top: &[(String, f64)]) -> HashMap<&str, f64> {
    let mut out = HashMap::new();
    for (token, logprob) in top {
        *out.entry(token.as_str()).or_insert(0.0) += logprob.exp();
    }
    out
}

/// KL(reference ‖ test), in nats, over two top-k lists: each token both lists hold is a bucket of
/// its own; every other token (outside either list) falls in one bucket, of mass
/// `max(1 − Σ shared, TAIL_FLOOR)` on each side. That partitions the vocabulary the same way on
/// both sides, so this is the KL of the two distributions coarse-grained — never above their
/// true KL (data-processing inequality) — and 0 exactly when the lists are equal.
pub fn top_k_kl(reference: &[(String, f64)], test: &[(String, f64)]) -> f64 {
    let (p, q) = (probabilities(reference), probabilities(test));
    let mut shared: Vec<&str> = p.keys().filter(|token| q.contains_key(*token)).copied().collect();
    shared.sort_unstable(); // a fixed order: the sum is then the same bits every run
    let bucket = |probs: &HashMap<&str, f64>| {
        let mut logs: Vec<f64> = shared.iter().map(|token| probs[token].ln()).collect();
        let rest = 1.0 - shared.iter().map(|token| probs[token]).sum::<f64>();
        logs.push(rest.max(TAIL_FLOOR).ln());
        logs
    };
    kl_divergence(&bucket(&p), &bucket(&q))
}

/// The test's log-probability of `token`: its own token's, or one of its top-k; NaN when the test
/// did not return it.
fn logprob_of(test: &TokenLogprobs, token: &str) -> f64 {
    if test.token == token {
        return test.logprob;
    }
    test.top.iter().find(|(t, _)| t == token).map_or(f64::NAN, |&(_, logprob)| logprob)
}

/// Servers name tokens by their text: each text gets a number, the index of [`Quality::tokens`],
/// so that a [`Position`]'s top-1 fields stay numbers.
#[derive(Default)]
struct TokenTable {
    texts: Vec<String>,
    ids: HashMap<String, u32>,
}

impl TokenTable {
    fn id(&mut self, token: &str) -> u32 {
        if let Some(&id) = self.ids.get(token) {
            return id;
        }
        let id = self.texts.len() as u32;
        self.texts.push(token.to_string());
        self.ids.insert(token.to_string(), id);
        id
    }
}

/// One position both saw with the same context.
fn served_position(reference: &TokenLogprobs, test: &TokenLogprobs, tokens: &mut TokenTable) -> Position {
    let reference_top1 = top1(reference);
    Position {
        reference_top1: tokens.id(reference_top1),
        test_top1: tokens.id(top1(test)),
        kl: top_k_kl(&reference.top, &test.top),
        test_logprob: logprob_of(test, reference_top1),
    }
}

/// `test`'s outputs against `reference`'s (the same prompts, in order), `new_tokens` asked of
/// each, top-k of `top_k`; see the module documentation.
pub fn compare_served(
    names: (&str, &str),
    reference: &[Generated],
    test: &[Generated],
    new_tokens: usize,
    top_k: usize,
) -> Result<Quality> {
    if reference.len() != test.len() || reference.is_empty() {
        return Err(Error::Invalid(format!(
            "quality: {} and {} answered {} and {} prompts; the pass compares the same prompts",
            names.0,
            names.1,
            reference.len(),
            test.len()
        )));
    }
    let with_logprobs: Option<Vec<(&[TokenLogprobs], &[TokenLogprobs])>> =
        reference.iter().zip(test).map(|(r, t)| Some((r.tokens.as_deref()?, t.tokens.as_deref()?))).collect();
    let Some(pairs) = with_logprobs else {
        // Greedy agreement on the text alone; a divergence is a character index.
        let divergences = reference
            .iter()
            .zip(test)
            .map(|(r, t)| first_divergence(&r.text.chars().collect::<Vec<_>>(), &t.text.chars().collect::<Vec<_>>()))
            .collect();
        return Ok(summarize_positions(names, Vec::new(), divergences, new_tokens, Basis::Outputs));
    };
    let (mut per_position, mut divergences, mut tokens) = (Vec::new(), Vec::new(), TokenTable::default());
    let mut masses = Vec::new();
    for (r, t) in pairs {
        let key = |tokens: &[TokenLogprobs]| tokens.iter().map(|x| x.token.clone()).collect::<Vec<_>>();
        let diverged = first_divergence(&key(r), &key(t));
        // The context is shared up to and including the first divergence.
        let shared = diverged.map_or(r.len(), |d| d + 1).min(r.len()).min(t.len());
        per_position.extend(r[..shared].iter().zip(&t[..shared]).map(|(r, t)| served_position(r, t, &mut tokens)));
        masses.extend(r[..shared].iter().map(|r| probabilities(&r.top).values().sum::<f64>()));
        divergences.push(diverged);
    }
    let mut q = summarize_positions(names, per_position, divergences, new_tokens, Basis::TopLogprobs { k: top_k });
    q.tokens = tokens.texts;
    q.top_k_mass = Some(masses.iter().sum::<f64>() / masses.len() as f64);
    Ok(q)
}
