//! `tokenmeter bench`: a workload against the engine or a server, the report and the results.

use super::model::{engine_options, load, open, ModelArgs, Opened};
use super::{max_rate, policy, remote, serving};
use clap::Args;
use std::cell::Cell;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tokenmeter::bench;
use tokenmeter::bench::base::field::Field;
use tokenmeter::bench::base::rules::Problem;
use tokenmeter::bench::measure::energy::NvmlMeter;
use tokenmeter::bench::record::run_config::KernelPath;
use tokenmeter::bench::request::RunRequest;
use tokenmeter::bench::run::target::{Listener, SessionEvent};
use tokenmeter::engine::ForwardPass;
use tokenmeter::model::checkpoint::TensorProvider;
use tokenmeter::{Error, Result};

#[derive(Args)]
pub(crate) struct BenchArgs {
    #[command(flatten)]
    pub(crate) model: ModelArgs,
    #[command(flatten)]
    pub(crate) policy: policy::PolicyArgs,
    #[command(flatten)]
    pub(crate) remote: Box<remote::RemoteArgs>, // boxed: keeps `Command` small
    #[command(flatten)]
    pub(crate) serving: Box<serving::ServingArgs>,
    // The run request's flags: text, read and checked by the library (`RunRequest::parse`) with
    // the page's form, so both edges give the same messages; the defaults are the library's.
    /// poisson, gamma, constant, sequential (next request when the previous finishes), concurrency.
    #[arg(long, default_value = Field::Arrival.default_value())]
    pub(crate) arrival: String,
    /// Requests per second ("inf": all at once). Several (1,2,4,inf) run a sweep. "max" searches
    /// the highest rate at which --attainment of the requests meet every --slo, by real runs.
    #[arg(long, default_value = Field::Rate.default_value(), allow_hyphen_values = true)]
    pub(crate) rate: String,
    /// Open loops: "drawn" (request 0 at once, the last around (N-1)/rate by chance) or
    /// "exact" (a gap before each request, rescaled so the last arrives at exactly N/rate).
    #[arg(long, default_value = Field::ArrivalSpan.default_value())]
    pub(crate) arrival_span: String,
    /// Gamma shape (1 = Poisson; larger = more regular).
    #[arg(long, default_value = Field::Burstiness.default_value(), allow_hyphen_values = true)]
    pub(crate) burstiness: String,
    /// Closed-loop users for --arrival concurrency.
    #[arg(long, default_value = Field::Concurrency.default_value(), allow_hyphen_values = true)]
    pub(crate) concurrency: String,
    /// Requests per rate (default 32; with --dataset, every usable row).
    #[arg(long, allow_hyphen_values = true)]
    pub(crate) num_requests: Option<String>,
    /// Prompt tokens: N or MIN:MAX.
    #[arg(long, default_value = Field::InputLen.default_value(), allow_hyphen_values = true)]
    pub(crate) input_len: String,
    /// Output tokens: N or MIN:MAX.
    #[arg(long, default_value = Field::OutputLen.default_value(), allow_hyphen_values = true)]
    pub(crate) output_len: String,
    /// Every prompt starts with the same N tokens (a shared "system prompt"), counted in
    /// --input-len; 0 (default): no shared prefix.
    #[arg(long, default_value = Field::SharedPrefix.default_value(), allow_hyphen_values = true)]
    pub(crate) shared_prefix_len: String,
    /// Multi-turn conversations: requests grouped into sessions of N or MIN:MAX turns; each turn's
    /// prompt is the conversation so far (the turn before's prompt and reply, then --input-len
    /// new tokens); sessions arrive at --rate (per second), a turn follows the one before after
    /// --think-time-s. `dataset`: a ShareGPT --dataset's whole conversations (each user turn's
    /// text, each answer's length). Against a server, text prompts (--tokenizer): each turn sends
    /// the server's replies back.
    #[arg(long, allow_hyphen_values = true)]
    pub(crate) turns: Option<String>,
    /// With --turns: mean seconds between a reply and the next turn (exponential; 0: at once).
    #[arg(long, default_value = Field::ThinkTime.default_value(), allow_hyphen_values = true)]
    pub(crate) think_time_s: String,
    /// With --shared-prefix-len: G different prefixes, request i taking prefix i mod G.
    #[arg(long, default_value = Field::PrefixGroups.default_value(), allow_hyphen_values = true)]
    pub(crate) prefix_groups: String,
    #[arg(long, default_value = Field::Seed.default_value(), allow_hyphen_values = true)]
    pub(crate) seed: String,
    /// Service-level objectives for goodput, e.g. ttft_ms=200,tpot_ms=50.
    #[arg(long)]
    pub(crate) slo: Option<String>,
    /// The share of requests that must meet every --slo (0 to 1, default 0.99): what `--rate max`
    /// searches for, and `plan --find-replicas`.
    #[arg(long, allow_hyphen_values = true)]
    pub(crate) attainment: Option<String>,
    /// Report language: en or zh.
    #[arg(long, default_value = "en")]
    pub(crate) lang: String,
    /// What the serving hardware costs per hour (any currency): each rate's report, JSON summary
    /// (`cost`) and the sweep table add the cost per million output tokens and per request.
    #[arg(long, allow_hyphen_values = true)]
    pub(crate) cost_per_hour: Option<String>,
    /// Leave the first N requests (by arrival) out of each rate's summary: sent, kept in the
    /// results (`"phase": "warmup"`), not measured.
    #[arg(long, default_value = Field::WarmupRequests.default_value(), allow_hyphen_values = true)]
    pub(crate) warmup_requests: String,
    /// Leave the requests arriving in the first S seconds out of each rate's summary.
    #[arg(long, default_value = Field::WarmupS.default_value(), allow_hyphen_values = true)]
    pub(crate) warmup_s: String,
    /// Leave the requests arriving in the last S seconds of the arrivals out of each rate's summary.
    #[arg(long, default_value = Field::CooldownS.default_value(), allow_hyphen_values = true)]
    pub(crate) cooldown_s: String,
    /// Stop at EOS instead of generating exactly --output-len tokens.
    #[arg(long)]
    pub(crate) respect_eos: bool,
    /// Random token ids even when the model has a tokenizer (default: built-in text prompts).
    #[arg(long)]
    pub(crate) random_prompts: bool,
    /// Measure the engine without first checking it on this adapter (`tokenmeter verify`: its
    /// matmuls and its logits against the CPU; a failure stops the run). Its outcome is recorded.
    #[arg(long)]
    pub(crate) no_verify: bool,
    /// Skip the warm-up and the baseline (the median of three requests alone), and the diagnosis
    /// that needs them.
    #[arg(long)]
    pub(crate) no_baseline: bool,
    /// Run the request a results JSON recorded again (`run_config.request`); flags given beside it
    /// override the saved ones (`--rerun r.json --rate 8`). A dataset run needs the same file.
    #[arg(long)]
    pub(crate) rerun: Option<std::path::PathBuf>,
    /// The request as given, recorded in every result (set by the command line's `main`).
    #[arg(skip)]
    pub(crate) saved: Option<tokenmeter::bench::record::run_config::SavedRequest>,
    /// Write the results JSON (config, summary, diagnosis, every request and step) here
    /// (a sweep writes a list, one result per rate).
    #[arg(long, alias = "out")]
    pub(crate) json: Option<std::path::PathBuf>,
    /// Write one CSV row per request here.
    #[arg(long)]
    pub(crate) csv: Option<std::path::PathBuf>,
    /// Write a self-contained HTML report here (SVG charts, the request timeline, the text
    /// report and the run record; one section per rate), e.g. to attach to a pull request.
    #[arg(long)]
    pub(crate) html: Option<std::path::PathBuf>,
}

impl BenchArgs {
    /// The flags as the run request's form: each field's text as given (`None`: not given).
    pub(crate) fn form(&self, field: Field) -> Option<String> {
        let on = |on: bool| Some(if on { "on" } else { "off" }.to_string());
        let text = |t: &String| Some(t.clone());
        match field {
            Field::Arrival => text(&self.arrival),
            Field::Rate => text(&self.rate),
            Field::ArrivalSpan => text(&self.arrival_span),
            Field::Burstiness => text(&self.burstiness),
            Field::Concurrency => text(&self.concurrency),
            Field::Requests => self.num_requests.clone(),
            Field::InputLen => text(&self.input_len),
            Field::OutputLen => text(&self.output_len),
            Field::Seed => text(&self.seed),
            Field::SharedPrefix => text(&self.shared_prefix_len),
            Field::PrefixGroups => text(&self.prefix_groups),
            Field::Turns => self.turns.clone(),
            Field::ThinkTime => text(&self.think_time_s),
            Field::Slo => self.slo.clone(),
            Field::Attainment => self.attainment.clone(),
            Field::CostPerHour => self.cost_per_hour.clone(),
            Field::WarmupRequests => text(&self.warmup_requests),
            Field::WarmupS => text(&self.warmup_s),
            Field::CooldownS => text(&self.cooldown_s),
            Field::Prompts => Some(if self.random_prompts { "random" } else { "text" }.into()),
            Field::MaxConcurrency => self.serving.max_concurrency.map(|n| n.to_string()),
            Field::SaturationStop => on(!self.serving.no_saturation_stop),
            Field::Dataset => self.serving.dataset.as_ref().map(|p| p.display().to_string()),
            // The target's: a server's (no endpoint: the engine of --model/--synthetic).
            Field::Endpoint => self.remote.endpoint.clone(),
            Field::ServedModel => self.remote.served_model.clone(),
            Field::Api => text(&self.remote.api),
            // The engine's flags, parsed by clap (they are shared with `generate` and `speed`).
            Field::MaxBatch => Some(self.model.max_batch.to_string()),
            Field::MaxBatchedTokens => Some(self.model.max_batched_tokens.to_string()),
            Field::Policy => text(&self.policy.policy),
            Field::ChunkedPrefill => on(!self.policy.no_chunked_prefill),
            Field::PrefillChunk => self.policy.prefill_chunk.map(|n| n.to_string()),
            Field::Weights => Some(self.model.weights.name().to_string()),
            Field::Speculate => None,
            Field::PrefixCache => on(self.model.spec.prefix_cache),
            // The page's two SLO fields; the CLI has --slo.
            Field::SloTtft | Field::SloTpot => None,
        }
    }

    /// The run these flags ask for, checked: every problem at once, each naming its flag.
    pub(crate) fn request(&self) -> Result<RunRequest> {
        RunRequest::parse(&|f| self.form(f), None).map_err(problems_error)
    }

    /// [`BenchArgs::request`] for a command that runs the rates given: `--rate max` is `bench`'s.
    pub(crate) fn request_at_rates(&self, command: &str) -> Result<RunRequest> {
        let request = self.request()?;
        if request.search.is_some() {
            return Err(Error::Invalid(format!("--rate max: searched by tokenmeter bench, not {command}: give rates")));
        }
        Ok(request)
    }
}

/// Every problem of a run request, a line each, naming the flag.
pub(crate) fn problems_error(problems: Vec<Problem>) -> Error {
    Error::Invalid(problems.iter().map(|p| format!("{}: {p}", p.field.flag())).collect::<Vec<_>>().join("\n"))
}

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
            return Err(problems_error(problems));
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
        return match outcome {
            Ok(Some(found)) => max_rate::finish_search(&args, found, &results, &interrupt),
            outcome => finish_bench(
                &args,
                &bench::run::max_rate::rates_of(&results),
                &results,
                slo.as_ref(),
                outcome.map(|_| ()),
                &interrupt,
            ),
        };
    }
    let loaded = open(&args.model).await?;
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
    policy.check_request(spec.input_len.max, spec.output_len.max, args.model.max_batched_tokens)?;
    let session = session(&spec);
    bench::check_context(spec.prompt_range(), spec.output_len, cfg.max_position_embeddings)?;
    let draft = args.model.spec.open_draft(&cfg, tokenizer).await?;
    let model = match &loaded {
        Opened::Disk(c, _) => verified(&args, load(&args.model, c).await?, c).await?,
        Opened::Synthetic(s) => verified(&args, load(&args.model, s).await?, s).await?,
    };
    let options = engine_options(&args.model, args.model.max_batch);
    let mut engine = args.model.spec.engine(model, draft, &options).await?;
    engine.set_policy(policy)?;
    let describe = RunConfig {
        target: "local".into(),
        model: args.model.model.as_ref().map(|p| p.display().to_string()).or(args.model.synthetic.clone()),
        ..RunConfig::default()
    };
    // The engine's GPU's energy through NVML where the driver has it (else "–" and why).
    let prompts = bench::PromptSource::for_model(&spec, tokenizer, args.random_prompts, cfg.vocab_size);
    let meter = NvmlMeter::for_adapter(&engine.model.gpu.adapter.name);
    let mut target = bench::run::session::EngineTarget::for_prompts(&mut engine, &prompts, describe).metered(meter);
    if let (Some(search), Some(slo)) = (request.search, slo.as_ref()) {
        let listener = interrupt.listener(max_rate::search_listener());
        let outcome = tokenmeter::planner::capacity::search_engine(
            &mut target,
            &session,
            search,
            slo,
            &cfg,
            &listener,
            &interrupt.cancel,
            &mut results,
        )
        .await;
        return match outcome {
            Ok(found) => max_rate::finish_search(&args, found, &results, &interrupt),
            Err(e) => {
                finish_bench(&args, &bench::run::max_rate::rates_of(&results), &results, Some(slo), Err(e), &interrupt)
            }
        };
    }
    let outcome =
        bench::run::session::run_into(&mut target, &session, &listener, &interrupt.cancel, &mut results).await;
    finish_bench(&args, &rates, &results, slo.as_ref(), outcome, &interrupt)
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
            let sent: usize = results.iter().map(|r| r.metrics.num_requests).sum();
            if sent > 0 && results.iter().all(|r| r.metrics.completed == 0) {
                let mut kinds = std::collections::BTreeMap::new();
                for (kind, n) in results.iter().flat_map(|r| &r.metrics.errors) {
                    *kinds.entry(kind.as_str()).or_insert(0) += n;
                }
                let kinds: Vec<String> = kinds.iter().map(|(kind, n)| format!("{kind} × {n}")).collect();
                return Err(Error::Invalid(format!(
                    "none of the {sent} requests succeeded ({}){}",
                    kinds.join(", "),
                    written()
                )));
            }
            Ok(())
        }
    }
}

/// `path` can be written (created, or appended to when it exists; nothing is truncated):
/// checked before a run so that its results are not lost at the end.
pub(crate) fn check_writable(flag: &str, path: &std::path::Path) -> Result<()> {
    let invalid = |why: String| Error::Invalid(format!("{flag} {}: {why}", path.display()));
    if path.is_dir() {
        return Err(invalid("is a folder; give a file name".into()));
    }
    let existed = path.exists();
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .map_err(|e| invalid(format!("cannot be written ({e})")))?;
    if !existed {
        let _ = std::fs::remove_file(path);
    }
    Ok(())
}

/// Ctrl-C during `bench`: the first stops the run (the session's `cancel`, and the remote
/// client's own flag, since a server run has no engine steps to notice it at), so that what
/// was measured is written; a second quits at once.
pub(crate) struct Interrupt {
    pub flag: Arc<AtomicBool>,
    pub cancel: Rc<Cell<bool>>,
}

impl Interrupt {
    pub(crate) fn on_ctrl_c() -> Interrupt {
        let flag = Arc::new(AtomicBool::new(false));
        #[cfg(unix)]
        {
            let (ready_tx, ready_rx) = std::sync::mpsc::channel();
            let set = flag.clone();
            std::thread::spawn(move || {
                let Ok(runtime) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
                    return;
                };
                runtime.block_on(async move {
                    use tokio::signal::unix::{signal, SignalKind};
                    let Ok(mut ctrl_c) = signal(SignalKind::interrupt()) else { return };
                    let _ = ready_tx.send(());
                    ctrl_c.recv().await;
                    set.store(true, Ordering::SeqCst);
                    eprintln!("\ninterrupted: stopping and keeping what was measured (Ctrl-C again quits now)");
                    ctrl_c.recv().await;
                    std::process::exit(130);
                });
            });
            // The handler is in place before the run starts.
            let _ = ready_rx.recv_timeout(std::time::Duration::from_secs(2));
        }
        Interrupt { flag, cancel: Rc::new(Cell::new(false)) }
    }

    pub(crate) fn fired(&self) -> bool {
        self.flag.load(Ordering::SeqCst)
    }

    /// `inner`, which also passes a Ctrl-C on to the session (the engine's driver reads
    /// `cancel` after every step).
    pub(crate) fn listener(&self, inner: Listener) -> Listener {
        let (flag, cancel) = (self.flag.clone(), self.cancel.clone());
        Rc::new(move |event| {
            if flag.load(Ordering::SeqCst) {
                cancel.set(true);
            }
            inner(event)
        })
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
