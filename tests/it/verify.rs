//! `engine::verify`, the engine's check of itself on its adapter: it passes where the engine is
//! right (every weight format, a tiny fixture and Qwen3-0.6B's widths) and names the kernel where a
//! planted shader bug makes it wrong.

use crate::common;

use common::*;
use tokenmeter::engine::verify;
use tokenmeter::engine::{EngineOptions, ForwardPass};
use tokenmeter::gpu::kernels::{KernelFamily, KernelOptions, KernelSwitches};
use tokenmeter::gpu::WeightFormat;
use tokenmeter::model::checkpoint::Checkpoint;
use tokenmeter::model::source::DirStore;
use tokenmeter::model::Qwen3Config;

#[test]
fn the_engine_verifies_on_this_adapter_in_every_weight_format() {
    pollster::block_on(async {
        let store = DirStore::new(fixture_dir("tiny-gqa-tied")).unwrap();
        let ckpt = Checkpoint::open(&store).await.unwrap();
        for format in WeightFormat::ALL {
            let options = EngineOptions { weights: format, max_seqs: verify::PROMPT, ..EngineOptions::default() };
            let mut pass = ForwardPass::load(gpu(), &ckpt, &options, &mut |_, _| {}).await.unwrap();
            let outcome = verify::run(&mut pass, &ckpt, format!("{format}")).await.unwrap();
            assert!(outcome.passed(), "{format}: {}", outcome.line());
            assert!(outcome.oracle_skipped.is_none(), "the oracle runs the tiny fixture");
            let names: Vec<&str> = outcome.checks.iter().map(|c| c.what.as_str()).collect();
            for part in ["matmul q|k|v 1×", "matmul down_proj 70×", "matmul lm_head", "model prefill", "model decode"]
            {
                assert!(names.iter().any(|n| n.starts_with(part)), "{format}: no {part} check in {names:?}");
            }
        }
    });
}

/// An int8 row scale 1% off in the shader (a copy of shaders/ read through `shader_dir`) fails
/// the matmul checks at Qwen3-0.6B's widths, naming the matmul; the true shaders pass them.
#[test]
fn an_int8_scale_off_in_the_shader_fails_verify_naming_the_matmul() {
    pollster::block_on(async {
        // Qwen3-0.6B's widths but a 16,384-word vocabulary: lm_head's CPU reference at 151,936
        // words adds seconds and no path (the same kernel, more rows).
        let mut cfg = Qwen3Config::preset("qwen3-0.6b").unwrap();
        cfg.vocab_size = 16_384;
        let g = gpu();
        let options =
            KernelOptions { format: WeightFormat::Int8, ..KernelOptions::for_gpu(&g, &KernelSwitches::default()) };
        let good = verify::matmuls(&g, options, &cfg).await.unwrap();
        assert!(good.iter().all(|c| c.passed), "{good:?}");

        let dir = planted_shaders("int8", &["weights_int8.wgsl", "weights_int8_texture.wgsl"], |text| {
            text.replacen(
                "fn row_scale(row: u32, texels: u32) -> f32 {\n    return ",
                "fn row_scale(row: u32, texels: u32) -> f32 {\n    return 1.01 * ",
                1,
            )
        });
        let planted = KernelOptions { shader_dir: Some(dir), ..options };
        let bad = verify::matmuls(&g, planted, &cfg).await.unwrap();
        let failed: Vec<&str> = bad.iter().filter(|c| !c.passed).map(|c| c.what.as_str()).collect();
        assert!(!failed.is_empty() && failed.iter().all(|w| w.starts_with("matmul ")), "{bad:?}");
        assert_eq!(failed.len(), bad.len(), "every int8 matmul reads the row scale: {bad:?}");
    });
}

/// A RoPE frequency 1% off in one kernel path — the GPU family's q/k norm + RoPE (a copy of
/// shaders/ read through `shader_dir`) — fails verify's RoPE check for that path only, naming it, at
/// Qwen3-0.6B's head widths: the CPU family's path on the same shaders passes, and so does every
/// other check of the GPU family's. On a model the oracle runs, its logits fail too, and the run
/// stops naming the kernel.
#[test]
fn a_wrong_rope_frequency_in_one_path_fails_verify_for_that_path_only() {
    pollster::block_on(async {
        let dir = planted_shaders("rope", &["rope.wgsl"], |text| {
            let copy = text.split("fn rotate_pair(").nth(1).and_then(|rest| rest.split("\n}\n").next()).unwrap();
            let planted = format!("fn rotate_pair_planted({copy}\n}}\n").replacen(
                "h.pos, inv_freq[d])",
                "h.pos, inv_freq[d] * 1.01)",
                1,
            );
            // The GPU family's entry point (the second call) rotates through the planted copy.
            let at = text.rfind("rotate_pair(h, d, scale);").unwrap();
            format!("{}rotate_pair_planted(h, d, scale);{}\n{planted}", &text[..at], &text[at + 25..])
        });
        let cfg = Qwen3Config::preset("qwen3-0.6b").unwrap();
        let g = gpu();
        let switches = KernelSwitches { shader_dir: Some(dir), ..KernelSwitches::default() };
        for family in [KernelFamily::Software, KernelFamily::Gpu] {
            let options = KernelOptions { family, ..KernelOptions::for_gpu(&g, &switches) };
            let checks = verify::heads(&g, options, &cfg).await.unwrap();
            let failed: Vec<&str> = checks.iter().filter(|c| !c.passed).map(|c| c.what.as_str()).collect();
            eprintln!("{family:?}: {checks:#?}");
            match family {
                KernelFamily::Software => {
                    assert!(failed.is_empty(), "the CPU family's path is not planted: {checks:?}")
                }
                KernelFamily::Gpu => assert!(
                    failed.len() == 1 && failed[0].starts_with("q/k norm + RoPE 16+8 heads of 128"),
                    "only the planted RoPE fails: {checks:?}"
                ),
            }
        }

        let store = DirStore::new(fixture_dir("tiny-gqa-tied")).unwrap();
        let ckpt = Checkpoint::open(&store).await.unwrap();
        let kernels = KernelSwitches { family: Some(KernelFamily::Gpu), ..switches };
        let options = EngineOptions { max_seqs: verify::PROMPT, kernels, ..EngineOptions::default() };
        let mut pass = ForwardPass::load(gpu(), &ckpt, &options, &mut |_, _| {}).await.unwrap();
        let outcome = verify::run(&mut pass, &ckpt, "planted rope".into()).await.unwrap();
        let failed: Vec<&str> = outcome.checks.iter().filter(|c| !c.passed).map(|c| c.what.as_str()).collect();
        assert!(failed.iter().any(|w| w.starts_with("q/k norm + RoPE")), "{:?}", outcome.checks);
        assert!(failed.iter().all(|w| w.starts_with("q/k norm + RoPE") || w.starts_with("model ")), "{failed:?}");
        let error = outcome.failure().expect("a failed check stops a run").to_string();
        assert!(error.contains("computes wrongly on this adapter") && error.contains("q/k norm + RoPE"), "{error}");
    });
}

/// Paged attention with its softmax scale 1% off (every attention kernel) fails verify's attention
/// check at Qwen3-0.6B's head widths, naming it, and no other check.
#[test]
fn a_wrong_attention_scale_fails_the_attention_check() {
    pollster::block_on(async {
        let cfg = Qwen3Config::preset("qwen3-0.6b").unwrap();
        let g = gpu();
        let good = verify::heads(&g, KernelOptions::for_gpu(&g, &KernelSwitches::default()), &cfg).await.unwrap();
        assert!(good.iter().all(|c| c.passed) && good.len() == 2, "{good:?}");
        let dir =
            planted_shaders("attention", &["attention.wgsl"], |text| text.replace("* p.scale", "* (1.01 * p.scale)"));
        let switches = KernelSwitches { shader_dir: Some(dir), ..KernelSwitches::default() };
        let bad = verify::heads(&g, KernelOptions::for_gpu(&g, &switches), &cfg).await.unwrap();
        let failed: Vec<&str> = bad.iter().filter(|c| !c.passed).map(|c| c.what.as_str()).collect();
        assert!(failed.len() == 1 && failed[0].starts_with("attention 16/8 heads of 128"), "{bad:?}");
    });
}

/// A copy of shaders/ in a fresh folder with `files` passed through `plant` (each must change).
pub(crate) fn planted_shaders(name: &str, files: &[&str], plant: impl Fn(&str) -> String) -> &'static std::path::Path {
    let dir = std::env::temp_dir().join(format!("tokenmeter-planted-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let shaders = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("shaders");
    for entry in std::fs::read_dir(&shaders).unwrap() {
        let path = entry.unwrap().path();
        let file = path.file_name().unwrap().to_str().unwrap().to_string();
        let mut text = std::fs::read_to_string(&path).unwrap();
        if files.contains(&file.as_str()) {
            let planted = plant(&text);
            assert_ne!(planted, text, "{file}: the planted bug found its line");
            text = planted;
        }
        std::fs::write(dir.join(&file), text).unwrap();
    }
    Box::leak(dir.into_boxed_path())
}

/// `bench` on the engine verifies it first and records the outcome in its JSON (every check, the
/// kernel path); `--no-verify` measures without it and records none.
#[test]
fn bench_records_its_verification_and_no_verify_skips_it() {
    let dir = std::env::temp_dir().join(format!("tokenmeter-verify-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let fixture = fixture_dir("tiny-gqa-tied");
    for skip in [false, true] {
        let json = dir.join(format!("skip-{skip}.json"));
        let mut args = vec![
            "bench",
            "--model",
            fixture.to_str().unwrap(),
            "--rate",
            "inf",
            "--num-requests",
            "2",
            "--input-len",
            "8",
            "--output-len",
            "2",
            "--no-baseline",
            "--json",
            json.to_str().unwrap(),
        ];
        if skip {
            args.push("--no-verify");
        }
        let out = common::cli::run(&args);
        assert_eq!(out.code, 0, "{}", out.stderr);
        let result: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let verification = &result["run_config"]["verification"];
        match skip {
            false => {
                assert!(out.stderr.contains("verified: "), "{}", out.stderr);
                let checks = verification["checks"].as_array().expect("the checks are recorded");
                assert!(checks.len() >= 10 && checks.iter().all(|c| c["passed"] == true), "{verification}");
                assert!(verification["kernel_path"].as_str().is_some_and(|p| p.contains("kernels")), "{verification}");
            }
            true => assert!(verification.is_null() && !out.stderr.contains("verified: "), "{verification}"),
        }
    }
}
