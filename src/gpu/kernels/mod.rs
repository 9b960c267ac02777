//! The kernels: one WGSL file per kernel family, one pipeline per entry point, created once.
//! Every kernel takes its parameters as a uniform at binding 0 with a dynamic offset into one
//! per-step parameter arena, so bind groups are built once and a step is one `write_buffer`
//! (the arena) plus one command buffer.
//!
//! By job: [`registry`] (each kernel declared once, its WGSL assembled), [`options`] (the user's
//! switches resolved against the device), [`pipelines`] (built once per device and options),
//! [`recorder`] (a step's dispatches, profiling), [`params`] (the parameter blocks); and one module
//! per op with its dispatch maths and planning: [`matmul`], [`attention`], [`rope`].

pub mod attention;
pub mod matmul;
pub mod options;
pub mod params;
pub mod pipelines;
pub mod recorder;
pub mod registry;
pub mod rope;

pub use attention::*;
pub use matmul::{record_matmul, record_matmul_with, MatmulClass, MatmulRule, Prologue};
pub use options::{parse_on_off, KernelFamily, KernelOptions, KernelSwitches, MatmulTile, TrialUse, GEMV_MAX_M};
pub use params::*;
pub(crate) use pipelines::Compiled;
pub use pipelines::Kernels;
pub use recorder::{DispatchTime, StepRecorder, Work, MAX_PARAM_SLOTS, PARAM_SLOT};
pub use registry::{wgsl_prelude, Access, Bind, Kernel, MAX_HEAD_DIM};
pub use rope::record_qk_norm_rope;

/// Workgroups of `size` that cover `n` items.
pub fn groups(n: usize, size: usize) -> u32 {
    n.div_ceil(size) as u32
}
