//! The load the client delivered, checked against the plan. The planned arrivals are the plan;
//! the send times (`sent_s`, stamped as each HTTP request begins) are what the target was offered.
//! From them, per run against a server (the engine has no send):
//!
//! - the achieved rate, (sends − 1) / (last send − first send), with a 95% interval from the gaps'
//!   spread (the mean gap's standard error is CV · mean / √gaps, so the rate's relative half-width
//!   is 1.96 · CV / √gaps);
//! - the inter-arrival coefficient of variation (std / mean of the gaps: 1 for Poisson, 1/√shape
//!   for gamma, 0 for constant arrivals);
//! - a goodness-of-fit test of the gaps against the requested process — Kolmogorov–Smirnov
//!   against the exponential (Poisson) or gamma distribution with the requested rate (and shape),
//!   fully specified, rejected when its p-value is below [`ALPHA`]; not run for constant arrivals
//!   (the CV says it), traces, or under `--max-concurrency` (the slots shape the sends by design);
//! - the send lateness (send − planned arrival) at p50, p99 and max, and beyond the plan: send −
//!   due, where a request is due at its planned arrival or, under `--max-concurrency` c, at the end
//!   that freed its slot if later (the arrival loop releases in arrival order, so the k-th send
//!   is due once k − c + 1 of the requests sent before it ended: [`RequestRecord::ended_s`]);
//! - the most requests in flight at once (sent, not ended);
//! - send → response headers at p50, p99 and max: the wait after the send that the send times
//!   cannot show (a browser's connection queue among it), and which TTFT from send includes;
//! - bent: the client sent more than 1% of the requests more than [`LATE_BOUND_MS`] after they were
//!   due (p99 beyond the plan above the bound): the load offered was the client's, not the plan's.
//!   A wait for a `--max-concurrency` slot is the plan, not a fault.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use serde::{Deserialize, Serialize};

use crate::bench::base::stats::{gamma_p, kolmogorov_q, nan_as_null, stats};
use crate::bench::record::raw::RequestRecord;
use crate::bench::traffic::workload::{Arrival, WorkloadSpec};

/// The goodness-of-fit test's significance level.
pub const ALPHA: f64 = 0.01;
/// A send later than this after it was due bends the load (at p99).
pub const LATE_BOUND_MS: f64 = 10.0;
/// The 97.5th percentile of the standard normal: a two-sided 95% interval.
const Z_95: f64 = 1.959_964;

/// What the client delivered ([`DeliveredLoad::of`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeliveredLoad {
    /// Requests sent.
    pub sends: usize,
    /// The rate asked for; `null` for a trace (its recorded times are the plan) or a burst.
    #[serde(with = "nan_as_null")]
    pub requested_rps: f64,
    #[serde(with = "nan_as_null")]
    pub achieved_rps: f64,
    /// The achieved rate's 95% interval.
    #[serde(with = "nan_as_null")]
    pub achieved_rps_low: f64,
    #[serde(with = "nan_as_null")]
    pub achieved_rps_high: f64,
    /// Std / mean of the gaps between consecutive sends.
    #[serde(with = "nan_as_null")]
    pub interarrival_cv: f64,
    /// The requested process's: 1 for Poisson, 1/√burstiness for gamma, 0 for constant; absent
    /// for a trace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_cv: Option<f64>,
    /// The goodness-of-fit test of the gaps; absent where none is run (see the module).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fit: Option<FitTest>,
    /// Send − planned arrival.
    pub lateness_ms: Lateness,
    /// Send − due (the planned arrival, or the end that freed a `--max-concurrency` slot).
    pub beyond_plan_ms: Lateness,
    pub peak_in_flight: usize,
    /// Send → response headers, over every request whose headers arrived: what a send time
    /// stamped before the request reaches the wire cannot show — a browser's connection queue
    /// (six per HTTP/1.1 host), connecting, and any wait of the server's before it answers (a
    /// server may send its headers only once it admits the request). Absent where no client
    /// recorded it (results saved before it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers_ms: Option<Lateness>,
    /// The cap asked for, part of the plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrency: Option<usize>,
    /// [`LATE_BOUND_MS`], as it was when the run was checked.
    pub bound_ms: f64,
    /// The client bent the load: p99 of `beyond_plan_ms` above `bound_ms`.
    pub bent: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Lateness {
    #[serde(with = "nan_as_null")]
    pub p50: f64,
    #[serde(with = "nan_as_null")]
    pub p99: f64,
    #[serde(with = "nan_as_null")]
    pub max: f64,
}

impl Lateness {
    fn of(values_ms: &[f64]) -> Lateness {
        let s = stats(values_ms);
        Lateness { p50: s.p50, p99: s.p99, max: values_ms.iter().copied().fold(f64::NAN, f64::max) }
    }
}

/// A goodness-of-fit test of the send gaps against the requested process.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FitTest {
    /// What was tested against what, in words.
    pub test: String,
    /// The largest distance between the gaps' empirical distribution and the model's (D).
    pub statistic: f64,
    pub p_value: f64,
    pub alpha: f64,
    pub rejected: bool,
}

impl DeliveredLoad {
    /// The load `records` delivered against what `spec` asked; `None` without two sends (the
    /// engine has none) or for a closed loop (it sends as slots free: no plan to bend). Later
    /// turns of a conversation are left out: the plan dates only the first.
    pub fn of(records: &[RequestRecord], spec: &WorkloadSpec) -> Option<DeliveredLoad> {
        if !spec.arrival.open_loop() {
            return None;
        }
        let mut sent: Vec<&RequestRecord> = records
            .iter()
            .filter(|r| r.sent_s.is_some() && r.arrival_s.is_finite() && r.turn.unwrap_or(0) == 0)
            .collect();
        if sent.len() < 2 {
            return None;
        }
        sent.sort_by(|a, b| a.sent_s.unwrap_or(f64::NAN).total_cmp(&b.sent_s.unwrap_or(f64::NAN)));
        let sends: Vec<f64> = sent.iter().filter_map(|r| r.sent_s).collect();
        let gaps: Vec<f64> = sends.windows(2).map(|w| w[1] - w[0]).collect();
        let gap = stats(&gaps);
        let cv = gap.std / gap.mean;
        let achieved = 1.0 / gap.mean;
        let half = Z_95 * cv / (gaps.len() as f64).sqrt();
        let finite_rate = spec.rate.is_finite() && spec.arrival != Arrival::Trace;
        let expected_cv = match spec.arrival {
            Arrival::Poisson => Some(1.0),
            Arrival::Gamma => Some(1.0 / spec.burstiness.sqrt()),
            Arrival::Constant => Some(0.0),
            _ => None,
        };
        let fit = (finite_rate && spec.max_concurrency.is_none()).then(|| fit_test(&gaps, spec)).flatten();
        let late: Vec<f64> = sent.iter().filter_map(|r| Some((r.sent_s? - r.arrival_s) * 1000.0)).collect();
        let due = due_times(&sent, spec.max_concurrency);
        let beyond: Vec<f64> = sent.iter().zip(&due).filter_map(|(r, d)| Some((r.sent_s? - d) * 1000.0)).collect();
        let beyond_plan_ms = Lateness::of(&beyond);
        Some(DeliveredLoad {
            sends: sent.len(),
            requested_rps: if finite_rate { spec.rate } else { f64::NAN },
            achieved_rps: achieved,
            achieved_rps_low: achieved / (1.0 + half),
            achieved_rps_high: if half < 1.0 { achieved / (1.0 - half) } else { f64::INFINITY },
            interarrival_cv: cv,
            expected_cv,
            fit,
            lateness_ms: Lateness::of(&late),
            bent: beyond_plan_ms.p99 > LATE_BOUND_MS,
            beyond_plan_ms,
            peak_in_flight: peak_in_flight(&sent),
            headers_ms: {
                let waits: Vec<f64> =
                    records.iter().filter_map(|r| Some((r.headers_s? - r.sent_s?) * 1000.0)).collect();
                (!waits.is_empty()).then(|| Lateness::of(&waits))
            },
            max_concurrency: spec.max_concurrency,
            bound_ms: LATE_BOUND_MS,
        })
    }

    /// Whether the load passed its check: not bent, and its fit (where tested) not rejected.
    pub fn passes(&self) -> bool {
        !self.bent && !self.fit.as_ref().is_some_and(|f| f.rejected)
    }
}

/// When each request (in send order) was due: its planned arrival, or under a cap of `slots` the
/// end that freed its slot if later — for the k-th send, the (k − slots + 1)-th earliest end among
/// the requests sent before it.
fn due_times(sent: &[&RequestRecord], slots: Option<usize>) -> Vec<f64> {
    let Some(slots) = slots.map(|n| n.max(1)) else {
        return sent.iter().map(|r| r.arrival_s).collect();
    };
    let end = |r: &RequestRecord| r.ended_s().unwrap_or(r.arrival_s);
    // The earliest ends so far in a max-heap (`freed`, as many as slots have been freed), the
    // rest in a min-heap (`later`): the latest of `freed` is the end that freed the latest slot.
    let (mut freed, mut later) = (BinaryHeap::new(), BinaryHeap::new());
    let mut due = Vec::with_capacity(sent.len());
    for (k, r) in sent.iter().enumerate() {
        if k > 0 {
            later.push(Reverse(Ordered(end(sent[k - 1]))));
        }
        // Ends among the earlier requests the k-th send waited for.
        let needed = (k + 1).saturating_sub(slots);
        while freed.len() < needed {
            let Some(Reverse(e)) = later.pop() else { break };
            freed.push(e);
        }
        // An end that came in earlier than one already counted swaps places with it.
        while let (Some(&Ordered(top)), Some(&Reverse(Ordered(next)))) = (freed.peek(), later.peek()) {
            if next >= top {
                break;
            }
            let (Some(top), Some(Reverse(next))) = (freed.pop(), later.pop()) else { break };
            freed.push(next);
            later.push(Reverse(top));
        }
        let slot_free = if needed > 0 { freed.peek().map_or(f64::NEG_INFINITY, |e| e.0) } else { f64::NEG_INFINITY };
        due.push(r.arrival_s.max(slot_free));
    }
    due
}

/// A float ordered totally, for the heaps.
#[derive(Clone, Copy, PartialEq)]
struct Ordered(f64);

impl Eq for Ordered {}

impl PartialOrd for Ordered {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Ordered {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// The most requests sent and not yet ended at any instant (an end before a send at the same time).
fn peak_in_flight(sent: &[&RequestRecord]) -> usize {
    let mut events: Vec<(f64, i32)> = Vec::with_capacity(2 * sent.len());
    for r in sent {
        let Some(sent_s) = r.sent_s else { continue };
        events.push((sent_s, 1));
        events.push((r.ended_s().unwrap_or(sent_s).max(sent_s), -1));
    }
    events.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let mut now = 0i32;
    events
        .iter()
        .map(|&(_, step)| {
            now += step;
            now
        })
        .max()
        .unwrap_or(0)
        .max(0) as usize
}

/// Kolmogorov–Smirnov of `gaps` against the requested process's gap distribution (its parameters
/// given, not fitted); `None` for a process with no continuous distribution to test (constant).
fn fit_test(gaps: &[f64], spec: &WorkloadSpec) -> Option<FitTest> {
    let rate = spec.rate;
    let (name, cdf): (String, Box<dyn Fn(f64) -> f64>) = match spec.arrival {
        Arrival::Poisson => {
            (format!("exponential gaps, rate {rate}/s"), Box::new(move |x: f64| 1.0 - (-rate * x).exp()))
        }
        Arrival::Gamma => {
            let shape = spec.burstiness;
            let scale = 1.0 / (rate * shape);
            (format!("gamma gaps, rate {rate}/s, shape {shape}"), Box::new(move |x: f64| gamma_p(shape, x / scale)))
        }
        _ => return None,
    };
    let mut sorted = gaps.to_vec();
    sorted.sort_by(f64::total_cmp);
    let m = sorted.len() as f64;
    let statistic = sorted
        .iter()
        .enumerate()
        .map(|(i, &x)| {
            let f = cdf(x.max(0.0));
            (((i + 1) as f64 / m) - f).max(f - i as f64 / m)
        })
        .fold(0.0, f64::max);
    let p_value = kolmogorov_q((m.sqrt() + 0.12 + 0.11 / m.sqrt()) * statistic);
    Some(FitTest {
        test: format!("Kolmogorov–Smirnov, {} send gaps against {name}", sorted.len()),
        statistic,
        p_value,
        alpha: ALPHA,
        rejected: p_value < ALPHA,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::traffic::workload::plan;
    use crate::bench::traffic::workload::tests::spec;

    /// Records sent at `sends` (arrivals planned at `arrivals`), each streaming for `lasts_s`.
    fn records(arrivals: &[f64], sends: &[f64], lasts_s: f64) -> Vec<RequestRecord> {
        arrivals
            .iter()
            .zip(sends)
            .enumerate()
            .map(|(i, (&a, &s))| RequestRecord {
                id: i as u64,
                arrival_s: a,
                sent_s: Some(s),
                scheduled_s: Some(s),
                first_token_s: Some(s + lasts_s / 2.0),
                token_times_s: vec![s + lasts_s / 2.0, s + lasts_s],
                finish_s: Some(s + lasts_s),
                output_len: 2,
                ..RequestRecord::default()
            })
            .collect()
    }

    #[test]
    fn a_clean_poisson_run_passes_and_constant_arrivals_presented_as_poisson_are_rejected() {
        let poisson = spec(Arrival::Poisson, 20.0, 400);
        let arrivals: Vec<f64> = plan(&poisson).unwrap().iter().map(|p| p.arrival_s.unwrap()).collect();
        let clean = DeliveredLoad::of(&records(&arrivals, &arrivals, 0.05), &poisson).unwrap();
        assert!(clean.passes(), "{clean:?}");
        let fit = clean.fit.as_ref().unwrap();
        assert!(fit.p_value > ALPHA && fit.alpha == 0.01, "{fit:?}");
        assert!((clean.interarrival_cv - 1.0).abs() < 0.15, "{clean:?}");
        assert!(clean.achieved_rps_low < 20.0 && clean.achieved_rps_high > 20.0, "{clean:?}");
        assert_eq!((clean.lateness_ms.max, clean.bent), (0.0, false));
        // The same count at the same mean rate, evenly spaced, said to be Poisson: D = 1 − e⁻¹ ≈ 0.63.
        let even: Vec<f64> = (0..400).map(|i| i as f64 / 20.0).collect();
        let constant = DeliveredLoad::of(&records(&even, &even, 0.05), &poisson).unwrap();
        let fit = constant.fit.as_ref().unwrap();
        assert!(fit.rejected && fit.p_value < 1e-6, "{fit:?}");
        assert!(constant.interarrival_cv < 1e-6 && !constant.passes());
        // Gamma: the plan's own draws fit their shape.
        let gamma = WorkloadSpec { burstiness: 4.0, ..spec(Arrival::Gamma, 20.0, 400) };
        let arrivals: Vec<f64> = plan(&gamma).unwrap().iter().map(|p| p.arrival_s.unwrap()).collect();
        let drawn = DeliveredLoad::of(&records(&arrivals, &arrivals, 0.05), &gamma).unwrap();
        assert!(!drawn.fit.as_ref().unwrap().rejected, "{drawn:?}");
        assert!((drawn.interarrival_cv - 0.5).abs() < 0.1 && drawn.expected_cv == Some(0.5), "{drawn:?}");
    }

    #[test]
    fn a_connection_queue_hidden_from_the_send_times_shows_in_the_time_to_headers() {
        // Twelve requests sent on time, 0.1 s apart, through six connections: the first six answer
        // their headers in 5 ms; the last six wait in the browser's queue until the first six
        // end (at 1.0 to 1.5 s) and only then reach the server.
        let s = spec(Arrival::Constant, 10.0, 12);
        let arrivals: Vec<f64> = (0..12).map(|i| i as f64 / 10.0).collect();
        let mut runs = records(&arrivals, &arrivals, 2.0);
        for (i, r) in runs.iter_mut().enumerate() {
            let sent = r.sent_s.unwrap();
            r.headers_s = Some(if i < 6 { sent + 0.005 } else { 1.0 + (i - 6) as f64 / 10.0 + 0.005 });
        }
        let d = DeliveredLoad::of(&runs, &s).unwrap();
        assert_eq!((d.lateness_ms.max, d.bent), (0.0, false), "the sends were on time: {d:?}");
        let headers = d.headers_ms.as_ref().expect("time to headers");
        // 5 ms for the first six; 405 ms for each of the last six (sent at 0.6–1.1 s).
        assert!((headers.max - 405.0).abs() < 1e-6 && (headers.p50 - 205.0).abs() < 1e-6, "{headers:?}");
        assert!(DeliveredLoad::of(&records(&arrivals, &arrivals, 2.0), &s).unwrap().headers_ms.is_none());
    }

    #[test]
    fn a_held_back_client_bends_the_load_and_slot_waits_do_not() {
        let s = spec(Arrival::Constant, 10.0, 50);
        let arrivals: Vec<f64> = (0..50).map(|i| i as f64 / 10.0).collect();
        // Every fifth request held back 40 ms.
        let held: Vec<f64> =
            arrivals.iter().enumerate().map(|(i, &a)| a + if i % 5 == 0 { 0.04 } else { 0.0 }).collect();
        let bent = DeliveredLoad::of(&records(&arrivals, &held, 0.05), &s).unwrap();
        assert!(bent.bent && (bent.beyond_plan_ms.max - 40.0).abs() < 1e-6, "{bent:?}");
        // One slot, 0.25 s a request against 0.1 s gaps: each waits for the one before to end,
        // sent exactly then — the plan, not a fault — though far later than its arrival.
        let capped = WorkloadSpec { max_concurrency: Some(1), ..s.clone() };
        let sends: Vec<f64> = (0..50).map(|i| i as f64 * 0.25).collect();
        let waited = DeliveredLoad::of(&records(&arrivals, &sends, 0.25), &capped).unwrap();
        assert!(waited.lateness_ms.max > 7000.0, "{waited:?}");
        assert!(waited.beyond_plan_ms.max.abs() < 1e-6 && !waited.bent, "{waited:?}");
        assert_eq!(waited.peak_in_flight, 1);
        assert!(waited.fit.is_none(), "a cap shapes the sends by design");
        // Two slots, the same requests: each is due when the one two before it ended.
        let two = WorkloadSpec { max_concurrency: Some(2), ..s };
        let sends: Vec<f64> = (0..50).map(|i| (i / 2) as f64 * 0.25 + if i % 2 == 1 { 0.1 } else { 0.0 }).collect();
        let due = due_times(&records(&arrivals, &sends, 0.25).iter().collect::<Vec<_>>(), two.max_concurrency);
        assert!((due[2] - 0.25).abs() < 1e-9 && (due[3] - 0.35).abs() < 1e-9, "{:?}", &due[..4]);
    }
}
