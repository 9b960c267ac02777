//! The engine checks itself on the adapter it runs on (`tokenmeter verify`, and `bench` before it
//! measures): a benchmark of an engine that computes wrongly there is a number about nothing.
//!
//! Two parts. **Kernels**: every matmul of the model's widths (q|k|v, o, gate|up, down at decode,
//! a small batch and a prefill chunk; lm_head at decode) on random inputs, through the engine's own
//! dispatch choice with the loaded model's kernel options (family, tile, subgroups, weight format
//! and storage), against the CPU on the same weights dequantised — each output within the f32
//! error bound of its dot product, so a mismatch names the matmul, its shape and the path. **The
//! model**: where the CPU oracle ([`CpuModel`], on the same dequantised weights) can run it, the
//! loaded model's logits at every position of a prefill and of decode steps through the KV cache
//! (fed the oracle's own greedy tokens, so both see one context) against the oracle's — what
//! exercises the rest: embedding, norms, q/k norm + RoPE, paged attention (its split and prefill
//! tiles), SwiGLU, the fused forms, the residual stream.
//!
//! The reference dequantises the bytes the GPU was given: a kernel that reads them wrongly fails
//! here; a host quantiser that writes them wrongly passes (both sides see its bytes) and is what
//! the quality pass against bf16 is for.

use super::forward::{Batch, ForwardPass};
use crate::clock::now_s;
use crate::error::{Error, Result};
use crate::gpu::kernels::{KernelOptions, Kernels, StepRecorder};
use crate::gpu::{Gpu, Kernel};
use crate::model::checkpoint::TensorProvider;
use crate::model::config::Qwen3Config;
use crate::model::quant::dequantise;
use crate::model::reference::{argmax, matmul_f32, CpuModel};
use crate::model::safetensors::f32_to_bf16;
use crate::model::weights::Matrix;
use serde::{Deserialize, Serialize};

/// Tokens of the matmul checks: decode, a small batch, and a prefill chunk past 64 (the tall
/// tiles, and the GPU family's tiles beyond its GEMV).
const MATMUL_TOKENS: [usize; 3] = [1, 5, 70];
/// The oracle runs models up to this many weights a token (f32 on one CPU core: seconds).
pub const ORACLE_MAX_PARAMS: usize = 120_000_000;
/// Prompt tokens and decode steps of the model check.
pub const PROMPT: usize = 12;
const DECODE_STEPS: usize = 4;
/// Largest |gpu − oracle| / (1 + |oracle|) a logit may be off: f32 sums in other orders through
/// every layer (the model tests' bound, measured at 3e-5 to 5e-5 per matmul chain).
pub const LOGIT_TOLERANCE: f32 = 2e-3;
/// Attention outputs are convex combinations of V rows (|v| ≤ 1): the kernel tests' bound.
const ATTENTION_TOL: f32 = 2e-5;

/// One check: what ran, and how far its worst output was from the reference.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Check {
    /// "matmul down_proj 70×1024×3072" or "model prefill (12 positions)".
    pub what: String,
    pub passed: bool,
    /// The worst output: where, got, wanted, and the bound it was held to.
    pub worst: String,
}

/// What `verify` found on this adapter.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verification {
    /// The kernel path checked (`KernelPath::describe`'s line).
    pub kernel_path: String,
    pub checks: Vec<Check>,
    /// Why the model check did not run (a model too large for the oracle), where it did not.
    pub oracle_skipped: Option<String>,
    pub seconds: f64,
}

impl Verification {
    pub fn passed(&self) -> bool {
        self.checks.iter().all(|c| c.passed)
    }

    /// The run-stopping error, naming every failed check.
    pub fn failure(&self) -> Option<Error> {
        let failed: Vec<String> =
            self.checks.iter().filter(|c| !c.passed).map(|c| format!("{}: {}", c.what, c.worst)).collect();
        (!failed.is_empty()).then(|| {
            Error::Gpu(format!(
                "the engine computes wrongly on this adapter ({}): {}",
                self.kernel_path,
                failed.join("; ")
            ))
        })
    }

    /// One line for a report: "verified: 14 checks passed in 2.1 s" or the failures.
    pub fn line(&self) -> String {
        let oracle = match &self.oracle_skipped {
            Some(why) => format!(" (no model check: {why})"),
            None => String::new(),
        };
        match self.failure() {
            None => format!("verified: {} checks passed in {:.1} s{oracle}", self.checks.len(), self.seconds),
            Some(e) => e.to_string(),
        }
    }
}

/// Deterministic values in [-1, 1) for check inputs (a small LCG: no dependency on `rand`'s
/// stream, so a check's inputs are the same in every build).
fn values(seed: u64, n: usize) -> Vec<f32> {
    let mut s = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// The model's matmuls at its widths, with `options` (the loaded model's), against the CPU.
pub async fn matmuls(gpu: &Gpu, options: KernelOptions, cfg: &Qwen3Config) -> Result<Vec<Check>> {
    let (h, q, kv, i) = (cfg.hidden_size, cfg.q_dim(), cfg.kv_dim(), cfg.intermediate_size);
    let shapes: [(&str, usize, usize, &[usize]); 5] = [
        ("q|k|v", q + 2 * kv, h, &MATMUL_TOKENS),
        ("o_proj", h, q, &MATMUL_TOKENS),
        ("gate|up", 2 * i, h, &MATMUL_TOKENS),
        ("down_proj", h, i, &MATMUL_TOKENS),
        ("lm_head", cfg.vocab_size, h, &MATMUL_TOKENS[..1]),
    ];
    let kernels = Kernels::with_options(gpu, options);
    let mut checks = Vec::new();
    for (seed, (name, n, k, tokens)) in shapes.into_iter().enumerate() {
        let bits: Vec<u16> = values(seed as u64 * 2 + 1, n * k).into_iter().map(f32_to_bf16).collect();
        let w_values = dequantise(&bits, k, options.format);
        let w = Matrix::with_format(gpu, name, n, k, usize::MAX, options.weights, options.format)?;
        w.write_rows(gpu, 0, &bits);
        for &m in tokens {
            let x = values(seed as u64 * 2 + 2, m * k);
            let xb = gpu.storage_with("verify x", bytemuck::cast_slice(&x));
            let yb = gpu.storage_buffer("verify y", (m * n * 4) as u64);
            let binds: Vec<_> =
                w.chunks.iter().map(|c| kernels.bind(&gpu.device, Kernel::Matmul, name, &[&xb, c, &yb])).collect();
            let mut rec = StepRecorder::new(&kernels, gpu.limits.max_compute_workgroups_per_dimension);
            crate::engine::Linear::record_matmul(&w, &mut rec, &binds, m, false);
            let mut enc = gpu.device.create_command_encoder(&Default::default());
            rec.encode(&gpu.queue, &mut enc);
            gpu.queue.submit([enc.finish()]);
            let got = crate::gpu::readback::read_f32(&gpu.device, &gpu.queue, &yb, m * n).await?;
            gpu.check()?;
            let want = matmul_f32(&x, m, k, &w_values, n);
            let worst = crate::engine::check::matmul(&got, &want, &x, &w_values, m, n, k);
            checks.push(Check {
                what: format!("matmul {name} {m}×{n}×{k}"),
                passed: worst.passed(),
                worst: worst.to_string(),
            });
        }
    }
    Ok(checks)
}

/// The model's per-head kernels at its widths (its heads, KV heads, head_dim, RoPE theta and norm
/// epsilon), with `options` (the loaded model's), against the CPU ([`crate::engine::check`]):
/// the q/k norm + RoPE + KV write at positions 0 to 40,000 (or the model's last), and paged
/// attention for a step as the engine records it — a decode at a context past
/// [`crate::gpu::kernels::SPLIT_MIN_CONTEXT`] (split and merged) beside another sequence's
/// 70-token prefill chunk (the tiled prefill kernel where the options take it).
pub async fn heads(gpu: &Gpu, options: KernelOptions, cfg: &Qwen3Config) -> Result<Vec<Check>> {
    use crate::engine::check::{self, HeadSetup};
    use crate::gpu::kernels::{attention_plan, record_attention_plan, record_qk_norm_rope};
    let kernels = Kernels::with_options(gpu, options);
    let (n_heads, n_kv, hd) = (cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim);
    let width = (n_heads + 2 * n_kv) * hd;
    let floats = |b: &[f32]| -> Vec<u8> { bytemuck::cast_slice(b).to_vec() };
    let run = |rec: StepRecorder| {
        let mut enc = gpu.device.create_command_encoder(&Default::default());
        rec.encode(&gpu.queue, &mut enc);
        gpu.queue.submit([enc.finish()]);
    };
    let mut checks = Vec::new();

    // q/k norm + RoPE + KV write: sequence 0 at positions 0, 1 and 7 (physical block 3), sequence
    // 1 at the far position (its block in physical block 5).
    let far = 40_000.min(cfg.max_position_embeddings.saturating_sub(1)).max(8);
    let block_size = 16;
    let max_blocks = far / block_size + 1;
    let mut tables = vec![0u32; 2 * max_blocks];
    (tables[0], tables[max_blocks + far / block_size]) = (3, 5);
    let tokens = vec![[0, 0, 0, 0], [0, 7, 0, 0], [0, far as u32, 1, 0], [0, 1, 0, 0]];
    let s = HeadSetup { n_heads, n_kv, hd, block_size, max_blocks, tokens, tables };
    let qkv = values(101, s.tokens.len() * width);
    let norms: Vec<f32> = values(102, 2 * hd).iter().map(|v| 1.0 + 0.5 * v).collect();
    let freqs = crate::model::config::inv_freq(hd, cfg.rope_theta);
    let eps = cfg.rms_norm_eps as f32;
    let cache_len = 8 * block_size * n_kv * hd;
    let qkvb = gpu.storage_with("verify qkv", &floats(&qkv));
    let tb = gpu.storage_with("verify tokens", bytemuck::cast_slice(&s.tokens));
    let btb = gpu.storage_with("verify tables", bytemuck::cast_slice(&s.tables));
    let (nb, fb) =
        (gpu.storage_with("verify norms", &floats(&norms)), gpu.storage_with("verify freqs", &floats(&freqs)));
    let kb = gpu.storage_buffer("verify k", (cache_len * 4) as u64);
    let vb = gpu.storage_buffer("verify v", (cache_len * 4) as u64);
    let bind = kernels.bind(&gpu.device, Kernel::QkNormRope, "rope", &[&qkvb, &tb, &btb, &nb, &fb, &kb, &vb]);
    let mut rec = StepRecorder::new(&kernels, gpu.limits.max_compute_workgroups_per_dimension);
    record_qk_norm_rope(&mut rec, &bind, &s.params(eps));
    run(rec);
    let read = crate::gpu::readback::read_f32;
    let got = read(&gpu.device, &gpu.queue, &qkvb, qkv.len()).await?;
    let k = read(&gpu.device, &gpu.queue, &kb, cache_len).await?;
    let v = read(&gpu.device, &gpu.queue, &vb, cache_len).await?;
    gpu.check()?;
    let w = check::qk_norm_rope(&s, &qkv, &norms, &freqs, eps, &got, &k, &v);
    checks.push(Check {
        what: format!("q/k norm + RoPE {n_heads}+{n_kv} heads of {hd}, positions 0–{far}"),
        passed: w.passed(),
        worst: w.to_string(),
    });

    // Attention: sequence 0 decodes at position 299; sequence 1 prefills positions 200..270.
    let (decode_at, chunk) = (299u32, 200u32..270);
    let max_blocks = (decode_at as usize + 1).div_ceil(block_size);
    let tables: Vec<u32> = (0..2 * max_blocks as u32).collect();
    let tokens: Vec<[u32; 4]> = std::iter::once([0, decode_at, 0, 0]).chain(chunk.map(|p| [0, p, 1, 0])).collect();
    let s = HeadSetup { n_heads, n_kv, hd, block_size, max_blocks, tokens, tables };
    let cache_len = 2 * max_blocks * block_size * n_kv * hd;
    let qkv = values(103, s.tokens.len() * width);
    let (k, v) = (values(104, cache_len), values(105, cache_len));
    let qkvb = gpu.storage_with("verify qkv", &floats(&qkv));
    let tb = gpu.storage_with("verify tokens", bytemuck::cast_slice(&s.tokens));
    let btb = gpu.storage_with("verify tables", bytemuck::cast_slice(&s.tables));
    let (kb, vb) = (gpu.storage_with("verify k", &floats(&k)), gpu.storage_with("verify v", &floats(&v)));
    let out_len = s.tokens.len() * n_heads * hd;
    let out = gpu.storage_buffer("verify attention", (out_len * 4) as u64);
    let partials_floats = super::forward::partials_floats(cfg);
    let partials = gpu.storage_buffer("verify partials", (partials_floats * 4) as u64);
    let whole = kernels.bind(&gpu.device, Kernel::Attention, "whole", &[&qkvb, &tb, &btb, &kb, &vb, &out]);
    let parts = kernels.bind(&gpu.device, Kernel::AttentionSplit, "parts", &[&qkvb, &tb, &btb, &kb, &vb, &partials]);
    let merge = kernels.bind(&gpu.device, Kernel::AttentionMerge, "merge", &[&partials, &out]);
    let plan = attention_plan(&options, n_heads, hd, &s.tokens);
    let mut rec = StepRecorder::new(&kernels, gpu.limits.max_compute_workgroups_per_dimension);
    record_attention_plan(
        &mut rec,
        &whole,
        (&parts, &merge),
        &s.params(1.0 / (hd as f32).sqrt()),
        &plan,
        partials_floats,
        false,
    );
    run(rec);
    let got = read(&gpu.device, &gpu.queue, &out, out_len).await?;
    gpu.check()?;
    let w = check::attention(&s, &qkv, &k, &v, &got, ATTENTION_TOL);
    // How the engine recorded each range: "decode 16 parts", "70-token chunk tiled".
    let how: Vec<String> = plan
        .iter()
        .map(|r| match (r.tokens.len(), r.tiled) {
            (1, _) => format!("decode {} parts", r.splits),
            (n, true) => format!("{n}-token chunk tiled"),
            (n, false) => format!("{n}-token chunk {} parts", r.splits),
        })
        .collect();
    checks.push(Check {
        what: format!("attention {n_heads}/{n_kv} heads of {hd}, context {}: {}", decode_at + 1, how.join(", ")),
        passed: w.passed(),
        worst: w.to_string(),
    });
    Ok(checks)
}

/// The loaded model against the oracle: the logits at every prompt position (a prefill), then
/// [`DECODE_STEPS`] decode steps through the KV cache, each fed the oracle's greedy token.
pub async fn model(pass: &mut ForwardPass, oracle: &CpuModel) -> Result<Vec<Check>> {
    let vocab = pass.cfg.vocab_size;
    let mut ids: Vec<u32> = (0..PROMPT as u32).map(|p| (p.wrapping_mul(2_654_435_761) >> 7) % vocab as u32).collect();
    let block_size = pass.kv.block_size;
    let table = vec![(0..(PROMPT + DECODE_STEPS).div_ceil(block_size) as u32).collect::<Vec<u32>>()];
    let prefill = Batch {
        tokens: ids.iter().enumerate().map(|(p, &id)| [id, p as u32, 0, 0]).collect(),
        // The last positions, as many as a step may return (every one where the engine allows).
        logit_rows: (PROMPT.saturating_sub(pass.limits.max_logit_rows) as u32..PROMPT as u32).collect(),
        block_tables: table.clone(),
        ..Default::default()
    };
    let first = prefill.logit_rows[0] as usize;
    let mut got = pass.step_logits(&prefill).await?;
    let prefill_rows = got.len() / vocab;
    // The oracle's greedy continuation, teacher-forced into the engine's decode steps.
    let mut want = oracle.forward(&ids);
    for _ in 0..DECODE_STEPS {
        let last = &want[(ids.len() - 1) * vocab..][..vocab];
        ids.push(argmax(last));
        want = oracle.forward(&ids);
        let pos = ids.len() - 1;
        let step = Batch {
            tokens: vec![[ids[pos], pos as u32, 0, 0]],
            logit_rows: vec![0],
            block_tables: table.clone(),
            ..Default::default()
        };
        got.extend(pass.step_logits(&step).await?);
    }
    let want = &want[first * vocab..];
    let check = |what: String, rows: std::ops::Range<usize>| {
        let (at, err) = rows
            .flat_map(|r| (0..vocab).map(move |v| r * vocab + v))
            .map(|i| (i, (got[i] - want[i]).abs() / (1.0 + want[i].abs())))
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .unwrap_or((0, 0.0));
        Check {
            what,
            passed: err <= LOGIT_TOLERANCE,
            worst: format!(
                "position {}, token {}: logit {} vs {} (relative error {:.1e}, bound {:.0e})",
                first + at / vocab,
                at % vocab,
                got[at],
                want[at],
                err,
                LOGIT_TOLERANCE
            ),
        }
    };
    Ok(vec![
        check(format!("model prefill ({prefill_rows} positions)"), 0..prefill_rows),
        check(format!("model decode ({DECODE_STEPS} steps through the KV cache)"), prefill_rows..got.len() / vocab),
    ])
}

/// Both parts on the loaded model (`src` its weights, for the oracle), timed; `kernel_path` names
/// the path in the outcome. The model check runs where the oracle can ([`ORACLE_MAX_PARAMS`]).
pub async fn run<P: TensorProvider>(pass: &mut ForwardPass, src: &P, kernel_path: String) -> Result<Verification> {
    let start = now_s();
    let options = pass.kernel_options();
    let mut checks = matmuls(&pass.gpu, options, &pass.cfg).await?;
    checks.extend(heads(&pass.gpu, options, &pass.cfg).await?);
    let params = pass.cfg.params_per_token();
    let oracle_skipped = if params <= ORACLE_MAX_PARAMS as u64 {
        let oracle = CpuModel::load_as(src, options.format).await?;
        checks.extend(model(pass, &oracle).await?);
        None
    } else {
        Some(format!(
            "{:.0}M weights a token; the CPU oracle runs up to {:.0}M",
            params as f64 / 1e6,
            ORACLE_MAX_PARAMS as f64 / 1e6
        ))
    };
    Ok(Verification { kernel_path, checks, oracle_skipped, seconds: now_s() - start })
}

/// [`run`] before a run measures the engine: a failure stops it with its message (a benchmark
/// of an engine that computes wrongly here is a number about nothing); a pass is kept on the
/// pass for the run's record. Returns the one line a report shows.
pub async fn before_run<P: TensorProvider>(pass: &mut ForwardPass, src: &P, kernel_path: String) -> Result<String> {
    let outcome = run(pass, src, kernel_path).await?;
    if let Some(e) = outcome.failure() {
        return Err(e);
    }
    let line = outcome.line();
    pass.verified = Some(outcome);
    Ok(line)
}
