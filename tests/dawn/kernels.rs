//! The GPU kernel family on Dawn (Chrome's WebGPU, over lavapipe: forced, as lavapipe is a CPU
//! adapter and would pick the CPU family; with the subgroup kernels Dawn grants), each kernel
//! against the CPU reference at Qwen3's real widths: the GEMV and the tiled matmul over lm_head's 151,936 rows in row chunks (as where a
//! binding cannot hold it all), the embedding gather over the same table, the workgroup q/k norm + RoPE at head_dim 128,
//! and the workgroup-per-part attention at head_dim 128 past 252 and 503 positions. The same checks
//! as tests/it/kernels.rs (tests/common/checks.rs), on the WebGPU implementation users run the page
//! on. (They ran in headless Chromium on SwiftShader until 2026-12-03: the matmul test alone took
//! 203 s there, the fused one 41 s; all three take 29 s here.)

use crate::{checks, data};

use bytemuck::Pod;
use checks::{assert_close, check_attention, check_qk_norm_rope, fused_binds, fused_case, HeadSetup, FUSED_EPS};
use data::random;
use tokenmeter::engine::Linear;
use tokenmeter::gpu::kernels::{
    attention_prefill_splits, attention_ranges, attention_splits_gpu, groups, record_attention, record_qk_norm_rope,
    Bind, EmbedParams, KernelFamily, KernelOptions, Prologue,
};
use tokenmeter::gpu::readback::read_f32;
use tokenmeter::gpu::PREVIOUS_ID;
use tokenmeter::gpu::{Gpu, Kernel, Kernels, StepRecorder, WeightFormat, WeightStorage};
use tokenmeter::model::quant::dequantise;
use tokenmeter::model::reference;
use tokenmeter::model::safetensors::{bf16_to_f32, f32_to_bf16};
use tokenmeter::model::weights::Matrix;
use wasm_bindgen_test::*;

fn bytes<T: Pod>(v: &[T]) -> &[u8] {
    bytemuck::cast_slice(v)
}

/// The page's device with the GPU family's kernels (weights in storage buffers, as on GPUs).
async fn gpu_family() -> (Gpu, Kernels) {
    let g = Gpu::new().await.expect("WebGPU adapter");
    let options = KernelOptions {
        family: KernelFamily::Gpu,
        weights: WeightStorage::Buffer,
        fused: true,
        ..KernelOptions::for_gpu(&g, &Default::default())
    };
    let kernels = Kernels::with_options(&g, options);
    (g, kernels)
}

fn submit(g: &Gpu, rec: StepRecorder) {
    let mut enc = g.device.create_command_encoder(&Default::default());
    rec.encode(&g.queue, &mut enc);
    g.queue.submit([enc.finish()]);
}

async fn read(g: &Gpu, buffer: &wgpu::Buffer, n: usize) -> Vec<f32> {
    read_f32(&g.device, &g.queue, buffer, n).await.expect("readback")
}

/// `rows x cols` random bf16 weights, made 4,096 rows at a time (lm_head's 155 M values never
/// exist as f32).
fn random_bf16(seed: u64, rows: usize, cols: usize) -> Vec<u16> {
    let mut bits = Vec::with_capacity(rows * cols);
    for (i, start) in (0..rows).step_by(4096).enumerate() {
        let n = (rows - start).min(4096) * cols;
        bits.extend(random(seed + i as u64, n).iter().map(|&x| f32_to_bf16(x)));
    }
    bits
}

/// The GEMV (up to 64 tokens; one token also in its four-row layout) and the 64 x 64 tiled matmul (more; with and without its prefetch)
/// through the engine's own dispatch choice, at Qwen3-0.6B's widths, each output within the f32 error bound of a K-term dot
/// product (|y - y_ref| <= 2 (K - 1) 2^-24 sum_k |x_k w_k|, as tests/it/kernels.rs). Then the
/// embedding gather over the lm_head-sized table, at ids on both sides of every chunk boundary.
#[wasm_bindgen_test]
async fn gpu_family_matmuls_and_embedding_at_real_widths_on_dawn() {
    let (g, kernels) = gpu_family().await;
    //  (m, n, k, accumulate): lm_head decode over 151,936 rows, gate|up at batch 4, down_proj at
    //  batch 1 with the residual add, q|k|v for a 64-token prefill chunk (tiled), o_proj for a
    //  300-token chunk (tiled, M not a multiple of 64).
    for (m, n, k, accumulate) in [
        (1, 151_936, 1024, false),
        (4, 6144, 1024, false),
        (1, 1024, 3072, true),
        (64, 4096, 1024, false),
        (300, 1024, 2048, false),
    ] {
        let w_bits = random_bf16(31, n, k);
        let x = random(32, m * k);
        let y0 = random(33, m * n);
        // lm_head in chunks of at most 65,536 rows: a software adapter binds all 311 MB at once, a
        // GPU with a 128 MiB binding limit would not; the chunked form is what such GPUs run.
        let w = Matrix::with_storage(&g, "w", n, k, 65_536, WeightStorage::Buffer).unwrap();
        for start in (0..n).step_by(8192) {
            let rows = (n - start).min(8192);
            w.write_rows(&g, start, &w_bits[start * k..][..rows * k]);
        }
        let got = matmul_on(&g, &kernels, &w, &x, &y0, m, accumulate).await;
        let mut want = reference::matmul(&x, m, k, &w_bits, n);
        if accumulate {
            want.iter_mut().zip(&y0).for_each(|(a, b)| *a += b);
        }
        let w_values: Vec<f32> = w_bits.iter().map(|&b| bf16_to_f32(b)).collect();
        let name = format!("GPU-family matmul m={m} n={n} k={k} ({} chunks)", w.chunks.len());
        within_dot_bound(&name, &got, &want, (&x, &w_values, accumulate.then_some(&y0[..])), (m, n, k));
        // The kernel trial's other choices: the tile with its prefetch (`--tile-prefetch on`) and
        // one token through the GEMV's four-row layout (`--gemv-rows4 on`).
        let other = match m {
            1 => Some(("four-row GEMV", KernelOptions { gemv_rows4: true, ..kernels.options() })),
            65.. => Some(("tile prefetch", KernelOptions { tile_prefetch: true, ..kernels.options() })),
            _ => None,
        };
        if let Some((variant, options)) = other {
            let got = matmul_on(&g, &Kernels::with_options(&g, options), &w, &x, &y0, m, accumulate).await;
            let terms = (&x[..], &w_values[..], accumulate.then_some(&y0[..]));
            within_dot_bound(&format!("{name}, {variant}"), &got, &want, terms, (m, n, k));
        }
        if n == 151_936 {
            assert_eq!(w.chunks.len(), 3);
            embedding_over(&g, &kernels, &w, &w_bits).await;
        }
    }
}

/// The fused matmuls (RMSNorm or SwiGLU in the prologue) against the CPU reference of the two
/// steps they replace, at Qwen3-0.6B's widths (tests/it/kernels.rs runs more shapes natively): q|k|v
/// at decode (GEMV) and gate|up of a 300-token chunk (tile), down_proj (GEMV only) at batch 4 and
/// 64.
#[wasm_bindgen_test]
async fn fused_matmuls_at_real_widths_on_dawn() {
    let (g, kernels) = gpu_family().await;
    for (seed, (prologue, m, n, k)) in [
        (Prologue::RmsNorm, 1, 4096, 1024),
        (Prologue::RmsNorm, 300, 6144, 1024),
        (Prologue::SwiGlu, 4, 1024, 3072),
        (Prologue::SwiGlu, 64, 1024, 3072),
    ]
    .into_iter()
    .enumerate()
    {
        let seed = 60 + 3 * seed as u64;
        let w_bits = random_bf16(seed + 2, n, k);
        let w_values: Vec<f32> = w_bits.iter().map(|&b| bf16_to_f32(b)).collect();
        let case = fused_case(prologue == Prologue::SwiGlu, m, k, &w_values, n, seed);
        let w = Matrix::with_storage(&g, "w", n, k, 2048, WeightStorage::Buffer).unwrap();
        w.write_rows(&g, 0, &w_bits);
        let xb = g.storage_with("x", bytes(&case.x));
        let nb = g.storage_with("norm", bytes(&case.norm));
        let yb = g.storage_buffer("y", (m * n * 4) as u64);
        let binds = fused_binds(&kernels, &g.device, prologue, &w, (&xb, &yb, &nb));
        let mut rec = StepRecorder::new(&kernels, g.limits.max_compute_workgroups_per_dimension);
        w.record_matmul_with(&mut rec, &binds, m, false, prologue, FUSED_EPS);
        submit(&g, rec);
        let name = format!("fused {prologue:?} matmul m={m} n={n} k={k} ({} chunks)", w.chunks.len());
        case.check(&name, &read(&g, &yb, m * n).await, n);
    }
}

/// `y = y0 (+)= x w^T` through the engine's own dispatch choice for `m` tokens, read back.
async fn matmul_on(
    g: &Gpu,
    kernels: &Kernels,
    w: &Matrix,
    x: &[f32],
    y0: &[f32],
    m: usize,
    accumulate: bool,
) -> Vec<f32> {
    let xb = g.storage_with("x", bytes(x));
    let yb = g.storage_with("y", bytes(y0));
    let binds: Vec<_> = w.chunks.iter().map(|c| kernels.bind(&g.device, Kernel::Matmul, "w", &[&xb, c, &yb])).collect();
    let mut rec = StepRecorder::new(kernels, g.limits.max_compute_workgroups_per_dimension);
    w.record_matmul(&mut rec, &binds, m, accumulate);
    submit(g, rec);
    read(g, &yb, y0.len()).await
}

/// Each `got[i]` of an `m x n` matmul over K within the f32 error bound of a K-term dot product
/// (|y - y_ref| <= 2 (K - 1) 2^-24 sum_k |x_k w_k|, as tests/it/kernels.rs), plus an ulp of the
/// residual `y0` where it was added (and 1e-30 for exact zeros).
fn within_dot_bound(
    name: &str,
    got: &[f32],
    want: &[f32],
    (x, w, y0): (&[f32], &[f32], Option<&[f32]>),
    (m, n, k): (usize, usize, usize),
) {
    let scale = 2.0 * (k - 1) as f32 * 2f32.powi(-24) * 1.01;
    for i in 0..m * n {
        let (xr, wr) = (&x[i / n * k..][..k], &w[i % n * k..][..k]);
        let magnitude: f32 = xr.iter().zip(wr).map(|(a, b)| (a * b).abs()).sum();
        let bound = magnitude * scale + y0.map_or(0.0, |y0| y0[i].abs() * 2f32.powi(-23)) + 1e-30;
        assert!(
            (got[i] - want[i]).abs() <= bound,
            "{name}: y[{}, {}] = {} vs {} (bound {bound:.2e})",
            i / n,
            i % n,
            got[i],
            want[i],
        );
    }
}

/// int8 and int4 weights on the page's paths — the CPU family (its subgroup kernels, which take
/// int8's blocks 16 weights a fetch) and the GPU family, weights in buffers as in the page — against
/// the CPU reference on the dequantised weights (within the dot product's f32 bound: int8's row
/// scale comes after the sum), at Qwen3-0.6B's widths and one awkward shape
/// (K = 1,000: 125 blocks of 8, an int8 row ending in a half texel; rows past a chunk's end).
#[wasm_bindgen_test]
async fn quantised_matmuls_on_the_page_paths_on_dawn() {
    let g = Gpu::new().await.expect("WebGPU adapter");
    for format in [WeightFormat::Int8, WeightFormat::Int4] {
        for family in [KernelFamily::Software, KernelFamily::Gpu] {
            let options = KernelOptions {
                family,
                weights: WeightStorage::Buffer,
                format,
                fused: family == KernelFamily::Gpu,
                ..KernelOptions::for_gpu(&g, &Default::default())
            };
            let kernels = Kernels::with_options(&g, options);
            //  (m, n, k, rows a chunk): q|k|v at decode, gate|up at batch 4, down_proj at batch 1,
            //  a 37-token chunk over the awkward shape in two chunks.
            for (seed, (m, n, k, chunk_rows)) in
                [(1, 4096, 1024, 4096), (4, 6144, 1024, 6144), (1, 1024, 3072, 1024), (37, 1001, 1000, 600)]
                    .into_iter()
                    .enumerate()
            {
                let seed = 80 + 3 * seed as u64;
                let w_bits = random_bf16(seed, n, k);
                let x = random(seed + 1, m * k);
                let y0 = random(seed + 2, m * n);
                let w = Matrix::with_format(&g, "w", n, k, chunk_rows, WeightStorage::Buffer, format).unwrap();
                w.write_rows(&g, 0, &w_bits);
                let got = matmul_on(&g, &kernels, &w, &x, &y0, m, true).await;
                let w_values = dequantise(&w_bits, k, format);
                let mut want = reference::matmul_f32(&x, m, k, &w_values, n);
                want.iter_mut().zip(&y0).for_each(|(a, b)| *a += b);
                let name = format!("{format} matmul, {family:?} family, m={m} n={n} k={k}");
                within_dot_bound(&name, &got, &want, (&x, &w_values, Some(&y0[..])), (m, n, k));
            }
        }
    }
}

async fn embedding_over(g: &Gpu, kernels: &Kernels, table: &Matrix, table_bits: &[u16]) {
    let hidden = table.cols;
    let mut ids = vec![0u32, 151_935, 77_777];
    for c in &table.chunks[1..] {
        ids.extend([c.row_start as u32 - 1, c.row_start as u32]);
    }
    // And each id again through the previous step's ids (CPU/GPU overlap), in reverse.
    let previous: Vec<u32> = ids.iter().rev().copied().collect();
    let pb = g.storage_with("previous ids", bytes(&previous));
    let mut tokens: Vec<[u32; 4]> = ids.iter().map(|&id| [id, 0, 0, 0]).collect();
    tokens.extend((0..ids.len() as u32).map(|r| [PREVIOUS_ID | r, 0, 0, 0]));
    ids.extend(previous);
    let tb = g.storage_with("tokens", bytes(&tokens));
    let xb = g.storage_buffer("x", (ids.len() * hidden * 4) as u64);
    let binds: Vec<_> = table
        .chunks
        .iter()
        .map(|c| kernels.bind(&g.device, Kernel::Embed, "embed", &[&tb as &dyn Bind, c, &xb, &pb]))
        .collect();
    let mut rec = StepRecorder::new(kernels, g.limits.max_compute_workgroups_per_dimension);
    for (c, bind) in table.chunks.iter().zip(&binds) {
        let p = EmbedParams {
            n_tokens: ids.len() as u32,
            hidden: hidden as u32,
            row_start: c.row_start as u32,
            row_count: c.rows as u32,
        };
        rec.dispatch(Kernel::Embed, bind, &p, [groups(hidden / 2, 64), ids.len() as u32, 1]);
    }
    submit(g, rec);
    let want: Vec<f32> = ids
        .iter()
        .flat_map(|&id| table_bits[id as usize * hidden..][..hidden].iter().map(|&b| bf16_to_f32(b)))
        .collect();
    assert_close("embedding over lm_head's chunks", &read(g, &xb, ids.len() * hidden).await, &want, 0.0);
}

/// Qwen3's heads (16 q / 8 kv of 128): the GPU family's q/k norm + RoPE + KV write (a workgroup
/// per head and token) at positions up to 40,000, then attention over the cache it wrote: a
/// 300-token prefill chunk (past the 252 positions a toy fixture never reaches; the tiled prefill
/// kernel in one part), a 200-token chunk at positions 1,000..1,200 (tiled, in parts merged) and
/// decodes at contexts of 503 and 600 (a workgroup per part): the engine's own choice of path.
#[wasm_bindgen_test]
async fn gpu_family_rope_and_attention_at_head_dim_128_on_dawn() {
    let (g, kernels) = gpu_family().await;
    let (n_heads, n_kv, hd, block_size, max_blocks) = (16, 8, 128, 16, 2600);
    let physical = 256u32;
    let mut rope = HeadSetup {
        n_heads,
        n_kv,
        hd,
        block_size,
        max_blocks,
        tokens: vec![[0, 0, 0, 0], [0, 7, 0, 0], [0, 40_000, 1, 0], [0, 12_345, 1, 0], [0, 1, 0, 0]],
        tables: (0..2 * max_blocks as u32).map(|i| (i * 7919) % physical).collect(),
    };
    let width = (n_heads + 2 * n_kv) * hd;
    let qkv = random(41, rope.tokens.len() * width);
    let norms: Vec<f32> = random(42, 2 * hd).iter().map(|v| 1.0 + 0.5 * v).collect();
    let freqs = tokenmeter::model::config::inv_freq(hd, 1e6);
    let cache_len = physical as usize * block_size * n_kv * hd;
    let qkvb = g.storage_with("qkv", bytes(&qkv));
    let (tb, btb) = (g.storage_with("tokens", bytes(&rope.tokens)), g.storage_with("tables", bytes(&rope.tables)));
    let (nb, fb) = (g.storage_with("norms", bytes(&norms)), g.storage_with("freqs", bytes(&freqs)));
    let (kb, vb) = (g.storage_buffer("k", (cache_len * 4) as u64), g.storage_buffer("v", (cache_len * 4) as u64));
    let bind = kernels.bind(&g.device, Kernel::QkNormRope, "rope", &[&qkvb, &tb, &btb, &nb, &fb, &kb, &vb]);
    let mut rec = StepRecorder::new(&kernels, g.limits.max_compute_workgroups_per_dimension);
    record_qk_norm_rope(&mut rec, &bind, &rope.params(1e-6));
    submit(&g, rec);
    let got_qkv = read(&g, &qkvb, qkv.len()).await;
    let (k_cache, v_cache) = (read(&g, &kb, cache_len).await, read(&g, &vb, cache_len).await);
    check_qk_norm_rope(&rope, &qkv, &norms, &freqs, &got_qkv, &k_cache, &v_cache);

    // Attention over random K and V in 60 physical blocks (960 slots), four sequences.
    rope.max_blocks = 80;
    let s = HeadSetup {
        tokens: (0..300)
            .map(|p| [0, p, 0, 0])
            .chain([[0, 502, 1, 0], [0, 599, 2, 0]])
            .chain((1000..1200).map(|p| [0, p, 3, 0]))
            .collect(),
        tables: (0..320u32).map(|i| (i * 37) % 60).collect(),
        ..rope
    };
    let ranges: Vec<_> = attention_ranges(&s.tokens).into_iter().map(|(r, tiled)| (r.len(), tiled)).collect();
    assert_eq!(ranges, [(300, true), (2, false), (200, true)]);
    assert_eq!(attention_prefill_splits(300, n_heads, hd, 300), 1);
    assert_eq!(attention_prefill_splits(200, n_heads, hd, 1200), 4);
    let qkv = random(43, s.tokens.len() * width);
    let cache_len = 60 * block_size * n_kv * hd;
    let (k_cache, v_cache) = (random(44, cache_len), random(45, cache_len));
    let qkvb = g.storage_with("qkv", bytes(&qkv));
    let (tb, btb) = (g.storage_with("tokens", bytes(&s.tokens)), g.storage_with("tables", bytes(&s.tables)));
    let (kb, vb) = (g.storage_with("k", bytes(&k_cache)), g.storage_with("v", bytes(&v_cache)));
    let out = g.storage_buffer("out", (s.tokens.len() * n_heads * hd * 4) as u64);
    let partials_floats = 4 << 20;
    let partials = g.storage_buffer("partials", partials_floats as u64 * 4);
    let whole = kernels.bind(&g.device, Kernel::Attention, "whole", &[&qkvb, &tb, &btb, &kb, &vb, &out]);
    let parts = kernels.bind(&g.device, Kernel::AttentionSplit, "parts", &[&qkvb, &tb, &btb, &kb, &vb, &partials]);
    let merge = kernels.bind(&g.device, Kernel::AttentionMerge, "merge", &[&partials, &out]);
    let mut rec = StepRecorder::new(&kernels, g.limits.max_compute_workgroups_per_dimension);
    let scale = 1.0 / (hd as f32).sqrt();
    record_attention(&mut rec, &whole, (&parts, &merge), &s.params(scale), &s.tokens, partials_floats);
    submit(&g, rec);
    let got = read(&g, &out, s.tokens.len() * n_heads * hd).await;
    check_attention(&s, &qkv, &k_cache, &v_cache, &got, attention_splits_gpu(2, n_heads, hd, 600), 2e-5);
}
