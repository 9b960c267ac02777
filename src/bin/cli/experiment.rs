//! What `compare` of engines and `compare` of servers share: the settings' one workload, the
//! experiment it makes, and the timed runs.

use tokenmeter::bench::run::experiment::{self, Arm, ExperimentSpec};
use tokenmeter::bench::run::target::Listener;
use tokenmeter::bench::{self, Slo, Target, WorkloadSpec};
use tokenmeter::{Error, Result};

use super::args::BenchArgs;

/// The settings run the same workload: the same plan (arrivals, rate, lengths, seed) and the same
/// --slo, --respect-eos and --random-prompts.
pub(crate) fn same_workload(configs: &[(String, &str)], args: &[BenchArgs], specs: &[WorkloadSpec]) -> Result<()> {
    let (first, spec) = (&args[0], &specs[0]);
    for (k, (a, s)) in args.iter().zip(specs).enumerate().skip(1) {
        let name = &configs[k].0;
        if s != spec {
            return Err(Error::Invalid(format!(
                "{name} and {} must run the same workload (arrivals, rate, lengths, seed): {} {spec:?}, {name} {s:?}",
                configs[0].0, configs[0].0
            )));
        }
        if a.slo != first.slo || a.respect_eos != first.respect_eos || a.random_prompts != first.random_prompts {
            return Err(Error::Invalid(format!(
                "{name} and {} must agree on --slo, --respect-eos and --random-prompts (they define the workload)",
                configs[0].0
            )));
        }
    }
    Ok(())
}

/// The experiment the first setting's flags describe (the others agree: [`same_workload`]).
pub(crate) fn experiment_spec<'a>(
    first: &'a BenchArgs,
    spec: &'a WorkloadSpec,
    slo: Option<&'a Slo>,
    repeats: usize,
    lang: bench::Lang,
) -> Result<ExperimentSpec<'a>> {
    Ok(ExperimentSpec {
        spec,
        slo,
        slo_text: first.slo.as_deref(),
        repeats,
        ignore_eos: !first.respect_eos,
        lang,
        warmup: true,
        criteria: first.request()?.session(lang).criteria,
    })
}

/// The timed runs: a warm-up run of each setting, then each in turn `x.repeats` times (a line on
/// stderr after each run), as arms named after the settings.
pub(crate) async fn timed<T: Target>(
    targets: &mut [T],
    configs: &[(String, &str)],
    x: &ExperimentSpec<'_>,
) -> Result<Vec<Arm>> {
    let cancel = std::rc::Rc::new(std::cell::Cell::new(false));
    let (total, done) = (configs.len() * x.repeats, std::cell::Cell::new(0));
    eprintln!("warm-up: one run per setting, not compared");
    let progress: Listener = std::rc::Rc::new(|_| {});
    let runs = experiment::run_round_robin(targets, x, &progress, &cancel, &mut |k, i, result| {
        done.set(done.get() + 1);
        let m = &result.metrics;
        eprintln!(
            "[{}/{total}] {} run {}: output {:.1} tok/s, TTFT p50 {:.1} ms, TPOT p50 {:.2} ms, {} of {} requests completed",
            done.get(),
            configs[k].0,
            i + 1,
            m.output_throughput,
            m.ttft_ms.p50,
            m.tpot_ms.p50,
            m.completed,
            m.num_requests
        );
    })
    .await?;
    Ok(configs.iter().zip(runs).map(|((name, _), runs)| Arm { name: name.clone(), runs }).collect())
}
