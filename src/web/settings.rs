//! The benchmark's settings: text fields validated as typed (each message next to its field),
//! read from the URL's query string on load and written back to it on every change, so a link
//! reproduces a run. Parsing reuses `crate::bench` (`Arrival`, `LenRange`, `Slo`, `WorkloadSpec`).

use super::i18n::{use_text, Label, Text};
use crate::bench::sweep::parse_rates;
use crate::bench::{check_context, Arrival, ArrivalSpan, LenRange, Slo, WorkloadSpec};
use crate::engine::{Order, Policy, Speculation};
use crate::gpu::WeightFormat;
use crate::limits;
use leptos::prelude::*;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
    /// Engine switches, as the CLI's `--weights`, `--speculate`, `--policy`,
    /// `--no-chunked-prefill`, `--prefill-chunk` and `--prefix-cache`.
    Weights,
    Speculate,
    Policy,
    ChunkedPrefill,
    PrefillChunk,
    PrefixCache,
    /// The workload's `--shared-prefix-len` (one group).
    SharedPrefix,
    /// The CLI's `--cost-per-hour`: the hardware's price per hour (empty: none).
    CostPerHour,
    /// The CLI's `--turns` (empty: no conversations) and `--think-time-s`.
    Turns,
    ThinkTime,
    /// The CLI's `--warmup-requests`, `--warmup-s` and `--cooldown-s`.
    WarmupRequests,
    WarmupS,
    CooldownS,
}

impl Field {
    pub const ALL: [Field; 26] = [
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
    ];

    /// The field's name in the query string.
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
        }
    }

    /// The CLI's defaults (`tokenmeter bench`), so a run here and there mean the same.
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
            Field::ChunkedPrefill => "on",
            Field::PrefixCache => "off",
            Field::SharedPrefix => "0",
            Field::ThinkTime => "0",
            Field::WarmupRequests | Field::WarmupS | Field::CooldownS => "0",
            Field::SloTtft | Field::SloTpot | Field::PrefillChunk | Field::CostPerHour | Field::Turns => "",
        }
    }

    pub fn label(self, t: &Text) -> &'static str {
        match self {
            Field::Arrival => t.arrival,
            Field::Rate => t.rate,
            Field::Burstiness => t.burstiness,
            Field::Concurrency => t.concurrency,
            Field::Requests => t.requests,
            Field::InputLen => t.input_len,
            Field::OutputLen => t.output_len,
            Field::Seed => t.seed,
            Field::Prompts => t.prompts,
            Field::MaxBatch => t.max_batch,
            Field::MaxBatchedTokens => t.max_batched_tokens,
            Field::SloTtft => t.slo_ttft,
            Field::SloTpot => t.slo_tpot,
            Field::Weights => t.weight_format,
            Field::Speculate => t.speculate,
            Field::Policy => t.policy,
            Field::ChunkedPrefill => t.chunked_prefill,
            Field::PrefillChunk => t.prefill_chunk,
            Field::PrefixCache => t.prefix_cache,
            Field::SharedPrefix => t.shared_prefix,
            Field::CostPerHour => t.cost_per_hour,
            Field::Turns => t.turns,
            Field::ThinkTime => t.think_time,
            Field::WarmupRequests => t.warmup_requests,
            Field::WarmupS => t.warmup_s,
            Field::CooldownS => t.cooldown_s,
        }
    }

    fn hint(self, t: &Text) -> &'static str {
        match self {
            Field::Rate => t.rate_hint,
            Field::Burstiness => t.burstiness_hint,
            Field::InputLen | Field::OutputLen => t.len_hint,
            Field::SloTtft | Field::SloTpot => t.slo_hint,
            Field::Weights => t.weights_hint,
            Field::Speculate => t.speculate_hint,
            Field::PrefillChunk => t.prefill_chunk_hint,
            Field::SharedPrefix => t.shared_prefix_hint,
            Field::CostPerHour => t.cost_per_hour_hint,
            Field::Turns => t.turns_hint,
            Field::ThinkTime => t.think_time_hint,
            Field::WarmupRequests => t.warmup_requests_hint,
            Field::WarmupS => t.warmup_s_hint,
            Field::CooldownS => t.cooldown_s_hint,
            _ => "",
        }
    }
}

/// The settings as typed, one signal per field.
#[derive(Clone, Copy)]
pub struct Settings([RwSignal<String>; 26]);

impl Settings {
    /// Defaults, overridden by whatever the query string says.
    pub fn from_query() -> Settings {
        Settings(Field::ALL.map(|f| {
            RwSignal::new(super::browser::query_param(f.key()).unwrap_or_else(|| f.default_value().to_string()))
        }))
    }

    pub fn get(&self, field: Field) -> RwSignal<String> {
        self.0[field as usize]
    }

    /// Fields that differ from their default, for the query string (tracked).
    pub fn changed(&self) -> Vec<(&'static str, String)> {
        Field::ALL
            .into_iter()
            .filter_map(|f| {
                let value = self.get(f).get();
                (value != f.default_value()).then_some((f.key(), value))
            })
            .collect()
    }

    pub fn reset(&self) {
        for f in Field::ALL {
            self.get(f).set(f.default_value().to_string());
        }
    }
}

/// What the loaded model allows; `None` before a model is ready.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Caps {
    pub max_batch: usize,
    pub max_batched_tokens: usize,
    pub max_position: usize,
}

/// A run's settings, checked.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RunForm {
    /// The first rate's workload.
    pub spec: WorkloadSpec,
    /// Every rate: one for a run, several for a sweep.
    #[serde(with = "crate::bench::workload::infinite_rate::list")]
    pub rates: Vec<f64>,
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
    pub phases: crate::bench::phases::Phases,
}

/// The engine options fixed when the model is uploaded (`EngineOptions::weights`,
/// `EngineOptions::speculation`): changing one means uploading the model again.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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

    /// The options the settings ask for (untracked; the defaults where a field does not parse,
    /// which the form reports on its own).
    pub fn from_settings(settings: Settings) -> LoadOptions {
        LoadOptions {
            weights: WeightFormat::parse(&settings.get(Field::Weights).get_untracked()).unwrap_or_default(),
            speculation: settings
                .get(Field::Speculate)
                .get_untracked()
                .trim()
                .parse()
                .ok()
                .filter(|s| !matches!(s, Speculation::Draft { .. }))
                .unwrap_or_default(),
            prefix_cache: settings.get(Field::PrefixCache).get_untracked() == "on",
        }
    }
}

pub type Problems = Vec<(Field, String)>;

/// Checks every field; all problems at once, each with its field.
pub fn validate(value: &dyn Fn(Field) -> String, caps: Option<Caps>, t: &Text) -> Result<RunForm, Problems> {
    let mut problems: Problems = Vec::new();
    let mut check = |field: Field, outcome: Result<(), String>| {
        if let Err(message) = outcome {
            problems.push((field, message));
        }
    };
    let count = |field: Field| value(field).trim().parse::<usize>().map_err(|_| t.not_a_count.to_string());
    let number = |field: Field| value(field).trim().parse::<f64>().map_err(|_| t.not_a_number.to_string());

    let arrival = value(Field::Arrival).parse::<Arrival>();
    check(Field::Arrival, arrival.as_ref().map(|_| ()).map_err(|e| e.to_string()));
    // Several rates (`1,2,4,inf`) make a sweep.
    let rates = parse_rates(&value(Field::Rate)).map_err(|_| t.not_a_number.to_string());
    check(Field::Rate, rates.as_ref().map(|_| ()).map_err(String::clone));
    let burstiness = number(Field::Burstiness);
    check(Field::Burstiness, burstiness.as_ref().map(|_| ()).map_err(String::clone));
    let counts = [Field::Concurrency, Field::Requests, Field::MaxBatch, Field::MaxBatchedTokens].map(|f| {
        let parsed = count(f);
        check(f, parsed.as_ref().map(|_| ()).map_err(String::clone));
        parsed.unwrap_or(0)
    });
    // 0 (or empty): no shared prefix.
    let shared_prefix_len = match value(Field::SharedPrefix).trim() {
        "" => Ok(0),
        text => text.parse::<usize>().map_err(|_| t.not_a_count.to_string()),
    };
    check(Field::SharedPrefix, shared_prefix_len.as_ref().map(|_| ()).map_err(String::clone));
    let seed = value(Field::Seed).trim().parse::<u64>().map_err(|_| t.not_a_count.to_string());
    check(Field::Seed, seed.as_ref().map(|_| ()).map_err(String::clone));
    let [input_len, output_len] = [Field::InputLen, Field::OutputLen].map(|f| {
        let parsed = value(f).trim().parse::<LenRange>();
        check(f, parsed.as_ref().map(|_| ()).map_err(|e| t.bad_length.map_or_else(|| e.to_string(), String::from)));
        parsed.ok()
    });

    // Engine sizes: positive, and within what the model was loaded for (before a model is
    // loaded, within the CLI's bounds on the same flags).
    let limits = [
        (Field::MaxBatch, counts[2], caps.map_or(limits::MAX_SEQS, |c| c.max_batch)),
        (Field::MaxBatchedTokens, counts[3], caps.map_or(limits::MAX_BATCHED_TOKENS, |c| c.max_batched_tokens)),
    ];
    for (field, n, limit) in limits {
        if count(field).is_err() {
            continue;
        }
        if n == 0 {
            check(field, Err(t.above_zero.to_string()));
        } else if n > limit {
            check(field, Err(format!("{} {limit}", t.at_most)));
        }
    }

    // SLOs: empty means none; otherwise `Slo`'s own parser checks the number.
    let mut slo_parts = Vec::new();
    for (field, key) in [(Field::SloTtft, "ttft_ms"), (Field::SloTpot, "tpot_ms")] {
        let text = value(field);
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        let part = format!("{key}={text}");
        match part.parse::<Slo>() {
            Ok(_) => slo_parts.push(part),
            Err(_) => check(field, Err(format!("{} ({})", t.above_zero, t.slo_hint))),
        }
    }
    let slo_text = (!slo_parts.is_empty()).then(|| slo_parts.join(","));
    // The price: empty means none; otherwise the CLI's bounds on --cost-per-hour.
    let cost_per_hour = match value(Field::CostPerHour).trim() {
        "" => None,
        text => match limits::parse_number(text, 0.0, 1e6) {
            Ok(price) => Some(price),
            Err(e) => {
                check(Field::CostPerHour, Err(e));
                None
            }
        },
    };
    let slo = slo_text.as_deref().and_then(|s| s.parse::<Slo>().ok());
    // Conversations: empty turns means none; the think time goes with them. "dataset": a picked
    // ShareGPT dataset's whole conversations.
    let turns = match value(Field::Turns).trim() {
        "" => None,
        "dataset" => Some(Ok(None)),
        text => Some(text.parse::<LenRange>().map(Some)),
    };
    let conversations = match turns {
        None => None,
        Some(Err(e)) => {
            check(Field::Turns, Err(t.bad_length.map_or_else(|| e.to_string(), String::from)));
            None
        }
        Some(Ok(drawn)) => match limits::parse_number(value(Field::ThinkTime).trim(), 0.0, limits::MAX_SCHEDULE_S) {
            Ok(think_time_s) => Some(match drawn {
                Some(turns) => crate::bench::Conversations { turns, think_time_s, from_dataset: false },
                None => crate::bench::Conversations::from_dataset(think_time_s),
            }),
            Err(e) => {
                check(Field::ThinkTime, Err(e));
                None
            }
        },
    };
    let warmup_requests = count(Field::WarmupRequests);
    check(Field::WarmupRequests, warmup_requests.as_ref().map(|_| ()).map_err(String::clone));
    // Seconds of the arrival window left out at its start and its end, as the CLI's bounds.
    let mut seconds = |field: Field| match limits::parse_number(value(field).trim(), 0.0, limits::MAX_SCHEDULE_S) {
        Ok(s) => s,
        Err(e) => {
            check(field, Err(e));
            0.0
        }
    };
    let phases = crate::bench::phases::Phases {
        warmup_requests: warmup_requests.unwrap_or(0),
        warmup_s: seconds(Field::WarmupS),
        cooldown_s: seconds(Field::CooldownS),
    };

    if let (Some(caps), Some(input), Some(output)) = (caps, input_len, output_len) {
        if check_context(input, output, caps.max_position).is_err() {
            check(Field::OutputLen, Err(format!("{} ({})", t.context_too_long, caps.max_position)));
        }
    }

    // Engine switches, parsed as the CLI parses its flags.
    let weights = WeightFormat::parse(&value(Field::Weights));
    check(Field::Weights, weights.map(|_| ()).ok_or_else(|| t.bad_weights.to_string()));
    // The page loads one model: a draft model (`draft:DIR:K`) is the CLI's.
    let speculation = value(Field::Speculate).trim().parse::<Speculation>().and_then(|s| {
        if matches!(s, Speculation::Draft { .. }) {
            Err(String::new())
        } else {
            Ok(s)
        }
    });
    check(Field::Speculate, speculation.as_ref().map(|_| ()).map_err(|_| t.bad_speculation.to_string()));
    let order = value(Field::Policy).parse::<Order>();
    check(Field::Policy, order.as_ref().map(|_| ()).map_err(|e| e.to_string()));
    let chunked_prefill = value(Field::ChunkedPrefill) != "off";
    let chunk_text = value(Field::PrefillChunk);
    let prefill_chunk = match chunk_text.trim() {
        "" => Ok(None),
        text => match limits::parse_count(text, 1, limits::MAX_BATCHED_TOKENS) {
            Ok(n) if chunked_prefill => Ok(Some(n)),
            Ok(_) => Err(t.chunk_needs_chunking.to_string()),
            Err(_) => Err(format!("{} (1–{})", t.not_a_count, limits::MAX_BATCHED_TOKENS)),
        },
    };
    check(Field::PrefillChunk, prefill_chunk.as_ref().map(|_| ()).map_err(String::clone));
    let policy = match (order, prefill_chunk) {
        (Ok(order), Ok(prefill_chunk)) => Some(Policy { order, chunked_prefill, prefill_chunk }),
        _ => None,
    };
    // Without chunked prefill a request's whole prefill must fit one step (the engine's own rule).
    if let (Some(policy), Some(input), Some(output)) = (policy, input_len, output_len) {
        if count(Field::MaxBatchedTokens).is_ok() && counts[3] > 0 {
            if let Err(e) = policy.check_request(input.max, output.max, counts[3]) {
                check(Field::ChunkedPrefill, Err(e.to_string()));
            }
        }
    }

    let (
        Ok(arrival),
        Ok(rates),
        Ok(burstiness),
        Ok(seed),
        Some(input_len),
        Some(output_len),
        Some(weights),
        Ok(speculation),
        Some(policy),
    ) = (arrival, rates, burstiness, seed, input_len, output_len, weights, speculation, policy)
    else {
        return Err(problems);
    };
    let [concurrency, num_requests, max_batch, max_batched_tokens] = counts;
    let spec = WorkloadSpec {
        arrival,
        rate: rates[0],
        burstiness,
        concurrency,
        span: ArrivalSpan::Drawn,
        num_requests,
        input_len,
        output_len,
        seed,
        dataset: None,
        max_concurrency: None,
        // As the CLI: an open-loop rate the target cannot sustain ends early, with the reason
        // (not with conversations: their later turns have no arrival times to judge).
        saturation_stop: conversations.is_none(),
        shared_prefix: match shared_prefix_len {
            Ok(len) if len > 0 => Some(crate::bench::SharedPrefix { len, groups: 1 }),
            _ => None,
        },
        conversations,
    };
    // The spec's own rules (rate > 0, burstiness > 0, …), with their messages, on the field they name.
    // A dataset's own conversations are checked once its file is attached (`dataset::attach`).
    let checked = WorkloadSpec { conversations: spec.conversations.filter(|c| !c.from_dataset), ..spec.clone() };
    let invalid = rates.iter().find_map(|&rate| WorkloadSpec { rate, ..checked.clone() }.validate().err());
    if let Some(e) = invalid {
        let message = e.to_string();
        let field = [
            ("rate", Field::Rate),
            ("burstiness", Field::Burstiness),
            ("concurrency", Field::Concurrency),
            ("number of requests", Field::Requests),
            ("shared prefix", Field::SharedPrefix),
            ("conversations", Field::Turns),
            ("think time", Field::ThinkTime),
        ]
        .into_iter()
        .find(|(prefix, _)| message.starts_with(prefix))
        .map_or(Field::Requests, |(_, f)| f);
        check(field, Err(t.bad_workload.map_or(message, String::from)));
    }
    // A conversation's history must fit the model's context too.
    if let (Some(caps), Some(_)) = (caps, &spec.conversations) {
        if check_context(spec.prompt_range(), output_len, caps.max_position).is_err() {
            check(Field::Turns, Err(format!("{} ({})", t.context_too_long, caps.max_position)));
        }
    }
    if let Err(e) = phases.check(num_requests) {
        check(Field::WarmupRequests, Err(e.to_string()));
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    let random_prompts = value(Field::Prompts) == "random";
    // Rates only matter to the open-loop arrivals; the others run once.
    let rates = if matches!(arrival, Arrival::Sequential | Arrival::Concurrency) { vec![spec.rate] } else { rates };
    let load = LoadOptions { weights, speculation, prefix_cache: value(Field::PrefixCache) == "on" };
    Ok(RunForm {
        spec,
        rates,
        slo,
        slo_text,
        max_batch,
        max_batched_tokens,
        random_prompts,
        policy,
        load,
        cost_per_hour,
        phases,
    })
}

/// The settings card. `problems` is the live validation; `locked` while a run is going.
/// `reload`: set when the weights or speculation asked for differ from the loaded model's, with
/// what it has (shown, with a button that uploads the model again).
#[component]
pub fn SettingsPanel(
    settings: Settings,
    problems: Memo<Problems>,
    locked: Signal<bool>,
    #[prop(optional, into)] reload: Option<Signal<Option<(LoadOptions, LoadOptions)>>>,
    #[prop(optional, into)] on_reload: Option<Callback<()>>,
    /// The dataset picker's state (absent: no picker).
    #[prop(optional)]
    dataset: Option<super::dataset::DatasetState>,
) -> impl IntoView {
    let t = use_text();
    let arrival = settings.get(Field::Arrival);
    let chunked = settings.get(Field::ChunkedPrefill);
    let open_loop = move || matches!(arrival.get().as_str(), "poisson" | "gamma" | "constant");
    let relevant = move |f: Field| match f {
        Field::Rate => open_loop(),
        Field::Burstiness => arrival.get() == "gamma",
        Field::Concurrency => arrival.get() == "concurrency",
        Field::PrefillChunk => chunked.get() != "off",
        _ => true,
    };
    let input = move |field: Field| {
        let value = settings.get(field);
        let problem = move || problems.with(|p| p.iter().find(|(f, _)| *f == field).map(|(_, m)| m.clone()));
        let id = format!("setting-{}", field.key());
        view! {
            <label class="field" class:muted=move || !relevant(field) class:invalid=move || problem().is_some()>
                <span class="field-label">{move || field.label(t())}</span>
                <input
                    id=id
                    data-testid=format!("setting-{}", field.key())
                    autocomplete="off"
                    spellcheck="false"
                    prop:value=move || value.get()
                    disabled=move || locked.get() || !relevant(field)
                    aria-invalid=move || problem().is_some().to_string()
                    on:input=move |ev| value.set(event_target_value(&ev))
                />
                <span class="field-hint">{move || field.hint(t())}</span>
                <span class="field-error" role="alert">{problem}</span>
            </label>
        }
    };
    let select = move |field: Field, options: Vec<(&'static str, Label)>, wide: bool| {
        let value = settings.get(field);
        let problem = move || problems.with(|p| p.iter().find(|(f, _)| *f == field).map(|(_, m)| m.clone()));
        view! {
            <label class="field" class:wide=wide class:invalid=move || problem().is_some()>
                <span class="field-label">{move || field.label(t())}</span>
                <select
                    data-testid=format!("setting-{}", field.key())
                    aria-invalid=move || problem().is_some().to_string()
                    disabled=move || locked.get()
                    on:change=move |ev| value.set(event_target_value(&ev))
                    prop:value=move || value.get()
                >
                    {options
                        .into_iter()
                        .map(|(key, label)| {
                            view! {
                                <option value=key selected=move || value.get() == key>
                                    {move || label(t())}
                                </option>
                            }
                        })
                        .collect_view()}
                </select>
                <span class="field-hint">{move || field.hint(t())}</span>
                <span class="field-error" role="alert">{problem}</span>
            </label>
        }
    };
    let reload_note = move || {
        let (loaded, wanted) = reload?.get()?;
        let text = t().reload_needed.replace("{loaded}", &loaded.describe()).replace("{wanted}", &wanted.describe());
        Some(view! {
            <div class="note warn reload" data-testid="reload-note" role="status">
                <span>{text}</span>
                <button
                    class="ghost"
                    data-testid="reload-model"
                    disabled=move || locked.get()
                    on:click=move |_| {
                        if let Some(f) = on_reload {
                            f.run(())
                        }
                    }
                >
                    {move || t().reload_model}
                </button>
            </div>
        })
    };
    view! {
        <section class="card" aria-labelledby="settings-title" data-testid="settings">
            <div class="card-head">
                <h2 id="settings-title">{move || t().settings}</h2>
                <button class="link" disabled=move || locked.get() on:click=move |_| settings.reset()>
                    {move || t().reset}
                </button>
            </div>
            <div class="fields">
                {select(
                    Field::Arrival,
                    vec![
                        ("poisson", |t| t.arrival_poisson),
                        ("gamma", |t| t.arrival_gamma),
                        ("constant", |t| t.arrival_constant),
                        ("sequential", |t| t.arrival_sequential),
                        ("concurrency", |t| t.arrival_concurrency),
                    ],
                    true,
                )}
                {input(Field::Rate)}
                {input(Field::Burstiness)}
                {input(Field::Concurrency)}
                {input(Field::Requests)}
                {input(Field::InputLen)}
                {input(Field::OutputLen)}
                {input(Field::Seed)}
                {select(Field::Prompts, vec![("text", |t| t.prompts_text), ("random", |t| t.prompts_random)], true)}
                {input(Field::Turns)}
                {input(Field::ThinkTime)}
                {input(Field::WarmupRequests)}
                {input(Field::WarmupS)}
                {input(Field::CooldownS)}
            </div>
            {dataset
                .map(|x| {
                    view! {
                        <h3>{move || t().dataset}</h3>
                        <super::dataset::DatasetPicker x=x locked=locked />
                    }
                })}
            <h3>{move || t().engine}</h3>
            <div class="fields">{input(Field::MaxBatch)} {input(Field::MaxBatchedTokens)}</div>
            <h3>{move || t().optimisations}</h3>
            <div class="fields">
                {select(
                    Field::Weights,
                    vec![("bf16", |_| "bf16"), ("int8", |_| "int8"), ("int4", |_| "int4")],
                    false,
                )}
                {input(Field::Speculate)}
                {select(
                    Field::Policy,
                    vec![
                        ("fcfs", |t| t.policy_fcfs),
                        ("prefill-first", |t| t.policy_prefill_first),
                        ("decode-first", |t| t.policy_decode_first),
                    ],
                    true,
                )}
                {select(Field::ChunkedPrefill, vec![("on", |t| t.switch_on), ("off", |t| t.switch_off)], false)}
                {input(Field::PrefillChunk)}
                {select(Field::PrefixCache, vec![("off", |t| t.switch_off), ("on", |t| t.switch_on)], false)}
                {input(Field::SharedPrefix)}
            </div>
            {reload_note}
            <h3>{move || t().slo}</h3>
            <div class="fields">{input(Field::SloTtft)} {input(Field::SloTpot)} {input(Field::CostPerHour)}</div>
        </section>
    }
}
