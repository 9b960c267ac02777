//! The step-cost model (the capacity planner's, [`crate::planner`]): a step's duration as a linear function of its shape ([`StepShape`]),
//! fitted on steps the engine measured.
//!
//! Four terms, each with a reason in how a step spends its time:
//! - **per step**: reading every weight once (a decode step at small batch is this), the
//!   dispatches' fixed latency, the ids readback;
//! - **per token**: each token's matmul FLOPs (2 × parameters) and activation traffic, which
//!   dominate prefill chunks;
//! - **per logit row**: the LM head (vocabulary × hidden per row) and the sampler;
//! - **per attended key**: attention, one query-key pair each (K/V reads for a decode, FLOPs for
//!   a prefill).
//!
//! A step's duration is the engine's ([`crate::engine::StepStats::duration_s`]): from the later
//! of the step's scheduling and the previous step's ids arriving, to its own ids arriving — so
//! under CPU/GPU overlap, the GPU's time for the step; without, the CPU's scheduling and
//! encoding too.
//!
//! The fit minimises Σ (predicted − measured)² / measured, with every coefficient ≥ 0 (each term
//! is a cost): the weighting under which a step's timing noise grows with its length (variance ∝
//! duration). Plain squared error would fit the long prefill steps and ignore the decodes; squared
//! *relative* error (tried first) did the opposite, and on the tiny fixture's sweep predicted its
//! saturated rate's total step time 12% long against 1% with this (BENCHMARKS.md). Its error is
//! reported on steps held back from it.

use crate::engine::StepShape;
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};

/// Every fifth step (index 4, 9, …) is held back from the fit that measures the error.
const HOLD_BACK_EVERY: usize = 5;

/// Fewest steps a fit accepts.
pub const MIN_STEPS: usize = 12;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CostModel {
    /// Seconds per step, per token, per logit row, per attended key (each ≥ 0).
    pub step_s: f64,
    pub token_s: f64,
    pub logit_row_s: f64,
    pub attended_key_s: f64,
    /// What it was fitted on (a results file, its model and adapter).
    pub source: String,
    /// Steps in the fit.
    pub steps: usize,
    /// The fit's error on the held-back steps (every fifth, left out of a fit on the others):
    /// median and 90th percentile of |predicted − measured| / measured, and how many there were.
    pub held_back: usize,
    pub held_back_median_error: f64,
    pub held_back_p90_error: f64,
}

impl CostModel {
    /// Predicted seconds for a step of this shape.
    pub fn predict_s(&self, s: &StepShape) -> f64 {
        self.coefficients().iter().zip(features(s)).map(|(c, x)| c * x).sum()
    }

    fn coefficients(&self) -> [f64; 4] {
        [self.step_s, self.token_s, self.logit_row_s, self.attended_key_s]
    }

    /// Fits the model on measured `(shape, seconds)` steps; steps of zero or negative duration
    /// are left out. `source` says where they came from.
    pub fn fit(steps: &[(StepShape, f64)], source: &str) -> Result<CostModel> {
        let steps: Vec<(StepShape, f64)> = steps.iter().copied().filter(|(_, d)| d.is_finite() && *d > 0.0).collect();
        if steps.len() < MIN_STEPS {
            return Err(Error::Invalid(format!(
                "{source}: {} measured steps with their shapes; a cost model needs at least {MIN_STEPS} (a longer run, \
                 or one saved by this version, which records each step's shape)",
                steps.len()
            )));
        }
        let (kept, held): (Vec<_>, Vec<_>) =
            steps.iter().enumerate().partition(|(i, _)| i % HOLD_BACK_EVERY != HOLD_BACK_EVERY - 1);
        let kept: Vec<(StepShape, f64)> = kept.into_iter().map(|(_, s)| *s).collect();
        let trial = solve(&kept);
        let mut errors: Vec<f64> =
            held.iter().map(|(_, (shape, d))| (dot(&trial, &features(shape)) - d).abs() / d).collect();
        errors.sort_by(f64::total_cmp);
        let quantile = |q: f64| errors[((errors.len() - 1) as f64 * q).round() as usize];
        let [step_s, token_s, logit_row_s, attended_key_s] = solve(&steps);
        Ok(CostModel {
            step_s,
            token_s,
            logit_row_s,
            attended_key_s,
            source: source.to_string(),
            steps: steps.len(),
            held_back: errors.len(),
            held_back_median_error: quantile(0.5),
            held_back_p90_error: quantile(0.9),
        })
    }

    /// One line: the coefficients and the held-back error.
    pub fn describe(&self) -> String {
        format!(
            "{:.3} ms a step + {:.1} µs a token + {:.1} µs a logit row + {:.2} ns an attended key; fitted on {} \
             steps of {}; error on {} held-back steps: median {:.1}%, p90 {:.1}%",
            self.step_s * 1e3,
            self.token_s * 1e6,
            self.logit_row_s * 1e6,
            self.attended_key_s * 1e9,
            self.steps,
            self.source,
            self.held_back,
            self.held_back_median_error * 100.0,
            self.held_back_p90_error * 100.0
        )
    }
}

fn features(s: &StepShape) -> [f64; 4] {
    [1.0, s.tokens as f64, s.logit_rows as f64, s.attended_keys as f64]
}

fn dot(a: &[f64; 4], b: &[f64; 4]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Non-negative least squares weighted by 1 / duration, by trying every subset of terms (16) and
/// keeping the best whose solution is all ≥ 0: the constrained optimum has some set of terms at
/// zero and the others at their unconstrained optimum on that set.
fn solve(steps: &[(StepShape, f64)]) -> [f64; 4] {
    // Each row and its target divided by √d: minimise Σ (f·c − d)² / d.
    let rows: Vec<([f64; 4], f64)> = steps.iter().map(|(s, d)| (features(s).map(|x| x / d.sqrt()), d.sqrt())).collect();
    // Columns scaled to a largest entry of 1, so that elimination sees comparable magnitudes.
    let scale: [f64; 4] =
        std::array::from_fn(|j| rows.iter().map(|(r, _)| r[j].abs()).fold(0.0, f64::max).max(f64::MIN_POSITIVE));
    let mut best = ([0.0; 4], f64::INFINITY);
    for mask in 1u32..16 {
        let cols: Vec<usize> = (0..4).filter(|j| mask & (1 << j) != 0).collect();
        let n = cols.len();
        // Normal equations on the chosen columns.
        let mut a = vec![vec![0.0; n + 1]; n];
        for (r, t) in &rows {
            for (i, &ci) in cols.iter().enumerate() {
                let x = r[ci] / scale[ci];
                for (k, &ck) in cols.iter().enumerate() {
                    a[i][k] += x * r[ck] / scale[ck];
                }
                a[i][n] += x * t;
            }
        }
        let Some(x) = gauss(a) else { continue };
        if x.iter().any(|&v| v < 0.0) {
            continue;
        }
        let mut c = [0.0; 4];
        for (i, &ci) in cols.iter().enumerate() {
            c[ci] = x[i] / scale[ci];
        }
        let sse: f64 = rows.iter().map(|(r, t)| (dot(&c, r) - t).powi(2)).sum();
        if sse < best.1 {
            best = (c, sse);
        }
    }
    best.0
}

/// Solves the augmented system `a` (n × n+1) by elimination with partial pivoting; `None` when it
/// is singular (a term that no step varies, or two that vary together).
fn gauss(mut a: Vec<Vec<f64>>) -> Option<Vec<f64>> {
    let n = a.len();
    let norm = a.iter().flat_map(|r| r[..n].iter()).fold(0.0f64, |m, v| m.max(v.abs()));
    for col in 0..n {
        let pivot = (col..n).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))?;
        if a[pivot][col].abs() <= norm * 1e-12 {
            return None;
        }
        a.swap(col, pivot);
        let (above, below) = a.split_at_mut(col + 1);
        let pivot_row = &above[col];
        for row in below {
            let f = row[col] / pivot_row[col];
            for (x, p) in row[col..].iter_mut().zip(&pivot_row[col..]) {
                *x -= f * p;
            }
        }
    }
    let mut x = vec![0.0; n];
    for row in (0..n).rev() {
        let rest: f64 = (row + 1..n).map(|k| a[row][k] * x[k]).sum();
        x[row] = (a[row][n] - rest) / a[row][row];
    }
    Some(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(tokens: usize, logit_rows: usize, attended_keys: u64) -> StepShape {
        StepShape { tokens, sequences: logit_rows.max(1), logit_rows, attended_keys }
    }

    /// Steps like a run's: decode batches of 1–16 at contexts up to 600, prefill chunks of
    /// 16–512 tokens, some with a decode or two beside them.
    fn shapes() -> Vec<StepShape> {
        let mut out = Vec::new();
        for i in 0..60u64 {
            let batch = 1 + (i * 7 % 16) as usize;
            let context = 20 + i * 37 % 600;
            out.push(shape(batch, batch, batch as u64 * context));
            if i % 3 == 0 {
                let chunk = 16 + (i * 53 % 497) as usize;
                let start = i * 11 % 200;
                let keys = (0..chunk as u64).map(|p| start + p + 1).sum::<u64>();
                out.push(shape(chunk + batch / 4, 1 + batch / 4, keys + (batch / 4) as u64 * context));
            }
        }
        out
    }

    #[test]
    fn recovers_the_coefficients_that_made_the_steps() {
        let truth = CostModel {
            step_s: 4e-3,
            token_s: 2e-4,
            logit_row_s: 5e-4,
            attended_key_s: 3e-8,
            source: String::new(),
            steps: 0,
            held_back: 0,
            held_back_median_error: 0.0,
            held_back_p90_error: 0.0,
        };
        // ±2% of deterministic noise on each step.
        let steps: Vec<(StepShape, f64)> = shapes()
            .iter()
            .enumerate()
            .map(|(i, s)| (*s, truth.predict_s(s) * (1.0 + 0.02 * ((i * 37 % 11) as f64 / 5.0 - 1.0))))
            .collect();
        let fit = CostModel::fit(&steps, "test").unwrap();
        for (got, want) in fit.coefficients().iter().zip(truth.coefficients()) {
            assert!(
                (got - want).abs() <= 0.1 * want,
                "fitted {:?}, made with {:?}",
                fit.coefficients(),
                truth.coefficients()
            );
        }
        assert!(fit.held_back_p90_error <= 0.03, "{}", fit.describe());
        assert_eq!((fit.steps, fit.held_back), (steps.len(), steps.len() / 5));
    }

    #[test]
    fn coefficients_stay_non_negative_and_errors_are_honest() {
        // Durations that fall as tokens grow: the unconstrained fit's token term would be negative.
        let steps: Vec<(StepShape, f64)> = (0..30).map(|i| (shape(1 + i, 1, 10), 0.050 - 0.0005 * i as f64)).collect();
        let fit = CostModel::fit(&steps, "test").unwrap();
        assert!(fit.coefficients().iter().all(|&c| c >= 0.0), "{:?}", fit.coefficients());
        assert_eq!(fit.token_s, 0.0);
        // A constant cannot follow a 30% fall: the held-back error says so.
        assert!(fit.held_back_p90_error > 0.05, "{}", fit.describe());
    }

    #[test]
    fn too_few_steps_and_bad_durations_are_refused() {
        let steps: Vec<(StepShape, f64)> = (0..MIN_STEPS).map(|i| (shape(1, 1, i as u64), 0.01)).collect();
        assert!(CostModel::fit(&steps, "x").is_ok());
        let mut bad = steps.clone();
        bad[0].1 = f64::NAN;
        bad[1].1 = 0.0;
        let e = CostModel::fit(&bad, "saved.json").unwrap_err().to_string();
        assert!(e.contains("saved.json") && e.contains(&format!("{}", MIN_STEPS - 2)), "{e}");
    }
}
