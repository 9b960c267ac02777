//! In headless Chromium with WebGPU (SwiftShader): the same loader and engine as natively, on
//! the transformers fixtures embedded in the test binary, checked token for token.
#![cfg(target_arch = "wasm32")]

use serde::Deserialize;
use std::rc::Rc;
use tokenmeter::engine::{generate_greedy, Engine, Model, ModelOptions};
use tokenmeter::gpu::Gpu;
use tokenmeter::model::checkpoint::Checkpoint;
use tokenmeter::model::MemStore;
use wasm_bindgen_test::*;

wasm_bindgen_test_configure!(run_in_browser);

#[derive(Deserialize)]
struct Case {
    prompt_ids: Vec<u32>,
    max_new_tokens: usize,
    tokens: Vec<u32>,
}

#[derive(Deserialize)]
struct Reference {
    cases: Vec<Case>,
}

macro_rules! fixture {
    ($name:literal, [$($file:literal),*]) => {
        (
            MemStore::new($name)
                $(.with($file, include_bytes!(concat!("fixtures/", $name, "/", $file)).to_vec()))*,
            include_str!(concat!("fixtures/", $name, "/reference.json")),
        )
    };
}

async fn check(store: MemStore, reference: &str, gpu: Rc<Gpu>) {
    let reference: Reference = serde_json::from_str(reference).unwrap();
    let checkpoint = Checkpoint::open(&store).await.unwrap();
    let model = Model::load(gpu, &checkpoint, &ModelOptions::default(), &mut |_, _| {}).await.unwrap();
    let mut engine = Engine::new(model);
    for case in &reference.cases {
        let g = generate_greedy(&mut engine, &case.prompt_ids, case.max_new_tokens, &[], &mut |_, _| {}).await.unwrap();
        assert_eq!(g.tokens, case.tokens, "{} with a prompt of {} tokens", store.label, case.prompt_ids.len());
    }
}

#[wasm_bindgen_test]
async fn greedy_tokens_equal_transformers_in_the_browser() {
    let gpu = Rc::new(Gpu::new().await.expect("WebGPU adapter"));
    let (store, reference) = fixture!("tiny-gqa-tied", ["config.json", "model.safetensors"]);
    check(store, reference, gpu.clone()).await;
    let (store, reference) = fixture!(
        "tiny-untied",
        [
            "config.json",
            "model.safetensors.index.json",
            "model-00001-of-00003.safetensors",
            "model-00002-of-00003.safetensors",
            "model-00003-of-00003.safetensors"
        ]
    );
    check(store, reference, gpu.clone()).await;
    let (store, reference) = fixture!("tiny-mha", ["config.json", "model.safetensors"]);
    check(store, reference, gpu).await;
}

#[wasm_bindgen_test]
async fn bad_input_is_an_error_in_the_browser_too() {
    let (store, _) = fixture!("tiny-mha", ["config.json"]);
    let err = Checkpoint::open(&store).await.err().expect("no weights must fail").to_string();
    assert!(err.contains("no model.safetensors"), "{err}");
    let truncated = include_bytes!("fixtures/tiny-mha/model.safetensors")[..4000].to_vec();
    let (store, _) = fixture!("tiny-mha", ["config.json"]);
    let err = Checkpoint::open(&store.with("model.safetensors", truncated)).await.err().expect("truncated").to_string();
    assert!(err.contains("outside"), "{err}");
}
