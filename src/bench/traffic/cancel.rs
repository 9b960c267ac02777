//! Cancellations as part of a workload: users abort requests (the page's Stop, a closed chat), and
//! that is what tests a target's freeing of its KV cache and its preemption. A share of the
//! requests is aborted a while after each is sent ([`Cancellations`]); which ones and when is
//! drawn from the workload's seed, per request, so a run made again aborts the same requests at
//! the same delays. A request that ends this way is recorded as cancelled, with who cancelled it
//! ([`CancelledBy`]): not failed, and not in the latency figures.

use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::bench::base::rules::Rule;
use crate::bench::base::streams::{stream, STREAM_CANCELS};
use crate::limits;

/// Who ended a request before it finished.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CancelledBy {
    /// The workload's own [`Cancellations`]: a planned abort, part of what is measured.
    Workload,
    /// The user stopped the run (the page's Stop, Ctrl-C).
    User,
    /// The saturation stop ended the run (what was in flight would only drain a queue).
    SaturationStop,
    /// A `--rate max` trial ended once its SLO attainment was decided.
    Decided,
}

impl CancelledBy {
    /// The name in JSON and in the report's counts.
    pub fn name(self) -> &'static str {
        match self {
            CancelledBy::Workload => "workload",
            CancelledBy::User => "user",
            CancelledBy::SaturationStop => "saturation_stop",
            CancelledBy::Decided => "decided",
        }
    }
}

/// A share of requests aborted a delay after each is sent: `share` of them (each request drawn
/// independently, so the count is binomial around `share × N`), each after a delay drawn
/// uniformly from `after_s` (one value: exactly that).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Cancellations {
    pub share: f64,
    pub after_s: DelayRange,
}

/// Seconds, from `min_s` to `max_s` (equal: a fixed delay).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct DelayRange {
    pub min_s: f64,
    pub max_s: f64,
}

impl DelayRange {
    /// Parses milliseconds, "50" or "50:200", into seconds; the rule broken, if any.
    pub fn parse_ms(text: &str) -> Result<DelayRange, Rule> {
        let bad = || Rule::CancelAfter { text: text.to_string() };
        let number = |part: &str| part.trim().parse::<f64>().ok().filter(|ms| ms.is_finite() && *ms >= 0.0);
        let (min_ms, max_ms) = match text.split_once(':') {
            Some((min, max)) => (number(min).ok_or_else(bad)?, number(max).ok_or_else(bad)?),
            None => {
                let ms = number(text).ok_or_else(bad)?;
                (ms, ms)
            }
        };
        let range = DelayRange { min_s: min_ms / 1000.0, max_s: max_ms / 1000.0 };
        range.rule().map_or(Ok(range), |_| Err(bad()))
    }

    fn rule(&self) -> Option<Rule> {
        let ok = self.min_s.is_finite()
            && self.min_s >= 0.0
            && self.min_s <= self.max_s
            && self.max_s <= limits::MAX_SCHEDULE_S;
        (!ok).then(|| Rule::CancelAfter { text: format!("{}:{}", self.min_s * 1000.0, self.max_s * 1000.0) })
    }

    /// As typed: "50" or "50:200" milliseconds.
    pub fn show_ms(&self) -> String {
        let ms = |s: f64| limits::show(s * 1000.0);
        if self.min_s == self.max_s {
            ms(self.min_s)
        } else {
            format!("{}:{}", ms(self.min_s), ms(self.max_s))
        }
    }
}

impl Cancellations {
    /// The rules the pair breaks, if any: a share in (0, 1], a delay range in order and bounded.
    pub fn rule(&self) -> Option<Rule> {
        if !(self.share > 0.0 && self.share <= 1.0) {
            return Some(Rule::CancelShare { share: self.share });
        }
        self.after_s.rule()
    }

    /// When request `id` of a workload seeded with `seed` is aborted, seconds after it is sent;
    /// `None` for a request left to finish. Drawn from the request's own stream, so the choice does
    /// not depend on the plan's order or on other requests.
    pub fn after_s(&self, seed: u64, id: u64) -> Option<f64> {
        let mut rng = stream(seed, STREAM_CANCELS, id);
        let chosen = rng.random::<f64>() < self.share;
        let DelayRange { min_s, max_s } = self.after_s;
        let delay_s = if max_s > min_s { rng.random_range(min_s..=max_s) } else { min_s };
        chosen.then_some(delay_s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_parse_as_milliseconds_and_bad_ones_are_refused() {
        assert_eq!(DelayRange::parse_ms("50"), Ok(DelayRange { min_s: 0.05, max_s: 0.05 }));
        assert_eq!(DelayRange::parse_ms(" 50 : 200 "), Ok(DelayRange { min_s: 0.05, max_s: 0.2 }));
        for bad in ["", "x", "-5", "200:50", "1:inf", "NaN", "1e12"] {
            assert!(matches!(DelayRange::parse_ms(bad), Err(Rule::CancelAfter { .. })), "{bad}");
        }
        assert_eq!(DelayRange { min_s: 0.05, max_s: 0.2 }.show_ms(), "50:200");
    }

    #[test]
    fn shares_outside_zero_to_one_are_refused() {
        let after_s = DelayRange { min_s: 0.05, max_s: 0.05 };
        for share in [0.0, -0.1, 1.01, f64::NAN] {
            assert!(matches!(Cancellations { share, after_s }.rule(), Some(Rule::CancelShare { .. })), "{share}");
        }
        assert_eq!(Cancellations { share: 1.0, after_s }.rule(), None);
    }

    /// A quarter of 4,000 requests: within 4 standard deviations of 1,000 (σ ≈ 27.4); every delay
    /// within its range, a fixed one exact; the same seed, the same draws; another seed, others.
    #[test]
    fn the_share_and_delays_are_drawn_per_request_from_the_seed() {
        let c = Cancellations { share: 0.25, after_s: DelayRange { min_s: 0.05, max_s: 0.2 } };
        let drawn: Vec<Option<f64>> = (0..4000).map(|id| c.after_s(7, id)).collect();
        let chosen = drawn.iter().flatten().count();
        assert!((chosen as f64 - 1000.0).abs() < 4.0 * 27.4, "{chosen}");
        assert!(drawn.iter().flatten().all(|&d| (0.05..=0.2).contains(&d)));
        assert_eq!(drawn, (0..4000).map(|id| c.after_s(7, id)).collect::<Vec<_>>());
        assert_ne!(drawn, (0..4000).map(|id| c.after_s(8, id)).collect::<Vec<_>>());
        let fixed = Cancellations { after_s: DelayRange { min_s: 0.05, max_s: 0.05 }, ..c };
        assert!((0..400).filter_map(|id| fixed.after_s(7, id)).all(|d| d == 0.05));
        let all = Cancellations { share: 1.0, ..c };
        assert!((0..400).all(|id| all.after_s(7, id).is_some()));
    }
}
