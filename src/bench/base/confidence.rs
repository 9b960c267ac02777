//! How far a count of requests supports a claim about a percentile: the two questions a reader of
//! a tail latency asks, answered from the binomial distribution (nothing assumed about the
//! latencies' own distribution).
//!
//! - **An interval for a percentile** ([`percentile_interval`]): the ranks of the order statistics
//!   that bracket the true q-quantile at a confidence level. Of n values, the number below the true
//!   q-quantile is Binomial(n, q); the interval runs from the largest rank l with P(B < l) ≤ α/2
//!   to the smallest rank u with P(B < u) ≥ 1 − α/2, so it covers the quantile with probability
//!   at least 1 − α. When l would be below the first value or u past the last, the count cannot
//!   support the percentile at that level (`None`): at 95%, P90 needs 36 values and P99 368
//!   ([`min_count_for`]).
//! - **Early stopping** ([`min_passing`], [`decide`]): MLPerf LoadGen's test for a claim "at least a
//!   share p of requests meet the bound" (its Server scenario, `loadgen/early_stopping.cc` and
//!   `results.cc`, read for the definition): with t requests over the bound, the run must have
//!   measured at least h + t, where h is the smallest count with I_p(h, t + 1) < 1 − c — the
//!   probability of seeing at most t over the bound among h + t if the true share over were
//!   1 − p — at c = 99%. With none over at p99: 459. The other side, which LoadGen does not
//!   need (a run there ends at a fixed count), is the same test turned round: the claim fails when
//!   seeing t or more over the bound among n would have probability below 1 − c were the share
//!   over exactly 1 − p. Between the two, the run has not measured enough to tell.
//!
//! I_x(a, b) is the regularised incomplete beta function, by its continued fraction (Lentz), on
//! whichever side of I_x(a, b) = 1 − I_{1−x}(b, a) converges fast.

use serde::{Deserialize, Serialize};

/// LoadGen's confidence for early stopping.
pub const EARLY_STOPPING_CONFIDENCE: f64 = 0.99;
/// The level of the percentiles' intervals.
pub const INTERVAL_LEVEL: f64 = 0.95;

/// The regularised incomplete beta function I_x(a, b), for a, b > 0 and x in [0, 1].
pub fn beta_regularized(x: f64, a: f64, b: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let front = (ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln()).exp();
    if x < (a + 1.0) / (a + b + 2.0) {
        (front * beta_fraction(x, a, b) / a).clamp(0.0, 1.0)
    } else {
        (1.0 - front * beta_fraction(1.0 - x, b, a) / b).clamp(0.0, 1.0)
    }
}

/// The continued fraction of I_x(a, b) (without its front factor), by the modified Lentz method.
fn beta_fraction(x: f64, a: f64, b: f64) -> f64 {
    const TINY: f64 = 1e-300;
    let guard = |v: f64| if v.abs() < TINY { TINY } else { v };
    let (mut c, mut d) = (1.0, 1.0 / guard(1.0 - (a + b) * x / (a + 1.0)));
    let mut h = d;
    for m in 1..10_000 {
        let m = m as f64;
        // The even term, then the odd one.
        let even = m * (b - m) * x / ((a + 2.0 * m - 1.0) * (a + 2.0 * m));
        d = 1.0 / guard(1.0 + even * d);
        c = guard(1.0 + even / c);
        h *= d * c;
        let odd = -(a + m) * (a + b + m) * x / ((a + 2.0 * m) * (a + 2.0 * m + 1.0));
        d = 1.0 / guard(1.0 + odd * d);
        c = guard(1.0 + odd / c);
        let step = d * c;
        h *= step;
        if (step - 1.0).abs() < 1e-15 {
            break;
        }
    }
    h
}

/// P(B ≤ k) for B ~ Binomial(n, q).
pub fn binomial_cdf(k: usize, n: usize, q: f64) -> f64 {
    if k >= n {
        return 1.0;
    }
    beta_regularized(1.0 - q, (n - k) as f64, k as f64 + 1.0)
}

/// The 0-based indices, in the sorted values, of a two-sided interval at `level` for the
/// `q`-quantile (0 < q < 1) of `n` values; `None` when `n` values cannot support one.
pub fn percentile_interval(n: usize, q: f64, level: f64) -> Option<(usize, usize)> {
    if n == 0 || !(0.0..1.0).contains(&q) || q == 0.0 {
        return None;
    }
    let tail = (1.0 - level) / 2.0;
    // P(B < r) = P(B ≤ r − 1) rises with the rank r: the first rank past the lower tail and the
    // first rank into the upper one.
    let below = |r: usize| if r == 0 { 0.0 } else { binomial_cdf(r - 1, n, q) };
    let first_rank = |pred: &dyn Fn(usize) -> bool| {
        let (mut lo, mut hi) = (0, n + 1);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if pred(mid) {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        lo
    };
    let lower = first_rank(&|r| below(r) > tail).checked_sub(1)?;
    let upper = first_rank(&|r| below(r) >= 1.0 - tail);
    (lower >= 1 && upper <= n).then(|| (lower - 1, upper - 1))
}

/// The fewest values whose `q`-quantile has an interval at `level` ([`percentile_interval`]).
pub fn min_count_for(q: f64, level: f64) -> usize {
    let mut n = 1;
    while percentile_interval(n, q, level).is_none() && n < 100_000_000 {
        n = (n * 2).max(n + 1);
    }
    // The doubling overshot: the first n in (n/2, n] that supports it.
    let (mut lo, mut hi) = (n / 2 + 1, n);
    while lo < hi {
        let mid = (lo + hi) / 2;
        if percentile_interval(mid, q, level).is_some() {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    lo
}

/// LoadGen's `MinPassingQueriesFinder`: the fewest requests within the bound that, beside `over`
/// requests over it, support "at least a share `p` meet the bound" at confidence `c`.
pub fn min_passing(over: usize, p: f64, c: f64) -> usize {
    let odds = |h: usize| beta_regularized(p, h as f64, over as f64 + 1.0);
    let (mut lo, mut hi) = (1usize, 2usize);
    while odds(hi) >= 1.0 - c {
        hi *= 2;
    }
    while lo < hi {
        let mid = (lo + hi) / 2;
        if odds(mid) < 1.0 - c {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    lo
}

/// What `n` requests with `over` of them over the bound say of "at least a share `p` meet it".
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "decided", rename_all = "snake_case")]
pub enum Decision {
    /// Supported at the confidence: n ≥ [`min_passing`] + over.
    Met,
    /// Refuted at the confidence: t or more over among n is that unlikely were the share over
    /// exactly 1 − p.
    Missed,
    /// Neither yet: `needed` requests in all would support it were every further one within the
    /// bound.
    Undecided { needed: usize },
}

/// Early stopping's verdict on a run ([`Decision`]), at confidence `c`.
pub fn decide(n: usize, over: usize, p: f64, c: f64) -> Decision {
    let needed = min_passing(over, p, c) + over;
    if n >= needed {
        return Decision::Met;
    }
    // P(B ≥ over) for B ~ Binomial(n, 1 − p).
    let at_least = if over == 0 { 1.0 } else { 1.0 - binomial_cdf(over - 1, n, 1.0 - p) };
    if at_least < 1.0 - c {
        Decision::Missed
    } else {
        Decision::Undecided { needed }
    }
}

/// ln Γ(x) for x > 0 (Lanczos, g = 7, nine terms: ~15 digits).
pub(crate) fn ln_gamma(x: f64) -> f64 {
    const G: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // Reflection: Γ(x) Γ(1 − x) = π / sin(πx).
        return (std::f64::consts::PI / (std::f64::consts::PI * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let t = x + 7.5;
    let sum = G.iter().enumerate().skip(1).fold(G[0], |s, (i, g)| s + g / (x + i as f64));
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + sum.ln()
}

#[cfg(test)]
mod tests {
    use crate::bench::base::confidence::*;

    /// P(B ≤ k) by summing the mass function in logs: independent of the beta function.
    fn cdf_by_sum(k: usize, n: usize, q: f64) -> f64 {
        let ln_choose =
            |n: usize, k: usize| ln_gamma(n as f64 + 1.0) - ln_gamma(k as f64 + 1.0) - ln_gamma((n - k) as f64 + 1.0);
        (0..=k.min(n)).map(|j| (ln_choose(n, j) + j as f64 * q.ln() + (n - j) as f64 * (1.0 - q).ln()).exp()).sum()
    }

    #[test]
    fn the_binomial_cdf_matches_its_sum() {
        for (k, n, q) in [(0, 10, 0.5), (3, 10, 0.5), (1, 662, 0.01), (5, 1307, 0.01), (40, 500, 0.1), (9, 20, 0.9)] {
            let (got, want) = (binomial_cdf(k, n, q), cdf_by_sum(k, n, q));
            assert!((got - want).abs() < 1e-10, "P(B ≤ {k}; {n}, {q}) = {got}, by sum {want}");
        }
        assert_eq!(binomial_cdf(10, 10, 0.3), 1.0);
        // 0.5^10 and 1 − 0.99^459.
        assert!((binomial_cdf(0, 10, 0.5) - 0.5f64.powi(10)).abs() < 1e-14);
    }

    /// LoadGen's published minimum query counts: with no request over the bound, h is the
    /// smallest with p^h < 0.01 (I_p(h, 1) = p^h): 44 at p90, 459 at p99 (MLPerf's figure for the
    /// Server scenario), 4,603 at p99.9; with requests over the bound, h + t from LoadGen's
    /// definition I_p(h, t + 1) < 0.01, checked against the mass-function sum.
    #[test]
    fn early_stopping_matches_loadgen() {
        let c = EARLY_STOPPING_CONFIDENCE;
        let table = [
            (0.90, [(0, 44), (1, 64), (2, 81), (5, 127), (10, 197), (50, 681)]),
            (0.99, [(0, 459), (1, 662), (2, 838), (5, 1307), (10, 2010), (50, 6898)]),
            (0.999, [(0, 4603), (1, 6636), (2, 8403), (5, 13105), (10, 20140), (50, 69058)]),
        ];
        for (p, rows) in table {
            for (t, total) in rows {
                let h = min_passing(t, p, c);
                assert_eq!(h + t, total, "p{p} with {t} over the bound");
                // The definition itself: h passes, h − 1 does not (by the independent sum).
                assert!(cdf_by_sum(t, h + t, 1.0 - p) < 1.0 - c);
                assert!(cdf_by_sum(t, h - 1 + t, 1.0 - p) >= 1.0 - c);
            }
        }
        assert_eq!(decide(459, 0, 0.99, c), Decision::Met);
        assert_eq!(decide(458, 0, 0.99, c), Decision::Undecided { needed: 459 });
        assert_eq!(decide(16, 0, 0.99, c), Decision::Undecided { needed: 459 });
        // 16 requests, 4 over a p99 bound: P(B ≥ 4; 16, 0.01) ≈ 1.7e-5: refuted at once.
        assert_eq!(decide(16, 4, 0.99, c), Decision::Missed);
        // 100 requests, 2 over: P(B ≥ 2; 100, 0.01) ≈ 0.26, not refuted; 838 would support it.
        assert_eq!(decide(100, 2, 0.99, c), Decision::Undecided { needed: 838 });
    }

    #[test]
    fn percentile_intervals_bracket_the_quantile_and_say_when_they_cannot() {
        // The median of 9: P(B ≤ 1) = 0.0195 ≤ 0.025 < P(B ≤ 2) = 0.0898, so l = 2; P(B ≤ 6) =
        // 0.910 < 0.975 ≤ P(B ≤ 7) = 0.980, so u = 8 — ranks 2 and 8, indices 1 and 7.
        assert_eq!(percentile_interval(9, 0.5, 0.95), Some((1, 7)));
        // Five values cannot bracket the median at 95% (0.5^5 · 2 = 6.25% outside x(1)..x(5)).
        assert_eq!(percentile_interval(5, 0.5, 0.95), None);
        assert_eq!(percentile_interval(6, 0.5, 0.95), Some((0, 5)));
        // P99's upper end needs 0.99^n ≤ 0.025: n ≥ 368 (0.99^367 = 0.02501); P90's, 0.9^n ≤ 0.025: n ≥ 36.
        assert_eq!(min_count_for(0.99, 0.95), 368);
        assert_eq!(min_count_for(0.90, 0.95), 36);
        assert_eq!(percentile_interval(32, 0.99, 0.95), None);
        // At every n, the coverage by the independent sum is at least 95%.
        for n in [36, 50, 200, 368, 1000] {
            for q in [0.5, 0.9, 0.99] {
                if let Some((l, u)) = percentile_interval(n, q, 0.95) {
                    let coverage = cdf_by_sum(u, n, q) - cdf_by_sum(l, n, q);
                    assert!(coverage >= 0.95 - 1e-9, "n {n} q {q}: {coverage}");
                }
            }
        }
    }
}
