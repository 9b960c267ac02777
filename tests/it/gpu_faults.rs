//! What the device reports outside error scopes becomes an `Err` of the next step, not a panic
//! (wgpu's default handler panics): a validation error, and a lost device, which ends a benchmark
//! session with the rate it cut short kept. Each test opens its own device, since it breaks it.

use crate::common;

use common::*;
use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;
use tokenmeter::bench::run::target::{Listener, SessionEvent};
use tokenmeter::bench::run::{launch::EngineTarget, session};
use tokenmeter::bench::{self, Arrival, Lang, LenRange, RunConfig, SessionSpec, WorkloadSpec};
use tokenmeter::engine::forward::Batch;
use tokenmeter::engine::{Engine, EngineOptions, ForwardPass};
use tokenmeter::gpu::Gpu;
use tokenmeter::model::checkpoint::Checkpoint;
use tokenmeter::model::source::DirStore;
use tokenmeter::Error;

async fn load() -> (Arc<Gpu>, ForwardPass) {
    let gpu = Arc::new(Gpu::new().await.expect("a GPU adapter (lavapipe: apt install mesa-vulkan-drivers)"));
    let store = DirStore::new(fixture_dir("tiny-gqa-tied")).unwrap();
    let ckpt = Checkpoint::open(&store).await.unwrap();
    let model = ForwardPass::load(gpu.clone(), &ckpt, &EngineOptions::default(), &mut |_, _| {}).await.unwrap();
    (gpu, model)
}

fn one_token() -> Batch {
    Batch { tokens: vec![[1, 0, 0, 0]], logit_rows: vec![0], block_tables: vec![vec![0]], ..Default::default() }
}

#[test]
fn a_validation_error_is_the_next_steps_err() {
    pollster::block_on(async {
        let (gpu, mut model) = load().await;
        model.step(&one_token()).await.expect("a healthy device steps");
        assert!(gpu.fault().is_none());
        // Writing past a buffer's end is a validation error outside any error scope.
        let small = gpu.storage_buffer("too small", 16);
        gpu.queue.write_buffer(&small, 0, &[0u8; 64]);
        let err = model.step(&one_token()).await.expect_err("the step after a validation error fails");
        let Error::Gpu(message) = &err else { panic!("not a GPU error: {err:?}") };
        assert!(!message.contains('\n'), "one line: {message}");
        assert!(gpu.is_faulty() && !gpu.is_lost());
        // It stays failed: the work around the error cannot be trusted.
        assert!(matches!(model.step(&one_token()).await, Err(Error::Gpu(_))));
    });
}

#[test]
fn a_lost_device_ends_the_session_with_what_was_measured() {
    pollster::block_on(async {
        let (gpu, model) = load().await;
        let mut engine = Engine::new(model);
        let workload = WorkloadSpec {
            cancel: None,
            arrival: Arrival::Concurrency,
            rate: 1.0,
            burstiness: 1.0,
            concurrency: 2,
            num_requests: 8,
            input_len: LenRange { min: 4, max: 8 },
            output_len: LenRange { min: 6, max: 6 },
            seed: 3,
            span: Default::default(),
            dataset: None,
            max_concurrency: None,
            saturation_stop: false,
            shared_prefix: None,
            conversations: None,
        };
        let prompt = |p: &bench::PlannedRequest| Ok(bench::random_prompt(workload.seed, p.id, p.prompt_len, 512));
        let mut target =
            EngineTarget::new(&mut engine, prompt, RunConfig { target: "local".into(), ..RunConfig::default() }, None);
        let rates = [1.0, 2.0];
        let s = SessionSpec {
            size_rate: false,
            spec: &workload,
            rates: &rates,
            slo: None,
            slo_text: None,
            lang: Lang::En,
            baseline: false,
            ignore_eos: true,
            cost_per_hour: None,
            phases: Default::default(),
            criteria: Default::default(),
        };
        // The device goes away once the first requests have finished.
        let (doomed, finished_seen) = (gpu.clone(), Rc::new(Cell::new(0)));
        let seen = finished_seen.clone();
        let listener: Listener = Rc::new(move |e| {
            if let SessionEvent::Progress(p) = e {
                seen.set(p.finished);
                if p.finished >= 2 {
                    doomed.device.destroy();
                }
            }
        });
        let cancel = Rc::new(Cell::new(false));
        let mut results = Vec::new();
        let outcome = session::run_into(&mut target, &s, &listener, &cancel, &mut results).await;
        let err = outcome.expect_err("a lost device ends the session with an error");
        assert!(matches!(&err, Error::Gpu(m) if m.contains("destroyed")), "{err}");
        assert!(gpu.is_lost());
        assert_eq!(results.len(), 1, "the rate cut short is kept, the next not started");
        let requests = &results[0].requests;
        let done = requests.iter().filter(|r| r.finish_s.is_some() && r.error.is_none()).count();
        assert!(done >= 2, "what finished before the loss is kept ({done})");
        assert!(requests.iter().any(|r| r.error.as_deref().is_some_and(|e| e.contains("destroyed"))));
        assert_eq!(results[0].metrics.completed, done);
        assert!(finished_seen.get() >= 2);
    });
}
