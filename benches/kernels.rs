//! Kernel speed on the native adapter: matmul shapes of Qwen3-0.6B at decode and prefill sizes,
//! as achieved weight GB/s (decode) or GFLOP/s (prefill) next to the adapter's roofline.
//! `cargo bench --bench kernels`

#![cfg_attr(target_arch = "wasm32", allow(unused_imports))]
use tokenmeter::clock::now_s;
use tokenmeter::gpu::roofline::{self, wait_idle};
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
        let w = Matrix::new(&gpu, name, n, k, tokenmeter::model::quant::WeightFormat::Bf16).expect("fits");
        let x = gpu.storage_buffer("x", (m * k * 4) as u64);
        let y = gpu.storage_buffer("y", (m * n * 4) as u64);
        let binds: Vec<_> =
            w.chunks.iter().map(|c| kernels.bind(&gpu.device, Kernel::Matmul, "bench", &[&x, c, &y])).collect();
        let mut times = Vec::new();
        for i in 0..6 {
            let mut rec = StepRecorder::new(&kernels, 65_535);
            w.record_matmul(&mut rec, &binds, m, false);
            let mut enc = gpu.device.create_command_encoder(&Default::default());
            rec.encode(&gpu.queue, &mut enc);
            wait_idle(&gpu).await.unwrap();
            let t = now_s();
            gpu.queue.submit([enc.finish()]);
            wait_idle(&gpu).await.unwrap();
            if i > 0 {
                times.push(now_s() - t);
            }
        }
        times.sort_by(|a, b| a.partial_cmp(b).unwrap());
        let t = times[times.len() / 2];
        let gb_s = (n * k * 2) as f64 / t / 1e9;
        let gflop_s = 2.0 * (m * n * k) as f64 / t / 1e9;
        println!(
            "{name:<22} M={m:<4} N={n:<7} K={k:<5} {:>8.3} ms  weights {gb_s:>6.2} GB/s ({:>5.1}% of copy)  {gflop_s:>6.1} GFLOP/s ({:>5.1}% of FMA)",
            t * 1e3,
            100.0 * gb_s / roof.copy_gb_s,
            100.0 * gflop_s / roof.fma_gflop_s
        );
    }
}
