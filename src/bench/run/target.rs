//! What the benchmark loads with requests (a [`Target`]: the engine, a server, a fleet), and what
//! a session tells its caller as it goes.

use std::cell::Cell;
use std::rc::Rc;

use crate::bench::measure::decided::{DecideRule, Decided};
use crate::bench::measure::energy::GpuReadings;
use crate::bench::measure::saturation::Saturation;
use crate::bench::measure::server_metrics::ServerMetrics;
use crate::bench::record::raw::{RequestRecord, StepSample};
use crate::bench::record::run_config::RunConfig;
use crate::bench::result::BenchResult;
use crate::bench::run::driver::Progress;
use crate::bench::traffic::workload::{PlannedRequest, WorkloadSpec};
use crate::bench::verdict::diagnosis::Baseline;
use crate::error::{Error, Result};

/// What a session tells its caller as it goes. `Progress` comes after every engine step (or
/// every finished request, from a server).
pub enum SessionEvent<'a> {
    /// The warm-up before the baseline ended: `requests` shaped like the workload's, not
    /// measured ([`WARM_UP_REQUESTS`]).
    WarmedUp {
        requests: usize,
        seconds: f64,
    },
    Baseline(&'a Baseline),
    RateStarted {
        rate: f64,
        requests: usize,
    },
    Progress(&'a Progress<'a>),
    RateDone {
        rate: f64,
        result: &'a BenchResult,
    },
}

/// The caller's listener: shared, so that a target may hand it to tasks it spawns.
pub type Listener = Rc<dyn Fn(SessionEvent)>;

/// Something the benchmark can load with requests.
#[allow(async_fn_in_trait)] // used generically (no `dyn`), on one thread in the browser
pub trait Target {
    /// This target's part of the run record: what ran, where, with which settings.
    fn run_config(&self) -> RunConfig;

    /// Whether the target reports its own steps (the engine does; a server does not), which the
    /// GPU-busy fraction needs.
    fn reports_steps(&self) -> bool;

    /// Sends `plan` (requests at their arrival times, or closed-loop as `spec` says) and records
    /// what happens. `ignore_eos`: generate exactly each request's output length. Requests not
    /// sent because `cancel` was set have no finite arrival time and are dropped by the session.
    async fn run(
        &mut self,
        plan: &[PlannedRequest],
        spec: &WorkloadSpec,
        ignore_eos: bool,
        listener: &Listener,
        cancel: &Rc<Cell<bool>>,
    ) -> Result<(Vec<RequestRecord>, Vec<StepSample>)>;

    /// An error that ends the session after the current rate's result is kept (the engine's GPU
    /// device lost or faulted); `None` for targets that end runs by returning errors.
    fn fault(&self) -> Option<Error> {
        None
    }

    /// Whether the last `run` was ended early because the target could not sustain its rate
    /// (only when `spec.saturation_stop`); taken once.
    fn take_saturation(&mut self) -> Option<Saturation> {
        None
    }

    /// Stop the next runs once their SLO attainment is decided ([`DecideRule`]; `None`: run them
    /// to their end). A target that cannot stop a run on it ignores it: its runs go to their end.
    fn decide_early(&mut self, _rule: Option<DecideRule>) {}

    /// Whether the last `run` was ended once its SLO attainment was decided; taken once.
    fn take_decided(&mut self) -> Option<Decided> {
        None
    }

    /// The server's `/metrics` scraped during the last `run`, if this target scrapes them;
    /// taken once.
    fn take_server_metrics(&mut self) -> Option<ServerMetrics> {
        None
    }

    /// The GPUs' power and energy read during the last `run`, if this target reads them; taken
    /// once.
    fn take_gpu_metrics(&mut self) -> Option<GpuReadings> {
        None
    }
}

/// A borrowed target is a target (an experiment runs a slice of borrowed ones).
impl<T: Target> Target for &mut T {
    fn run_config(&self) -> RunConfig {
        (**self).run_config()
    }

    fn reports_steps(&self) -> bool {
        (**self).reports_steps()
    }

    async fn run(
        &mut self,
        plan: &[PlannedRequest],
        spec: &WorkloadSpec,
        ignore_eos: bool,
        listener: &Listener,
        cancel: &Rc<Cell<bool>>,
    ) -> Result<(Vec<RequestRecord>, Vec<StepSample>)> {
        (**self).run(plan, spec, ignore_eos, listener, cancel).await
    }

    fn fault(&self) -> Option<Error> {
        (**self).fault()
    }

    fn take_saturation(&mut self) -> Option<Saturation> {
        (**self).take_saturation()
    }

    fn decide_early(&mut self, rule: Option<DecideRule>) {
        (**self).decide_early(rule)
    }

    fn take_decided(&mut self) -> Option<Decided> {
        (**self).take_decided()
    }

    fn take_server_metrics(&mut self) -> Option<ServerMetrics> {
        (**self).take_server_metrics()
    }

    fn take_gpu_metrics(&mut self) -> Option<GpuReadings> {
        (**self).take_gpu_metrics()
    }
}
