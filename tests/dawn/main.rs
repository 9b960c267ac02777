//! The page's engine on Dawn, Chrome's WebGPU, in Node (the `webgpu` npm package: dawn.node) over
//! Mesa 25's lavapipe: the wasm build through wgpu's browser backend, its WGSL compiled by Tint
//! under Dawn's validation and limits. Chromium's SwiftShader (tests/web) offers neither
//! `subgroups` nor `shader-f16`, so this is where the wasm build's subgroup kernels run in the
//! tests. `scripts/dawn/navigator.mjs` puts dawn.node's GPU at `navigator.gpu` before the tests
//! start; scripts/test runs this binary with it (`NODE_ARGS=--import=…`) and the adapter's
//! environment (`dawn_env` in `.tokenmeter-env`).
#![cfg(target_arch = "wasm32")]

use std::rc::Rc;
use tokenmeter::engine::EngineOptions;
use tokenmeter::gpu::kernels::{KernelFamily, KernelSwitches};
use tokenmeter::gpu::Gpu;
use wasm_bindgen_test::*;

#[path = "../common/checks.rs"]
mod checks;
#[path = "../common/data.rs"]
mod data;
#[path = "../common/generated.rs"]
mod generated;
/// The GPU kernel family against the CPU reference at Qwen3's real widths.
mod kernels;
#[path = "../web/greedy.rs"]
#[macro_use]
mod greedy;
use greedy::{check_with, transformers_fixtures};
use tokenmeter::engine::{generate_greedy, Engine, ForwardPass};
use tokenmeter::model::checkpoint::Checkpoint;

async fn dawn() -> Rc<Gpu> {
    let gpu = Gpu::new().await.expect("Dawn's adapter (is navigator.gpu set? see scripts/dawn/navigator.mjs)");
    console_log!(
        "adapter {:?} ({}): offered {:?}; enabled {:?}; subgroups usable: {}",
        gpu.adapter.name,
        gpu.adapter.device_type,
        gpu.adapter.features,
        gpu.adapter.enabled_features,
        gpu.subgroups
    );
    Rc::new(gpu)
}

fn switches(family: KernelFamily, subgroups: bool) -> EngineOptions {
    let kernels = KernelSwitches { family: Some(family), subgroups: Some(subgroups), ..KernelSwitches::NONE };
    EngineOptions { kernels, ..EngineOptions::default() }
}

/// Dawn over lavapipe 25 offers `subgroups` and `shader-f16`; the page asks for both and the
/// subgroup probe compiles under Tint. (wgpu 30.0.2's browser backend never reported
/// `subgroups`, gfx-rs/wgpu#10146: without the entry vendor/wgpu adds, this fails.)
#[wasm_bindgen_test]
async fn dawn_grants_subgroups_and_f16_to_the_page() {
    let gpu = dawn().await;
    assert!(gpu.adapter.name.contains("llvmpipe"), "the adapter scripts/test sets up: {:?}", gpu.adapter.name);
    for feature in ["SUBGROUP", "SHADER_F16"] {
        assert!(gpu.adapter.features.iter().any(|f| f == feature), "{feature} offered: {:?}", gpu.adapter.features);
        assert!(
            gpu.adapter.enabled_features.iter().any(|f| f == feature),
            "{feature} enabled: {:?}",
            gpu.adapter.enabled_features
        );
    }
    assert!(gpu.subgroups, "a subgroup reduction compiles under Tint");
}

/// Every transformers fixture, token for token, with each kernel family and the subgroup
/// kernels on and off.
#[wasm_bindgen_test]
async fn greedy_tokens_equal_transformers_on_dawn_in_both_families_with_and_without_subgroups() {
    let gpu = dawn().await;
    for family in [KernelFamily::Gpu, KernelFamily::Software] {
        for subgroups in [true, false] {
            for (store, reference) in transformers_fixtures() {
                let label = store.label.clone();
                let t0 = js_sys::Date::now();
                let taken = check_with(store, reference, gpu.clone(), &switches(family, subgroups)).await;
                assert_eq!(taken.subgroups, subgroups, "{label}: the subgroup kernels as asked");
                console_log!(
                    "{label}: {} family, subgroups {}: {:.1} s",
                    family.name(),
                    if subgroups { "on" } else { "off" },
                    (js_sys::Date::now() - t0) / 1e3
                );
            }
        }
    }
}

/// The engine's check of itself (`engine::verify`: the page's *Check this GPU*, `tokenmeter
/// verify`) passes on Dawn in both kernel families with the subgroup kernels, on the head_dim-128
/// fixture: every matmul of its widths against the CPU, and its logits against the CPU oracle.
#[wasm_bindgen_test]
async fn the_engine_verifies_itself_on_dawn_in_both_families() {
    use generated::*;
    use tokenmeter::engine::verify;
    let gpu = dawn().await;
    let reference: RealReference =
        serde_json::from_str(include_str!("../fixtures/real-gqa16-h128/reference.json")).unwrap();
    let store = real_store("real-gqa16-h128", include_str!("../fixtures/real-gqa16-h128/config.json"), &reference);
    let checkpoint = Checkpoint::open(&store).await.unwrap();
    for family in [KernelFamily::Gpu, KernelFamily::Software] {
        let options = EngineOptions { max_seqs: verify::PROMPT, ..switches(family, true) };
        let mut pass = ForwardPass::load(gpu.clone(), &checkpoint, &options, &mut |_, _| {}).await.unwrap();
        let outcome = verify::run(&mut pass, &checkpoint, family.name().to_string()).await.unwrap();
        console_log!("verify on Dawn, {} family: {}", family.name(), outcome.line());
        assert!(outcome.passed() && outcome.oracle_skipped.is_none(), "{}: {:?}", outcome.line(), outcome.checks);
    }
}

/// The head_dim-128 fixture (prompts up to 1,531 tokens) against the float64 reference, with the
/// family the page picks on this adapter and the subgroup kernels on.
#[wasm_bindgen_test]
async fn greedy_tokens_equal_the_float64_reference_at_head_dim_128_on_dawn() {
    let gpu = dawn().await;
    check_head_dim_128(gpu, &EngineOptions::default()).await;
}

/// The generated fixture at the published attention widths (head_dim 128, 16 / 8 heads; weights
/// made in memory, see tests/common/generated.rs) against the float64 reference: every prompt
/// (1 to 1,531 tokens) prefilled in one chunk, then those up to 253 tokens at once through the
/// batcher (longer prompts batched are left to the native test). It ran in headless Chromium until
/// it moved here: ~2 minutes on SwiftShader, ~35 s on Dawn over lavapipe, with the subgroup kernels.
async fn check_head_dim_128(gpu: Rc<Gpu>, options: &EngineOptions) {
    use generated::*;
    let name = "real-gqa16-h128";
    let reference: RealReference =
        serde_json::from_str(include_str!("../fixtures/real-gqa16-h128/reference.json")).unwrap();
    let store = real_store(name, include_str!("../fixtures/real-gqa16-h128/config.json"), &reference);
    let checkpoint = Checkpoint::open(&store).await.unwrap();
    let one_chunk = EngineOptions { max_batched_tokens: 2048, ..options.clone() };
    let model = ForwardPass::load(gpu.clone(), &checkpoint, &one_chunk, &mut |_, _| {}).await.unwrap();
    let mut engine = Engine::new(model);
    for case in &reference.cases {
        let t0 = js_sys::Date::now();
        let g = generate_greedy(&mut engine, &case.prompt_ids, case.max_new_tokens, &[], &mut |_, _| {}).await.unwrap();
        let want = case.decided_tokens();
        assert_eq!(&g.tokens[..want.len()], want, "{name}, one chunk, prompt of {} tokens", case.prompt_ids.len());
        web_sys::console::log_1(
            &format!("{name}: prompt of {} tokens in {:.1} s", case.prompt_ids.len(), (js_sys::Date::now() - t0) / 1e3)
                .into(),
        );
    }
    let model = ForwardPass::load(gpu, &checkpoint, options, &mut |_, _| {}).await.unwrap();
    let mut engine = Engine::new(model);
    let batched: Vec<_> = reference.cases.iter().filter(|c| c.prompt_ids.len() <= 253).collect();
    let requests = batched
        .iter()
        .map(|c| tokenmeter::engine::Request {
            prompt: c.prompt_ids.clone(),
            max_new_tokens: c.max_new_tokens,
            sampling: Default::default(),
            stop_ids: vec![],
            ignore_eos: true,
        })
        .collect();
    let outputs = tokenmeter::engine::generate(&mut engine, requests, &mut |_| {}).await.unwrap();
    for (case, got) in batched.iter().zip(&outputs) {
        let want = case.decided_tokens();
        assert_eq!(&got.tokens[..want.len()], want, "{name}, batched, prompt of {} tokens", case.prompt_ids.len());
    }
}
