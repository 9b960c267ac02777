//! The benchmark's settings: text fields validated as typed (each message next to its field),
//! read from the URL's query string on load and written back to it on every change, so a link
//! reproduces a run. Reading and checking them is the library's (`crate::bench::request`), as for the
//! CLI's flags.

use super::i18n::{use_text, Label, Text};
use crate::bench::base::rules::{Problem, Rule};
use crate::engine::Speculation;
use crate::gpu::WeightFormat;
use leptos::prelude::*;

pub use crate::bench::base::field::Field;
pub use crate::bench::request::{Caps, LoadOptions, RunRequest};

impl Field {
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
            Field::Attainment => t.attainment,
            Field::CancelShare => t.cancel_share,
            Field::CancelAfter => t.cancel_after,
            // The target card's, which labels its own inputs.
            Field::Endpoint => t.endpoint,
            Field::ServedModel => t.served_model,
            Field::Api => t.api_style,
            // The CLI's own fields: no input on the page.
            Field::ArrivalSpan
            | Field::PrefixGroups
            | Field::MaxConcurrency
            | Field::SaturationStop
            | Field::Slo
            | Field::Dataset
            | Field::MinDuration => "",
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
            Field::Attainment => t.attainment_hint,
            Field::CancelShare => t.cancel_share_hint,
            Field::CancelAfter => t.cancel_after_hint,
            _ => "",
        }
    }
}

/// The settings as typed, one signal per field, and whether the next run sizes its rate.
#[derive(Clone, Copy)]
pub struct Settings([RwSignal<String>; Field::PAGE.len()], RwSignal<bool>);

impl Settings {
    /// Defaults, overridden by whatever the query string says. Without a rate in it, the first
    /// run sizes its rate from the baseline ([`Settings::sizes_rate`]).
    pub fn from_query() -> Settings {
        let fields = Field::PAGE.map(|f| {
            RwSignal::new(crate::web::browser::query_param(f.key()).unwrap_or_else(|| f.default_value().to_string()))
        });
        let sizing = crate::web::browser::query_param(Field::Rate.key()).is_none();
        Settings(fields, RwSignal::new(sizing))
    }

    /// Whether Run sizes its rate from the baseline: neither a link nor the user gave one (typing
    /// a rate, *Defaults*, *Run again* or a sized run, which leaves its rate in the field, end it).
    pub fn sizes_rate(&self) -> bool {
        self.1.get()
    }

    /// A rate now stands in the field as given: the next runs use it.
    pub fn rate_given(&self) {
        self.1.set(false);
    }

    /// A page field's signal ([`Field::PAGE`]; the CLI's own fields have none).
    pub fn get(&self, field: Field) -> RwSignal<String> {
        self.0[field as usize]
    }

    /// The text of every field as the run request reads it: the page's inputs, the CLI's own
    /// fields left at their defaults.
    pub fn value(&self, field: Field) -> Option<String> {
        Field::PAGE.contains(&field).then(|| self.get(field).get())
    }

    /// Fields that differ from their default, for the query string (tracked).
    pub fn changed(&self) -> Vec<(&'static str, String)> {
        Field::PAGE
            .into_iter()
            .filter_map(|f| {
                let value = self.get(f).get();
                (value != f.default_value()).then_some((f.key(), value))
            })
            .collect()
    }

    pub fn reset(&self) {
        for f in Field::PAGE {
            self.get(f).set(f.default_value().to_string());
        }
        self.rate_given();
    }
}

impl LoadOptions {
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

/// Checks every field ([`RunRequest::parse`], the target's with them): all problems at once, each
/// with its field and in the page's language. `value`: a field's text (`None`: its default). The
/// target card shows its own fields' problems (the same check of the same text), so they are not
/// listed here; the request is refused all the same.
pub fn validate(value: &dyn Fn(Field) -> Option<String>, caps: Option<Caps>, t: &Text) -> Result<RunRequest, Problems> {
    let shown = |p: Problem| {
        // The page has one input where the CLI has two spellings of the same thing.
        let field = match p.field {
            Field::Endpoint | Field::ServedModel | Field::Api => return None,
            Field::Slo => Field::SloTtft,
            f if Field::PAGE.contains(&f) => f,
            _ => Field::Requests,
        };
        // The page's own words for a search without an SLO (the rule's name the CLI's flag).
        let text = match p.rule {
            Rule::RateMaxNeedsSlo => t.search_needs_slo.to_string(),
            _ => p.text(t.lang),
        };
        Some((field, text))
    };
    let request = RunRequest::parse(value, caps)
        .map_err(|problems| problems.into_iter().filter_map(shown).collect::<Problems>())?;
    // The page loads one model: a draft model (`draft:DIR:K`) is the CLI's.
    if matches!(request.load.speculation, Speculation::Draft { .. }) {
        return Err(shown(Problem::new(Field::Speculate, Rule::DraftOnCli)).into_iter().collect());
    }
    Ok(request)
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
    /// *Find the highest rate*: the Rate set to `max` and the search started (absent: no button).
    #[prop(optional, into)]
    on_search: Option<Callback<()>>,
    /// Whether a run could start now (a model loaded or a server set up, nothing running).
    #[prop(optional, into)]
    can_start: Option<Signal<bool>>,
) -> impl IntoView {
    let t = use_text();
    let input =
        move |field: Field| view! { <TextField field=field settings=settings problems=problems locked=locked /> };
    let select = move |field: Field, options: Vec<(&'static str, Label)>, wide: bool| {
        view! {
            <SelectField field=field options=options wide=wide settings=settings problems=problems locked=locked />
        }
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
                {input(Field::CancelShare)}
                {input(Field::CancelAfter)}
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
            <ReloadNote reload=reload on_reload=on_reload locked=locked />
            <h3>{move || t().slo}</h3>
            <div class="fields">
                {input(Field::SloTtft)} {input(Field::SloTpot)} {input(Field::Attainment)} {input(Field::CostPerHour)}
            </div>
            {on_search
                .map(|search| {
                    let enabled = move || can_start.is_none_or(|c| c.get()) && !locked.get();
                    view! {
                        <div class="row">
                            <button
                                class="small"
                                data-testid="find-max-rate"
                                disabled=move || !enabled()
                                on:click=move |_| search.run(())
                            >
                                {move || t().find_max_rate}
                            </button>
                            <span class="note inline">{move || t().find_max_rate_hint}</span>
                        </div>
                    }
                })}
        </section>
    }
}

/// Whether `field` applies to the arrival and chunking chosen (tracked); one that does not is
/// muted and disabled.
fn relevant(settings: Settings, field: Field) -> bool {
    let arrival = settings.get(Field::Arrival);
    match field {
        Field::Rate => matches!(arrival.get().as_str(), "poisson" | "gamma" | "constant"),
        Field::Burstiness => arrival.get() == "gamma",
        Field::Concurrency => arrival.get() == "concurrency",
        Field::PrefillChunk => settings.get(Field::ChunkedPrefill).get() != "off",
        _ => true,
    }
}

/// `field`'s problem in the live validation, if any (tracked).
fn problem_of(problems: Memo<Problems>, field: Field) -> Option<String> {
    problems.with(|p| p.iter().find(|(f, _)| *f == field).map(|(_, m)| m.clone()))
}

/// A field typed as text: label, input, hint and problem.
#[component]
fn TextField(
    field: Field,
    settings: Settings,
    /// The live validation.
    problems: Memo<Problems>,
    /// While a run is going.
    locked: Signal<bool>,
) -> impl IntoView {
    let t = use_text();
    let value = settings.get(field);
    let problem = move || problem_of(problems, field);
    let id = format!("setting-{}", field.key());
    view! {
        <label class="field" class:muted=move || !relevant(settings, field) class:invalid=move || problem().is_some()>
            <span class="field-label">{move || field.label(t())}</span>
            <input
                id=id
                data-testid=format!("setting-{}", field.key())
                autocomplete="off"
                spellcheck="false"
                prop:value=move || value.get()
                disabled=move || locked.get() || !relevant(settings, field)
                aria-invalid=move || problem().is_some().to_string()
                on:input=move |ev| {
                    value.set(event_target_value(&ev));
                    if field == Field::Rate {
                        settings.rate_given();
                    }
                }
            />
            <span class="field-hint">{move || field.hint(t())}</span>
            <span class="field-error" role="alert">{problem}</span>
        </label>
    }
}

/// A field chosen from a list: label, select, hint and problem.
#[component]
fn SelectField(
    field: Field,
    /// (value, its label) per option.
    options: Vec<(&'static str, Label)>,
    /// Spans two columns.
    wide: bool,
    settings: Settings,
    /// The live validation.
    problems: Memo<Problems>,
    /// While a run is going.
    locked: Signal<bool>,
) -> impl IntoView {
    let t = use_text();
    let value = settings.get(field);
    let problem = move || problem_of(problems, field);
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
}

/// What the loaded model has against what the settings ask for, with a button that uploads the
/// model again; nothing while they agree.
#[component]
fn ReloadNote(
    /// (loaded, wanted) when they differ (absent: no note).
    reload: Option<Signal<Option<(LoadOptions, LoadOptions)>>>,
    /// Uploads the model again.
    on_reload: Option<Callback<()>>,
    /// While a run is going.
    locked: Signal<bool>,
) -> impl IntoView {
    let t = use_text();
    move || {
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
    }
}
