//! The per-request timeline: one bar per request over time, split into its phases — waiting
//! (arrival → first scheduled), prefill (scheduled → first token), decode (first token → finish)
//! — with preemptions and failures marked and the engine's steps as ticks below the bars.
//!
//! Drawn as a handful of SVG paths (one per phase, however many requests), so that a run of
//! 1,000 requests is 7 elements to update, not 3,000. The geometry is a pure function of the
//! records; the page (`web::page::charts`) and the HTML report ([`crate::bench::present::html`]) both draw it.

use std::fmt::Write;

use crate::bench::base::lang::Lang;
use crate::bench::base::stats::nice_step;
use crate::bench::measure::steady::SteadyState;
use crate::bench::record::conditions::Conditions;
use crate::bench::record::raw::{RequestRecord, StepSample};

/// Width of the drawing, in SVG user units (the page scales it to its card).
pub const WIDTH: f64 = 960.0;
/// Left and right margin, so that the first and last axis labels fit.
const PAD: f64 = 28.0;
/// Row height when there are few requests; with many, the bars share `MAX_BARS_HEIGHT`.
const ROW: f64 = 12.0;
const MAX_BARS_HEIGHT: f64 = 360.0;
/// Below the bars: a gap, the strip of step ticks, the axis labels.
const STEP_STRIP: f64 = 8.0;
const AXIS: f64 = 22.0;
/// Thinner bars than this are widened to it, so that a short phase stays visible.
const MIN_BAR: f64 = 0.5;

/// Colours of the phases (the page's stylesheet and the HTML report use the same).
pub const WAITING: &str = "#f59e0b";
pub const PREFILL: &str = "#8b5cf6";
pub const DECODE: &str = "#3b82f6";
pub const MARK: &str = "#e11d48";
/// A request cancelled (by the user, the workload or a stopped run): neither finished nor failed.
pub const CANCEL: &str = "#d97706";
/// The steady window's band, drawn faint behind the bars.
pub const STEADY: &str = "#10b981";
pub const STEADY_OPACITY: &str = "0.18";
/// The bands over the intervals in which the browser held the page back: hidden, throttled.
pub const HELD: &str = "#64748b";
pub const HELD_OPACITY: &str = "0.28";
/// The same band's colour in a legend's swatch, as it shows over white.
pub const HELD_SWATCH: &str = "rgba(100, 116, 139, 0.4)";

/// The geometry of one timeline: path data in SVG user units, `WIDTH` × [`Timeline::height`].
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Timeline {
    /// Requests drawn: one row each (requests never sent are left out).
    pub rows: usize,
    /// The x axis spans 0 to this many seconds from the run's start.
    pub end_s: f64,
    /// Height of the bars' area; the whole drawing is [`Timeline::height`].
    pub bars_height: f64,
    /// The run measured a server: no scheduled time, so `waiting` is "until first token" and
    /// there is no prefill phase.
    pub server: bool,
    /// One rectangle per request and phase (`M x y h w v h h -w z`).
    pub waiting: String,
    pub prefill: String,
    pub decode: String,
    /// A vertical mark across the row at each preemption, and at the end of each failed request.
    pub marks: String,
    /// A vertical mark across the row where a request was cancelled (its bar ends there).
    #[serde(default)]
    pub cancels: String,
    /// One tick per engine step end (at most one per unit of width).
    pub steps: String,
    /// A band behind the bars over the run's steady window ([`crate::bench::measure::steady`]), from the
    /// end of the ramp-up to the last arrival; empty while running and for a run that never
    /// reached one.
    #[serde(default)]
    pub steady: String,
    /// Bands over the intervals in which the tab was hidden or the page's timers throttled
    /// ([`crate::bench::record::conditions`]), each labelled; empty for the CLI's runs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub held: Vec<HeldBand>,
    /// Bars drawn per phase, and marks, for tests and `data-` attributes.
    pub counts: Counts,
    /// Axis labels: x position and seconds.
    pub ticks: Vec<(f64, f64)>,
}

/// One interval in which the browser held the page back: where it is drawn and why.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct HeldBand {
    /// Left edge and width in SVG user units, over the bars' whole height.
    pub x: f64,
    pub w: f64,
    pub hidden: bool,
}

impl HeldBand {
    /// The rectangle's path data, `height` tall.
    pub fn path(&self, height: f64) -> String {
        format!("M{:.1} 0h{:.1}v{height:.2}h{:.1}z", self.x, self.w, -self.w)
    }

    /// Its label in `lang`, drawn at its top left.
    pub fn label(&self, lang: Lang) -> &'static str {
        let l = labels(lang, false);
        if self.hidden {
            l.hidden
        } else {
            l.throttled
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Counts {
    pub waiting: usize,
    pub prefill: usize,
    pub decode: usize,
    pub preemptions: usize,
    pub failed: usize,
    #[serde(default)]
    pub cancelled: usize,
    pub steps: usize,
}

impl Timeline {
    /// The timeline of `records` and `steps`. `now_s`: while running, the current time, to which
    /// unfinished requests extend (and the axis with them); after a run, `None`, and an
    /// unfinished request ends at its last known time. `server`: merge waiting and prefill.
    pub fn draw(records: &[RequestRecord], steps: &[StepSample], now_s: Option<f64>, server: bool) -> Timeline {
        let sent: Vec<&RequestRecord> = records.iter().filter(|r| r.arrival_s.is_finite()).collect();
        let latest = |r: &RequestRecord| {
            let cancelled = r.cancelled.map(|c| c.at_s);
            [r.finish_s, cancelled, r.token_times_s.last().copied(), r.first_token_s, r.scheduled_s, Some(r.arrival_s)]
                .into_iter()
                .flatten()
                .fold(f64::NEG_INFINITY, f64::max)
        };
        let end_s = sent
            .iter()
            .map(|r| latest(r))
            .chain(steps.iter().map(|s| s.t_s))
            .chain(now_s)
            .filter(|t| t.is_finite())
            .fold(0.0, f64::max);
        let rows = sent.len();
        let bars_height = (rows as f64 * ROW).min(MAX_BARS_HEIGHT);
        let mut t = Timeline { rows, end_s, bars_height, server, ..Timeline::default() };
        if rows == 0 {
            return t;
        }
        let scale = (WIDTH - 2.0 * PAD) / end_s.max(1e-9);
        let x = |s: f64| PAD + s.clamp(0.0, end_s) * scale;
        let row = bars_height / rows as f64;
        // A gap between rows while they are tall enough to show one.
        let bar = if row >= 4.0 { row - 1.0 } else { row };
        for (i, r) in sent.iter().enumerate() {
            let y = i as f64 * row;
            let ended = r.finish_s.or(r.cancelled.map(|c| c.at_s));
            let end = ended.or(now_s.filter(|_| r.error.is_none())).unwrap_or_else(|| latest(r));
            let phase = |path: &mut String, count: &mut usize, from: f64, to: f64| {
                if from.is_finite() && to.is_finite() && to >= from {
                    let w = (x(to) - x(from)).max(MIN_BAR);
                    let _ = write!(path, "M{:.1} {:.2}h{w:.1}v{bar:.2}h{:.1}z", x(from), y, -w);
                    *count += 1;
                }
            };
            let first = r.first_token_s.unwrap_or(end);
            if server {
                phase(&mut t.waiting, &mut t.counts.waiting, r.arrival_s, first);
            } else {
                let scheduled = r.scheduled_s.unwrap_or(end);
                phase(&mut t.waiting, &mut t.counts.waiting, r.arrival_s, scheduled);
                if r.scheduled_s.is_some() {
                    phase(&mut t.prefill, &mut t.counts.prefill, scheduled, first);
                }
            }
            if r.first_token_s.is_some() {
                phase(&mut t.decode, &mut t.counts.decode, first, end);
            }
            // Marks stand a little above and below their row, so that they show at any row height.
            let (mark_y, mark_h) = ((y - 1.0).max(0.0), bar + 2.0);
            for &p in &r.preempted_s {
                let _ = write!(t.marks, "M{:.1} {mark_y:.2}v{mark_h:.2}", x(p));
                t.counts.preemptions += 1;
            }
            if r.error.is_some() {
                let _ = write!(t.marks, "M{:.1} {mark_y:.2}v{mark_h:.2}", x(end));
                t.counts.failed += 1;
            }
            if let Some(c) = r.cancelled {
                let _ = write!(t.cancels, "M{:.1} {mark_y:.2}v{mark_h:.2}", x(c.at_s));
                t.counts.cancelled += 1;
            }
        }
        let strip = bars_height + 3.0;
        let mut last_column = f64::NEG_INFINITY;
        for s in steps {
            let column = x(s.t_s).round();
            if column > last_column {
                let _ = write!(t.steps, "M{column:.0} {strip:.1}v{:.1}", STEP_STRIP - 2.0);
                t.counts.steps += 1;
                last_column = column;
            }
        }
        let every = nice_step(end_s / 6.0);
        t.ticks =
            (0..).map(|i| i as f64 * every).take_while(|&s| s <= end_s * (1.0 + 1e-9)).map(|s| (x(s), s)).collect();
        t
    }

    /// The same timeline with the steady window drawn behind its bars, when `steady` reached one.
    pub fn with_steady(mut self, steady: Option<&SteadyState>) -> Timeline {
        self.steady.clear();
        if let Some(st) = steady.filter(|s| s.reached() && self.rows > 0) {
            let scale = (WIDTH - 2.0 * PAD) / self.end_s.max(1e-9);
            let x = |s: f64| PAD + s.clamp(0.0, self.end_s) * scale;
            let w = (x(st.to_s) - x(st.from_s)).max(MIN_BAR);
            let _ = write!(self.steady, "M{:.1} 0h{w:.1}v{:.2}h{:.1}z", x(st.from_s), self.bars_height, -w);
        }
        self
    }

    /// The same timeline with a band over each interval in which `conditions` say the tab was
    /// hidden or the page throttled.
    pub fn with_conditions(mut self, conditions: Option<&Conditions>) -> Timeline {
        self.held.clear();
        let Some(c) = conditions.filter(|_| self.rows > 0) else { return self };
        let scale = (WIDTH - 2.0 * PAD) / self.end_s.max(1e-9);
        let x = |s: f64| PAD + s.clamp(0.0, self.end_s) * scale;
        let hidden = c.hidden().into_iter().map(|i| (i, true));
        let throttled = c.throttled().into_iter().map(|(i, _)| (i, false));
        for (i, is_hidden) in hidden.chain(throttled) {
            if i.from_s <= self.end_s {
                self.held.push(HeldBand {
                    x: x(i.from_s),
                    w: (x(i.to_s) - x(i.from_s)).max(MIN_BAR),
                    hidden: is_hidden,
                });
            }
        }
        self
    }

    /// Height of the whole drawing: bars, step strip, axis labels.
    pub fn height(&self) -> f64 {
        self.bars_height + 3.0 + STEP_STRIP + AXIS
    }

    /// Where the axis labels' baseline is.
    pub fn label_y(&self) -> f64 {
        self.height() - 6.0
    }

    /// The drawing as a standalone SVG element (the HTML report's; the page builds the same from
    /// the same paths). Only numbers and the fixed labels go into it.
    pub fn svg(&self, lang: Lang) -> String {
        let l = labels(lang, self.server);
        let mut out = format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {WIDTH} {h:.1}\" role=\"img\" \
             aria-label=\"{title}\" class=\"timeline\">",
            h = self.height(),
            title = l.title
        );
        if !self.steady.is_empty() {
            let _ = write!(out, "<path d=\"{}\" fill=\"{STEADY}\" fill-opacity=\"{STEADY_OPACITY}\"/>", self.steady);
        }
        for band in &self.held {
            let _ = write!(
                out,
                "<path d=\"{}\" fill=\"{HELD}\" fill-opacity=\"{HELD_OPACITY}\"/>\
                 <text x=\"{:.1}\" y=\"11\" font-size=\"11\" fill=\"#334155\">{}</text>",
                band.path(self.bars_height),
                band.x + 3.0,
                band.label(lang)
            );
        }
        for (d, colour) in [(&self.waiting, WAITING), (&self.prefill, PREFILL), (&self.decode, DECODE)] {
            let _ = write!(out, "<path d=\"{d}\" fill=\"{colour}\"/>");
        }
        let _ = write!(out, "<path d=\"{}\" stroke=\"{MARK}\" stroke-width=\"1.5\"/>", self.marks);
        if !self.cancels.is_empty() {
            let _ = write!(out, "<path d=\"{}\" stroke=\"{CANCEL}\" stroke-width=\"1.5\"/>", self.cancels);
        }
        let _ = write!(out, "<path d=\"{}\" stroke=\"#64748b\" stroke-width=\"1\"/>", self.steps);
        for &(x, s) in &self.ticks {
            let _ = write!(
                out,
                "<text x=\"{x:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"middle\" fill=\"#64748b\">{}</text>",
                self.label_y(),
                seconds(s)
            );
        }
        out.push_str("</svg>");
        out
    }
}

/// An axis label: "1.5 s".
pub fn seconds(s: f64) -> String {
    let text = format!("{s:.2}");
    format!("{} s", text.trim_end_matches('0').trim_end_matches('.'))
}

/// The timeline's legend, in the report's language.
pub struct Labels {
    pub title: &'static str,
    pub waiting: &'static str,
    pub prefill: &'static str,
    pub decode: &'static str,
    pub marks: &'static str,
    pub cancelled: &'static str,
    pub steps: &'static str,
    pub steady: &'static str,
    /// The bands over the intervals in which the browser held the page back.
    pub hidden: &'static str,
    pub throttled: &'static str,
    /// For a server: why there is no prefill phase.
    pub server_note: &'static str,
}

pub fn labels(lang: Lang, server: bool) -> Labels {
    match (lang, server) {
        (Lang::En, _) => Labels {
            title: "Requests over time",
            waiting: if server { "until first token" } else { "waiting (arrival → scheduled)" },
            prefill: "prefill (scheduled → first token)",
            decode: "decode (first token → finish)",
            marks: "preempted / failed",
            cancelled: "cancelled",
            steps: "engine steps",
            steady: "steady window (ramp-up and drain outside it)",
            hidden: "tab hidden",
            throttled: "throttled",
            server_note: "A server does not say when it scheduled a request: waiting and prefill are one phase, \
                          from arrival to the first token.",
        },
        (Lang::Zh, _) => Labels {
            title: "请求时间线",
            waiting: if server { "首个 token 之前" } else { "排队 (到达 → 调度)" },
            prefill: "预填充 (调度 → 首个 token)",
            decode: "解码 (首个 token → 完成)",
            marks: "被抢占 / 失败",
            cancelled: "已取消",
            steps: "引擎步",
            steady: "稳态窗口（爬升与排空在其外）",
            hidden: "标签页隐藏",
            throttled: "被节流",
            server_note: "服务器不报告调度时间：排队与预填充合为一段，从到达到首个 token。",
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(id: u64, arrival: f64, scheduled: f64, first: f64, finish: f64) -> RequestRecord {
        RequestRecord {
            id,
            arrival_s: arrival,
            scheduled_s: Some(scheduled),
            first_token_s: Some(first),
            token_times_s: vec![first, finish],
            finish_s: Some(finish),
            output_len: 2,
            ..RequestRecord::default()
        }
    }

    /// (x, width) of each rectangle of a path.
    fn rects(path: &str) -> Vec<(f64, f64)> {
        path.split('M')
            .filter(|p| !p.is_empty())
            .map(|p| {
                let x: f64 = p.split(' ').next().unwrap().parse().unwrap();
                let w: f64 = p.split('h').nth(1).unwrap().split('v').next().unwrap().parse().unwrap();
                (x, w)
            })
            .collect()
    }

    #[test]
    fn phases_split_each_request_at_its_timestamps() {
        let records = [request(0, 0.0, 1.0, 2.0, 4.0), request(1, 1.0, 1.0, 3.0, 5.0)];
        let t = Timeline::draw(&records, &[], None, false);
        assert_eq!((t.rows, t.end_s), (2, 5.0));
        let scale = (WIDTH - 2.0 * PAD) / 5.0;
        let waiting = rects(&t.waiting);
        let prefill = rects(&t.prefill);
        let decode = rects(&t.decode);
        // Request 0 waits 1 s, prefills 1 s, decodes 2 s; request 1 is scheduled on arrival.
        assert!((waiting[0].0 - PAD).abs() < 0.1 && (waiting[0].1 - scale).abs() < 0.1, "{waiting:?}");
        assert!((waiting[1].1 - MIN_BAR).abs() < 1e-9, "{waiting:?}");
        assert!((prefill[0].0 - (PAD + scale)).abs() < 0.1 && (prefill[1].1 - 2.0 * scale).abs() < 0.1);
        assert!((decode[0].1 - 2.0 * scale).abs() < 0.1 && (decode[1].0 - (PAD + 3.0 * scale)).abs() < 0.1);
        assert_eq!(t.counts, Counts { waiting: 2, prefill: 2, decode: 2, ..Counts::default() });
    }

    #[test]
    fn live_requests_extend_to_now_and_unsent_ones_are_left_out() {
        let waiting = RequestRecord { id: 0, arrival_s: 1.0, ..RequestRecord::default() };
        let decoding = RequestRecord {
            id: 1,
            arrival_s: 0.0,
            scheduled_s: Some(0.5),
            first_token_s: Some(1.0),
            token_times_s: vec![1.0],
            ..RequestRecord::default()
        };
        let unsent = RequestRecord { id: 2, arrival_s: f64::NAN, ..RequestRecord::default() };
        let t = Timeline::draw(&[waiting, decoding, unsent], &[], Some(2.0), false);
        assert_eq!((t.rows, t.end_s), (2, 2.0));
        let right = |(x, w): (f64, f64)| x + w;
        assert!((right(rects(&t.waiting)[0]) - (WIDTH - PAD)).abs() < 0.2, "{}", t.waiting);
        assert!((right(rects(&t.decode)[0]) - (WIDTH - PAD)).abs() < 0.2, "{}", t.decode);
        assert_eq!(t.counts.prefill, 1);
    }

    /// Steps `i` of `indices`, each `dt` long and ending at `i * dt`.
    fn evenly_spaced_steps(indices: impl Iterator<Item = usize>, dt: f64) -> Vec<StepSample> {
        indices
            .map(|i| StepSample {
                t_s: i as f64 * dt,
                duration_s: dt,
                running: 1,
                batched_tokens: 1,
                ..Default::default()
            })
            .collect()
    }

    #[test]
    fn preemptions_failures_and_steps_are_marked() {
        let mut preempted = request(0, 0.0, 0.0, 1.0, 3.0);
        (preempted.preemptions, preempted.preempted_s) = (2, vec![1.5, 2.0]);
        let mut failed = request(1, 0.5, 0.5, 1.0, 2.0);
        (failed.finish_s, failed.error) = (None, Some("timeout".into()));
        let steps = evenly_spaced_steps(1..=30, 0.1);
        let t = Timeline::draw(&[preempted, failed], &steps, None, false);
        assert_eq!((t.counts.preemptions, t.counts.failed, t.counts.steps), (2, 1, 30));
        assert_eq!(t.marks.matches('M').count(), 3);
        // The failed request ends at its last token, not at the run's end.
        let decode = rects(&t.decode);
        let scale = (WIDTH - 2.0 * PAD) / 3.0;
        assert!((decode[1].1 - scale).abs() < 0.1, "{decode:?}");
    }

    /// A cancelled request's bar ends where it was cancelled, marked there in its own colour: not
    /// a failure, not a finish.
    #[test]
    fn a_cancelled_request_is_marked_where_it_was_cancelled() {
        use crate::bench::{Cancelled, CancelledBy};
        let finished = request(0, 0.0, 0.0, 1.0, 4.0);
        let mut cancelled = request(1, 0.5, 0.5, 1.0, 4.0);
        cancelled.finish_s = None;
        cancelled.token_times_s.retain(|&t| t <= 2.0);
        cancelled.cancelled = Some(Cancelled { by: CancelledBy::User, at_s: 2.0 });
        let t = Timeline::draw(&[finished.clone(), cancelled], &[], None, false);
        assert_eq!((t.counts.cancelled, t.counts.failed), (1, 0));
        let scale = (WIDTH - 2.0 * PAD) / 4.0;
        assert_eq!(t.cancels, format!("M{:.1} {:.2}v{:.2}", PAD + 2.0 * scale, ROW - 1.0, ROW + 1.0));
        // Its decode bar ends at the cancel.
        let decode = rects(&t.decode);
        assert!((decode[1].0 + decode[1].1 - (PAD + 2.0 * scale)).abs() < 0.1, "{decode:?}");
        assert!(t.svg(Lang::En).contains(CANCEL));
        let plain = Timeline::draw(&[finished], &[], None, false);
        assert!(plain.cancels.is_empty() && !plain.svg(Lang::En).contains(CANCEL));
    }

    #[test]
    fn a_thousand_requests_are_seven_elements_and_steps_thin_to_the_width() {
        let records: Vec<RequestRecord> = (0..1000)
            .map(|i| request(i, i as f64 * 0.01, i as f64 * 0.01 + 0.1, i as f64 * 0.01 + 0.2, 12.0))
            .collect();
        let steps = evenly_spaced_steps(0..20_000, 0.0006);
        let t = Timeline::draw(&records, &steps, None, false);
        assert_eq!((t.counts.waiting, t.counts.prefill, t.counts.decode), (1000, 1000, 1000));
        assert!(t.counts.steps <= WIDTH as usize && t.counts.steps > 800, "{}", t.counts.steps);
        assert_eq!(t.bars_height, MAX_BARS_HEIGHT);
        let svg = t.svg(Lang::En);
        assert_eq!(svg.matches("<path").count(), 5);
    }

    #[test]
    fn a_server_run_merges_waiting_and_prefill() {
        let t = Timeline::draw(&[request(0, 0.0, 0.0, 1.0, 2.0)], &[], None, true);
        assert_eq!((t.counts.waiting, t.counts.prefill, t.counts.decode), (1, 0, 1));
        assert!((rects(&t.waiting)[0].1 - (WIDTH - 2.0 * PAD) / 2.0).abs() < 0.1);
        assert_eq!(labels(Lang::En, true).waiting, "until first token");
    }

    #[test]
    fn the_steady_window_is_a_band_over_its_seconds_and_absent_when_never_reached() {
        let records: Vec<RequestRecord> =
            (0..10).map(|i| request(i, i as f64, i as f64, i as f64 + 0.5, 10.0)).collect();
        let t = Timeline::draw(&records, &[], None, false);
        assert_eq!(t.end_s, 10.0);
        let mut st = SteadyState {
            from_s: 2.0,
            to_s: 9.0,
            level: 3.0,
            requests: 8,
            never: None,
            never_why: None,
            summary: None,
        };
        let drawn = t.clone().with_steady(Some(&st));
        // 2 s to 9 s of 10 s: from 20% to 90% of the drawing's inner width.
        let inner = WIDTH - 2.0 * PAD;
        let band = rects(&drawn.steady);
        assert_eq!(band.len(), 1, "{}", drawn.steady);
        assert!((band[0].0 - (PAD + 0.2 * inner)).abs() < 0.06 && (band[0].1 - 0.7 * inner).abs() < 0.06, "{band:?}");
        assert!(drawn.svg(Lang::En).contains(STEADY));
        st.never = Some("the queue grew".into());
        assert!(t.clone().with_steady(Some(&st)).steady.is_empty());
        assert!(t.with_steady(None).steady.is_empty());
    }

    #[test]
    fn hidden_and_throttled_intervals_are_labelled_bands() {
        use crate::bench::record::conditions::{ConditionEvent, Conditions};
        let records: Vec<RequestRecord> =
            (0..10).map(|i| request(i, i as f64, i as f64, i as f64 + 0.5, 10.0)).collect();
        let t = Timeline::draw(&records, &[], None, false);
        let mut c = Conditions {
            until_s: 10.0,
            events: vec![ConditionEvent::Hidden { at_s: 3.0 }, ConditionEvent::Visible { at_s: 5.0 }],
            ..Conditions::new()
        };
        c.add_late_ticks(&[(7.0, 7.5)], &[]);
        let drawn = t.clone().with_conditions(Some(&c));
        let inner = WIDTH - 2.0 * PAD;
        assert_eq!(drawn.held.len(), 2, "{:?}", drawn.held);
        let hidden = drawn.held[0];
        assert!(
            hidden.hidden && (hidden.x - (PAD + 0.3 * inner)).abs() < 0.06 && (hidden.w - 0.2 * inner).abs() < 0.06
        );
        assert!(!drawn.held[1].hidden);
        let svg = drawn.svg(Lang::En);
        assert!(svg.contains(">tab hidden</text>") && svg.contains(">throttled</text>"), "{svg}");
        assert!(drawn.svg(Lang::Zh).contains(">标签页隐藏</text>"));
        assert!(t.clone().with_conditions(None).held.is_empty());
        assert!(t.with_conditions(Some(&Conditions::new())).held.is_empty());
    }

    #[test]
    fn axis_ticks_are_round_numbers() {
        assert_eq!(nice_step(0.7), 1.0);
        assert_eq!(nice_step(0.15), 0.2);
        assert_eq!(nice_step(3.0), 5.0);
        let t = Timeline::draw(&[request(0, 0.0, 0.0, 1.0, 7.3)], &[], None, false);
        let labels: Vec<String> = t.ticks.iter().map(|&(_, s)| seconds(s)).collect();
        assert_eq!(labels, ["0 s", "2 s", "4 s", "6 s"]);
        assert!(Timeline::draw(&[], &[], None, false).svg(Lang::Zh).contains("请求时间线"));
    }
}
