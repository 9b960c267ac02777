//! What limits this run: first whether the offered load was beyond what the target serves (the
//! outstanding requests grow while requests arrive: [`crate::bench::measure::saturation::Load`]), then the
//! loaded latencies against one isolated request's (the baseline). Each verdict carries the
//! numbers that triggered it and what to try next, in English or Chinese.

use serde::{Deserialize, Serialize};

use crate::bench::base::lang::Lang;
use crate::bench::base::stats::nan_as_null;
use crate::bench::measure::metrics::BenchmarkMetrics;
use crate::bench::measure::saturation::Load;
use crate::bench::measure::server_metrics::ServerSummary;

/// Prefill-bound: TTFT p50 above this multiple of the baseline TTFT…
pub const PREFILL_TTFT_RATIO: f64 = 3.0;
/// …while TPOT p50 stays below this multiple of the baseline TPOT; above it, decode-bound.
pub const DECODE_TPOT_RATIO: f64 = 1.5;
/// Under-utilised: TTFT and TPOT p50 both within this multiple of the baseline…
pub const NEAR_BASELINE_RATIO: f64 = 1.5;
/// …and the GPU busy for less than this share of the run.
pub const LOW_BUSY_FRACTION: f64 = 0.5;

/// Isolated requests, measured on the same target after a warm-up and before the run: their
/// median TTFT and TPOT (`bench::run::session`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Baseline {
    #[serde(with = "nan_as_null")]
    pub ttft_ms: f64,
    #[serde(with = "nan_as_null")]
    pub tpot_ms: f64,
    /// How many requests alone the medians are of (results saved before it: one, unwarmed).
    #[serde(default = "one")]
    pub requests: usize,
    /// Why the baseline request failed (its latencies are then null, and there is no diagnosis).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Baseline {
    /// The baseline request failed with `error`: recorded, and the run goes on.
    pub fn failed(error: String) -> Self {
        Baseline { ttft_ms: f64::NAN, tpot_ms: f64::NAN, requests: 0, error: Some(error) }
    }

    /// Seconds one request of `outputs` tokens (at least 2) takes alone: its TTFT, then its TPOT
    /// for each later token; `None` for a failed baseline or one that took no time.
    pub fn alone_s(&self, outputs: usize) -> Option<f64> {
        let alone_s = (self.ttft_ms + self.tpot_ms * (outputs.max(2) - 1) as f64) / 1000.0;
        (self.error.is_none() && alone_s.is_finite() && alone_s > 0.0).then_some(alone_s)
    }
}

fn one() -> usize {
    1
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
    // The latencies of the steady window when the run reached one ([`crate::bench::measure::steady`]): the
    // ramp-up's empty queue and the drain's emptying one are not the load the run was asked for.
    let steady = m.steady.as_ref().and_then(|s| Some((s, s.summary.as_deref()?)));
    let lat = steady.map_or(m, |(_, summary)| summary);
    let (ttft, tpot) = (lat.ttft_ms.p50, lat.tpot_ms.p50);
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
    let busy = lat.gpu_busy_fraction * 100.0;
    let busy_line = say(format!("GPU busy {busy:.0}% of the run"), format!("GPU 忙碌时间占 {busy:.0}%"));
    let unmeasured_busy = busy.is_nan().then(|| busy_line.clone());

    let load = m.load.as_ref();
    let (verdict, evidence) = if let Some(load) = load.filter(|l| l.saturated == Some(true)) {
        (Verdict::Saturated, saturation_lines(load, lang))
    } else if ttft_ratio > PREFILL_TTFT_RATIO && tpot_low(DECODE_TPOT_RATIO) {
        (Verdict::PrefillBound, vec![ttft_line, tpot_line])
    } else if tpot_ratio > DECODE_TPOT_RATIO {
        (Verdict::DecodeBound, vec![tpot_line, ttft_line])
    } else if ttft_ratio <= NEAR_BASELINE_RATIO
        && tpot_low(NEAR_BASELINE_RATIO)
        && lat.gpu_busy_fraction < LOW_BUSY_FRACTION
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
    // Saturation is judged over the whole run (a growing queue has no steady window); the
    // latencies were the steady window's where there was one, and the evidence says which.
    if let Some((st, _)) = steady.filter(|_| verdict != Verdict::Saturated) {
        let (from, to, n) = (st.from_s, st.to_s, st.requests);
        evidence.push(say(
            format!("latencies over the steady window, {from:.2}–{to:.2} s ({n} requests; ramp-up and drain left out)"),
            format!("延迟取自稳态窗口 {from:.2}–{to:.2} 秒（{n} 个请求；不含爬升与排空阶段）"),
        ));
    }
    if let Some(load) = load.filter(|l| l.saturated == Some(false)) {
        evidence.push(say(
            format!(
                "offered {:.2} req/s, served {:.2} req/s; no queue grew while requests arrived",
                load.offered_rps, load.served_rps
            ),
            format!("到达 {:.2} 请求/秒，服务 {:.2} 请求/秒；到达期间队列没有增长", load.offered_rps, load.served_rps),
        ));
    }
    // An offered rate off the asked one: said, with why (a finite random draw).
    evidence.extend(load.and_then(|l| l.draw_note(lang)));
    // The server's own view, when its /metrics were scraped: where the waiting happened.
    if let Some(server) = &m.server {
        evidence.extend(server_line(server, lang));
    }
    // Requests per second the target sustained: the saturation model's served rate; without it
    // (results saved before it), output tok/s over the mean output length.
    let capacity =
        load.map_or(m.output_throughput / (m.total_output_tokens as f64 / m.completed as f64), |l| l.served_rps);
    Diagnosis { verdict, evidence, advice: advice(verdict, lang, capacity) }
}

/// What the server's `/metrics` said of its queue: requests waiting for admission there (its
/// batch was full: admission-bound), or none (the wait, if any, was elsewhere).
fn server_line(s: &ServerSummary, lang: Lang) -> Option<String> {
    let waiting = s.max_waiting?;
    let source = s.waiting_source.as_deref().unwrap_or("/metrics");
    let running = s.max_running.map_or(String::new(), |r| format!("{r:.0}"));
    Some(match (lang, waiting >= 1.0) {
        (Lang::En, true) => format!(
            "the server's own queue ({source}) grew to {waiting:.0} with {running} running: requests waited there for admission (admission-bound)"
        ),
        (Lang::En, false) => {
            format!("the server's own queue ({source}) stayed empty ({running} running at most): it admitted every request")
        }
        (Lang::Zh, true) => format!("服务端自己的队列（{source}）增长到 {waiting:.0}，运行中 {running}：请求在那里等待准入（准入受限）"),
        (Lang::Zh, false) => format!("服务端自己的队列（{source}）始终为空（最多 {running} 个运行中）：每个请求都被立即准入"),
    })
}

/// The evidence of a saturated run: how far beyond capacity, the queue's growth, the waiting.
fn saturation_lines(load: &Load, lang: Lang) -> Vec<String> {
    let (offered, served, overload) = (load.offered_rps, load.served_rps, load.overload());
    let (ttft_growth, window) = (load.ttft_growth, load.arrival_window_s);
    let mut lines = match lang {
        Lang::En => vec![
            format!(
                "offered {offered:.2} req/s, served {served:.2} req/s: the load was {overload:.1}x what the target \
                 serves"
            ),
            format!(
                "TTFT grew by {ttft_growth:.2} s per second of arrivals over {window:.1} s: each request waited for \
                 those before it"
            ),
        ],
        Lang::Zh => vec![
            format!("到达 {offered:.2} 请求/秒，服务 {served:.2} 请求/秒：负载为服务能力的 {overload:.1} 倍"),
            format!("在 {window:.1} 秒的到达期间，每秒到达使 TTFT 增加 {ttft_growth:.2} 秒：每个请求都在等前面的请求"),
        ],
    };
    if load.growth_rps.is_finite() {
        let (growth, outstanding) = (load.growth_rps, load.outstanding_at_last_arrival);
        lines.push(match lang {
            Lang::En => format!(
                "requests outstanding grew by {growth:.1}/s while requests arrived ({outstanding} at the last arrival)"
            ),
            Lang::Zh => format!("到达期间未完成请求数每秒增长 {growth:.1}（最后一个请求到达时有 {outstanding} 个）"),
        });
    }
    if let Some(share) = load.waiting_share {
        let share = share * 100.0;
        lines.push(match lang {
            Lang::En => format!("half the requests spent at least {share:.0}% of their TTFT waiting to be scheduled"),
            Lang::Zh => format!("半数请求至少 {share:.0}% 的 TTFT 花在等待调度上"),
        });
    }
    lines
}

/// What to try next, in the spirit of the classic tuning guides.
fn advice(verdict: Verdict, lang: Lang, capacity_rps: f64) -> Vec<String> {
    let lines: &[&str] = match (verdict, lang) {
        (Verdict::Saturated, Lang::En) => &[
            "Requests arrive faster than they are served: the capacity is about {capacity} req/s.",
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::measure::metrics::{stats, summarize};
    use crate::bench::measure::saturation::tests::queue_run;

    const BASE: Baseline = Baseline { ttft_ms: 100.0, tpot_ms: 10.0, requests: 3, error: None };

    /// Ten requests of 100 output tokens at 100 output tok/s.
    fn metrics(ttft_p50: f64, tpot_p50: f64, busy: f64) -> BenchmarkMetrics {
        let mut m = summarize(&[], &[], None, 0.25);
        (m.completed, m.total_output_tokens, m.output_throughput) = (10, 1000, 100.0);
        (m.ttft_ms, m.tpot_ms, m.gpu_busy_fraction) = (stats(&[ttft_p50]), stats(&[tpot_p50]), busy);
        m
    }

    #[test]
    fn the_servers_own_queue_is_cited_when_its_metrics_were_scraped() {
        let mut m = metrics(120.0, 11.0, f64::NAN);
        let server = ServerSummary {
            samples: 9,
            max_running: Some(4.0),
            max_waiting: Some(37.0),
            waiting_source: Some("vllm:num_requests_waiting".into()),
            ..ServerSummary::default()
        };
        m.server = Some(server.clone());
        let d = diagnose_in(&m, &BASE, Lang::En);
        let line = d.evidence.last().unwrap();
        assert!(
            line.contains("(vllm:num_requests_waiting) grew to 37 with 4 running") && line.contains("admission-bound"),
            "{d:?}"
        );
        m.server = Some(ServerSummary { max_waiting: Some(0.0), ..server });
        assert!(diagnose_in(&m, &BASE, Lang::Zh).evidence.last().unwrap().contains("始终为空"));
        m.server = None;
        assert!(!diagnose_in(&m, &BASE, Lang::En).evidence.iter().any(|l| l.contains("server's own queue")));
    }

    #[test]
    fn a_run_beyond_capacity_is_saturated_whatever_its_latencies_say() {
        // The run: 64 requests at 50 req/s against an engine serving ~8 req/s. Its TPOT
        // also rose (2x the baseline), which alone reads "decode-bound".
        let records = queue_run(64, 50.0, 8, 1.0);
        let m = BenchmarkMetrics { load: Load::of(&records), ..metrics(3100.0, 20.0, 1.0) };
        let d = diagnose(&m, &BASE);
        assert_eq!(d.verdict, Verdict::Saturated, "{d:?}");
        assert!(d.evidence[0].contains("served 7.8") && d.evidence[0].contains("x what the target serves"), "{d:?}");
        assert!(d.evidence[1].contains("TTFT grew by"), "{d:?}");
        assert!(d.evidence[2].contains("outstanding grew by"), "{d:?}");
        assert!(d.evidence[3].contains("waiting to be scheduled"), "{d:?}");
        assert!(d.advice[0].contains("about 7.8"), "{:?}", d.advice);
        // Well below capacity, the same latencies read as they did: not saturated, and said so.
        let m = BenchmarkMetrics { load: Load::of(&queue_run(200, 2.0, 8, 1.0)), ..metrics(100.0, 20.0, 1.0) };
        let d = diagnose(&m, &BASE);
        assert_eq!(d.verdict, Verdict::DecodeBound, "{d:?}");
        assert!(d.evidence.last().unwrap().contains("no queue grew"), "{d:?}");
        // Without a load (results saved before it), no saturation verdict and the old capacity.
        let d = diagnose(&metrics(900.0, 10.0, 1.0), &BASE);
        assert_ne!(d.verdict, Verdict::Saturated);
        let zh =
            diagnose_in(&BenchmarkMetrics { load: Load::of(&records), ..metrics(3100.0, 20.0, 1.0) }, &BASE, Lang::Zh);
        assert!(zh.evidence[0].contains("倍") && zh.advice[0].contains("请求/秒"), "{zh:?}");
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
            let d = diagnose(&metrics(ttft, tpot, busy), &BASE);
            assert_eq!(d.verdict, want, "ttft {ttft} tpot {tpot} busy {busy}");
            assert!(!d.evidence.is_empty() && !d.advice.is_empty());
        }
        let prefill = diagnose(&metrics(400.0, 11.0, 0.9), &BASE);
        assert!(prefill.evidence[0].contains("4.0x"), "{:?}", prefill.evidence);
        let decode = diagnose(&metrics(100.0, 20.0, 0.9), &BASE);
        assert!(decode.advice[0].contains("NOT"));
    }

    #[test]
    fn the_steady_window_decides_where_the_run_reached_one() {
        use crate::bench::measure::steady::SteadyState;
        // The whole run reads prefill-bound (its drain's last requests waited behind long
        // prompts); over the steady window TTFT is near the baseline and TPOT is twice it.
        let steady = |summary: Option<BenchmarkMetrics>| SteadyState {
            from_s: 2.5,
            to_s: 40.0,
            level: 6.0,
            requests: 150,
            never: summary.is_none().then(|| "the queue grew".to_string()),
            never_why: None,
            summary: summary.map(Box::new),
        };
        let whole = metrics(400.0, 11.0, 0.9);
        assert_eq!(diagnose(&whole, &BASE).verdict, Verdict::PrefillBound);
        let m = BenchmarkMetrics { steady: Some(steady(Some(metrics(120.0, 20.0, 0.9)))), ..whole.clone() };
        let d = diagnose(&m, &BASE);
        assert_eq!(d.verdict, Verdict::DecodeBound, "{d:?}");
        assert!(d.evidence[0].contains("TPOT p50 20.0 ms = 2.0x"), "{d:?}");
        assert!(d.evidence.iter().any(|l| l.contains("steady window, 2.50–40.00 s (150 requests")), "{d:?}");
        assert!(diagnose_in(&m, &BASE, Lang::Zh).evidence.iter().any(|l| l.contains("稳态窗口")));
        // A run that never reached one is judged over the whole run, and says nothing of a window.
        let m = BenchmarkMetrics { steady: Some(steady(None)), ..whole };
        let d = diagnose(&m, &BASE);
        assert_eq!(d.verdict, Verdict::PrefillBound, "{d:?}");
        assert!(!d.evidence.iter().any(|l| l.contains("steady window")), "{d:?}");
    }

    #[test]
    fn chinese_labels_and_advice() {
        let d = diagnose_in(&metrics(400.0, 11.0, 0.9), &BASE, Lang::Zh);
        assert!(d.advice[0].contains("分块预填充"));
        assert!(d.evidence[0].contains("倍"));
        assert_eq!(Verdict::Healthy.label(Lang::Zh), "健康 (Healthy)");
        assert_eq!("zh".parse::<Lang>().unwrap(), Lang::Zh);
        assert!("fr".parse::<Lang>().is_err());
    }
}
