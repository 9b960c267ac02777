//! Continuous batching is invisible in the tokens: requests submitted together, chunked,
//! preempted and recomputed produce exactly what each produces alone (and what transformers does).

use crate::common;

use common::*;
use std::collections::BTreeMap;
use tokenmeter::engine::{generate, EngineOptions, EventKind, FinishReason, Request, SamplingParams};

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
                    if s.decode_tokens > 0 && s.shape.tokens > s.decode_tokens {
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

/// What one request got: its tokens and how it ended.
type Outcome = (Vec<u32>, Option<FinishReason>);

/// CPU/GPU overlap (on by default: each step is submitted before the previous one's ids are read)
/// changes when steps run, never what they produce. One workload — greedy requests under KV
/// pressure (preemptions), a stop id, seeded sampling, and a request cancelled right after its
/// third token, while its next step is already on the GPU — with overlap on and off: the same
/// tokens and reasons, the greedy ones equal to transformers', nothing after the cancellation, and
/// events in time order per request.
#[test]
fn overlap_changes_no_token() {
    pollster::block_on(async {
        let name = "tiny-gqa-tied";
        let cases = reference(name).cases;
        let stop = cases[0].tokens[3];
        let mut requests: Vec<Request> = cases.iter().map(|c| greedy(&c.prompt_ids, c.max_new_tokens)).collect();
        requests.push(Request { stop_ids: vec![stop], ignore_eos: false, ..greedy(&cases[0].prompt_ids, 32) });
        requests.push(Request {
            sampling: SamplingParams { temperature: 1.5, top_k: 40, top_p: 0.9, seed: 5 },
            ..greedy(&cases[1].prompt_ids, 24)
        });
        let cancelled = requests.len() as u64;
        requests.push(greedy(&cases[2].prompt_ids, 20));
        let mut runs = Vec::new();
        for overlap in [true, false] {
            let options = EngineOptions {
                max_batched_tokens: 64,
                block_size: 8,
                kv_blocks: Some(48),
                overlap,
                ..Default::default()
            };
            let mut e = engine(name, options).await;
            assert_eq!(e.model.limits.overlap, overlap);
            for r in &requests {
                e.submit(r.clone()).unwrap();
            }
            let mut got: BTreeMap<u64, Outcome> = BTreeMap::new();
            let mut last_t: BTreeMap<u64, f64> = BTreeMap::new();
            let (mut preempted, mut after_cancel) = (0, 0);
            let mut cancel_sent = false;
            while e.has_work() {
                let (events, _) = e.step().await.unwrap();
                for ev in events {
                    let t = last_t.entry(ev.id).or_insert(0.0);
                    assert!(ev.t_s >= *t, "overlap {overlap}: request {} went back in time", ev.id);
                    *t = ev.t_s;
                    let entry = got.entry(ev.id).or_default();
                    match ev.kind {
                        EventKind::FirstToken { token } | EventKind::Token { token } => {
                            after_cancel += usize::from(cancel_sent && ev.id == cancelled);
                            entry.0.push(token);
                        }
                        EventKind::Finished { reason } => entry.1 = Some(reason),
                        EventKind::Preempted => preempted += 1,
                        _ => {}
                    }
                }
                if !cancel_sent && got.get(&cancelled).is_some_and(|o| o.0.len() == 3) {
                    assert!(e.cancel(cancelled));
                    cancel_sent = true;
                }
            }
            assert_eq!(after_cancel, 0, "overlap {overlap}: tokens after the cancellation");
            assert!(preempted > 0, "overlap {overlap}: the cache was big enough, no preemption");
            assert_eq!(e.kv_blocks().0, 0, "overlap {overlap}: every block returned");
            assert_eq!(
                e.overlapped_steps() > 0,
                overlap,
                "overlap {overlap}: {} steps overlapped",
                e.overlapped_steps()
            );
            for (i, c) in cases.iter().enumerate() {
                assert_eq!(
                    got[&(i as u64)],
                    (c.tokens.clone(), Some(FinishReason::Length)),
                    "overlap {overlap}, case {i}"
                );
            }
            let first = cases[0].tokens.iter().position(|&t| t == stop).unwrap();
            assert_eq!(got[&(cases.len() as u64)], (cases[0].tokens[..=first].to_vec(), Some(FinishReason::Stop)));
            assert_eq!(got[&cancelled], (cases[2].tokens[..3].to_vec(), Some(FinishReason::Cancelled)));
            runs.push(got);
        }
        assert_eq!(runs[0], runs[1], "overlap on (left) and off (right)");
    });
}

/// A run stopped with a step still on the GPU (the page's stop button, a saturation stop) drops
/// its engine with that step's readback unread; the model goes back to the page's pool, and the
/// next engine over it must still work.
#[test]
fn a_model_taken_from_an_engine_with_a_step_in_flight_serves_the_next_one() {
    pollster::block_on(async {
        let name = "tiny-mha";
        let case = &reference(name).cases[1];
        let mut e = engine(name, EngineOptions::default()).await;
        e.submit(greedy(&case.prompt_ids, 16)).unwrap();
        for _ in 0..3 {
            e.step().await.unwrap();
        }
        assert!(e.has_work(), "a step is in flight");
        let mut next = tokenmeter::engine::Engine::new(e.model);
        let done = generate(&mut next, vec![greedy(&case.prompt_ids, case.max_new_tokens)], &mut |_| {}).await.unwrap();
        assert_eq!(done[0].tokens, case.tokens);
    });
}
