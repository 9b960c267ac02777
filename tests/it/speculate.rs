//! Speculative decoding — by prompt lookup or with a draft model — changes how many steps a
//! request takes, never its tokens: greedy output with drafts equals plain greedy output (and
//! transformers' tokens), drafts are really accepted (all of them when the draft model is the
//! target itself), and sampled requests are left alone.

use crate::common;

use common::*;
use tokenmeter::engine::{
    generate, Completion, DraftModel, Engine, EngineOptions, EventKind, ForwardPass, Request, SamplingParams,
    Speculation,
};
use tokenmeter::model::checkpoint::Checkpoint;
use tokenmeter::model::source::DirStore;
use tokenmeter::model::synthetic::SyntheticModel;
use tokenmeter::model::TensorProvider;

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
        // The figure BENCHMARKS.md quotes (deterministic: greedy on a fixed model).
        eprintln!(
            "ngram:6 on a repetitive prompt: {} steps with drafts vs {} without, {} drafted, {} accepted, \
             {:.2} output tokens per step (its prefill step included)",
            steps[1],
            steps[0],
            totals.0,
            totals.1,
            48.0 / steps[1] as f64
        );
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

/// 64 tokens per step and 8-token blocks: drafts share steps with chunked prefill, and the draft
/// model's catch-up of a prompt spans blocks.
fn draft_options(k: usize) -> EngineOptions {
    EngineOptions {
        max_batched_tokens: 64,
        block_size: 8,
        speculation: Speculation::Draft { k, model: "test draft".into() },
        ..Default::default()
    }
}

/// Fixture `name` as the target, drafted for by `draft` (on the same GPU) proposing `k` tokens.
async fn with_draft(name: &str, draft: &impl TensorProvider, k: usize) -> Engine {
    let options = draft_options(k);
    let mut e = engine(name, options.clone()).await;
    let draft_options = EngineOptions { speculation: Speculation::Off, ..options };
    let model = ForwardPass::load(gpu(), draft, &draft_options, &mut |_, _| {}).await.unwrap();
    e.set_draft(DraftModel::new(model, &e.model.cfg, k).unwrap()).unwrap();
    e
}

async fn checkpoint(name: &str) -> Checkpoint<tokenmeter::model::source::DiskFile> {
    Checkpoint::open(&DirStore::new(fixture_dir(name)).unwrap()).await.unwrap()
}

/// The reference cases as greedy requests, plus one sampled request (last).
fn requests(name: &str) -> Vec<Request> {
    let cases = reference(name).cases;
    let mut requests: Vec<Request> = cases.iter().map(|c| greedy(&c.prompt_ids, c.max_new_tokens)).collect();
    requests.push(Request {
        sampling: SamplingParams { temperature: 1.0, top_k: 20, top_p: 0.9, seed: 11 },
        ..greedy(&cases[0].prompt_ids, 24)
    });
    requests
}

fn totals(done: &[Completion]) -> (usize, usize) {
    (done.iter().map(|c| c.drafted_tokens).sum(), done.iter().map(|c| c.accepted_tokens).sum())
}

/// Draft model = target: every greedy draft token is the target's own choice, so all are
/// accepted, and the tokens are transformers' (which plain decoding gives: the first test).
#[test]
fn a_draft_model_equal_to_the_target_has_every_token_accepted() {
    pollster::block_on(async {
        // One fixture, K = 1 (the catch-up path alone: no one-token draft steps); K = 3 with the
        // target drafting for itself runs in `bench_records_the_draft_model_and_its_acceptance`,
        // K = 8 with another draft below (each engine costs seconds of pipeline compilation here).
        for name in ["tiny-untied"] {
            let mut e = with_draft(name, &checkpoint(name).await, 1).await;
            let done = generate(&mut e, requests(name), &mut |_| {}).await.unwrap();
            let cases = reference(name).cases;
            for (c, case) in done.iter().zip(&cases) {
                assert_eq!(c.tokens, case.tokens, "{name} request {}: not transformers' tokens", c.id);
            }
            // (Its tokens are checked against plain decoding in the next test.)
            assert_eq!(done.last().unwrap().drafted_tokens, 0, "{name}: a sampled request was drafted for");
            let (drafted, accepted) = totals(&done);
            assert!(drafted > 0, "{name}: nothing drafted");
            assert_eq!(accepted, drafted, "{name}: {accepted} of {drafted} draft tokens accepted");
            assert_eq!(e.kv_blocks().0, 0, "{name}: every target block returned");
            assert_eq!(e.draft().unwrap().kv_blocks_used(), 0, "{name}: every draft block returned");
        }
    });
}

/// A different model with the target's vocabulary (synthetic weights of another, smaller shape):
/// whatever it proposes, the tokens are plain decoding's.
#[test]
fn a_different_draft_model_never_changes_the_tokens() {
    pollster::block_on(async {
        let name = "tiny-gqa-tied";
        let target = checkpoint(name).await;
        let shape = tokenmeter::model::Qwen3Config {
            num_hidden_layers: 1,
            hidden_size: 32,
            intermediate_size: 64,
            num_attention_heads: 2,
            num_key_value_heads: 1,
            ..target.config().clone()
        };
        let draft = SyntheticModel::new(shape, 7);
        let mut plain =
            engine(name, EngineOptions { max_batched_tokens: 64, block_size: 8, ..Default::default() }).await;
        let expected = generate(&mut plain, requests(name), &mut |_| {}).await.unwrap();
        // K = 8: one-token draft steps, and a draft spanning a whole 8-token block.
        for k in [8] {
            let mut e = with_draft(name, &draft, k).await;
            let done = generate(&mut e, requests(name), &mut |_| {}).await.unwrap();
            for (c, x) in done.iter().zip(&expected) {
                assert_eq!(c.tokens, x.tokens, "k {k}, request {}", c.id);
            }
            let (drafted, accepted) = totals(&done);
            assert!(drafted > 0, "k {k}: nothing drafted");
            eprintln!("k {k}: {accepted} of {drafted} draft tokens accepted");
            assert_eq!(e.draft().unwrap().kv_blocks_used(), 0, "k {k}: every draft block returned");
        }
    });
}

/// (The CLI's own checks, before any weight is uploaded, are in `tests/it/bad_flags.rs`.)
#[test]
fn a_draft_model_with_another_vocabulary_is_refused() {
    pollster::block_on(async {
        let target = checkpoint("tiny-gqa-tied").await; // 512 ids
        let draft = checkpoint("tiny-mha").await; // 256 ids
        let model = ForwardPass::load(gpu(), &draft, &EngineOptions::default(), &mut |_, _| {}).await.unwrap();
        let err = DraftModel::new(model, target.config(), 4).err().expect("refused").to_string();
        assert!(err.contains("vocabulary (256 ids) differs from the target's (512 ids)"), "{err}");
    });
}

/// `bench --speculate draft:DIR:K` end to end: the run record names the draft model, and with the
/// target drafting for itself the summary's acceptance is 1 with drafts in every verifying step.
#[test]
fn bench_records_the_draft_model_and_its_acceptance() {
    let dir = std::env::temp_dir().join(format!("tokenmeter-speculate-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("out.json");
    let model = fixture_dir("tiny-gqa-tied");
    let model = model.to_str().unwrap();
    let speculate = format!("draft:{model}:3");
    let args = ["bench", "--model", model, "--speculate", &speculate, "--random-prompts", "--rate", "inf"];
    let more = ["--num-requests", "3", "--input-len", "8", "--output-len", "13", "--no-baseline", "--json"];
    let status =
        std::process::Command::new(env!("CARGO_BIN_EXE_tokenmeter")).args(args).args(more).arg(&out).output().unwrap();
    assert!(status.status.success(), "{}", String::from_utf8_lossy(&status.stderr));
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let speculation = &json["run_config"]["engine"]["speculation"];
    assert_eq!(*speculation, serde_json::json!({"kind": "draft", "k": 3, "model": model}), "{speculation}");
    let summary = &json["summary"]["speculation"];
    assert_eq!(summary["acceptance_rate"], 1.0, "{summary}");
    assert!(summary["drafted_tokens"].as_u64().unwrap() >= 3 * 3, "{summary}");
    for r in json["requests"].as_array().unwrap() {
        assert_eq!(r["output_len"], 13, "{r}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
