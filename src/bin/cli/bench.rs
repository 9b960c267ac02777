//! `tokenmeter bench`: a workload against the engine or a server, the report and the results.

use super::args::{check_writable, BenchArgs};
use super::interrupt::Interrupt;
use super::model::{engine_options, load_timed, open_timed, Opened};
use super::{max_rate, remote, serving};
use std::cell::Cell;
use std::rc::Rc;
use tokenmeter::bench;
use tokenmeter::bench::base::rules::problems_error;
use tokenmeter::bench::measure::energy::NvmlMeter;
use tokenmeter::bench::record::run_config::KernelPath;
use tokenmeter::bench::run::launch::{self, OnEngine, Search};
use tokenmeter::bench::run::target::{Listener, SessionEvent};
use tokenmeter::engine::trial::TrialPlan;
use tokenmeter::engine::ForwardPass;
use tokenmeter::model::checkpoint::TensorProvider;
use tokenmeter::planner::capacity::PlannerGuess;
use tokenmeter::{Error, Result};

pub(crate) async fn main(args: BenchArgs) -> Result<()> {
    use tokenmeter::bench::{RunConfig, SessionSpec, WorkloadSpec};
    let request = args.request()?;
    let rates = request.rates.clone();
    let mut spec = request.spec.clone();
    args.serving.save_format()?;
    let data = args.serving.read()?;
    if data.is_none() {
        bench::plan(&spec)?;
        for &rate in &rates {
            bench::plan(&WorkloadSpec { rate, ..spec.clone() })?;
        }
    }
    let slo = request.slo.clone();
    let lang = args.lang.parse::<bench::Lang>()?;
    let policy = args.policy.policy()?;
    // Where the results go is checked before any work, so that a run is never lost to it.
    for (flag, path) in [("--json", &args.json), ("--csv", &args.csv), ("--html", &args.html)] {
        if let Some(path) = path {
            check_writable(flag, path)?;
        }
    }
    let session = |spec| SessionSpec {
        spec,
        baseline: !args.no_baseline,
        ignore_eos: !args.respect_eos,
        ..request.session(lang)
    };
    let interrupt = Interrupt::on_ctrl_c();
    let listener = interrupt.listener(terminal_listener(lang));
    let mut results = Vec::new();
    if let Some(server) = request.target.server() {
        if args.model.model.is_some() || args.model.synthetic.is_some() {
            return Err(Error::Invalid(
                "--endpoint benchmarks a server: drop --model/--synthetic (text prompts take --tokenizer)".into(),
            ));
        }
        let problems = request.server_problems(args.remote.tokenizer.is_some());
        if !problems.is_empty() {
            return Err(problems_error(&problems));
        }
        let tokenizer = remote::load_tokenizer(&args.remote)?;
        if let Some(data) = &data {
            let named = args.remote.tokenizer.as_ref().map(|p| format!("{} (--tokenizer)", p.display()));
            let measuring = tokenizer.as_ref().zip(named.as_deref());
            let given = args.num_requests.is_some().then_some(spec.num_requests);
            serving::attach(&mut spec, &rates, data, &args.serving, given, measuring, None)?;
        }
        let session = session(&spec);
        let listener =
            if request.search.is_some() { interrupt.listener(max_rate::search_listener()) } else { listener };
        let outcome = remote::run(
            &args.remote,
            server,
            &session,
            tokenizer,
            args.random_prompts,
            &listener,
            &interrupt,
            &mut results,
            request.search,
        )
        .await;
        return finish(&args, &bench::run::max_rate::rates_of(&results), &results, slo.as_ref(), outcome, &interrupt);
    }
    let (loaded, before) = open_timed(&args.model).await?;
    let (cfg, tokenizer) = match &loaded {
        Opened::Disk(c, t) => (c.config.clone(), t.as_ref().as_ref()),
        Opened::Synthetic(s) => (s.config.clone(), None),
    };
    if let Some(data) = &data {
        let name = args.model.model.as_ref().map(|m| format!("the model's tokenizer.json ({})", m.display()));
        let measuring = tokenizer.zip(name.as_deref());
        let given = args.num_requests.is_some().then_some(spec.num_requests);
        serving::attach(&mut spec, &rates, data, &args.serving, given, measuring, Some(cfg.max_position_embeddings))?;
    }
    args.check_loaded(&spec, cfg.max_position_embeddings)?;
    let session = session(&spec);
    let draft = args.model.spec.open_draft(&cfg, tokenizer).await?;
    let trial = TrialPlan::new(&[spec.input_len.min, spec.input_len.max], args.model.max_batch);
    let (model, ready) = load_timed(&args.model, &loaded, before, &trial).await?;
    // The report's head: where the load's time went (the check below is not part of it).
    println!("{}", ready.lines(lang).join("\n"));
    let model = match &loaded {
        Opened::Disk(c, _) => verified(&args, model, c).await?,
        Opened::Synthetic(s) => verified(&args, model, s).await?,
    };
    let options = engine_options(&args.model, args.model.max_batch);
    let mut engine = args.model.spec.engine(model, draft, &options).await?;
    engine.set_policy(policy)?;
    let describe = RunConfig {
        target: "local".into(),
        model: args.model.model.as_ref().map(|p| p.display().to_string()).or(args.model.synthetic.clone()),
        time_to_ready: Some(ready),
        ..RunConfig::default()
    };
    // The engine's GPU's energy through NVML where the driver has it (else "–" and why).
    let meter = NvmlMeter::for_adapter(&engine.model.gpu.adapter.name);
    let on = OnEngine { meter: Some(meter), ..OnEngine::new(&mut engine, tokenizer, args.random_prompts, describe) };
    let guess = PlannerGuess(cfg.clone());
    let search = Search::of(request.search, slo.as_ref(), Some(&guess));
    let listener = if search.is_some() { interrupt.listener(max_rate::search_listener()) } else { listener };
    let outcome = launch::run(on, &session, search, &listener, &interrupt.cancel, &mut results).await;
    finish(&args, &rates, &results, slo.as_ref(), outcome, &interrupt)
}

/// The end of a run, a sweep or a search, however it ended (see [`finish_bench`]).
fn finish(
    args: &BenchArgs,
    rates: &[f64],
    results: &[tokenmeter::bench::BenchResult],
    slo: Option<&tokenmeter::bench::Slo>,
    outcome: Result<Option<bench::run::max_rate::MaxRate>>,
    interrupt: &Interrupt,
) -> Result<()> {
    match outcome {
        Ok(Some(found)) => max_rate::finish_search(args, found, results, interrupt),
        Ok(None) => finish_bench(args, rates, results, slo, Ok(()), interrupt),
        Err(e) => finish_bench(args, &bench::run::max_rate::rates_of(results), results, slo, Err(e), interrupt),
    }
}

/// The loaded engine, checked on this adapter first unless `--no-verify` (`engine::verify`).
async fn verified<P: TensorProvider>(args: &BenchArgs, mut pass: ForwardPass, src: &P) -> Result<ForwardPass> {
    if !args.no_verify {
        let path = KernelPath::of(&pass.kernel_options()).describe();
        eprintln!("{}", tokenmeter::engine::verify::before_run(&mut pass, src, path).await?);
    }
    Ok(pass)
}

/// A run's end, however it ended: what was measured is written first (every finished rate,
/// and the rate Ctrl-C or an error cut short), then the error, if any, is the exit status.
/// A run in which no request succeeded is an error too, its results kept.
pub(crate) fn finish_bench(
    args: &BenchArgs,
    rates: &[f64],
    results: &[tokenmeter::bench::BenchResult],
    slo: Option<&tokenmeter::bench::Slo>,
    outcome: Result<()>,
    interrupt: &Interrupt,
) -> Result<()> {
    let kept = if results.is_empty() { None } else { Some(write_results(args, rates, results, slo)) };
    let written = || {
        let paths: Vec<String> =
            [&args.json, &args.csv, &args.html].into_iter().flatten().map(|p| p.display().to_string()).collect();
        if results.is_empty() {
            "; nothing was measured".to_string()
        } else if paths.is_empty() {
            String::new()
        } else {
            format!("; what was measured is in {}", paths.join(" and "))
        }
    };
    match (outcome, kept) {
        (_, Some(Err(e))) => Err(e),
        (Err(e), Some(Ok(()))) => {
            eprintln!("note: the run stopped at an error{}", written());
            Err(e)
        }
        (Err(e), None) => Err(e),
        (Ok(()), _) if interrupt.fired() => {
            eprintln!("interrupted (Ctrl-C){}", written());
            Err(Error::Cancelled)
        }
        (Ok(()), _) => {
            if let Some(none) = tokenmeter::bench::result::NoneSucceeded::of(results) {
                return Err(Error::Invalid(format!("{}{}", none.text(tokenmeter::bench::Lang::En), written())));
            }
            Ok(())
        }
    }
}

/// Prints the baseline, a progress bar per rate and each rate's report, as a session goes.
pub(crate) fn terminal_listener(lang: tokenmeter::bench::Lang) -> Listener {
    let rate = Cell::new(0.0);
    let last_shown = Cell::new(usize::MAX);
    Rc::new(move |event| match event {
        SessionEvent::WarmedUp { requests, seconds } => {
            eprintln!("warm-up: {requests} requests shaped like the workload's in {seconds:.1} s (not measured)")
        }
        SessionEvent::Baseline(b) => match &b.error {
            Some(e) => eprintln!("warning: {e}; the run goes on, without a diagnosis"),
            None => eprintln!(
                "baseline (median of {} requests alone): TTFT {:.1} ms, TPOT {:.2} ms",
                b.requests, b.ttft_ms, b.tpot_ms
            ),
        },
        SessionEvent::RateStarted { rate: r, .. } => {
            rate.set(r);
            last_shown.set(usize::MAX);
        }
        SessionEvent::Progress(p) => {
            // At each whole percent (every request up to 100 of them), so that a plan of a million
            // requests writes a hundred lines to a log, not one a step.
            let percent = p.finished * 100 / p.total.max(1);
            if percent != last_shown.get() {
                last_shown.set(percent);
                let bar = "#".repeat(30 * p.finished / p.total.max(1));
                eprint!("\rrate {}: [{bar:<30}] {}/{}", rate.get(), p.finished, p.total);
            }
        }
        SessionEvent::RateDone { result, .. } => {
            eprintln!();
            let measured = tokenmeter::bench::Measured::of(&result.config);
            let report = tokenmeter::bench::text_report_for(&result.metrics, result.diagnosis.as_ref(), lang, measured);
            print!("{report}");
            serving::warnings(result, lang);
        }
    })
}

/// The sweep table (several rates), the results JSON and the per-request CSV.
pub(crate) fn write_results(
    args: &BenchArgs,
    rates: &[f64],
    results: &[tokenmeter::bench::BenchResult],
    slo: Option<&tokenmeter::bench::Slo>,
) -> Result<()> {
    if results.len() > 1 {
        print!("{}", sweep_table(rates, results, slo));
    }
    // Each result records the request that made it, to be run again.
    let recorded: Vec<tokenmeter::bench::BenchResult>;
    let results = match &args.saved {
        Some(saved) => {
            recorded = results
                .iter()
                .cloned()
                .map(|mut r| {
                    r.config.request = Some(saved.clone());
                    r
                })
                .collect();
            &recorded[..]
        }
        None => results,
    };
    if let Some(path) = &args.json {
        let json = if args.serving.save_format()? == serving::SaveFormat::Vllm {
            // vLLM's layout: one object per rate, one per line (as its --append-result).
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
            let date = tokenmeter::bench::present::vllm::date_of_unix(now);
            let lines: Vec<String> =
                results.iter().map(|r| tokenmeter::bench::present::vllm::result_json(r, &date).to_string()).collect();
            Ok(lines.join("\n") + "\n")
        } else if results.len() == 1 {
            serde_json::to_string_pretty(&results[0])
        } else {
            serde_json::to_string_pretty(&results)
        }
        .expect("serialisable");
        std::fs::write(path, json)
            .map_err(|e| Error::Io { path: path.display().to_string(), message: e.to_string() })?;
    }
    if let Some(path) = &args.csv {
        let rows: Vec<_> = results.iter().flat_map(|r| r.requests.iter().cloned()).collect();
        std::fs::write(path, tokenmeter::bench::csv(&rows))
            .map_err(|e| Error::Io { path: path.display().to_string(), message: e.to_string() })?;
    }
    if let Some(path) = &args.html {
        // The language was checked when the run began.
        let lang = args.lang.parse().unwrap_or_default();
        let model = results[0].config.model.clone().unwrap_or_else(|| "endpoint".to_string());
        let runs: Vec<(String, &tokenmeter::bench::BenchResult)> =
            rates.iter().zip(results).map(|(rate, r)| (format!("{model} · rate {rate} req/s"), r)).collect();
        std::fs::write(path, tokenmeter::bench::present::html::html_report(&runs, lang))
            .map_err(|e| Error::Io { path: path.display().to_string(), message: e.to_string() })?;
    }
    Ok(())
}

/// Rate -> throughput and latency table, and the knee: the highest rate whose p99 TTFT meets the
/// SLO (with one), or the last rate before output throughput stops rising by 5%.
pub(crate) fn sweep_table(
    rates: &[f64],
    results: &[tokenmeter::bench::BenchResult],
    slo: Option<&tokenmeter::bench::Slo>,
) -> String {
    let mut out = String::from("\n========== Sweep ==========\n");
    // With a price (--cost-per-hour), what a million output tokens cost at each rate.
    let priced = results.iter().any(|r| r.metrics.cost.is_some());
    out += &format!(
        "{:>8} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>9}{}\n",
        "rate",
        "out tok/s",
        "req/s",
        "TTFT p50",
        "TTFT p99",
        "TPOT p50",
        "TPOT p99",
        "goodput",
        if priced { format!(" {:>10}", "cost/Mtok") } else { String::new() }
    );
    for (rate, r) in rates.iter().zip(results) {
        let m = &r.metrics;
        let cost = match &m.cost {
            Some(c) if c.per_million_output_tokens.is_finite() => format!(" {:>10.3}", c.per_million_output_tokens),
            Some(_) => format!(" {:>10}", "-"),
            None => String::new(),
        };
        out += &format!(
            "{:>8} {:>10.1} {:>10.2} {:>10.1} {:>10.1} {:>10.2} {:>10.2} {:>9}{cost}\n",
            if rate.is_infinite() { "inf".to_string() } else { format!("{rate}") },
            m.output_throughput,
            m.request_throughput,
            m.ttft_ms.p50,
            m.ttft_ms.p99,
            m.tpot_ms.p50,
            m.tpot_ms.p99,
            m.goodput.map_or("-".to_string(), |g| format!("{g:.2}"))
        );
    }
    use tokenmeter::bench::verdict::sweep::{knee, KneeReason};
    let runs: Vec<_> = results.iter().map(|r| &r.metrics).collect();
    let knee = knee(&runs, slo.and_then(|s| s.ttft_ms)).map(|(i, reason)| {
        let why = match reason {
            KneeReason::MeetsTtftSlo => "highest rate meeting the p99 TTFT SLO",
            KneeReason::ThroughputFlattens => "throughput stops rising past this rate",
            KneeReason::LastSustained => "the highest rate served without a growing queue",
            KneeReason::BelowLowest => "below this rate: even the lowest rate grew a queue",
        };
        (i, why)
    });
    match knee {
        Some((i, why)) => out += &format!("knee: rate {} ({why})\n", rates[i]),
        None => out += "knee: no rate meets the SLO\n",
    }
    out
}
