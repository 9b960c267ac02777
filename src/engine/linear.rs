//! A linear layer on the GPU: a weight [`Matrix`] (the model layer's upload, in row chunks) recorded
//! as matmuls, chunk by chunk (as candle's `Linear` is the model's use of a weight). The engine's
//! forward pass, the kernel tests and the benchmark all go through it.

use crate::gpu::kernels::{record_matmul_with, MatmulParams, Prologue};
use crate::gpu::StepRecorder;
use crate::model::weights::Matrix;

/// `y (+)= x W^T` over a [`Matrix`].
pub trait Linear {
    /// Records `y (+)= x W^T` for `m` rows of x over every row chunk, with `binds[i]` binding
    /// x, chunk i and y.
    fn record_matmul<'a>(&self, rec: &mut StepRecorder<'a>, binds: &'a [wgpu::BindGroup], m: usize, accumulate: bool);

    /// [`Linear::record_matmul`] through a fused GPU-family kernel that applies `prologue` to x
    /// first (`eps`: the RMSNorm's); the caller has checked `KernelOptions::fuses`, and `binds`
    /// were made for that kernel (see [`crate::gpu::kernels::record_matmul_with`]).
    fn record_matmul_with<'a>(
        &self,
        rec: &mut StepRecorder<'a>,
        binds: &'a [wgpu::BindGroup],
        m: usize,
        accumulate: bool,
        prologue: Prologue,
        eps: f32,
    );
}

impl Linear for Matrix {
    fn record_matmul<'a>(&self, rec: &mut StepRecorder<'a>, binds: &'a [wgpu::BindGroup], m: usize, accumulate: bool) {
        self.record_matmul_with(rec, binds, m, accumulate, Prologue::None, 0.0);
    }

    fn record_matmul_with<'a>(
        &self,
        rec: &mut StepRecorder<'a>,
        binds: &'a [wgpu::BindGroup],
        m: usize,
        accumulate: bool,
        prologue: Prologue,
        eps: f32,
    ) {
        for (chunk, bind) in self.chunks.iter().zip(binds) {
            let p = MatmulParams {
                m: m as u32,
                n: self.rows as u32,
                k: self.cols as u32,
                row_start: chunk.row_start as u32,
                rows: chunk.rows as u32,
                accumulate: accumulate as u32,
                eps,
                flags: 0,
            };
            record_matmul_with(rec, bind, &p, prologue);
        }
    }
}
