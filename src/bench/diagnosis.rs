//! What limits this run: compare the loaded latencies with one isolated request's (the
//! baseline) and watch the waiting queue. Each verdict carries the numbers that triggered it
//! and what to try next, in English or Chinese.

use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::bench::metrics::{BenchmarkMetrics, TimePoint};
use crate::bench::stats::nan_as_null;
use crate::error::{Error, Result};

/// Saturated: the last quarter's mean waiting queue exceeds the first quarter's by this factor…
pub const SATURATION_GROWTH: f64 = 2.0;
/// …and holds more than this many requests (a queue of 0.1 → 0.3 is no backlog).
pub const SATURATION_MIN_WAITING: f64 = 1.0;
/// Prefill-bound: TTFT p50 above this multiple of the baseline TTFT…
pub const PREFILL_TTFT_RATIO: f64 = 3.0;
/// …while TPOT p50 stays below this multiple of the baseline TPOT; above it, decode-bound.
pub const DECODE_TPOT_RATIO: f64 = 1.5;
/// Under-utilised: TTFT and TPOT p50 both within this multiple of the baseline…
pub const NEAR_BASELINE_RATIO: f64 = 1.5;
/// …and the GPU busy for less than this share of the run.
pub const LOW_BUSY_FRACTION: f64 = 0.5;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Lang {
    #[default]
    En,
    Zh,
}

impl FromStr for Lang {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "en" => Ok(Lang::En),
            "zh" => Ok(Lang::Zh),
            _ => Err(Error::Invalid(format!("language {s:?}: expected en or zh"))),
        }
    }
}

/// One isolated request, measured by the caller on the same engine before the run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Baseline {
    #[serde(with = "nan_as_null")]
    pub ttft_ms: f64,
    #[serde(with = "nan_as_null")]
    pub tpot_ms: f64,
    /// Why the baseline request failed (its latencies are then null, and there is no diagnosis).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Baseline {
    /// The baseline request failed with `error`: recorded, and the run goes on.
    pub fn failed(error: String) -> Self {
        Baseline { ttft_ms: f64::NAN, tpot_ms: f64::NAN, error: Some(error) }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    PrefillBound,
    DecodeBound,
    UnderUtilised,
    Saturated,
    Healthy,
}

impl Verdict {
    pub fn label(&self, lang: Lang) -> &'static str {
        match (self, lang) {
            (Verdict::PrefillBound, Lang::En) => "Prefill-bound",
            (Verdict::PrefillBound, Lang::Zh) => "预填充受限 (Prefill-bound)",
            (Verdict::DecodeBound, Lang::En) => "Decode-bound",
            (Verdict::DecodeBound, Lang::Zh) => "解码受限 (Decode-bound)",
            (Verdict::UnderUtilised, Lang::En) => "Under-utilised",
            (Verdict::UnderUtilised, Lang::Zh) => "算力未充分利用 (Under-utilised)",
            (Verdict::Saturated, Lang::En) => "Saturated",
            (Verdict::Saturated, Lang::Zh) => "过载：队列持续增长 (Saturated)",
            (Verdict::Healthy, Lang::En) => "Healthy",
            (Verdict::Healthy, Lang::Zh) => "健康 (Healthy)",
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Diagnosis {
    pub verdict: Verdict,
    /// The numbers that triggered the verdict.
    pub evidence: Vec<String>,
    pub advice: Vec<String>,
}

/// [`diagnose_in`] English.
pub fn diagnose(m: &BenchmarkMetrics, base: &Baseline) -> Diagnosis {
    diagnose_in(m, base, Lang::En)
}

/// The first rule that holds wins: saturated, prefill-bound, decode-bound, under-utilised,
/// else healthy. A missing TPOT (every output one token long) counts as near the baseline.
pub fn diagnose_in(m: &BenchmarkMetrics, base: &Baseline, lang: Lang) -> Diagnosis {
    let say = |en: String, zh: String| if lang == Lang::En { en } else { zh };
    let (ttft, tpot) = (m.ttft_ms.p50, m.tpot_ms.p50);
    let ttft_ratio = ttft / base.ttft_ms;
    let tpot_ratio = tpot / base.tpot_ms;
    let tpot_low = |limit: f64| tpot_ratio.is_nan() || tpot_ratio < limit;
    let ttft_line = say(
        format!("TTFT p50 {ttft:.1} ms = {ttft_ratio:.1}x the baseline {:.1} ms", base.ttft_ms),
        format!("TTFT P50 {ttft:.1} ms，为基线 {:.1} ms 的 {ttft_ratio:.1} 倍", base.ttft_ms),
    );
    let tpot_line = say(
        format!("TPOT p50 {tpot:.1} ms = {tpot_ratio:.1}x the baseline {:.1} ms", base.tpot_ms),
        format!("TPOT P50 {tpot:.1} ms，为基线 {:.1} ms 的 {tpot_ratio:.1} 倍", base.tpot_ms),
    );
    let busy = m.gpu_busy_fraction * 100.0;
    let busy_line = say(format!("GPU busy {busy:.0}% of the run"), format!("GPU 忙碌时间占 {busy:.0}%"));
    let unmeasured_busy = busy.is_nan().then(|| busy_line.clone());

    let (verdict, evidence) = if let Some(q) = queue_growth(&m.series).filter(|q| q.is_growing()) {
        let (first, last, slope) = (q.first, q.last, q.slope);
        let queue_line = say(
            format!("waiting requests: mean {first:.1} in the first quarter, {last:.1} in the last; trend {slope:+.2} per bucket"),
            format!("等待请求数：前四分之一均值 {first:.1}，后四分之一均值 {last:.1}；每个时间桶 {slope:+.2}"),
        );
        (Verdict::Saturated, vec![queue_line])
    } else if ttft_ratio > PREFILL_TTFT_RATIO && tpot_low(DECODE_TPOT_RATIO) {
        (Verdict::PrefillBound, vec![ttft_line, tpot_line])
    } else if tpot_ratio > DECODE_TPOT_RATIO {
        (Verdict::DecodeBound, vec![tpot_line, ttft_line])
    } else if ttft_ratio <= NEAR_BASELINE_RATIO
        && tpot_low(NEAR_BASELINE_RATIO)
        && m.gpu_busy_fraction < LOW_BUSY_FRACTION
    {
        (Verdict::UnderUtilised, vec![busy_line, ttft_line, tpot_line])
    } else {
        (Verdict::Healthy, vec![ttft_line, tpot_line, busy_line])
    };
    // A target that does not report its GPU's busy time (a server) has no busy line to show.
    let mut evidence = evidence;
    if let Some(line) = unmeasured_busy {
        evidence.retain(|l| *l != line);
    }
    // Requests per second the engine sustained: output tok/s over the mean output length.
    let capacity = m.output_throughput / (m.total_output_tokens as f64 / m.completed as f64);
    Diagnosis { verdict, evidence, advice: advice(verdict, lang, capacity) }
}

/// What to try next, in the spirit of the classic tuning guides.
fn advice(verdict: Verdict, lang: Lang, capacity_rps: f64) -> Vec<String> {
    let lines: &[&str] = match (verdict, lang) {
        (Verdict::Saturated, Lang::En) => &[
            "Requests arrive faster than they are served: the measured capacity is about {capacity} req/s.",
            "Lower the rate below that, or add capacity (faster kernels, quantisation, a bigger GPU).",
            "This run's latencies measure the queue, not the engine.",
        ],
        (Verdict::Saturated, Lang::Zh) => &[
            "请求到达速度超过服务速度：实测服务能力约 {capacity} 请求/秒。",
            "把请求速率降到该值以下，或增加算力（更快的内核、量化、更大的 GPU）。",
            "本次测得的延迟主要反映排队时间，而不是引擎本身。",
        ],
        (Verdict::PrefillBound, Lang::En) => &[
            "Enable chunked prefill, so running decodes are not stalled behind long prompts.",
            "Lower max_batched_tokens to cap the prefill work per step (trades a little throughput for TTFT).",
            "Shorten prompts, or enable prefix caching when requests share a prefix.",
        ],
        (Verdict::PrefillBound, Lang::Zh) => &[
            "开启分块预填充 (chunked prefill)，避免正在解码的请求被长提示词阻塞。",
            "调低 max_batched_tokens，限制每步的预填充工作量（用少量吞吐换取更低的 TTFT）。",
            "缩短提示词；若请求共享前缀，开启前缀缓存 (prefix caching)。",
        ],
        (Verdict::DecodeBound, Lang::En) => &[
            "A larger batch is NOT the fix: each decode step is already slow.",
            "Run fewer concurrent sequences (lower max_num_seqs or the concurrency) to bring TPOT down.",
            "Make each step cheaper: quantised weights, faster kernels.",
            "Speculative decoding yields several tokens per step.",
        ],
        (Verdict::DecodeBound, Lang::Zh) => &[
            "加大批量并不能解决问题：每个解码步本身已经很慢。",
            "减少并发序列数（调低 max_num_seqs 或并发度）以降低 TPOT。",
            "让每一步更便宜：权重量化、更快的内核。",
            "投机解码 (speculative decoding) 可以每步产出多个 token。",
        ],
        (Verdict::UnderUtilised, Lang::En) => &[
            "The GPU waits for work: raise the concurrency or the request rate.",
            "Raise max_num_seqs / max_batched_tokens so more requests share each step.",
        ],
        (Verdict::UnderUtilised, Lang::Zh) => &[
            "GPU 在等待任务：提高并发度或请求速率。",
            "调高 max_num_seqs / max_batched_tokens，让更多请求共享每一步。",
        ],
        (Verdict::Healthy, Lang::En) => {
            &["Latencies stay near the baseline under this load; try a higher rate to find the knee."]
        }
        (Verdict::Healthy, Lang::Zh) => &["在此负载下延迟接近基线；可以提高请求速率，找到性能拐点。"],
    };
    let capacity = format!("{capacity_rps:.2}");
    lines.iter().map(|line| line.replace("{capacity}", &capacity)).collect()
}

/// Mean waiting queue over the first and last quarter of the series, and its least-squares
/// slope per bucket. `None` for fewer than four points.
struct QueueGrowth {
    first: f64,
    last: f64,
    slope: f64,
}

impl QueueGrowth {
    fn is_growing(&self) -> bool {
        self.slope > 0.0 && self.last > SATURATION_GROWTH * self.first && self.last > SATURATION_MIN_WAITING
    }
}

fn queue_growth(series: &[TimePoint]) -> Option<QueueGrowth> {
    let n = series.len();
    if n < 4 {
        return None;
    }
    let mean = |points: &[TimePoint]| points.iter().map(|p| p.waiting).sum::<f64>() / points.len() as f64;
    let quarter = n / 4;
    let (x_mean, y_mean) = ((n - 1) as f64 / 2.0, mean(series));
    let (mut covariance, mut variance) = (0.0, 0.0);
    for (i, p) in series.iter().enumerate() {
        let dx = i as f64 - x_mean;
        covariance += dx * (p.waiting - y_mean);
        variance += dx * dx;
    }
    Some(QueueGrowth {
        first: mean(&series[..quarter]),
        last: mean(&series[n - quarter..]),
        slope: covariance / variance,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::metrics::{stats, summarize};

    const BASE: Baseline = Baseline { ttft_ms: 100.0, tpot_ms: 10.0, error: None };

    /// Ten requests of 100 output tokens at 100 output tok/s; `waiting` per bucket.
    fn metrics(ttft_p50: f64, tpot_p50: f64, busy: f64, waiting: &[f64]) -> BenchmarkMetrics {
        let mut m = summarize(&[], &[], None, 0.25);
        (m.completed, m.total_output_tokens, m.output_throughput) = (10, 1000, 100.0);
        (m.ttft_ms, m.tpot_ms, m.gpu_busy_fraction) = (stats(&[ttft_p50]), stats(&[tpot_p50]), busy);
        m.series = waiting
            .iter()
            .enumerate()
            .map(|(i, &w)| TimePoint {
                t_s: i as f64,
                output_tok_s: 0.0,
                running: 1.0,
                waiting: w,
                kv_blocks_used: 0.0,
            })
            .collect();
        m
    }

    #[test]
    fn growing_queue_is_saturated_with_capacity_advice() {
        let rising: Vec<f64> = (0..16).map(f64::from).collect();
        let d = diagnose(&metrics(900.0, 10.0, 1.0, &rising), &BASE);
        assert_eq!(d.verdict, Verdict::Saturated);
        assert!(d.evidence[0].contains("1.5") && d.evidence[0].contains("13.5"), "{:?}", d.evidence);
        assert!(d.advice[0].contains("1.00 req/s"), "{:?}", d.advice);
        // A steady queue, however long, is not a growing one.
        let steady = diagnose(&metrics(110.0, 11.0, 0.9, &[5.0; 16]), &BASE);
        assert_eq!(steady.verdict, Verdict::Healthy);
        // Nor is a small one.
        let tiny = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0];
        assert_ne!(diagnose(&metrics(110.0, 11.0, 0.9, &tiny), &BASE).verdict, Verdict::Saturated);
    }

    #[test]
    fn latency_ratios_pick_the_verdict() {
        let cases = [
            (400.0, 11.0, 0.9, Verdict::PrefillBound),
            (400.0, 20.0, 0.9, Verdict::DecodeBound),
            (120.0, 16.0, 0.9, Verdict::DecodeBound),
            (110.0, 11.0, 0.3, Verdict::UnderUtilised),
            (110.0, 11.0, 0.9, Verdict::Healthy),
            (200.0, 11.0, 0.3, Verdict::Healthy),
        ];
        for (ttft, tpot, busy, want) in cases {
            let d = diagnose(&metrics(ttft, tpot, busy, &[0.0; 8]), &BASE);
            assert_eq!(d.verdict, want, "ttft {ttft} tpot {tpot} busy {busy}");
            assert!(!d.evidence.is_empty() && !d.advice.is_empty());
        }
        let prefill = diagnose(&metrics(400.0, 11.0, 0.9, &[]), &BASE);
        assert!(prefill.evidence[0].contains("4.0x"), "{:?}", prefill.evidence);
        let decode = diagnose(&metrics(100.0, 20.0, 0.9, &[]), &BASE);
        assert!(decode.advice[0].contains("NOT"));
    }

    #[test]
    fn chinese_labels_and_advice() {
        let d = diagnose_in(&metrics(400.0, 11.0, 0.9, &[]), &BASE, Lang::Zh);
        assert!(d.advice[0].contains("分块预填充"));
        assert!(d.evidence[0].contains("倍"));
        assert_eq!(Verdict::Healthy.label(Lang::Zh), "健康 (Healthy)");
        assert_eq!("zh".parse::<Lang>().unwrap(), Lang::Zh);
        assert!("fr".parse::<Lang>().is_err());
    }
}
