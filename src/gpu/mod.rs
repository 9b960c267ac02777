//! The GPU side, the ground floor: device set-up, weight layouts, the WGSL kernels and their
//! dispatch, reading results back. Same code on WebGPU (browser) and Vulkan (native). It imports
//! nothing from the layers above (model, engine, bench).

pub mod context;
pub mod fill;
pub mod format;
pub mod kernels;
pub mod nvml;
pub mod readback;
pub mod roofline;

pub use context::{Gpu, SharedGpu};
pub use format::{WeightFormat, WeightStorage};
pub use kernels::{Kernel, Kernels, StepRecorder};

/// A token id's top bit marks it as a reference to the previous step's sampled ids, still on the
/// GPU: `PREVIOUS_ID | r` is the id row `r` of the step submitted just before chose (CPU/GPU
/// overlap; the scheduler writes such ids, the embedding kernel reads them). Real ids are below
/// `crate::limits::MAX_VOCAB`, far under this bit.
pub const PREVIOUS_ID: u32 = 1 << 31;
