//! One distribution in a few numbers, computed as numpy does by default (which Python benchmark
//! clients commonly use): percentiles interpolate linearly between ranks ('linear'), the standard
//! deviation is the population one (`ddof=0`). Beside them, the distribution functions the
//! delivered load's goodness-of-fit test needs (the gamma CDF, the Kolmogorov tail).

use serde::{Deserialize, Serialize};

use crate::bench::base::confidence::{ln_gamma, percentile_interval, INTERVAL_LEVEL};

/// Summary of one latency distribution, in milliseconds. No values: every field NaN (written
/// as `null` in JSON) and `count` 0.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Stats {
    #[serde(with = "nan_as_null")]
    pub mean: f64,
    #[serde(with = "nan_as_null")]
    pub std: f64,
    #[serde(with = "nan_as_null")]
    pub p50: f64,
    #[serde(with = "nan_as_null")]
    pub p90: f64,
    #[serde(with = "nan_as_null")]
    pub p95: f64,
    #[serde(with = "nan_as_null")]
    pub p99: f64,
    #[serde(with = "nan_as_null", rename = "p99_9", alias = "p999")]
    pub p999: f64,
    pub count: usize,
    /// Each percentile's 95% interval from the order statistics
    /// ([`crate::bench::base::confidence::percentile_interval`]): `[low, high]`, or `null` where
    /// `count` values cannot support one (P99 needs 368). Absent without values and in results
    /// saved before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ci95: Option<Intervals>,
}

/// The 95% intervals of a [`Stats`]'s percentiles; `None` where the count cannot support one.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Intervals {
    pub p50: Option<[f64; 2]>,
    pub p90: Option<[f64; 2]>,
    pub p95: Option<[f64; 2]>,
    pub p99: Option<[f64; 2]>,
    #[serde(rename = "p99_9")]
    pub p999: Option<[f64; 2]>,
}

/// The percentiles [`Stats`] reports, as fractions, in its order.
pub const PERCENTILES: [f64; 5] = [0.5, 0.9, 0.95, 0.99, 0.999];

/// Whether `count` values support an interval for the percentile `q` (a fraction): the mark the
/// reports put beside a percentile they cannot.
pub fn supports(count: usize, q: f64) -> bool {
    percentile_interval(count, q, INTERVAL_LEVEL).is_some()
}

pub fn stats(values: &[f64]) -> Stats {
    let mut sorted = values.to_vec();
    // Values equal under the total order are the same bits: an unstable sort gives the stable
    // one's order, about twice as fast on a million (a fleet plan's summary).
    sorted.sort_unstable_by(f64::total_cmp);
    let n = sorted.len() as f64; // 0: the mean, the std and every percentile are NaN
    let mean = sorted.iter().sum::<f64>() / n;
    let variance = sorted.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
    Stats {
        mean,
        std: variance.sqrt(),
        p50: percentile(&sorted, 50.0),
        p90: percentile(&sorted, 90.0),
        p95: percentile(&sorted, 95.0),
        p99: percentile(&sorted, 99.0),
        p999: percentile(&sorted, 99.9),
        count: sorted.len(),
        ci95: intervals(&sorted),
    }
}

/// The percentiles `ps` (in percent) of `values`, as [`stats`] computes them, without the rest of
/// its figures: a bootstrap's replicates need thousands of these (`verdict::compare`), and
/// [`stats`]' order-statistic intervals cost more than the sort.
pub fn percentiles<const N: usize>(values: &[f64], ps: [f64; N]) -> [f64; N] {
    let mut sorted = values.to_vec();
    sorted.sort_unstable_by(f64::total_cmp);
    ps.map(|p| percentile(&sorted, p))
}

fn intervals(sorted: &[f64]) -> Option<Intervals> {
    if sorted.is_empty() {
        return None;
    }
    let [p50, p90, p95, p99, p999] = PERCENTILES
        .map(|q| percentile_interval(sorted.len(), q, INTERVAL_LEVEL).map(|(lo, hi)| [sorted[lo], sorted[hi]]));
    Some(Intervals { p50, p90, p95, p99, p999 })
}

/// numpy's 'linear' method: the value at fractional rank (n − 1)·p/100, interpolated.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (sorted.len() - 1) as f64 * p / 100.0;
    let (below, above) = (rank.floor() as usize, rank.ceil() as usize);
    sorted[below] + (rank - below as f64) * (sorted[above] - sorted[below])
}

/// P(K > λ) for the Kolmogorov distribution: 2 Σ (−1)^(k−1) exp(−2 k² λ²), with Stephens' small-
/// sample correction applied to λ by the caller.
pub(crate) fn kolmogorov_q(lambda: f64) -> f64 {
    if lambda < 0.2 {
        return 1.0;
    }
    let sum: f64 = (1..=100)
        .map(|k| {
            let sign = if k % 2 == 1 { 1.0 } else { -1.0 };
            sign * (-2.0 * (k * k) as f64 * lambda * lambda).exp()
        })
        .sum();
    (2.0 * sum).clamp(0.0, 1.0)
}

/// The regularised lower incomplete gamma function P(a, x) (the gamma distribution's CDF at x in
/// units of its scale): its series below a + 1, its continued fraction above.
pub(crate) fn gamma_p(a: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    let front = (-x + a * x.ln() - ln_gamma(a)).exp();
    if x < a + 1.0 {
        let (mut term, mut sum, mut n) = (1.0 / a, 1.0 / a, a);
        for _ in 0..500 {
            n += 1.0;
            term *= x / n;
            sum += term;
            if term.abs() < sum.abs() * 1e-15 {
                break;
            }
        }
        (sum * front).clamp(0.0, 1.0)
    } else {
        // Lentz's method for the continued fraction of Q(a, x).
        let tiny = 1e-300;
        let mut b = x + 1.0 - a;
        let (mut c, mut d) = (1.0 / tiny, 1.0 / b);
        let mut h = d;
        for i in 1..500 {
            let an = -(i as f64) * (i as f64 - a);
            b += 2.0;
            d = an * d + b;
            d = if d.abs() < tiny { tiny } else { d };
            c = b + an / c;
            c = if c.abs() < tiny { tiny } else { c };
            d = 1.0 / d;
            let delta = d * c;
            h *= delta;
            if (delta - 1.0).abs() < 1e-15 {
                break;
            }
        }
        (1.0 - front * h).clamp(0.0, 1.0)
    }
}

/// JSON has no NaN: written as `null`, read back as NaN.
pub(crate) mod nan_as_null {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(value: &f64, serializer: S) -> Result<S::Ok, S::Error> {
        match value.is_finite() {
            true => serializer.serialize_f64(*value),
            false => serializer.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<f64, D::Error> {
        Ok(Option::<f64>::deserialize(deserializer)?.unwrap_or(f64::NAN))
    }
}

/// The smallest of 1, 2, 5 × 10ⁿ at or above `x` (x > 0), for axis steps.
pub fn nice_step(x: f64) -> f64 {
    if !(x.is_finite() && x > 0.0) {
        return 1.0;
    }
    let decade = 10f64.powf(x.log10().floor());
    [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * decade).find(|&b| b >= x * (1.0 - 1e-12)).unwrap_or(10.0 * decade)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn percentiles_and_std_match_numpy() {
        // np.percentile([1,2,3,4,10], [50,90,95,99,99.9]) -> 3, 7.6, 8.8, 9.76, 9.976; np.std -> sqrt(10)
        let s = stats(&[10.0, 1.0, 4.0, 3.0, 2.0]);
        let expected = [(s.mean, 4.0), (s.p50, 3.0), (s.p90, 7.6), (s.p95, 8.8), (s.p99, 9.76), (s.p999, 9.976)];
        for (got, want) in expected {
            assert!(close(got, want), "{got} != {want}");
        }
        assert!(close(s.std, 10f64.sqrt()));
        assert_eq!(s.count, 5);
        let one = stats(&[7.0]);
        assert_eq!((one.p50, one.p999, one.std), (7.0, 7.0, 0.0));
    }

    #[test]
    fn empty_stats_are_nan_and_json_null() {
        let s = stats(&[]);
        assert!(s.mean.is_nan() && s.p99.is_nan() && s.count == 0);
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["p50"], serde_json::Value::Null);
        assert_eq!(json["count"], 0);
        let back: Stats = serde_json::from_value(json).unwrap();
        assert!(back.std.is_nan());
    }

    #[test]
    fn the_special_functions_match_known_values() {
        // Γ(5) = 24, Γ(0.5) = √π; P(1, x) = 1 − e^−x; P(3, 2) = 0.3233235838169366 (scipy).
        assert!((ln_gamma(5.0) - 24f64.ln()).abs() < 1e-12);
        assert!((ln_gamma(0.5) - std::f64::consts::PI.sqrt().ln()).abs() < 1e-12);
        for x in [0.1, 1.0, 3.0, 10.0] {
            assert!((gamma_p(1.0, x) - (1.0 - (-x).exp())).abs() < 1e-12, "{x}");
        }
        assert!((gamma_p(3.0, 2.0) - 0.323_323_583_816_936_6).abs() < 1e-12);
        assert!((gamma_p(3.0, 8.0) - 0.986_246_032_255_997).abs() < 1e-12);
        // The Kolmogorov tail: Q(1.36) ≈ 0.049, Q(1.63) ≈ 0.0099.
        assert!((kolmogorov_q(1.36) - 0.0494).abs() < 1e-3 && (kolmogorov_q(1.628) - 0.01).abs() < 1e-3);
    }
}
