//! Raw benchmark data, recorded as it happens and aggregated later by pure functions.
//! Every time is in seconds from the benchmark start, taken from the token stream itself.

use serde::{Deserialize, Serialize};

/// One request's life: when it arrived, was first scheduled, produced each token, finished.
/// Failures are data: a request with `error` set or without `finish_s` counts as failed and
/// is left out of the latency statistics.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RequestRecord {
    pub id: u64,
    pub arrival_s: f64,
    /// First time the scheduler put it in a batch.
    pub scheduled_s: Option<f64>,
    pub first_token_s: Option<f64>,
    /// Every output token, in order; the first equals `first_token_s`.
    pub token_times_s: Vec<f64>,
    pub finish_s: Option<f64>,
    pub prompt_len: usize,
    /// Output tokens actually generated.
    pub output_len: usize,
    pub preemptions: u32,
    pub error: Option<String>,
}

impl RequestRecord {
    pub fn succeeded(&self) -> bool {
        self.error.is_none() && self.finish_s.is_some()
    }

    /// Time to first token: first token − arrival.
    pub fn ttft_s(&self) -> Option<f64> {
        Some(self.first_token_s? - self.arrival_s)
    }

    /// Time per output token after the first: (finish − first token) / (output_len − 1),
    /// defined only for more than one output token.
    pub fn tpot_s(&self) -> Option<f64> {
        if self.output_len < 2 {
            return None;
        }
        Some((self.finish_s? - self.first_token_s?) / (self.output_len - 1) as f64)
    }

    /// End-to-end latency: finish − arrival.
    pub fn e2e_s(&self) -> Option<f64> {
        Some(self.finish_s? - self.arrival_s)
    }

    /// Time spent waiting for the scheduler: first scheduled − arrival.
    pub fn queue_s(&self) -> Option<f64> {
        Some(self.scheduled_s? - self.arrival_s)
    }

    /// Gaps between consecutive output tokens (inter-token latencies).
    pub fn itl_s(&self) -> impl Iterator<Item = f64> + '_ {
        self.token_times_s.windows(2).map(|pair| pair[1] - pair[0])
    }
}

/// The engine's state after one step (one forward pass over a batch).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepSample {
    /// Step end, seconds from the benchmark start.
    pub t_s: f64,
    pub duration_s: f64,
    pub running: usize,
    pub waiting: usize,
    /// Tokens in this step's batch: prefill chunks plus one per decoding sequence.
    pub batched_tokens: usize,
    pub kv_blocks_used: usize,
    pub kv_blocks_total: usize,
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
        }
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
}
