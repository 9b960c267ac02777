//! What to send and when: arrival times and prompt/output lengths, planned up front from a seed
//! so two runs of the same spec send the same requests (their contents: `traffic::prompts`).
//! Open loops draw gaps with mean 1/rate: exponential (Poisson), gamma with shape = burstiness
//! (1 = Poisson), or constant. Where the first request goes and whether the total span is
//! rescaled differ between benchmark tools and their versions; both choices are here
//! ([`ArrivalSpan`]).

use std::str::FromStr;

use rand::rngs::StdRng;
use rand::Rng;
use rand_distr::{Distribution, Exp, Gamma};
use serde::{Deserialize, Serialize};

use crate::bench::base::field::Field;
use crate::bench::base::lang::Lang;
use crate::bench::base::rules::{Problem, Rule};
use crate::bench::base::streams::{stream, STREAM_ARRIVALS, STREAM_CONVERSATIONS, STREAM_LENGTHS};
use crate::bench::traffic::cancel::Cancellations;
use crate::bench::traffic::dataset::{Attach, CountTokens, Dataset, DatasetFormat, DatasetWorkload, Select};
use crate::error::{Error, Result};
use crate::limits;

impl Arrival {
    pub const NAMES: &'static str = "poisson, gamma, constant, sequential, concurrency or trace";
}

/// How requests are released.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Arrival {
    /// Open loop, exponential gaps with mean 1/rate.
    Poisson,
    /// Open loop, gamma gaps: burstiness < 1 clusters requests, > 1 evens them out.
    Gamma,
    /// Open loop, exactly 1/rate apart.
    Constant,
    /// Closed loop, one request at a time.
    Sequential,
    /// Closed loop, `concurrency` requests in flight.
    Concurrency,
    /// Open loop at the times a trace recorded ([`crate::bench::traffic::dataset`], `--dataset-format trace`).
    Trace,
}

impl FromStr for Arrival {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "poisson" => Ok(Arrival::Poisson),
            "gamma" => Ok(Arrival::Gamma),
            "constant" => Ok(Arrival::Constant),
            "sequential" => Ok(Arrival::Sequential),
            "concurrency" => Ok(Arrival::Concurrency),
            "trace" => Ok(Arrival::Trace),
            _ => Err(Error::Invalid(
                Rule::Choice { name: "arrival", value: s.into(), expected: Arrival::NAMES }.text(Lang::En),
            )),
        }
    }
}

/// How the drawn arrival times of an open loop are placed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ArrivalSpan {
    /// As drawn: request 0 at t = 0, each later one a gap after the one before, so the last
    /// arrives around (N − 1)/rate, by chance earlier or later.
    #[default]
    Drawn,
    /// N gaps (the first one before request 0), rescaled so the last request arrives at exactly
    /// N/rate: the run offers exactly the rate asked, whatever the draw. The gaps keep their
    /// relative sizes (the process's shape); only the time unit changes.
    Exact,
}

impl FromStr for ArrivalSpan {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "drawn" => Ok(ArrivalSpan::Drawn),
            "exact" => Ok(ArrivalSpan::Exact),
            _ => Err(Error::Invalid(
                Rule::Choice { name: "arrival span", value: s.into(), expected: "drawn or exact" }.text(Lang::En),
            )),
        }
    }
}

/// An inclusive token-count range; "128" means exactly 128, "64:512" anything from 64 to 512.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LenRange {
    pub min: usize,
    pub max: usize,
}

impl LenRange {
    pub fn validate(&self) -> Result<()> {
        self.rule().map_or(Ok(()), |rule| Err(Error::Invalid(rule.text(Lang::En))))
    }

    /// The rule the range breaks, if any.
    pub fn rule(&self) -> Option<Rule> {
        let LenRange { min, max } = *self;
        if min < 1 {
            Some(Rule::LengthMinZero)
        } else if min > max {
            Some(Rule::LengthMinAboveMax { min, max })
        } else if max > limits::MAX_TOKENS {
            Some(Rule::LengthAboveLimit { min, max })
        } else {
            None
        }
    }

    /// Parses "128" or "64:512" and checks the range: the rule broken, if any.
    pub fn parse(s: &str) -> Result<LenRange, Rule> {
        let number = |part: &str| {
            part.trim()
                .parse::<usize>()
                .map_err(|_| Rule::LengthNotACount { text: s.to_string(), part: part.to_string() })
        };
        let range = match s.split_once(':') {
            Some((min, max)) => LenRange { min: number(min)?, max: number(max)? },
            None => {
                let exact = number(s)?;
                LenRange { min: exact, max: exact }
            }
        };
        range.rule().map_or(Ok(range), Err)
    }
}

impl FromStr for LenRange {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        LenRange::parse(s).map_err(|rule| Error::Invalid(rule.text(Lang::En)))
    }
}

/// Everything that decides which requests a benchmark sends and when. In JSON, a field the
/// arrival process does not use is absent (a closed loop has no rate, only gamma has a
/// burstiness, only `concurrency` a concurrency, only open loops a span), so a record never shows
/// a setting that did not act; reading fills them with neutral values.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct WorkloadSpec {
    pub arrival: Arrival,
    /// Requests per second for the open-loop arrivals; infinity sends everything at t = 0
    /// (written as `null` in JSON).
    #[serde(default = "infinite", deserialize_with = "infinite_rate::deserialize")]
    pub rate: f64,
    /// Gamma shape; 1 is Poisson.
    #[serde(default = "one")]
    pub burstiness: f64,
    /// Requests in flight for [`Arrival::Concurrency`].
    #[serde(default = "one_request")]
    pub concurrency: usize,
    /// Open loops at a finite rate: arrivals as drawn, or rescaled to span exactly N/rate.
    #[serde(default, rename = "arrival_span")]
    pub span: ArrivalSpan,
    pub num_requests: usize,
    pub input_len: LenRange,
    pub output_len: LenRange,
    pub seed: u64,
    /// Lengths (and, for a trace, arrival times) from a file instead of `input_len`/`output_len`
    /// draws ([`crate::bench::traffic::dataset`]); absent for synthetic workloads.
    #[serde(default)]
    pub dataset: Option<DatasetWorkload>,
    /// Open loops: at most this many requests in flight (vLLM's `--max-concurrency`); a request
    /// due while all are busy waits for one to end, and that wait is in its TTFT from arrival.
    #[serde(default)]
    pub max_concurrency: Option<usize>,
    /// Open loops: end the rate early when the target cannot sustain it
    /// (`bench::measure::saturation` decides when); false in results saved before it existed.
    #[serde(default)]
    pub saturation_stop: bool,
    /// Every prompt starts with one of a few shared prefixes (a "system prompt"); absent: each
    /// prompt is its own.
    #[serde(default)]
    pub shared_prefix: Option<SharedPrefix>,
    /// A share of requests aborted a while after each is sent ([`Cancellations`]); absent: none.
    #[serde(default)]
    pub cancel: Option<Cancellations>,
    /// Multi-turn conversations ([`Conversations`]); absent: every request stands alone.
    #[serde(default)]
    pub conversations: Option<Conversations>,
}

/// Multi-turn conversations: the requests are grouped, in plan order, into sessions of `turns`
/// requests each (drawn, the last one cut to what is left). A session starts at the arrival
/// process's next time (so `rate` is sessions per second); each later turn is sent when the turn
/// before it has finished plus a think time (exponential with mean `think_time_s`; 0: at once).
/// A turn's prompt is the whole conversation so far: the previous turn's prompt, then its reply
/// (the ids the engine generated), then the new user text of `input_len` tokens; so its planned
/// `prompt_len` is that sum, and prompts grow turn by turn. A server's reply comes back as text,
/// which its next turn sends back (the remote layer's conversation module). With a ShareGPT dataset's
/// whole conversations ([`crate::bench::traffic::dataset::Select::conversations`]) the sessions, their
/// turns and each turn's new text and output length are the dataset's, and `turns` says their
/// range.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Conversations {
    pub turns: LenRange,
    #[serde(default)]
    pub think_time_s: f64,
    /// The sessions are a ShareGPT dataset's whole conversations (`--turns dataset`); `turns` is
    /// then their range, set when the dataset is attached.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub from_dataset: bool,
}

impl WorkloadSpec {
    /// With a dataset's own conversations, the most tokens a turn's request (the conversation so
    /// far, its new text and its answer) may reach: the model's `context` when known (a server's
    /// is not), never past the workload limit ([`crate::bench::traffic::dataset::Select::conversations`]).
    pub fn dataset_conversation_bound(&self, context: Option<usize>) -> Option<usize> {
        self.conversations
            .filter(|c| c.from_dataset)
            .map(|_| context.unwrap_or(limits::MAX_TOKENS).min(limits::MAX_TOKENS))
    }
}

impl Conversations {
    /// A ShareGPT dataset's own conversations ([`DatasetWorkload::conversation_sizes`] sets the
    /// range once it is read).
    pub fn from_dataset(think_time_s: f64) -> Conversations {
        Conversations { turns: LenRange { min: 1, max: 1 }, think_time_s, from_dataset: true }
    }
}

/// One request's place in its conversation ([`conversation_turns`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Turn {
    pub session: u64,
    /// 0 for the session's first request.
    pub turn: u32,
    /// The plan index of the turn before (whose prompt and reply start this one's prompt).
    pub prev: Option<usize>,
    /// Seconds after `prev` finished that this turn is sent.
    pub think_s: f64,
    /// Tokens of new user text at the end of the prompt (`input_len`'s draw).
    pub new_len: usize,
}

/// Shared prompt prefixes: request `id` starts with prefix `id % groups` (round-robin), `len`
/// tokens long and counted in its input length (the rest of the prompt is its own).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SharedPrefix {
    pub len: usize,
    pub groups: usize,
}

impl SharedPrefix {
    /// The group of request `id`.
    pub fn group(&self, id: u64) -> u64 {
        id % self.groups as u64
    }
}

fn infinite() -> f64 {
    f64::INFINITY
}

fn one() -> f64 {
    1.0
}

fn one_request() -> usize {
    1
}

impl Arrival {
    /// Released at planned times (poisson, gamma, constant, trace), not by a closed loop.
    pub fn open_loop(self) -> bool {
        !matches!(self, Arrival::Sequential | Arrival::Concurrency)
    }
}

/// Only the fields the arrival process uses (see [`WorkloadSpec`]).
impl Serialize for WorkloadSpec {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let open = self.arrival.open_loop();
        let drawn = open && self.arrival != Arrival::Trace;
        let gamma = self.arrival == Arrival::Gamma;
        let concurrency = self.arrival == Arrival::Concurrency;
        let mut out = serializer.serialize_struct("WorkloadSpec", 15)?;
        out.serialize_field("arrival", &self.arrival)?;
        match drawn {
            true => out.serialize_field("rate", &self.rate.is_finite().then_some(self.rate))?,
            false => out.skip_field("rate")?,
        }
        match gamma {
            true => out.serialize_field("burstiness", &self.burstiness)?,
            false => out.skip_field("burstiness")?,
        }
        match concurrency {
            true => out.serialize_field("concurrency", &self.concurrency)?,
            false => out.skip_field("concurrency")?,
        }
        match drawn && self.rate.is_finite() {
            true => out.serialize_field("arrival_span", &self.span)?,
            false => out.skip_field("arrival_span")?,
        }
        match (open, self.max_concurrency) {
            (true, Some(n)) => out.serialize_field("max_concurrency", &n)?,
            _ => out.skip_field("max_concurrency")?,
        }
        match &self.dataset {
            Some(d) => out.serialize_field("dataset", d)?,
            None => out.skip_field("dataset")?,
        }
        match open && self.saturation_stop {
            true => out.serialize_field("saturation_stop", &true)?,
            false => out.skip_field("saturation_stop")?,
        }
        out.serialize_field("num_requests", &self.num_requests)?;
        out.serialize_field("input_len", &self.input_len)?;
        out.serialize_field("output_len", &self.output_len)?;
        out.serialize_field("seed", &self.seed)?;
        match &self.shared_prefix {
            Some(p) => out.serialize_field("shared_prefix", p)?,
            None => out.skip_field("shared_prefix")?,
        }
        match &self.conversations {
            Some(c) => out.serialize_field("conversations", c)?,
            None => out.skip_field("conversations")?,
        }
        match &self.cancel {
            Some(c) => out.serialize_field("cancel", c)?,
            None => out.skip_field("cancel")?,
        }
        out.end()
    }
}

impl WorkloadSpec {
    /// When request `id` is aborted by the workload, seconds after it is sent; `None` for one left
    /// to finish ([`Cancellations::after_s`]).
    pub fn cancel_after_s(&self, id: u64) -> Option<f64> {
        self.cancel.as_ref().and_then(|c| c.after_s(self.seed, id))
    }

    /// The spec's rules and [`crate::limits`]' bounds: the first problem, as an error.
    pub fn validate(&self) -> Result<()> {
        self.problems().first().map_or(Ok(()), |p| Err(Error::Invalid(p.to_string())))
    }

    /// Every rule the spec breaks, each on the field it is about ([`crate::bench::base::rules`]).
    pub fn problems(&self) -> Vec<Problem> {
        let mut problems = Vec::new();
        let mut broken = |field: Field, rule: Rule| problems.push(Problem::new(field, rule));
        let rate_ok = !(self.rate.is_nan() || self.rate < limits::MIN_RATE);
        if !rate_ok {
            broken(Field::Rate, Rule::RateTooLow { rate: self.rate });
        }
        if !(limits::MIN_BURSTINESS..=limits::MAX_BURSTINESS).contains(&self.burstiness) {
            broken(Field::Burstiness, Rule::Burstiness { value: self.burstiness });
        }
        if self.arrival == Arrival::Concurrency && !(1..=limits::MAX_CONCURRENCY).contains(&self.concurrency) {
            broken(Field::Concurrency, Rule::Concurrency { n: self.concurrency });
        }
        let requests_ok = (1..=limits::MAX_REQUESTS).contains(&self.num_requests);
        if !requests_ok {
            broken(Field::Requests, Rule::Requests { n: self.num_requests });
        }
        let open_loop = self.arrival.open_loop();
        if let Some(n) = self.max_concurrency {
            if !open_loop {
                broken(Field::MaxConcurrency, Rule::MaxConcurrencyClosedLoop);
            } else if !(1..=limits::MAX_CONCURRENCY).contains(&n) {
                broken(Field::MaxConcurrency, Rule::MaxConcurrency { n });
            }
        }
        let trace = self.dataset.as_ref().is_some_and(|d| d.format == DatasetFormat::Trace);
        if (self.arrival == Arrival::Trace) != trace {
            broken(Field::Arrival, Rule::TraceNeedsTrace);
        }
        if let Some(d) = &self.dataset {
            if self.num_requests > d.items.len() {
                broken(
                    Field::Requests,
                    Rule::DatasetRows { n: self.num_requests, file: d.file.clone(), rows: d.items.len() },
                );
            }
        }
        if self.span == ArrivalSpan::Exact && !open_loop {
            broken(Field::ArrivalSpan, Rule::SpanExactClosedLoop);
        }
        // Drawn: N − 1 gaps from t = 0; exact: N gaps.
        let gaps =
            if self.span == ArrivalSpan::Exact { self.num_requests } else { self.num_requests.saturating_sub(1) };
        let mean_span_s = gaps as f64 / self.rate;
        if rate_ok && requests_ok && open_loop && !trace && mean_span_s > limits::MAX_SCHEDULE_S {
            broken(Field::Rate, Rule::ScheduleTooLong { rate: self.rate, n: self.num_requests, span_s: mean_span_s });
        }
        let lengths_ok = [(Field::InputLen, self.input_len), (Field::OutputLen, self.output_len)]
            .map(|(field, range)| range.rule().map(|rule| broken(field, rule)).is_none());
        if let Some(c) = &self.conversations {
            if let Some(rule) = c.turns.rule() {
                broken(Field::Turns, rule);
            }
            if !open_loop || self.arrival == Arrival::Trace {
                broken(Field::Turns, Rule::ConversationsOpenLoop);
            }
            let whole = self.dataset.as_ref().map(|d| d.whole_conversations);
            match (c.from_dataset, whole) {
                (true, Some(true)) | (false, None) => {}
                (true, _) => broken(Field::Turns, Rule::ConversationsNeedWholeDataset),
                (false, Some(_)) => broken(Field::Turns, Rule::DrawnTurnsWithDataset),
            }
            if self.shared_prefix.is_some() || self.saturation_stop {
                broken(Field::Turns, Rule::ConversationsAlone);
            }
            if !(c.think_time_s.is_finite() && (0.0..=limits::MAX_SCHEDULE_S).contains(&c.think_time_s)) {
                broken(Field::ThinkTime, Rule::ThinkTime { value: c.think_time_s });
            }
            let longest = self.prompt_range().max;
            if lengths_ok == [true, true] && c.turns.rule().is_none() && longest > limits::MAX_TOKENS {
                broken(Field::Turns, Rule::HistoryTooLong { turns: c.turns.max, longest });
            }
        }
        if let Some(c) = &self.cancel {
            if let Some(rule) = c.rule() {
                let field =
                    if matches!(rule, Rule::CancelShare { .. }) { Field::CancelShare } else { Field::CancelAfter };
                broken(field, rule);
            }
            if self.conversations.is_some() {
                broken(Field::CancelShare, Rule::CancelWithConversations);
            }
        }
        if self.dataset.as_ref().is_some_and(|d| d.whole_conversations)
            && !self.conversations.is_some_and(|c| c.from_dataset)
        {
            broken(Field::Turns, Rule::WholeConversationsNeedConversations);
        }
        if let Some(p) = &self.shared_prefix {
            if self.dataset.is_some() {
                broken(Field::SharedPrefix, Rule::SharedPrefixWithDataset);
            } else if p.len == 0 || p.len >= self.input_len.min {
                broken(Field::SharedPrefix, Rule::SharedPrefixLen { len: p.len, shortest: self.input_len.min });
            }
            if !(1..=limits::MAX_PREFIX_GROUPS).contains(&p.groups) {
                broken(Field::PrefixGroups, Rule::PrefixGroups { groups: p.groups });
            }
        }
        problems
    }
}

impl WorkloadSpec {
    /// The prompt lengths requests can have: `input_len`, or with conversations up to the longest
    /// session's history (every turn's new text and every reply but the last, at their longest).
    pub fn prompt_range(&self) -> LenRange {
        match &self.conversations {
            None => self.input_len,
            // A dataset's own conversations: their longest history, exactly.
            Some(c) if c.from_dataset && self.dataset.as_ref().is_some_and(|d| d.whole_conversations) => {
                let items = &self.dataset.as_ref().expect("checked").items;
                let (mut longest, mut history) = (self.input_len.min, 0usize);
                for item in items.iter() {
                    if item.conversation.is_some_and(|(_, turn)| turn == 0) {
                        history = 0;
                    }
                    longest = longest.max(history + item.prompt_len);
                    history += item.prompt_len + item.output_len;
                }
                LenRange { min: self.input_len.min, max: longest }
            }
            Some(c) => {
                let turns = c.turns.max;
                let max = turns
                    .saturating_mul(self.input_len.max)
                    .saturating_add(turns.saturating_sub(1).saturating_mul(self.output_len.max));
                LenRange { min: self.input_len.min, max }
            }
        }
    }
}

/// Whether the longest request the lengths allow (the longest prompt with the longest output)
/// fits a model's context of `max_position_embeddings` tokens. The one check of it, before
/// anything runs: the CLI's flags, a dataset's rows, the page's form.
pub fn check_context(input_len: LenRange, output_len: LenRange, max_position_embeddings: usize) -> Result<()> {
    match context_rule(input_len, output_len, max_position_embeddings) {
        Some(rule) => Err(Error::Invalid(rule.text(Lang::En))),
        None => Ok(()),
    }
}

/// [`check_context`]'s rule, as data.
pub fn context_rule(input_len: LenRange, output_len: LenRange, max_position: usize) -> Option<Rule> {
    let longest = input_len.max.saturating_add(output_len.max);
    (longest > max_position).then_some(Rule::Context { input: input_len.max, output: output_len.max, max_position })
}

/// One request of the plan.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlannedRequest {
    pub id: u64,
    /// Seconds from the start; `None` when the closed loop releases it (sequential, concurrency).
    pub arrival_s: Option<f64>,
    pub prompt_len: usize,
    pub output_len: usize,
}

/// The whole benchmark's requests. Lengths come from their own random stream, so changing the
/// arrival process or the rate keeps every request's lengths.
pub fn plan(spec: &WorkloadSpec) -> Result<Vec<PlannedRequest>> {
    spec.validate()?;
    let mut length_rng = stream(spec.seed, STREAM_LENGTHS, 0);
    let mut gap_rng = stream(spec.seed, STREAM_ARRIVALS, 0);
    let closed_loop = matches!(spec.arrival, Arrival::Sequential | Arrival::Concurrency);
    let finite = spec.rate.is_finite();
    let gaps: Box<dyn Fn(&mut StdRng) -> f64> = match spec.arrival {
        Arrival::Poisson if finite => {
            let exp = Exp::new(spec.rate).expect("rate checked above 0");
            Box::new(move |rng| exp.sample(rng))
        }
        Arrival::Gamma if finite => {
            let scale = 1.0 / (spec.rate * spec.burstiness);
            let gamma = Gamma::new(spec.burstiness, scale).expect("shape and scale checked");
            Box::new(move |rng| gamma.sample(rng))
        }
        Arrival::Constant if finite => {
            let gap = 1.0 / spec.rate;
            Box::new(move |_| gap)
        }
        // All at once, or released by the closed loop (the times are then unused).
        _ => Box::new(|_| 0.0),
    };
    // Drawn: request 0 goes out at once, each later one after one more gap (older vLLM benchmark
    // clients did this; later versions changed how the first gap and the span are handled, which
    // `ArrivalSpan::Exact` approximates; not checked against any current source).
    // Exact: a gap before every request, all scaled so the last arrives at N/rate.
    let exact = spec.span == ArrivalSpan::Exact && finite && !closed_loop;
    let times: Vec<f64> = (0..spec.num_requests)
        .scan(0.0, |clock_s: &mut f64, id| {
            if id > 0 || exact {
                *clock_s += gaps(&mut gap_rng);
            }
            Some(*clock_s)
        })
        .collect();
    let scale = match times.last() {
        Some(&last) if exact && last > 0.0 => spec.num_requests as f64 / spec.rate / last,
        _ => 1.0,
    };
    // Conversations: a session starts at each drawn time in turn; later turns have no time.
    let turns = conversation_turns(spec);
    let times: Vec<f64> = match &turns {
        Some(turns) => turns.iter().map(|t| if t.turn == 0 { times[t.session as usize] } else { f64::NAN }).collect(),
        None => times,
    };
    let mut requests: Vec<PlannedRequest> = Vec::with_capacity(spec.num_requests);
    for (id, drawn_s) in (0..spec.num_requests as u64).zip(times) {
        let clock_s = if exact && id + 1 == spec.num_requests as u64 {
            spec.num_requests as f64 / spec.rate // exactly, not within rounding
        } else {
            drawn_s * scale
        };
        // The mean span was checked; a draw far in the tail (gamma with a small shape) is not.
        if clock_s > limits::MAX_SCHEDULE_S {
            return Err(Error::Invalid(format!(
                "rate {}: request {id} would arrive at {} s, above the limit of {} s",
                limits::show(spec.rate),
                limits::show(clock_s.round()),
                limits::MAX_SCHEDULE_S
            )));
        }
        // A dataset's row `id` (its prompt: `DatasetWorkload::items[id]`), or a draw.
        let (prompt_len, output_len, clock_s) = match &spec.dataset {
            Some(d) => {
                let item = &d.items[id as usize];
                (item.prompt_len, item.output_len, item.arrival_s.unwrap_or(clock_s))
            }
            None => (
                length_rng.random_range(spec.input_len.min..=spec.input_len.max),
                length_rng.random_range(spec.output_len.min..=spec.output_len.max),
                clock_s,
            ),
        };
        // A later turn: sent when the one before it ends; its prompt carries the history.
        let (arrival_s, prompt_len) = match turns.as_ref().map(|t| t[id as usize]) {
            Some(Turn { prev: Some(prev), .. }) => {
                let before = &requests[prev];
                (None, before.prompt_len + before.output_len + prompt_len)
            }
            _ => ((!closed_loop).then_some(clock_s), prompt_len),
        };
        requests.push(PlannedRequest { id, arrival_s, prompt_len, output_len });
    }
    Ok(requests)
}

/// Each request's place in its conversation, when the workload has conversations: sessions of
/// `turns` requests (drawn from their own stream, the last cut to what is left), think times
/// from another. The new text's length is the request's own `input_len` draw ([`plan`] keeps the
/// same length stream, so turning conversations on keeps every request's lengths).
pub fn conversation_turns(spec: &WorkloadSpec) -> Option<Vec<Turn>> {
    let c = spec.conversations.as_ref()?;
    let mut think_rng = stream(spec.seed, STREAM_CONVERSATIONS, 1);
    let think = Exp::new(1.0).expect("rate 1");
    // A dataset's whole conversations: its sessions and turns, in plan order.
    if let Some(d) = spec.dataset.as_ref().filter(|d| c.from_dataset && d.whole_conversations) {
        let turns = d.items.iter().take(spec.num_requests).enumerate().map(|(i, item)| {
            let (session, turn) = item.conversation.expect("whole conversations mark every item");
            let think_s: f64 = if turn == 0 { 0.0 } else { c.think_time_s * think.sample(&mut think_rng) };
            Turn { session, turn, prev: (turn > 0).then(|| i - 1), think_s, new_len: item.prompt_len }
        });
        return Some(turns.collect());
    }
    let mut size_rng = stream(spec.seed, STREAM_CONVERSATIONS, 0);
    let mut length_rng = stream(spec.seed, STREAM_LENGTHS, 0);
    let mut out = Vec::with_capacity(spec.num_requests);
    let mut session = 0u64;
    while out.len() < spec.num_requests {
        let size = size_rng.random_range(c.turns.min..=c.turns.max).min(spec.num_requests - out.len());
        for turn in 0..size {
            // The same draws, in the same order, as `plan`'s lengths.
            let new_len = length_rng.random_range(spec.input_len.min..=spec.input_len.max);
            let _output = length_rng.random_range(spec.output_len.min..=spec.output_len.max);
            let think_s: f64 = if turn == 0 { 0.0 } else { c.think_time_s * think.sample(&mut think_rng) };
            let prev = (turn > 0).then(|| out.len() - 1);
            out.push(Turn { session, turn: turn as u32, prev, think_s, new_len });
        }
        session += 1;
    }
    Some(out)
}

impl WorkloadSpec {
    /// The workload with `data`'s rows as its requests: lengths measured, a trace's arrivals, the
    /// length ranges, the request count and a dataset's conversation sizes set from the rows.
    /// The one place the CLI and the page turn a dataset into requests.
    pub fn attach_dataset(&mut self, data: &Dataset, a: &Attach) -> Result<()> {
        let count = |text: &str| -> Result<usize> {
            let (tok, _) = a.tokenizer.ok_or_else(|| Error::Invalid("no tokenizer is loaded".into()))?;
            Ok(tok.encode(text)?.len())
        };
        let selected = data.select(&Select {
            count_tokens: a.tokenizer.is_some().then_some(&count as &CountTokens),
            tokenizer: a.tokenizer.map_or("", |(_, name)| name),
            num_requests: a.num_requests,
            seed: self.seed,
            trace_speedup: a.trace_speedup,
            block_tokens: a.block_tokens,
            conversations: self.dataset_conversation_bound(a.context),
        })?;
        if data.format == DatasetFormat::Trace {
            if a.rates > 1 || !matches!(self.arrival, Arrival::Poisson | Arrival::Trace) {
                return Err(Error::Invalid(
                    "a trace replays the recorded times: a sweep of rates or another arrival shape would change \
                     nothing (the trace speedup scales the times)"
                        .into(),
                ));
            }
            self.arrival = Arrival::Trace;
        }
        let ((input_min, input_max), (output_min, output_max)) = selected.length_ranges();
        self.input_len = LenRange { min: input_min, max: input_max };
        self.output_len = LenRange { min: output_min, max: output_max };
        self.num_requests = selected.items.len();
        if let Some(c) = self.conversations.as_mut().filter(|c| c.from_dataset) {
            c.turns = selected.conversation_sizes();
        }
        self.dataset = Some(selected);
        Ok(())
    }
}

/// JSON has no infinity, and a rate of "everything at once" is one: an infinite rate is written as
/// `null` (`WorkloadSpec`'s `Serialize`; `#[serde(with = …)]` on a rate elsewhere) and read back as
/// infinity. [`infinite_rate::list`] and [`infinite_rate::pairs`] do the same for a list of rates
/// and for (rate, value) pairs.
pub mod infinite_rate {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    fn written(rate: f64) -> Option<f64> {
        rate.is_finite().then_some(rate)
    }

    fn read(rate: Option<f64>) -> f64 {
        rate.unwrap_or(f64::INFINITY)
    }

    pub fn serialize<S: Serializer>(rate: &f64, s: S) -> Result<S::Ok, S::Error> {
        written(*rate).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<f64, D::Error> {
        Ok(read(Option::<f64>::deserialize(deserializer)?))
    }

    pub mod list {
        use super::*;

        pub fn serialize<S: Serializer>(rates: &[f64], s: S) -> Result<S::Ok, S::Error> {
            rates.iter().map(|r| written(*r)).collect::<Vec<_>>().serialize(s)
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
            Ok(Vec::<Option<f64>>::deserialize(d)?.into_iter().map(read).collect())
        }
    }

    pub mod pairs {
        use super::*;

        pub fn serialize<S: Serializer, T: Serialize>(pairs: &[(f64, T)], s: S) -> Result<S::Ok, S::Error> {
            pairs.iter().map(|(r, t)| (written(*r), t)).collect::<Vec<_>>().serialize(s)
        }

        pub fn deserialize<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Vec<(f64, T)>, D::Error> {
            Ok(Vec::<(Option<f64>, T)>::deserialize(d)?.into_iter().map(|(r, t)| (read(r), t)).collect())
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn spec(arrival: Arrival, rate: f64, num_requests: usize) -> WorkloadSpec {
        WorkloadSpec {
            cancel: None,
            arrival,
            rate,
            burstiness: 1.0,
            concurrency: 4,
            span: ArrivalSpan::Drawn,
            num_requests,
            input_len: LenRange { min: 8, max: 64 },
            output_len: LenRange { min: 1, max: 32 },
            seed: 42,
            dataset: None,
            max_concurrency: None,
            saturation_stop: false,
            shared_prefix: None,
            conversations: None,
        }
    }

    fn gaps(plan: &[PlannedRequest]) -> Vec<f64> {
        let times: Vec<f64> = plan.iter().map(|r| r.arrival_s.unwrap()).collect();
        times.windows(2).map(|w| w[1] - w[0]).collect()
    }

    /// (mean, coefficient of variation)
    fn mean_cv(values: &[f64]) -> (f64, f64) {
        let n = values.len() as f64;
        let mean = values.iter().sum::<f64>() / n;
        let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
        (mean, var.sqrt() / mean)
    }

    #[test]
    fn same_seed_same_plan_and_lengths_ignore_the_rate() {
        let a = plan(&spec(Arrival::Poisson, 4.0, 1000)).unwrap();
        assert_eq!(a, plan(&spec(Arrival::Poisson, 4.0, 1000)).unwrap());
        let mut other_seed = spec(Arrival::Poisson, 4.0, 1000);
        other_seed.seed = 43;
        assert_ne!(a, plan(&other_seed).unwrap());
        let b = plan(&spec(Arrival::Constant, 9.0, 1000)).unwrap();
        for (x, y) in a.iter().zip(&b) {
            assert_eq!((x.prompt_len, x.output_len), (y.prompt_len, y.output_len));
        }
        assert!(a.iter().all(|r| (8..=64).contains(&r.prompt_len)));
        assert!(a.iter().all(|r| (1..=32).contains(&r.output_len)));
        assert!(a.iter().any(|r| r.prompt_len == 8) && a.iter().any(|r| r.prompt_len == 64));
    }

    #[test]
    fn poisson_mean_gap_is_one_over_rate() {
        let p = plan(&spec(Arrival::Poisson, 5.0, 20_001)).unwrap();
        assert_eq!(p[0].arrival_s, Some(0.0));
        let (mean, cv) = mean_cv(&gaps(&p));
        assert!((mean - 0.2).abs() < 0.2 * 0.03, "mean gap {mean}");
        assert!((cv - 1.0).abs() < 0.03, "cv {cv}");
    }

    #[test]
    fn gamma_burstiness_sets_the_spread() {
        let mut s = spec(Arrival::Gamma, 2.0, 20_001);
        let (mean, cv) = mean_cv(&gaps(&plan(&s).unwrap()));
        assert!((mean - 0.5).abs() < 0.5 * 0.03 && (cv - 1.0).abs() < 0.05, "{mean} {cv}");
        s.burstiness = 100.0; // cv = 1/sqrt(shape) = 0.1
        let (mean, cv) = mean_cv(&gaps(&plan(&s).unwrap()));
        assert!((mean - 0.5).abs() < 0.5 * 0.03 && (cv - 0.1).abs() < 0.01, "{mean} {cv}");
    }

    #[test]
    fn constant_infinite_and_closed_loop_arrivals() {
        let c = plan(&spec(Arrival::Constant, 4.0, 3)).unwrap();
        let times: Vec<_> = c.iter().map(|r| r.arrival_s).collect();
        assert_eq!(times, vec![Some(0.0), Some(0.25), Some(0.5)]);
        let burst = plan(&spec(Arrival::Poisson, f64::INFINITY, 5)).unwrap();
        assert!(burst.iter().all(|r| r.arrival_s == Some(0.0)));
        for arrival in [Arrival::Sequential, Arrival::Concurrency] {
            assert!(plan(&spec(arrival, 1.0, 5)).unwrap().iter().all(|r| r.arrival_s.is_none()));
        }
    }

    #[test]
    fn parsing_and_validation() {
        assert_eq!("128".parse::<LenRange>().unwrap(), LenRange { min: 128, max: 128 });
        assert_eq!("64:512".parse::<LenRange>().unwrap(), LenRange { min: 64, max: 512 });
        for bad in ["", "0", "512:64", "a:5", "5:", "-3", "1:2:3"] {
            let err = bad.parse::<LenRange>().unwrap_err().to_string();
            assert!(err.contains("length range"), "{bad:?} -> {err}");
        }
        assert_eq!("gamma".parse::<Arrival>().unwrap(), Arrival::Gamma);
        assert!("Poisson ".parse::<Arrival>().is_err());
        type Edit = fn(&mut WorkloadSpec);
        let cases: [(&str, Edit); 11] = [
            ("arrival span", |s| (s.arrival, s.span) = (Arrival::Sequential, ArrivalSpan::Exact)),
            ("rate", |s| s.rate = 0.0),
            ("rate", |s| s.rate = f64::NAN),
            ("burstiness", |s| s.burstiness = 0.0),
            ("concurrency", |s| (s.arrival, s.concurrency) = (Arrival::Concurrency, 0)),
            ("number of requests", |s| s.num_requests = 0),
            ("rate", |s| s.rate = 1e-300),
            ("rate", |s| (s.rate, s.num_requests) = (1e-3, 1000)),
            ("burstiness", |s| s.burstiness = 1e-300),
            ("number of requests", |s| s.num_requests = limits::MAX_REQUESTS + 1),
            ("length range", |s| s.input_len.max = usize::MAX),
        ];
        for (field, edit) in cases {
            let mut broken = spec(Arrival::Gamma, 1.0, 1);
            edit(&mut broken);
            let err = plan(&broken).unwrap_err().to_string();
            assert!(err.contains(field), "{field}: {err}");
        }
    }

    #[test]
    fn an_exact_span_ends_at_n_over_rate_and_keeps_the_gaps_shape() {
        for arrival in [Arrival::Poisson, Arrival::Gamma, Arrival::Constant] {
            for n in [1, 2, 7, 500] {
                let mut s = spec(arrival, 4.0, n);
                s.span = ArrivalSpan::Exact;
                let p = plan(&s).unwrap();
                assert_eq!(p.last().unwrap().arrival_s, Some(n as f64 / 4.0), "{arrival:?} {n}");
                assert!(p[0].arrival_s.unwrap() > 0.0, "a gap comes before request 0");
                assert!(p.windows(2).all(|w| w[0].arrival_s <= w[1].arrival_s));
                let drawn = plan(&WorkloadSpec { span: ArrivalSpan::Drawn, ..s.clone() }).unwrap();
                // The lengths and the gaps' proportions are the drawn plan's.
                for (a, b) in p.iter().zip(&drawn) {
                    assert_eq!((a.prompt_len, a.output_len), (b.prompt_len, b.output_len));
                }
                if n >= 7 {
                    // Exact draws one more gap first (before request 0): its gaps are the drawn
                    // plan's shifted by one, all scaled alike.
                    let (g, d) = (gaps(&p), gaps(&drawn));
                    let ratio = g[0] / d[1];
                    assert!(g.iter().zip(&d[1..]).all(|(x, y)| (x / y - ratio).abs() < 1e-9 * ratio), "{arrival:?}");
                }
            }
        }
        // Without the flag, a Poisson draw's last arrival is off N/rate (this seed: by over 5%).
        let drawn = plan(&spec(Arrival::Poisson, 4.0, 50)).unwrap();
        let last = drawn.last().unwrap().arrival_s.unwrap();
        assert!((last - 12.5).abs() > 0.05 * 12.5, "{last}");
        // An infinite rate stays all at once.
        let mut burst = spec(Arrival::Poisson, f64::INFINITY, 3);
        burst.span = ArrivalSpan::Exact;
        assert!(plan(&burst).unwrap().iter().all(|r| r.arrival_s == Some(0.0)));
        assert_eq!("exact".parse::<ArrivalSpan>().unwrap(), ArrivalSpan::Exact);
        assert!("Exact".parse::<ArrivalSpan>().is_err());
    }

    #[test]
    fn unused_settings_are_not_recorded() {
        let json = |s: &WorkloadSpec| serde_json::to_value(s).unwrap();
        let sequential = json(&spec(Arrival::Sequential, 4.0, 3));
        for field in ["rate", "burstiness", "concurrency", "arrival_span"] {
            assert!(sequential.get(field).is_none(), "{field}: {sequential}");
        }
        let concurrency = json(&spec(Arrival::Concurrency, 4.0, 3));
        assert_eq!((concurrency["concurrency"].as_u64(), concurrency.get("rate")), (Some(4), None));
        let poisson = json(&spec(Arrival::Poisson, 4.0, 3));
        assert_eq!((poisson["rate"].as_f64(), poisson["arrival_span"].as_str()), (Some(4.0), Some("drawn")));
        assert!(poisson.get("burstiness").is_none() && poisson.get("concurrency").is_none());
        assert_eq!(json(&spec(Arrival::Gamma, 4.0, 3))["burstiness"].as_f64(), Some(1.0));
        // Read back: what was recorded, neutral values for the rest, and old records still load.
        let back: WorkloadSpec = serde_json::from_value(sequential).unwrap();
        assert_eq!((back.rate, back.burstiness, back.concurrency), (f64::INFINITY, 1.0, 1));
        assert_eq!(back.span, ArrivalSpan::Drawn);
        let old = r#"{"arrival":"sequential","rate":4.0,"burstiness":1.0,"concurrency":4,"num_requests":3,
            "input_len":{"min":8,"max":64},"output_len":{"min":1,"max":32},"seed":42}"#;
        assert_eq!(serde_json::from_str::<WorkloadSpec>(old).unwrap(), spec(Arrival::Sequential, 4.0, 3));
    }

    /// 10 requests in conversations of 2–4 turns, by the plan: each session's first turn has an
    /// arrival (the sessions' arrivals in order), later ones none; a later turn's prompt length is
    /// the turn before's prompt and output plus its own new text, whose length is what the plan
    /// without conversations draws for it.
    #[test]
    fn conversations_group_requests_and_grow_their_prompts() {
        let plain = spec(Arrival::Poisson, 4.0, 10);
        let spec = WorkloadSpec {
            conversations: Some(Conversations {
                turns: LenRange { min: 2, max: 4 },
                think_time_s: 1.5,
                from_dataset: false,
            }),
            ..plain.clone()
        };
        let (alone, planned, turns) = (plan(&plain).unwrap(), plan(&spec).unwrap(), conversation_turns(&spec).unwrap());
        assert_eq!((planned.len(), turns.len()), (10, 10));
        let mut sessions = 0;
        for (i, (p, t)) in planned.iter().zip(&turns).enumerate() {
            assert_eq!(t.new_len, alone[i].prompt_len, "request {i}: its own text keeps its length");
            assert_eq!(p.output_len, alone[i].output_len);
            match t.prev {
                None => {
                    assert_eq!(t.turn, 0);
                    assert!(p.arrival_s.is_some());
                    sessions += 1;
                }
                Some(prev) => {
                    assert_eq!((prev, t.session, t.turn), (i - 1, turns[i - 1].session, turns[i - 1].turn + 1));
                    assert!(p.arrival_s.is_none() && t.think_s >= 0.0);
                    assert_eq!(p.prompt_len, planned[prev].prompt_len + planned[prev].output_len + t.new_len);
                }
            }
            assert!(t.turn < 4);
        }
        assert_eq!(sessions, turns.last().unwrap().session as usize + 1);
        // Session arrivals are the first draws of the arrival process, in order.
        let starts: Vec<f64> = planned.iter().filter_map(|p| p.arrival_s).collect();
        let drawn: Vec<f64> = alone.iter().take(sessions).map(|p| p.arrival_s.unwrap()).collect();
        assert_eq!(starts, drawn);
        // Closed loops, datasets and the saturation stop do not go with them.
        let closed = WorkloadSpec { arrival: Arrival::Sequential, ..spec.clone() };
        assert!(closed.validate().is_err());
        assert!(WorkloadSpec { saturation_stop: true, ..spec.clone() }.validate().is_err());
        let conv = spec.conversations.unwrap();
        assert_eq!(spec.prompt_range().max, 4 * spec.input_len.max + 3 * spec.output_len.max);
        assert!(WorkloadSpec { conversations: Some(Conversations { think_time_s: -1.0, ..conv }), ..plain }
            .validate()
            .is_err());
    }

    /// A dataset's whole conversations: the sessions, turns and lengths are the items', a later
    /// turn's prompt the history plus its own text, and the longest history is exact.
    #[test]
    fn a_datasets_conversations_are_its_sessions() {
        use crate::bench::traffic::dataset::{DatasetFormat, DatasetItem, DatasetWorkload};
        use std::sync::Arc;
        // Conversation 0: turns of (4 → 5), (6 → 7); conversation 1: (3 → 2).
        let item = |conversation, prompt_len, output_len| DatasetItem {
            prompt: None,
            prompt_len,
            output_len,
            arrival_s: None,
            conversation: Some(conversation),
            blocks: None,
        };
        let items = vec![item((0, 0), 4, 5), item((0, 1), 6, 7), item((1, 0), 3, 2)];
        let dataset = DatasetWorkload {
            file: "share.json".into(),
            format: DatasetFormat::ShareGpt,
            rows_read: 2,
            rows_kept: 2,
            filters: String::new(),
            lengths_measured_by: "words".into(),
            trace_speedup: None,
            whole_conversations: true,
            block_tokens: None,
            items: Arc::new(items),
        };
        let spec = WorkloadSpec {
            input_len: LenRange { min: 3, max: 6 },
            output_len: LenRange { min: 2, max: 7 },
            dataset: Some(dataset),
            conversations: Some(Conversations {
                turns: LenRange { min: 1, max: 2 },
                think_time_s: 0.5,
                from_dataset: true,
            }),
            ..spec(Arrival::Poisson, 4.0, 3)
        };
        spec.validate().unwrap();
        let turns = conversation_turns(&spec).unwrap();
        let shape: Vec<(u64, u32, Option<usize>, usize)> =
            turns.iter().map(|t| (t.session, t.turn, t.prev, t.new_len)).collect();
        assert_eq!(shape, [(0, 0, None, 4), (0, 1, Some(0), 6), (1, 0, None, 3)]);
        let planned = plan(&spec).unwrap();
        let lens: Vec<(usize, usize, bool)> =
            planned.iter().map(|p| (p.prompt_len, p.output_len, p.arrival_s.is_some())).collect();
        assert_eq!(lens, [(4, 5, true), (4 + 5 + 6, 7, false), (3, 2, true)]);
        assert_eq!(spec.prompt_range().max, 15);
        // Whole conversations need the workload's conversations from the dataset, and single
        // prompts refuse them.
        assert!(WorkloadSpec { conversations: None, ..spec.clone() }.validate().is_err());
        let drawn = Conversations { from_dataset: false, ..spec.conversations.unwrap() };
        assert!(WorkloadSpec { conversations: Some(drawn), ..spec.clone() }.validate().is_err());
        let mut single = spec.dataset.clone().unwrap();
        single.whole_conversations = false;
        assert!(WorkloadSpec { dataset: Some(single), ..spec }.validate().is_err());
    }

    #[test]
    fn shared_prefixes_are_validated_and_recorded() {
        let with = |len, groups| WorkloadSpec {
            shared_prefix: Some(SharedPrefix { len, groups }),
            ..spec(Arrival::Poisson, 4.0, 3)
        };
        assert!(with(7, 2).validate().is_ok());
        for (len, groups) in [(0, 1), (8, 1), (7, 0), (7, limits::MAX_PREFIX_GROUPS + 1)] {
            assert!(with(len, groups).validate().is_err(), "{len} {groups}");
        }
        let json = serde_json::to_value(with(7, 2)).unwrap();
        assert_eq!(json["shared_prefix"], serde_json::json!({"len": 7, "groups": 2}));
        assert_eq!(
            serde_json::from_value::<WorkloadSpec>(json).unwrap(),
            WorkloadSpec { concurrency: 1, ..with(7, 2) }
        );
        assert!(serde_json::to_value(spec(Arrival::Poisson, 4.0, 3)).unwrap().get("shared_prefix").is_none());
        assert_eq!((0..5).map(|id| SharedPrefix { len: 1, groups: 2 }.group(id)).collect::<Vec<_>>(), [0, 1, 0, 1, 0]);
    }

    #[test]
    fn infinite_rate_round_trips_through_json() {
        let s = spec(Arrival::Poisson, f64::INFINITY, 3);
        let json = serde_json::to_string(&s).unwrap();
        assert!(json.contains("\"rate\":null") && json.contains("\"arrival\":\"poisson\""));
        // Concurrency is not Poisson's: not recorded, read back as the neutral 1.
        assert_eq!(serde_json::from_str::<WorkloadSpec>(&json).unwrap(), WorkloadSpec { concurrency: 1, ..s });
    }
}
