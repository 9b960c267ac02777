//! Raw benchmark data, recorded as it happens and aggregated later by pure functions.
//! Every time is in seconds from the benchmark start, taken from the token stream itself.

use serde::{Deserialize, Serialize};

use crate::bench::traffic::cancel::CancelledBy;

/// What a record keeps of its output tokens' times.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenTimes {
    /// Each token's time (`token_times_s`): ITL, and tokens over time exactly.
    Every,
    /// The first token's and the finish's times and the token count only, so a plan of a million
    /// requests (hundreds of millions of tokens) fits in memory: TTFT, TPOT and E2E are exact, ITL
    /// is not reported ("–"), and the tokens-over-time series spreads each request's tokens evenly
    /// between its first token and its finish.
    Summary,
}

impl TokenTimes {
    /// A plan's default: every token's time up to this many requests, summaries above.
    pub const EVERY_UP_TO: usize = 100_000;

    /// The default for `requests` requests.
    pub fn for_requests(requests: usize) -> TokenTimes {
        if requests <= Self::EVERY_UP_TO {
            TokenTimes::Every
        } else {
            TokenTimes::Summary
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            TokenTimes::Every => "every",
            TokenTimes::Summary => "summary",
        }
    }
}

impl std::str::FromStr for TokenTimes {
    type Err = crate::error::Error;

    fn from_str(s: &str) -> crate::error::Result<TokenTimes> {
        match s {
            "every" => Ok(TokenTimes::Every),
            "summary" => Ok(TokenTimes::Summary),
            _ => Err(crate::error::Error::Invalid(format!("--token-times {s:?}: expected every or summary"))),
        }
    }
}

/// One request's life: when it arrived, was first scheduled, produced each token, finished.
/// Failures are data: a request with `error` set or without `finish_s` counts as failed and
/// is left out of the latency statistics.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RequestRecord {
    pub id: u64,
    /// NaN (`null` in JSON) for a request a cancelled run never sent.
    #[serde(with = "crate::bench::base::stats::nan_as_null")]
    pub arrival_s: f64,
    /// First time the scheduler put it in a batch; for a server, when the request was sent
    /// (so `queue_s` is the client's lateness, not the server's queueing).
    pub scheduled_s: Option<f64>,
    /// When the client sent the request to a server (the HTTP request began); absent for the
    /// engine, which has no send, and in results saved before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_s: Option<f64>,
    /// When the server's response headers arrived (the fetch resolved). From `sent_s` to here:
    /// the connection (a browser's queue for one, six per HTTP/1.1 host, included) and any wait
    /// of the server's before it answers. Absent for the engine and in results saved before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers_s: Option<f64>,
    pub first_token_s: Option<f64>,
    /// Every output token, in order; the first equals `first_token_s`. From a remote server's
    /// stream: one time per token-carrying chunk, with its token count in `chunk_tokens`. Empty
    /// for a request that produced tokens under [`TokenTimes::Summary`].
    pub token_times_s: Vec<f64>,
    /// Tokens carried by each entry of `token_times_s`; empty when each is one token (the engine).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub chunk_tokens: Vec<u32>,
    pub finish_s: Option<f64>,
    /// When the last bytes of a server's answer arrived: after its last token come a usage chunk
    /// and `[DONE]`, and the request holds its `--max-concurrency` slot until then. Absent for the
    /// engine and in results saved before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_end_s: Option<f64>,
    pub prompt_len: usize,
    /// Output tokens actually generated.
    pub output_len: usize,
    pub preemptions: u32,
    /// When each preemption happened (the engine's step end), for the timeline; empty for a
    /// server and in results saved before it was recorded (which have only the count).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preempted_s: Vec<f64>,
    pub error: Option<String>,
    /// Output tokens asked for exactly (a remote request with `ignore_eos`); fewer means the
    /// server stopped early.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_output_len: Option<usize>,
    /// Prompt tokens as the server counted them (`usage.prompt_tokens`), when it said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_prompt_len: Option<usize>,
    /// Output tokens as the server counted them (`usage.completion_tokens`), when it said. The
    /// streamed count is the sum over `token_times_s` ([`RequestRecord::timed_tokens`]);
    /// `output_len` is the server's count only when it is possible for what streamed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_output_len: Option<usize>,
    /// How the server's count and the streamed tokens disagree, and which one `output_len` took.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage_mismatch: Option<String>,
    /// Where a redirect within the endpoint's origin sent the request (the extra round trip is
    /// in its TTFT); a redirect to another origin fails the request instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redirected_to: Option<String>,
    /// Speculative decoding (engine only; absent when off): steps that verified a draft for this
    /// request, draft tokens verified, and draft tokens accepted (each accepted token is also in
    /// `token_times_s`, stamped like every token of its step, so ITL has zero gaps there).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub draft_steps: usize,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub drafted_tokens: usize,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub accepted_tokens: usize,
    /// The request's own planned prompt ([`crate::bench::traffic::prompts::Prompt::digest`]; a turn's own
    /// new part, not the conversation before it, which carries replies): a run made again with
    /// `bench --rerun` sends the same prompts when every digest matches. Absent in results saved
    /// before it was recorded, and for a request whose prompt could not be made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_digest: Option<String>,
    /// Prompt tokens served from the engine's prefix cache when it was first scheduled (0 with
    /// caching off), or from a server's, as its `usage.prompt_tokens_details.cached_tokens` said
    /// (when no more than its prompt); `null` for a server that does not say, and a request never
    /// scheduled.
    #[serde(default)]
    pub cached_tokens: Option<usize>,
    /// Output tokens that were the model's thinking ([`crate::bench::base::thinking`]): 0 for a reply
    /// that did not think, and in results saved before it was recorded.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reasoning_tokens: usize,
    /// When the first token after the thinking arrived; absent for a reply that did not think
    /// (its answer starts at `first_token_s`) or never got past its thinking.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_answer_s: Option<f64>,
    /// Left out of the summary as part of the run's warm-up or cool-down
    /// ([`crate::bench::record::phases`]); absent for a measured request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<crate::bench::record::phases::Phase>,
    /// Multi-turn workloads ([`crate::bench::traffic::workload::Conversations`]): the conversation this
    /// request is a turn of, and which turn (0 first); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<u32>,
    /// Ended before it finished, by whom and when ([`crate::bench::traffic::cancel`]): neither
    /// completed nor failed, and left out of the latency figures; what it received before is kept.
    /// Absent for a request that finished or failed, and in results saved before it was recorded
    /// (where a stopped run's requests in flight failed as "cancelled").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancelled: Option<Cancelled>,
}

/// When a request was cancelled, and by whom.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Cancelled {
    pub by: CancelledBy,
    /// Seconds from the benchmark's start.
    pub at_s: f64,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl RequestRecord {
    /// The record of a request not (yet) sent: no arrival time (NaN), nothing measured. A run's
    /// requests start so in the engine's driver; a server client's that a stopped run never sent
    /// end so (the `remote` layer's arrival loop), and the session drops them.
    pub fn unsent(id: u64, prompt_len: usize) -> RequestRecord {
        RequestRecord { id, arrival_s: f64::NAN, prompt_len, ..RequestRecord::default() }
    }

    pub fn succeeded(&self) -> bool {
        self.error.is_none() && self.finish_s.is_some() && self.cancelled.is_none()
    }

    /// Time to first token ([`crate::latency::ttft_s`]) from the planned arrival: what a user who
    /// asked at that moment waits, the client's own lateness and any queueing included.
    pub fn ttft_s(&self) -> Option<f64> {
        crate::latency::ttft_s(self.arrival_s, self.first_token_s)
    }

    /// Time to first token from when the request was sent: the server's (and network's) share
    /// only. `None` without a send time (the engine, older results).
    pub fn ttft_from_send_s(&self) -> Option<f64> {
        crate::latency::ttft_s(self.sent_s?, self.first_token_s)
    }

    /// How late the client sent the request after its planned arrival: `ttft_s` − `ttft_from_send_s`.
    pub fn client_lateness_s(&self) -> Option<f64> {
        Some(self.sent_s? - self.arrival_s)
    }

    /// When the request stopped holding the target (and a `--max-concurrency` slot): its
    /// cancellation, a server's stream's end, else its finish, or for a failure the last time it recorded (a token, the first token, the send, the first
    /// scheduling); `None` when it recorded none.
    pub fn ended_s(&self) -> Option<f64> {
        self.cancelled
            .map(|c| c.at_s)
            .or(self.stream_end_s)
            .or(self.finish_s)
            .or(self.token_times_s.last().copied())
            .or(self.first_token_s)
            .or(self.sent_s)
            .or(self.scheduled_s)
    }

    /// Time per output token after the first ([`crate::latency::tpot_s`]), from the first token to
    /// the finish (the last token, or a stream's last chunk) over `output_len` tokens.
    pub fn tpot_s(&self) -> Option<f64> {
        crate::latency::tpot_s(self.first_token_s, self.finish_s, self.output_len)
    }

    /// When the answer began: after the thinking, or the first token of a reply that did not
    /// think; `None` for one still thinking when it ended.
    pub fn answer_s(&self) -> Option<f64> {
        if self.reasoning_tokens == 0 {
            self.first_token_s
        } else {
            self.first_answer_s
        }
    }

    /// Time to first answer token from the planned arrival (TTFT for a reply that did not think).
    pub fn ttfat_s(&self) -> Option<f64> {
        crate::latency::ttft_s(self.arrival_s, self.answer_s())
    }

    /// Output tokens of the answer itself: the output less the reasoning.
    pub fn answer_tokens(&self) -> usize {
        self.output_len.saturating_sub(self.reasoning_tokens)
    }

    /// The prompt as the cache that served `cached_tokens` counted it: the server's count where it
    /// gave one (its chat template's tokens included), else the planned length.
    pub fn cache_prompt_len(&self) -> usize {
        self.server_prompt_len.unwrap_or(self.prompt_len)
    }

    /// End-to-end latency: finish − arrival.
    pub fn e2e_s(&self) -> Option<f64> {
        Some(self.finish_s? - self.arrival_s)
    }

    /// Time spent waiting for the scheduler: first scheduled − arrival.
    pub fn queue_s(&self) -> Option<f64> {
        Some(self.scheduled_s? - self.arrival_s)
    }

    /// Gaps between consecutive output tokens (inter-token latencies); from a stream, one gap per
    /// token-carrying chunk (a chunk with several tokens is one gap; see `chunk_tokens`).
    pub fn itl_s(&self) -> impl Iterator<Item = f64> + '_ {
        self.token_times_s.windows(2).map(|pair| pair[1] - pair[0])
    }

    /// Each entry of `token_times_s` with the number of tokens it stands for.
    pub fn timed_tokens(&self) -> impl Iterator<Item = (f64, usize)> + '_ {
        let count = |i: usize| self.chunk_tokens.get(i).map_or(1, |&n| n as usize);
        self.token_times_s.iter().enumerate().map(move |(i, &t)| (t, count(i)))
    }

    /// What kind of failure, for counting: the error's text before its first ": " ("timeout",
    /// "http 500"); "unfinished" for a record that never finished without an error or a
    /// cancellation. `None` for one that finished, or was cancelled ([`RequestRecord::cancelled`]).
    pub fn error_kind(&self) -> Option<&str> {
        match (&self.error, self.finish_s, self.cancelled) {
            (Some(e), _, _) => Some(e.split_once(": ").map_or(e.as_str(), |(kind, _)| kind)),
            (None, None, None) => Some("unfinished"),
            (None, _, _) => None,
        }
    }

    /// Cancelled, and by whom; `None` for a request that finished or failed.
    pub fn cancelled_by(&self) -> Option<CancelledBy> {
        self.cancelled.filter(|_| self.error.is_none()).map(|c| c.by)
    }

    /// Finished with fewer tokens than asked (a server that stopped at EOS despite `ignore_eos`).
    pub fn stopped_short(&self) -> bool {
        self.succeeded() && self.requested_output_len.is_some_and(|asked| self.output_len < asked)
    }
}

/// The engine's state after one step (one forward pass over a batch).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StepSample {
    /// Step end, seconds from the benchmark start.
    pub t_s: f64,
    pub duration_s: f64,
    pub running: usize,
    pub waiting: usize,
    /// Tokens in this step's batch: prefill chunks plus one per decoding sequence.
    pub batched_tokens: usize,
    /// What the step computed, for the capacity planner's cost model (the `planner` layer above);
    /// absent in results saved before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shape: Option<crate::engine::StepShape>,
    pub kv_blocks_used: usize,
    pub kv_blocks_total: usize,
    /// From the step's readback resolving to its tokens' timestamp (see
    /// `engine::StepStats::readback_lag_s`); absent for steps that sampled nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readback_lag_s: Option<f64>,
    /// Speculative decoding: draft tokens verified in this step and how many were accepted.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub drafted_tokens: usize,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub accepted_tokens: usize,
    /// Free KV blocks still holding a cached prefix (prefix caching; counted free in
    /// `kv_blocks_used`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub kv_blocks_cached: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> RequestRecord {
        RequestRecord {
            id: 7,
            arrival_s: 1.0,
            scheduled_s: Some(1.25),
            first_token_s: Some(1.5),
            token_times_s: vec![1.5, 1.75, 2.25],
            finish_s: Some(2.25),
            prompt_len: 16,
            output_len: 3,
            preemptions: 0,
            error: None,
            ..RequestRecord::default()
        }
    }

    #[test]
    fn an_unsent_request_round_trips_through_json() {
        let r = RequestRecord { arrival_s: f64::NAN, error: Some("cancelled".into()), ..record() };
        let json = serde_json::to_string(&r).unwrap();
        assert!(json.contains("\"arrival_s\":null"), "{json}");
        let back: RequestRecord = serde_json::from_str(&json).unwrap();
        assert!(back.arrival_s.is_nan() && back.error.as_deref() == Some("cancelled"));
        let ok: RequestRecord = serde_json::from_str(&serde_json::to_string(&record()).unwrap()).unwrap();
        assert_eq!(ok, record());
    }

    #[test]
    fn per_request_latencies() {
        let r = record();
        assert!(r.succeeded());
        assert_eq!(r.ttft_s(), Some(0.5));
        assert_eq!(r.tpot_s(), Some(0.375));
        assert_eq!(r.e2e_s(), Some(1.25));
        assert_eq!(r.queue_s(), Some(0.25));
        assert_eq!(r.itl_s().collect::<Vec<_>>(), vec![0.25, 0.5]);
        assert_eq!((r.ttft_from_send_s(), r.client_lateness_s()), (None, None));
        let sent = RequestRecord { sent_s: Some(1.125), ..r };
        assert_eq!((sent.ttft_from_send_s(), sent.client_lateness_s()), (Some(0.375), Some(0.125)));
        assert_eq!(sent.ttft_from_send_s().unwrap() + sent.client_lateness_s().unwrap(), sent.ttft_s().unwrap());
        let json = serde_json::to_string(&sent).unwrap();
        assert!(json.contains("\"sent_s\":1.125"), "{json}");
        assert_eq!(serde_json::from_str::<RequestRecord>(&json).unwrap(), sent);
        assert!(!serde_json::to_string(&record()).unwrap().contains("sent_s"), "absent for the engine");
    }

    #[test]
    fn failures_and_short_outputs() {
        let mut r = record();
        r.output_len = 1;
        assert_eq!(r.tpot_s(), None);
        r.finish_s = None;
        assert!(!r.succeeded());
        assert_eq!(r.e2e_s(), None);
        let mut r = record();
        r.error = Some("out of memory".into());
        assert!(!r.succeeded());
    }

    #[test]
    fn chunks_carry_token_counts_and_old_json_still_reads() {
        let mut r = record();
        assert_eq!(r.timed_tokens().collect::<Vec<_>>(), vec![(1.5, 1), (1.75, 1), (2.25, 1)]);
        r.chunk_tokens = vec![1, 3, 1];
        r.output_len = 5;
        assert_eq!(r.timed_tokens().map(|(_, n)| n).sum::<usize>(), 5);
        assert_eq!(r.itl_s().count(), 2);
        r.requested_output_len = Some(8);
        assert!(r.stopped_short());
        assert_eq!(r.error_kind(), None);
        r.error = Some("http 500: boom: again".into());
        assert_eq!(r.error_kind(), Some("http 500"));
        r.error = Some("cancelled".into());
        assert_eq!(r.error_kind(), Some("cancelled"));
        (r.error, r.finish_s) = (None, None);
        assert_eq!(r.error_kind(), Some("unfinished"));
        r.cancelled = Some(Cancelled { by: CancelledBy::Workload, at_s: 2.0 });
        assert_eq!((r.error_kind(), r.cancelled_by(), r.succeeded()), (None, Some(CancelledBy::Workload), false));
        r.finish_s = Some(2.25);
        assert!(!r.succeeded(), "a cancelled request never completed, whatever its finish says");
        let back: RequestRecord = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(back.cancelled, r.cancelled);
        assert!(serde_json::to_string(&r).unwrap().contains(r#""cancelled":{"by":"workload","at_s":2.0}"#));
        let json = serde_json::to_string(&record()).unwrap();
        assert!(!json.contains("chunk_tokens") && !json.contains("requested_output_len"), "{json}");
        assert_eq!(serde_json::from_str::<RequestRecord>(&json).unwrap(), record());
    }

    /// A saved run reloads bit for bit, so a summary recomputed from it equals the live one
    /// (serde_json's default float parser misses some values by an ulp: `float_roundtrip`).
    #[test]
    fn timestamps_reload_bit_for_bit() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let times: Vec<f64> = (0..20_000)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                // Wall-clock-like seconds with every mantissa bit in use.
                (state >> 11) as f64 / (1u64 << 53) as f64 * 1.0e4
            })
            .collect();
        let r = RequestRecord { token_times_s: times, ..record() };
        let back: RequestRecord = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        let differ =
            r.token_times_s.iter().zip(&back.token_times_s).filter(|(a, b)| a.to_bits() != b.to_bits()).count();
        assert_eq!(differ, 0, "{differ} of 20,000 timestamps came back changed");
    }
}
