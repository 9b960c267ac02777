//! Whether an open-loop rate can be sustained: when the target finishes requests more slowly
//! than they arrive, the requests outstanding (due and not yet finished: queued at the target,
//! in flight, or waiting for a `--max-concurrency` slot) grow without bound, and the rest of the
//! run only measures the queue. GuideLLM stops such a run early (its over-saturation constraint
//! watches the slope of concurrent requests over a sliding window); this is the same idea, kept
//! small: after [`MIN_ELAPSED_S`], fit a least-squares line to the outstanding count over the
//! later half of the run so far, and call the rate saturated when that line rises by at least
//! [`MIN_GROWTH`] requests and by at least [`GROWTH_OF_MEAN`] of the window's mean across the
//! window, at two checks in a row. A stable queue fluctuates around a level; a growing one does
//! not come back.

use serde::{Deserialize, Serialize};

/// No verdict before this many seconds of the run.
pub const MIN_ELAPSED_S: f64 = 5.0;
/// The fitted rise across the window must be at least this many requests…
pub const MIN_GROWTH: f64 = 16.0;
/// …and at least this fraction of the window's mean outstanding count. A queue growing linearly
/// from empty rises by 2/3 of its mean over the later half of the run; a stable one by ~0.
pub const GROWTH_OF_MEAN: f64 = 0.4;

/// Why and when a rate was ended early.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Saturation {
    /// Seconds from the rate's start.
    pub at_s: f64,
    /// Requests outstanding (due, not finished) then.
    pub outstanding: usize,
    /// Fitted growth of the outstanding count, requests per second, over the window.
    pub growth_per_s: f64,
    pub window_s: f64,
    /// One line for the report.
    pub reason: String,
}

/// Feed it (time, outstanding) samples as the run goes; it answers once.
#[derive(Default)]
pub struct Detector {
    samples: Vec<(f64, f64)>,
    strikes: u32,
    /// Seconds of the run before which no verdict is given (default [`MIN_ELAPSED_S`]).
    pub min_elapsed_s: Option<f64>,
}

impl Detector {
    pub fn new() -> Detector {
        Detector::default()
    }

    /// A sample; `Some` when the rate is judged unsustainable.
    pub fn observe(&mut self, t_s: f64, outstanding: usize) -> Option<Saturation> {
        self.samples.push((t_s, outstanding as f64));
        if t_s < self.min_elapsed_s.unwrap_or(MIN_ELAPSED_S) {
            return None;
        }
        let from = t_s / 2.0;
        let window: Vec<(f64, f64)> = self.samples.iter().copied().filter(|&(t, _)| t >= from).collect();
        if window.len() < 8 {
            return None;
        }
        let n = window.len() as f64;
        let (mean_t, mean_y) = window.iter().fold((0.0, 0.0), |(a, b), &(t, y)| (a + t / n, b + y / n));
        let (mut cov, mut var) = (0.0, 0.0);
        for &(t, y) in &window {
            cov += (t - mean_t) * (y - mean_y);
            var += (t - mean_t) * (t - mean_t);
        }
        if var <= 0.0 {
            return None;
        }
        let slope = cov / var;
        let window_s = t_s - window[0].0;
        let growth = slope * window_s;
        if growth >= MIN_GROWTH && growth >= GROWTH_OF_MEAN * mean_y {
            self.strikes += 1;
        } else {
            self.strikes = 0;
        }
        // Thin the samples so a long run stays cheap: keep about 2,000.
        if self.samples.len() > 4000 {
            self.samples = self.samples.iter().copied().step_by(2).collect();
        }
        (self.strikes >= 2).then(|| Saturation {
            at_s: t_s,
            outstanding,
            growth_per_s: slope,
            window_s,
            reason: format!(
                "saturated: requests outstanding grew by {slope:.1}/s over the last {window_s:.1} s (now {outstanding}); \
                 the target cannot sustain this rate, so it was ended at {t_s:.1} s"
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_growing_queue_is_saturated_and_a_stable_one_is_not() {
        // Stable: ~20 outstanding, noisy, for a minute.
        let mut stable = Detector::new();
        for i in 0..6000 {
            let t = i as f64 * 0.01;
            let noise = ((i * 7919) % 13) as usize;
            assert_eq!(stable.observe(t, 14 + noise), None, "at {t}");
        }
        // Overloaded: 200/s arrive, 50/s finish: the queue grows by 150/s.
        let mut growing = Detector::new();
        let verdict = (0..6000).find_map(|i| {
            let t = i as f64 * 0.01;
            growing.observe(t, (150.0 * t) as usize)
        });
        let s = verdict.expect("detected");
        assert!(s.at_s >= MIN_ELAPSED_S && s.at_s < MIN_ELAPSED_S + 1.0, "{s:?}");
        assert!((s.growth_per_s - 150.0).abs() < 5.0, "{s:?}");
        assert!(s.reason.starts_with("saturated"));
        // A queue that rises then drains (a burst) is not.
        let mut burst = Detector::new();
        for i in 0..6000 {
            let t = i as f64 * 0.01;
            let y = if t < 3.0 { 100.0 * t } else { (300.0 - 100.0 * (t - 3.0)).max(5.0) };
            assert_eq!(burst.observe(t, y as usize), None, "at {t}");
        }
    }
}
