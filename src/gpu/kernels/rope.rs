//! The per-head q/k RMSNorm, RoPE and KV-cache write (rope.wgsl).

use super::groups;
use super::options::KernelFamily;
use super::params::HeadParams;
use super::recorder::StepRecorder;
use super::registry::Kernel;

/// Records the per-head q/k RMSNorm, RoPE and KV-cache write for the step's `p.n_tokens` tokens:
/// an invocation per (token, head) in the CPU family, a workgroup per (head, token) in the GPU one.
pub fn record_qk_norm_rope<'a>(rec: &mut StepRecorder<'a>, bind_group: &'a wgpu::BindGroup, p: &HeadParams) {
    let heads = (p.n_heads + 2 * p.n_kv_heads) as usize;
    match rec.kernels.options.family {
        KernelFamily::Software => rec.dispatch(Kernel::QkNormRope, bind_group, p, [groups(heads, 64), p.n_tokens, 1]),
        KernelFamily::Gpu => rec.dispatch(Kernel::QkNormRopeGpu, bind_group, p, [heads as u32, p.n_tokens, 1]),
    }
}
