//! The fields of a run request: each a flag of `tokenmeter bench` and an input of the page's
//! settings card, with its default, and the arguments a set of fields reads as (and back).

use serde::{Deserialize, Serialize};

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
    /// The share of requests that must meet every SLO: `--rate max`'s criterion, and `plan
    /// --find-replicas`'s.
    Attainment,
    /// The share of requests the workload aborts (empty: none; [`Field::CancelAfter`] says when).
    CancelShare,
    /// Milliseconds after a request is sent that it is aborted: one value or a range (`50:200`).
    CancelAfter,
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
    /// A server's API root (empty: the engine in this process); the page's target card.
    Endpoint,
    /// The model name sent to the server (empty: the only one it lists).
    ServedModel,
    /// `completions` or `chat`.
    Api,
    /// The shortest measured phase a valid run may have, seconds of scheduled arrivals (empty:
    /// none; `mlperf`: LoadGen's 600 s).
    MinDuration,
}

impl Field {
    /// The page's inputs, the first of [`Field::ALL`] (`field as usize` indexes them).
    pub const PAGE: [Field; 29] = {
        let mut page = [Field::Arrival; 29];
        let mut i = 0;
        while i < page.len() {
            page[i] = Field::ALL[i];
            i += 1;
        }
        page
    };

    /// Every field: the page's, then the CLI's own.
    pub const ALL: [Field; 39] = [
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
        Field::Attainment,
        Field::CancelShare,
        Field::CancelAfter,
        Field::ArrivalSpan,
        Field::PrefixGroups,
        Field::MaxConcurrency,
        Field::SaturationStop,
        Field::Slo,
        Field::Dataset,
        Field::Endpoint,
        Field::ServedModel,
        Field::Api,
        Field::MinDuration,
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
            Field::CancelShare => "cancel_share",
            Field::CancelAfter => "cancel_after_ms",
            Field::Endpoint => "endpoint",
            Field::ServedModel => "served_model",
            Field::Api => "api",
            Field::MinDuration => "min_duration_s",
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
            Field::CancelShare => "--cancel-share",
            Field::CancelAfter => "--cancel-after-ms",
            Field::Endpoint => "--endpoint",
            Field::ServedModel => "--served-model",
            Field::Api => "--api",
            Field::MinDuration => "--min-duration-s",
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
            | Field::ServedModel
            | Field::MinDuration
            | Field::CancelShare
            | Field::CancelAfter => "",
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
