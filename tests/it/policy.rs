//! A scheduling policy changes which tokens share a step, never the tokens: every policy, with
//! and without chunked prefill, gives each request transformers' greedy tokens.

use crate::common;

use common::*;
use tokenmeter::engine::{generate, Engine, EngineOptions, ForwardPass, Order, Policy, Request, SamplingParams};
use tokenmeter::model::checkpoint::Checkpoint;
use tokenmeter::model::source::DirStore;

#[test]
fn every_policy_gives_every_request_its_greedy_tokens() {
    pollster::block_on(async {
        let name = "tiny-gqa-tied";
        let store = DirStore::new(fixture_dir(name)).unwrap();
        let ckpt = Checkpoint::open(&store).await.unwrap();
        // 512 tokens per step: the longest prompt fits one step, so chunking can be switched off;
        // the chunked policies cut prefills at 48 tokens so that prefills and decodes interleave;
        // 48 blocks of 8 hold 384 of the 459 tokens the requests reach: preemptions too.
        let options =
            EngineOptions { max_batched_tokens: 512, block_size: 8, kv_blocks: Some(48), ..Default::default() };
        let mut engine = Engine::new(ForwardPass::load(gpu(), &ckpt, &options, &mut |_, _| {}).await.unwrap());
        let cases = reference(name).cases;
        let requests = || {
            cases
                .iter()
                .map(|c| Request {
                    prompt: c.prompt_ids.clone(),
                    max_new_tokens: c.max_new_tokens,
                    sampling: SamplingParams::default(),
                    stop_ids: vec![],
                    ignore_eos: true,
                })
                .collect::<Vec<_>>()
        };
        for order in [Order::Fcfs, Order::PrefillFirst, Order::DecodeFirst] {
            for (chunked_prefill, prefill_chunk) in [(true, Some(48)), (true, None), (false, None)] {
                let policy = Policy { order, chunked_prefill, prefill_chunk };
                engine.set_policy(policy).unwrap();
                let done = generate(&mut engine, requests(), &mut |_| {}).await.unwrap();
                for (c, want) in done.iter().zip(&cases) {
                    assert_eq!(c.tokens, want.tokens, "{policy:?}, prompt of {}", want.prompt_ids.len());
                }
            }
        }
        // A prompt longer than a step cannot be served without chunking: refused, not hung.
        let mut small = Engine::new(
            ForwardPass::load(
                gpu(),
                &ckpt,
                &EngineOptions { max_batched_tokens: 16, ..Default::default() },
                &mut |_, _| {},
            )
            .await
            .unwrap(),
        );
        small.set_policy(Policy { chunked_prefill: false, ..Policy::default() }).unwrap();
        let err = small.submit(requests().remove(0)).map(|_| ()).unwrap_err().to_string();
        assert!(err.contains("without chunked prefill"), "{err}");
    });
}
