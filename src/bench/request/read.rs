//! Reading a run request's form: one typed getter per kind of field ([`Reader`]), one function per
//! group of fields (sizes, switches, rates, SLOs, conversations, the engine's policy, the workload,
//! the target). Every problem found is kept on its field; a group returns `None` for a value whose
//! field was broken, and the request is whole only when nothing was.

use std::cell::RefCell;

use super::{Caps, Form, LoadOptions, RunRequest};
use crate::bench::base::field::Field;
use crate::bench::base::rules::{Problem, Rule};
use crate::bench::measure::metrics::Slo;
use crate::bench::record::phases::Phases;
use crate::bench::record::run_config::MLPERF_MIN_DURATION_S;
use crate::bench::run::max_rate::RateSearch;
use crate::bench::traffic::cancel::{Cancellations, DelayRange};
use crate::bench::traffic::endpoint::{Api, BaseUrl, NamedTarget, ServerAddress};
use crate::bench::traffic::workload::{
    context_rule, Arrival, ArrivalSpan, Conversations, LenRange, SharedPrefix, WorkloadSpec,
};
use crate::bench::verdict::sweep::parse_rates;
use crate::engine::{Order, Policy, Speculation};
use crate::gpu::WeightFormat;
use crate::limits;

/// The form and the problems found in it so far.
struct Reader<'a> {
    form: Form<'a>,
    problems: &'a RefCell<Vec<Problem>>,
}

impl Reader<'_> {
    /// The field's text, trimmed, or its default when empty.
    fn text(&self, field: Field) -> String {
        let given = (self.form)(field).map(|t| t.trim().to_string()).unwrap_or_default();
        if given.is_empty() {
            field.default_value().to_string()
        } else {
            given
        }
    }

    /// The field's text as typed, when it is not blank (fields with no default).
    fn given(&self, field: Field) -> Option<String> {
        (self.form)(field).filter(|t| !t.trim().is_empty())
    }

    fn broken(&self, field: Field, rule: Rule) {
        self.problems.borrow_mut().push(Problem::new(field, rule));
    }

    fn has_problems(&self) -> bool {
        !self.problems.borrow().is_empty()
    }

    /// The fields with a problem so far.
    fn broken_fields(&self) -> Vec<Field> {
        self.problems.borrow().iter().map(|p| p.field).collect()
    }

    fn count(&self, field: Field, min: usize, max: usize) -> Option<usize> {
        let n = limits::parse_count(&self.text(field), min, max).ok();
        if n.is_none() {
            self.broken(field, Rule::Count { min: min as u64, max: max as u64 });
        }
        n
    }

    /// An engine size: positive, and at most `limit` (what the model was loaded for).
    fn size(&self, field: Field, limit: usize) -> Option<usize> {
        match self.count(field, 0, usize::MAX)? {
            0 => self.broken(field, Rule::AboveZero),
            n if n > limit => self.broken(field, Rule::AtMost { limit }),
            n => return Some(n),
        }
        None
    }

    fn number(&self, field: Field, min: f64, max: f64) -> Option<f64> {
        let x = limits::parse_number(&self.text(field), min, max).ok();
        if x.is_none() {
            self.broken(field, Rule::Number { min, max });
        }
        x
    }

    /// `Some(None)` when the field is empty (it has no default), else its count or number.
    fn optional<T>(&self, field: Field, read: impl FnOnce(&Self) -> Option<T>) -> Option<Option<T>> {
        match self.text(field).as_str() {
            "" => Some(None),
            _ => read(self).map(Some),
        }
    }

    /// `parsed` (the field's text read as one of a set of names), or the problem naming the set.
    fn choice<T>(&self, field: Field, name: &'static str, expected: &'static str, parsed: Option<T>) -> Option<T> {
        if parsed.is_none() {
            self.broken(field, Rule::Choice { name, value: self.text(field), expected });
        }
        parsed
    }

    fn on_off(&self, field: Field, name: &'static str) -> Option<bool> {
        let value = match self.text(field).as_str() {
            "on" => Some(true),
            "off" => Some(false),
            _ => None,
        };
        self.choice(field, name, "on or off", value)
    }

    fn len_range(&self, field: Field) -> Option<LenRange> {
        LenRange::parse(&self.text(field)).map_err(|rule| self.broken(field, rule)).ok()
    }
}

/// The counts, sizes and numbers of the form, each `None` where its field is broken.
struct Numbers {
    concurrency: Option<usize>,
    num_requests: Option<usize>,
    shared_prefix_len: Option<usize>,
    prefix_groups: Option<usize>,
    warmup_requests: Option<usize>,
    max_concurrency: Option<Option<usize>>,
    max_batch: Option<usize>,
    max_batched_tokens: Option<usize>,
    seed: Option<u64>,
    burstiness: Option<f64>,
    think_time_s: Option<f64>,
    warmup_s: Option<f64>,
    cooldown_s: Option<f64>,
    cost_per_hour: Option<Option<f64>>,
    min_duration_s: Option<Option<f64>>,
}

fn numbers(r: &Reader, caps: Option<Caps>) -> Numbers {
    let concurrency = r.count(Field::Concurrency, 1, limits::MAX_CONCURRENCY);
    let num_requests = r.count(Field::Requests, 1, limits::MAX_REQUESTS);
    let shared_prefix_len = r.count(Field::SharedPrefix, 0, limits::MAX_TOKENS);
    let prefix_groups = r.count(Field::PrefixGroups, 1, limits::MAX_PREFIX_GROUPS);
    let warmup_requests = r.count(Field::WarmupRequests, 0, limits::MAX_REQUESTS);
    let max_concurrency =
        r.optional(Field::MaxConcurrency, |r| r.count(Field::MaxConcurrency, 1, limits::MAX_CONCURRENCY));
    let max_batch = r.size(Field::MaxBatch, caps.map_or(limits::MAX_SEQS, |c| c.max_batch));
    let max_batched_tokens =
        r.size(Field::MaxBatchedTokens, caps.map_or(limits::MAX_BATCHED_TOKENS, |c| c.max_batched_tokens));
    let seed = r.text(Field::Seed).parse::<u64>().ok();
    if seed.is_none() {
        r.broken(Field::Seed, Rule::Count { min: 0, max: u64::MAX });
    }
    Numbers {
        concurrency,
        num_requests,
        shared_prefix_len,
        prefix_groups,
        warmup_requests,
        max_concurrency,
        max_batch,
        max_batched_tokens,
        seed,
        burstiness: r.number(Field::Burstiness, limits::MIN_BURSTINESS, limits::MAX_BURSTINESS),
        think_time_s: r.number(Field::ThinkTime, 0.0, limits::MAX_SCHEDULE_S),
        warmup_s: r.number(Field::WarmupS, 0.0, limits::MAX_SCHEDULE_S),
        cooldown_s: r.number(Field::CooldownS, 0.0, limits::MAX_SCHEDULE_S),
        cost_per_hour: r.optional(Field::CostPerHour, |r| r.number(Field::CostPerHour, 0.0, 1e6)),
        // LoadGen's minimum duration by its name, else seconds.
        min_duration_s: match r.text(Field::MinDuration).as_str() {
            "mlperf" => Some(Some(MLPERF_MIN_DURATION_S)),
            _ => r.optional(Field::MinDuration, |r| r.number(Field::MinDuration, 0.0, 1e7)),
        },
    }
}

/// The fields that name one of a set.
struct Switches {
    arrival: Option<Arrival>,
    span: Option<ArrivalSpan>,
    saturation_stop: Option<bool>,
    chunked_prefill: Option<bool>,
    prefix_cache: Option<bool>,
    random_prompts: Option<bool>,
    weights: Option<WeightFormat>,
    order: Option<Order>,
    speculation: Option<Speculation>,
}

fn switches(r: &Reader) -> Switches {
    fn parsed<T: std::str::FromStr>(r: &Reader, field: Field) -> Option<T> {
        r.text(field).parse().ok()
    }
    let random_prompts = match r.text(Field::Prompts).as_str() {
        "text" => Some(false),
        "random" => Some(true),
        _ => None,
    };
    Switches {
        arrival: r.choice(Field::Arrival, "arrival", Arrival::NAMES, parsed(r, Field::Arrival)),
        span: r.choice(Field::ArrivalSpan, "arrival span", "drawn or exact", parsed(r, Field::ArrivalSpan)),
        saturation_stop: r.on_off(Field::SaturationStop, "saturation stop"),
        chunked_prefill: r.on_off(Field::ChunkedPrefill, "chunked prefill"),
        prefix_cache: r.on_off(Field::PrefixCache, "prefix cache"),
        random_prompts: r.choice(Field::Prompts, "prompts", "text or random", random_prompts),
        weights: r.choice(
            Field::Weights,
            "weight format",
            "bf16, int8 or int4",
            WeightFormat::parse(&r.text(Field::Weights)),
        ),
        order: r.choice(
            Field::Policy,
            "scheduling policy",
            "fcfs, prefill-first or decode-first",
            parsed(r, Field::Policy),
        ),
        speculation: r
            .text(Field::Speculate)
            .parse::<Speculation>()
            .map_err(|_| r.broken(Field::Speculate, Rule::Speculation { max: crate::engine::speculate::MAX_DRAFT }))
            .ok(),
    }
}

/// The Rate field: one rate, several (`1,2,4,inf`: a sweep), or `max` (a search, alone).
struct Rates {
    max: bool,
    rates: Option<Vec<f64>>,
}

fn rates(r: &Reader) -> Rates {
    let text = r.text(Field::Rate);
    let max = text == "max";
    let names_max = text.split(',').any(|rate| rate.trim() == "max");
    if !max && names_max {
        r.broken(Field::Rate, Rule::RateMaxAlone);
    }
    let rates = match parse_rates(if max { Field::Rate.default_value() } else { &text }) {
        Ok(rates) => Some(rates),
        Err(_) if names_max => None,
        Err(_) => {
            let bad = text.split(',').map(str::trim).find(|rate| parse_rates(rate).is_err()).unwrap_or_default();
            let rule = match bad {
                "" => Rule::EmptyRate { text: text.clone() },
                bad => Rule::NotARate { text: bad.to_string() },
            };
            r.broken(Field::Rate, rule);
            None
        }
    };
    Rates { max, rates }
}

/// The SLOs: the CLI's `--slo` text, and the page's two fields (a number of milliseconds each), as
/// one `--slo` text and its parse. `--rate max` needs one, and an open loop.
fn slos(r: &Reader, rates: &Rates, arrival: Option<Arrival>) -> (Option<String>, Option<Slo>) {
    let mut parts = Vec::new();
    if let Some(text) = r.given(Field::Slo) {
        match Slo::read(&text) {
            Ok(_) => parts.push(text.trim().to_string()),
            Err(rule) => r.broken(Field::Slo, rule),
        }
    }
    for (field, key) in [(Field::SloTtft, "ttft_ms"), (Field::SloTpot, "tpot_ms")] {
        if let Some(ms) = r.given(field) {
            match ms.trim().parse::<f64>() {
                Ok(x) if x.is_finite() && x > 0.0 => parts.push(format!("{key}={}", ms.trim())),
                Ok(x) if x.is_finite() => r.broken(field, Rule::AboveZero),
                _ => r.broken(field, Rule::NotANumber { text: ms.trim().to_string() }),
            }
        }
    }
    if rates.max && parts.is_empty() && !r.broken_fields().contains(&Field::Slo) {
        r.broken(Field::Slo, Rule::RateMaxNeedsSlo);
    }
    if rates.max && arrival.is_some_and(|a| !matches!(a, Arrival::Poisson | Arrival::Gamma | Arrival::Constant)) {
        r.broken(Field::Arrival, Rule::RateMaxOpenLoop);
    }
    let text = (!parts.is_empty()).then(|| parts.join(","));
    let slo = text.as_deref().and_then(|s| s.parse::<Slo>().ok());
    (text, slo)
}

/// Conversations: empty turns means none, and then no think time; `dataset`: the dataset's own
/// conversations, which needs a dataset; a range draws each conversation's turns (not with a
/// dataset, whose rows are the turns).
fn conversations(r: &Reader, think_time_s: Option<f64>, dataset: bool) -> Option<Option<Conversations>> {
    match r.text(Field::Turns).as_str() {
        "" => {
            if think_time_s.is_some_and(|s| s != 0.0) {
                r.broken(Field::ThinkTime, Rule::ThinkTimeNeedsTurns);
            }
            Some(None)
        }
        "dataset" if !dataset => {
            r.broken(Field::Turns, Rule::TurnsDatasetNeedsDataset);
            None
        }
        "dataset" => think_time_s.map(|s| Some(Conversations::from_dataset(s))),
        _ if dataset => {
            r.broken(Field::Turns, Rule::DrawnTurnsWithDataset);
            None
        }
        turns => {
            let turns = LenRange::parse(turns).map_err(|rule| r.broken(Field::Turns, rule)).ok()?;
            think_time_s.map(|think_time_s| Some(Conversations { turns, think_time_s, from_dataset: false }))
        }
    }
}

fn shared_prefix(r: &Reader, n: &Numbers) -> Option<Option<SharedPrefix>> {
    match (n.shared_prefix_len, n.prefix_groups) {
        (Some(0), Some(1)) => Some(None),
        (Some(0), Some(_)) => {
            r.broken(Field::PrefixGroups, Rule::PrefixGroupsNeedSharedPrefix);
            None
        }
        (Some(len), Some(groups)) => Some(Some(SharedPrefix { len, groups })),
        _ => None,
    }
}

/// The engine's scheduling policy. The prefill chunk: empty means as large as the step allows; a
/// size needs chunking on.
fn policy(r: &Reader, s: &Switches) -> Option<Policy> {
    let prefill_chunk = r.optional(Field::PrefillChunk, |r| {
        match limits::parse_count(&r.text(Field::PrefillChunk), 1, limits::MAX_BATCHED_TOKENS) {
            Ok(n) if s.chunked_prefill != Some(false) => Some(n),
            Ok(_) => {
                r.broken(Field::PrefillChunk, Rule::ChunkNeedsChunking);
                None
            }
            Err(_) => {
                r.broken(Field::PrefillChunk, Rule::Count { min: 1, max: limits::MAX_BATCHED_TOKENS as u64 });
                None
            }
        }
    });
    Some(Policy { order: s.order?, chunked_prefill: s.chunked_prefill?, prefill_chunk: prefill_chunk? })
}

/// A field's default, parsed (defaults always parse).
fn default<T: std::str::FromStr>(field: Field) -> T {
    field.default_value().parse().ok().expect("a field's default parses")
}

/// The workload the fields describe — where some did not parse, with their defaults, so that the
/// workload's own rules can still be checked and every problem reported at once.
fn workload(
    n: &Numbers,
    s: &Switches,
    rates: &Rates,
    lens: [Option<LenRange>; 2],
    conversations: Option<Conversations>,
    shared_prefix: Option<SharedPrefix>,
    cancel: Option<Cancellations>,
) -> WorkloadSpec {
    let rates = rates
        .rates
        .clone()
        .unwrap_or_else(|| parse_rates(Field::Rate.default_value()).expect("the default rate parses"));
    WorkloadSpec {
        arrival: s.arrival.unwrap_or_else(|| default(Field::Arrival)),
        rate: rates[0],
        burstiness: n.burstiness.unwrap_or_else(|| default(Field::Burstiness)),
        concurrency: n.concurrency.unwrap_or_else(|| default(Field::Concurrency)),
        span: s.span.unwrap_or_else(|| default(Field::ArrivalSpan)),
        num_requests: n.num_requests.unwrap_or_else(|| default(Field::Requests)),
        input_len: lens[0].unwrap_or_else(|| default(Field::InputLen)),
        output_len: lens[1].unwrap_or_else(|| default(Field::OutputLen)),
        seed: n.seed.unwrap_or_else(|| default(Field::Seed)),
        dataset: None,
        max_concurrency: n.max_concurrency.flatten(),
        // The stop judges arrivals in time order; a conversation's later turns have none.
        saturation_stop: s.saturation_stop.unwrap_or(true) && conversations.is_none(),
        shared_prefix,
        conversations,
        cancel,
    }
}

/// The workload's cancellations: `Some(None)` when neither field is given, `None` when one is
/// broken or given without the other (said in `problems`).
fn cancellations(r: &Reader) -> Option<Option<Cancellations>> {
    let (share, after) = (r.given(Field::CancelShare), r.given(Field::CancelAfter));
    match (&share, &after) {
        (None, None) => return Some(None),
        (Some(_), None) => r.broken(Field::CancelAfter, Rule::CancelNeedsBoth),
        (None, Some(_)) => r.broken(Field::CancelShare, Rule::CancelNeedsBoth),
        (Some(_), Some(_)) => {}
    }
    let share = share.map(|text| match limits::parse_number(&text, 0.0, 1.0) {
        Ok(share) if share > 0.0 => Some(share),
        Ok(share) => {
            r.broken(Field::CancelShare, Rule::CancelShare { share });
            None
        }
        Err(_) => {
            r.broken(Field::CancelShare, Rule::Number { min: 0.0, max: 1.0 });
            None
        }
    });
    let after_s = after.map(|text| DelayRange::parse_ms(&text).map_err(|rule| r.broken(Field::CancelAfter, rule)).ok());
    Some(Some(Cancellations { share: share.flatten()?, after_s: after_s.flatten()? }))
}

/// The workload's own rules at every rate, leaving out those about fields already broken (their
/// problem is said) and those that wait for a named dataset's rows (checked again once attached:
/// a trace's arrivals); then whether the lengths fit the model's context.
fn workload_problems(
    r: &Reader,
    spec: &WorkloadSpec,
    rates: &Rates,
    dataset: bool,
    caps: Option<Caps>,
    lens: [Option<LenRange>; 2],
) {
    let broken_before = r.broken_fields();
    // A dataset's own conversations are checked once its rows are attached.
    let checked = WorkloadSpec { conversations: spec.conversations.filter(|c| !c.from_dataset), ..spec.clone() };
    let waits_for_rows = |p: &Problem| dataset && p.rule == Rule::TraceNeedsTrace;
    for &rate in rates.rates.as_deref().unwrap_or(&[spec.rate]) {
        let found = WorkloadSpec { rate, ..checked.clone() }.problems();
        r.problems
            .borrow_mut()
            .extend(found.into_iter().filter(|p| !broken_before.contains(&p.field) && !waits_for_rows(p)));
    }
    let (Some(caps), [Some(input_len), Some(output_len)]) = (caps, lens) else { return };
    if let Some(rule) = context_rule(input_len, output_len, caps.max_position) {
        r.broken(Field::OutputLen, rule);
    }
    // A conversation's history must fit the model's context too.
    if checked.conversations.is_some() {
        if let Some(Rule::Context { input, output, max_position }) =
            context_rule(spec.prompt_range(), output_len, caps.max_position)
        {
            let longest = input.saturating_add(output);
            r.broken(Field::Turns, Rule::HistoryContext { longest, max_position });
        }
    }
}

/// The target: a server when an endpoint is given, its URL and API checked here (its engine
/// settings are checked once the request is whole: `RunRequest::server_problems`).
fn target(r: &Reader) -> Option<NamedTarget> {
    match r.text(Field::Endpoint).as_str() {
        "" => Some(NamedTarget::Engine),
        url => {
            let base_url = BaseUrl::read(url).map_err(|rule| r.broken(Field::Endpoint, rule)).ok();
            let api = r.choice(Field::Api, "API", "completions or chat", r.text(Field::Api).parse::<Api>().ok());
            let served_model = Some(r.text(Field::ServedModel)).filter(|m| !m.is_empty());
            Some(NamedTarget::Server(ServerAddress { base_url: base_url?, served_model, api: api? }))
        }
    }
}

/// The whole request, or `None` with every problem in `problems`.
pub(super) fn parse(form: Form, caps: Option<Caps>, problems: &RefCell<Vec<Problem>>) -> Option<RunRequest> {
    let r = Reader { form, problems };
    let n = numbers(&r, caps);
    let s = switches(&r);
    let attainment = r.number(Field::Attainment, 0.0, 1.0);
    let rates = rates(&r);
    let lens = [Field::InputLen, Field::OutputLen].map(|field| r.len_range(field));
    let (slo_text, slo) = slos(&r, &rates, s.arrival);
    let dataset = !r.text(Field::Dataset).is_empty();
    let conversations = conversations(&r, n.think_time_s, dataset);
    let shared_prefix = shared_prefix(&r, &n);
    let policy = policy(&r, &s);
    let cancel = cancellations(&r);
    let spec = workload(&n, &s, &rates, lens, conversations.flatten(), shared_prefix.flatten(), cancel.flatten());
    workload_problems(&r, &spec, &rates, dataset, caps, lens);
    let phases = Phases {
        warmup_requests: n.warmup_requests.unwrap_or(0),
        warmup_s: n.warmup_s.unwrap_or(0.0),
        cooldown_s: n.cooldown_s.unwrap_or(0.0),
    };
    if n.warmup_requests.is_some() && n.num_requests.is_some() {
        if let Some(rule) = phases.rule(spec.num_requests) {
            r.broken(Field::WarmupRequests, rule);
        }
    }
    // Without chunked prefill a request's whole prefill must fit one step (the engine's own rule).
    if let (Some(policy), Some(max_batched_tokens), [Some(input_len), Some(output_len)]) =
        (policy, n.max_batched_tokens, lens)
    {
        if let Some(refusal) = policy.refusal(input_len.max, output_len.max, max_batched_tokens) {
            r.broken(Field::ChunkedPrefill, Rule::Scheduler(refusal));
        }
    }
    let target = target(&r);
    if r.has_problems() {
        return None;
    }
    // Everything parsed (no problem was found), so the defaults in `spec` were not used. Rates only
    // matter to the open-loop arrivals; the others run once. A search picks its own.
    let search = rates.max.then(|| RateSearch::new(attainment.unwrap_or(0.99)));
    let rates = match (rates.max, spec.arrival.open_loop()) {
        (true, _) => Vec::new(),
        (false, true) => rates.rates?,
        (false, false) => vec![spec.rate],
    };
    Some(RunRequest {
        size_rate: false,
        spec,
        rates,
        slo,
        slo_text,
        max_batch: n.max_batch?,
        max_batched_tokens: n.max_batched_tokens?,
        random_prompts: s.random_prompts?,
        policy: policy?,
        load: LoadOptions { weights: s.weights?, speculation: s.speculation?, prefix_cache: s.prefix_cache? },
        cost_per_hour: n.cost_per_hour?,
        min_duration_s: n.min_duration_s?,
        phases,
        search,
        attainment: attainment?,
        target: target?,
    })
}

#[cfg(test)]
mod tests {
    use crate::bench::base::field::Field;
    use crate::bench::base::lang::Lang;
    use crate::bench::base::rules::Rule;
    use crate::bench::request::RunRequest;

    /// The problems on `field` when only `set` is given, in both languages.
    fn worded(set: &[(Field, &str)], field: Field) -> Vec<(Rule, String, String)> {
        let form = |f: Field| set.iter().find(|(g, _)| *g == f).map(|(_, v)| v.to_string());
        let problems = RunRequest::parse(&form, None).expect_err("the form is invalid");
        let on: Vec<_> = problems.into_iter().filter(|p| p.field == field).collect();
        on.into_iter().map(|p| (p.rule.clone(), p.text(Lang::En), p.text(Lang::Zh))).collect()
    }

    #[test]
    fn an_empty_entry_in_the_rates_is_said_to_be_one() {
        for rates in ["1,,2", "1,2,", ",4"] {
            let found = worded(&[(Field::Rate, rates)], Field::Rate);
            assert_eq!(found.len(), 1, "{rates}: {found:?}");
            let (rule, en, zh) = &found[0];
            assert_eq!(*rule, Rule::EmptyRate { text: rates.to_string() });
            assert!(en.contains("empty") && !en.contains("\"\""), "{rates}: {en}");
            assert!(zh.contains("为空") && !zh.contains("\"\""), "{rates}: {zh}");
        }
        // A word among the rates is still named.
        let found = worded(&[(Field::Rate, "1,fast")], Field::Rate);
        assert_eq!(found[0].0, Rule::NotARate { text: "fast".into() });
    }

    #[test]
    fn an_slo_that_is_not_a_number_is_said_to_be_none() {
        for (field, ms) in [(Field::SloTtft, "x"), (Field::SloTpot, "inf"), (Field::SloTtft, "NaN")] {
            let found = worded(&[(field, ms)], field);
            assert_eq!(found.len(), 1, "{ms}: {found:?}");
            let (rule, en, zh) = &found[0];
            assert_eq!(*rule, Rule::NotANumber { text: ms.to_string() });
            assert_eq!(*en, format!("{ms:?} is not a number"));
            assert_eq!(*zh, format!("{ms:?} 不是数字"));
        }
        // A number at or below 0 is one, and must be above it.
        for ms in ["0", "-5"] {
            let found = worded(&[(Field::SloTtft, ms)], Field::SloTtft);
            assert_eq!(found.iter().map(|f| f.0.clone()).collect::<Vec<_>>(), [Rule::AboveZero], "{ms}");
        }
    }
}
