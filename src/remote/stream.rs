//! One streamed request's record, built from what arrives and when: the planned arrival and the
//! send time are both kept (TTFT from arrival includes the client's lateness in sending; TTFT
//! from send does not — `RequestRecord::ttft_s`, `ttft_from_send_s`), the first token is the
//! first chunk that carries one, each token-carrying chunk is one ITL entry (with its token
//! count), and the finish is the last token chunk. Pure: the caller supplies the times.
//!
//! Bounded whatever the server sends: a stream past the request's token limit fails
//! ([`bounds::token_limit`]), and `usage` is checked against what streamed before it is believed.

use crate::bench::RequestRecord;
use crate::remote::bounds;
use crate::remote::openai::{parse_chunk, RequestError, Usage};
use crate::remote::sse::{SseEvent, SseParser};

pub struct StreamRecorder {
    record: RequestRecord,
    parser: SseParser,
    events: Vec<SseEvent>,
    /// Tokens per token-carrying chunk, as counted from the stream.
    chunk_tokens: Vec<u32>,
    /// Their sum.
    streamed_tokens: usize,
    /// The request's `max_tokens`, and the most tokens its stream may carry.
    max_tokens: Option<usize>,
    token_limit: usize,
    usage: Option<Usage>,
    finish_reason: Option<String>,
    /// `[DONE]` arrived: the answer is complete.
    done: bool,
    /// When the last bytes arrived: the time of an event the end of the body completes.
    last_receive_s: f64,
    /// When `usage` arrived.
    usage_s: f64,
    /// The answer's text, when it is kept ([`StreamRecorder::keep_reply`]).
    reply: Option<String>,
}

impl StreamRecorder {
    /// Tokens a stream may carry when the request's `max_tokens` is not known.
    pub const DEFAULT_TOKEN_LIMIT: usize = 1 << 20;

    /// A request planned to arrive at `arrival_s`; `exact_output_len` when it asks for exactly that
    /// many tokens (`ignore_eos`), so a shorter answer is reported (and a longer one bounded:
    /// see [`StreamRecorder::max_tokens`]).
    pub fn new(id: u64, arrival_s: f64, prompt_len: usize, exact_output_len: Option<usize>) -> Self {
        StreamRecorder {
            record: RequestRecord {
                id,
                arrival_s,
                prompt_len,
                requested_output_len: exact_output_len,
                ..RequestRecord::default()
            },
            parser: SseParser::new(),
            events: Vec::new(),
            chunk_tokens: Vec::new(),
            streamed_tokens: 0,
            max_tokens: exact_output_len,
            token_limit: exact_output_len.map_or(Self::DEFAULT_TOKEN_LIMIT, bounds::token_limit),
            usage: None,
            finish_reason: None,
            done: false,
            last_receive_s: f64::NAN,
            usage_s: f64::NAN,
            reply: None,
        }
    }

    /// Keep the answer's text (a conversation sends it back in its next turn): [`end_with_reply`]
    /// returns it. A reply past [`bounds::MAX_REPLY_BYTES`] fails the request.
    ///
    /// [`end_with_reply`]: StreamRecorder::end_with_reply
    pub fn keep_reply(mut self) -> Self {
        self.reply = Some(String::new());
        self
    }

    /// The request asked for at most `max_tokens`: a stream that carries more than
    /// [`bounds::token_limit`] of it fails, and a `usage` beyond it is not believed.
    pub fn max_tokens(mut self, max_tokens: usize) -> Self {
        self.max_tokens = Some(max_tokens);
        self.token_limit = bounds::token_limit(max_tokens);
        self
    }

    /// The answer came from `url` after a redirect within the endpoint's origin.
    pub fn redirected(&mut self, url: String) {
        self.record.redirected_to = Some(url);
    }

    /// The request left the client at `t_s`: its send time, also its "scheduled" time (so the
    /// record's queue time is the client's lateness, not the server's queueing).
    pub fn sent(&mut self, t_s: f64) {
        self.record.sent_s = Some(t_s);
        self.record.scheduled_s = Some(t_s);
    }

    /// The response's headers arrived at `t_s`.
    pub fn headers(&mut self, t_s: f64) {
        self.record.headers_s = Some(t_s);
    }

    /// Body bytes that arrived at `t_s`. An error ends the request; the caller passes it to [`end`].
    ///
    /// [`end`]: StreamRecorder::end
    pub fn receive(&mut self, t_s: f64, bytes: &[u8]) -> Result<(), RequestError> {
        self.last_receive_s = t_s;
        self.parser.push(bytes, &mut self.events).map_err(|e| RequestError::Malformed(e.to_string()))?;
        self.take_events(t_s)
    }

    /// `[DONE]` has arrived; the caller may stop reading.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// The body ended (`Ok`) or the request failed (`Err`: connection, timeout, HTTP status…).
    /// Tokens that arrived before a failure stay in the record; only a complete answer has a finish.
    pub fn end(self, outcome: Result<(), RequestError>) -> RequestRecord {
        self.end_with_reply(outcome).0
    }

    /// [`StreamRecorder::end`], and the answer's text when it was kept (empty otherwise).
    pub fn end_with_reply(mut self, outcome: Result<(), RequestError>) -> (RequestRecord, String) {
        let outcome = outcome.and_then(|()| self.finish_body());
        let counted: usize = self.chunk_tokens.iter().map(|&n| n as usize).sum();
        let chunks = self.chunk_tokens.len();
        let r = &mut self.record;
        r.output_len = counted;
        r.stream_end_s = Some(self.last_receive_s).filter(|t| t.is_finite());
        if self.chunk_tokens.iter().any(|&n| n != 1) {
            r.chunk_tokens = self.chunk_tokens;
        }
        if let Some(usage) = self.usage {
            r.server_prompt_len = usage.prompt_tokens;
            r.server_output_len = usage.completion_tokens;
            // Believed when it is possible: no more than the prompt (the server's count, else ours).
            r.cached_tokens = usage.cached_tokens.filter(|&c| c <= usage.prompt_tokens.unwrap_or(r.prompt_len));
        }
        match outcome {
            Ok(()) => {
                r.finish_s = r.token_times_s.last().copied();
                if let Some(said) = r.server_output_len {
                    let (taken, mismatch) = judge_usage(said, counted, chunks, self.max_tokens, self.token_limit);
                    r.output_len = taken;
                    r.usage_mismatch = mismatch;
                }
            }
            Err(RequestError::Cancelled { by, at_s }) => r.cancelled = Some(crate::bench::Cancelled { by, at_s }),
            Err(e) => r.error = Some(e.to_string()),
        }
        (self.record, self.reply.unwrap_or_default())
    }

    fn finish_body(&mut self) -> Result<(), RequestError> {
        if !self.done {
            self.parser.finish(&mut self.events).map_err(|e| RequestError::Malformed(e.to_string()))?;
            // A last event without its blank line still counts, at the time its bytes arrived.
            self.take_events(self.last_receive_s)?;
        }
        if !self.done && self.finish_reason.is_none() {
            let got = self.chunk_tokens.len();
            return Err(RequestError::ClosedEarly(format!("the body ended without [DONE] after {got} token chunks")));
        }
        if self.record.token_times_s.is_empty() {
            // Tokens that never became text (pieces of a UTF-8 character, say) stream nothing;
            // the server's count still says they were generated, all known only at the end.
            match self.usage.and_then(|u| u.completion_tokens) {
                Some(n) if n > self.token_limit => {
                    return Err(RequestError::ClosedEarly(format!(
                        "the answer carried no tokens, and its usage.completion_tokens {n} is beyond the request's \
                         limit of {}",
                        self.token_limit
                    )))
                }
                Some(n) if n > 0 => {
                    self.record.first_token_s = Some(self.usage_s);
                    self.record.token_times_s.push(self.usage_s);
                    self.chunk_tokens.push(n as u32);
                }
                _ => return Err(RequestError::ClosedEarly("the answer carried no tokens".into())),
            }
        }
        Ok(())
    }

    fn take_events(&mut self, t_s: f64) -> Result<(), RequestError> {
        for event in std::mem::take(&mut self.events) {
            if self.done {
                break; // nothing after [DONE] matters
            }
            let data = event.data.trim();
            if data == "[DONE]" {
                self.done = true;
                continue;
            }
            if event.event.as_deref() == Some("error") {
                return Err(RequestError::Server(crate::remote::openai::snippet(data)));
            }
            // A kept reply grows by the chunk's answer text, up to its bound.
            let chunk = parse_chunk(data, self.reply.as_mut())?;
            if self.reply.as_ref().is_some_and(|r| r.len() > bounds::MAX_REPLY_BYTES) {
                return Err(RequestError::TooManyTokens(format!(
                    "the reply's text passed {} bytes, more than a conversation carries into its next turn",
                    bounds::MAX_REPLY_BYTES
                )));
            }
            if chunk.tokens > 0 {
                self.streamed_tokens = self.streamed_tokens.saturating_add(chunk.tokens);
                if self.streamed_tokens > self.token_limit {
                    let asked = self.max_tokens.map_or(String::new(), |m| format!(" for max_tokens {m}"));
                    return Err(RequestError::TooManyTokens(format!(
                        "the stream carried {} tokens, past the limit of {}{asked}; the server does not stop",
                        self.streamed_tokens, self.token_limit
                    )));
                }
                if self.record.first_token_s.is_none() {
                    self.record.first_token_s = Some(t_s);
                }
                self.record.token_times_s.push(t_s);
                self.chunk_tokens.push(u32::try_from(chunk.tokens).unwrap_or(u32::MAX));
                // Thinking, then the answer (crate::bench::base::thinking): the first answer chunk
                // after reasoning is the first answer token.
                if chunk.reasoning {
                    self.record.reasoning_tokens = self.record.reasoning_tokens.saturating_add(chunk.tokens);
                } else if self.record.reasoning_tokens > 0 && self.record.first_answer_s.is_none() {
                    self.record.first_answer_s = Some(t_s);
                }
            }
            if chunk.finish_reason.is_some() {
                self.finish_reason = chunk.finish_reason;
            }
            if let Some(usage) = chunk.usage {
                self.usage = Some(usage);
                self.usage_s = t_s;
            }
        }
        Ok(())
    }
}

/// The output length of a complete answer whose `usage.completion_tokens` said `said` after
/// `counted` tokens streamed in `chunks` chunks, and what to flag. The server's count is taken
/// when it is possible: at least one token per chunk (a chunk without a per-token list is counted
/// as one, so more is possible) and within the request's limit. Otherwise the streamed count is.
/// More than was counted, when possible, is chunks of several tokens, not a disagreement; fewer
/// than the counted tokens is one (flagged, the server's count taken).
fn judge_usage(
    said: usize,
    counted: usize,
    chunks: usize,
    max_tokens: Option<usize>,
    limit: usize,
) -> (usize, Option<String>) {
    if said == counted {
        return (said, None);
    }
    let streamed = format!("{counted} tokens streamed in {chunks} chunks");
    if said < chunks || said > limit {
        let asked = max_tokens.map_or(String::new(), |m| format!(" and max_tokens {m}"));
        let why =
            format!("usage.completion_tokens {said} is impossible with {streamed}{asked}: the streamed count is used");
        (counted, Some(why))
    } else if said > counted {
        // Chunks that carried several tokens each (speculative decoding sends them so) without
        // saying how many: exactly what the server's count says happened, no disagreement.
        (said, None)
    } else {
        (said, Some(format!("usage.completion_tokens {said} differs from the {streamed}: the server's count is used")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(text: &str) -> String {
        format!("data: {{\"choices\":[{{\"index\":0,\"text\":\"{text}\",\"finish_reason\":null}}]}}\n\n")
    }

    const USAGE: &str =
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":5,\"total_tokens\":12}}\n\n";

    fn recorder() -> StreamRecorder {
        let mut r = StreamRecorder::new(3, 1.0, 6, Some(5));
        r.sent(1.25);
        r
    }

    /// A conversation keeps the answer's text, not the thinking, for its next turn; a reply past
    /// the bound fails its request instead of being cut.
    #[test]
    fn a_kept_reply_is_the_answers_text() {
        let delta =
            |field: &str, text: &str| format!("data: {{\"choices\":[{{\"delta\":{{\"{field}\":\"{text}\"}}}}]}}\n\n");
        let stream = [
            delta("reasoning_content", "Hm"),
            delta("content", "Hi"),
            delta("content", " there"),
            "data: [DONE]\n\n".into(),
        ];
        let run = |r: StreamRecorder| {
            let mut r = r;
            for (k, bytes) in stream.iter().enumerate() {
                r.receive(2.0 + k as f64, bytes.as_bytes()).unwrap();
            }
            r.end_with_reply(Ok(()))
        };
        let (record, reply) = run(StreamRecorder::new(1, 1.0, 4, None).keep_reply());
        assert_eq!((reply.as_str(), record.output_len, record.error), ("Hi there", 3, None));
        assert_eq!(run(StreamRecorder::new(1, 1.0, 4, None)).1, "", "kept only when asked");
        let mut big = StreamRecorder::new(1, 1.0, 4, None).keep_reply();
        let word = delta("content", &"x".repeat(4000));
        let failed = (0..bounds::MAX_REPLY_BYTES / 4000 + 1).find_map(|k| big.receive(k as f64, word.as_bytes()).err());
        assert!(failed.is_some_and(|e| e.to_string().contains("reply's text passed")));
    }

    /// A mock thinking model's stream: role, reasoning at 1.5 and 1.6 (one token each), then the
    /// answer at 1.9 and 2.0. By hand: TTFT 0.5 s, first answer 0.9 s after the arrival at 1.0,
    /// 2 reasoning and 2 answer tokens.
    #[test]
    fn reasoning_then_content_splits_thinking_from_the_answer() {
        let delta =
            |field: &str, text: &str| format!("data: {{\"choices\":[{{\"delta\":{{\"{field}\":\"{text}\"}}}}]}}\n\n");
        let mut r = StreamRecorder::new(3, 1.0, 6, Some(4));
        r.sent(1.25);
        r.receive(1.4, b"data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\n").unwrap();
        r.receive(1.5, delta("reasoning_content", "Let").as_bytes()).unwrap();
        r.receive(1.6, delta("reasoning_content", " me").as_bytes()).unwrap();
        r.receive(1.9, delta("content", "Hi").as_bytes()).unwrap();
        r.receive(2.0, delta("content", "!").as_bytes()).unwrap();
        r.receive(2.1, b"data: [DONE]\n\n").unwrap();
        let record = r.end(Ok(()));
        assert_eq!(record.first_token_s, Some(1.5));
        assert_eq!(record.first_answer_s, Some(1.9));
        assert_eq!((record.reasoning_tokens, record.answer_tokens()), (2, 2));
        assert!((record.ttfat_s().unwrap() - 0.9).abs() < 1e-12 && (record.ttft_s().unwrap() - 0.5).abs() < 1e-12);
    }

    #[test]
    fn timestamps_from_the_stream() {
        let mut r = recorder();
        // A role-only chunk carries no token; then tokens at 1.5, 1.75 (three in one chunk), 2.0.
        r.receive(1.4, b"data: {\"choices\":[{\"text\":\"\"}]}\n\n").unwrap();
        r.receive(1.5, chunk("a").as_bytes()).unwrap();
        let three = "data: {\"choices\":[{\"text\":\"bcd\",\"logprobs\":{\"tokens\":[\"b\",\"c\",\"d\"]}}]}\n\n";
        r.receive(1.75, three.as_bytes()).unwrap();
        let last = "data: {\"choices\":[{\"text\":\"e\",\"finish_reason\":\"length\"}]}\n\n";
        r.receive(2.0, format!("{last}{USAGE}").as_bytes()).unwrap();
        assert!(!r.is_done());
        r.receive(2.5, b"data: [DONE]\n\n").unwrap();
        assert!(r.is_done());
        let record = r.end(Ok(()));
        assert_eq!(record.token_times_s, vec![1.5, 1.75, 2.0]);
        assert_eq!(record.chunk_tokens, vec![1, 3, 1]);
        assert_eq!((record.first_token_s, record.finish_s, record.scheduled_s), (Some(1.5), Some(2.0), Some(1.25)));
        assert_eq!((record.output_len, record.server_prompt_len, record.prompt_len), (5, Some(7), 6));
        assert_eq!((record.ttft_s(), record.tpot_s(), record.e2e_s()), (Some(0.5), Some(0.125), Some(1.0)));
        assert_eq!(
            (record.sent_s, record.ttft_from_send_s(), record.client_lateness_s()),
            (Some(1.25), Some(0.25), Some(0.25))
        );
        assert_eq!(record.itl_s().collect::<Vec<_>>(), vec![0.25, 0.25]);
        assert!(record.succeeded() && !record.stopped_short());
    }

    #[test]
    fn without_usage_tokens_are_counted_and_one_per_chunk_is_implicit() {
        let mut r = recorder();
        let body = format!("{}{}data: [DONE]\n\n", chunk("a"), chunk("b"));
        r.receive(2.0, body.as_bytes()).unwrap();
        let record = r.end(Ok(()));
        assert_eq!((record.output_len, record.server_prompt_len), (2, None));
        assert!(record.chunk_tokens.is_empty() && record.stopped_short());
        assert_eq!(record.tpot_s(), Some(0.0));
    }

    #[test]
    fn finish_reason_without_done_is_complete_but_a_cut_stream_is_not() {
        let mut r = recorder();
        r.receive(1.5, chunk("a").as_bytes()).unwrap();
        r.receive(1.6, b"data: {\"choices\":[{\"text\":\"b\",\"finish_reason\":\"stop\"}]}").unwrap();
        let record = r.end(Ok(()));
        assert!(record.succeeded(), "{:?}", record.error);
        assert_eq!((record.finish_s, record.output_len), (Some(1.6), 2));

        let mut r = recorder();
        r.receive(1.5, chunk("a").as_bytes()).unwrap();
        let record = r.end(Ok(()));
        assert_eq!(
            record.error.as_deref(),
            Some("stream closed early: the body ended without [DONE] after 1 token chunks")
        );
        assert_eq!((record.first_token_s, record.finish_s, record.output_len), (Some(1.5), None, 1));
        assert_eq!(record.error_kind(), Some("stream closed early"));
    }

    #[test]
    fn failures_keep_what_arrived() {
        let mut r = recorder();
        r.receive(1.5, chunk("a").as_bytes()).unwrap();
        let err = r.receive(1.6, b"data: {oops\n\n").unwrap_err();
        let record = r.end(Err(err));
        assert!(record.error.as_deref().unwrap().starts_with("malformed SSE: a data line is not JSON"));
        assert_eq!(record.token_times_s, vec![1.5]);

        let r = recorder();
        let record = r.end(Err(RequestError::Http { status: 500, body: "boom".into() }));
        assert_eq!((record.error_kind(), record.first_token_s), (Some("http 500"), None));

        let mut r = recorder();
        let err = r.receive(1.5, b"event: error\ndata: {\"message\":\"overloaded\"}\n\n").unwrap_err();
        assert_eq!(err.to_string(), "server error: {\"message\":\"overloaded\"}");

        let mut r = recorder();
        r.receive(1.5, b"data: [DONE]\n\n").unwrap();
        assert_eq!(r.end(Ok(())).error.as_deref(), Some("stream closed early: the answer carried no tokens"));
    }

    fn with_usage(tokens: usize, completion_tokens: &str) -> RequestRecord {
        let mut r = StreamRecorder::new(0, 0.0, 4, None).max_tokens(8);
        for i in 0..tokens {
            r.receive(i as f64, chunk("a").as_bytes()).unwrap();
        }
        let usage = format!("data: {{\"choices\":[],\"usage\":{{\"completion_tokens\":{completion_tokens}}}}}\n\n");
        r.receive(9.0, format!("{usage}data: [DONE]\n\n").as_bytes()).unwrap();
        r.end(Ok(()))
    }

    #[test]
    fn usage_is_checked_against_the_stream() {
        // Agreeing: nothing to flag.
        let r = with_usage(8, "8");
        assert_eq!((r.output_len, r.server_output_len, r.usage_mismatch.clone()), (8, Some(8), None));
        // Absurd counts are recorded, flagged and not believed.
        for said in ["18446744073709551615", "0", "7", "27"] {
            let r = with_usage(8, said);
            assert!(r.succeeded(), "{said}: {:?}", r.error);
            assert_eq!(r.output_len, 8, "{said}");
            assert_eq!(r.server_output_len.map(|n| n.to_string()).as_deref(), Some(said));
            let why = r.usage_mismatch.unwrap();
            assert!(why.contains("is impossible with 8 tokens streamed in 8 chunks and max_tokens 8"), "{why}");
        }
        // More than the chunks counted, and possible (chunks that carried several tokens each, as
        // speculative decoding sends them): the server's count, and no disagreement.
        let r = with_usage(4, "8");
        assert_eq!((r.output_len, r.usage_mismatch.clone()), (8, None));
        let summary = crate::bench::summarize(&[with_usage(8, "0"), with_usage(2, "2")], &[], None, 0.25);
        assert_eq!((summary.usage_mismatch, summary.total_output_tokens), (1, 10));
        let report = crate::bench::text_report(&summary, None, crate::bench::Lang::En);
        assert!(report.contains("! 1 / 2 requests: the server's usage.completion_tokens disagrees"), "{report}");
    }

    /// The server's cached prompt tokens are kept when possible (no more than its prompt count,
    /// or ours when it gives none), and feed the report's prefix-cache hit rate over the server's
    /// prompt counts; absent, the record says nothing (`null`).
    #[test]
    fn the_servers_cached_tokens_are_kept_when_possible() {
        let cached = |usage: &str| {
            let mut r = StreamRecorder::new(0, 0.0, 10, None).max_tokens(8);
            r.receive(0.5, chunk("a").as_bytes()).unwrap();
            r.receive(1.0, format!("data: {{\"choices\":[],\"usage\":{usage}}}\n\ndata: [DONE]\n\n").as_bytes())
                .unwrap();
            r.end(Ok(()))
        };
        let details =
            |prompt: &str, c: usize| format!(r#"{{{prompt}"prompt_tokens_details":{{"cached_tokens":{c}}}}}"#);
        assert_eq!(cached(&details(r#""prompt_tokens":15,"#, 12)).cached_tokens, Some(12));
        assert_eq!(cached(&details(r#""prompt_tokens":15,"#, 16)).cached_tokens, None, "more than the prompt");
        assert_eq!(cached(&details("", 10)).cached_tokens, Some(10), "our count when the server gives none");
        assert_eq!(cached(&details("", 11)).cached_tokens, None);
        assert_eq!(cached(r#"{"prompt_tokens":15}"#).cached_tokens, None);
        let (a, b) = (cached(&details(r#""prompt_tokens":15,"#, 12)), cached(r#"{"prompt_tokens":15}"#));
        let m = crate::bench::summarize(&[a, b], &[], None, 0.25);
        assert_eq!((m.cached_prompt_tokens, m.prefix_cache_prompt_tokens), (Some(12), Some(15)));
    }

    #[test]
    fn a_stream_past_its_token_limit_fails_and_keeps_a_bounded_record() {
        let mut r = StreamRecorder::new(0, 0.0, 4, Some(3));
        let mut error = None;
        for i in 0..1000 {
            if let Err(e) = r.receive(i as f64, chunk("a").as_bytes()) {
                error = Some(e);
                break;
            }
        }
        let record = r.end(Err(error.expect("the stream is stopped")));
        assert_eq!(
            record.error.as_deref(),
            Some("too many tokens: the stream carried 20 tokens, past the limit of 19 for max_tokens 3; the server does not stop")
        );
        assert_eq!((record.token_times_s.len(), record.error_kind()), (19, Some("too many tokens")));
        // A usage with no streamed tokens is bounded the same way.
        let mut r = StreamRecorder::new(0, 0.0, 4, None).max_tokens(3);
        r.receive(1.0, b"data: {\"choices\":[],\"usage\":{\"completion_tokens\":4000000000}}\n\ndata: [DONE]\n\n")
            .unwrap();
        let record = r.end(Ok(()));
        assert!(record
            .error
            .unwrap()
            .contains("usage.completion_tokens 4000000000 is beyond the request's limit of 19"));
    }

    #[test]
    fn tokens_without_text_arrive_with_the_usage() {
        let mut r = recorder();
        let last = "data: {\"choices\":[{\"text\":\"\",\"finish_reason\":\"length\"}],\"usage\":{\"completion_tokens\":5}}\n\n";
        r.receive(2.0, last.as_bytes()).unwrap();
        r.receive(2.1, b"data: [DONE]\n\n").unwrap();
        let record = r.end(Ok(()));
        assert!(record.succeeded(), "{:?}", record.error);
        assert_eq!((record.first_token_s, record.finish_s, record.output_len), (Some(2.0), Some(2.0), 5));
        assert_eq!(record.chunk_tokens, vec![5]);
    }
}
