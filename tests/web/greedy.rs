//! The fixtures' greedy checks on a WebGPU reached through JavaScript: headless Chromium's
//! (tests/web) and Dawn's in Node (tests/dawn). The fixtures are embedded in the test binary.

use serde::Deserialize;
use std::rc::Rc;
use tokenmeter::engine::{generate_greedy, Engine, EngineOptions, ForwardPass};
use tokenmeter::gpu::Gpu;
use tokenmeter::model::checkpoint::Checkpoint;
use tokenmeter::model::MemStore;

/// A fixture's `reference.json`: transformers' greedy tokens for each prompt.
#[derive(Deserialize)]
pub struct Case {
    pub prompt_ids: Vec<u32>,
    pub max_new_tokens: usize,
    pub tokens: Vec<u32>,
}

#[derive(Deserialize)]
pub struct Reference {
    pub cases: Vec<Case>,
}

/// A fixture's files in memory, and its `reference.json`.
macro_rules! fixture {
    ($name:literal, [$($file:literal),*]) => {
        (
            tokenmeter::model::MemStore::new($name)
                $(.with($file, include_bytes!(concat!("../fixtures/", $name, "/", $file)).to_vec()))*,
            include_str!(concat!("../fixtures/", $name, "/reference.json")),
        )
    };
}

/// The three transformers fixtures (GQA with tied embeddings, sharded and untied, plain
/// multi-head attention).
pub fn transformers_fixtures() -> Vec<(MemStore, &'static str)> {
    vec![
        fixture!("tiny-gqa-tied", ["config.json", "model.safetensors"]),
        fixture!(
            "tiny-untied",
            [
                "config.json",
                "model.safetensors.index.json",
                "model-00001-of-00003.safetensors",
                "model-00002-of-00003.safetensors",
                "model-00003-of-00003.safetensors"
            ]
        ),
        fixture!("tiny-mha", ["config.json", "model.safetensors"]),
    ]
}

/// The fixture's greedy tokens from an engine loaded with `options` equal transformers'. The kernel
/// options the engine took are returned (the family a switch asked for is checked here).
pub async fn check_with(
    store: MemStore,
    reference: &str,
    gpu: Rc<Gpu>,
    options: &EngineOptions,
) -> tokenmeter::gpu::kernels::KernelOptions {
    let reference: Reference = serde_json::from_str(reference).unwrap();
    let checkpoint = Checkpoint::open(&store).await.unwrap();
    let model = ForwardPass::load(gpu, &checkpoint, options, &mut |_, _| {}).await.unwrap();
    let taken = model.kernel_options();
    if let Some(family) = options.kernels.family {
        assert_eq!(taken.family, family, "the family the switch asked for");
    }
    let mut engine = Engine::new(model);
    for case in &reference.cases {
        let g = generate_greedy(&mut engine, &case.prompt_ids, case.max_new_tokens, &[], &mut |_, _| {}).await.unwrap();
        assert_eq!(g.tokens, case.tokens, "{} with a prompt of {} tokens", store.label, case.prompt_ids.len());
    }
    taken
}
