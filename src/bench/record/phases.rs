//! A run's measured phase: requests at its start (the warm-up: caches filling, a server's lazy
//! set-up, the queue building up) and at its end (the cool-down: the queue draining, fewer
//! requests sharing each step) are sent and kept but left out of the summary, as GuideLLM's
//! `--warmup`/`--cooldown` and AIPerf's warm-up requests do.
//!
//! - Warm-up: the first `warmup_requests` requests by arrival, and every request arriving within
//!   `warmup_s` of the run's start.
//! - Cool-down: every request arriving within `cooldown_s` of the last arrival.
//!
//! The summary is then over the measured requests alone, on a clock that starts at the first
//! measured arrival (so throughput is over the measured window, not diluted by the warm-up), with
//! the engine's steps from that instant on. Every request stays in the results with its phase, so
//! the summary can be recomputed from them ([`measured`]).

use serde::{Deserialize, Serialize};

use crate::bench::base::lang::Lang;
use crate::bench::base::rules::Rule;
use crate::bench::record::raw::{RequestRecord, StepSample};
use crate::error::{Error, Result};

/// Which requests of a run are left out of its summary. The default leaves none out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Phases {
    pub warmup_requests: usize,
    pub warmup_s: f64,
    pub cooldown_s: f64,
}

/// Why a request was left out of the summary.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    Warmup,
    Cooldown,
}

/// How many requests each phase left out of a summary.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Excluded {
    pub warmup: usize,
    pub cooldown: usize,
    /// Seconds from the run's start to the first measured arrival: where the summary's clock starts.
    pub measured_from_s: f64,
}

impl Phases {
    pub fn is_none(&self) -> bool {
        self.warmup_requests == 0 && self.warmup_s == 0.0 && self.cooldown_s == 0.0
    }

    /// Refuses negative or non-finite seconds, and a warm-up that would leave nothing of
    /// `num_requests` to measure.
    pub fn check(&self, num_requests: usize) -> Result<()> {
        self.rule(num_requests).map_or(Ok(()), |rule| Err(Error::Invalid(rule.text(Lang::En))))
    }

    /// The rule these phases break for a run of `num_requests`, if any.
    pub fn rule(&self, num_requests: usize) -> Option<Rule> {
        for (flag, value) in [("--warmup-s", self.warmup_s), ("--cooldown-s", self.cooldown_s)] {
            if !(value.is_finite() && value >= 0.0) {
                return Some(Rule::PhaseSeconds { flag, value });
            }
        }
        (self.warmup_requests >= num_requests && self.warmup_requests > 0)
            .then_some(Rule::WarmupLeavesNone { warmup: self.warmup_requests, requests: num_requests })
    }

    /// Sets each record's phase (records of requests never sent, without an arrival, stay unset).
    pub fn mark(&self, records: &mut [RequestRecord]) {
        if self.is_none() {
            return;
        }
        let mut order: Vec<usize> = (0..records.len()).filter(|&i| records[i].arrival_s.is_finite()).collect();
        order.sort_by(|&a, &b| records[a].arrival_s.total_cmp(&records[b].arrival_s));
        let last = order.last().map_or(0.0, |&i| records[i].arrival_s);
        for (rank, &i) in order.iter().enumerate() {
            let arrival = records[i].arrival_s;
            records[i].phase = if rank < self.warmup_requests || arrival < self.warmup_s {
                Some(Phase::Warmup)
            } else if self.cooldown_s > 0.0 && arrival > last - self.cooldown_s {
                Some(Phase::Cooldown)
            } else {
                None
            };
        }
    }
}

/// The measured requests and the steps from the first measured arrival on, both on a clock that
/// starts there, and what was left out; `None` when no request is left out.
pub fn measured(
    records: &[RequestRecord],
    steps: &[StepSample],
) -> Option<(Vec<RequestRecord>, Vec<StepSample>, Excluded)> {
    let count = |p: Phase| records.iter().filter(|r| r.phase == Some(p)).count();
    let (warmup, cooldown) = (count(Phase::Warmup), count(Phase::Cooldown));
    if warmup + cooldown == 0 {
        return None;
    }
    let kept: Vec<&RequestRecord> = records.iter().filter(|r| r.phase.is_none()).collect();
    let start = kept.iter().map(|r| r.arrival_s).fold(f64::INFINITY, f64::min);
    let start = if start.is_finite() { start } else { 0.0 };
    let (requests, steps) = shifted(&kept, steps, start);
    Some((requests, steps, Excluded { warmup, cooldown, measured_from_s: start }))
}

/// `kept` and the steps from `start` on, on a clock that starts at `start` (a summary over part of
/// a run: the measured phase here, the steady state in the measure floor's `steady`).
pub(crate) fn shifted(
    kept: &[&RequestRecord],
    steps: &[StepSample],
    start: f64,
) -> (Vec<RequestRecord>, Vec<StepSample>) {
    let shift = |t: f64| t - start;
    let requests = kept
        .iter()
        .map(|r| RequestRecord {
            arrival_s: shift(r.arrival_s),
            scheduled_s: r.scheduled_s.map(shift),
            sent_s: r.sent_s.map(shift),
            headers_s: r.headers_s.map(shift),
            first_token_s: r.first_token_s.map(shift),
            first_answer_s: r.first_answer_s.map(shift),
            token_times_s: r.token_times_s.iter().map(|&t| shift(t)).collect(),
            finish_s: r.finish_s.map(shift),
            stream_end_s: r.stream_end_s.map(shift),
            preempted_s: r.preempted_s.iter().map(|&t| shift(t)).collect(),
            ..(*r).clone()
        })
        .collect();
    let steps =
        steps.iter().filter(|s| s.t_s >= start).map(|s| StepSample { t_s: shift(s.t_s), ..s.clone() }).collect();
    (requests, steps)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: u64, arrival: f64) -> RequestRecord {
        let tokens = vec![arrival + 0.1, arrival + 0.2];
        RequestRecord {
            id,
            arrival_s: arrival,
            scheduled_s: Some(arrival),
            first_token_s: Some(tokens[0]),
            finish_s: Some(tokens[1]),
            token_times_s: tokens,
            output_len: 2,
            ..RequestRecord::default()
        }
    }

    #[test]
    fn warm_up_and_cool_down_are_marked_by_rank_and_time() {
        // Arrivals 0, 1, …, 9 s (shuffled ids). By hand: two warm-up requests by count, and also
        // those before 3 s (0, 1, 2); a 1.5 s cool-down before the last arrival at 9 s: 8 and 9.
        let mut records: Vec<RequestRecord> = (0..10).rev().map(|i| record(i, i as f64)).collect();
        let phases = Phases { warmup_requests: 2, warmup_s: 3.0, cooldown_s: 1.5 };
        phases.mark(&mut records);
        let phase_of = |arrival: f64| records.iter().find(|r| r.arrival_s == arrival).unwrap().phase;
        for a in [0.0, 1.0, 2.0] {
            assert_eq!(phase_of(a), Some(Phase::Warmup), "{a}");
        }
        for a in [3.0, 4.0, 7.0] {
            assert_eq!(phase_of(a), None, "{a}");
        }
        for a in [8.0, 9.0] {
            assert_eq!(phase_of(a), Some(Phase::Cooldown), "{a}");
        }
        let steps: Vec<StepSample> =
            (0..20).map(|i| StepSample { t_s: i as f64 * 0.5, ..Default::default() }).collect();
        let (kept, kept_steps, excluded) = measured(&records, &steps).unwrap();
        assert_eq!((excluded.warmup, excluded.cooldown, excluded.measured_from_s), (3, 2, 3.0));
        assert_eq!(kept.len(), 5);
        // The clock starts at the first measured arrival (3 s): its request arrives at 0.
        let mut arrivals: Vec<f64> = kept.iter().map(|r| r.arrival_s).collect();
        arrivals.sort_by(f64::total_cmp);
        assert_eq!(arrivals, [0.0, 1.0, 2.0, 3.0, 4.0]);
        assert!(kept.iter().all(|r| (r.first_token_s.unwrap() - r.arrival_s - 0.1).abs() < 1e-12));
        assert_eq!(kept_steps.len(), 14, "steps from 3 s on");
        assert_eq!(kept_steps[0].t_s, 0.0);
        // Nothing left out: no measured view.
        let mut all: Vec<RequestRecord> = (0..3).map(|i| record(i, i as f64)).collect();
        Phases::default().mark(&mut all);
        assert!(measured(&all, &steps).is_none());
    }

    #[test]
    fn a_warm_up_that_leaves_nothing_is_refused() {
        assert!(Phases { warmup_requests: 5, ..Phases::default() }.check(5).is_err());
        assert!(Phases { warmup_s: -1.0, ..Phases::default() }.check(5).is_err());
        assert!(Phases { cooldown_s: f64::NAN, ..Phases::default() }.check(5).is_err());
        assert!(Phases { warmup_requests: 4, warmup_s: 2.0, cooldown_s: 1.0 }.check(5).is_ok());
    }
}
