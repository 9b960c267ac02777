//! Aggregation: raw records in, one `BenchmarkMetrics` out, as a pure function. TPOT = (last
//! token − first token)/(output − 1), ITL = every gap between token chunks, E2E = finish −
//! arrival. TTFT is given twice, from the planned arrival (`ttft_ms`) and, for servers, from the
//! send (`ttft_from_send_ms`), because benchmark tools differ on where its clock starts; compare
//! with another tool's figures only after checking which clock it uses. Throughputs count
//! completed requests only.

use std::collections::BTreeMap;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::bench::base::lang::Lang;
use crate::bench::base::rules::{Rule, SloFault};
use crate::bench::base::stats::nan_as_null;
pub use crate::bench::base::stats::{stats, Stats};
use crate::bench::measure::saturation::Load;
use crate::bench::record::conditions::Conditions;
use crate::bench::record::raw::{RequestRecord, StepSample};
use crate::error::{Error, Result};

/// Service-level objectives; a request is "good" when it meets every one that is set.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Slo {
    pub ttft_ms: Option<f64>,
    pub tpot_ms: Option<f64>,
    pub e2e_ms: Option<f64>,
}

impl Slo {
    /// A request with a single output token has TPOT 0 here, which meets any TPOT limit.
    pub fn met_by(&self, r: &RequestRecord) -> bool {
        let within = |limit: Option<f64>, value_s: Option<f64>| match limit {
            None => true,
            Some(limit_ms) => value_s.is_some_and(|s| s * 1000.0 <= limit_ms),
        };
        r.succeeded()
            && within(self.ttft_ms, r.ttft_s())
            && within(self.tpot_ms, r.tpot_s().or(Some(0.0)))
            && within(self.e2e_ms, r.e2e_s())
    }
}

/// Parses "ttft_ms=200,tpot_ms=50" (any of ttft_ms, tpot_ms, e2e_ms).
impl FromStr for Slo {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Slo::read(s).map_err(|rule| Error::Invalid(rule.text(Lang::En)))
    }
}

impl Slo {
    /// The parse, with what is wrong as a rule (worded in each language).
    pub fn read(s: &str) -> std::result::Result<Slo, Rule> {
        let invalid = |fault| Rule::Slo { text: s.to_string(), fault };
        let mut slo = Slo::default();
        for part in s.split(',') {
            let (key, value) =
                part.split_once('=').ok_or_else(|| invalid(SloFault::NotKeyValue { part: part.to_string() }))?;
            let limit_ms: f64 =
                value.trim().parse().map_err(|_| invalid(SloFault::NotANumber { value: value.to_string() }))?;
            if !limit_ms.is_finite() || limit_ms <= 0.0 {
                return Err(invalid(SloFault::NotAboveZero { key: key.to_string() }));
            }
            let slot = match key.trim() {
                "ttft_ms" => &mut slo.ttft_ms,
                "tpot_ms" => &mut slo.tpot_ms,
                "e2e_ms" => &mut slo.e2e_ms,
                other => return Err(invalid(SloFault::UnknownKey { key: other.to_string() })),
            };
            *slot = Some(limit_ms);
        }
        Ok(slo)
    }
}

/// One point of the time series: a bucket, from `t_s` to `t_s + bucket_s`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimePoint {
    pub t_s: f64,
    /// Output tokens (all requests, failed ones included) with a time in this bucket, per second.
    pub output_tok_s: f64,
    /// From the bucket's last step, or carried forward from the one before when it has none.
    pub running: f64,
    pub waiting: f64,
    pub kv_blocks_used: f64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BenchmarkMetrics {
    /// Requests in the run: completed + failed + cancelled.
    #[serde(default)]
    pub num_requests: usize,
    pub completed: usize,
    pub failed: usize,
    /// Requests cancelled before they finished, by who cancelled them
    /// ([`crate::bench::traffic::cancel::CancelledBy`]: `workload`, `user`, `saturation_stop`):
    /// neither completed nor failed, and in no latency figure. Absent when none was.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub cancelled: BTreeMap<String, usize>,
    /// Planned requests never sent: the run was stopped (by the user, the saturation stop or a
    /// device fault) before they were due. Not in `num_requests`; set by the session, 0 in
    /// results saved before it was recorded.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unsent: usize,
    /// From the benchmark start to the last finish.
    pub duration_s: f64,
    pub total_input_tokens: usize,
    pub total_output_tokens: usize,
    /// Completed requests per second.
    #[serde(with = "nan_as_null", rename = "request_throughput_req_s", alias = "request_throughput")]
    pub request_throughput: f64,
    #[serde(with = "nan_as_null", rename = "output_throughput_tok_s", alias = "output_throughput")]
    pub output_throughput: f64,
    /// Input plus output tokens of completed requests per second.
    #[serde(with = "nan_as_null", rename = "total_throughput_tok_s", alias = "total_token_throughput")]
    pub total_token_throughput: f64,
    /// From the planned arrival: the user's view, the client's lateness and any queueing included.
    pub ttft_ms: Stats,
    /// From when the request was sent (servers only; absent for the engine and in older results):
    /// `ttft_ms` less the client's lateness (`queue_ms` of a server run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_from_send_ms: Option<Stats>,
    /// One value per completed request with more than one output token.
    pub tpot_ms: Stats,
    /// Every gap between consecutive tokens, pooled over requests (so token-weighted).
    pub itl_ms: Stats,
    pub e2e_ms: Stats,
    /// Engine: from arrival to first scheduled. Server: from arrival to send, the client's own
    /// lateness (the server's queueing is not visible to a client; it is inside TTFT from send).
    pub queue_ms: Stats,
    /// Requests per second that met every SLO; `None` without an SLO.
    #[serde(rename = "goodput_req_s", alias = "goodput")]
    pub goodput: Option<f64>,
    /// Share of the requests not cancelled, failed ones included, that met every SLO.
    pub slo_attainment: Option<f64>,
    /// `None` (`null`) for a target that cannot report them (a server).
    pub preemptions: Option<u64>,
    /// Sum of step durations over the duration.
    #[serde(with = "nan_as_null")]
    pub gpu_busy_fraction: f64,
    /// Per-interval output tok/s, running batch, waiting queue, KV blocks.
    #[serde(rename = "timeseries", alias = "series")]
    pub series: Vec<TimePoint>,
    /// Width of each `timeseries` bucket ([`throughput_bucket_s`]); results saved before it was
    /// recorded used 0.25 s.
    #[serde(default = "old_bucket_s")]
    pub timeseries_bucket_s: f64,
    /// Failed requests by kind of error (see [`RequestRecord::error_kind`]), e.g. `"timeout": 2`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub errors: BTreeMap<String, usize>,
    /// Completed requests that returned fewer tokens than asked: a server that ignores `ignore_eos`.
    #[serde(default)]
    pub stopped_short: usize,
    /// Requests whose server `usage` disagreed with the streamed tokens
    /// ([`RequestRecord::usage_mismatch`]).
    #[serde(default)]
    pub usage_mismatch: usize,
    /// Requests a redirect sent elsewhere on the endpoint's origin ([`RequestRecord::redirected_to`]).
    #[serde(default)]
    pub redirected: usize,
    /// How many tokens a server's chunk carried, where chunks carried more than one (speculative
    /// decoding sends several at once): ITL is then the gap between chunks, not between tokens.
    /// Absent when every chunk carried one token (and for the engine, which times every token).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_per_chunk: Option<TokensPerChunk>,
    /// Per engine step that sampled: from its readback resolving to its tokens' timestamp
    /// ([`StepSample::readback_lag_s`]), the delay the event loop adds to every timestamp. Absent
    /// for targets without steps (servers) and in results saved before it was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp_lag_ms: Option<Stats>,
    /// The page's main thread during the run (filled by the page; absent elsewhere).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub long_tasks: Option<LongTasks>,
    /// The browser's conditions during the run: the tab hidden, timers throttled, the device
    /// lost, the power (filled by the page; absent elsewhere). The verdict reads it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub browser_conditions: Option<Conditions>,
    /// Speculative decoding over all requests; absent when nothing was drafted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speculation: Option<SpeculationSummary>,
    /// Prompt tokens served from the prefix cache over the prompt tokens of the requests that say
    /// (the engine's once scheduled, 0 with caching off; a server's that return
    /// `usage.prompt_tokens_details.cached_tokens`, over its own prompt counts); `None` (`null`)
    /// when none says, and in results saved before it was recorded.
    #[serde(default)]
    pub prefix_cache_hit_rate: Option<f64>,
    /// The two sums of that rate.
    #[serde(default)]
    pub cached_prompt_tokens: Option<usize>,
    #[serde(default)]
    pub prefix_cache_prompt_tokens: Option<usize>,
    /// A trace with `hash_ids`: the hit rate an unbounded prefix cache would have on these
    /// requests, from the trace's block ids alone
    /// ([`crate::bench::traffic::dataset::DatasetWorkload::implied_hit_tokens`]): what the measured rate
    /// above is to be read against. Absent for other workloads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_cache_implied_rate: Option<f64>,
    /// The offered load against what the target served, and whether the outstanding requests
    /// grew while requests arrived ([`Load`]: the diagnosis's and the sweep's saturation); absent
    /// for fewer than two requests and in results saved before it was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<Load>,
    /// What the measured throughput costs at the price given (`--cost-per-hour`); absent without.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<Cost>,
    /// A thinking model's split of its replies ([`crate::bench::base::thinking`]); absent when no
    /// completed request thought.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<ThinkingSummary>,
    /// The server's own view, from its `/metrics` scraped during the run
    /// ([`crate::bench::measure::server_metrics`]); absent without `--server-metrics`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<crate::bench::measure::server_metrics::ServerSummary>,
    /// The GPUs' power and energy over the run ([`crate::bench::measure::energy`]); absent without
    /// `--gpu-metrics-url` or NVML.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy: Option<crate::bench::measure::energy::Energy>,
    /// Requests sent but left out of this summary (a warm-up, a cool-down:
    /// [`crate::bench::record::phases`]); absent when none were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub excluded: Option<crate::bench::record::phases::Excluded>,
    /// Multi-turn workloads: per turn and per session ([`ConversationSummary`]); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversations: Option<ConversationSummary>,
    /// The run's steady state ([`crate::bench::measure::steady`]): its window and the summary over the
    /// requests that arrived in it, or why there was none; set by the session (absent for fewer
    /// than two arrivals, a burst, and in results saved before it was measured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steady: Option<crate::bench::measure::steady::SteadyState>,
    /// The load the client delivered against the plan ([`crate::bench::measure::delivered`]); set by the
    /// session for a server's open loop (absent for the engine, which has no send).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivered: Option<crate::bench::measure::delivered::DeliveredLoad>,
}

/// A multi-turn run by turn number (turn 0 is each session's first) and by session.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ConversationSummary {
    pub sessions: usize,
    /// Sessions every turn of which completed.
    pub completed_sessions: usize,
    /// Completed sessions: from the first turn's arrival to the last turn's finish.
    pub session_duration_s: Stats,
    pub per_turn: Vec<TurnSummary>,
}

/// The completed requests that were turn `turn` of their session.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TurnSummary {
    pub turn: u32,
    pub completed: usize,
    /// Prompt tokens (the history so far plus the new text), mean.
    #[serde(with = "nan_as_null")]
    pub mean_prompt_len: f64,
    pub ttft_ms: Stats,
    /// Their prompt tokens served from the engine's prefix cache over their prompt tokens; `null`
    /// where the target cannot say.
    pub prefix_cache_hit_rate: Option<f64>,
}

fn conversations(records: &[RequestRecord]) -> Option<ConversationSummary> {
    let in_sessions: Vec<&RequestRecord> = records.iter().filter(|r| r.session.is_some()).collect();
    if in_sessions.is_empty() {
        return None;
    }
    let mut sessions: BTreeMap<u64, Vec<&RequestRecord>> = BTreeMap::new();
    for r in &in_sessions {
        sessions.entry(r.session.unwrap_or_default()).or_default().push(r);
    }
    let durations: Vec<f64> = sessions
        .values()
        .filter(|turns| turns.iter().all(|r| r.succeeded()))
        .filter_map(|turns| {
            let start = turns.iter().map(|r| r.arrival_s).fold(f64::INFINITY, f64::min);
            let end = turns.iter().filter_map(|r| r.finish_s).fold(f64::NEG_INFINITY, f64::max);
            (end >= start).then_some(end - start)
        })
        .collect();
    let last_turn = in_sessions.iter().filter_map(|r| r.turn).max().unwrap_or(0);
    let per_turn = (0..=last_turn)
        .map(|turn| {
            let done: Vec<&&RequestRecord> =
                in_sessions.iter().filter(|r| r.turn == Some(turn) && r.succeeded()).collect();
            let ttft: Vec<f64> = done.iter().filter_map(|r| r.ttft_s()).map(|s| s * 1000.0).collect();
            let prompt: usize = done.iter().map(|r| r.prompt_len).sum();
            let cached: Option<usize> = done.iter().map(|r| r.cached_tokens).sum();
            let cache_prompt: usize = done.iter().map(|r| r.cache_prompt_len()).sum();
            TurnSummary {
                turn,
                completed: done.len(),
                mean_prompt_len: prompt as f64 / done.len() as f64,
                ttft_ms: stats(&ttft),
                prefix_cache_hit_rate: cached.filter(|_| cache_prompt > 0).map(|c| c as f64 / cache_prompt as f64),
            }
        })
        .collect();
    Some(ConversationSummary {
        sessions: sessions.len(),
        completed_sessions: durations.len(),
        session_duration_s: stats(&durations),
        per_turn,
    })
}

/// Reasoning against answer over the completed requests.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ThinkingSummary {
    /// Completed requests whose reply thought.
    pub requests_thinking: usize,
    pub reasoning_tokens: usize,
    pub answer_tokens: usize,
    /// Time to first answer token from the planned arrival, over the completed requests that
    /// answered (TTFT for a reply that did not think).
    pub ttfat_ms: Stats,
    /// Completed requests that ended while still thinking (no answer token).
    pub unanswered: usize,
}

fn thinking(completed: &[&RequestRecord]) -> Option<ThinkingSummary> {
    let thinking = completed.iter().filter(|r| r.reasoning_tokens > 0).count();
    (thinking > 0).then(|| {
        let ttfat: Vec<f64> = completed.iter().filter_map(|r| r.ttfat_s()).map(|s| s * 1000.0).collect();
        ThinkingSummary {
            requests_thinking: thinking,
            reasoning_tokens: completed.iter().map(|r| r.reasoning_tokens).sum(),
            answer_tokens: completed.iter().map(|r| r.answer_tokens()).sum(),
            ttfat_ms: stats(&ttfat),
            unanswered: completed.iter().filter(|r| r.answer_s().is_none()).count(),
        }
    })
}

/// The price of the serving hardware per hour, and what it makes the measured throughput cost:
/// the hour's price spread over the output tokens and the requests completed in an hour at this
/// run's rates. In the price's own currency.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Cost {
    pub per_hour: f64,
    /// `null` when no output token was completed.
    #[serde(with = "nan_as_null")]
    pub per_million_output_tokens: f64,
    #[serde(with = "nan_as_null")]
    pub per_request: f64,
}

impl Cost {
    pub fn at(per_hour: f64, m: &BenchmarkMetrics) -> Cost {
        let per_second = per_hour / 3600.0;
        let spread = |rate: f64| if rate > 0.0 { per_second / rate } else { f64::NAN };
        Cost {
            per_hour,
            per_million_output_tokens: spread(m.output_throughput) * 1e6,
            per_request: spread(m.request_throughput),
        }
    }
}

/// What drafting bought: a verification is one sequence's draft checked in one step.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SpeculationSummary {
    pub draft_steps: usize,
    pub drafted_tokens: usize,
    pub accepted_tokens: usize,
    /// accepted / drafted.
    #[serde(with = "nan_as_null")]
    pub acceptance_rate: f64,
    /// Accepted draft tokens per verification; the step also yields the model's own token, so a
    /// verification yields 1 + this many tokens.
    #[serde(with = "nan_as_null")]
    pub accepted_per_step: f64,
}

/// Tokens a chunk carried over the completed requests' streams ([`BenchmarkMetrics::tokens_per_chunk`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TokensPerChunk {
    /// Output tokens ÷ token-carrying chunks (the server's `usage` count where it was taken).
    pub mean: f64,
    /// The most one chunk carried, where each chunk's count is known (a per-token list in the
    /// chunk); `None` where the counts are known only in total.
    pub max: Option<u32>,
}

fn tokens_per_chunk(completed: &[&RequestRecord]) -> Option<TokensPerChunk> {
    let (tokens, chunks) = completed
        .iter()
        .filter(|r| !r.token_times_s.is_empty())
        .fold((0usize, 0usize), |(t, c), r| (t + r.output_len, c + r.token_times_s.len()));
    let mean = tokens as f64 / chunks as f64;
    // Each chunk's count is known when the counts add up to the request's tokens.
    let known = completed.iter().all(|r| r.chunk_tokens.iter().map(|&n| n as usize).sum::<usize>() == r.output_len);
    let max = known.then(|| completed.iter().flat_map(|r| r.chunk_tokens.iter().copied()).max()).flatten();
    (chunks > 0 && mean > 1.0).then_some(TokensPerChunk { mean, max })
}

fn speculation(records: &[RequestRecord]) -> Option<SpeculationSummary> {
    let sum = |f: fn(&RequestRecord) -> usize| records.iter().map(f).sum::<usize>();
    let (steps, drafted, accepted) = (sum(|r| r.draft_steps), sum(|r| r.drafted_tokens), sum(|r| r.accepted_tokens));
    (drafted > 0).then(|| SpeculationSummary {
        draft_steps: steps,
        drafted_tokens: drafted,
        accepted_tokens: accepted,
        acceptance_rate: accepted as f64 / drafted as f64,
        accepted_per_step: accepted as f64 / steps as f64,
    })
}

/// Tasks over 50 ms on the page's main thread while a run was in flight, as Chromium's
/// `PerformanceObserver` reports them (entry type `longtask`); browsers without it leave this out.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LongTasks {
    pub count: usize,
    pub longest_ms: f64,
    pub total_ms: f64,
    /// The first [`LongTasks::KEPT`] tasks as (start, seconds from the rate's start — within a
    /// few ms of the benchmark clock of `steps` and `requests` —, duration in ms), to see what
    /// they overlap.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tasks: Vec<(f64, f64)>,
}

impl LongTasks {
    pub const KEPT: usize = 64;
}

fn old_bucket_s() -> f64 {
    MIN_THROUGHPUT_BUCKET_S
}

/// The narrowest throughput bucket: finer than this, a chart of a fast engine is noise.
pub const MIN_THROUGHPUT_BUCKET_S: f64 = 0.25;

/// The bucket width of a run's throughput series: at least [`MIN_THROUGHPUT_BUCKET_S`], and at
/// least two of the run's typical spacings between token times (the median gap between engine
/// steps, or for a server without steps the median gap between a request's chunks), rounded up
/// to 1, 2 or 5 × 10ⁿ s. A fixed bucket narrower than a step aliases: tokens land at step ends,
/// so at 300 ms steps most 0.25 s buckets hold none and the chart becomes a comb of zeros.
/// A bucket of two spacings holds at least one step's tokens whenever the engine is busy.
pub fn throughput_bucket_s(records: &[RequestRecord], steps: &[StepSample]) -> f64 {
    let mut gaps: Vec<f64> = if steps.len() >= 2 {
        steps.windows(2).map(|pair| pair[1].t_s - pair[0].t_s).collect()
    } else {
        records.iter().flat_map(RequestRecord::itl_s).collect()
    };
    gaps.retain(|g| g.is_finite() && *g > 0.0);
    if gaps.is_empty() {
        return MIN_THROUGHPUT_BUCKET_S;
    }
    let middle = gaps.len() / 2;
    let (_, median, _) = gaps.select_nth_unstable_by(middle, f64::total_cmp);
    let wanted = 2.0 * *median;
    if wanted <= MIN_THROUGHPUT_BUCKET_S {
        return MIN_THROUGHPUT_BUCKET_S;
    }
    crate::bench::base::stats::nice_step(wanted)
}

impl BenchmarkMetrics {
    /// Completed over all requests; NaN without requests.
    pub fn success_rate(&self) -> f64 {
        self.completed as f64 / (self.completed + self.failed) as f64
    }
}

/// `bucket_s`: the throughput series' bucket ([`throughput_bucket_s`] for a run). Panics if it
/// is not above 0.
pub fn summarize(
    records: &[RequestRecord],
    steps: &[StepSample],
    slo: Option<&Slo>,
    bucket_s: f64,
) -> BenchmarkMetrics {
    assert!(bucket_s > 0.0, "summarize: bucket_s must be above 0");
    let completed: Vec<&RequestRecord> = records.iter().filter(|r| r.succeeded()).collect();
    let duration_s = records.iter().filter_map(|r| r.finish_s).fold(0.0, f64::max);
    let total_input_tokens: usize = completed.iter().map(|r| r.prompt_len).sum();
    let total_output_tokens: usize = completed.iter().map(|r| r.output_len).sum();
    let per_second = |x: f64| {
        if duration_s > 0.0 {
            x / duration_s
        } else {
            f64::NAN
        }
    };
    let latency_ms = |latency_s: fn(&RequestRecord) -> Option<f64>| {
        let values: Vec<f64> = completed.iter().filter_map(|r| latency_s(r)).map(|s| s * 1000.0).collect();
        stats(&values)
    };
    let itl_ms: Vec<f64> = completed.iter().flat_map(|r| r.itl_s()).map(|s| s * 1000.0).collect();
    let good = slo.map(|slo| completed.iter().filter(|r| slo.met_by(r)).count() as f64);
    let cancelled = records.iter().filter_map(RequestRecord::cancelled_by).fold(BTreeMap::new(), |mut by, who| {
        *by.entry(who.name().to_string()).or_insert(0) += 1;
        by
    });
    let not_cancelled = records.len() - cancelled.values().sum::<usize>();
    // Requests whose cached prompt tokens are known (the engine's once scheduled, a server's that
    // said).
    let (cached_tokens, prompt_tokens) = records
        .iter()
        .filter_map(|r| r.cached_tokens.map(|c| (c, r.cache_prompt_len())))
        .fold((0, 0), |(c, p), (rc, rp)| (c + rc, p + rp));
    BenchmarkMetrics {
        num_requests: records.len(),
        completed: completed.len(),
        failed: not_cancelled - completed.len(),
        cancelled,
        unsent: 0,
        duration_s,
        total_input_tokens,
        total_output_tokens,
        request_throughput: per_second(completed.len() as f64),
        output_throughput: per_second(total_output_tokens as f64),
        total_token_throughput: per_second((total_input_tokens + total_output_tokens) as f64),
        ttft_ms: latency_ms(RequestRecord::ttft_s),
        ttft_from_send_ms: completed
            .iter()
            .any(|r| r.sent_s.is_some())
            .then(|| latency_ms(RequestRecord::ttft_from_send_s)),
        tpot_ms: latency_ms(RequestRecord::tpot_s),
        itl_ms: stats(&itl_ms),
        e2e_ms: latency_ms(RequestRecord::e2e_s),
        queue_ms: latency_ms(RequestRecord::queue_s),
        goodput: good.map(per_second),
        slo_attainment: good.map(|g| g / not_cancelled as f64),
        preemptions: Some(records.iter().map(|r| r.preemptions as u64).sum()),
        // fold from +0.0: an empty f64 sum is -0.0, which would print as "-0%".
        gpu_busy_fraction: per_second(steps.iter().fold(0.0, |busy, s| busy + s.duration_s)),
        series: series(records, steps, duration_s, bucket_s),
        load: Load::of(records),
        cost: None,
        thinking: thinking(&completed),
        server: None,
        energy: None,
        excluded: None,
        conversations: conversations(records),
        steady: None,
        delivered: None,
        timeseries_bucket_s: bucket_s,
        errors: records.iter().filter_map(RequestRecord::error_kind).fold(BTreeMap::new(), |mut kinds, kind| {
            *kinds.entry(kind.to_string()).or_insert(0) += 1;
            kinds
        }),
        stopped_short: records.iter().filter(|r| r.stopped_short()).count(),
        usage_mismatch: records.iter().filter(|r| r.usage_mismatch.is_some()).count(),
        redirected: records.iter().filter(|r| r.redirected_to.is_some()).count(),
        tokens_per_chunk: tokens_per_chunk(&completed),
        timestamp_lag_ms: timestamp_lag_ms(steps),
        long_tasks: None,
        browser_conditions: None,
        speculation: speculation(records),
        prefix_cache_hit_rate: (prompt_tokens > 0).then(|| cached_tokens as f64 / prompt_tokens as f64),
        cached_prompt_tokens: (prompt_tokens > 0).then_some(cached_tokens),
        prefix_cache_prompt_tokens: (prompt_tokens > 0).then_some(prompt_tokens),
        prefix_cache_implied_rate: None,
    }
}

fn timestamp_lag_ms(steps: &[StepSample]) -> Option<Stats> {
    let lags: Vec<f64> = steps.iter().filter_map(|s| s.readback_lag_s).map(|s| s * 1000.0).collect();
    (!lags.is_empty()).then(|| stats(&lags))
}

fn series(records: &[RequestRecord], steps: &[StepSample], duration_s: f64, bucket_s: f64) -> Vec<TimePoint> {
    let buckets = (duration_s / bucket_s).ceil() as usize;
    if buckets == 0 {
        return Vec::new();
    }
    // Anything at or past the end (the last finish itself) falls in the last bucket.
    let bucket_of = |t_s: f64| ((t_s / bucket_s) as usize).min(buckets - 1);
    let mut tokens = vec![0usize; buckets];
    for r in records {
        match (r.token_times_s.is_empty(), r.first_token_s, r.finish_s) {
            // A summary (`TokenTimes::Summary`): the first token at its time, the rest evenly up
            // to the finish — token k of the n − 1 at first + k/(n − 1) of the way.
            (true, Some(first), Some(finish)) if r.output_len > 0 => {
                tokens[bucket_of(first)] += 1;
                let rest = r.output_len - 1;
                let span = finish - first;
                // Tokens of the rest before `t` (token k is before it when k < rest·(t − first)/span).
                let before = |t: f64| {
                    if span <= 0.0 || t > finish {
                        rest
                    } else {
                        ((rest as f64 * (t - first) / span).ceil().max(0.0) as usize).saturating_sub(1).min(rest)
                    }
                };
                let (mut b, mut counted) = (bucket_of(first), 0);
                while counted < rest {
                    let end = (b + 1) as f64 * bucket_s;
                    let n = if b + 1 >= buckets { rest } else { before(end) };
                    tokens[b] += n - counted;
                    counted = n;
                    b += 1;
                }
            }
            _ => {
                for (t_s, count) in r.timed_tokens() {
                    tokens[bucket_of(t_s)] += count;
                }
            }
        }
    }
    let mut last_step: Vec<Option<&StepSample>> = vec![None; buckets];
    for step in steps {
        let slot = &mut last_step[bucket_of(step.t_s)];
        if slot.is_none_or(|seen| step.t_s >= seen.t_s) {
            *slot = Some(step);
        }
    }
    let mut state = (0.0, 0.0, 0.0);
    (0..buckets)
        .map(|i| {
            if let Some(step) = last_step[i] {
                state = (step.running as f64, step.waiting as f64, step.kv_blocks_used as f64);
            }
            TimePoint {
                t_s: i as f64 * bucket_s,
                output_tok_s: tokens[i] as f64 / bucket_s,
                running: state.0,
                waiting: state.1,
                kv_blocks_used: state.2,
            }
        })
        .collect()
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests {

    #[test]
    fn cost_spreads_the_hour_over_what_was_served() {
        let mut m = summarize(&[], &[], None, 0.25);
        (m.output_throughput, m.request_throughput) = (500.0, 2.0);
        // $3.60 an hour is $0.001 a second: 500 tok/s -> $2 per million tokens; 2 req/s -> $0.0005.
        let c = Cost::at(3.6, &m);
        assert!((c.per_million_output_tokens - 2.0).abs() < 1e-12 && (c.per_request - 0.0005).abs() < 1e-15, "{c:?}");
        m.output_throughput = 0.0;
        assert!(Cost::at(3.6, &m).per_million_output_tokens.is_nan());
    }
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9 * b.abs().max(1.0)
    }

    fn record(id: u64, arrival: f64, scheduled: f64, tokens: &[f64], prompt_len: usize) -> RequestRecord {
        RequestRecord {
            id,
            arrival_s: arrival,
            scheduled_s: Some(scheduled),
            first_token_s: tokens.first().copied(),
            token_times_s: tokens.to_vec(),
            finish_s: tokens.last().copied(),
            prompt_len,
            output_len: tokens.len(),
            preemptions: 0,
            error: None,
            ..RequestRecord::default()
        }
    }

    /// Three replies, by hand: a thinks for 3 tokens then answers at 0.5 s (arrival 0); b does not
    /// think (its answer starts at its first token, 0.3 s after arriving at 0.1); c thinks to the
    /// end. Time to first answer token over a and b: 500 and 300 ms; TTFT over all: 100, 300, 200.
    /// Two sessions of two turns, by hand: turn 0 prompts of 10 and 20 tokens, 0 cached, TTFT 100
    /// and 300 ms; turn 1 prompts of 40 and 60 with 30 and 45 cached (75 of 100), TTFT 50 and
    /// 150 ms. Session 0 lasts 0 → 1.2 s; session 1's second turn failed.
    #[test]
    fn conversations_are_summarised_per_turn_and_per_session() {
        let turn = |session: u64, turn: u32, arrival: f64, ttft: f64, end: f64, prompt: usize, cached: usize| {
            let mut r = record(session * 10 + turn as u64, arrival, arrival, &[arrival + ttft, end], prompt);
            (r.session, r.turn, r.cached_tokens) = (Some(session), Some(turn), Some(cached));
            r
        };
        let mut failed = turn(1, 1, 1.0, 0.15, 1.5, 60, 45);
        failed.error = Some("cancelled".into());
        let records = [
            turn(0, 0, 0.0, 0.1, 0.5, 10, 0),
            turn(0, 1, 0.7, 0.05, 1.2, 40, 30),
            turn(1, 0, 0.2, 0.3, 0.8, 20, 0),
            failed,
        ];
        let c = summarize(&records, &[], None, 0.25).conversations.expect("sessions");
        assert_eq!((c.sessions, c.completed_sessions), (2, 1));
        assert!(close(c.session_duration_s.mean, 1.2));
        assert_eq!(c.per_turn.len(), 2);
        let (t0, t1) = (&c.per_turn[0], &c.per_turn[1]);
        assert_eq!((t0.completed, t1.completed), (2, 1));
        assert!(
            close(t0.mean_prompt_len, 15.0) && close(t0.ttft_ms.mean, 200.0) && t0.prefix_cache_hit_rate == Some(0.0)
        );
        assert!(
            close(t1.mean_prompt_len, 40.0) && close(t1.ttft_ms.mean, 50.0) && t1.prefix_cache_hit_rate == Some(0.75)
        );
        assert!(summarize(&records[..1], &[], None, 0.25).conversations.is_some());
        let mut alone = records[0].clone();
        alone.session = None;
        assert!(summarize(&[alone], &[], None, 0.25).conversations.is_none());
    }

    /// Four requests by hand: a and b complete (TTFT 100 and 300 ms), c times out, d is cancelled by
    /// the workload after its first token at 50 ms. d is neither completed nor failed, its TTFT is
    /// in no figure, and with a TTFT SLO of 200 ms the attainment is a's one of the three not
    /// cancelled.
    #[test]
    fn cancelled_requests_are_counted_apart_and_left_out_of_the_figures() {
        use crate::bench::record::raw::Cancelled;
        use crate::bench::traffic::cancel::CancelledBy;
        let a = record(0, 0.0, 0.0, &[0.1, 0.2], 4);
        let b = record(1, 0.0, 0.0, &[0.3, 0.4], 4);
        let mut c = record(2, 0.0, 0.0, &[], 4);
        c.error = Some("timeout: 5 s".into());
        let mut d = record(3, 0.0, 0.0, &[0.05], 4);
        (d.finish_s, d.cancelled) = (None, Some(Cancelled { by: CancelledBy::Workload, at_s: 0.06 }));
        let slo = Slo { ttft_ms: Some(200.0), ..Slo::default() };
        let m = summarize(&[a, b, c, d], &[], Some(&slo), 0.25);
        assert_eq!((m.num_requests, m.completed, m.failed), (4, 2, 1));
        assert_eq!(m.cancelled, BTreeMap::from([("workload".to_string(), 1)]));
        assert_eq!(m.errors, BTreeMap::from([("timeout".to_string(), 1)]));
        assert!(close(m.ttft_ms.mean, 200.0) && m.ttft_ms.count == 2, "{:?}", m.ttft_ms);
        assert!(close(m.slo_attainment.unwrap(), 1.0 / 3.0), "{:?}", m.slo_attainment);
        assert!(close(m.success_rate(), 2.0 / 3.0));
    }

    #[test]
    fn thinking_is_split_from_the_answer() {
        let mut a = record(0, 0.0, 0.0, &[0.1, 0.2, 0.3, 0.5, 0.6], 4);
        (a.reasoning_tokens, a.first_answer_s) = (3, Some(0.5));
        let b = record(1, 0.1, 0.1, &[0.4, 0.5], 4);
        let mut c = record(2, 0.2, 0.2, &[0.4, 0.5, 0.6], 4);
        c.reasoning_tokens = 3;
        let m = summarize(&[a.clone(), b.clone(), c], &[], None, 0.25);
        let t = m.thinking.expect("two replies thought");
        assert_eq!((t.requests_thinking, t.reasoning_tokens, t.answer_tokens, t.unanswered), (2, 6, 4, 1));
        assert_eq!(t.ttfat_ms.count, 2);
        assert!(close(t.ttfat_ms.mean, 400.0) && close(t.ttfat_ms.p50, 400.0), "{:?}", t.ttfat_ms);
        assert!(close(m.ttft_ms.mean, 200.0) && m.ttft_ms.count == 3);
        // No reply thought: no split.
        assert!(summarize(&[b], &[], None, 0.25).thinking.is_none());
    }

    fn step(t_s: f64, duration_s: f64, running: usize, waiting: usize, kv_blocks_used: usize) -> StepSample {
        StepSample {
            t_s,
            duration_s,
            running,
            waiting,
            batched_tokens: 0,
            kv_blocks_used,
            kv_blocks_total: 8,
            ..Default::default()
        }
    }

    #[test]
    fn speculation_sums_requests_and_is_absent_without_drafts() {
        assert_eq!(summarize(&[record(0, 0.0, 0.0, &[1.0], 4)], &[], None, 0.25).speculation, None);
        let a =
            RequestRecord { draft_steps: 4, drafted_tokens: 16, accepted_tokens: 6, ..record(0, 0.0, 0.0, &[1.0], 4) };
        let b =
            RequestRecord { draft_steps: 2, drafted_tokens: 4, accepted_tokens: 3, ..record(1, 0.0, 0.0, &[1.0], 4) };
        let s = summarize(&[a, b], &[], None, 0.25).speculation.unwrap();
        assert_eq!((s.draft_steps, s.drafted_tokens, s.accepted_tokens), (6, 20, 9));
        assert!(close(s.acceptance_rate, 0.45) && close(s.accepted_per_step, 1.5), "{s:?}");
    }

    /// Two completed requests and one that failed after its first token.
    #[test]
    fn prefix_cache_hit_rate_is_cached_over_prompt_tokens_and_null_when_unknown() {
        let with = |cached: Option<usize>, prompt_len| RequestRecord {
            cached_tokens: cached,
            ..record(0, 0.0, 0.1, &[0.2, 0.3], prompt_len)
        };
        let m = summarize(&[with(Some(0), 100), with(Some(96), 100), with(Some(32), 56)], &[], None, 0.25);
        assert!(close(m.prefix_cache_hit_rate.unwrap(), 128.0 / 256.0));
        assert_eq!((m.cached_prompt_tokens, m.prefix_cache_prompt_tokens), (Some(128), Some(256)));
        // A server's records cannot say: null, not 0.
        let server = summarize(&[with(None, 100)], &[], None, 0.25);
        assert_eq!((server.prefix_cache_hit_rate, server.cached_prompt_tokens), (None, None));
        let json = serde_json::to_value(&server).unwrap();
        assert!(json["prefix_cache_hit_rate"].is_null(), "{json}");
        let off = summarize(&[with(Some(0), 100)], &[], None, 0.25);
        assert_eq!(off.prefix_cache_hit_rate, Some(0.0));
    }

    fn records() -> Vec<RequestRecord> {
        let mut failed = record(2, 0.2, 0.2, &[0.4], 5);
        failed.finish_s = None;
        failed.error = Some("boom".into());
        failed.preemptions = 2;
        let mut first = record(0, 0.0, 0.1, &[0.3, 0.4, 0.6], 10);
        first.preemptions = 1;
        vec![first, record(1, 0.5, 0.5, &[0.7, 1.0], 20), failed]
    }

    #[test]
    fn latencies_throughputs_and_counts() {
        let m = summarize(&records(), &[], None, 0.25);
        assert_eq!((m.completed, m.failed, m.preemptions), (2, 1, Some(3)));
        assert!(m.ttft_from_send_ms.is_none(), "no send times, no TTFT from send");
        assert_eq!((m.total_input_tokens, m.total_output_tokens), (30, 5));
        assert_eq!(m.duration_s, 1.0);
        assert!(close(m.request_throughput, 2.0) && close(m.output_throughput, 5.0));
        assert!(close(m.total_token_throughput, 35.0));
        // TTFT 300, 200; TPOT (0.6-0.3)/2 = 150, 300; E2E 600, 500; queue 100, 0 (ms).
        assert!(close(m.ttft_ms.mean, 250.0) && close(m.ttft_ms.p90, 290.0) && close(m.ttft_ms.std, 50.0));
        assert!(close(m.tpot_ms.mean, 225.0) && close(m.tpot_ms.p50, 225.0));
        assert!(close(m.e2e_ms.mean, 550.0) && close(m.queue_ms.mean, 50.0));
        // ITL pooled over requests: 100, 200, 300.
        assert_eq!(m.itl_ms.count, 3);
        assert!(close(m.itl_ms.mean, 200.0) && close(m.itl_ms.std, (20_000.0f64 / 3.0).sqrt()));
        assert!(m.goodput.is_none() && m.slo_attainment.is_none());
        assert_eq!(m.errors, BTreeMap::from([("boom".to_string(), 1)]));
        assert!(close(m.success_rate(), 2.0 / 3.0) && m.stopped_short == 0);
    }

    #[test]
    fn ttft_from_send_leaves_out_the_client_lateness() {
        // Sent 10 ms and 30 ms after their planned arrivals.
        let mut r = records();
        r[0].sent_s = Some(0.01);
        r[1].sent_s = Some(0.53);
        let m = summarize(&r, &[], None, 0.25);
        let send = m.ttft_from_send_ms.as_ref().expect("send times recorded");
        // TTFT from arrival 300, 200; from send 290, 170 (ms).
        assert!(close(m.ttft_ms.mean, 250.0) && close(send.mean, 230.0) && send.count == 2, "{send:?}");
        let json = serde_json::to_value(&m).unwrap();
        assert_eq!(json["ttft_from_send_ms"]["count"], 2);
        let back: BenchmarkMetrics = serde_json::from_value(json).unwrap();
        assert!(close(back.ttft_from_send_ms.unwrap().p50, 230.0));
        // Older summaries (no field, a number of preemptions) still load.
        let mut old = serde_json::to_value(summarize(&records(), &[], None, 0.25)).unwrap();
        old.as_object_mut().unwrap().remove("ttft_from_send_ms");
        old["preemptions"] = 3.into();
        let back: BenchmarkMetrics = serde_json::from_value(old).unwrap();
        assert_eq!((back.ttft_from_send_ms.is_none(), back.preemptions), (true, Some(3)));
    }

    #[test]
    fn chunks_weigh_by_their_tokens() {
        // One chunk of 3 tokens at 0.4: 4 tokens, 2 ITL entries, TPOT over the 4 tokens.
        let mut r = record(0, 0.0, 0.0, &[0.2, 0.4, 0.5], 8);
        (r.chunk_tokens, r.output_len, r.requested_output_len) = (vec![1, 3, 1], 5, Some(6));
        let m = summarize(&[r], &[], None, 0.25);
        assert_eq!((m.total_output_tokens, m.itl_ms.count, m.stopped_short), (5, 2, 1));
        assert!(close(m.tpot_ms.mean, 75.0));
        let tokens: Vec<f64> = m.series.iter().map(|p| p.output_tok_s * 0.25).collect();
        assert_eq!(tokens, vec![1.0, 4.0]);
    }

    #[test]
    fn goodput_counts_only_requests_meeting_every_slo() {
        // Request 1 (TTFT 200, E2E 500) meets it; request 0 misses on TTFT 300; 2 failed.
        let slo: Slo = "ttft_ms=250, e2e_ms=550".parse().unwrap();
        let m = summarize(&records(), &[], Some(&slo), 0.25);
        assert!(close(m.goodput.unwrap(), 1.0));
        assert!(close(m.slo_attainment.unwrap(), 1.0 / 3.0));
        let strict: Slo = "tpot_ms=100".parse().unwrap();
        assert_eq!(summarize(&records(), &[], Some(&strict), 0.25).goodput, Some(0.0));
    }

    #[test]
    fn slo_parsing() {
        let slo: Slo = "ttft_ms=200,tpot_ms=50".parse().unwrap();
        assert_eq!(slo, Slo { ttft_ms: Some(200.0), tpot_ms: Some(50.0), e2e_ms: None });
        for bad in ["ttft=200", "ttft_ms", "ttft_ms=-1", "tpot_ms=abc", "e2e_ms=inf", ""] {
            assert!(bad.parse::<Slo>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn series_buckets_tokens_and_carries_state_forward() {
        let steps =
            [step(0.1, 0.1, 1, 1, 3), step(0.2, 0.1, 2, 0, 5), step(0.6, 0.2, 1, 0, 4), step(1.0, 0.3, 1, 0, 2)];
        let m = summarize(&records(), &steps, None, 0.25);
        assert!(close(m.gpu_busy_fraction, 0.7));
        let got: Vec<_> = m.series.iter().map(|p| (p.t_s, p.output_tok_s, p.running, p.kv_blocks_used)).collect();
        // Tokens at 0.3 0.4 0.4(failed) | 0.6 0.7 | 1.0 (the end falls in the last bucket).
        let want = vec![(0.0, 0.0, 2.0, 5.0), (0.25, 12.0, 2.0, 5.0), (0.5, 8.0, 1.0, 4.0), (0.75, 4.0, 1.0, 2.0)];
        assert_eq!(got, want);
        assert_eq!(m.series[0].waiting, 0.0);
    }

    /// A summary (`TokenTimes::Summary`) spreads a request's tokens evenly from its first token to
    /// its finish: here exactly the times of the full record beside it (first 1.0, then 1.5 … 3.0,
    /// 1 s buckets: 0 | 2 | 3, the finish in the last bucket), and the same TTFT, TPOT and E2E;
    /// no ITL.
    #[test]
    fn a_summary_spreads_its_tokens_over_its_decode() {
        let full = record(0, 0.0, 0.0, &[1.0, 1.5, 2.0, 2.5, 3.0], 4);
        let summary = RequestRecord { token_times_s: Vec::new(), ..full.clone() };
        let (a, b) = (summarize(&[full], &[], None, 1.0), summarize(&[summary], &[], None, 1.0));
        let tokens = |m: &BenchmarkMetrics| m.series.iter().map(|p| p.output_tok_s).collect::<Vec<_>>();
        assert_eq!(tokens(&a), vec![0.0, 2.0, 3.0]);
        assert_eq!(tokens(&b), tokens(&a));
        assert_eq!((b.ttft_ms.p50, b.tpot_ms.p50, b.e2e_ms.p50), (a.ttft_ms.p50, a.tpot_ms.p50, a.e2e_ms.p50));
        assert!(b.itl_ms.p50.is_nan() && a.itl_ms.p50 == 500.0);
    }

    #[test]
    fn no_finished_requests_gives_nan_throughput_not_a_panic() {
        let mut r = records();
        r.retain(|r| !r.succeeded());
        let m = summarize(&r, &[], None, 0.25);
        assert_eq!((m.completed, m.failed, m.duration_s), (0, 1, 0.0));
        assert!(m.request_throughput.is_nan() && m.series.is_empty());
        let json = serde_json::to_value(&m).unwrap();
        assert_eq!(json["output_throughput"], serde_json::Value::Null);
    }

    /// Four requests decoding together at 300 ms steps, 4 tokens per step (the comb of zeros
    /// seen in the page): a 0.25 s bucket aliases, the run's own bucket does not.
    fn slow_steps() -> (Vec<RequestRecord>, Vec<StepSample>) {
        let ends: Vec<f64> = (1..=20).map(|i| i as f64 * 0.3).collect();
        let records = (0..4).map(|id| record(id, 0.0, 0.0, &ends, 8)).collect();
        let steps = ends.iter().map(|&t| step(t, 0.3, 4, 0, 4)).collect();
        (records, steps)
    }

    #[test]
    fn throughput_buckets_do_not_alias_at_slow_steps() {
        let (records, steps) = slow_steps();
        // The failure this guards against: a fixed 0.25 s bucket has empty buckets mid-run.
        let fixed = summarize(&records, &steps, None, MIN_THROUGHPUT_BUCKET_S);
        assert!(fixed.series.iter().any(|p| p.output_tok_s == 0.0), "the case no longer combs at 0.25 s");
        let bucket = throughput_bucket_s(&records, &steps);
        assert!(bucket >= 0.6, "bucket {bucket} s under two 0.3 s steps");
        let m = summarize(&records, &steps, None, bucket);
        assert_eq!(m.timeseries_bucket_s, bucket);
        // Every bucket that the run covers entirely is within a step of the true 13.3 tok/s.
        let full = &m.series[..m.series.len() - 1];
        assert!(full.len() >= 4);
        for p in full {
            assert!((p.output_tok_s - 16.0 / 1.2).abs() <= 4.0 / bucket + 1e-9, "{p:?} at bucket {bucket}");
        }
    }

    #[test]
    fn throughput_bucket_follows_the_step_time() {
        // Fast steps keep the 0.25 s floor; no data gives the floor; a server's chunk gaps count.
        let fast: Vec<StepSample> = (0..100).map(|i| step(i as f64 * 0.01, 0.01, 1, 0, 1)).collect();
        assert_eq!(throughput_bucket_s(&[], &fast), MIN_THROUGHPUT_BUCKET_S);
        assert_eq!(throughput_bucket_s(&[], &[]), MIN_THROUGHPUT_BUCKET_S);
        let server = record(0, 0.0, 0.0, &[0.4, 1.1, 1.8, 2.5], 8);
        assert_eq!(throughput_bucket_s(&[server], &[]), 2.0);
        let (records, steps) = slow_steps();
        assert_eq!(throughput_bucket_s(&records, &steps), 1.0);
    }

    #[test]
    fn old_results_load_with_their_bucket() {
        let mut old = serde_json::to_value(summarize(&records(), &[], None, 0.25)).unwrap();
        old.as_object_mut().unwrap().remove("timeseries_bucket_s");
        let back: BenchmarkMetrics = serde_json::from_value(old).unwrap();
        assert_eq!(back.timeseries_bucket_s, 0.25);
    }
}
