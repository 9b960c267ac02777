//! Kernel speed on the native adapter: matmul shapes of Qwen3-0.6B at decode and prefill sizes,
//! as achieved weight GB/s (decode) or GFLOP/s (prefill) next to the adapter's roofline; then the
//! prefill attention (Qwen3-0.6B's 16 / 8 heads of 128) on the same chunk: the GPU family's tiled
//! over queries and a workgroup per (token, head, part); the CPU family's four queries an
//! invocation and one.
//! `cargo bench --bench kernels [NAME FILTER]`

#![cfg_attr(target_arch = "wasm32", allow(unused_imports))]
use tokenmeter::clock::now_s;
use tokenmeter::engine::Linear;
use tokenmeter::gpu::kernels::{
    attention_prefill_cpu_splits, attention_prefill_splits, attention_splits, attention_splits_gpu,
    record_attention_prefill, record_attention_split, HeadParams, KernelFamily, KernelOptions,
};
use tokenmeter::gpu::roofline;
use tokenmeter::gpu::{Gpu, Kernel, Kernels, StepRecorder};
use tokenmeter::model::weights::Matrix;

#[cfg(target_arch = "wasm32")]
fn main() {}

#[cfg(not(target_arch = "wasm32"))]
fn main() {
    pollster::block_on(run());
}

#[cfg(not(target_arch = "wasm32"))]
async fn run() {
    let gpu = Gpu::new().await.expect("adapter");
    let roof = roofline::measure(&gpu, 5).await.expect("roofline");
    println!("adapter: {}  copy {:.2} GB/s  fma {:.1} GFLOP/s", gpu.adapter.name, roof.copy_gb_s, roof.fma_gflop_s);
    let kernels = Kernels::new(&gpu);
    let filter = std::env::args().nth(1).filter(|a| !a.starts_with('-'));
    for (name, m, n, k) in [
        ("lm_head decode", 1, 151_936, 1024),
        ("qkv decode", 1, 4096, 1024),
        ("gate_up decode", 1, 6144, 1024),
        ("down decode", 1, 1024, 3072),
        ("gate_up batch 16", 16, 6144, 1024),
        ("gate_up prefill 128", 128, 6144, 1024),
    ] {
        if filter.as_deref().is_some_and(|f| !name.contains(f)) {
            continue;
        }
        let w = Matrix::new(&gpu, name, n, k, tokenmeter::gpu::WeightFormat::Bf16).expect("fits");
        let x = gpu.storage_buffer("x", (m * k * 4) as u64);
        let y = gpu.storage_buffer("y", (m * n * 4) as u64);
        let binds: Vec<_> =
            w.chunks.iter().map(|c| kernels.bind(&gpu.device, Kernel::Matmul, "bench", &[&x, c, &y])).collect();
        let t = median_s(&gpu, &kernels, |rec| w.record_matmul(rec, &binds, m, false)).await;
        let gb_s = (n * k * 2) as f64 / t / 1e9;
        let gflop_s = 2.0 * (m * n * k) as f64 / t / 1e9;
        println!(
            "{name:<22} M={m:<4} N={n:<7} K={k:<5} {:>8.3} ms  weights {gb_s:>6.2} GB/s ({:>5.1}% of copy)  {gflop_s:>6.1} GFLOP/s ({:>5.1}% of FMA)",
            t * 1e3,
            100.0 * gb_s / roof.copy_gb_s,
            100.0 * gflop_s / roof.fma_gflop_s
        );
    }
    // `cargo test` runs this too (without `--bench`): there, the attention at context 512 only.
    let contexts: &[usize] = if std::env::args().any(|a| a == "--bench") { &[512, 2048] } else { &[512] };
    attention_prefill(&gpu, filter.as_deref(), roof.fma_gflop_s, contexts).await;
}

/// Median of 5 timed runs (after one warm-up) of the dispatches `record` makes.
#[cfg(not(target_arch = "wasm32"))]
async fn median_s<'a>(gpu: &Gpu, kernels: &'a Kernels, record: impl Fn(&mut StepRecorder<'a>)) -> f64 {
    let mut times = Vec::new();
    for i in 0..6 {
        let mut rec = StepRecorder::new(kernels, gpu.limits.max_compute_workgroups_per_dimension);
        record(&mut rec);
        let mut enc = gpu.device.create_command_encoder(&Default::default());
        rec.encode(&gpu.queue, &mut enc);
        gpu.sync().await.unwrap();
        let t = now_s();
        gpu.queue.submit([enc.finish()]);
        gpu.sync().await.unwrap();
        if i > 0 {
            times.push(now_s() - t);
        }
    }
    times.sort_by(|a, b| a.partial_cmp(b).unwrap());
    times[times.len() / 2]
}

/// A 512-token prefill chunk of one sequence ending at context 512 and 2,048, through each
/// family's two prefill attention paths. GFLOP/s counts 4 * head_dim per (query, visible key) pair.
#[cfg(not(target_arch = "wasm32"))]
async fn attention_prefill(gpu: &Gpu, filter: Option<&str>, fma_gflop_s: f64, contexts: &[usize]) {
    let (n_heads, n_kv, hd, block_size, chunk) = (16usize, 8usize, 128usize, 16usize, 512usize);
    let options = KernelOptions { family: KernelFamily::Gpu, ..KernelOptions::for_gpu(gpu, &Default::default()) };
    let kernels = Kernels::with_options(gpu, options);
    let cpu_options =
        KernelOptions { family: KernelFamily::Software, ..KernelOptions::for_gpu(gpu, &Default::default()) };
    let cpu_kernels = Kernels::with_options(gpu, cpu_options);
    for &context in contexts {
        let name = format!("attention prefill {chunk} at {context}");
        if filter.is_some_and(|f| !name.contains(f)) {
            continue;
        }
        let max_blocks = context / block_size;
        let tokens: Vec<[u32; 4]> = (context - chunk..context).map(|p| [0, p as u32, 0, 0]).collect();
        let tables: Vec<u32> = (0..max_blocks as u32).collect();
        let width = (n_heads + 2 * n_kv) * hd;
        let cache = (context * n_kv * hd * 4) as u64;
        let qkv = gpu.storage_buffer("qkv", (chunk * width * 4) as u64);
        let tb = gpu.storage_with("tokens", bytemuck::cast_slice(&tokens));
        let btb = gpu.storage_with("tables", bytemuck::cast_slice(&tables));
        let (kb, vb) = (gpu.storage_buffer("k", cache), gpu.storage_buffer("v", cache));
        let out = gpu.storage_buffer("out", (chunk * n_heads * hd * 4) as u64);
        let partials_floats = 4 << 20;
        let partials = gpu.storage_buffer("partials", partials_floats as u64 * 4);
        let d = &gpu.device;
        let whole = kernels.bind(d, Kernel::Attention, "whole", &[&qkv, &tb, &btb, &kb, &vb, &out]);
        let parts = kernels.bind(d, Kernel::AttentionSplit, "parts", &[&qkv, &tb, &btb, &kb, &vb, &partials]);
        let merge = kernels.bind(d, Kernel::AttentionMerge, "merge", &[&partials, &out]);
        let whole_cpu = cpu_kernels.bind(d, Kernel::Attention, "whole", &[&qkv, &tb, &btb, &kb, &vb, &out]);
        let parts_cpu = cpu_kernels.bind(d, Kernel::AttentionSplit, "parts", &[&qkv, &tb, &btb, &kb, &vb, &partials]);
        let merge_cpu = cpu_kernels.bind(d, Kernel::AttentionMerge, "merge", &[&partials, &out]);
        let p = HeadParams {
            n_tokens: chunk as u32,
            n_heads: n_heads as u32,
            n_kv_heads: n_kv as u32,
            head_dim: hd as u32,
            qkv_width: width as u32,
            block_size: block_size as u32,
            max_blocks: max_blocks as u32,
            eps_or_scale: 1.0 / (hd as f32).sqrt(),
            splits: 1,
            token_begin: 0,
            direct: 0,
            eps: 0.0,
        };
        let pairs: usize = tokens.iter().map(|t| t[1] as usize + 1).sum::<usize>() * n_heads;
        let gflop = (4 * hd * pairs) as f64 / 1e9;
        let tiled_splits = attention_prefill_splits(chunk, n_heads, hd, context);
        let tiled = median_s(gpu, &kernels, |rec| {
            record_attention_prefill(rec, &whole, (&parts, &merge), &p, tiled_splits, partials_floats)
        })
        .await;
        let splits = attention_splits_gpu(chunk, n_heads, hd, context);
        let per_token = median_s(gpu, &kernels, |rec| {
            record_attention_split(
                rec,
                &whole,
                (&parts, &merge),
                &p,
                splits,
                partials_floats,
                Kernel::AttentionSplitGpu,
            )
        })
        .await;
        let cpu_tiled_splits = attention_prefill_cpu_splits(chunk, n_heads, hd, context);
        let cpu_tiled = median_s(gpu, &cpu_kernels, |rec| {
            record_attention_prefill(rec, &whole_cpu, (&parts_cpu, &merge_cpu), &p, cpu_tiled_splits, partials_floats)
        })
        .await;
        let cpu_splits = attention_splits(chunk, n_heads, hd, context);
        let cpu = median_s(gpu, &cpu_kernels, |rec| {
            record_attention_split(
                rec,
                &whole_cpu,
                (&parts_cpu, &merge_cpu),
                &p,
                cpu_splits,
                partials_floats,
                Kernel::AttentionSplitGpu,
            )
        })
        .await;
        for (path, t, parts) in [
            ("tiled over queries", tiled, tiled_splits),
            ("a workgroup per token", per_token, splits),
            ("cpu: 4 queries each", cpu_tiled, cpu_tiled_splits),
            ("cpu: one query each", cpu, cpu_splits),
        ] {
            println!(
                "{name:<30} {path:<22} {parts:>2} parts {:>8.3} ms  {:>7.1} GFLOP/s ({:>5.1}% of FMA)",
                t * 1e3,
                gflop / t,
                100.0 * gflop / t / fma_gflop_s
            );
        }
        println!(
            "{name:<30} tiled / per token: {:.2}x faster (gpu family), {:.2}x (cpu family)",
            per_token / tiled,
            cpu / cpu_tiled
        );
    }
}
