//! Continuous batching is invisible in the tokens: requests submitted together, chunked,
//! preempted and recomputed produce exactly what each produces alone (and what transformers does).
#![cfg(not(target_arch = "wasm32"))]

mod common;

use common::*;
use tokenmeter::engine::{generate, EngineOptions, FinishReason, Request, SamplingParams};

#[test]
fn requests_submitted_together_equal_transformers() {
    pollster::block_on(async {
        for name in ["tiny-gqa-tied", "tiny-untied"] {
            // 64 tokens per step: the 300-token prompt is prefilled in chunks while the others decode.
            let mut e =
                engine(name, EngineOptions { max_batched_tokens: 64, block_size: 8, ..Default::default() }).await;
            let cases = reference(name).cases;
            let mut requests: Vec<Request> = cases.iter().map(|c| greedy(&c.prompt_ids, c.max_new_tokens)).collect();
            requests.push(greedy(&cases[1].prompt_ids, cases[1].max_new_tokens)); // the same prompt twice
            let mut mixed_steps = 0;
            let done = generate(&mut e, requests, &mut |_| {}).await.unwrap();
            for (i, c) in done.iter().enumerate() {
                let want = &cases[if i < cases.len() { i } else { 1 }].tokens;
                assert_eq!(&c.tokens, want, "{name} request {i}");
                assert_eq!(c.finish, Some(FinishReason::Length));
            }
            // Check that batching really happened: run again and look at the step stats.
            let requests: Vec<Request> = cases.iter().map(|c| greedy(&c.prompt_ids, c.max_new_tokens)).collect();
            for r in requests {
                e.submit(r).unwrap();
            }
            while e.has_work() {
                let (_, stats) = e.step().await.unwrap();
                if let Some(s) = stats {
                    if s.decode_tokens > 0 && s.batched_tokens > s.decode_tokens {
                        mixed_steps += 1;
                    }
                }
            }
            assert!(mixed_steps > 0, "{name}: no step mixed prefill and decode");
        }
    });
}

#[test]
fn kv_exhaustion_preempts_and_recomputes_exactly() {
    pollster::block_on(async {
        let name = "tiny-gqa-tied";
        let cases = reference(name).cases;
        // 48 blocks of 8 tokens (384 slots): the 332-token request and the others cannot all fit.
        let mut e = engine(
            name,
            EngineOptions { max_batched_tokens: 64, block_size: 8, kv_blocks: Some(48), ..Default::default() },
        )
        .await;
        let requests: Vec<Request> = cases.iter().map(|c| greedy(&c.prompt_ids, c.max_new_tokens)).collect();
        let done = generate(&mut e, requests, &mut |_| {}).await.unwrap();
        let preemptions: u32 = done.iter().map(|c| c.preemptions).sum();
        assert!(preemptions > 0, "the cache was big enough: no preemption happened");
        for (c, case) in done.iter().zip(&cases) {
            assert_eq!(c.tokens, case.tokens, "request {} (preempted {} times)", c.id, c.preemptions);
        }
        assert_eq!(e.kv_blocks().0, 0, "every block returned");
    });
}

#[test]
fn seeded_sampling_is_reproducible_and_top_k_1_is_greedy() {
    pollster::block_on(async {
        let name = "tiny-mha";
        let case = &reference(name).cases[1];
        let mut e = engine(name, EngineOptions::default()).await;
        let sampled = |seed| Request {
            sampling: SamplingParams { temperature: 6.0, top_k: 50, top_p: 0.95, seed },
            ..greedy(&case.prompt_ids, 32)
        };
        let top1 = Request {
            sampling: SamplingParams { temperature: 1.0, top_k: 1, top_p: 1.0, seed: 3 },
            ..greedy(&case.prompt_ids, 32)
        };
        let done = generate(&mut e, vec![sampled(1), sampled(1), sampled(2), top1], &mut |_| {}).await.unwrap();
        assert_eq!(done[0].tokens, done[1].tokens, "same seed, same tokens");
        assert_ne!(done[0].tokens, done[2].tokens, "another seed should differ at temperature 6");
        assert_ne!(done[0].tokens, case.tokens, "sampling at temperature 6 should leave the greedy path");
        assert_eq!(done[3].tokens, case.tokens, "top_k = 1 is greedy");
    });
}

#[test]
fn stop_ids_end_generation_unless_ignored() {
    pollster::block_on(async {
        let name = "tiny-mha";
        let case = &reference(name).cases[0];
        let mut e = engine(name, EngineOptions::default()).await;
        let stop = case.tokens[3];
        let first = case.tokens.iter().position(|&t| t == stop).unwrap();
        let with_stop = Request { stop_ids: vec![stop], ignore_eos: false, ..greedy(&case.prompt_ids, 32) };
        let ignoring = Request { stop_ids: vec![stop], ignore_eos: true, ..greedy(&case.prompt_ids, 32) };
        let done = generate(&mut e, vec![with_stop, ignoring], &mut |_| {}).await.unwrap();
        assert_eq!(done[0].tokens, case.tokens[..=first].to_vec());
        assert_eq!(done[0].finish, Some(FinishReason::Stop));
        assert_eq!(done[1].tokens, case.tokens);
    });
}
