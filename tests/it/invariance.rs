//! Invariances that need no reference, on Qwen3-0.6B's shape (hidden 1024, 16 / 8 heads of 128,
//! intermediate 3072, the full 151,936 vocabulary; two layers of random weights): a request's
//! logits do not depend on how its prompt is chunked, on which other requests share its steps, or
//! on whether it was preempted and recomputed. Logits are compared, not argmax: random weights
//! make argmax degenerate.

use crate::common;

use common::*;
use tokenmeter::engine::{Batch, EngineOptions, ForwardPass};
use tokenmeter::model::synthetic::SyntheticModel;
use tokenmeter::model::Qwen3Config;

/// Largest |a - b| / (1 + |b|) allowed between two runs of the same request. Both are f32 sums
/// of the same terms in different orders (other matmul tiles, attention splits and merges): each
/// logit ends a chain of K = 1,024-3,072-term dot products through two layers, and reordering a
/// K-term f32 sum moves it by up to ~K * 6e-8 relative to the sum of |terms| (measured here:
/// 3e-5 to 5e-5). 2e-4 leaves 4x room; the attention bug this guards against gave 0.5.
const TOL: f32 = 2e-4;

const PROMPT: usize = 520;

async fn model(max_batched_tokens: usize) -> ForwardPass {
    let mut cfg = Qwen3Config::preset("qwen3-0.6b").unwrap();
    cfg.num_hidden_layers = 2;
    let options = EngineOptions { max_batched_tokens, block_size: 16, ..EngineOptions::default() };
    ForwardPass::load(gpu(), &SyntheticModel::new(cfg, 7), &options, &mut |_, _| {}).await.unwrap()
}

fn prompt(n: usize, salt: u32) -> Vec<u32> {
    (0..n as u32).map(|i| (i.wrapping_mul(2_654_435_761) ^ salt) % 151_936).collect()
}

/// Tokens `ids` of sequence `seq` at positions `start..`.
fn tokens(ids: &[u32], start: usize, seq: u32) -> Vec<[u32; 4]> {
    ids.iter().enumerate().map(|(i, &id)| [id, (start + i) as u32, seq, 0]).collect()
}

fn blocks(first: u32, n: u32) -> Vec<u32> {
    (first..first + n).collect()
}

/// Prefills `ids` at positions `start..` into `table` in chunks of `chunk`; the logits of the last token.
async fn prefill(model: &mut ForwardPass, ids: &[u32], start: usize, table: &[u32], chunk: usize) -> Vec<f32> {
    let mut logits = Vec::new();
    for (c, part) in ids.chunks(chunk).enumerate() {
        let last = (c + 1) * chunk >= ids.len();
        let batch = Batch {
            tokens: tokens(part, start + c * chunk, 0),
            logit_rows: if last { vec![part.len() as u32 - 1] } else { vec![] },
            block_tables: vec![table.to_vec()],
            ..Default::default()
        };
        if last {
            logits = model.step_logits(&batch).await.unwrap();
        } else {
            model.step(&batch).await.unwrap();
        }
    }
    logits
}

fn assert_same(what: &str, got: &[f32], want: &[f32]) {
    let (err, at) = worst(got, want);
    eprintln!("{what}: worst relative difference {err:.2e}");
    assert!(err < TOL, "{what}: logit {at} is {} vs {} (relative {err:.2e} > {TOL:.0e})", got[at], want[at]);
    let spread = want.iter().fold(0f32, |m, x| m.max(x.abs()));
    assert!(spread > 0.5, "{what}: logits are all near zero (max |logit| {spread}): nothing was compared");
}

#[test]
fn logits_do_not_depend_on_how_a_prompt_is_chunked() {
    pollster::block_on(async {
        let mut model = model(2048).await;
        let ids = prompt(PROMPT, 1);
        let table = blocks(0, 40);
        let one = prefill(&mut model, &ids, 0, &table, PROMPT).await;
        let chunks = prefill(&mut model, &ids, 0, &table, 64).await;
        assert_same("520-token prompt: chunks of 64 vs one chunk", &chunks, &one);
        // Token by token over 180 positions: decode steps, with split attention from context 128
        // (SPLIT_MIN_CONTEXT) on. (CI time: each decode step costs about as much as a chunk here.)
        let one_180 = prefill(&mut model, &ids[..180], 0, &table, 180).await;
        let by_token = prefill(&mut model, &ids[..180], 0, &table, 1).await;
        assert_same("180-token prompt: token by token vs one chunk", &by_token, &one_180);
    });
}

#[test]
fn logits_do_not_depend_on_other_requests_in_the_step() {
    pollster::block_on(async {
        let mut model = model(1024).await;
        let vocab = model.cfg.vocab_size;
        let a = prompt(PROMPT + 1, 2);
        let a_table = blocks(0, 40);
        // Alone: the prompt in one chunk, then one decode.
        let alone_prefill = prefill(&mut model, &a[..PROMPT], 0, &a_table, PROMPT).await;
        let alone_decode = prefill(&mut model, &a[PROMPT..], PROMPT, &a_table, 1).await;

        // Batch 3: A's prompt with two other prompts in the same step (A last, at a row offset).
        let (b, c) = (prompt(100, 3), prompt(37, 4));
        let mut step = tokens(&b, 0, 0);
        step.extend(tokens(&c, 0, 1));
        step.extend(tokens(&a[..PROMPT], 0, 2));
        let batch = Batch {
            logit_rows: vec![99, 136, step.len() as u32 - 1],
            tokens: step,
            block_tables: vec![blocks(100, 7), blocks(110, 3), blocks(40, 40)],
            ..Default::default()
        };
        let three = model.step_logits(&batch).await.unwrap();
        assert_same("A's prefill among 3 prompts vs alone", &three[2 * vocab..], &alone_prefill);

        // Batch 16, mixed: 14 other sequences decoding (contexts 1..14 x 13, past the split
        // attention's 128 from the tenth) and a 200-token prefill chunk share A's decode step.
        let mut tables = Vec::new();
        for s in 0..14u32 {
            let ctx = 13 * (s as usize + 1);
            let table = blocks(200 + 40 * s, 40);
            prefill(&mut model, &prompt(ctx, 10 + s), 0, &table, 1024).await;
            tables.push(table);
        }
        let mut step = Vec::new();
        for s in 0..14u32 {
            step.push([(s * 977) % vocab as u32, 13 * (s + 1), s, 0]);
        }
        step.extend(tokens(&prompt(200, 99), 0, 14));
        step.push([a[PROMPT], PROMPT as u32, 15, 0]);
        tables.push(blocks(800, 13));
        tables.push(a_table.clone());
        let batch = Batch {
            logit_rows: (0..14).chain([213, 214]).collect(),
            tokens: step,
            block_tables: tables,
            ..Default::default()
        };
        let sixteen = model.step_logits(&batch).await.unwrap();
        assert_same("A's decode among 14 decodes and a prefill chunk vs alone", &sixteen[15 * vocab..], &alone_decode);
    });
}

#[test]
fn decoding_after_preemption_and_recompute_equals_decoding_without() {
    pollster::block_on(async {
        let mut model = model(1024).await;
        let a = prompt(PROMPT + 3, 5);
        let table = blocks(0, 40);
        // Uninterrupted: the prompt, then three decodes (the logits of the third).
        prefill(&mut model, &a[..PROMPT], 0, &table, PROMPT).await;
        let uninterrupted = prefill(&mut model, &a[PROMPT..], PROMPT, &table, 1).await;
        // Preempted: another request takes A's blocks and overwrites them; A comes back into other
        // blocks, in another order, recomputing prompt + the two tokens it had, then decodes.
        prefill(&mut model, &prompt(PROMPT, 6), 0, &table, 512).await;
        let again: Vec<u32> = (40..80).rev().collect();
        prefill(&mut model, &a[..PROMPT + 2], 0, &again, 1024).await;
        let recomputed = prefill(&mut model, &a[PROMPT + 2..], PROMPT + 2, &again, 1).await;
        assert_same("decode after preemption and recompute vs without", &recomputed, &uninterrupted);
    });
}
