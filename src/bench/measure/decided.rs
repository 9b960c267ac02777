//! A run's SLO attainment decided while it runs, so that a `--rate max` trial ends as soon as its
//! answer is known. As each request ends, a [`Judge`] counts it within every SLO or over one
//! (failures over; requests the workload cancelled not counted). At a few fixed looks — once a
//! quarter, a half and three quarters of the run's requests are counted ([`LOOKS`]) — it asks
//! LoadGen's early-stopping test ([`crate::bench::base::confidence::decide`]) whether "at least a
//! share p of requests meet the SLOs" is already refuted or already supported:
//!
//! - **Missed**, at any look: that many over among those counted would be that unlikely were the
//!   share over exactly 1 − p.
//! - **Met**, from the half-way look on ([`MET_FROM_LOOK`]): a rate beyond the target's capacity
//!   builds its queue over the run, and its first requests, sent into an empty one, would pass on
//!   their own. The saturation detector watches the same later half.
//!
//! A test asked again after every request would be wrong more often than its level says (each
//! look is another chance to cross a bound by luck), so it is asked at the looks only, each at
//! 1 − (1 − 99%) / 3: the three together are wrong at most 1% of the time (Bonferroni). The test
//! takes requests as independent; in a queue they are not (a burst delays its neighbours), which
//! the fixed looks and the share of the run they wait for temper, not remove.
//!
//! Between the bounds the run goes on (to its end, where the search counts its steady window as
//! for any run).

use serde::{Deserialize, Serialize};

use crate::bench::base::confidence::{decide, Decision, EARLY_STOPPING_CONFIDENCE};
use crate::bench::base::lang::Lang;
use crate::bench::measure::metrics::Slo;
use crate::bench::record::raw::RequestRecord;

/// The looks: shares of the run's requests counted.
pub const LOOKS: [f64; 3] = [0.25, 0.5, 0.75];
/// A run may be decided met from this look on.
pub const MET_FROM_LOOK: f64 = 0.5;

/// Each look's confidence: the run's [`EARLY_STOPPING_CONFIDENCE`] split over the [`LOOKS`].
pub fn look_confidence() -> f64 {
    1.0 - (1.0 - EARLY_STOPPING_CONFIDENCE) / LOOKS.len() as f64
}

/// What decides a run: its SLOs, and the share of requests that must meet them all.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DecideRule {
    pub slo: Slo,
    pub attainment: f64,
}

/// A run stopped once decided: the verdict, on how many requests, how many of them over.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Decided {
    pub met: bool,
    /// Requests ended and counted when it was decided, and those over an SLO (or failed).
    pub seen: usize,
    pub over: usize,
    /// Seconds from the run's start.
    pub at_s: f64,
    /// The share the rule asked for.
    pub attainment: f64,
}

impl Decided {
    pub fn text(&self, lang: Lang) -> String {
        let (seen, over, p, at) = (self.seen, self.over, self.attainment * 100.0, self.at_s);
        match (self.met, lang) {
            (true, Lang::En) => {
                format!(
                    "met, decided at {at:.1} s: {over} of {seen} requests over the SLOs support {p}% at 99% confidence"
                )
            }
            (false, Lang::En) => {
                format!("missed, decided at {at:.1} s: {over} of {seen} requests over the SLOs refute {p}% at 99% confidence")
            }
            (true, Lang::Zh) => {
                format!("达标，于 {at:.1} s 判定：{seen} 个请求中 {over} 个超出 SLO，在 99% 置信度下支持 {p}%")
            }
            (false, Lang::Zh) => {
                format!("未达标，于 {at:.1} s 判定：{seen} 个请求中 {over} 个超出 SLO，在 99% 置信度下否定 {p}%")
            }
        }
    }
}

/// The requests of one run counted as they end ([`DecideRule`]'s verdict, once there is one).
#[derive(Clone, Debug)]
pub struct Judge {
    rule: DecideRule,
    seen: usize,
    over: usize,
    /// Looks taken so far.
    looked: usize,
}

impl Judge {
    pub fn new(rule: DecideRule) -> Judge {
        Judge { rule, seen: 0, over: 0, looked: 0 }
    }

    /// Request `r` ended: within every SLO or not; one the workload cancelled is not counted.
    pub fn end(&mut self, r: &RequestRecord) {
        if r.cancelled.is_some() {
            return;
        }
        self.seen += 1;
        self.over += usize::from(!self.rule.slo.met_by(r));
    }

    /// The verdict at `at_s` of a run of `planned` requests, when the requests counted reach a
    /// look not yet taken (several passed at once are one look, the latest); `None` between looks
    /// and while undecided.
    pub fn decided(&mut self, planned: usize, at_s: f64) -> Option<Decided> {
        let reached = LOOKS.iter().take_while(|&&share| self.seen as f64 >= share * planned as f64).count();
        if reached <= self.looked {
            return None;
        }
        self.looked = reached;
        let met = match decide(self.seen, self.over, self.rule.attainment, look_confidence()) {
            Decision::Missed => false,
            Decision::Met if LOOKS[reached - 1] >= MET_FROM_LOOK => true,
            Decision::Met | Decision::Undecided { .. } => return None,
        };
        Some(Decided { met, seen: self.seen, over: self.over, at_s, attainment: self.rule.attainment })
    }
}

#[cfg(test)]
mod tests {
    use crate::bench::measure::decided::*;

    fn record(ttft_s: f64) -> RequestRecord {
        RequestRecord {
            arrival_s: 0.0,
            sent_s: Some(0.0),
            first_token_s: Some(ttft_s),
            token_times_s: vec![ttft_s],
            finish_s: Some(ttft_s),
            output_len: 1,
            ..RequestRecord::default()
        }
    }

    /// At p90, each look at 1 − 0.01/3: with none over, 55 requests support it (0.9^55 < 0.0033 <
    /// 0.9^54). A run of 200: the quarter look (50 counted, none over) decides nothing, the
    /// half-way one (100) decides met. 9 over among the first 50 (P(B ≥ 9) for B ~ Binomial(50,
    /// 0.1) is 0.058) refute nothing at the first look; 23 among 100 at the second do (1.1e-4);
    /// no look is taken twice.
    #[test]
    fn a_run_is_decided_at_its_looks_met_from_half_way_missed_at_any() {
        let rule = DecideRule { slo: Slo { ttft_ms: Some(100.0), ..Slo::default() }, attainment: 0.9 };
        let judged = |within: usize, over: usize, judge: &mut Judge| {
            (0..within).for_each(|_| judge.end(&record(0.05)));
            (0..over).for_each(|_| judge.end(&record(0.5)));
        };
        let mut judge = Judge::new(rule.clone());
        judged(49, 0, &mut judge);
        assert_eq!(judge.decided(200, 1.0), None, "before the first look");
        judged(1, 0, &mut judge);
        assert_eq!(judge.decided(200, 1.0), None, "the first look cannot decide met");
        judged(49, 0, &mut judge);
        assert_eq!(judge.decided(200, 1.0), None, "between looks");
        judged(1, 0, &mut judge);
        let met = judge.decided(200, 2.0).expect("decided at half-way");
        assert!(met.met && (met.seen, met.over) == (100, 0), "{met:?}");

        let mut judge = Judge::new(rule);
        judged(41, 9, &mut judge);
        assert_eq!(judge.decided(200, 1.0), None, "9 of 50 refute nothing");
        judged(36, 14, &mut judge);
        let mut cancelled = record(0.5);
        cancelled.cancelled = Some(crate::bench::record::raw::Cancelled {
            by: crate::bench::traffic::cancel::CancelledBy::Workload,
            at_s: 0.1,
        });
        judge.end(&cancelled);
        let missed = judge.decided(200, 3.0).expect("decided");
        assert!(
            !missed.met && (missed.seen, missed.over) == (100, 23),
            "a cancelled request is not counted: {missed:?}"
        );
        assert_eq!(judge.decided(200, 3.0), None, "no look is taken twice");
    }
}
