//! `tokenmeter bench --endpoint URL`: the benchmark against an OpenAI-compatible server. The
//! workload, summary, report and results JSON are the engine's; only the target differs.

use clap::Args;
use tokenmeter::bench::run::launch::{self, Search};
use tokenmeter::bench::run::max_rate::{MaxRate, RateSearch};
use tokenmeter::bench::run::target::Listener;
use tokenmeter::bench::traffic::endpoint::ServerAddress;
use tokenmeter::bench::{self, PlannedRequest, PromptSource, SessionSpec};
use tokenmeter::limits::parse_count;
use tokenmeter::model::Tokenizer;
use tokenmeter::remote::native::{Client, ServerTarget, Tls};
use tokenmeter::remote::{Api, ApiKey, Endpoint, Prompt, RemoteSetup};
use tokenmeter::{Error, Result};

#[derive(Args)]
pub struct RemoteArgs {
    /// Benchmark an OpenAI-compatible server instead of the in-process engine: its API root,
    /// e.g. http://127.0.0.1:8000/v1.
    #[arg(long)]
    pub endpoint: Option<String>,
    /// The model name to send (default: the only one GET /v1/models lists).
    #[arg(long, requires = "endpoint")]
    pub served_model: Option<String>,
    /// Environment variable holding the API key (sent as a bearer token; never printed or saved).
    #[arg(long, requires = "endpoint")]
    pub api_key_env: Option<String>,
    /// completions (token-id or text prompts) or chat (text prompts).
    #[arg(long, default_value = "completions", requires = "endpoint")]
    pub api: String,
    /// tokenizer.json of the served model, for text prompts (built-in texts cut to --input-len).
    #[arg(long, requires = "endpoint")]
    pub tokenizer: Option<std::path::PathBuf>,
    /// Seconds each request may take, from sending to its last chunk.
    #[arg(long, default_value_t = 300.0, allow_negative_numbers = true)]
    pub timeout_s: f64,
    /// PEM file of certificates to trust for an https endpoint, besides the system's roots (a
    /// private CA, a self-signed server).
    #[arg(long, requires = "endpoint")]
    pub ca_cert: Option<std::path::PathBuf>,
    /// Do not verify an https endpoint's certificate (printed, and recorded in the results).
    #[arg(long, requires = "endpoint")]
    pub insecure: bool,
    /// Random prompt ids are drawn below this (default: Qwen's 151,643 regular tokens, or the
    /// tokenizer's vocabulary).
    #[arg(long, requires = "endpoint", allow_negative_numbers = true)]
    pub vocab_size: Option<usize>,
    /// GPUs behind the endpoint (all replicas), for the record and the per-GPU throughput of the
    /// Pareto chart; without it, a server's throughput is per target.
    #[arg(long, requires = "endpoint", allow_negative_numbers = true, value_parser = |s: &str| parse_count(s, 1, 1_000_000))]
    pub gpus: Option<usize>,
    /// on or off: ask the server's chat template to turn a thinking model's thinking on or off
    /// (`chat_template_kwargs.enable_thinking`; --api chat only); recorded. Default: the server's.
    #[arg(long, requires = "endpoint")]
    pub thinking: Option<String>,
    /// Scrape the server's Prometheus /metrics during each rate (every 0.5 s: queue, running
    /// requests, KV cache in use, preemptions, prefix-cache hits, where it exposes them), kept in
    /// the results and shown beside the latencies. The URL is the endpoint's origin + /metrics.
    #[arg(long, requires = "endpoint")]
    pub server_metrics: bool,
    /// Scrape this URL instead (implies --server-metrics).
    #[arg(long, requires = "endpoint")]
    pub server_metrics_url: Option<String>,
    /// A DCGM exporter's Prometheus URL (e.g. http://gpu-host:9400/metrics), scraped with the
    /// server's /metrics during each rate: the GPUs' average power, energy and joules per output
    /// token, beside the latencies. An engine run reads its own GPU through NVML, when present.
    #[arg(long, requires = "endpoint")]
    pub gpu_metrics_url: Option<String>,
}

/// Where `--server-metrics` scrapes, if it was asked for.
fn server_metrics_url(args: &RemoteArgs) -> Option<String> {
    match (&args.server_metrics_url, args.server_metrics, &args.endpoint) {
        (Some(url), _, _) => Some(url.clone()),
        (None, true, Some(endpoint)) => Some(tokenmeter::bench::measure::server_metrics::default_url(endpoint)),
        _ => None,
    }
}

/// The session against the server at `url`: the CLI's part is parsing the flags, building the
/// prompts and naming the model; the run itself is [`bench::run::session::run_into`], into `results`
/// (kept by the caller whatever happens).
#[allow(clippy::too_many_arguments)] // the CLI's parsed pieces, passed through once
pub async fn run(
    args: &RemoteArgs,
    server: &ServerAddress,
    session: &SessionSpec<'_>,
    tokenizer: Option<Tokenizer>,
    random_prompts: bool,
    listener: &Listener,
    interrupt: &super::Interrupt,
    results: &mut Vec<bench::BenchResult>,
    search: Option<RateSearch>,
) -> Result<Option<MaxRate>> {
    let mut client = connect(args, server, tokenizer.is_some())?;
    client.interrupt_on(interrupt.flag.clone());
    let prompts = prompt_source(args, session.spec, tokenizer.as_ref(), random_prompts, &client);
    let prompt = |p: &PlannedRequest| prompts.prompt(p);
    let mut target = ServerTarget { client: &client, setup: setup(args, &prompt, prompts.kind()) };
    // `--rate max`: a short rising sweep from the first run's rate, then narrowing.
    let search = Search::of(search, session.slo, None);
    let outcome = launch::drive(&mut target, session, search, listener, &interrupt.cancel, results).await;
    for r in results.iter() {
        warn_about_usage(&r.requests, prompts.kind() == "token ids");
    }
    outcome
}

/// A client for `server` (the run request's), with the key, TLS, timeout and options of `args`, its
/// model named (`--served-model`, or the only one the server lists); `has_tokenizer`:
/// `--tokenizer` was given (chat needs it).
pub fn connect(args: &RemoteArgs, server: &ServerAddress, has_tokenizer: bool) -> Result<Client> {
    let (base_url, api) = (server.base_url.clone(), server.api);
    tokenmeter::limits::number("--timeout-s", args.timeout_s, 1e-3, tokenmeter::limits::MAX_TIMEOUT_S)?;
    let api_key = match &args.api_key_env {
        Some(var) => Some(std::env::var(var).ok().and_then(ApiKey::new).ok_or_else(|| {
            Error::Invalid(format!("--api-key-env {var}: that environment variable is not set or empty"))
        })?),
        None => None,
    };
    // Chat sends text: its built-in prompts need the tokenizer, whatever --random-prompts says.
    if api == Api::Chat && !has_tokenizer {
        return Err(Error::Invalid(
            "--api chat sends text: pass --tokenizer tokenizer.json (the served model's) to cut the built-in prompts \
             to --input-len"
                .into(),
        ));
    }
    if args.vocab_size == Some(0) {
        return Err(Error::Invalid("--vocab-size: must be at least 1".into()));
    }
    let tls = Tls { ca_cert: args.ca_cert.clone(), insecure: args.insecure };
    let thinking = match args.thinking.as_deref() {
        None => None,
        Some("on") => Some(true),
        Some("off") => Some(false),
        Some(other) => return Err(Error::Invalid(format!("--thinking {other:?}: expected on or off"))),
    };
    if thinking.is_some() && api != Api::Chat {
        return Err(Error::Invalid("--thinking switches the chat template: use it with --api chat".into()));
    }
    let endpoint = Endpoint { base_url, model: String::new(), api, api_key, thinking };
    let mut client = Client::with_tls(endpoint, tls)?;
    let model = served_model(&client, server.served_model.as_deref(), args.timeout_s)?;
    client.set_model(model.clone());
    eprintln!("target: {} ({}, model {model:?})", client.endpoint().base_url, api.path());
    if client.tls().is_some_and(|tls| tls.insecure) {
        eprintln!("warning: --insecure: the server's certificate is not verified (recorded in the results)");
    }
    Ok(client)
}

/// What `client`'s prompts are made with: token ids for completions with `--random-prompts`,
/// else text (through the tokenizer).
pub fn prompt_source<'a>(
    args: &RemoteArgs,
    spec: &'a bench::WorkloadSpec,
    tokenizer: Option<&'a Tokenizer>,
    random_prompts: bool,
    client: &Client,
) -> PromptSource<'a> {
    let random_ids = random_prompts && client.endpoint().api == Api::Completions;
    PromptSource::for_server(spec, tokenizer, random_ids, args.vocab_size)
}

/// How a run sends its requests to the server: `prompt` makes each one's prompt.
pub fn setup<'a>(
    args: &RemoteArgs,
    prompt: &'a dyn Fn(&PlannedRequest) -> Result<Prompt>,
    prompts: &'static str,
) -> RemoteSetup<'a> {
    RemoteSetup {
        prompt,
        timeout_s: args.timeout_s,
        prompts,
        client: "native",
        gpus: args.gpus,
        server_metrics: server_metrics_url(args),
        gpu_metrics: args.gpu_metrics_url.clone(),
        decide: None,
    }
}

/// `--tokenizer`, read and parsed.
pub fn load_tokenizer(args: &RemoteArgs) -> Result<Option<Tokenizer>> {
    match &args.tokenizer {
        Some(path) => {
            let bytes = tokenmeter::limits::read_file(path, tokenmeter::limits::TOKENIZER_JSON_MAX_BYTES)?;
            Ok(Some(Tokenizer::from_bytes(&bytes)?))
        }
        None => Ok(None),
    }
}

/// `--served-model`, or the only model the server lists. A name the server does not list is
/// only a warning: some servers answer to any name.
fn served_model(client: &Client, named: Option<&str>, timeout_s: f64) -> Result<String> {
    let listed = client.models(timeout_s.min(30.0));
    match (named.map(str::to_string), listed) {
        (Some(name), Ok(models)) => {
            if !models.contains(&name) {
                eprintln!("warning: the server lists {models:?}, not {name:?}");
            }
            Ok(name)
        }
        (Some(name), Err(e)) => {
            eprintln!("warning: {e}");
            Ok(name)
        }
        (None, Ok(models)) if models.len() == 1 => Ok(models[0].clone()),
        (None, Ok(models)) => Err(Error::Invalid(format!(
            "the server lists {} models {models:?}: pick one with --served-model",
            models.len()
        ))),
        (None, Err(e)) => Err(e),
    }
}

/// Prompt lengths as the server counted them, against the plan (exact for token ids; text goes
/// through the server's tokenizer and, for chat, its template).
fn warn_about_usage(records: &[bench::RequestRecord], ids: bool) {
    let counted: Vec<(usize, usize)> =
        records.iter().filter_map(|r| r.server_prompt_len.map(|server| (r.prompt_len, server))).collect();
    let (planned, server) = counted
        .iter()
        .fold((0usize, 0usize), |(p, s), &(planned, server)| (p.saturating_add(planned), s.saturating_add(server)));
    let differ = counted.iter().filter(|(planned, server)| planned != server).count();
    if differ > 0 {
        let note = if ids { "warning" } else { "note (text prompts are re-tokenized by the server)" };
        eprintln!(
            "{note}: {differ} of {} requests had a different prompt length by the server's usage: {server} tokens in \
             all vs {planned} planned",
            counted.len()
        );
    }
}
