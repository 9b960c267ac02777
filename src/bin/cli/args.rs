//! `bench`'s arguments, which `compare`, `plan` and the server commands take too: the flags of a
//! run request (read by the library's one parse), the model and engine, and where results go.

use super::model::ModelArgs;
use super::{policy, remote, serving};
use clap::Args;
use tokenmeter::bench::base::field::Field;
use tokenmeter::bench::base::rules::problems_error;
use tokenmeter::bench::request::RunRequest;
use tokenmeter::bench::WorkloadSpec;
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
    /// The shortest measured phase a VALID run may have: seconds from its first to its last
    /// scheduled arrival, or `mlperf` (LoadGen's 600 s). None by default.
    #[arg(long, allow_hyphen_values = true)]
    pub(crate) min_duration_s: Option<String>,
    /// Cancellations as a workload: abort this share of the requests (0 to 1, each drawn from
    /// --seed) --cancel-after-ms after each is sent. Recorded as cancelled (not failed, in no
    /// latency figure): what a user closing a chat does to the target.
    #[arg(long, allow_hyphen_values = true)]
    pub(crate) cancel_share: Option<String>,
    /// With --cancel-share: milliseconds after the send, one value (50) or a range drawn uniformly
    /// per request (50:200).
    #[arg(long, allow_hyphen_values = true)]
    pub(crate) cancel_after_ms: Option<String>,
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
            Field::MinDuration => self.min_duration_s.clone(),
            Field::CancelShare => self.cancel_share.clone(),
            Field::CancelAfter => self.cancel_after_ms.clone(),
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

    /// The one load-time check of these flags' request ([`RunRequest::check_loaded`]), its
    /// workload as attached (`spec`: a dataset's rows measured), on a model of `max_position` tokens.
    pub(crate) fn check_loaded(&self, spec: &WorkloadSpec, max_position: usize) -> Result<()> {
        let request = RunRequest { spec: spec.clone(), ..self.request()? };
        request.check_loaded(max_position).map_err(|p| problems_error(&p))
    }

    /// The run these flags ask for, checked: every problem at once, each naming its flag.
    pub(crate) fn request(&self) -> Result<RunRequest> {
        RunRequest::parse(&|f| self.form(f), None).map_err(|p| problems_error(&p))
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
