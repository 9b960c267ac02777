//! The step-cost model (the capacity planner's, in the `planner` layer above): a step's duration as a linear function of its shape ([`StepShape`]),
//! fitted on steps the engine measured.
//!
//! Its terms, each with a reason in how a step spends its time:
//! - **per step**: reading every weight once (a decode step at small batch is this), the
//!   dispatches' fixed latency, the ids readback;
//! - **per token**: each token's matmul FLOPs (2 × parameters) and activation traffic, which
//!   dominate prefill chunks;
//! - **per logit row**: the LM head (vocabulary × hidden per row) and the sampler;
//! - **per attended key**: attention, one query-key pair each (K/V reads for a decode, FLOPs for
//!   a prefill);
//! - **per weight pass of each matmul kernel**, for the layers (by the step's tokens) and for the
//!   LM head (by its logit rows), when the run recorded its kernels ([`MatmulRule`]): which kernel
//!   a batch gets, and how often it reads the weights, is a staircase in the batch — on a CPU
//!   adapter decodes of 2–4 sequences run one kernel and 5–8 another at ~1.5× its cost — that the
//!   per-token line cannot follow (it ran decodes of 3–11 sequences up to 23% short: BENCHMARKS.md).
//!
//! A step's duration is the engine's ([`crate::engine::StepStats::duration_s`]): from the later
//! of the step's scheduling and the previous step's ids arriving, to its own ids arriving — so
//! under CPU/GPU overlap, the GPU's time for the step; without, the CPU's scheduling and
//! encoding too.
//!
//! The fit minimises Σ (predicted − measured)² / expected, with every coefficient ≥ 0 (each term
//! is a cost): the weighting under which a step's timing noise grows with its length (variance ∝
//! duration). Plain squared error would fit the long prefill steps and ignore the decodes; squared
//! *relative* error (tried first) did the opposite, and on the tiny fixture's sweep predicted its
//! saturated rate's total step time 12% long against 1% with this (BENCHMARKS.md). "Expected" is
//! the fit's own prediction (iteratively reweighted, starting from the measured durations): weighed
//! by the *measured* duration instead, a step that ran slow counts less than one that ran fast, so
//! a shape's prediction lands near the harmonic mean of its durations — on lavapipe, where a step's
//! time is skewed (a few slow ones), 4–10% below the arithmetic mean that a run's TPOT, TTFT and
//! throughput add up (BENCHMARKS.md). Its error is reported on steps held back from it.

use crate::engine::StepShape;
use crate::error::{Error, Result};
use crate::gpu::kernels::{MatmulClass, MatmulRule};
use serde::{Deserialize, Serialize};

/// Every fifth step (index 4, 9, …) is held back from the fit that measures the error.
const HOLD_BACK_EVERY: usize = 5;

/// Kernel classes ([`MatmulClass`]), and the model's terms: four, then a pass of each class for
/// the layers and for the LM head.
const CLASSES: usize = MatmulClass::ALL.len();
const TERMS: usize = 4 + 2 * CLASSES;

/// Fewest steps a fit accepts.
pub const MIN_STEPS: usize = 12;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CostModel {
    /// Seconds per step, per token, per logit row, per attended key (each ≥ 0).
    pub step_s: f64,
    pub token_s: f64,
    pub logit_row_s: f64,
    pub attended_key_s: f64,
    /// Seconds per weight pass of each matmul class ([`MatmulClass::ALL`]'s order), the layers'
    /// and the LM head's (each ≥ 0; 0 in models saved before they existed, or fitted without a
    /// kernel record).
    #[serde(default)]
    pub layer_pass_s: [f64; CLASSES],
    #[serde(default)]
    pub lm_head_pass_s: [f64; CLASSES],
    /// The fitted engine's kernel choice (`None`: unknown, no pass terms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matmuls: Option<MatmulRule>,
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
        dot(&self.coefficients(), &features(self.matmuls.as_ref(), s))
    }

    fn coefficients(&self) -> [f64; TERMS] {
        let mut c = [0.0; TERMS];
        c[..4].copy_from_slice(&[self.step_s, self.token_s, self.logit_row_s, self.attended_key_s]);
        c[4..4 + CLASSES].copy_from_slice(&self.layer_pass_s);
        c[4 + CLASSES..].copy_from_slice(&self.lm_head_pass_s);
        c
    }

    /// Fits the model on measured `(shape, seconds)` steps of an engine whose matmul kernels were
    /// chosen by `matmuls` (`None`: unknown, no pass terms); steps of zero or negative duration
    /// are left out. `source` says where they came from.
    pub fn fit(steps: &[(StepShape, f64)], matmuls: Option<MatmulRule>, source: &str) -> Result<CostModel> {
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
        let rule = matmuls.as_ref();
        let trial = reweighted(&kept, rule);
        let mut errors: Vec<f64> =
            held.iter().map(|(_, (shape, d))| (dot(&trial, &features(rule, shape)) - d).abs() / d).collect();
        errors.sort_by(f64::total_cmp);
        let quantile = |q: f64| errors[((errors.len() - 1) as f64 * q).round() as usize];
        let c = reweighted(&steps, rule);
        Ok(CostModel {
            step_s: c[0],
            token_s: c[1],
            logit_row_s: c[2],
            attended_key_s: c[3],
            layer_pass_s: std::array::from_fn(|i| c[4 + i]),
            lm_head_pass_s: std::array::from_fn(|i| c[4 + CLASSES + i]),
            matmuls,
            source: source.to_string(),
            steps: steps.len(),
            held_back: errors.len(),
            held_back_median_error: quantile(0.5),
            held_back_p90_error: quantile(0.9),
        })
    }

    /// One line: the coefficients (the pass terms that are not 0) and the held-back error.
    pub fn describe(&self) -> String {
        let mut passes = String::new();
        for (part, costs) in [("layers", &self.layer_pass_s), ("LM head", &self.lm_head_pass_s)] {
            for (class, s) in MatmulClass::ALL.iter().zip(costs).filter(|(_, s)| **s > 0.0) {
                passes.push_str(&format!(" + {:.1} µs a {part} pass ({class:?})", s * 1e6));
            }
        }
        format!(
            "{:.3} ms a step + {:.1} µs a token + {:.1} µs a logit row + {:.2} ns an attended key{passes}; fitted on \
             {} steps of {}; error on {} held-back steps: median {:.1}%, p90 {:.1}%",
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

/// A step's terms; the pass terms are 0 without a kernel rule.
fn features(rule: Option<&MatmulRule>, s: &StepShape) -> [f64; TERMS] {
    let mut f = [0.0; TERMS];
    f[..4].copy_from_slice(&[1.0, s.tokens as f64, s.logit_rows as f64, s.attended_keys as f64]);
    if let Some(rule) = rule {
        for (offset, m) in [(4, s.tokens), (4 + CLASSES, s.logit_rows)] {
            if m > 0 {
                let (class, passes) = rule.class(m);
                f[offset + class as usize] = passes as f64;
            }
        }
    }
    f
}

fn dot(a: &[f64; TERMS], b: &[f64; TERMS]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Rounds of reweighting after the first fit, from the measured durations to the fit's own
/// predictions (module docs).
const REWEIGHTS: usize = 2;

/// The fit, each step weighted by 1 / its expected duration: first the measured one, then
/// [`REWEIGHTS`] times the fit's own prediction (no lower than the shortest step measured, so a
/// term fitted to 0 cannot make a weight infinite).
fn reweighted(steps: &[(StepShape, f64)], rule: Option<&MatmulRule>) -> [f64; TERMS] {
    // Each step's terms once, for every round.
    let steps: Vec<([f64; TERMS], f64)> = steps.iter().map(|(s, d)| (features(rule, s), *d)).collect();
    let mut expected: Vec<f64> = steps.iter().map(|(_, d)| *d).collect();
    let shortest = expected.iter().copied().fold(f64::INFINITY, f64::min);
    let mut c = solve(&steps, &expected);
    for _ in 0..REWEIGHTS {
        expected = steps.iter().map(|(f, _)| dot(&c, f).max(shortest)).collect();
        c = solve(&steps, &expected);
    }
    c
}

/// Non-negative least squares over steps' (terms, duration), weighted by 1 / `expected`, by
/// trying every subset of the terms that some step has (up to 2^10 on one adapter's kernels) and
/// keeping the best whose solution is all ≥ 0: the constrained optimum has some set of terms at
/// zero and the others at their unconstrained optimum on that set. The normal equations are built
/// once; each subset takes its rows and columns.
fn solve(steps: &[([f64; TERMS], f64)], expected: &[f64]) -> [f64; TERMS] {
    // Each step's terms and duration divided by √e: minimise Σ (f·c − d)² / e.
    let rows: Vec<([f64; TERMS], f64)> =
        steps.iter().zip(expected).map(|((f, d), e)| (f.map(|x| x / e.sqrt()), d / e.sqrt())).collect();
    // Columns scaled to a largest entry of 1, so that elimination sees comparable magnitudes; a
    // column no step has is left out.
    let scale: [f64; TERMS] = std::array::from_fn(|j| rows.iter().map(|(r, _)| r[j].abs()).fold(0.0, f64::max));
    let present: Vec<usize> = (0..TERMS).filter(|&j| scale[j] > 0.0).collect();
    let mut normal = [[0.0; TERMS]; TERMS];
    let mut rhs = [0.0; TERMS];
    for (r, t) in &rows {
        for &i in &present {
            let x = r[i] / scale[i];
            for &k in &present {
                normal[i][k] += x * r[k] / scale[k];
            }
            rhs[i] += x * t;
        }
    }
    let mut best = ([0.0; TERMS], f64::INFINITY);
    for mask in 1u32..(1 << present.len()) {
        let cols: Vec<usize> = (0..present.len()).filter(|j| mask & (1 << j) != 0).map(|j| present[j]).collect();
        let a = cols.iter().map(|&i| cols.iter().map(|&k| normal[i][k]).chain([rhs[i]]).collect()).collect();
        let Some(x) = gauss(a) else { continue };
        if x.iter().any(|&v| v < 0.0) {
            continue;
        }
        let mut c = [0.0; TERMS];
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

    /// A model with these coefficients (step, token, logit row, key; the passes), to make steps with.
    fn made_with(
        base: [f64; 4],
        layer_pass_s: [f64; CLASSES],
        lm_head_pass_s: [f64; CLASSES],
        matmuls: Option<MatmulRule>,
    ) -> CostModel {
        let [step_s, token_s, logit_row_s, attended_key_s] = base;
        CostModel {
            step_s,
            token_s,
            logit_row_s,
            attended_key_s,
            layer_pass_s,
            lm_head_pass_s,
            matmuls,
            source: String::new(),
            steps: 0,
            held_back: 0,
            held_back_median_error: 0.0,
            held_back_p90_error: 0.0,
        }
    }

    /// [`shapes`] timed by `truth`, with ±2% of deterministic noise on each step.
    fn noisy_steps(truth: &CostModel) -> Vec<(StepShape, f64)> {
        shapes()
            .iter()
            .enumerate()
            .map(|(i, s)| (*s, truth.predict_s(s) * (1.0 + 0.02 * ((i * 37 % 11) as f64 / 5.0 - 1.0))))
            .collect()
    }

    #[test]
    fn recovers_the_coefficients_that_made_the_steps() {
        let truth = made_with([4e-3, 2e-4, 5e-4, 3e-8], [0.0; CLASSES], [0.0; CLASSES], None);
        let steps = noisy_steps(&truth);
        let fit = CostModel::fit(&steps, None, "test").unwrap();
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

    /// Skewed noise, as on a shared machine: most steps a little fast, one in five 60% slow (the
    /// mean factor 1.06, the harmonic 1.007). The model predicts each shape's mean, so the steps'
    /// predicted total is their measured total — what a run's latencies and throughput add up.
    /// (Weighted by the measured durations, the fit sat near the harmonic mean: 5% short.)
    #[test]
    fn the_fit_predicts_a_shapes_mean_duration_under_skewed_noise() {
        let truth = made_with([4e-3, 2e-4, 5e-4, 3e-8], [0.0; CLASSES], [0.0; CLASSES], None);
        let factors = [0.85, 0.9, 0.95, 1.0, 1.6];
        let steps: Vec<(StepShape, f64)> =
            shapes().iter().flat_map(|s| factors.map(|f| (*s, truth.predict_s(s) * f))).collect();
        let fit = CostModel::fit(&steps, None, "test").unwrap();
        let measured: f64 = steps.iter().map(|(_, d)| d).sum();
        let predicted: f64 = steps.iter().map(|(s, _)| fit.predict_s(s)).sum();
        assert!((predicted / measured - 1.0).abs() < 0.01, "predicted {predicted:.4} s of {measured:.4} s measured");
    }

    #[test]
    fn coefficients_stay_non_negative_and_errors_are_honest() {
        // Durations that fall as tokens grow: the unconstrained fit's token term would be negative.
        let steps: Vec<(StepShape, f64)> = (0..30).map(|i| (shape(1 + i, 1, 10), 0.050 - 0.0005 * i as f64)).collect();
        let fit = CostModel::fit(&steps, None, "test").unwrap();
        assert!(fit.coefficients().iter().all(|&c| c >= 0.0), "{:?}", fit.coefficients());
        assert_eq!(fit.token_s, 0.0);
        // A constant cannot follow a 30% fall: the held-back error says so.
        assert!(fit.held_back_p90_error > 0.05, "{}", fit.describe());
    }

    #[test]
    fn too_few_steps_and_bad_durations_are_refused() {
        let steps: Vec<(StepShape, f64)> = (0..MIN_STEPS).map(|i| (shape(1, 1, i as u64), 0.01)).collect();
        assert!(CostModel::fit(&steps, None, "x").is_ok());
        let mut bad = steps.clone();
        bad[0].1 = f64::NAN;
        bad[1].1 = 0.0;
        let e = CostModel::fit(&bad, None, "saved.json").unwrap_err().to_string();
        assert!(e.contains("saved.json") && e.contains(&format!("{}", MIN_STEPS - 2)), "{e}");
    }

    /// A CPU adapter's kernels (tile 8, subgroups): one kernel for one token, one for 2–4, the
    /// 8-token tile beyond — a staircase in the batch at three costs a pass. With the pass terms
    /// the fit recovers it and predicts every decode batch within the noise; the four-term line
    /// through the same steps cannot.
    #[test]
    fn each_matmul_kernel_has_its_cost_a_pass() {
        use crate::gpu::kernels::{KernelFamily, MatmulTile};
        let rule =
            MatmulRule { family: KernelFamily::Software, tile: MatmulTile::Eight, subgroups: true, gemv_max_m: 64 };
        let classes: Vec<(MatmulClass, usize)> = [1, 2, 4, 5, 8, 9, 17].map(|m| rule.class(m)).to_vec();
        use MatmulClass::*;
        // A class's terms sit at its place in `ALL`.
        assert!(MatmulClass::ALL.iter().enumerate().all(|(i, c)| *c as usize == i));
        assert_eq!(classes, [(OneToken, 1), (Small, 1), (Small, 1), (Tile, 1), (Tile, 1), (Tile, 2), (Tile, 3)]);
        let gpu = MatmulRule { family: KernelFamily::Gpu, ..rule };
        assert_eq!([1, 4, 5, 64, 65].map(|m| gpu.class(m)), [(Gemv, 1), (Gemv, 1), (Gemv, 2), (Gemv, 16), (Tiled, 2)]);
        let truth = made_with(
            [1e-3, 2e-5, 1e-5, 2e-8],
            [1e-3, 2e-3, 3e-3, 0.0, 0.0],
            [5e-3, 8e-3, 12e-3, 0.0, 0.0],
            Some(rule),
        );
        let steps = noisy_steps(&truth);
        let with = CostModel::fit(&steps, Some(rule), "test").unwrap();
        let line = CostModel::fit(&steps, None, "test").unwrap();
        let worst = |m: &CostModel| {
            (1..=16)
                .map(|b| shape(b, b, 300 * b as u64))
                .map(|s| (m.predict_s(&s) / truth.predict_s(&s) - 1.0).abs())
                .fold(0.0, f64::max)
        };
        assert!(worst(&with) < 0.04, "with the pass terms: {} off; {}", worst(&with), with.describe());
        assert!(worst(&line) > 0.10, "a line should miss the staircase: {} off; {}", worst(&line), line.describe());
        assert!(with.held_back_p90_error < line.held_back_p90_error, "{} / {}", with.describe(), line.describe());
    }
}
