//! A run as the user asks for it, from either edge. The CLI's flags and the page's form are each
//! only a map from [`Field`] to the text typed; [`RunRequest::parse`] reads and checks that text
//! once, here, and returns the run or **every** problem, each on its field
//! ([`crate::bench::base::rules`]), so the CLI names the flag and the page puts the message under its
//! input, in either language.

use std::cell::RefCell;

use serde::{Deserialize, Serialize};

use crate::bench::base::field::Field;
use crate::bench::base::lang::Lang;
use crate::bench::base::rules::{Problem, Rule};
use crate::bench::measure::metrics::Slo;
use crate::bench::record::phases::Phases;
use crate::bench::run::max_rate::RateSearch;
use crate::bench::run::session::SessionSpec;
use crate::bench::traffic::endpoint::{Api, BaseUrl, RunTarget, ServerTarget};
use crate::bench::traffic::workload::{
    context_rule, Arrival, ArrivalSpan, Conversations, LenRange, SharedPrefix, WorkloadSpec,
};
use crate::bench::verdict::sweep::parse_rates;
use crate::engine::{Order, Policy, Speculation};
use crate::gpu::WeightFormat;
use crate::limits;

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
    #[serde(with = "crate::bench::traffic::workload::infinite_rate::list")]
    pub rates: Vec<f64>,
    /// `--rate max`, the rate's other form: search the highest rate whose SLO attainment meets
    /// `attainment` ([`crate::bench::run::max_rate`]); `None` for rates given.
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
