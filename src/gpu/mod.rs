//! The GPU side: device set-up, the WGSL kernels and their dispatch, reading results back.
//! Same code on WebGPU (browser) and Vulkan (native).

pub mod context;
pub mod fill;
pub mod kernels;
pub mod readback;
pub mod roofline;

pub use context::{Gpu, SharedGpu, WeightStorage};
pub use kernels::{Kernel, Kernels, StepRecorder};
