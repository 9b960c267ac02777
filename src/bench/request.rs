//! A run as the user asks for it, from either edge. The CLI's flags and the page's form are each
//! only a map from [`Field`] to the text typed; [`RunRequest::parse`] reads and checks that text
//! once, here, and returns the run or **every** problem, each on its field
//! ([`crate::bench::base::rules`]), so the CLI names the flag and the page puts the message under its
//! input, in either language.

mod read;

use std::cell::RefCell;

use serde::{Deserialize, Serialize};

use crate::bench::base::field::Field;
use crate::bench::base::lang::Lang;
use crate::bench::base::rules::{Problem, Rule};
use crate::bench::measure::metrics::Slo;
use crate::bench::record::phases::Phases;
use crate::bench::record::run_config::Criteria;
use crate::bench::run::max_rate::RateSearch;
use crate::bench::run::session::SessionSpec;
use crate::bench::traffic::endpoint::NamedTarget;
use crate::bench::traffic::workload::{context_rule, WorkloadSpec};
use crate::engine::{Policy, Speculation};
use crate::gpu::WeightFormat;

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
    /// `--min-duration-s`: a measured phase shorter than this makes a run INVALID.
    #[serde(default)]
    pub min_duration_s: Option<f64>,
    /// Requests left out of each rate's summary (`--warmup-requests`, `--warmup-s`, `--cooldown-s`).
    pub phases: Phases,
    /// Where the requests go: the engine, or a server (never its key). Absent in requests saved
    /// before it was part of them: the engine.
    #[serde(default)]
    pub target: NamedTarget,
    /// Run one rate sized from the baseline instead of `rates` ([`SessionSpec::size_rate`]): the
    /// page's first run, when neither the user nor a link gave a rate. Never from the CLI's flags.
    #[serde(default)]
    pub size_rate: bool,
}

impl RunRequest {
    /// The one check of a request against the model and engine it is about to run on, once its
    /// dataset (if any) is attached — the CLI's `bench`, `compare` and `plan`, the Dawn runner and
    /// the page's worker all call it. One length is checked, the longest prompt a request can send
    /// ([`WorkloadSpec::prompt_range`]: a dataset's longest row, a conversation's whole history):
    /// with the longest output it must fit the model's context of `max_position` tokens, and its
    /// prefill one step when chunked prefill is off. A problem about the context is on the field
    /// that made the prompt that long: the dataset, the turns, else the output length.
    pub fn check_loaded(&self, max_position: usize) -> Result<(), Vec<Problem>> {
        let spec = &self.spec;
        let prompt = spec.prompt_range();
        let mut problems = Vec::new();
        if let Some(Rule::Context { input, output, max_position }) = context_rule(prompt, spec.output_len, max_position)
        {
            problems.push(match (&spec.dataset, &spec.conversations) {
                (Some(_), _) => Problem::new(Field::Dataset, Rule::Context { input, output, max_position }),
                (None, Some(_)) => Problem::new(
                    Field::Turns,
                    Rule::HistoryContext { longest: input.saturating_add(output), max_position },
                ),
                (None, None) => Problem::new(Field::OutputLen, Rule::Context { input, output, max_position }),
            });
        }
        if let Some(refusal) = self.policy.refusal(prompt.max, spec.output_len.max, self.max_batched_tokens) {
            problems.push(Problem::new(Field::ChunkedPrefill, Rule::Scheduler(refusal)));
        }
        match problems.is_empty() {
            true => Ok(()),
            false => Err(problems),
        }
    }

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
            criteria: Criteria {
                attainment: self.attainment,
                min_duration_s: self.min_duration_s,
                steady_required: false,
            },
            size_rate: self.size_rate,
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
        let request = read::parse(form, caps, &problems);
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
