//! Rate sweeps: several open-loop rates in one go, and the knee — where more offered load stops
//! paying. The same rules for the CLI's sweep table (`tokenmeter bench --rate 1,2,4,inf`) and the
//! page: with a TTFT SLO, the highest rate whose p99 TTFT meets it; without, the highest rate
//! before the first one that saturated the target ([`crate::bench::measure::saturation::Load`]: a queue
//! grew while requests arrived), or, when no rate was judged saturated, the last rate before
//! output throughput stops rising by 5%.

use crate::bench::base::lang::Lang;
use crate::bench::base::rules::Rule;
use crate::bench::measure::metrics::BenchmarkMetrics;
use crate::error::{Error, Result};

/// `1,2,4,inf` → rates in requests per second (`inf`: everything at once). Only the syntax is
/// checked here; `WorkloadSpec::validate` checks each rate.
pub fn parse_rates(text: &str) -> Result<Vec<f64>> {
    text.split(',')
        .map(|r| match r.trim() {
            "inf" | "infinity" => Ok(f64::INFINITY),
            r => r.parse::<f64>().map_err(|_| Error::Invalid(Rule::NotARate { text: r.to_string() }.text(Lang::En))),
        })
        .collect()
}

/// Why a rate is the knee.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KneeReason {
    /// The highest rate whose p99 TTFT meets the SLO.
    MeetsTtftSlo,
    /// The highest rate before the first that saturated the target.
    LastSustained,
    /// The lowest rate already saturated the target: the knee lies below it.
    BelowLowest,
    /// Output throughput rises by less than 5% at the next rate (or this is the last rate); no
    /// rate was judged saturated.
    ThroughputFlattens,
}

/// Throughput gains below this fraction count as flat.
const FLAT_GAIN: f64 = 0.05;

/// The knee among runs at increasing rates: its index and why; `None` when an SLO is given and
/// no rate meets it.
pub fn knee(runs: &[&BenchmarkMetrics], ttft_slo_ms: Option<f64>) -> Option<(usize, KneeReason)> {
    if runs.is_empty() {
        return None;
    }
    match ttft_slo_ms {
        Some(limit) => runs.iter().rposition(|m| m.ttft_ms.p99 <= limit).map(|i| (i, KneeReason::MeetsTtftSlo)),
        None => {
            let saturated = |m: &&BenchmarkMetrics| m.load.as_ref().and_then(|l| l.saturated) == Some(true);
            match runs.iter().position(saturated) {
                Some(0) => return Some((0, KneeReason::BelowLowest)),
                Some(i) => return Some((i - 1, KneeReason::LastSustained)),
                None => {}
            }
            let i = runs
                .windows(2)
                .position(|w| w[1].output_throughput < (1.0 + FLAT_GAIN) * w[0].output_throughput)
                .unwrap_or(runs.len() - 1);
            Some((i, KneeReason::ThroughputFlattens))
        }
    }
}

/// Where a sweep's TTFT p99 crosses an SLO.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum SloCrossing {
    /// Between two rates run: the rate where the line through their (rate, TTFT p99) reaches the
    /// SLO — or the lower rate, when the higher one is `inf` (no line to draw).
    At(f64),
    /// Every rate run meets the SLO: the crossing is above the highest.
    AboveHighest,
    /// The lowest rate run already misses it.
    BelowLowest,
}

/// The rate where TTFT p99 reaches `ttft_slo_ms`, interpolated between the last rate that meets it
/// and the next (runs at increasing `rates`, as a sweep runs them).
pub fn slo_crossing(rates: &[f64], runs: &[&BenchmarkMetrics], ttft_slo_ms: f64) -> Option<SloCrossing> {
    if rates.is_empty() || rates.len() != runs.len() {
        return None;
    }
    let p99 = |i: usize| runs[i].ttft_ms.p99;
    Some(match (0..runs.len()).rposition(|i| p99(i) <= ttft_slo_ms) {
        None => SloCrossing::BelowLowest,
        Some(i) if i + 1 == runs.len() => SloCrossing::AboveHighest,
        Some(i) if !rates[i + 1].is_finite() => SloCrossing::At(rates[i]),
        Some(i) => {
            let share = (ttft_slo_ms - p99(i)) / (p99(i + 1) - p99(i));
            SloCrossing::At(rates[i] + share * (rates[i + 1] - rates[i]))
        }
    })
}

impl std::fmt::Display for SloCrossing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SloCrossing::At(rate) => write!(f, "{rate:.2} req/s"),
            SloCrossing::AboveHighest => f.write_str("above the highest rate run"),
            SloCrossing::BelowLowest => f.write_str("below the lowest rate run"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slo_crossing_is_interpolated_between_the_rates_run() {
        let runs = [run(1.0, 50.0), run(2.0, 80.0), run(3.0, 400.0), run(4.0, 900.0)];
        let refs: Vec<&BenchmarkMetrics> = runs.iter().collect();
        // 500 ms lies between 400 (rate 4) and 900 (rate 8): 4 + (100 / 500) * 4 = 4.8.
        assert_eq!(slo_crossing(&[1.0, 2.0, 4.0, 8.0], &refs, 500.0), Some(SloCrossing::At(4.8)));
        // 200 ms between 80 (rate 2) and 400 (rate 4): 2 + (120 / 320) * 2 = 2.75.
        assert_eq!(slo_crossing(&[1.0, 2.0, 4.0, 8.0], &refs, 200.0), Some(SloCrossing::At(2.75)));
        assert_eq!(slo_crossing(&[1.0, 2.0, 4.0, 8.0], &refs, 1000.0), Some(SloCrossing::AboveHighest));
        assert_eq!(slo_crossing(&[1.0, 2.0, 4.0, 8.0], &refs, 10.0), Some(SloCrossing::BelowLowest));
        // Past `inf` there is no line: the last rate meeting the SLO.
        assert_eq!(slo_crossing(&[1.0, 2.0, 4.0, f64::INFINITY], &refs, 500.0), Some(SloCrossing::At(4.0)));
        assert_eq!(slo_crossing(&[1.0], &refs, 500.0), None);
        assert_eq!(SloCrossing::At(4.8).to_string(), "4.80 req/s");
    }

    fn run(throughput: f64, ttft_p99: f64) -> BenchmarkMetrics {
        let mut m = crate::bench::measure::metrics::summarize(&[], &[], None, 0.25);
        m.output_throughput = throughput;
        m.ttft_ms.p99 = ttft_p99;
        m
    }

    #[test]
    fn rates_parse_like_the_cli() {
        assert_eq!(parse_rates("1, 2.5,inf").unwrap(), vec![1.0, 2.5, f64::INFINITY]);
        assert!(parse_rates("1,,2").is_err());
        assert!(parse_rates("fast").unwrap_err().to_string().contains("not a number"));
    }

    #[test]
    fn knee_is_where_throughput_flattens_or_the_slo_breaks() {
        let runs = [run(100.0, 50.0), run(190.0, 80.0), run(195.0, 400.0), run(196.0, 900.0)];
        let refs: Vec<&BenchmarkMetrics> = runs.iter().collect();
        assert_eq!(knee(&refs, None), Some((1, KneeReason::ThroughputFlattens)));
        assert_eq!(knee(&refs, Some(500.0)), Some((2, KneeReason::MeetsTtftSlo)));
        assert_eq!(knee(&refs, Some(10.0)), None);
        assert_eq!(knee(&refs[..1], None), Some((0, KneeReason::ThroughputFlattens)));
        assert_eq!(knee(&[], None), None);
    }

    #[test]
    fn knee_is_the_last_rate_before_a_queue_grows() {
        use crate::bench::measure::saturation::{tests::queue_run, Load};
        // Capacity 8 req/s; throughput still rises at 16 and 32 (the queue is served later).
        let mut runs: Vec<BenchmarkMetrics> = [2.0, 4.0, 16.0, 32.0]
            .iter()
            .map(|&rate| {
                let records = queue_run(if rate < 8.0 { 200 } else { 64 }, rate, 8, 1.0);
                BenchmarkMetrics { load: Load::of(&records), ..run(rate * 10.0, 100.0) }
            })
            .collect();
        let refs: Vec<&BenchmarkMetrics> = runs.iter().collect();
        assert_eq!(knee(&refs, None), Some((1, KneeReason::LastSustained)));
        assert_eq!(knee(&refs[2..], None), Some((0, KneeReason::BelowLowest)));
        // An SLO still decides when given.
        assert_eq!(knee(&refs, Some(500.0)), Some((3, KneeReason::MeetsTtftSlo)));
        runs.truncate(2);
        let refs: Vec<&BenchmarkMetrics> = runs.iter().collect();
        assert_eq!(knee(&refs, None), Some((1, KneeReason::ThroughputFlattens)));
    }
}
