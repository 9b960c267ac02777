//! A run as the user asks for it, from either edge. The CLI's flags and the page's form are each
//! only a map from [`Field`] to the text typed; [`RunRequest::parse`] reads and checks that text
//! once, here, and returns the run or **every** problem, each on its field
//! ([`crate::bench::rules`]), so the CLI names the flag and the page puts the message under its
//! input, in either language.

use std::cell::RefCell;

use serde::{Deserialize, Serialize};

use crate::bench::max_rate::RateSearch;
use crate::bench::phases::Phases;
use crate::bench::rules::{Problem, Rule};
use crate::bench::session::SessionSpec;
use crate::bench::sweep::parse_rates;
use crate::bench::target::{Api, BaseUrl, RunTarget, ServerTarget};
use crate::bench::workload::{context_rule, Arrival, ArrivalSpan, Conversations, LenRange, SharedPrefix, WorkloadSpec};
use crate::bench::{Lang, Slo};
use crate::engine::{Order, Policy, Speculation};
use crate::gpu::WeightFormat;
use crate::limits;

/// A field of a run request: a flag of `tokenmeter bench`, an input of the page's settings card.
/// The first [`Field::PAGE`] are the page's inputs, in its order; the rest are the CLI's alone
/// (the page leaves them at their defaults, or fills them from its own pickers).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Field {
    Arrival,
    Rate,
    Burstiness,
    Concurrency,
    Requests,
    InputLen,
    OutputLen,
    Seed,
    Prompts,
    MaxBatch,
    MaxBatchedTokens,
    SloTtft,
    SloTpot,
    Weights,
    Speculate,
    Policy,
    ChunkedPrefill,
    PrefillChunk,
    PrefixCache,
    /// The shared prefix's length in tokens (0: none).
    SharedPrefix,
    CostPerHour,
    /// Turns per conversation (empty: none; `dataset`: a ShareGPT dataset's own).
    Turns,
    ThinkTime,
    WarmupRequests,
    WarmupS,
    CooldownS,
    // The CLI's alone.
    ArrivalSpan,
    PrefixGroups,
    MaxConcurrency,
    /// `on` or `off`: end an open-loop rate early when the target cannot sustain it.
    SaturationStop,
    /// The CLI's `--slo` (`ttft_ms=200,tpot_ms=50`); the page has [`Field::SloTtft`] and
    /// [`Field::SloTpot`].
    Slo,
    /// The dataset's name (empty: none); its rows are attached later, once a tokenizer can
    /// measure them.
    Dataset,
    /// The share of requests that must meet every SLO: `--rate max`'s criterion, and `plan
    /// --find-replicas`'s.
    Attainment,
    /// A server's API root (empty: the engine in this process); the page's target card.
    Endpoint,
    /// The model name sent to the server (empty: the only one it lists).
    ServedModel,
    /// `completions` or `chat`.
    Api,
}

impl Field {
    /// The page's inputs, the first of [`Field::ALL`] (`field as usize` indexes them).
    pub const PAGE: [Field; 26] = {
        let mut page = [Field::Arrival; 26];
        let mut i = 0;
        while i < page.len() {
            page[i] = Field::ALL[i];
            i += 1;
        }
        page
    };

    /// Every field: the page's, then the CLI's own.
    pub const ALL: [Field; 36] = [
        Field::Arrival,
        Field::Rate,
        Field::Burstiness,
        Field::Concurrency,
        Field::Requests,
        Field::InputLen,
        Field::OutputLen,
        Field::Seed,
        Field::Prompts,
        Field::MaxBatch,
        Field::MaxBatchedTokens,
        Field::SloTtft,
        Field::SloTpot,
        Field::Weights,
        Field::Speculate,
        Field::Policy,
        Field::ChunkedPrefill,
        Field::PrefillChunk,
        Field::PrefixCache,
        Field::SharedPrefix,
        Field::CostPerHour,
        Field::Turns,
        Field::ThinkTime,
        Field::WarmupRequests,
        Field::WarmupS,
        Field::CooldownS,
        Field::ArrivalSpan,
        Field::PrefixGroups,
        Field::MaxConcurrency,
        Field::SaturationStop,
        Field::Slo,
        Field::Dataset,
        Field::Attainment,
        Field::Endpoint,
        Field::ServedModel,
        Field::Api,
    ];

    /// The field a CLI flag sets, and the text it gives it: `value` for a flag that takes one,
    /// `None` for a switch (`--random-prompts`, `--no-chunked-prefill`, `--no-saturation-stop`,
    /// `--prefix-cache`), which sets its field's other value. `None` for a flag of no field.
    pub fn from_flag(flag: &str, value: Option<&str>) -> Option<(Field, String)> {
        let switch = match flag {
            "--random-prompts" => Some((Field::Prompts, "random")),
            "--no-chunked-prefill" => Some((Field::ChunkedPrefill, "off")),
            "--no-saturation-stop" => Some((Field::SaturationStop, "off")),
            "--prefix-cache" => Some((Field::PrefixCache, "on")),
            _ => None,
        };
        match (switch, value) {
            (Some((field, text)), None) => Some((field, text.to_string())),
            (Some(_), Some(_)) => None,
            (None, value) => {
                let field = Field::ALL
                    .into_iter()
                    .find(|f| f.flag() == flag && !matches!(f, Field::SloTtft | Field::SloTpot))?;
                Some((field, value?.to_string()))
            }
        }
    }

    /// The field's name in the page's query string.
    pub fn key(self) -> &'static str {
        match self {
            Field::Arrival => "arrival",
            Field::Rate => "rate",
            Field::Burstiness => "burstiness",
            Field::Concurrency => "concurrency",
            Field::Requests => "requests",
            Field::InputLen => "input",
            Field::OutputLen => "output",
            Field::Seed => "seed",
            Field::Prompts => "prompts",
            Field::MaxBatch => "max_batch",
            Field::MaxBatchedTokens => "max_tokens",
            Field::SloTtft => "slo_ttft",
            Field::SloTpot => "slo_tpot",
            Field::Weights => "weights",
            Field::Speculate => "speculate",
            Field::Policy => "policy",
            Field::ChunkedPrefill => "chunked_prefill",
            Field::PrefillChunk => "prefill_chunk",
            Field::PrefixCache => "prefix_cache",
            Field::SharedPrefix => "shared_prefix",
            Field::CostPerHour => "cost_per_hour",
            Field::Turns => "turns",
            Field::ThinkTime => "think_time",
            Field::WarmupRequests => "warmup_requests",
            Field::WarmupS => "warmup_s",
            Field::CooldownS => "cooldown_s",
            Field::ArrivalSpan => "arrival_span",
            Field::PrefixGroups => "prefix_groups",
            Field::MaxConcurrency => "max_concurrency",
            Field::SaturationStop => "saturation_stop",
            Field::Slo => "slo",
            Field::Dataset => "dataset",
            Field::Attainment => "attainment",
            Field::Endpoint => "endpoint",
            Field::ServedModel => "served_model",
            Field::Api => "api",
        }
    }

    /// The CLI's flag for the field (`tokenmeter bench`).
    pub fn flag(self) -> &'static str {
        match self {
            Field::Arrival => "--arrival",
            Field::Rate => "--rate",
            Field::Burstiness => "--burstiness",
            Field::Concurrency => "--concurrency",
            Field::Requests => "--num-requests",
            Field::InputLen => "--input-len",
            Field::OutputLen => "--output-len",
            Field::Seed => "--seed",
            Field::Prompts => "--random-prompts",
            Field::MaxBatch => "--max-batch",
            Field::MaxBatchedTokens => "--max-batched-tokens",
            Field::SloTtft | Field::SloTpot | Field::Slo => "--slo",
            Field::Weights => "--weights",
            Field::Speculate => "--speculate",
            Field::Policy => "--policy",
            Field::ChunkedPrefill => "--no-chunked-prefill",
            Field::PrefillChunk => "--prefill-chunk",
            Field::PrefixCache => "--prefix-cache",
            Field::SharedPrefix => "--shared-prefix-len",
            Field::CostPerHour => "--cost-per-hour",
            Field::Turns => "--turns",
            Field::ThinkTime => "--think-time-s",
            Field::WarmupRequests => "--warmup-requests",
            Field::WarmupS => "--warmup-s",
            Field::CooldownS => "--cooldown-s",
            Field::ArrivalSpan => "--arrival-span",
            Field::PrefixGroups => "--prefix-groups",
            Field::MaxConcurrency => "--max-concurrency",
            Field::SaturationStop => "--no-saturation-stop",
            Field::Dataset => "--dataset",
            Field::Attainment => "--attainment",
            Field::Endpoint => "--endpoint",
            Field::ServedModel => "--served-model",
            Field::Api => "--api",
        }
    }

    /// What an empty or absent field means: the CLI's defaults, so a run on either edge means the
    /// same.
    pub fn default_value(self) -> &'static str {
        match self {
            Field::Arrival => "poisson",
            Field::Rate => "4",
            Field::Burstiness => "1",
            Field::Concurrency => "4",
            Field::Requests => "32",
            Field::InputLen => "128",
            Field::OutputLen => "64",
            Field::Seed => "0",
            Field::Prompts => "text",
            Field::MaxBatch => "16",
            Field::MaxBatchedTokens => "512",
            Field::Weights => "bf16",
            Field::Speculate => "off",
            Field::Policy => "fcfs",
            Field::ChunkedPrefill | Field::SaturationStop => "on",
            Field::PrefixCache => "off",
            Field::SharedPrefix => "0",
            Field::ThinkTime => "0",
            Field::WarmupRequests | Field::WarmupS | Field::CooldownS => "0",
            Field::ArrivalSpan => "drawn",
            Field::PrefixGroups => "1",
            Field::Attainment => "0.99",
            Field::Api => "completions",
            Field::SloTtft
            | Field::SloTpot
            | Field::Slo
            | Field::PrefillChunk
            | Field::CostPerHour
            | Field::Turns
            | Field::MaxConcurrency
            | Field::Dataset
            | Field::Endpoint
            | Field::ServedModel => "",
        }
    }
}

/// The CLI's arguments for the fields `value` gives that differ from their defaults: how the
/// page records the request it made (`run_config.request`), so `bench --rerun` and the page's *Run
/// again* read a page's run as they read the CLI's. A switch's field at its switched value is the
/// flag alone; the page's two SLO fields are one `--slo`.
pub fn args_of(value: impl Fn(Field) -> Option<String>) -> Vec<String> {
    let mut args = Vec::new();
    let mut slo = Vec::new();
    for field in Field::ALL {
        let Some(text) = value(field).map(|t| t.trim().to_string()) else { continue };
        if text.is_empty() || text == field.default_value() {
            continue;
        }
        match field {
            Field::SloTtft => slo.push(format!("ttft_ms={text}")),
            Field::SloTpot => slo.push(format!("tpot_ms={text}")),
            Field::Slo => slo.push(text),
            _ => match Field::from_flag(field.flag(), None) {
                // A switch: its flag when the field holds the switched value (else the default's).
                Some((_, switched)) => {
                    if text == switched {
                        args.push(field.flag().to_string());
                    }
                }
                None => args.extend([field.flag().to_string(), text]),
            },
        }
    }
    if !slo.is_empty() {
        args.extend(["--slo".to_string(), slo.join(",")]);
    }
    args
}

/// The fields a recorded request's arguments set ([`args_of`]'s inverse; the CLI's own arguments
/// too): `--slo`'s `ttft_ms` and `tpot_ms` as the page's two fields, its other objectives as
/// [`Field::Slo`]. Flags of no field (the target's, outputs) are returned apart, as given.
pub fn fields_of(args: &[String]) -> (Vec<(Field, String)>, Vec<String>) {
    let (mut fields, mut other) = (Vec::new(), Vec::new());
    let mut i = 0;
    while i < args.len() {
        let (flag, inline) = match args[i].split_once('=') {
            Some((flag, value)) if args[i].starts_with("--") => (flag.to_string(), Some(value.to_string())),
            _ => (args[i].clone(), None),
        };
        let switch = Field::from_flag(&flag, None);
        let value = match (&inline, &switch) {
            (Some(v), _) => Some(v.clone()),
            (None, Some(_)) => None,
            (None, None) => args.get(i + 1).filter(|v| !v.starts_with("--")).cloned(),
        };
        i += 1 + usize::from(inline.is_none() && switch.is_none() && value.is_some());
        match Field::from_flag(&flag, value.as_deref()) {
            Some((Field::Slo, text)) => {
                let mut rest = Vec::new();
                for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                    match part.split_once('=') {
                        Some(("ttft_ms", ms)) => fields.push((Field::SloTtft, ms.to_string())),
                        Some(("tpot_ms", ms)) => fields.push((Field::SloTpot, ms.to_string())),
                        _ => rest.push(part),
                    }
                }
                if !rest.is_empty() {
                    fields.push((Field::Slo, rest.join(",")));
                }
            }
            Some(pair) => fields.push(pair),
            None => other.extend(std::iter::once(flag).chain(value)),
        }
    }
    (fields, other)
}

/// What the loaded model allows; `None` before a model is loaded (then the CLI's bounds on the
/// same flags apply).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Caps {
    pub max_batch: usize,
    pub max_batched_tokens: usize,
    pub max_position: usize,
}

/// The engine options fixed when the model is uploaded (`EngineOptions::weights`,
/// `EngineOptions::speculation`, `EngineOptions::prefix_cache`): changing one means uploading the
/// model again.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoadOptions {
    pub weights: WeightFormat,
    pub speculation: Speculation,
    pub prefix_cache: bool,
}

impl LoadOptions {
    /// "int8 weights, speculation ngram:4", as the CLI's flags spell the values.
    pub fn describe(&self) -> String {
        let speculation = match &self.speculation {
            Speculation::Off => "off".to_string(),
            Speculation::Ngram { k } => format!("ngram:{k}"),
            Speculation::Draft { k, model } => format!("draft:{model}:{k}"),
        };
        let cache = if self.prefix_cache { ", prefix cache" } else { "" };
        format!("{} weights, speculation {speculation}{cache}", self.weights.name())
    }
}

/// A run, checked: the workload at each rate, the SLOs and price, and the engine's settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunRequest {
    /// The first rate's workload.
    pub spec: WorkloadSpec,
    /// Every rate: one for a run, several for a sweep; none for `--rate max`, whose search picks
    /// them ([`RunRequest::search`]).
    #[serde(with = "crate::bench::workload::infinite_rate::list")]
    pub rates: Vec<f64>,
    /// `--rate max`, the rate's other form: search the highest rate whose SLO attainment meets
    /// `attainment` ([`crate::bench::max_rate`]); `None` for rates given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search: Option<RateSearch>,
    /// The share of requests that must meet every SLO (`--attainment`; 0.99 by default).
    #[serde(default = "default_attainment")]
    pub attainment: f64,
    pub slo: Option<Slo>,
    /// As the CLI's `--slo` spells it, for the results JSON.
    pub slo_text: Option<String>,
    pub max_batch: usize,
    pub max_batched_tokens: usize,
    pub random_prompts: bool,
    /// The scheduler's policy (`Engine::set_policy`), recorded as `run_config.scheduler`.
    pub policy: Policy,
    /// What the model must have been uploaded with.
    pub load: LoadOptions,
    /// The hardware's price per hour, for each result's `cost`; `None` when empty.
    pub cost_per_hour: Option<f64>,
    /// Requests left out of each rate's summary (`--warmup-requests`, `--warmup-s`, `--cooldown-s`).
    pub phases: Phases,
    /// Where the requests go: the engine, or a server (never its key). Absent in requests saved
    /// before it was part of them: the engine.
    #[serde(default)]
    pub target: RunTarget,
}

impl RunRequest {
    /// The rules this request breaks when it is run against a server rather than the engine:
    /// engine settings other than their defaults (the server's scheduler, weights and caches are
    /// its own), and conversations without text prompts (`has_tokenizer`: text can be made; each
    /// turn sends the server's reply back, as text). Empty when it can run there.
    pub fn server_problems(&self, has_tokenizer: bool) -> Vec<Problem> {
        let (defaults, policy) = (LoadOptions::default(), Policy::default());
        let engine_only = [
            (Field::Policy, self.policy.order != policy.order),
            (Field::ChunkedPrefill, self.policy.chunked_prefill != policy.chunked_prefill),
            (Field::PrefillChunk, self.policy.prefill_chunk != policy.prefill_chunk),
            (Field::Weights, self.load.weights != defaults.weights),
            (Field::Speculate, self.load.speculation != defaults.speculation),
            (Field::PrefixCache, self.load.prefix_cache != defaults.prefix_cache),
        ];
        let mut problems: Vec<Problem> = engine_only
            .into_iter()
            .filter(|(_, set)| *set)
            .map(|(field, _)| Problem::new(field, Rule::EngineSettingOnServer))
            .collect();
        if self.spec.conversations.is_some() && (self.random_prompts || !has_tokenizer) {
            problems.push(Problem::new(Field::Turns, Rule::ConversationsNeedText));
        }
        problems
    }

    /// The session this request runs, in `lang`: with a baseline, every request to its output
    /// length (the defaults of both edges; set the fields to change them).
    pub fn session(&self, lang: Lang) -> SessionSpec<'_> {
        SessionSpec {
            spec: &self.spec,
            rates: &self.rates,
            slo: self.slo.as_ref(),
            slo_text: self.slo_text.as_deref(),
            lang,
            baseline: true,
            ignore_eos: true,
            cost_per_hour: self.cost_per_hour,
            phases: self.phases,
        }
    }
}

fn default_attainment() -> f64 {
    0.99
}

/// Where the text of each field comes from: absent (`None`) or empty means the field's default.
pub type Form<'a> = &'a dyn Fn(Field) -> Option<String>;

impl RunRequest {
    /// Reads and checks every field: the run, or every problem, each on its field. `caps`: what
    /// the loaded model allows, when one is loaded.
    pub fn parse(form: Form, caps: Option<Caps>) -> Result<RunRequest, Vec<Problem>> {
        let problems = RefCell::new(Vec::new());
        let request = parse(form, caps, &problems);
        // A server runs with its own scheduler, weights and caches: the engine's settings stay at
        // their defaults (text prompts: both edges have a tokenizer for them, or say so first).
        if let Some(r) = request.as_ref().filter(|r| r.target.server().is_some()) {
            problems.borrow_mut().extend(r.server_problems(true));
        }
        // A rule can break for several rates at once: each problem once.
        let mut unique: Vec<Problem> = Vec::new();
        for p in problems.into_inner() {
            if !unique.contains(&p) {
                unique.push(p);
            }
        }
        match request {
            Some(request) if unique.is_empty() => Ok(request),
            _ => Err(unique),
        }
    }
}

fn parse(form: Form, caps: Option<Caps>, problems: &RefCell<Vec<Problem>>) -> Option<RunRequest> {
    let text = |field: Field| {
        let given = form(field).map(|t| t.trim().to_string()).unwrap_or_default();
        if given.is_empty() {
            field.default_value().to_string()
        } else {
            given
        }
    };
    let broken = |field: Field, rule: Rule| problems.borrow_mut().push(Problem::new(field, rule));
    let count = |field: Field, min: usize, max: usize| match limits::parse_count(&text(field), min, max) {
        Ok(n) => Some(n),
        Err(_) => {
            broken(field, Rule::Count { min: min as u64, max: max as u64 });
            None
        }
    };
    let concurrency = count(Field::Concurrency, 1, limits::MAX_CONCURRENCY);
    let num_requests = count(Field::Requests, 1, limits::MAX_REQUESTS);
    let shared_prefix_len = count(Field::SharedPrefix, 0, limits::MAX_TOKENS);
    let prefix_groups = count(Field::PrefixGroups, 1, limits::MAX_PREFIX_GROUPS);
    let warmup_requests = count(Field::WarmupRequests, 0, limits::MAX_REQUESTS);
    let max_concurrency = match text(Field::MaxConcurrency).as_str() {
        "" => Some(None),
        _ => count(Field::MaxConcurrency, 1, limits::MAX_CONCURRENCY).map(Some),
    };
    // Engine sizes: positive, and within what the model was loaded for.
    let size = |field: Field, limit: usize| {
        let n = count(field, 0, usize::MAX)?;
        match n {
            0 => broken(field, Rule::AboveZero),
            n if n > limit => broken(field, Rule::AtMost { limit }),
            n => return Some(n),
        }
        None
    };
    let max_batch = size(Field::MaxBatch, caps.map_or(limits::MAX_SEQS, |c| c.max_batch));
    let max_batched_tokens =
        size(Field::MaxBatchedTokens, caps.map_or(limits::MAX_BATCHED_TOKENS, |c| c.max_batched_tokens));
    let seed = text(Field::Seed).parse::<u64>().ok();
    if seed.is_none() {
        broken(Field::Seed, Rule::Count { min: 0, max: u64::MAX });
    }
    let number = |field: Field, min: f64, max: f64| match limits::parse_number(&text(field), min, max) {
        Ok(x) => Some(x),
        Err(_) => {
            broken(field, Rule::Number { min, max });
            None
        }
    };
    let burstiness = number(Field::Burstiness, limits::MIN_BURSTINESS, limits::MAX_BURSTINESS);
    let think_time_s = number(Field::ThinkTime, 0.0, limits::MAX_SCHEDULE_S);
    let warmup_s = number(Field::WarmupS, 0.0, limits::MAX_SCHEDULE_S);
    let cooldown_s = number(Field::CooldownS, 0.0, limits::MAX_SCHEDULE_S);
    let cost_per_hour = match text(Field::CostPerHour).as_str() {
        "" => Some(None),
        _ => number(Field::CostPerHour, 0.0, 1e6).map(Some),
    };

    let choice = |field: Field, name: &'static str, expected: &'static str, value: Option<()>| {
        if value.is_none() {
            broken(field, Rule::Choice { name, value: text(field), expected });
        }
    };
    let arrival = text(Field::Arrival).parse::<Arrival>().ok();
    choice(Field::Arrival, "arrival", Arrival::NAMES, arrival.map(|_| ()));
    let span = text(Field::ArrivalSpan).parse::<ArrivalSpan>().ok();
    choice(Field::ArrivalSpan, "arrival span", "drawn or exact", span.map(|_| ()));
    let on_off = |field: Field| match text(field).as_str() {
        "on" => Some(true),
        "off" => Some(false),
        _ => None,
    };
    let saturation_stop = on_off(Field::SaturationStop);
    choice(Field::SaturationStop, "saturation stop", "on or off", saturation_stop.map(|_| ()));
    let chunked_prefill = on_off(Field::ChunkedPrefill);
    choice(Field::ChunkedPrefill, "chunked prefill", "on or off", chunked_prefill.map(|_| ()));
    let prefix_cache = on_off(Field::PrefixCache);
    choice(Field::PrefixCache, "prefix cache", "on or off", prefix_cache.map(|_| ()));
    let random_prompts = match text(Field::Prompts).as_str() {
        "text" => Some(false),
        "random" => Some(true),
        _ => None,
    };
    choice(Field::Prompts, "prompts", "text or random", random_prompts.map(|_| ()));
    let weights = WeightFormat::parse(&text(Field::Weights));
    choice(Field::Weights, "weight format", "bf16, int8 or int4", weights.map(|_| ()));
    let order = text(Field::Policy).parse::<Order>().ok();
    choice(Field::Policy, "scheduling policy", "fcfs, prefill-first or decode-first", order.map(|_| ()));
    let speculation = match text(Field::Speculate).parse::<Speculation>() {
        Ok(s) => Some(s),
        Err(message) => {
            broken(Field::Speculate, Rule::Other(message));
            None
        }
    };

    // Several rates (`1,2,4,inf`) make a sweep; `max` searches one.
    let attainment = number(Field::Attainment, 0.0, 1.0);
    let rate_text = text(Field::Rate);
    let rate_max = rate_text == "max";
    if !rate_max && rate_text.split(',').any(|r| r.trim() == "max") {
        broken(Field::Rate, Rule::RateMaxAlone);
    }
    let rates = match parse_rates(if rate_max { Field::Rate.default_value() } else { &rate_text }) {
        Ok(rates) => Some(rates),
        Err(_) if rate_text.split(',').any(|r| r.trim() == "max") => None,
        Err(_) => {
            let given = text(Field::Rate);
            let bad = given.split(',').map(str::trim).find(|r| parse_rates(r).is_err()).unwrap_or_default();
            broken(Field::Rate, Rule::NotARate { text: bad.to_string() });
            None
        }
    };
    let [input_len, output_len] =
        [Field::InputLen, Field::OutputLen].map(|field| match LenRange::parse(&text(field)) {
            Ok(range) => Some(range),
            Err(rule) => {
                broken(field, rule);
                None
            }
        });

    // SLOs: the CLI's `--slo` text, and the page's two fields (a number of milliseconds each).
    let mut slo_parts = Vec::new();
    if let Some(text) = form(Field::Slo).filter(|t| !t.trim().is_empty()) {
        match text.parse::<Slo>() {
            Ok(_) => slo_parts.push(text.trim().to_string()),
            Err(e) => broken(Field::Slo, Rule::Other(e.to_string())),
        }
    }
    for (field, key) in [(Field::SloTtft, "ttft_ms"), (Field::SloTpot, "tpot_ms")] {
        if let Some(ms) = form(field).filter(|t| !t.trim().is_empty()) {
            match limits::parse_number(&ms, f64::MIN_POSITIVE, f64::MAX) {
                Ok(_) => slo_parts.push(format!("{key}={}", ms.trim())),
                Err(_) => broken(field, Rule::AboveZero),
            }
        }
    }
    let slo_text = (!slo_parts.is_empty()).then(|| slo_parts.join(","));
    let slo = slo_text.as_deref().and_then(|s| s.parse::<Slo>().ok());
    if rate_max && slo_parts.is_empty() && !problems.borrow().iter().any(|p| p.field == Field::Slo) {
        broken(Field::Slo, Rule::RateMaxNeedsSlo);
    }
    if rate_max && arrival.is_some_and(|a| !matches!(a, Arrival::Poisson | Arrival::Gamma | Arrival::Constant)) {
        broken(Field::Arrival, Rule::RateMaxOpenLoop);
    }

    // Conversations: empty turns means none; the think time goes with them. `dataset`: the
    // dataset's own conversations, which needs a dataset.
    let dataset = !text(Field::Dataset).is_empty();
    let conversations = match text(Field::Turns).as_str() {
        "" => {
            if think_time_s.is_some_and(|s| s != 0.0) {
                broken(Field::ThinkTime, Rule::ThinkTimeNeedsTurns);
            }
            Some(None)
        }
        "dataset" if !dataset => {
            broken(Field::Turns, Rule::TurnsDatasetNeedsDataset);
            None
        }
        "dataset" => think_time_s.map(|s| Some(Conversations::from_dataset(s))),
        _ if dataset => {
            broken(Field::Turns, Rule::DrawnTurnsWithDataset);
            None
        }
        turns => match LenRange::parse(turns) {
            Ok(turns) => {
                think_time_s.map(|think_time_s| Some(Conversations { turns, think_time_s, from_dataset: false }))
            }
            Err(rule) => {
                broken(Field::Turns, rule);
                None
            }
        },
    };
    let shared_prefix = match (shared_prefix_len, prefix_groups) {
        (Some(0), Some(1)) => Some(None),
        (Some(0), Some(_)) => {
            broken(Field::PrefixGroups, Rule::PrefixGroupsNeedSharedPrefix);
            None
        }
        (Some(len), Some(groups)) => Some(Some(SharedPrefix { len, groups })),
        _ => None,
    };

    // The prefill chunk: empty means as large as the step allows; a size needs chunking on.
    let prefill_chunk = match text(Field::PrefillChunk).as_str() {
        "" => Some(None),
        chunk => match limits::parse_count(chunk, 1, limits::MAX_BATCHED_TOKENS) {
            Ok(n) if chunked_prefill != Some(false) => Some(Some(n)),
            Ok(_) => {
                broken(Field::PrefillChunk, Rule::ChunkNeedsChunking);
                None
            }
            Err(_) => {
                broken(Field::PrefillChunk, Rule::Count { min: 1, max: limits::MAX_BATCHED_TOKENS as u64 });
                None
            }
        },
    };
    let policy = match (order, chunked_prefill, prefill_chunk) {
        (Some(order), Some(chunked_prefill), Some(prefill_chunk)) => {
            Some(Policy { order, chunked_prefill, prefill_chunk })
        }
        _ => None,
    };

    // The workload's own rules, at every rate — also where some fields did not parse (those take
    // their defaults here, and the rules about them are left out: their problem is already said),
    // so that every problem is reported at once.
    let parsed_problems: Vec<Field> = problems.borrow().iter().map(|p| p.field).collect();
    // The fallbacks are the fields' own defaults, parsed (they always parse).
    fn default<T: std::str::FromStr>(field: Field) -> T {
        field.default_value().parse().ok().expect("a field's default parses")
    }
    let arrival_or_default = arrival.unwrap_or_else(|| default(Field::Arrival));
    let rates_or_default =
        rates.clone().unwrap_or_else(|| parse_rates(Field::Rate.default_value()).expect("the default rate parses"));
    let input_or_default = input_len.unwrap_or_else(|| default(Field::InputLen));
    let output_or_default = output_len.unwrap_or_else(|| default(Field::OutputLen));
    let conversations_or_none = conversations.flatten();
    let spec = WorkloadSpec {
        arrival: arrival_or_default,
        rate: rates_or_default[0],
        burstiness: burstiness.unwrap_or_else(|| default(Field::Burstiness)),
        concurrency: concurrency.unwrap_or_else(|| default(Field::Concurrency)),
        span: span.unwrap_or_else(|| default(Field::ArrivalSpan)),
        num_requests: num_requests.unwrap_or_else(|| default(Field::Requests)),
        input_len: input_or_default,
        output_len: output_or_default,
        seed: seed.unwrap_or_else(|| default(Field::Seed)),
        dataset: None,
        max_concurrency: max_concurrency.flatten(),
        // The stop judges arrivals in time order; a conversation's later turns have none.
        saturation_stop: saturation_stop.unwrap_or(true) && conversations_or_none.is_none(),
        shared_prefix: shared_prefix.flatten(),
        conversations: conversations_or_none,
    };
    // A dataset's own conversations are checked once its rows are attached.
    let checked = WorkloadSpec { conversations: spec.conversations.filter(|c| !c.from_dataset), ..spec.clone() };
    // A named dataset is attached later, once a tokenizer can measure it, and the spec is checked
    // again then: the rules that need its rows (a trace's arrivals) wait for it.
    let waits_for_rows = |p: &Problem| dataset && p.rule == Rule::TraceNeedsTrace;
    for &rate in &rates_or_default {
        let found = WorkloadSpec { rate, ..checked.clone() }.problems();
        problems
            .borrow_mut()
            .extend(found.into_iter().filter(|p| !parsed_problems.contains(&p.field) && !waits_for_rows(p)));
    }
    if let (Some(caps), Some(input_len), Some(output_len)) = (caps, input_len, output_len) {
        if let Some(rule) = context_rule(input_len, output_len, caps.max_position) {
            broken(Field::OutputLen, rule);
        }
        // A conversation's history must fit the model's context too.
        if checked.conversations.is_some() {
            if let Some(Rule::Context { input, output, max_position }) =
                context_rule(spec.prompt_range(), output_len, caps.max_position)
            {
                let longest = input.saturating_add(output);
                broken(Field::Turns, Rule::HistoryContext { longest, max_position });
            }
        }
    }
    let phases = Phases {
        warmup_requests: warmup_requests.unwrap_or(0),
        warmup_s: warmup_s.unwrap_or(0.0),
        cooldown_s: cooldown_s.unwrap_or(0.0),
    };
    if warmup_requests.is_some() && num_requests.is_some() {
        if let Err(e) = phases.check(spec.num_requests) {
            broken(Field::WarmupRequests, Rule::Other(e.to_string()));
        }
    }
    // Without chunked prefill a request's whole prefill must fit one step (the engine's own rule).
    if let (Some(policy), Some(max_batched_tokens), Some(input_len), Some(output_len)) =
        (policy, max_batched_tokens, input_len, output_len)
    {
        if let Err(e) = policy.check_request(input_len.max, output_len.max, max_batched_tokens) {
            broken(Field::ChunkedPrefill, Rule::Other(e.to_string()));
        }
    }
    // The target: a server when an endpoint is given, its URL and API checked here (its engine
    // settings are checked once the request is whole: `RunRequest::server_problems`).
    let target = match text(Field::Endpoint).as_str() {
        "" => Some(RunTarget::Engine),
        url => {
            let base_url = BaseUrl::parse(url).map_err(|e| broken(Field::Endpoint, Rule::Other(e.to_string()))).ok();
            let api = text(Field::Api).parse::<Api>().ok();
            choice(Field::Api, "API", "completions or chat", api.map(|_| ()));
            let served_model = Some(text(Field::ServedModel)).filter(|m| !m.is_empty());
            base_url.zip(api).map(|(base_url, api)| RunTarget::Server(ServerTarget { base_url, served_model, api }))
        }
    };
    if !problems.borrow().is_empty() {
        return None;
    }
    // Everything parsed (no problem was found), so the fallbacks above were not used.
    let (Some(arrival), Some(rates)) = (arrival, rates) else { return None };
    // Rates only matter to the open-loop arrivals; the others run once. A search picks its own.
    let rates = if rate_max {
        Vec::new()
    } else if arrival.open_loop() {
        rates
    } else {
        vec![spec.rate]
    };
    Some(RunRequest {
        spec,
        rates,
        slo,
        slo_text,
        max_batch: max_batch?,
        max_batched_tokens: max_batched_tokens?,
        random_prompts: random_prompts?,
        policy: policy?,
        load: LoadOptions { weights: weights?, speculation: speculation?, prefix_cache: prefix_cache? },
        cost_per_hour: cost_per_hour?,
        phases,
        search: rate_max.then(|| RateSearch::new(attainment.unwrap_or(0.99))),
        attainment: attainment?,
        target: target?,
    })
}
