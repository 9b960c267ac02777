//! Whether a run can be trusted: VALID or INVALID, with every reason, as MLPerf LoadGen stamps
//! each result of its Server scenario. A run is INVALID when:
//!
//! - **its SLO claim is undecided**: with an SLO, the claim is "a share `attainment` of requests
//!   meet every objective" — a percentile claim. LoadGen's early-stopping test
//!   ([`crate::bench::base::confidence::decide`], at 99% confidence) says whether the measured
//!   requests support it, refute it, or are too few to tell; too few is invalid (16 requests
//!   cannot support a p99 claim: with none over it, that takes 459). A claim refuted is a valid
//!   finding: the SLO was missed;
//! - **its measured phase is shorter than a stated minimum** (`--min-duration-s`, LoadGen's 600 s
//!   as `mlperf`; none by default), measured on scheduled time: the first to the last planned
//!   arrival of the measured requests;
//! - **the load was not delivered**: the client sent late beyond its bound (the delivered load's
//!   `bent`), the sends do not fit the requested arrival process (its goodness-of-fit test), or the
//!   rate was stopped early because the target could not sustain it (requests never sent);
//! - **a `--rate max` trial reached no steady state**;
//! - **requests failed**, or **a stream broke the audit** (a server's usage impossible given its
//!   chunks: `usage_mismatch`).
//!
//! Percentiles printed without an SLO make no claim and invalidate nothing; each carries its own
//! interval ([`crate::bench::base::stats::Stats::ci95`]), marked where the count cannot support one.

use serde::{Deserialize, Serialize};

use crate::bench::base::confidence::{decide, Decision, EARLY_STOPPING_CONFIDENCE};
use crate::bench::base::lang::Lang;
use crate::bench::measure::metrics::{BenchmarkMetrics, Slo};
use crate::bench::measure::saturation::Saturation;
use crate::bench::record::raw::RequestRecord;
use crate::bench::record::run_config::Criteria;

/// A run's verdict on itself.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Validity {
    pub valid: bool,
    /// Every reason it is not; empty when valid.
    pub reasons: Vec<Invalid>,
    /// The SLO's claim and what the measured requests say of it; absent without an SLO.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo: Option<SloClaim>,
}

/// "A share `attainment` of requests meet every SLO", judged by early stopping.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct SloClaim {
    pub attainment: f64,
    /// Measured requests, failed ones included.
    pub measured: usize,
    /// Of them, those that missed an objective or failed.
    pub over: usize,
    pub decision: Decision,
}

/// Why a run is INVALID.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum Invalid {
    /// Too few requests for the SLO's percentile: `needed` would support it were every further
    /// one within every objective.
    SloUndecided {
        attainment: f64,
        measured: usize,
        over: usize,
        needed: usize,
    },
    TooShort {
        measured_s: f64,
        min_s: f64,
    },
    /// The client sent later than due beyond the bound at p99.
    LoadBent {
        p99_ms: f64,
        bound_ms: f64,
    },
    /// The sends do not fit the requested arrival process.
    LoadMisfit {
        test: String,
        p_value: f64,
        alpha: f64,
    },
    /// The rate was ended early: the target could not sustain it.
    StoppedEarly {
        at_s: f64,
    },
    /// A `--rate max` trial without a steady state.
    NoSteadyState,
    Failures {
        failed: usize,
        requests: usize,
    },
    StreamAudit {
        requests: usize,
    },
}

impl Invalid {
    pub fn text(&self, lang: Lang) -> String {
        let pct = |share: f64| format!("{}", (share * 1000.0).round() / 10.0);
        match (self, lang) {
            (Invalid::SloUndecided { attainment, measured, over, needed }, Lang::En) => format!(
                "too few requests for the SLO's P{}: {measured} measured, {over} over it; at least {needed} \
                 would support it (early stopping at 99% confidence)",
                pct(*attainment)
            ),
            (Invalid::SloUndecided { attainment, measured, over, needed }, Lang::Zh) => format!(
                "请求太少，无法支持 SLO 的 P{}：测得 {measured} 个，其中 {over} 个未达标；至少需要 {needed} 个\
                 （提前停止检验，置信度 99%）",
                pct(*attainment)
            ),
            (Invalid::TooShort { measured_s, min_s }, Lang::En) => {
                format!("the measured phase spans {measured_s:.1} s of arrivals, below the minimum {min_s:.0} s")
            }
            (Invalid::TooShort { measured_s, min_s }, Lang::Zh) => {
                format!("测量阶段的到达只跨 {measured_s:.1} 秒，少于最短 {min_s:.0} 秒")
            }
            (Invalid::LoadBent { p99_ms, bound_ms }, Lang::En) => {
                format!("the client sent late: p99 {p99_ms:.1} ms after due, above the {bound_ms} ms bound")
            }
            (Invalid::LoadBent { p99_ms, bound_ms }, Lang::Zh) => {
                format!("客户端发送滞后：P99 比应发送时间晚 {p99_ms:.1} ms，超过 {bound_ms} ms 的界限")
            }
            (Invalid::LoadMisfit { test, p_value, alpha }, Lang::En) => {
                format!("the sends do not fit the requested arrivals: {test} (p {p_value:.2e} < α {alpha})")
            }
            (Invalid::LoadMisfit { test, p_value, alpha }, Lang::Zh) => {
                format!("发送时间不符合要求的到达过程：{test}（p {p_value:.2e} < α {alpha}）")
            }
            (Invalid::StoppedEarly { at_s }, Lang::En) => {
                format!("the rate was stopped at {at_s:.1} s: the target could not sustain it, the rest was never sent")
            }
            (Invalid::StoppedEarly { at_s }, Lang::Zh) => {
                format!("该速率在 {at_s:.1} 秒时被停止：目标无法维持，其余请求未发送")
            }
            (Invalid::NoSteadyState, Lang::En) => "no steady state: the search cannot decide on this run".into(),
            (Invalid::NoSteadyState, Lang::Zh) => "未达到稳态：搜索无法据此判断".into(),
            (Invalid::Failures { failed, requests }, Lang::En) => format!("{failed} of {requests} requests failed"),
            (Invalid::Failures { failed, requests }, Lang::Zh) => format!("{requests} 个请求中 {failed} 个失败"),
            (Invalid::StreamAudit { requests }, Lang::En) => {
                format!("{requests} streams failed the audit: the server's usage is impossible given its chunks")
            }
            (Invalid::StreamAudit { requests }, Lang::Zh) => {
                format!("{requests} 个流未通过核查：服务器的 usage 与其分块不可能相符")
            }
        }
    }
}

/// What a run is judged on: its summary, its measured requests (the warm-up and cool-down left
/// out, on the summary's clock), its SLOs, its criteria and its saturation stop.
pub struct Evidence<'a> {
    pub metrics: &'a BenchmarkMetrics,
    pub measured: &'a [RequestRecord],
    pub slo: Option<&'a Slo>,
    pub criteria: Criteria,
    pub saturation: Option<&'a Saturation>,
}

/// The verdict on one run.
pub fn judge(e: &Evidence) -> Validity {
    let mut reasons = Vec::new();
    let slo = e.slo.map(|slo| {
        let over = e.measured.iter().filter(|r| !slo.met_by(r)).count();
        let (measured, attainment) = (e.measured.len(), e.criteria.attainment);
        SloClaim { attainment, measured, over, decision: decide(measured, over, attainment, EARLY_STOPPING_CONFIDENCE) }
    });
    if let Some(SloClaim { attainment, measured, over, decision: Decision::Undecided { needed } }) = slo {
        reasons.push(Invalid::SloUndecided { attainment, measured, over, needed });
    }
    if let Some(min_s) = e.criteria.min_duration_s {
        let arrivals = e.measured.iter().map(|r| r.arrival_s).filter(|a| a.is_finite());
        let (first, last) = arrivals.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), a| (lo.min(a), hi.max(a)));
        let measured_s = (last - first).max(0.0);
        if measured_s < min_s {
            reasons.push(Invalid::TooShort { measured_s, min_s });
        }
    }
    if let Some(d) = &e.metrics.delivered {
        if d.bent {
            reasons.push(Invalid::LoadBent { p99_ms: d.beyond_plan_ms.p99, bound_ms: d.bound_ms });
        }
        if let Some(f) = d.fit.as_ref().filter(|f| f.rejected) {
            reasons.push(Invalid::LoadMisfit { test: f.test.clone(), p_value: f.p_value, alpha: f.alpha });
        }
    }
    if let Some(s) = e.saturation {
        reasons.push(Invalid::StoppedEarly { at_s: s.at_s });
    }
    if e.criteria.steady_required && !e.metrics.steady.as_ref().is_some_and(|s| s.reached()) {
        reasons.push(Invalid::NoSteadyState);
    }
    if e.metrics.failed > 0 {
        reasons.push(Invalid::Failures { failed: e.metrics.failed, requests: e.metrics.num_requests });
    }
    if e.metrics.usage_mismatch > 0 {
        reasons.push(Invalid::StreamAudit { requests: e.metrics.usage_mismatch });
    }
    Validity { valid: reasons.is_empty(), reasons, slo }
}

impl Validity {
    /// "VALID", or "INVALID: reason; reason", in `lang`.
    pub fn text(&self, lang: Lang) -> String {
        let reasons: Vec<String> = self.reasons.iter().map(|r| r.text(lang)).collect();
        match (self.valid, lang) {
            (true, Lang::En) => "VALID".into(),
            (true, Lang::Zh) => "有效".into(),
            (false, Lang::En) => format!("INVALID: {}", reasons.join("; ")),
            (false, Lang::Zh) => format!("无效：{}", reasons.join("；")),
        }
    }

    /// What the SLO's claim came to, one line: met, missed, or (INVALID above) undecided.
    pub fn slo_text(&self, lang: Lang) -> Option<String> {
        let c = self.slo?;
        let p = (c.attainment * 1000.0).round() / 10.0;
        let head = match lang {
            Lang::En => format!("SLO at P{p}: {} of {} requests over it", c.over, c.measured),
            Lang::Zh => format!("SLO（P{p}）：{} 个请求中 {} 个未达标", c.measured, c.over),
        };
        let tail = match (c.decision, lang) {
            (Decision::Met, Lang::En) => "met (supported at 99% confidence)".to_string(),
            (Decision::Met, Lang::Zh) => "达标（置信度 99%）".to_string(),
            (Decision::Missed, Lang::En) => "missed (refuted at 99% confidence)".to_string(),
            (Decision::Missed, Lang::Zh) => "未达标（置信度 99%）".to_string(),
            (Decision::Undecided { needed }, Lang::En) => format!("undecided (needs {needed})"),
            (Decision::Undecided { needed }, Lang::Zh) => format!("无法判断（需要 {needed} 个）"),
        };
        Some(match lang {
            Lang::En => format!("{head}: {tail}"),
            Lang::Zh => format!("{head}：{tail}"),
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::bench::base::confidence::Decision;
    use crate::bench::base::lang::Lang;
    use crate::bench::measure::metrics::{summarize, Slo};
    use crate::bench::record::raw::RequestRecord;
    use crate::bench::record::run_config::Criteria;
    use crate::bench::verdict::validity::{judge, Evidence, Invalid};

    /// `n` requests a second apart, each with its first token `ttft_s` after arrival, the
    /// first `failed` of them failed.
    fn records(n: usize, ttft_s: f64, failed: usize) -> Vec<RequestRecord> {
        (0..n)
            .map(|i| {
                let t = i as f64;
                let mut r = RequestRecord {
                    id: i as u64,
                    arrival_s: t,
                    scheduled_s: Some(t),
                    first_token_s: Some(t + ttft_s),
                    token_times_s: vec![t + ttft_s, t + ttft_s + 0.01],
                    finish_s: Some(t + ttft_s + 0.01),
                    prompt_len: 8,
                    output_len: 2,
                    ..RequestRecord::default()
                };
                if i < failed {
                    (r.error, r.first_token_s, r.finish_s, r.output_len) = (Some("timeout".into()), None, None, 0);
                    r.token_times_s.clear();
                }
                r
            })
            .collect()
    }

    fn verdict(records: &[RequestRecord], slo: Option<&Slo>, criteria: Criteria) -> super::Validity {
        let metrics = summarize(records, &[], slo, 0.25);
        judge(&Evidence { metrics: &metrics, measured: records, slo, criteria, saturation: None })
    }

    #[test]
    fn a_p99_claim_needs_early_stoppings_count() {
        let slo: Slo = "ttft_ms=100".parse().unwrap();
        let few = verdict(&records(16, 0.05, 0), Some(&slo), Criteria::default());
        assert!(!few.valid);
        assert_eq!(few.reasons, [Invalid::SloUndecided { attainment: 0.99, measured: 16, over: 0, needed: 459 }]);
        assert!(few.text(Lang::En).starts_with("INVALID: too few requests for the SLO's P99: 16 measured"));
        assert!(few.text(Lang::Zh).starts_with("无效：请求太少"), "{}", few.text(Lang::Zh));
        let enough = verdict(&records(459, 0.05, 0), Some(&slo), Criteria::default());
        assert!(enough.valid, "{:?}", enough.reasons);
        assert_eq!(enough.slo.unwrap().decision, Decision::Met);
        // Every request over the bound: refuted at 16 already — a valid finding, the SLO missed.
        let missed = verdict(&records(16, 0.5, 0), Some(&slo), Criteria::default());
        assert!(missed.valid && missed.slo.unwrap().decision == Decision::Missed);
        assert!(missed.slo_text(Lang::En).unwrap().contains("missed"), "{:?}", missed.slo_text(Lang::En));
        // At P90 (attainment 0.9), 44 suffice with none over.
        let p90 = Criteria { attainment: 0.9, ..Criteria::default() };
        assert!(verdict(&records(44, 0.05, 0), Some(&slo), p90).valid);
        assert!(!verdict(&records(43, 0.05, 0), Some(&slo), p90).valid);
        // Without an SLO there is no claim: 16 requests are valid.
        let plain = verdict(&records(16, 0.05, 0), None, Criteria::default());
        assert!(plain.valid && plain.slo.is_none() && plain.text(Lang::En) == "VALID");
    }

    #[test]
    fn failures_a_short_phase_and_a_missing_steady_state_are_reasons() {
        let strict = Criteria { min_duration_s: Some(600.0), steady_required: true, ..Criteria::default() };
        let v = verdict(&records(32, 0.05, 2), None, strict);
        assert!(!v.valid);
        assert_eq!(
            v.reasons,
            [
                Invalid::TooShort { measured_s: 31.0, min_s: 600.0 },
                Invalid::NoSteadyState,
                Invalid::Failures { failed: 2, requests: 32 },
            ]
        );
        let long = Criteria { min_duration_s: Some(31.0), ..Criteria::default() };
        assert!(verdict(&records(32, 0.05, 0), None, long).valid);
    }
}
