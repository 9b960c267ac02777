//! `tokenmeter plan`: `bench`'s workload on the engine's own scheduler, block allocator and
//! batcher loop, timed by a step-cost model fitted on a saved run's steps, on a virtual clock
//! ([`tokenmeter::planner`]). Same report, JSON, CSV and HTML as `bench`, labelled simulated.

use super::args::BenchArgs;
use super::bench::{finish_bench, terminal_listener};
use super::interrupt::Interrupt;
use super::model::{engine_options, load, open, Opened};
use super::serving;
use clap::Args;
use tokenmeter::bench::base::rules::problems_error;
use tokenmeter::bench::request::RunRequest;
use tokenmeter::bench::run::launch::{self, OnEngine};
use tokenmeter::bench::run::session::run_into;
use tokenmeter::bench::run::target::Listener;
use tokenmeter::bench::verdict::sweep::SloCrossing;
use tokenmeter::bench::{self, BenchResult, PromptSource, RunConfig, SessionSpec, Slo, TokenTimes};
use tokenmeter::engine::{Engine, SamplingParams};
use tokenmeter::model::Qwen3Config;
use tokenmeter::planner::{self, CostModel, Fleet, FleetTarget, Router, SimExecutor};
use tokenmeter::{Error, Result};

#[derive(Args)]
pub(crate) struct PlanArgs {
    /// A `bench --json` results file of this engine (one rate or a sweep): its steps fit the
    /// cost model, and its model, adapter and kernel path are what the plan describes.
    #[arg(long, conflicts_with = "calibrate")]
    pub(crate) from: Option<std::path::PathBuf>,
    /// Fit the cost model on steps measured now instead: a designed set of decode batches (1 to
    /// --max-batch, at contexts 16 and 256) and prefills (16 tokens to --max-batched-tokens) on
    /// this GPU, with the model, weights and kernel flags given (planner::calibrate).
    #[arg(long)]
    pub(crate) calibrate: bool,
    /// Run the saved run's own workload, engine sizes, policy and rates (ignoring the workload
    /// and engine flags), and print predicted beside measured for each rate.
    #[arg(long, conflicts_with = "calibrate")]
    pub(crate) replay: bool,
    /// Replicas of the engine behind a router, each with its own batcher and KV cache, on one
    /// virtual timeline (open-loop arrivals).
    #[arg(long, default_value_t = 1, allow_negative_numbers = true,
          value_parser = |s: &str| tokenmeter::limits::parse_count(s, 1, tokenmeter::limits::MAX_REPLICAS))]
    pub(crate) replicas: usize,
    /// How a request picks its replica: round-robin, least-outstanding, prefix-affinity.
    #[arg(long, default_value = "least-outstanding")]
    pub(crate) router: String,
    /// The fewest replicas that serve --rate (one rate) with at least --attainment of the
    /// requests within every --slo: doubling from one, then bisecting; then that fleet's report.
    #[arg(long, requires = "slo")]
    pub(crate) find_replicas: bool,
    /// Fleets: what each request keeps of its tokens' times: every (ITL and the tokens-over-time
    /// series exact) or summary (its first token's and finish's times and its token count, so a
    /// million requests fit in memory: ITL "–", TTFT, TPOT and E2E exact). Default: every up to
    /// 100,000 requests a rate, summary above.
    #[arg(long)]
    pub(crate) token_times: Option<String>,
    #[command(flatten)]
    pub(crate) bench: BenchArgs,
}

/// `--calibrate`: the designed steps on this GPU with the flags' model and engine; the cost model
/// fitted on them, and the run record a `bench` of that engine would write.
async fn calibrated(b: &BenchArgs) -> Result<(CostModel, RunConfig)> {
    let opened = open(&b.model).await?;
    let model = match &opened {
        Opened::Disk(c, _) => load(&b.model, c).await?,
        Opened::Synthetic(s) => load(&b.model, s).await?,
    };
    let max_context = model.cfg.max_position_embeddings;
    let mut engine = Engine::new(model);
    engine.set_policy(b.policy.policy()?)?;
    let design = planner::calibrate::Design::for_limits(&engine.model.limits, max_context);
    eprintln!(
        "calibrating: decode batches {:?} at contexts {:?}, {} steps each; prefills {:?}; each batch beside a \
         {}-token prefill",
        design.batches, design.contexts, design.decode_steps, design.prefills, design.mixed_prompt
    );
    let steps = planner::calibrate::calibrate(&mut engine, &design, &mut |line| eprintln!("  {line}")).await?;
    let adapter = engine.model.gpu.adapter.name.clone();
    let rule = Some(engine.model.kernel_options().matmul_rule());
    let cost = CostModel::fit(&steps, rule, &format!("a calibration on {adapter}, just now"))?;
    let describe = RunConfig {
        target: "local".into(),
        model: b.model.model.as_ref().map(|p| p.display().to_string()).or(b.model.synthetic.clone()),
        ..RunConfig::default()
    };
    Ok((cost, tokenmeter::bench::run::launch::engine_run_config(&engine, describe)))
}

/// The step-cost model: fitted on a saved run's steps (`--from`, with that run's record and
/// results) or on steps measured now (`--calibrate`); and where it came from.
async fn cost_model(args: &PlanArgs) -> Result<(CostModel, RunConfig, Vec<BenchResult>, String)> {
    Ok(match &args.from {
        Some(from) => {
            let source = from.display().to_string();
            let saved = super::compare::read_results(from)?;
            let steps = planner::measured_steps(&saved, &source)?;
            let rule = saved[0].config.kernels.as_ref().and_then(|k| k.matmul_rule());
            let cost = CostModel::fit(&steps, rule, &source)?;
            (cost, saved[0].config.clone(), saved, source)
        }
        None => {
            let (cost, measured) = calibrated(&args.bench).await?;
            let source = cost.source.clone();
            (cost, measured, Vec::new(), source)
        }
    })
}

/// Without --model or --synthetic, the saved run's model (its shape decides the prompts'
/// vocabulary and context).
fn saved_model(b: &mut BenchArgs, measured: &RunConfig, source: &str) -> Result<()> {
    if b.model.model.is_none() && b.model.synthetic.is_none() {
        match &measured.model {
            Some(name) if Qwen3Config::preset(name).is_some() => b.model.synthetic = Some(name.clone()),
            Some(dir) if std::path::Path::new(dir).is_dir() => b.model.model = Some(dir.into()),
            Some(other) => {
                return Err(Error::Invalid(format!(
                    "{source} ran the model {other:?}, which is not here: pass --model DIR or --synthetic NAME"
                )))
            }
            None => {}
        }
    }
    Ok(())
}

/// What a plan simulates.
struct Simulated {
    rates: Vec<f64>,
    spec: bench::WorkloadSpec,
    limits: tokenmeter::engine::forward::EngineLimits,
    policy: tokenmeter::engine::Policy,
    slo_text: Option<String>,
    phases: bench::record::phases::Phases,
    random_prompts: bool,
    ignore_eos: bool,
}

/// `--replay`: the saved run as it was (its workload, engine sizes, policy and rates).
fn replayed(
    measured: &RunConfig,
    measured_limits: tokenmeter::engine::forward::EngineLimits,
    saved: &[BenchResult],
    source: &str,
) -> Result<Simulated> {
    let Some(spec) = measured.workload.clone() else {
        return Err(Error::Invalid(format!("{source}: the run recorded no workload")));
    };
    if spec.dataset.is_some() {
        return Err(Error::Invalid(format!(
            "{source} ran a dataset's requests: plan it without --replay, with the same --dataset"
        )));
    }
    let rates: Vec<f64> = saved.iter().map(|r| r.config.workload.as_ref().map_or(spec.rate, |w| w.rate)).collect();
    Ok(Simulated {
        rates,
        spec,
        limits: measured_limits,
        policy: measured.scheduler.unwrap_or_default(),
        slo_text: measured.slo.clone(),
        phases: measured.phases.unwrap_or_default(),
        random_prompts: measured.prompts.as_deref() == Some("token ids"),
        ignore_eos: measured.ignore_eos.unwrap_or(true),
    })
}

/// The flags' workload and engine (bench's defaults where unset), on the saved run's cost model.
fn from_flags(
    b: &BenchArgs,
    request: &RunRequest,
    measured: &RunConfig,
    measured_limits: &tokenmeter::engine::forward::EngineLimits,
    cfg: &Qwen3Config,
) -> Result<Simulated> {
    let options = engine_options(&b.model, b.model.max_batch);
    let measured_format = measured.kernels.as_ref().map(|k| k.weight_format.as_str());
    if measured_format.is_some_and(|f| f != options.weights.name()) {
        return Err(Error::Invalid(format!(
            "--weights {}: the cost model was measured with {} weights; plan from a run with --weights {}",
            options.weights.name(),
            measured_format.unwrap_or("?"),
            options.weights.name()
        )));
    }
    Ok(Simulated {
        rates: request.rates.clone(),
        spec: request.spec.clone(),
        limits: planner::limits_for(&options, measured_limits, cfg)?,
        policy: request.policy,
        slo_text: request.slo_text.clone(),
        phases: request.phases,
        random_prompts: b.random_prompts,
        ignore_eos: !b.respect_eos,
    })
}

/// The fewest replicas whose `trial` attainment meets `attainment`: doubling from one, then
/// bisecting in (hi / 2, hi] (attainment grows with replicas, as a queue's wait falls).
async fn fewest_replicas(
    trial: impl AsyncFn(usize) -> Result<f64>,
    attainment: f64,
    rate: f64,
    interrupt: &Interrupt,
) -> Result<usize> {
    let meets = |attained: f64| attained >= attainment;
    let mut hi = 1;
    while !meets(trial(hi).await?) {
        if interrupt.fired() {
            return Err(Error::Cancelled);
        }
        if hi >= tokenmeter::limits::MAX_REPLICAS {
            return Err(Error::Invalid(format!(
                "{} replicas do not serve {rate} req/s within the SLO",
                tokenmeter::limits::MAX_REPLICAS
            )));
        }
        hi = (hi * 2).min(tokenmeter::limits::MAX_REPLICAS);
    }
    let mut lo = hi / 2;
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        if meets(trial(mid).await?) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Ok(hi)
}

/// `--replay`: predicted beside measured at each rate, and the knee by the SLO where TTFT p99
/// reaches it, interpolated between the rates run.
fn print_agreement(saved: &[BenchResult], results: &[BenchResult], rates: &[f64], slo: Option<&Slo>, source: &str) {
    for (measured, predicted) in saved.iter().zip(results) {
        let rate = predicted.config.workload.as_ref().map_or(f64::NAN, |w| w.rate);
        println!("\npredicted beside measured at {rate} req/s ({source}):");
        print!("{}", planner::agreement_table(&planner::agreement(&measured.metrics, &predicted.metrics)));
    }
    // The knee by the SLO: where TTFT p99 reaches it, interpolated between the rates run.
    if let (Some(limit), true) = (slo.and_then(|s| s.ttft_ms), rates.len() > 1 && results.len() == saved.len()) {
        let crossing = |runs: &[BenchResult]| {
            let metrics: Vec<&bench::BenchmarkMetrics> = runs.iter().map(|r| &r.metrics).collect();
            bench::verdict::sweep::slo_crossing(rates, &metrics, limit)
        };
        let (m, p) = (crossing(saved), crossing(results));
        let error = match (m, p) {
            (Some(SloCrossing::At(m)), Some(SloCrossing::At(p))) => format!(" ({:+.1}%)", (p - m) / m * 100.0),
            _ => String::new(),
        };
        let show = |c: Option<SloCrossing>| c.map_or("–".to_string(), |c| c.to_string());
        println!("\nknee, where TTFT p99 reaches {limit} ms: measured {}, predicted {}{error}", show(m), show(p));
    }
}

pub(crate) async fn main(mut args: PlanArgs) -> Result<()> {
    let router = args.router.parse::<Router>()?;
    if args.bench.remote.endpoint.is_some() {
        return Err(Error::Invalid(
            "--endpoint: plan simulates this engine; to predict a server, plan from the server's engine run".into(),
        ));
    }
    if args.from.is_none() && !args.calibrate {
        return Err(Error::Invalid(
            "plan needs a cost model: --from RESULT.json (a saved bench run's steps) or --calibrate (steps measured now)"
                .into(),
        ));
    }
    let (cost, measured, saved, source) = cost_model(&args).await?;
    eprintln!("cost model: {}", cost.describe());
    saved_model(&mut args.bench, &measured, &source)?;
    let b = &args.bench;
    let lang = b.lang.parse::<bench::Lang>()?;
    let request = b.request_at_rates("plan")?;
    for (flag, path) in [("--json", &b.json), ("--csv", &b.csv), ("--html", &b.html)] {
        if let Some(path) = path {
            super::check_writable(flag, path)?;
        }
    }
    let opened = open(&b.model).await?;
    let (cfg, tokenizer) = match &opened {
        Opened::Disk(c, t) => (c.config.clone(), t.as_ref().as_ref()),
        Opened::Synthetic(s) => (s.config.clone(), None),
    };
    let Some(measured_limits) = measured.engine.clone() else {
        return Err(Error::Invalid(format!("{source}: the run recorded no engine limits")));
    };
    // What to simulate: the saved run as it was, or the flags (bench's defaults where unset).
    let Simulated { rates, mut spec, limits, policy, slo_text, phases, random_prompts, ignore_eos } = if args.replay {
        replayed(&measured, measured_limits, &saved, &source)?
    } else {
        from_flags(b, &request, &measured, &measured_limits, &cfg)?
    };
    if let Some(data) = b.serving.read()? {
        let name = b.model.model.as_ref().map(|m| format!("the model's tokenizer.json ({})", m.display()));
        let measuring = tokenizer.zip(name.as_deref());
        let context = Some(cfg.max_position_embeddings);
        let given = b.num_requests.is_some().then_some(spec.num_requests);
        serving::attach(&mut spec, &rates, &data, &b.serving, given, measuring, context)?;
    }
    if !ignore_eos {
        eprintln!("note: the plan does not model EOS: every request runs to its output length");
    }
    // The simulated request (the saved run's with --replay) against the simulated engine.
    let simulated =
        RunRequest { spec: spec.clone(), policy, max_batched_tokens: limits.max_batched_tokens, ..request.clone() };
    simulated.check_loaded(cfg.max_position_embeddings).map_err(|p| problems_error(&p))?;
    let slo = slo_text.as_deref().map(str::parse::<Slo>).transpose()?;
    let session = SessionSpec {
        size_rate: false,
        spec: &spec,
        rates: &rates,
        slo: slo.as_ref(),
        slo_text: slo_text.as_deref(),
        lang,
        baseline: !b.no_baseline,
        ignore_eos,
        cost_per_hour: request.cost_per_hour,
        phases,
        criteria: request.session(lang).criteria,
    };
    let prompts = PromptSource::for_model(&spec, tokenizer, random_prompts, cfg.vocab_size);
    let prompt = |p: &bench::PlannedRequest| prompts.ids(p);
    let describe = RunConfig {
        target: "local".into(),
        model: measured.model.clone(),
        prompts: Some(prompts.kind().to_string()),
        ..RunConfig::default()
    };
    let replica = || -> Result<Engine<SimExecutor>> {
        let mut engine = Engine::new(SimExecutor::new(cfg.clone(), limits.clone(), cost.clone(), measured.clone()));
        engine.set_policy(policy)?;
        Ok(engine)
    };
    let fleet = args.replicas > 1 || args.find_replicas;
    let token_times = match args.token_times.as_deref().map(str::parse::<TokenTimes>).transpose()? {
        Some(_) if !fleet => {
            return Err(Error::Invalid("--token-times is for fleets (--replicas above 1, --find-replicas)".into()))
        }
        Some(t) => t,
        None => TokenTimes::for_requests(spec.num_requests),
    };
    if fleet && token_times == TokenTimes::Summary {
        eprintln!(
            "keeping a summary of each request's tokens (first, finish, count): ITL is not reported \
             (--token-times every keeps each token's time)"
        );
    }
    let interrupt = Interrupt::on_ctrl_c();
    let listener = interrupt.listener(terminal_listener(lang));
    let mut results: Vec<BenchResult> = Vec::new();
    // A fleet of `n`, through the session.
    let fleet_session = async |n: usize, listener: Listener, results: &mut Vec<BenchResult>| -> Result<()> {
        let mut fleet = Fleet::new((0..n).map(|_| replica()).collect::<Result<_>>()?, router)?;
        fleet.token_times = token_times;
        let mut target = FleetTarget {
            fleet: &mut fleet,
            prompt: &prompt,
            sampling: SamplingParams::default(),
            describe: describe.clone(),
        };
        run_into(&mut target, &session, &listener, &interrupt.cancel, results).await
    };
    if args.replay && (args.replicas > 1 || args.find_replicas) {
        return Err(Error::Invalid("--replay predicts the measured run itself: one replica".into()));
    }
    let outcome = if args.find_replicas {
        if rates.len() != 1 {
            return Err(Error::Invalid("--find-replicas: one --rate".into()));
        }
        let quiet: Listener = std::rc::Rc::new(|_| {});
        // The SLO attainment of `n` replicas (0 when the run failed or was cancelled).
        let trial = async |n: usize| -> Result<f64> {
            let mut trial_results = Vec::new();
            fleet_session(n, quiet.clone(), &mut trial_results).await?;
            let m = &trial_results.last().ok_or(Error::Cancelled)?.metrics;
            let attained = m.slo_attainment.unwrap_or(0.0);
            eprintln!(
                "{n} replica{}: {:.1}% of requests within the SLO; TTFT p99 {:.1} ms, TPOT p99 {:.2} ms",
                if n == 1 { "" } else { "s" },
                attained * 100.0,
                m.ttft_ms.p99,
                m.tpot_ms.p99
            );
            Ok(attained)
        };
        let hi = fewest_replicas(trial, request.attainment, rates[0], &interrupt).await?;
        eprintln!(
            "fewest replicas for {} req/s with {:.1}% within the SLO: {hi} (router {})",
            rates[0],
            request.attainment * 100.0,
            router.name()
        );
        fleet_session(hi, listener.clone(), &mut results).await
    } else if args.replicas > 1 {
        fleet_session(args.replicas, listener.clone(), &mut results).await
    } else {
        let mut engine = replica()?;
        // The simulator's replies are not text: no thinking tags to split them by.
        let on =
            OnEngine { replies_are_text: false, ..OnEngine::new(&mut engine, tokenizer, random_prompts, describe) };
        launch::run(on, &session, None, &listener, &interrupt.cancel, &mut results).await.map(|_| ())
    };
    if args.replay {
        print_agreement(&saved, &results, &rates, slo.as_ref(), &source);
    }
    finish_bench(&args.bench, &rates, &results, slo.as_ref(), outcome, &interrupt)
}
