//! What the batcher ([`super::Engine`]) runs its steps on, and whose clock it reads: the GPU
//! forward pass on the wall clock, or the capacity planner's cost model on a virtual clock
//! (the `planner` layer's `SimExecutor`). The batcher's loop — scheduling, provisional commits under
//! CPU/GPU overlap, preemption, events — is the same code for both, so a plan is the engine's own
//! decisions.

use super::batcher::StepWork;
use super::forward::{EngineLimits, ForwardPass, Submitted};
use crate::error::Result;
use crate::model::Qwen3Config;

#[allow(async_fn_in_trait)] // used generically (no `dyn`), on one thread in the browser
pub trait Executor {
    /// A step submitted whose ids have not been read.
    type Submitted;

    /// The model's shape (vocabulary, context, EOS ids).
    fn cfg(&self) -> &Qwen3Config;

    /// The engine's sizes in force.
    fn limits(&self) -> &EngineLimits;

    /// Starts a step without waiting for its ids (see [`ForwardPass::submit`]).
    fn submit(&mut self, work: &StepWork<'_>) -> Result<Self::Submitted>;

    /// A submitted step's ids, once they are back (one per logit row).
    async fn ids(&mut self, submitted: Self::Submitted) -> Result<Vec<u32>>;

    /// One step, its ids awaited.
    async fn step(&mut self, work: &StepWork<'_>) -> Result<Vec<u32>> {
        let submitted = self.submit(work)?;
        self.ids(submitted).await
    }

    /// One step run kernel by kernel, with each dispatch's time (empty where there are none).
    async fn profile_step(&mut self, work: &StepWork<'_>)
        -> Result<(Vec<u32>, Vec<crate::gpu::kernels::DispatchTime>)>;

    /// When the last step's ids readback resolved, on this executor's clock; `None` before any
    /// (and where ids are not read back).
    fn readback_resolved_s(&self) -> Option<f64>;

    /// Seconds on this executor's clock (the wall clock for the GPU: [`crate::clock::now_s`]).
    fn now_s(&self) -> f64;

    /// Waits `seconds` on this executor's clock (nothing for zero or less).
    async fn sleep_s(&self, seconds: f64);

    /// The device faulted: the run in progress ends with what was measured.
    fn is_faulty(&self) -> bool;
}

impl Executor for ForwardPass {
    type Submitted = Submitted;

    fn cfg(&self) -> &Qwen3Config {
        &self.cfg
    }

    fn limits(&self) -> &EngineLimits {
        &self.limits
    }

    fn submit(&mut self, work: &StepWork<'_>) -> Result<Submitted> {
        ForwardPass::submit(self, &work.batch())
    }

    async fn ids(&mut self, submitted: Submitted) -> Result<Vec<u32>> {
        ForwardPass::ids(self, submitted).await
    }

    async fn profile_step(
        &mut self,
        work: &StepWork<'_>,
    ) -> Result<(Vec<u32>, Vec<crate::gpu::kernels::DispatchTime>)> {
        ForwardPass::profile_step(self, &work.batch()).await
    }

    fn readback_resolved_s(&self) -> Option<f64> {
        ForwardPass::readback_resolved_s(self)
    }

    fn now_s(&self) -> f64 {
        crate::clock::now_s()
    }

    async fn sleep_s(&self, seconds: f64) {
        crate::clock::sleep_s(seconds).await
    }

    fn is_faulty(&self) -> bool {
        self.gpu.is_faulty()
    }
}
