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
//!   chunks: `usage_mismatch`); a request the workload cancelled is no failure, and is judged by
//!   no objective (the SLO claim counts the requests not cancelled);
//! - **the user stopped the run** before it ended (requests cancelled in flight, or never sent);
//! - **the browser held the page back during the measured phase** (the page's runs): the tab was
//!   hidden, or the page's timers ran late beyond their bound (throttled), in an interval that
//!   overlaps the first measured arrival to the last measured request's end
//!   ([`crate::bench::record::conditions`]).
//!
//! Percentiles printed without an SLO make no claim and invalidate nothing; each carries its own
//! interval ([`crate::bench::base::stats::Stats::ci95`]), marked where the count cannot support one.

use serde::{Deserialize, Serialize};

use crate::bench::base::confidence::{decide, Decision, EARLY_STOPPING_CONFIDENCE};
use crate::bench::base::lang::Lang;
use crate::bench::measure::decided::Decided;
use crate::bench::measure::metrics::{BenchmarkMetrics, Slo};
use crate::bench::measure::saturation::Saturation;
use crate::bench::record::conditions::{Conditions, Interval};
use crate::bench::record::raw::RequestRecord;
use crate::bench::record::run_config::Criteria;
use crate::bench::traffic::cancel::CancelledBy;

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
    /// The user stopped the run: `cancelled` requests were in flight, `unsent` never sent.
    StoppedByUser {
        cancelled: usize,
        unsent: usize,
    },
    StreamAudit {
        requests: usize,
    },
    /// The tab was hidden from `from_s` to `to_s` (the run's clock) inside the measured phase.
    Hidden {
        from_s: f64,
        to_s: f64,
    },
    /// The page's heartbeat ran up to `late_ms` late, beyond `bound_ms`, from `from_s` to `to_s`
    /// inside the measured phase: the browser throttled the page.
    Throttled {
        from_s: f64,
        to_s: f64,
        late_ms: f64,
        bound_ms: f64,
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
            (Invalid::StoppedByUser { cancelled, unsent }, Lang::En) => format!(
                "the run was stopped before it ended: {cancelled} requests cancelled in flight, {unsent} never sent"
            ),
            (Invalid::StoppedByUser { cancelled, unsent }, Lang::Zh) => {
                format!("运行在结束前被停止：{cancelled} 个进行中的请求被取消，{unsent} 个未发送")
            }
            (Invalid::StreamAudit { requests }, Lang::En) => {
                format!("{requests} streams failed the audit: the server's usage is impossible given its chunks")
            }
            (Invalid::StreamAudit { requests }, Lang::Zh) => {
                format!("{requests} 个流未通过核查：服务器的 usage 与其分块不可能相符")
            }
            (Invalid::Hidden { from_s, to_s }, Lang::En) => format!(
                "the tab was hidden from {from_s:.1} s to {to_s:.1} s, inside the measured phase: \
                 the browser slows a hidden page"
            ),
            (Invalid::Hidden { from_s, to_s }, Lang::Zh) => {
                format!("标签页在测量阶段内被隐藏（{from_s:.1} 秒至 {to_s:.1} 秒）：浏览器会放慢隐藏的页面")
            }
            (Invalid::Throttled { from_s, to_s, late_ms, bound_ms }, Lang::En) => format!(
                "the browser throttled the page from {from_s:.1} s to {to_s:.1} s, inside the measured phase: \
                 its timer ran up to {late_ms:.0} ms late (bound {bound_ms:.0} ms)"
            ),
            (Invalid::Throttled { from_s, to_s, late_ms, bound_ms }, Lang::Zh) => format!(
                "浏览器在测量阶段内节流了页面（{from_s:.1} 秒至 {to_s:.1} 秒）：其计时器最多晚 {late_ms:.0} ms\
                 （界限 {bound_ms:.0} ms）"
            ),
        }
    }
}

/// What a run is judged on: its summary, its measured requests (the warm-up and cool-down left
/// out, on the summary's clock), its SLOs, its criteria, its saturation stop and the browser's
/// conditions the page recorded.
pub struct Evidence<'a> {
    pub metrics: &'a BenchmarkMetrics,
    pub measured: &'a [RequestRecord],
    /// Where the summary's clock starts on the run's clock (0 without a warm-up): the conditions
    /// are on the run's clock.
    pub measured_from_s: f64,
    pub slo: Option<&'a Slo>,
    pub criteria: Criteria,
    pub saturation: Option<&'a Saturation>,
    /// A `--rate max` trial stopped once its SLO attainment was decided: its claim is decided
    /// (it needs no steady window), and its unsent requests are not the user's stop.
    pub decided: Option<&'a Decided>,
    /// The page's record of the browser; `None` for the CLI.
    pub conditions: Option<&'a Conditions>,
}

/// The verdict on one run.
pub fn judge(e: &Evidence) -> Validity {
    let mut reasons = Vec::new();
    // A request the workload or the user cancelled is judged by no objective.
    let judged: Vec<&RequestRecord> = e.measured.iter().filter(|r| r.cancelled_by().is_none()).collect();
    let slo = e.slo.map(|slo| {
        let over = judged.iter().filter(|r| !slo.met_by(r)).count();
        let (measured, attainment) = (judged.len(), e.criteria.attainment);
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
    if e.criteria.steady_required && e.decided.is_none() && !e.metrics.steady.as_ref().is_some_and(|s| s.reached()) {
        reasons.push(Invalid::NoSteadyState);
    }
    if e.metrics.failed > 0 {
        reasons.push(Invalid::Failures { failed: e.metrics.failed, requests: e.metrics.num_requests });
    }
    let user = e.metrics.cancelled.get(CancelledBy::User.name()).copied().unwrap_or(0);
    // Requests never sent without a saturation stop, a decision or a fault (which fails those in
    // flight): the user stopped the run, perhaps between requests.
    let unsent = e.metrics.unsent;
    if user > 0 || (unsent > 0 && e.saturation.is_none() && e.decided.is_none() && e.metrics.failed == 0) {
        reasons.push(Invalid::StoppedByUser { cancelled: user, unsent });
    }
    if e.metrics.usage_mismatch > 0 {
        reasons.push(Invalid::StreamAudit { requests: e.metrics.usage_mismatch });
    }
    if let (Some(c), Some(phase)) = (e.conditions, measured_phase(e)) {
        for Interval { from_s, to_s } in c.hidden().into_iter().filter(|i| i.overlaps(&phase)) {
            reasons.push(Invalid::Hidden { from_s, to_s });
        }
        for (Interval { from_s, to_s }, late_ms) in c.throttled().into_iter().filter(|(i, _)| i.overlaps(&phase)) {
            reasons.push(Invalid::Throttled { from_s, to_s, late_ms, bound_ms: c.late_bound_ms });
        }
    }
    Validity { valid: reasons.is_empty(), reasons, slo }
}

/// The measured phase on the run's clock: the first measured arrival to the last moment a
/// measured request was heard of; `None` without one.
fn measured_phase(e: &Evidence) -> Option<Interval> {
    let last = |r: &RequestRecord| {
        [r.finish_s, r.token_times_s.last().copied(), r.first_token_s, Some(r.arrival_s)]
            .into_iter()
            .flatten()
            .fold(f64::NEG_INFINITY, f64::max)
    };
    let sent = e.measured.iter().filter(|r| r.arrival_s.is_finite());
    let (from_s, to_s) =
        sent.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), r| (lo.min(r.arrival_s), hi.max(last(r))));
    (from_s <= to_s).then_some(Interval { from_s: from_s + e.measured_from_s, to_s: to_s + e.measured_from_s })
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
        judge(&Evidence {
            metrics: &metrics,
            measured: records,
            measured_from_s: 0.0,
            slo,
            criteria,
            saturation: None,
            decided: None,
            conditions: None,
        })
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

    /// 459 requests meet a P99 claim. With 100 more cancelled by the workload (each with a TTFT far
    /// over the bound) the claim still rests on the 459 and the run stays VALID; the same 100
    /// cancelled by the user's stop make it INVALID for that reason alone, and unsent requests
    /// (a stop between requests) too.
    #[test]
    fn cancelled_requests_are_judged_by_no_objective_and_a_users_stop_invalidates() {
        use crate::bench::record::raw::Cancelled;
        use crate::bench::traffic::cancel::CancelledBy;
        let slo: Slo = "ttft_ms=100".parse().unwrap();
        let cancelled = |by| {
            let mut all = records(559, 0.05, 0);
            for r in &mut all[459..] {
                (r.first_token_s, r.finish_s) = (Some(r.arrival_s + 5.0), None);
                r.cancelled = Some(Cancelled { by, at_s: r.arrival_s + 5.0 });
            }
            all
        };
        let planned = verdict(&cancelled(CancelledBy::Workload), Some(&slo), Criteria::default());
        assert!(planned.valid, "{:?}", planned.reasons);
        assert_eq!((planned.slo.unwrap().measured, planned.slo.unwrap().over), (459, 0));
        let stopped = verdict(&cancelled(CancelledBy::User), Some(&slo), Criteria::default());
        assert_eq!(stopped.reasons, [Invalid::StoppedByUser { cancelled: 100, unsent: 0 }]);
        assert!(stopped.text(Lang::Zh).contains("被停止"), "{}", stopped.text(Lang::Zh));
        let all = records(459, 0.05, 0);
        let mut metrics = summarize(&all, &[], Some(&slo), 0.25);
        metrics.unsent = 1;
        let e = Evidence {
            metrics: &metrics,
            measured: &all,
            measured_from_s: 0.0,
            slo: Some(&slo),
            criteria: Criteria::default(),
            saturation: None,
            decided: None,
            conditions: None,
        };
        assert_eq!(judge(&e).reasons, [Invalid::StoppedByUser { cancelled: 0, unsent: 1 }]);
    }

    #[test]
    fn a_hidden_or_throttled_interval_inside_the_measured_phase_invalidates() {
        use crate::bench::record::conditions::{ConditionEvent, Conditions};
        // 32 requests a second apart: the measured phase is 0 s to 31.06 s on the run's clock; with
        // a warm-up the summary's clock starts later, the conditions' does not.
        let records = records(32, 0.05, 0);
        let metrics = summarize(&records, &[], None, 0.25);
        let judged = |conditions: Option<&Conditions>, measured: &[RequestRecord], measured_from_s: f64| {
            let criteria = Criteria::default();
            let e = Evidence {
                metrics: &metrics,
                measured,
                measured_from_s,
                slo: None,
                criteria,
                saturation: None,
                decided: None,
                conditions,
            };
            judge(&e)
        };
        let hidden_at = |from_s: f64, to_s: f64| Conditions {
            until_s: 40.0,
            events: vec![ConditionEvent::Hidden { at_s: from_s }, ConditionEvent::Visible { at_s: to_s }],
            ..Conditions::new()
        };
        let inside = hidden_at(10.0, 13.5);
        let v = judged(Some(&inside), &records, 0.0);
        assert!(!v.valid);
        assert_eq!(v.reasons, [Invalid::Hidden { from_s: 10.0, to_s: 13.5 }]);
        assert!(v.text(Lang::En).contains("the tab was hidden from 10.0 s to 13.5 s"), "{}", v.text(Lang::En));
        assert!(v.text(Lang::Zh).contains("标签页在测量阶段内被隐藏（10.0 秒至 13.5 秒）"), "{}", v.text(Lang::Zh));
        // Hidden after the last request ended, or never: valid.
        assert!(judged(Some(&hidden_at(35.0, 38.0)), &records, 0.0).valid);
        assert!(judged(Some(&Conditions::new()), &records, 0.0).valid);
        assert!(judged(None, &records, 0.0).valid);
        // Hidden during a warm-up: the measured requests (arrivals 20 s on, shifted to 0) start
        // after it.
        let (kept, _, excluded) = {
            let mut marked = records.clone();
            crate::bench::record::phases::Phases { warmup_s: 20.0, ..Default::default() }.mark(&mut marked);
            crate::bench::record::phases::measured(&marked, &[]).unwrap()
        };
        assert_eq!(excluded.measured_from_s, 20.0);
        assert!(judged(Some(&inside), &kept, excluded.measured_from_s).valid);
        assert!(!judged(Some(&hidden_at(25.0, 26.0)), &kept, excluded.measured_from_s).valid);
        // The heartbeat late at a hidden tab's 1 s cadence from 5 s to 7.9 s: throttled.
        let mut throttled = Conditions::new();
        throttled.add_late_ticks(&[(5.0, 5.9), (6.0, 6.9), (7.0, 7.9)], &[]);
        let v = judged(Some(&throttled), &records, 0.0);
        let [Invalid::Throttled { from_s, to_s, late_ms, bound_ms }] = v.reasons[..] else { panic!("{:?}", v.reasons) };
        assert_eq!((from_s, to_s, late_ms.round(), bound_ms), (5.0, 7.9, 900.0, 250.0));
        assert!(v.text(Lang::En).contains("throttled the page from 5.0 s to 7.9 s"), "{}", v.text(Lang::En));
        assert!(v.text(Lang::Zh).contains("节流"), "{}", v.text(Lang::Zh));
    }
}
