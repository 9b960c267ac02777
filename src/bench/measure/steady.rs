//! A run's steady state: the window in which the requests outstanding neither ramp up after the
//! start nor drain at the end, and the summary over the requests that arrived in it, beside the
//! whole run's. The rule, written once (docs/ARCHITECTURE.md, "Metrics"):
//!
//! 1. The outstanding count N: requests arrived (at their planned arrival) and not yet ended
//!    ([`RequestRecord::ended_s`]) — queued, in flight or waiting for a `--max-concurrency` slot,
//!    as [`crate::bench::measure::saturation`] counts them — as each request arrives (itself included).
//! 2. Its level L: the median of N over the arrivals of the later half of the arrival window
//!    (first to last arrival), which a ramp-up shorter than half the run does not reach.
//! 3. The window opens at the first arrival that finds N at L or above (the queue has filled to
//!    its level: the ramp-up is over) and closes at the last arrival (after it nothing arrives
//!    and N only drains).
//! 4. Steady when the window holds at least [`MIN_FIT_REQUESTS`] arrivals and the queue did not
//!    grow: the run is not saturated ([`Load::of`]: TTFT did not grow across the arrivals) and the
//!    least-squares rise of N across the window is under [`MIN_RISE`] requests or under
//!    [`GROWTH_OF_MEAN`] of its mean (the saturation stop's share). Otherwise the run never
//!    reached a steady state, and says why.

use serde::{Deserialize, Serialize};

use crate::bench::base::lang::Lang;
use crate::bench::base::stats::stats;
use crate::bench::measure::metrics::{summarize, throughput_bucket_s, BenchmarkMetrics, Slo};
use crate::bench::measure::saturation::{slope, Load, GROWTH_OF_MEAN, MIN_FIT_REQUESTS};
use crate::bench::record::phases::shifted;
use crate::bench::record::raw::{RequestRecord, StepSample};

/// A rise across the window of fewer requests than this is noise, whatever the mean.
pub const MIN_RISE: f64 = 2.0;

/// The steady window of a run ([`SteadyState::of`]).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SteadyState {
    /// The window, seconds on the run's clock: from the end of the ramp-up to the last arrival.
    pub from_s: f64,
    pub to_s: f64,
    /// The outstanding count's level (L): the median of N over the later half of the arrivals.
    pub level: f64,
    /// Requests that arrived in the window.
    pub requests: usize,
    /// Why the run never reached a steady state, in English; absent when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub never: Option<String>,
    /// The same reason as data, for each language's wording (absent in results saved before it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub never_why: Option<NoSteadyState>,
    /// The summary over the requests that arrived in the window, on a clock from `from_s` (its
    /// duration runs to their last finish); absent when the run never reached a steady state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<Box<BenchmarkMetrics>>,
}

/// Why a run never reached a steady state.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum NoSteadyState {
    /// Too few requests arrived after the ramp-up (from `from_s`) to judge.
    TooFew { requests: usize, from_s: f64 },
    /// The requests outstanding rose by `rise` from `from_s` to the last arrival at `last_s`.
    QueueGrew { rise: f64, from_s: f64, last_s: f64 },
}

impl NoSteadyState {
    pub fn text(&self, lang: Lang) -> String {
        match (self, lang) {
            (NoSteadyState::TooFew { requests, from_s }, Lang::En) => format!(
                "only {requests} requests arrived after the ramp-up (at {from_s:.2} s); a steady state needs \
                 {MIN_FIT_REQUESTS}"
            ),
            (NoSteadyState::TooFew { requests, from_s }, Lang::Zh) => {
                format!("爬升之后（{from_s:.2} 秒起）只到达了 {requests} 个请求；判断稳态需要 {MIN_FIT_REQUESTS} 个")
            }
            (NoSteadyState::QueueGrew { rise, from_s, last_s }, Lang::En) => format!(
                "the queue grew while requests arrived (by {rise:.0} from {from_s:.2} s to the last arrival at \
                 {last_s:.2} s): the target did not keep up with the rate"
            ),
            (NoSteadyState::QueueGrew { rise, from_s, last_s }, Lang::Zh) => format!(
                "请求到达期间队列在增长（从 {from_s:.2} 秒到最后一次到达的 {last_s:.2} 秒增加了 {rise:.0} 个）：\
                 目标跟不上该速率"
            ),
        }
    }
}

impl SteadyState {
    /// Why the run never reached a steady state, in `lang` (the English text of results saved
    /// before the reason was kept as data); `None` when it did.
    pub fn never_text(&self, lang: Lang) -> Option<String> {
        match &self.never_why {
            Some(why) => Some(why.text(lang)),
            None => self.never.clone(),
        }
    }

    pub fn reached(&self) -> bool {
        self.never.is_none()
    }

    /// The steady window of a run's records (those never sent, without an arrival, left out) and
    /// the summary over it with `slo`; `None` for fewer than two arrivals or a burst (every
    /// request at once: there is no window to hold steady in).
    pub fn of(records: &[RequestRecord], steps: &[StepSample], slo: Option<&Slo>) -> Option<SteadyState> {
        let mut sent: Vec<&RequestRecord> = records.iter().filter(|r| r.arrival_s.is_finite()).collect();
        sent.sort_by(|a, b| a.arrival_s.total_cmp(&b.arrival_s));
        let (first, last) = (sent.first()?.arrival_s, sent.last()?.arrival_s);
        if sent.len() < 2 || last <= first {
            return None;
        }
        let mut ends: Vec<f64> = sent.iter().map(|r| r.ended_s().unwrap_or(r.arrival_s)).collect();
        ends.sort_by(f64::total_cmp);
        // N as request i arrives: those arrived up to it (ties included) less those ended by then.
        let outstanding: Vec<f64> = sent
            .iter()
            .map(|r| {
                let arrived = sent.partition_point(|s| s.arrival_s <= r.arrival_s);
                let ended = ends.partition_point(|&e| e <= r.arrival_s);
                arrived.saturating_sub(ended) as f64
            })
            .collect();
        let middle = first + (last - first) / 2.0;
        let later: Vec<f64> =
            sent.iter().zip(&outstanding).filter(|(r, _)| r.arrival_s >= middle).map(|(_, &n)| n).collect();
        let level = stats(&later).p50;
        let opens = outstanding.iter().position(|&n| n >= level).unwrap_or(0);
        let from_s = sent[opens].arrival_s;
        let window = &sent[opens..];
        let mut steady = SteadyState {
            from_s,
            to_s: last,
            level,
            requests: window.len(),
            never: None,
            never_why: None,
            summary: None,
        };
        // Saturated: the project's one verdict ([`Load::of`]) over the whole run, or the count
        // still rising across the window by the saturation stop's share of its mean.
        let samples: Vec<(f64, f64)> =
            window.iter().map(|r| r.arrival_s).zip(outstanding[opens..].iter().copied()).collect();
        let mean = samples.iter().map(|s| s.1).sum::<f64>() / samples.len() as f64;
        let rise = slope(&samples) * (last - from_s);
        let growing = Load::of(records).and_then(|l| l.saturated) == Some(true)
            || (rise >= MIN_RISE && rise >= GROWTH_OF_MEAN * mean);
        steady.never_why = if window.len() < MIN_FIT_REQUESTS {
            Some(NoSteadyState::TooFew { requests: window.len(), from_s })
        } else if growing {
            Some(NoSteadyState::QueueGrew { rise, from_s, last_s: last })
        } else {
            None
        };
        steady.never = steady.never_why.as_ref().map(|why| why.text(Lang::En));
        if steady.reached() {
            let (kept, kept_steps) = shifted(window, steps, from_s);
            let summary = summarize(&kept, &kept_steps, slo, throughput_bucket_s(&kept, &kept_steps));
            steady.summary = Some(Box::new(summary));
        }
        Some(steady)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::measure::saturation::tests::queue_run;

    #[test]
    fn a_queue_that_fills_then_holds_is_steady_after_it_fills() {
        // 8 slots of 4 s each at 1 request/s: the outstanding count climbs for ~4 s to ~4, then
        // holds; the window opens as it reaches its level and closes at the last arrival.
        let records = queue_run(120, 1.0, 8, 4.0);
        let steady = SteadyState::of(&records, &[], None).unwrap();
        assert!(steady.reached(), "{steady:?}");
        assert!(steady.from_s > 1.0 && steady.from_s < 12.0, "{steady:?}");
        let last = records.iter().map(|r| r.arrival_s).fold(0.0, f64::max);
        assert_eq!(steady.to_s, last);
        let summary = steady.summary.as_ref().unwrap();
        assert_eq!(summary.num_requests, steady.requests);
        assert!(steady.requests < 120 && steady.requests > 80, "{steady:?}");
    }

    #[test]
    fn a_growing_queue_or_a_short_run_never_reaches_a_steady_state() {
        let over = SteadyState::of(&queue_run(200, 20.0, 8, 1.0), &[], None).unwrap();
        assert!(!over.reached() && over.summary.is_none(), "{over:?}");
        assert!(over.never.as_deref().unwrap().contains("the queue grew"), "{over:?}");
        let short = SteadyState::of(&queue_run(5, 1.0, 8, 1.0), &[], None).unwrap();
        assert!(short.never.as_deref().unwrap().contains("needs 8"), "{short:?}");
        // The same reasons in Chinese, from the reason kept as data.
        assert!(over.never_text(Lang::Zh).unwrap().contains("队列在增长"), "{over:?}");
        assert!(short.never_text(Lang::Zh).unwrap().contains("需要 8 个"), "{short:?}");
        assert!(SteadyState::of(&queue_run(8, f64::INFINITY, 8, 1.0), &[], None).is_none(), "a burst");
    }
}
