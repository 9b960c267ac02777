//! The whole model on the GPU (lavapipe) against transformers' greedy tokens and the CPU reference.

use crate::common;

use common::*;
use tokenmeter::engine::{generate_greedy, Batch, Engine, EngineOptions, ForwardPass};
use tokenmeter::gpu::kernels::{KernelFamily, KernelSwitches};
use tokenmeter::gpu::WeightStorage;
use tokenmeter::model::checkpoint::Checkpoint;
use tokenmeter::model::reference::CpuModel;
use tokenmeter::model::source::DirStore;

/// Each check below runs twice: on the kernels the adapter picks, and on the GPU kernel family
/// forced with its weights in storage buffers (as on GPUs) — `--kernels gpu --weight-storage
/// buffer` — so both families meet transformers and the CPU reference on every adapter.
macro_rules! on_both_families {
    ($($case:ident;)*) => {
        mod adapters_choice {
            $(#[test]
            fn $case() {
                super::$case(tokenmeter::gpu::kernels::KernelSwitches::default());
            })*
        }
        mod gpu_family {
            $(#[test]
            fn $case() {
                super::$case(super::GPU_FAMILY);
            })*
        }
    };
}

const GPU_FAMILY: KernelSwitches =
    KernelSwitches { family: Some(KernelFamily::Gpu), storage: Some(WeightStorage::Buffer), ..KernelSwitches::NONE };

on_both_families! {
    greedy_tokens_equal_transformers_on_every_fixture;
    chunked_prefill_gives_the_same_tokens;
    logits_match_the_cpu_reference_and_transformers;
    prefill_then_decode_equals_one_prefill;
    sequences_in_one_step_do_not_interfere;
}

async fn load(name: &str, options: &EngineOptions) -> (ForwardPass, Checkpoint<tokenmeter::model::source::DiskFile>) {
    let store = DirStore::new(fixture_dir(name)).unwrap();
    let ckpt = Checkpoint::open(&store).await.unwrap();
    let model = ForwardPass::load(gpu(), &ckpt, options, &mut |_, _| {}).await.unwrap();
    // What ran is what the switches asked for.
    let ran = model.kernel_options();
    assert!(options.kernels.family.is_none_or(|f| f == ran.family), "{ran:?}");
    assert!(options.kernels.storage.is_none_or(|s| s == ran.weights), "{ran:?}");
    (model, ckpt)
}

fn greedy_tokens_equal_transformers_on_every_fixture(kernels: KernelSwitches) {
    pollster::block_on(async {
        for name in FIXTURES {
            let (model, _) = load(name, &EngineOptions { kernels, ..EngineOptions::default() }).await;
            let mut engine = Engine::new(model);
            for (i, case) in reference(name).cases.iter().enumerate() {
                let g = generate_greedy(&mut engine, &case.prompt_ids, case.max_new_tokens, &[], &mut |_, _| {})
                    .await
                    .unwrap();
                assert_eq!(g.tokens, case.tokens, "{name} case {i} (prompt of {} tokens)", case.prompt_ids.len());
                assert_eq!(g.token_times_s.len(), g.tokens.len());
            }
        }
    });
}

fn chunked_prefill_gives_the_same_tokens(kernels: KernelSwitches) {
    pollster::block_on(async {
        let options = EngineOptions { max_batched_tokens: 37, block_size: 4, kernels, ..EngineOptions::default() };
        let (model, _) = load("tiny-untied", &options).await;
        let mut engine = Engine::new(model);
        let case = reference("tiny-untied").cases.into_iter().find(|c| c.prompt_ids.len() >= 300).unwrap();
        let g = generate_greedy(&mut engine, &case.prompt_ids, case.max_new_tokens, &[], &mut |_, _| {}).await.unwrap();
        assert_eq!(g.tokens, case.tokens);
    });
}

fn logits_match_the_cpu_reference_and_transformers(kernels: KernelSwitches) {
    pollster::block_on(async {
        for name in FIXTURES {
            let (mut model, ckpt) = load(name, &EngineOptions { kernels, ..EngineOptions::default() }).await;
            let cpu = CpuModel::load(&ckpt).await.unwrap();
            let vocab = model.cfg.vocab_size;
            let case = &reference(name).cases[2];
            let prompt = &case.prompt_ids;
            let n = prompt.len();
            let blocks: Vec<u32> = (0..n.div_ceil(16) as u32).collect();
            let batch = Batch {
                tokens: prompt.iter().enumerate().map(|(p, &id)| [id, p as u32, 0, 0]).collect(),
                logit_rows: vec![0, (n / 2) as u32, (n - 1) as u32],
                block_tables: vec![blocks],
                ..Default::default()
            };
            let gpu_logits = model.step_logits(&batch).await.unwrap();
            let cpu_logits = cpu.forward(prompt);
            for (row, &pos) in batch.logit_rows.iter().enumerate() {
                let g = &gpu_logits[row * vocab..][..vocab];
                let c = &cpu_logits[pos as usize * vocab..][..vocab];
                let (err, at) = worst(g, c);
                assert!(
                    err < 2e-3,
                    "{name} position {pos}: GPU vs CPU relative error {err} at id {at}: {} vs {}",
                    g[at],
                    c[at]
                );
            }
            // transformers' top logits after the whole prompt.
            let last = &gpu_logits[2 * vocab..][..vocab];
            for &(id, logit) in &case.first_logits_top {
                let diff = (last[id as usize] - logit).abs();
                assert!(
                    diff < 2e-2 * (1.0 + logit.abs()),
                    "{name}: logit of {id} is {} vs transformers {logit}",
                    last[id as usize]
                );
            }
        }
    });
}

fn prefill_then_decode_equals_one_prefill(kernels: KernelSwitches) {
    pollster::block_on(async {
        let (mut model, _) =
            load("tiny-gqa-tied", &EngineOptions { block_size: 4, kernels, ..EngineOptions::default() }).await;
        let vocab = model.cfg.vocab_size;
        let prompt: Vec<u32> = (0..19).map(|i| (i * 37 + 11) % vocab as u32).collect();
        let table: Vec<u32> = vec![3, 1, 4, 0, 2]; // deliberately not in order
        let all = Batch {
            tokens: prompt.iter().enumerate().map(|(p, &id)| [id, p as u32, 0, 0]).collect(),
            logit_rows: vec![18],
            block_tables: vec![table.clone()],
            sampling: vec![],
        };
        let one_pass = model.step_logits(&all).await.unwrap();
        let head = Batch {
            tokens: all.tokens[..18].to_vec(),
            logit_rows: vec![],
            block_tables: vec![table.clone()],
            sampling: vec![],
        };
        model.step(&head).await.unwrap();
        let tail = Batch {
            tokens: vec![all.tokens[18]],
            logit_rows: vec![0],
            block_tables: vec![table],
            ..Default::default()
        };
        let two_steps = model.step_logits(&tail).await.unwrap();
        let (err, at) = worst(&two_steps, &one_pass);
        assert!(err < 1e-4, "prefill(N) vs prefill(N-1)+decode: {err} at {at}");
    });
}

fn sequences_in_one_step_do_not_interfere(kernels: KernelSwitches) {
    pollster::block_on(async {
        let (mut model, _) =
            load("tiny-mha", &EngineOptions { block_size: 4, kernels, ..EngineOptions::default() }).await;
        let a: Vec<u32> = vec![5, 9, 200, 17, 3, 3, 81];
        let b: Vec<u32> = vec![250, 1, 2];
        let alone_a = model
            .step_logits(&Batch {
                tokens: row(&a, 0),
                logit_rows: vec![6],
                block_tables: vec![vec![0, 1]],
                ..Default::default()
            })
            .await
            .unwrap();
        let alone_b = model
            .step_logits(&Batch {
                tokens: row(&b, 0),
                logit_rows: vec![2],
                block_tables: vec![vec![2]],
                ..Default::default()
            })
            .await
            .unwrap();
        let mut tokens = row(&b, 0);
        tokens.extend(row(&a, 1));
        let together = model
            .step_logits(&Batch {
                tokens,
                logit_rows: vec![9, 2],
                block_tables: vec![vec![5], vec![3, 4]],
                ..Default::default()
            })
            .await
            .unwrap();
        let v = model.cfg.vocab_size;
        assert!(worst(&together[..v], &alone_a).0 < 1e-5);
        assert!(worst(&together[v..], &alone_b).0 < 1e-5);
    });
}

fn row(ids: &[u32], seq: u32) -> Vec<[u32; 4]> {
    ids.iter().enumerate().map(|(p, &id)| [id, p as u32, seq, 0]).collect()
}

/// A synthetic model's weights are written by the GPU itself (`fill.wgsl`); the CPU reference reads
/// the host twin of the same generator, so agreeing logits check the fill and the upload path.
#[test]
fn gpu_generated_synthetic_weights_match_the_host_generator() {
    use tokenmeter::model::synthetic::SyntheticModel;
    let mut cfg = SyntheticModel::embedded_default().config;
    (cfg.vocab_size, cfg.num_hidden_layers) = (1000, 2);
    synthetic_case(cfg.clone());
    // Rows of 200 bf16 (400 bytes) cannot be copied buffer-to-texture (256-byte rows), so with
    // weights in textures the loader generates these on the host: both paths are covered.
    (cfg.hidden_size, cfg.intermediate_size) = (200, 264);
    synthetic_case(cfg);
}

fn synthetic_case(cfg: tokenmeter::model::Qwen3Config) {
    use tokenmeter::model::synthetic::SyntheticModel;
    pollster::block_on(async {
        let synthetic = SyntheticModel::new(cfg, 42);
        let mut model = ForwardPass::load(gpu(), &synthetic, &EngineOptions::default(), &mut |_, _| {}).await.unwrap();
        let cpu = CpuModel::load(&synthetic).await.unwrap();
        let prompt: Vec<u32> = (0..20).map(|i| (i * 37 + 5) % 1000).collect();
        let batch = Batch {
            tokens: prompt.iter().enumerate().map(|(p, &id)| [id, p as u32, 0, 0]).collect(),
            logit_rows: vec![19],
            block_tables: vec![vec![0, 1]],
            ..Default::default()
        };
        let gpu_logits = model.step_logits(&batch).await.unwrap();
        let cpu_logits = cpu.forward(&prompt);
        let (err, at) = worst(&gpu_logits, &cpu_logits[19 * 1000..]);
        assert!(err < 2e-3, "GPU vs CPU relative error {err} at id {at}");
        let spread = gpu_logits.iter().fold(0f32, |m, x| m.max(x.abs()));
        assert!(spread > 0.1, "logits of a random model are not all near zero (max |logit| {spread})");
    });
}
