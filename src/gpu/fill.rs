//! Random bf16 weights written by the GPU itself (`shaders/fill.wgsl`), for synthetic models:
//! a 0.6B model's 1.2 GB appear in well under a second instead of being generated on the host and
//! uploaded. The CPU twin is [`random_bf16`]; both give the same bits for the same (seed, row, col).

use super::Gpu;
use wgpu::util::DeviceExt;

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Params {
    seed: u32,
    scale: f32,
    cols: u32,
    row0: u32,
    word_offset: u32,
    words: u32,
    _pad: [u32; 2],
}

/// Workgroups per dispatch; the kernel strides over the rest.
const GROUPS: u32 = 1024;

/// How a tensor's random values are made: per-tensor seed and step between the 256 levels.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RandomSpec {
    pub seed: u32,
    pub scale: f32,
}

pub struct RandomFill {
    pipeline: wgpu::ComputePipeline,
}

impl RandomFill {
    pub fn new(gpu: &Gpu) -> RandomFill {
        let module = gpu.device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("fill"),
            source: wgpu::ShaderSource::Wgsl(include_str!("../../shaders/fill.wgsl").into()),
        });
        let pipeline = gpu.device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some("fill_random_bf16"),
            layout: None,
            module: &module,
            entry_point: Some("fill_random_bf16"),
            compilation_options: Default::default(),
            cache: None,
        });
        RandomFill { pipeline }
    }

    /// Writes tensor rows `rows` (each `cols` bf16 wide, `cols` even) into `buffer` from byte
    /// `byte_offset` on. Submitted at once; the queue orders it before later work.
    pub fn fill(
        &self,
        gpu: &Gpu,
        buffer: &wgpu::Buffer,
        byte_offset: u64,
        spec: RandomSpec,
        rows: std::ops::Range<usize>,
        cols: usize,
    ) {
        assert!(cols.is_multiple_of(2) && byte_offset.is_multiple_of(4));
        let words = rows.len() * cols / 2;
        if words == 0 {
            return;
        }
        let params = Params {
            seed: spec.seed,
            scale: spec.scale,
            cols: cols as u32,
            row0: rows.start as u32,
            word_offset: (byte_offset / 4) as u32,
            words: words as u32,
            _pad: [0; 2],
        };
        let uniform = gpu.device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("fill params"),
            contents: bytemuck::bytes_of(&params),
            usage: wgpu::BufferUsages::UNIFORM,
        });
        let bind_group = gpu.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("fill"),
            layout: &self.pipeline.get_bind_group_layout(0),
            entries: &[
                wgpu::BindGroupEntry { binding: 0, resource: uniform.as_entire_binding() },
                wgpu::BindGroupEntry { binding: 1, resource: buffer.as_entire_binding() },
            ],
        });
        let mut encoder = gpu.device.create_command_encoder(&Default::default());
        {
            let mut pass = encoder.begin_compute_pass(&Default::default());
            pass.set_pipeline(&self.pipeline);
            pass.set_bind_group(0, &bind_group, &[]);
            pass.dispatch_workgroups(GROUPS.min(words.div_ceil(256) as u32), 1, 1);
        }
        gpu.queue.submit([encoder.finish()]);
    }
}

fn pcg(v: u32) -> u32 {
    let state = v.wrapping_mul(747_796_405).wrapping_add(2_891_336_453);
    let word = ((state >> ((state >> 28) + 4)) ^ state).wrapping_mul(277_803_737);
    (word >> 22) ^ word
}

/// The bf16 bits `fill_random_bf16` writes for element (row, col): uniform on 256 levels in
/// [-127.5 scale, 127.5 scale].
pub fn random_bf16(spec: RandomSpec, row: u32, col: u32) -> u16 {
    let h = pcg(pcg(spec.seed ^ row).wrapping_add(col));
    let v = ((h >> 24) as f32 - 127.5) * spec.scale;
    let bits = v.to_bits();
    ((bits + 0x7fff + ((bits >> 16) & 1)) >> 16) as u16
}
