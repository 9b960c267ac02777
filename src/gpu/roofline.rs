//! The roofline probe: the adapter's own copy bandwidth and FMA rate, measured with WGSL
//! microkernels, so engine figures can be reported as a fraction of what this adapter can do.
//! Median of repeats; the best read pattern is the bandwidth figure: a storage buffer read per
//! invocation in blocks or grid-strided and, where weights live in textures, a texture read.

use super::{Gpu, WeightStorage};
use crate::clock::now_s;
use crate::error::Result;
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct Roofline {
    /// Bytes read + written per second, best pattern, GB/s.
    pub copy_gb_s: f64,
    pub copy_blocked_gb_s: f64,
    pub copy_strided_gb_s: f64,
    /// Reading an `rgba32uint` texture instead (measured where weights live in textures).
    pub copy_texture_gb_s: Option<f64>,
    pub fma_gflop_s: f64,
    pub buffer_bytes: u64,
}

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Params {
    n: u32,
    per_lane: u32,
    iters: u32,
    _pad: u32,
}

/// The upper median of timings (NaN when there are none).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

pub async fn measure(gpu: &Gpu, repeats: usize) -> Result<Roofline> {
    let d = &gpu.device;
    let bytes = (256u64 << 20).min(gpu.max_binding() / 16 * 16);
    let n = (bytes / 16) as u32;
    let src = gpu.storage_buffer("roofline src", bytes);
    let dst = gpu.storage_buffer("roofline dst", bytes);
    let params = d.create_buffer(&wgpu::BufferDescriptor {
        label: Some("roofline params"),
        size: 16,
        usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let module = d.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some("roofline"),
        source: wgpu::ShaderSource::Wgsl(include_str!("../../shaders/roofline.wgsl").into()),
    });
    let pipeline = |entry: &str| {
        d.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(entry),
            layout: None,
            module: &module,
            entry_point: Some(entry),
            compilation_options: Default::default(),
            cache: None,
        })
    };
    let run = async |pipe: &wgpu::ComputePipeline, p: Params, groups: u32| -> Result<f64> {
        let bind = d.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("roofline"),
            layout: &pipe.get_bind_group_layout(0),
            entries: &[
                wgpu::BindGroupEntry { binding: 0, resource: params.as_entire_binding() },
                wgpu::BindGroupEntry { binding: 1, resource: src.as_entire_binding() },
                wgpu::BindGroupEntry { binding: 2, resource: dst.as_entire_binding() },
            ],
        });
        gpu.queue.write_buffer(&params, 0, bytemuck::bytes_of(&p));
        median_seconds(gpu, pipe, &bind, groups, repeats).await
    };
    // Blocked: 64 workgroups of 64 lanes, each lane a contiguous run.
    let lanes = 64 * 64;
    let blocked =
        run(&pipeline("copy_blocked"), Params { n, per_lane: n.div_ceil(lanes), iters: 0, _pad: 0 }, 64).await?;
    let strided = run(&pipeline("copy_strided"), Params { n, per_lane: 0, iters: 0, _pad: 0 }, 4096).await?;
    let (groups, iters) = (1024u32, 4096u32);
    let fma = run(&pipeline("fma_rate"), Params { n: groups * 64, per_lane: 0, iters, _pad: 0 }, groups).await?;
    let moved = 2.0 * bytes as f64;
    let copy_blocked_gb_s = moved / blocked / 1e9;
    let copy_strided_gb_s = moved / strided / 1e9;
    let copy_texture_gb_s = match gpu.weight_storage {
        WeightStorage::Texture => Some(texture_copy_gb_s(gpu, &dst, n, repeats).await?),
        WeightStorage::Buffer => None,
    };
    Ok(Roofline {
        copy_gb_s: copy_blocked_gb_s.max(copy_strided_gb_s).max(copy_texture_gb_s.unwrap_or(0.0)),
        copy_blocked_gb_s,
        copy_strided_gb_s,
        copy_texture_gb_s,
        fma_gflop_s: (groups as f64 * 64.0 * iters as f64 * 64.0) / fma / 1e9,
        buffer_bytes: bytes,
    })
}

/// Texels per row of the probe texture (mirrors TEXTURE_WIDTH in roofline_texture.wgsl).
const TEXTURE_WIDTH: u32 = 4096;

/// Bytes read + written per second (GB/s, median) copying up to `n` texels, blocked as in
/// `copy_blocked`, from a texture into `dst`.
async fn texture_copy_gb_s(gpu: &Gpu, dst: &wgpu::Buffer, n: u32, repeats: usize) -> Result<f64> {
    let d = &gpu.device;
    let height = n / TEXTURE_WIDTH;
    let n = height * TEXTURE_WIDTH;
    let (_texture, view) =
        gpu.texel_texture("roofline texture", wgpu::TextureFormat::Rgba32Uint, TEXTURE_WIDTH, height);
    let module = d.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some("roofline texture"),
        source: wgpu::ShaderSource::Wgsl(include_str!("../../shaders/roofline_texture.wgsl").into()),
    });
    let pipe = d.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some("copy_texture"),
        layout: None,
        module: &module,
        entry_point: Some("copy_texture"),
        compilation_options: Default::default(),
        cache: None,
    });
    let lanes = 64 * 64;
    let p = Params { n, per_lane: n.div_ceil(lanes), iters: 0, _pad: 0 };
    let params = d.create_buffer(&wgpu::BufferDescriptor {
        label: Some("roofline texture params"),
        size: 16,
        usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    gpu.queue.write_buffer(&params, 0, bytemuck::bytes_of(&p));
    let bind = d.create_bind_group(&wgpu::BindGroupDescriptor {
        label: Some("roofline texture"),
        layout: &pipe.get_bind_group_layout(0),
        entries: &[
            wgpu::BindGroupEntry { binding: 0, resource: params.as_entire_binding() },
            wgpu::BindGroupEntry { binding: 1, resource: wgpu::BindingResource::TextureView(&view) },
            wgpu::BindGroupEntry { binding: 2, resource: dst.as_entire_binding() },
        ],
    });
    Ok(2.0 * 16.0 * n as f64 / median_seconds(gpu, &pipe, &bind, 64, repeats).await? / 1e9)
}

/// Median wall time of `repeats` runs (after one warm-up) of `groups` workgroups of `pipe`, each
/// submitted alone on an idle queue.
async fn median_seconds(
    gpu: &Gpu,
    pipe: &wgpu::ComputePipeline,
    bind: &wgpu::BindGroup,
    groups: u32,
    repeats: usize,
) -> Result<f64> {
    let mut times = Vec::new();
    for i in 0..repeats + 1 {
        let mut enc = gpu.device.create_command_encoder(&Default::default());
        {
            let mut pass = enc.begin_compute_pass(&Default::default());
            pass.set_pipeline(pipe);
            pass.set_bind_group(0, bind, &[]);
            pass.dispatch_workgroups(groups, 1, 1);
        }
        gpu.sync().await?;
        let t = now_s();
        gpu.queue.submit([enc.finish()]);
        gpu.sync().await?;
        if i > 0 {
            times.push(now_s() - t);
        }
    }
    Ok(median(times))
}
