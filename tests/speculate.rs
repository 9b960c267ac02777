//! Speculative decoding by prompt lookup changes how many steps a request takes, never its tokens:
//! greedy output with drafts equals plain greedy output (and transformers' tokens), drafts are
//! really accepted on repetitive text, and sampled requests are left alone.
#![cfg(not(target_arch = "wasm32"))]

mod common;

use common::*;
use tokenmeter::engine::{generate, EngineOptions, EventKind, Request, SamplingParams, Speculation};

#[test]
fn speculative_greedy_equals_transformers_and_drafts_are_accepted() {
    pollster::block_on(async {
        for name in ["tiny-gqa-tied", "tiny-untied"] {
            // 64 tokens per step and 8-token blocks: drafts share steps with chunked prefill.
            let options = EngineOptions {
                max_batched_tokens: 64,
                block_size: 8,
                speculation: Speculation::Ngram { k: 4 },
                ..Default::default()
            };
            let mut e = engine(name, options).await;
            let cases = reference(name).cases;
            let requests: Vec<Request> = cases.iter().map(|c| greedy(&c.prompt_ids, c.max_new_tokens)).collect();
            let done = generate(&mut e, requests, &mut |_| {}).await.unwrap();
            for (c, case) in done.iter().zip(&cases) {
                assert_eq!(c.tokens, case.tokens, "{name} request {}", c.id);
            }
            let drafted: usize = done.iter().map(|c| c.drafted_tokens).sum();
            let accepted: usize = done.iter().map(|c| c.accepted_tokens).sum();
            assert!(accepted > 0 && drafted > accepted, "{name}: {accepted} of {drafted} draft tokens accepted");
            assert_eq!(e.kv_blocks().0, 0, "{name}: every block returned");
        }
    });
}

#[test]
fn a_repetitive_prompt_takes_fewer_steps_with_the_same_tokens() {
    pollster::block_on(async {
        let name = "tiny-mha";
        // A 12-token phrase said six times: the model's continuation repeats it too.
        let phrase: Vec<u32> = (0..12).map(|i| 40 + 17 * i).collect();
        let prompt: Vec<u32> = phrase.iter().cycle().take(72).copied().collect();
        let mut steps = [0usize; 2];
        let mut outputs = Vec::new();
        let mut totals = (0, 0);
        for (i, speculation) in [Speculation::Off, Speculation::Ngram { k: 6 }].into_iter().enumerate() {
            let mut e = engine(name, EngineOptions { speculation, ..Default::default() }).await;
            e.submit(greedy(&prompt, 48)).unwrap();
            let mut tokens = Vec::new();
            while e.has_work() {
                let (events, stats) = e.step().await.unwrap();
                for ev in events {
                    match ev.kind {
                        EventKind::FirstToken { token } | EventKind::Token { token } => tokens.push(token),
                        EventKind::Speculated { drafted, accepted } => {
                            totals.0 += drafted as usize;
                            totals.1 += accepted as usize;
                        }
                        _ => {}
                    }
                }
                steps[i] += stats.is_some() as usize;
            }
            outputs.push(tokens);
        }
        assert_eq!(outputs[0].len(), 48);
        assert_eq!(outputs[1], outputs[0], "speculation changed the tokens");
        assert!(totals.1 > 0, "no draft token accepted ({} drafted)", totals.0);
        assert!(steps[1] < steps[0], "{} steps with drafts, {} without", steps[1], steps[0]);
    });
}

#[test]
fn sampled_requests_decode_plainly_and_stop_ids_still_stop() {
    pollster::block_on(async {
        let name = "tiny-gqa-tied";
        let case = &reference(name).cases[1]; // its output repeats 73 often
        let sampled = Request {
            sampling: SamplingParams { temperature: 1.5, top_k: 20, top_p: 0.9, seed: 5 },
            ..greedy(&case.prompt_ids, 32)
        };
        let stop = 73;
        let first_stop = case.tokens.iter().position(|&t| t == stop).unwrap();
        let stopping = Request { stop_ids: vec![stop], ignore_eos: false, ..greedy(&case.prompt_ids, 32) };
        let mut outputs = Vec::new();
        for speculation in [Speculation::Off, Speculation::Ngram { k: 4 }] {
            let mut e = engine(name, EngineOptions { speculation, ..Default::default() }).await;
            let done = generate(&mut e, vec![sampled.clone(), stopping.clone()], &mut |_| {}).await.unwrap();
            assert_eq!(done[1].tokens, case.tokens[..=first_stop].to_vec());
            assert_eq!(done[0].drafted_tokens, 0, "a sampled request was drafted for");
            outputs.push(done[0].tokens.clone());
        }
        assert_eq!(outputs[0], outputs[1], "a sampled request's tokens changed with speculation on");
    });
}
