//! What the live charts draw, derived from the raw records: the worker draws a run's records into
//! a [`ChartData`] as it runs (so only the drawing crosses to the page), and the page draws a
//! finished or recalled run's from its `BenchResult`. The charts themselves are the page's
//! (`web::page::charts`).

use crate::bench::present::timeline::Timeline;
use crate::bench::{BenchResult, RequestRecord, StepSample, TimePoint};

/// One point: seconds from the run's start, and a value.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Point {
    pub x: f64,
    pub y: f64,
}

/// The engine's state after a step.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct BatchPoint {
    pub t: f64,
    pub running: f64,
    pub waiting: f64,
}

/// Everything the charts show, derived from the raw records.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ChartData {
    /// x: arrival (s), y: TTFT (ms), one per request that has its first token.
    pub ttft: Vec<Point>,
    /// x: arrival (s), y: time to first answer token (ms), one per reply that thought and then
    /// answered (`crate::bench::base::thinking`); empty for a model that does not think.
    pub ttfat: Vec<Point>,
    /// x: arrival (s), y: TPOT (ms), one per finished request with two or more tokens.
    pub tpot: Vec<Point>,
    /// x: bucket start (s), y: output tokens per second.
    pub throughput: Vec<Point>,
    pub batch: Vec<BatchPoint>,
    /// The server's running and waiting requests from its `/metrics`, per scrape (a server run
    /// with scraping on, once it has ended; empty otherwise).
    pub server: Vec<BatchPoint>,
    /// x: step end (s), y: KV blocks in use (%).
    pub kv: Vec<Point>,
    /// One bar per request, split into its phases (see `crate::bench::present::timeline`).
    pub timeline: Timeline,
}

/// Steps drawn at most; longer runs are thinned evenly (the last step always kept).
const MAX_STEP_POINTS: usize = 600;

impl ChartData {
    /// While running: the throughput series is bucketed up to the latest step, not to the
    /// last finish as `summarize` does, so the newest complete bucket shows.
    pub fn live(records: &[RequestRecord], steps: &[StepSample]) -> ChartData {
        let now = steps.last().map_or(0.0, |s| s.t_s);
        // The session's rule, so that the live chart and the saved time series agree.
        let bucket_s = crate::bench::measure::metrics::throughput_bucket_s(records, steps);
        let complete = (now / bucket_s).floor() as usize;
        let mut tokens = vec![0usize; complete];
        for &t in records.iter().flat_map(|r| &r.token_times_s) {
            if let Some(bucket) = tokens.get_mut((t / bucket_s) as usize) {
                *bucket += 1;
            }
        }
        let throughput =
            tokens.iter().enumerate().map(|(i, &n)| Point { x: i as f64 * bucket_s, y: n as f64 / bucket_s }).collect();
        ChartData {
            throughput,
            timeline: Timeline::draw(records, steps, Some(now), false),
            ..ChartData::per_request(records, steps)
        }
    }

    /// After a run: the throughput series is the one `summarize` computed.
    pub fn from_result(result: &BenchResult) -> ChartData {
        let series: &[TimePoint] = &result.metrics.series;
        let server = result.server_metrics.as_ref().map_or_else(Vec::new, |m| {
            m.samples
                .iter()
                .map(|s| BatchPoint {
                    t: s.t_s,
                    running: s.running.unwrap_or(f64::NAN),
                    waiting: s.waiting.unwrap_or(f64::NAN),
                })
                .collect()
        });
        ChartData {
            server,
            throughput: series.iter().map(|p| Point { x: p.t_s, y: p.output_tok_s }).collect(),
            timeline: Timeline::draw(&result.requests, &result.steps, None, result.config.is_server())
                .with_steady(result.metrics.steady.as_ref())
                .with_conditions(result.metrics.browser_conditions.as_ref()),
            ..ChartData::per_request(&result.requests, &result.steps)
        }
    }

    fn per_request(records: &[RequestRecord], steps: &[StepSample]) -> ChartData {
        let latency = |value: fn(&RequestRecord) -> Option<f64>| {
            let mut points: Vec<Point> =
                records.iter().filter_map(|r| Some(Point { x: r.arrival_s, y: value(r)? * 1e3 })).collect();
            points.sort_by(|a, b| a.x.total_cmp(&b.x));
            points
        };
        let stride = steps.len().div_ceil(MAX_STEP_POINTS).max(1);
        let thinned: Vec<&StepSample> = steps
            .iter()
            .enumerate()
            .filter(|(i, _)| i % stride == 0 || *i + 1 == steps.len())
            .map(|(_, s)| s)
            .collect();
        ChartData {
            ttft: latency(RequestRecord::ttft_s),
            ttfat: latency(|r| if r.reasoning_tokens > 0 { r.ttfat_s() } else { None }),
            tpot: latency(|r| r.succeeded().then(|| r.tpot_s()).flatten()),
            throughput: Vec::new(),
            timeline: Timeline::default(),
            batch: thinned
                .iter()
                .map(|s| BatchPoint { t: s.t_s, running: s.running as f64, waiting: s.waiting as f64 })
                .collect(),
            server: Vec::new(),
            kv: thinned
                .iter()
                .map(|s| Point { x: s.t_s, y: 100.0 * s.kv_blocks_used as f64 / s.kv_blocks_total.max(1) as f64 })
                .collect(),
        }
    }
}
