//! The browser's conditions during a run, as the page records them: the tab hidden or shown, the
//! window focused or not, the page's timers throttled, the GPU device lost, the power source and
//! charge. A browser slows a hidden tab's timers (to one a second, then one a minute) and may
//! deprioritise its GPU work, so a figure measured then is not the one a person would see; the
//! verdict (`verdict::validity`) reads the hidden and throttled intervals from here.
//!
//! Raw events first, each at its time in seconds on the run's clock (from the rate's start, within
//! a few ms of the clock of the requests and steps); the intervals are pure functions of them.
//! The CLI records none: its results have no conditions.

use serde::{Deserialize, Serialize};

/// The heartbeat the page runs on its main thread during a run: a timer every this many ms.
pub const HEARTBEAT_MS: f64 = 100.0;
/// A heartbeat tick later than due by more than this, not explained by the page's own long tasks,
/// is a throttled interval. A shown tab's timers are not throttled: what delays them there is the
/// page's own work, which the long-task watch excuses task by task over 50 ms, but a row of
/// shorter tasks on a loaded machine holds a tick back ~60 ms (seen in the e2e on SwiftShader).
/// Chromium's throttling of a hidden tab aligns timers to whole seconds (a 100 ms tick ~900 ms
/// late), then to minutes: far above this bound.
pub const LATE_BOUND_MS: f64 = 250.0;

/// What the page saw of the browser during one rate's run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Conditions {
    /// The heartbeat's period and the lateness bound, ms ([`HEARTBEAT_MS`], [`LATE_BOUND_MS`]).
    pub heartbeat_ms: f64,
    pub late_bound_ms: f64,
    /// When the watch ended: an interval still open then (the tab still hidden) ends here.
    pub until_s: f64,
    /// Every change, in the order seen.
    pub events: Vec<ConditionEvent>,
}

/// One change of the browser's conditions, at `at_s` seconds on the run's clock.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum ConditionEvent {
    /// `document.visibilityState` became `hidden` (at 0 when the run started hidden).
    Hidden {
        at_s: f64,
    },
    Visible {
        at_s: f64,
    },
    /// The window lost or regained the focus (the tab still shown: another window in front).
    Blurred {
        at_s: f64,
    },
    Focused {
        at_s: f64,
    },
    /// The heartbeat ran late beyond the bound from `at_s` (a tick due) to `until_s` (the last
    /// late tick fired); `late_ms`, the latest tick's lateness. Consecutive late ticks are one.
    Throttled {
        at_s: f64,
        until_s: f64,
        late_ms: f64,
    },
    /// The engine's GPU device was lost (the worker's reason).
    DeviceLost {
        at_s: f64,
        reason: String,
    },
    /// The power source and charge (`navigator.getBattery`, where it exists): at the start and
    /// at each change. `level` from 0 to 1.
    Power {
        at_s: f64,
        charging: bool,
        level: f64,
    },
}

/// A stretch of the run's clock, seconds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    pub from_s: f64,
    pub to_s: f64,
}

impl Interval {
    /// Whether the two share more than an instant.
    pub fn overlaps(&self, other: &Interval) -> bool {
        self.from_s < other.to_s && other.from_s < self.to_s
    }
}

impl Conditions {
    pub fn new() -> Conditions {
        Conditions { heartbeat_ms: HEARTBEAT_MS, late_bound_ms: LATE_BOUND_MS, ..Conditions::default() }
    }

    /// The intervals in which the tab was hidden: each `Hidden` to the next `Visible`, or to
    /// [`Conditions::until_s`].
    pub fn hidden(&self) -> Vec<Interval> {
        let mut intervals = Vec::new();
        let mut since: Option<f64> = None;
        for event in &self.events {
            match *event {
                ConditionEvent::Hidden { at_s } => {
                    since.get_or_insert(at_s);
                }
                ConditionEvent::Visible { at_s } => {
                    if let Some(from_s) = since.take() {
                        intervals.push(Interval { from_s, to_s: at_s });
                    }
                }
                _ => {}
            }
        }
        if let Some(from_s) = since {
            intervals.push(Interval { from_s, to_s: self.until_s.max(from_s) });
        }
        intervals
    }

    /// The intervals in which the page's timers ran late beyond the bound, with the worst
    /// lateness of each, ms.
    pub fn throttled(&self) -> Vec<(Interval, f64)> {
        self.events
            .iter()
            .filter_map(|e| match *e {
                ConditionEvent::Throttled { at_s, until_s, late_ms } => {
                    Some((Interval { from_s: at_s, to_s: until_s }, late_ms))
                }
                _ => None,
            })
            .collect()
    }

    /// Adds the heartbeat's late ticks, each `(due_s, fired_s)`, as `Throttled` events: a tick
    /// later than the bound counts unless one of the page's own long tasks (`(start_s, ms)`, as
    /// the long-task watch keeps them) overlaps its wait — then the page was busy, not throttled.
    /// Ticks no more than a period apart merge into one interval. Sorted by time afterwards.
    pub fn add_late_ticks(&mut self, ticks: &[(f64, f64)], long_tasks: &[(f64, f64)]) {
        let bound_s = self.late_bound_ms / 1000.0;
        let period_s = self.heartbeat_ms / 1000.0;
        let busy = |wait: &Interval| {
            long_tasks
                .iter()
                .any(|&(start_s, ms)| wait.overlaps(&Interval { from_s: start_s, to_s: start_s + ms / 1000.0 }))
        };
        let mut merged: Vec<ConditionEvent> = Vec::new();
        for &(due_s, fired_s) in ticks {
            let late_s = fired_s - due_s;
            if late_s <= bound_s || busy(&Interval { from_s: due_s - period_s, to_s: fired_s }) {
                continue;
            }
            let late_ms = late_s * 1000.0;
            match merged.last_mut() {
                Some(ConditionEvent::Throttled { until_s, late_ms: worst, .. })
                    if due_s - *until_s <= 1.5 * period_s =>
                {
                    *until_s = fired_s;
                    *worst = worst.max(late_ms);
                }
                _ => merged.push(ConditionEvent::Throttled { at_s: due_s, until_s: fired_s, late_ms }),
            }
        }
        self.events.extend(merged);
        self.events.sort_by(|a, b| a.at_s().total_cmp(&b.at_s()));
    }
}

impl ConditionEvent {
    pub fn at_s(&self) -> f64 {
        match *self {
            ConditionEvent::Hidden { at_s }
            | ConditionEvent::Visible { at_s }
            | ConditionEvent::Blurred { at_s }
            | ConditionEvent::Focused { at_s }
            | ConditionEvent::Throttled { at_s, .. }
            | ConditionEvent::DeviceLost { at_s, .. }
            | ConditionEvent::Power { at_s, .. } => at_s,
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::bench::record::conditions::*;

    #[test]
    fn hidden_intervals_pair_each_hiding_with_the_next_showing() {
        let mut c = Conditions::new();
        c.until_s = 10.0;
        c.events = vec![
            ConditionEvent::Hidden { at_s: 1.0 },
            ConditionEvent::Blurred { at_s: 1.5 },
            ConditionEvent::Visible { at_s: 3.0 },
            ConditionEvent::Hidden { at_s: 8.0 },
        ];
        let hidden = c.hidden();
        assert_eq!(hidden, [Interval { from_s: 1.0, to_s: 3.0 }, Interval { from_s: 8.0, to_s: 10.0 }]);
        // Serialized with its tag, as the results JSON keeps it.
        let json = serde_json::to_value(&c.events[0]).unwrap();
        assert_eq!(json, serde_json::json!({ "event": "hidden", "at_s": 1.0 }));
    }

    #[test]
    fn late_ticks_merge_and_the_pages_own_long_tasks_excuse_theirs() {
        let mut c = Conditions::new();
        // Nearly on time (80 ms late), then a hidden tab's 1 s cadence from 2 s: three ticks each
        // 900 ms late, one interval; at 6 s a tick 300 ms late during a 350 ms long task of the page.
        let ticks = [(1.0, 1.08), (2.0, 2.9), (3.0, 3.9), (4.0, 4.9), (6.0, 6.3)];
        c.add_late_ticks(&ticks, &[(5.95, 350.0)]);
        let throttled = c.throttled();
        assert_eq!(throttled.len(), 1, "{throttled:?}");
        let (interval, late_ms) = throttled[0];
        assert_eq!(interval, Interval { from_s: 2.0, to_s: 4.9 });
        assert!((late_ms - 900.0).abs() < 1e-6, "{late_ms}");
    }
}
