//! Prefix caching changes which prompt tokens are computed, never the tokens generated: greedy
//! output with the cache equals plain greedy output on batches of requests sharing prefixes —
//! arriving while others are mid-prefill, under a KV pool small enough to preempt, with
//! speculative decoding, and at head_dim 128 — and every block is back, unreferenced, after each
//! run. A repeated prompt is served from the cache up to its last full block before its last token.

use crate::common;

use common::generated::*;
use common::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokenmeter::engine::{Engine, EngineOptions, EventKind, ForwardPass, Request, Speculation};
use tokenmeter::model::checkpoint::Checkpoint;

/// What one request produced.
#[derive(Debug, Default, Clone)]
struct Outcome {
    tokens: Vec<u32>,
    cached_tokens: usize,
    preemptions: u32,
}

/// Requests in waves: wave `i + 1` is submitted after `gap` more steps of the engine (so it
/// arrives while earlier requests are mid-prefill or decoding); runs until idle. Checks that the
/// engine ends with every KV block free, each once.
async fn run_waves(engine: &mut Engine, waves: Vec<Vec<Request>>, gap: usize) -> Vec<Outcome> {
    let mut ids = Vec::new();
    let mut out: Vec<Outcome> = Vec::new();
    for (w, wave) in waves.into_iter().enumerate() {
        if w > 0 {
            for _ in 0..gap {
                step(engine, &ids, &mut out).await;
            }
        }
        for req in wave {
            ids.push(engine.submit(req).unwrap());
            out.push(Outcome::default());
        }
    }
    while engine.has_work() {
        step(engine, &ids, &mut out).await;
    }
    assert_eq!(engine.kv_blocks().0, 0, "every block released");
    let blocks = engine.kv_allocator();
    let mut free = blocks.free_ids();
    free.sort_unstable();
    assert_eq!(free, (0..blocks.total() as u32).collect::<Vec<_>>(), "each block free exactly once");
    assert!((0..blocks.total() as u32).all(|b| blocks.refcount(b) == 0), "a reference left over");
    out
}

async fn step(engine: &mut Engine, ids: &[u64], out: &mut [Outcome]) {
    let (events, _) = engine.step().await.unwrap();
    for e in events {
        let o = &mut out[ids.iter().position(|&id| id == e.id).expect("a submitted id")];
        match e.kind {
            EventKind::FirstToken { token } | EventKind::Token { token } => o.tokens.push(token),
            EventKind::Scheduled { cached_tokens } => o.cached_tokens = cached_tokens as usize,
            EventKind::Preempted => o.preemptions += 1,
            _ => {}
        }
    }
}

/// Three waves of requests over two shared prefixes (37 and 20 tokens: neither a multiple of the
/// 8-token block), each with its own tail of 1 to 30 tokens; one prompt repeated exactly.
fn shared_prefix_waves(vocab: usize, new_tokens: usize) -> Vec<Vec<Request>> {
    let mut rng = StdRng::seed_from_u64(11);
    let mut ids = |n: usize| -> Vec<u32> { (0..n).map(|_| rng.random_range(0..vocab as u32)).collect() };
    let prefixes = [ids(37), ids(20)];
    let mut prompts: Vec<Vec<u32>> = (0..9)
        .map(|i| {
            let mut p = prefixes[i % 2].clone();
            p.extend(ids(1 + (i * 7) % 30));
            p
        })
        .collect();
    prompts.push(prompts[0].clone());
    let requests: Vec<Request> = prompts.iter().map(|p| greedy(p, new_tokens)).collect();
    vec![requests[..3].to_vec(), requests[3..7].to_vec(), requests[7..].to_vec()]
}

fn options(prefix_cache: bool) -> EngineOptions {
    // 24 tokens a step and 8-token blocks: prompts take several chunked steps.
    EngineOptions { max_batched_tokens: 24, block_size: 8, prefix_cache, ..EngineOptions::default() }
}

/// Runs the waves without and with the cache (same options otherwise); asserts equal tokens and
/// that the cache served something; returns the cached run's outcomes.
async fn same_tokens(name: &str, load: impl AsyncFn(EngineOptions) -> Engine, base: EngineOptions) -> Vec<Outcome> {
    let mut plain = load(EngineOptions { prefix_cache: false, ..base.clone() }).await;
    let vocab = plain.model.cfg.vocab_size;
    let want = run_waves(&mut plain, shared_prefix_waves(vocab, 12), 2).await;
    let mut cached = load(EngineOptions { prefix_cache: true, ..base }).await;
    let got = run_waves(&mut cached, shared_prefix_waves(vocab, 12), 2).await;
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g.tokens.len(), 12, "{name} request {i}");
        assert_eq!(g.tokens, w.tokens, "{name} request {i}: the prefix cache changed the tokens");
        assert_eq!(w.cached_tokens, 0, "{name}: nothing cached with the cache off");
    }
    let served: usize = got.iter().map(|o| o.cached_tokens).sum();
    assert!(served >= 4 * 16, "{name}: only {served} prompt tokens served from the cache");
    got
}

/// Every `same_tokens` run has waves arriving mid-prefill; the tests below cover the other two
/// tiny fixtures (under preemption, with drafts) and head_dim 128, this one the MHA fixture (each
/// engine costs seconds of pipeline compilation on lavapipe, so the fixtures are not repeated).
#[test]
fn cached_greedy_equals_plain_greedy_with_arrivals_mid_prefill() {
    pollster::block_on(async {
        let name = "tiny-mha";
        let got = same_tokens(name, async |o| engine(name, o).await, options(false)).await;
        // The repeated prompt (the last request) arrived after its twin finished its prefill:
        // all its full blocks but the one holding its last token come from the cache.
        let last = got.last().unwrap();
        assert_eq!(last.cached_tokens, 32, "{name}: 38-token prompt: (38 - 1) / 8 full blocks");
    });
}

#[test]
fn cached_greedy_equals_plain_greedy_under_preemption() {
    pollster::block_on(async {
        let name = "tiny-gqa-tied";
        // 14 blocks of 8 tokens for ten requests of up to 80 tokens: preemptions are certain.
        let base = EngineOptions { kv_blocks: Some(14), ..options(false) };
        let got = same_tokens(name, async |o| engine(name, o).await, base).await;
        assert!(got.iter().any(|o| o.preemptions > 0), "no preemption: the pool is too large for this test");
    });
}

#[test]
fn cached_greedy_equals_plain_greedy_with_speculative_decoding() {
    pollster::block_on(async {
        let name = "tiny-untied";
        let base = EngineOptions { speculation: Speculation::Ngram { k: 4 }, ..options(false) };
        same_tokens(name, async |o| engine(name, o).await, base).await;
    });
}

#[test]
fn cached_greedy_equals_plain_greedy_at_head_dim_128() {
    pollster::block_on(async {
        let name = "real-gqa16-h128";
        let text = std::fs::read_to_string(fixture_dir(name).join("reference.json")).unwrap();
        let reference: RealReference = serde_json::from_str(&text).unwrap();
        let config = std::fs::read_to_string(fixture_dir(name).join("config.json")).unwrap();
        let load = async |o: EngineOptions| {
            let store = real_store(name, &config, &reference);
            let ckpt = Checkpoint::open(&store).await.unwrap();
            Engine::new(ForwardPass::load(gpu(), &ckpt, &o, &mut |_, _| {}).await.unwrap())
        };
        same_tokens(name, load, options(false)).await;
    });
}

#[test]
fn a_repeated_prompt_hits_every_full_block_before_its_last_token() {
    pollster::block_on(async {
        let name = "tiny-mha";
        let mut e = engine(name, options(true)).await;
        for (len, want) in [(40, 32), (41, 40), (8, 0), (9, 8)] {
            let prompt: Vec<u32> = (0..len).map(|i| (i * 13 % 200) as u32 + len as u32).collect();
            let first = run_waves(&mut e, vec![vec![greedy(&prompt, 3)]], 0).await;
            let second = run_waves(&mut e, vec![vec![greedy(&prompt, 3)]], 0).await;
            assert_eq!(first[0].cached_tokens, 0, "prompt of {len}: a new prompt");
            assert_eq!(second[0].cached_tokens, want, "prompt of {len}");
            assert_eq!(second[0].tokens, first[0].tokens);
        }
    });
}
