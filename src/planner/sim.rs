//! The engine on a virtual clock: [`SimExecutor`] runs no kernels; each step takes what the
//! [`CostModel`] predicts for its shape, and the clock jumps over idle waits. Everything else —
//! the scheduler, the block allocator, the batcher's loop with its provisional commits, the
//! benchmark driver and session — is the code a measured run uses.

use crate::bench::record::run_config::{RecordedExecutor, RunConfig};
use crate::engine::forward::EngineLimits;
use crate::engine::{CostModel, Executor, StepShape, StepWork};
use crate::error::Result;
use crate::model::Qwen3Config;
use std::cell::Cell;

/// A step "on the GPU": when it will be done, and its logit rows.
pub struct SimStep {
    done_s: f64,
    rows: usize,
}

pub struct SimExecutor {
    cfg: Qwen3Config,
    limits: EngineLimits,
    cost: CostModel,
    /// What the run record says ran: the measured run's adapter and kernels (the hardware the
    /// cost model describes), with the model.
    modelled: RunConfig,
    /// Virtual seconds.
    clock: Cell<f64>,
    /// When the simulated GPU finishes the last step submitted: steps run one after another.
    gpu_free_s: f64,
    /// The id every row samples: not an EOS id, so each request runs to its output length.
    token: u32,
}

impl SimExecutor {
    pub fn new(cfg: Qwen3Config, limits: EngineLimits, cost: CostModel, modelled: RunConfig) -> SimExecutor {
        // Not 0: a vector of zeros is calloc'd, which glibc serves slower than a filled malloc, and
        // a fleet plan makes one a step (~0.3 µs each).
        let token = (1u32..).find(|id| !cfg.eos_token_ids.contains(id)).expect("a non-EOS id");
        SimExecutor { cfg, limits, cost, modelled, clock: Cell::new(0.0), gpu_free_s: 0.0, token }
    }
}

impl SimExecutor {
    /// The shortest a step that gives a request a token can take: one token, one sequence, one
    /// logit row, one key (the cost model's terms are non-negative, so every such step takes at
    /// least this).
    pub fn shortest_token_step_s(&self) -> f64 {
        let one = StepShape { tokens: 1, sequences: 1, logit_rows: 1, attended_keys: 1 };
        self.cost.predict_s(&one).max(0.0)
    }
}

impl SimExecutor {
    /// An idle engine waits for its next arrival at `t_s` on its clock (exactly there, where a
    /// sleep of `t_s - now` would land a rounding error off it); a clock already past stays.
    pub fn idle_until(&self, t_s: f64) {
        self.clock.set(self.clock.get().max(t_s));
    }
}

impl Executor for SimExecutor {
    type Submitted = SimStep;

    fn cfg(&self) -> &Qwen3Config {
        &self.cfg
    }

    fn limits(&self) -> &EngineLimits {
        &self.limits
    }

    /// The step starts when it is submitted or when the step before it is done, whichever is
    /// later (as on a GPU queue), and lasts the cost model's prediction.
    fn submit(&mut self, work: &StepWork<'_>) -> Result<SimStep> {
        let begin = self.clock.get().max(self.gpu_free_s);
        let shape = work.shape();
        self.gpu_free_s = begin + self.cost.predict_s(&shape);
        Ok(SimStep { done_s: self.gpu_free_s, rows: shape.logit_rows })
    }

    async fn ids(&mut self, submitted: SimStep) -> Result<Vec<u32>> {
        self.clock.set(self.clock.get().max(submitted.done_s));
        Ok(vec![self.token; submitted.rows])
    }

    async fn profile_step(
        &mut self,
        work: &StepWork<'_>,
    ) -> Result<(Vec<u32>, Vec<crate::gpu::kernels::DispatchTime>)> {
        Ok((self.step(work).await?, Vec::new()))
    }

    fn readback_resolved_s(&self) -> Option<f64> {
        None
    }

    fn now_s(&self) -> f64 {
        self.clock.get()
    }

    async fn sleep_s(&self, seconds: f64) {
        self.clock.set(self.clock.get() + seconds.max(0.0));
    }

    fn is_faulty(&self) -> bool {
        false
    }
}

impl RecordedExecutor for SimExecutor {
    fn record(&self, config: RunConfig) -> RunConfig {
        RunConfig {
            adapter: self.modelled.adapter.clone(),
            kernels: self.modelled.kernels.clone(),
            simulated: Some(self.cost.clone()),
            ..config
        }
    }
}
