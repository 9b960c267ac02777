//! Whether an open-loop rate can be sustained — one model of saturation, used by the report's
//! diagnosis, the sweep's knee and the early stop.
//!
//! When the target finishes requests more slowly than they arrive, the requests outstanding (due
//! and not yet finished: queued at the target, in flight, or waiting for a `--max-concurrency`
//! slot) grow for as long as requests arrive, at the offered rate less the capacity, and each
//! request waits for all those before it: a request arriving `t` seconds into the run waits about
//! `t · (offered − capacity) / capacity` longer than the first. A finite run drains its queue at
//! the end, so the growth is looked for across the arrivals, never over the whole run's time.
//!
//! - After a run, [`Load::of`] its records: the least-squares slope of TTFT against arrival time
//!   over the completed requests ([`Load::ttft_growth`], seconds of TTFT per second of arrivals;
//!   `offered / capacity − 1` when saturated, ~0 when not, however long the requests are). It
//!   needs no finish inside the arrival window, so a short burst beyond capacity is seen too.
//!   Saturated when it is at least [`TTFT_GROWTH`] and the TTFT it adds across the arrivals at
//!   least doubles the first arrivals' TTFT. Beside it, for the report: the offered rate, the rate
//!   served, the outstanding count's growth, the share of TTFT spent waiting.
//! - During a run, [`Detector`] fits a line to the outstanding count over the later half of the
//!   run so far, and stops the rate when it rises by at least [`MIN_GROWTH`] requests and by at
//!   least [`GROWTH_OF_MEAN`] of the window's mean, at two checks in a row (GuideLLM's
//!   over-saturation constraint is the same idea). Stricter, because it ends a run on a guess.

use serde::{Deserialize, Serialize};

use crate::bench::base::lang::Lang;
use crate::bench::base::stats::{nan_as_null, stats};
use crate::bench::record::raw::RequestRecord;

/// Saturated: TTFT grows by at least this many seconds per second of arrivals (offered at least
/// 1.2× the capacity)…
pub const TTFT_GROWTH: f64 = 0.2;
/// Completed requests with a TTFT needed to fit its growth; fewer: not judged.
pub const MIN_FIT_REQUESTS: usize = 8;

/// An open-loop run's load against what the target served ([`Load::of`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Load {
    /// Requests that arrived per second, over the arrival window (first to last arrival);
    /// infinite (`null` in JSON, NaN read back) when every request arrived at once.
    #[serde(with = "nan_as_null")]
    pub offered_rps: f64,
    /// Completed requests per second from the first arrival to the last finish: the capacity,
    /// when the target was busy throughout (as it is when saturated); below it otherwise.
    #[serde(with = "nan_as_null")]
    pub served_rps: f64,
    /// Seconds from the first arrival to the last.
    pub arrival_window_s: f64,
    /// Seconds of TTFT added per second of arrivals (least squares over the completed requests);
    /// `null` when not judged.
    #[serde(with = "nan_as_null")]
    pub ttft_growth: f64,
    /// Growth of the outstanding count (arrived, not finished) sampled at each arrival, requests
    /// per second over the arrival window; `null` for fewer than [`MIN_FIT_REQUESTS`] arrivals.
    #[serde(with = "nan_as_null")]
    pub growth_rps: f64,
    /// Requests outstanding at the last arrival.
    pub outstanding_at_last_arrival: usize,
    /// Median share of TTFT spent waiting to be scheduled (the engine's; a server's queue is not
    /// visible to a client: `None`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_share: Option<f64>,
    /// `None`: not judged (every request arrived at once, or too few completed).
    pub saturated: Option<bool>,
    /// The rate the workload asked for, where its arrivals were drawn at one (set by the session;
    /// absent for closed loops, traces, and results saved before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asked_rps: Option<f64>,
}

impl Load {
    /// The load of an open-loop run, from its records (those never sent, with no arrival, left
    /// out); `None` for fewer than two arrivals.
    pub fn of(records: &[RequestRecord]) -> Option<Load> {
        let sent: Vec<&RequestRecord> = records.iter().filter(|r| r.arrival_s.is_finite()).collect();
        let mut arrivals: Vec<f64> = sent.iter().map(|r| r.arrival_s).collect();
        arrivals.sort_by(f64::total_cmp);
        if arrivals.len() < 2 {
            return None;
        }
        let (first, last) = (arrivals[0], arrivals[arrivals.len() - 1]);
        let window_s = last - first;
        // A request ends when it finishes or is cancelled (it is then no longer outstanding).
        let mut finishes: Vec<f64> = sent.iter().filter_map(|r| r.finish_s.or(r.cancelled.map(|c| c.at_s))).collect();
        finishes.sort_by(f64::total_cmp);
        let completed = sent.iter().filter(|r| r.succeeded()).count();
        let last_finish = finishes.last().copied().unwrap_or(f64::NAN);
        let served_rps = completed as f64 / (last_finish - first);
        let offered_rps = if window_s > 0.0 { (arrivals.len() - 1) as f64 / window_s } else { f64::INFINITY };
        let outstanding_at = |t: f64| {
            let arrived = arrivals.partition_point(|&a| a <= t);
            let finished = finishes.partition_point(|&f| f <= t);
            arrived.saturating_sub(finished)
        };
        let judged = window_s > 0.0;
        let outstanding: Vec<(f64, f64)> = arrivals.iter().map(|&a| (a, outstanding_at(a) as f64)).collect();
        let growth_rps = if judged && outstanding.len() >= MIN_FIT_REQUESTS { slope(&outstanding) } else { f64::NAN };
        let mut ttfts: Vec<(f64, f64)> =
            sent.iter().filter(|r| r.succeeded()).filter_map(|r| Some((r.arrival_s, r.ttft_s()?))).collect();
        ttfts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let ttft_growth = if judged && ttfts.len() >= MIN_FIT_REQUESTS { slope(&ttfts) } else { f64::NAN };
        let saturated = ttft_growth.is_finite().then(|| {
            let early = stats(&ttfts[..ttfts.len() / 4].iter().map(|p| p.1).collect::<Vec<_>>()).p50;
            ttft_growth >= TTFT_GROWTH && ttft_growth * window_s >= early
        });
        let shares = sent
            .iter()
            .filter(|r| r.succeeded() && r.sent_s.is_none())
            .filter_map(|r| Some(r.queue_s()? / r.ttft_s()?))
            .filter(|share| share.is_finite())
            .collect::<Vec<f64>>();
        let waiting_share = (!shares.is_empty()).then(|| stats(&shares).p50);
        Some(Load {
            offered_rps,
            served_rps,
            arrival_window_s: window_s,
            ttft_growth,
            growth_rps,
            outstanding_at_last_arrival: outstanding_at(last),
            waiting_share,
            saturated,
            asked_rps: None,
        })
    }

    /// Why the offered rate is not the one asked, when they differ by more than 5%: a finite
    /// random draw of arrivals spans more or less than its mean; `None` otherwise.
    pub fn draw_note(&self, lang: Lang) -> Option<String> {
        let asked = self.asked_rps.filter(|a| a.is_finite() && *a > 0.0)?;
        let offered = self.offered_rps;
        if !offered.is_finite() || (offered / asked - 1.0).abs() <= 0.05 {
            return None;
        }
        let gaps = (offered * self.arrival_window_s).round();
        let (window, mean) = (self.arrival_window_s, gaps / asked);
        Some(match lang {
            Lang::En => format!(
                "offered {offered:.2} req/s against the {asked:.2} asked: {gaps:.0} gaps drawn at random spanned {window:.1} s where their mean is {mean:.1} s (a finite draw; a longer run comes closer)"
            ),
            Lang::Zh => format!(
                "到达 {offered:.2} 请求/秒，要求 {asked:.2}：随机抽取的 {gaps:.0} 个间隔共 {window:.1} 秒，\
                 均值应为 {mean:.1} 秒（有限次抽样；运行越长越接近）"
            ),
        })
    }

    /// How many times what the target served the offered load was.
    pub fn overload(&self) -> f64 {
        self.offered_rps / self.served_rps
    }
}

/// Least-squares slope of y over t; NaN when t does not vary.
pub(crate) fn slope(samples: &[(f64, f64)]) -> f64 {
    let n = samples.len() as f64;
    let (mean_t, mean_y) = samples.iter().fold((0.0, 0.0), |(a, b), &(t, y)| (a + t / n, b + y / n));
    let (mut cov, mut var) = (0.0, 0.0);
    for &(t, y) in samples {
        cov += (t - mean_t) * (y - mean_y);
        var += (t - mean_t) * (t - mean_t);
    }
    if var > 0.0 {
        cov / var
    } else {
        f64::NAN
    }
}

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
        let slope = slope(&window);
        if !slope.is_finite() {
            return None;
        }
        let mean_y = window.iter().map(|&(_, y)| y).sum::<f64>() / window.len() as f64;
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
pub(crate) mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// A recorded open-loop run: `n` Poisson arrivals at `rate`/s served first come, first served
    /// by `slots` servers taking `service_s` each (capacity `slots / service_s` requests/s).
    pub(crate) fn queue_run(n: usize, rate: f64, slots: usize, service_s: f64) -> Vec<RequestRecord> {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
        let mut free_at = vec![0.0f64; slots];
        let mut t = 0.0;
        (0..n)
            .map(|id| {
                if rate.is_finite() && id > 0 {
                    t += -(1.0 - rng.random::<f64>()).ln() / rate;
                }
                let slot = (0..slots).min_by(|&a, &b| free_at[a].total_cmp(&free_at[b])).unwrap();
                let start = free_at[slot].max(t);
                free_at[slot] = start + service_s;
                let first = start + 0.2 * service_s;
                RequestRecord {
                    id: id as u64,
                    arrival_s: t,
                    scheduled_s: Some(start),
                    first_token_s: Some(first),
                    token_times_s: vec![first, start + service_s],
                    finish_s: Some(start + service_s),
                    prompt_len: 16,
                    output_len: 2,
                    ..RequestRecord::default()
                }
            })
            .collect()
    }

    /// 32 Poisson arrivals asked at 4 req/s whose 31 gaps happened to span 9.84 s (mean 7.75 s):
    /// offered 3.15 req/s, said with why; within 5% of the asked rate, or with none asked, nothing.
    #[test]
    fn an_offered_rate_off_the_asked_one_is_explained_as_a_finite_draw() {
        let load = |offered_rps: f64, asked_rps: Option<f64>| Load {
            offered_rps,
            served_rps: 3.0,
            arrival_window_s: 31.0 / offered_rps,
            ttft_growth: 0.0,
            growth_rps: 0.0,
            outstanding_at_last_arrival: 1,
            waiting_share: None,
            saturated: Some(false),
            asked_rps,
        };
        let note = load(3.15, Some(4.0)).draw_note(Lang::En).expect("off by 21%");
        assert_eq!(
            note,
            "offered 3.15 req/s against the 4.00 asked: 31 gaps drawn at random spanned 9.8 s where their mean is \
             7.8 s (a finite draw; a longer run comes closer)"
        );
        assert!(load(3.15, Some(4.0)).draw_note(Lang::Zh).unwrap().contains("有限次抽样"));
        assert_eq!(load(3.9, Some(4.0)).draw_note(Lang::En), None, "within 5%");
        assert_eq!(load(3.15, None).draw_note(Lang::En), None, "none asked");
    }

    #[test]
    fn a_run_far_beyond_capacity_is_saturated_and_one_well_below_is_not() {
        // Capacity 8/s. Offered 50/s (the case: 64 requests): the queue grows by ~42/s.
        let over = Load::of(&queue_run(64, 50.0, 8, 1.0)).unwrap();
        assert_eq!(over.saturated, Some(true), "{over:?}");
        assert!((over.served_rps - 8.0).abs() < 1.0, "{over:?}");
        assert!(over.overload() > 4.0 && over.growth_rps > 30.0, "{over:?}");
        // offered / capacity − 1 = 50 / 8 − 1.
        assert!((over.ttft_growth - 5.25).abs() < 1.5, "{over:?}");
        assert!(over.waiting_share.unwrap() > 0.8, "{over:?}");
        // Offered 2/s and 6/s: a queue that holds steady, however long the run.
        for rate in [2.0, 6.0] {
            let under = Load::of(&queue_run(200, rate, 8, 1.0)).unwrap();
            assert_eq!(under.saturated, Some(false), "{rate}: {under:?}");
            assert!((under.offered_rps / rate - 1.0).abs() < 0.25, "{under:?}");
        }
        // Just beyond (10/s against 8/s) over a long run: saturated.
        assert_eq!(Load::of(&queue_run(400, 10.0, 8, 1.0)).unwrap().saturated, Some(true));
    }

    #[test]
    fn a_queue_still_filling_up_or_a_burst_is_not_called_saturated() {
        // Requests longer than the arrival window (8/s for 3 s, 2 s each, capacity 16/s): the
        // outstanding count rises until the first finish, then holds.
        let filling = Load::of(&queue_run(24, 8.0, 32, 2.0)).unwrap();
        assert_ne!(filling.saturated, Some(true), "{filling:?}");
        // Everything at once: no arrival window, nothing to judge.
        let burst = Load::of(&queue_run(32, f64::INFINITY, 8, 1.0)).unwrap();
        assert_eq!((burst.saturated, burst.offered_rps), (None, f64::INFINITY), "{burst:?}");
        assert!(Load::of(&queue_run(1, 1.0, 1, 1.0)).is_none());
    }

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
