//! Random bf16 weights written by the GPU itself (`shaders/fill.wgsl`), for synthetic models:
//! a 0.6B model's 1.2 GB appear in well under a second instead of being generated on the host and
//! uploaded. The CPU twin is [`random_bf16`]; both give the same bits for the same (seed, row, col).

use super::kernels::{FillParams, Kernel, Kernels};
use super::Gpu;

/// Workgroups per dispatch; the kernel strides over the rest.
const GROUPS: u32 = 1024;

/// How a tensor's random values are made: per-tensor seed and step between the 256 levels.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RandomSpec {
    pub seed: u32,
    pub scale: f32,
}

/// The fill kernel's table (the registry's `FillRandomBf16`, with a parameter arena of its own).
pub struct RandomFill {
    kernels: Kernels,
}

impl RandomFill {
    pub fn new(gpu: &Gpu) -> RandomFill {
        RandomFill { kernels: Kernels::standalone(gpu, &[Kernel::FillRandomBf16]) }
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
        let params = FillParams {
            seed: spec.seed,
            scale: spec.scale,
            cols: cols as u32,
            row0: rows.start as u32,
            word_offset: (byte_offset / 4) as u32,
            words: words as u32,
            _pad: [0; 2],
        };
        // Slot 0 of the arena: the queue writes it before the submission below, after the
        // submissions of earlier calls, so each fill reads its own parameters.
        gpu.queue.write_buffer(&self.kernels.params, 0, bytemuck::bytes_of(&params));
        let kernel = Kernel::FillRandomBf16;
        let bind_group = self.kernels.bind(&gpu.device, kernel, "fill_random_bf16", &[buffer]);
        let mut encoder = gpu.device.create_command_encoder(&Default::default());
        {
            let mut pass =
                encoder.begin_compute_pass(&wgpu::ComputePassDescriptor { label: Some("fill"), ..Default::default() });
            pass.set_pipeline(self.kernels.pipeline(kernel));
            pass.set_bind_group(0, &bind_group, &[0]);
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
