//! The release rules, once for every target: which request goes next, when, and when its clock
//! starts. The engine's driver (`driver.rs` beside it) and the servers' arrival loop
//! (`remote::dispatch`) both follow a [`Release`]; each keeps only what is its own (submitting,
//! stepping, streaming, timers). Pure: no clock, no futures, no engine; the caller asks at its
//! `now` and says what ended. Times are seconds from the run's start.
//!
//! - A request is due at its planned arrival (an open loop), when a slot frees (a closed loop), or,
//!   as a conversation's later turn, at the end of the turn before plus its think time
//!   ([`Due`]). The caller dates a later turn ([`Release::date`]) once the turn before ended, or
//!   fails it ([`Release::fail`]) when it cannot be made, which fails the turns after it.
//! - At most [`Pace`]'s limit of requests are in flight: a closed loop's N, else an open loop's
//!   `max_concurrency`; later turns count like any request. A request due while every slot is
//!   taken waits for one, its clock still starting when it was due (the wait is in its TTFT); a
//!   closed loop's request starts its clock when it is released.
//! - Among the requests due, the earliest due goes first (then the lower index), before a closed
//!   loop's next.
//! - An open loop watched for saturation ([`Pace::saturation_stop`]) gives the [`Detector`] the
//!   requests outstanding: in flight, or due and waiting for a slot. Its verdict stops the
//!   release, as [`Release::stop`] does: nothing more goes, and what the caller has in flight
//!   it ends itself.
//! - A run whose SLO attainment is to be decided while it runs ([`Pace::decide`], a `--rate max`
//!   trial) gives a [`Judge`] each request as it ends; once it decides, the watch stops the
//!   release the same way ([`Stop::Decided`]).

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, VecDeque};

use crate::bench::measure::decided::{DecideRule, Decided, Judge};
use crate::bench::measure::saturation::{Detector, Saturation};
use crate::bench::record::raw::RequestRecord;
use crate::bench::traffic::cancel::CancelledBy;
use crate::bench::traffic::workload::{Arrival, WorkloadSpec};

/// Why a later turn was never sent: the turn before it failed (its record's error).
pub const TURN_BEFORE_FAILED: &str = "the turn before it failed";

/// When one request is due.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Due {
    /// At its planned arrival (an open loop).
    At(f64),
    /// When a slot is free (a closed loop).
    Slot,
    /// At the end of request `prev` (the turn before, in its conversation) plus `think_s`.
    After { prev: usize, think_s: f64 },
}

impl Due {
    /// A request with this planned arrival (`None`: a closed loop's) and, for a later turn, the
    /// turn before it and the think time after it.
    pub fn of(arrival_s: Option<f64>, previous_turn: Option<(usize, f64)>) -> Due {
        match (previous_turn, arrival_s) {
            (Some((prev, think_s)), _) => Due::After { prev, think_s },
            (None, Some(at_s)) => Due::At(at_s),
            (None, None) => Due::Slot,
        }
    }
}

/// How a run paces its requests, beside their [`Due`] times.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Pace {
    /// A closed loop's requests in flight (1 for `sequential`, N for `concurrency`).
    pub closed_loop: Option<usize>,
    /// An open loop's requests in flight at most.
    pub max_concurrency: Option<usize>,
    /// Stop an open loop once its requests outstanding keep growing.
    pub saturation_stop: bool,
    /// Stop once the run's SLO attainment is decided (set by the target for a `--rate max` trial,
    /// never by the workload).
    pub decide: Option<DecideRule>,
}

/// Why the watch stopped a release.
#[derive(Clone, Debug, PartialEq)]
pub enum Stop {
    /// Its requests outstanding kept growing.
    Saturated(Saturation),
    /// Its SLO attainment was decided.
    Decided(Decided),
}

impl Stop {
    /// Who the requests in flight at the stop are cancelled by.
    pub fn by(&self) -> CancelledBy {
        match self {
            Stop::Saturated(_) => CancelledBy::SaturationStop,
            Stop::Decided(_) => CancelledBy::Decided,
        }
    }

    /// The saturation verdict a target kept from its last run, taken once (a decision stays).
    pub fn take_saturation(kept: &mut Option<Stop>) -> Option<Saturation> {
        match kept.take() {
            Some(Stop::Saturated(s)) => Some(s),
            other => {
                *kept = other;
                None
            }
        }
    }

    /// The decision a target kept from its last run, taken once (a saturation verdict stays).
    pub fn take_decided(kept: &mut Option<Stop>) -> Option<Decided> {
        match kept.take() {
            Some(Stop::Decided(d)) => Some(d),
            other => {
                *kept = other;
                None
            }
        }
    }
}

impl Pace {
    /// The workload's pace: `max_concurrency` and the saturation stop apply to open loops only.
    pub fn of(spec: &WorkloadSpec) -> Pace {
        let open = spec.arrival.open_loop();
        Pace {
            closed_loop: match spec.arrival {
                Arrival::Sequential => Some(1),
                Arrival::Concurrency => Some(spec.concurrency),
                Arrival::Poisson | Arrival::Gamma | Arrival::Constant | Arrival::Trace => None,
            },
            max_concurrency: spec.max_concurrency.filter(|_| open),
            saturation_stop: spec.saturation_stop && open,
            decide: None,
        }
    }

    /// Requests in flight at most (at least 1); `usize::MAX`: no limit.
    fn limit(&self) -> usize {
        self.closed_loop.or(self.max_concurrency).map_or(usize::MAX, |n| n.max(1))
    }
}

/// A request released: its index and when its clock starts ([`Due`]'s time; a closed loop's: the
/// time it was released).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Released {
    pub index: usize,
    pub arrival_s: f64,
}

/// A request whose due time is known; earliest first, then in request order.
#[derive(Clone, Copy, Debug)]
struct Dated {
    at_s: f64,
    index: usize,
}

impl Ord for Dated {
    fn cmp(&self, other: &Self) -> Ordering {
        self.at_s.total_cmp(&other.at_s).then(self.index.cmp(&other.index))
    }
}

impl PartialOrd for Dated {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Dated {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Dated {}

/// The release of one run's requests (the module's rules), between the caller's wake-ups.
pub struct Release {
    /// Each request's rule.
    due: Vec<Due>,
    /// The turn after each request, in its conversation.
    next_turn: Vec<Option<usize>>,
    /// Dated requests not yet due at the last `now` asked about.
    dated: BinaryHeap<Reverse<Dated>>,
    /// Requests due and waiting for a slot.
    waiting: BinaryHeap<Reverse<Dated>>,
    /// A closed loop's requests not yet released, in order.
    slots: VecDeque<usize>,
    limit: usize,
    in_flight: usize,
    /// Requests ended: released and ended, or failed unsent (a later turn).
    ended: usize,
    detector: Option<Detector>,
    judge: Option<Judge>,
    stopped: bool,
}

impl Release {
    /// The release of requests due as `due` says (one per request, in request order), paced by
    /// `pace`.
    pub fn new(due: Vec<Due>, pace: Pace) -> Release {
        let mut next_turn = vec![None; due.len()];
        let (mut dated, mut slots) = (BinaryHeap::new(), VecDeque::new());
        for (index, d) in due.iter().enumerate() {
            match *d {
                Due::At(at_s) => dated.push(Reverse(Dated { at_s, index })),
                Due::Slot => slots.push_back(index),
                Due::After { prev, .. } => {
                    if let Some(slot) = next_turn.get_mut(prev) {
                        *slot = Some(index);
                    }
                }
            }
        }
        let open = !due.contains(&Due::Slot);
        Release {
            next_turn,
            dated,
            waiting: BinaryHeap::new(),
            slots,
            limit: pace.limit(),
            in_flight: 0,
            ended: 0,
            detector: (pace.saturation_stop && open).then(Detector::new),
            judge: pace.decide.map(Judge::new),
            stopped: false,
            due,
        }
    }

    /// The next request to release at `now_s`, counted in flight; `None` when none is due, every
    /// slot is taken, or the release stopped. Call it until `None`.
    pub fn next(&mut self, now_s: f64) -> Option<Released> {
        if self.stopped || self.in_flight >= self.limit {
            return None;
        }
        self.advance(now_s);
        let released = match self.waiting.pop() {
            Some(Reverse(d)) => Released { index: d.index, arrival_s: d.at_s },
            None => Released { index: self.slots.pop_front()?, arrival_s: now_s },
        };
        self.in_flight += 1;
        Some(released)
    }

    /// When the next dated request comes due, if a slot is free for it (else an end frees one
    /// first); `None` too once stopped or when nothing is dated.
    pub fn next_due_s(&self) -> Option<f64> {
        if self.stopped || self.in_flight >= self.limit {
            return None;
        }
        self.waiting.peek().or(self.dated.peek()).map(|Reverse(d)| d.at_s)
    }

    /// One look at the run at `now_s`, when the pace watches for saturation or decides the run:
    /// why it stops, when the detector judges the rate unsustainable or the judge decided, which
    /// stops the release.
    pub fn watch(&mut self, now_s: f64) -> Option<Stop> {
        if self.stopped {
            return None;
        }
        let planned = self.due.len();
        let decided = self.judge.as_mut().and_then(|j| j.decided(planned, now_s)).map(Stop::Decided);
        let verdict = decided.or_else(|| {
            self.advance(now_s);
            let outstanding = self.in_flight + self.waiting.len();
            self.detector.as_mut()?.observe(now_s, outstanding).map(Stop::Saturated)
        })?;
        self.stop();
        Some(verdict)
    }

    /// Request `index`, released, ended (however) as `record` says: its slot frees, and the judge,
    /// if any, counts it. The turn after it, unless the release stopped: the caller dates it
    /// ([`Release::date`]) or fails it ([`Release::fail`]).
    pub fn end(&mut self, index: usize, record: &RequestRecord) -> Option<usize> {
        if let Some(judge) = self.judge.as_mut() {
            judge.end(record);
        }
        self.in_flight -= 1;
        self.ended += 1;
        self.next_turn[index].filter(|_| !self.stopped)
    }

    /// Later turn `turn` is due at `previous_end_s` (when the turn before it finished) plus its
    /// think time, which is returned.
    pub fn date(&mut self, turn: usize, previous_end_s: f64) -> f64 {
        let Due::After { think_s, .. } = self.due[turn] else { panic!("request {turn} is not a later turn") };
        let at_s = previous_end_s + think_s;
        self.dated.push(Reverse(Dated { at_s, index: turn }));
        at_s
    }

    /// Later turn `turn` cannot be sent: it and the turns after it end unsent. Those turns, in
    /// conversation order, for the caller to record.
    pub fn fail(&mut self, turn: usize) -> Vec<usize> {
        let failed: Vec<usize> = std::iter::successors(Some(turn), |&t| self.next_turn[t]).collect();
        self.ended += failed.len();
        failed
    }

    /// Nothing more is released; what is in flight the caller ends.
    pub fn stop(&mut self) {
        self.stopped = true;
        self.dated.clear();
        self.waiting.clear();
        self.slots.clear();
    }

    pub fn stopped(&self) -> bool {
        self.stopped
    }

    /// Nothing in flight, and every request ended or the release stopped.
    pub fn done(&self) -> bool {
        self.in_flight == 0 && (self.stopped || self.ended == self.due.len())
    }

    /// Requests ended so far: released and ended, or failed unsent.
    pub fn ended(&self) -> usize {
        self.ended
    }

    /// Moves what is due by `now_s` from the dated to the waiting.
    fn advance(&mut self, now_s: f64) {
        while let Some(&Reverse(d)) = self.dated.peek().filter(|Reverse(d)| d.at_s <= now_s) {
            self.dated.pop();
            self.waiting.push(Reverse(d));
        }
    }
}

#[cfg(test)]
mod tests {
    // By its crate path: `super` would be read as `run/mod.rs` by tests/it/layers.rs's import graph.
    use crate::bench::record::raw::RequestRecord;
    use crate::bench::run::release::{Due, Pace, Release, Released, Stop};

    /// Runs `release` on a virtual clock where request `i`, once released, ends `lasts_s[i]` later
    /// and a later turn is dated at the end of the turn before: `(index, released at, clock start)`
    /// in release order. The caller also wakes every 10 ms (as the server's loop wakes to watch),
    /// so a release that ignores a full slot shows.
    fn simulate(mut release: Release, lasts_s: &[f64]) -> Vec<(usize, f64, f64)> {
        let (mut now, mut ends, mut out) = (0.0, Vec::<(f64, usize)>::new(), Vec::new());
        let mut tick = 0;
        while !release.done() {
            while let Some(r) = release.next(now) {
                out.push((r.index, now, r.arrival_s));
                ends.push((now + lasts_s[r.index], r.index));
            }
            while f64::from(tick) * 0.01 <= now {
                tick += 1;
            }
            let first_end = ends.iter().copied().min_by(|a, b| a.0.total_cmp(&b.0));
            let wake_s = release.next_due_s().map_or(f64::from(tick) * 0.01, |d| d.min(f64::from(tick) * 0.01));
            match first_end {
                Some((end_s, i)) if end_s <= wake_s => {
                    now = end_s;
                    ends.retain(|e| e.1 != i);
                    if let Some(turn) = release.end(i, &RequestRecord::default()) {
                        release.date(turn, end_s);
                    }
                }
                _ if tick < 100_000 => now = wake_s,
                _ => panic!("not done after 1,000 s"),
            }
        }
        out
    }

    fn assert_near(got: &[(usize, f64, f64)], want: &[(usize, f64, f64)]) {
        let same = |g: &(usize, f64, f64), w: &(usize, f64, f64)| {
            g.0 == w.0 && (g.1 - w.1).abs() < 1e-9 && (g.2 - w.2).abs() < 1e-9
        };
        assert!(got.len() == want.len() && got.iter().zip(want).all(|(g, w)| same(g, w)), "{got:?} != {want:?}");
    }

    /// Two slots. 2, due at 0.2 while 0 and 1 stream, goes when 0 ends (0.5), its clock at 0.2.
    /// 3 (the turn after 0, think 0.3) is due at 0.8 while 1 and 2 stream: it waits for 2's end
    /// (0.85) like any request, its clock at 0.8. 4, due at 1.0 while 1 and 3 stream, goes when 1
    /// ends (1.1).
    #[test]
    fn an_open_loop_releases_at_the_arrivals_within_its_slots_later_turns_included() {
        let due = vec![Due::At(0.0), Due::At(0.1), Due::At(0.2), Due::After { prev: 0, think_s: 0.3 }, Due::At(1.0)];
        let pace = Pace { max_concurrency: Some(2), ..Pace::default() };
        let released = simulate(Release::new(due, pace), &[0.5, 1.0, 0.35, 0.3, 0.2]);
        assert_near(&released, &[(0, 0.0, 0.0), (1, 0.1, 0.1), (2, 0.5, 0.2), (3, 0.85, 0.8), (4, 1.1, 1.0)]);
    }

    /// Two in flight: 0 and 1 at once, 2 when 1 ends (0.1), 3 when 0 ends (0.3); each clock
    /// starts at its release.
    #[test]
    fn a_closed_loop_releases_as_slots_free() {
        let pace = Pace { closed_loop: Some(2), max_concurrency: Some(1), ..Pace::default() };
        let released = simulate(Release::new(vec![Due::Slot; 4], pace), &[0.3, 0.1, 0.2, 0.2]);
        assert_near(&released, &[(0, 0.0, 0.0), (1, 0.0, 0.0), (2, 0.1, 0.1), (3, 0.3, 0.3)]);
    }

    /// Turn 0 ends; failing turn 1 fails turn 2 with it. After a stop nothing more goes, an end
    /// gives no next turn, and the release is done once what was in flight ended.
    #[test]
    fn a_failed_turn_fails_those_after_it_and_a_stop_releases_nothing_more() {
        let after = |prev| Due::After { prev, think_s: 0.1 };
        let due = vec![Due::At(0.0), after(0), after(1), Due::At(0.5), Due::At(0.6), after(3)];
        let mut release = Release::new(due, Pace::default());
        assert_eq!(release.next(0.0), Some(Released { index: 0, arrival_s: 0.0 }));
        assert_eq!(release.next(0.0), None);
        assert_eq!(release.end(0, &RequestRecord::default()), Some(1));
        assert_eq!(release.fail(1), [1, 2]);
        assert_eq!((release.ended(), release.next_due_s()), (3, Some(0.5)));
        assert_eq!(release.next(0.55), Some(Released { index: 3, arrival_s: 0.5 }));
        release.stop();
        assert_eq!((release.next(1.0), release.next_due_s(), release.done()), (None, None, false));
        assert_eq!(release.end(3, &RequestRecord::default()), None, "no turn after a stop");
        assert!(release.done() && release.ended() == 4);
    }

    /// A run whose SLO attainment is decided stops: 200 arrivals 10 ms apart, each ending 5 ms
    /// after it is sent. At p90, requests all over the SLO are refuted at the first look (50
    /// counted); requests all within it are supported at the half-way look (100), not before
    /// ([`crate::bench::measure::decided`]).
    #[test]
    fn a_run_is_stopped_once_its_attainment_is_decided() {
        use crate::bench::measure::decided::DecideRule;
        use crate::bench::measure::metrics::Slo;
        let run = |ttft_s: f64| {
            let rule = DecideRule { slo: Slo { ttft_ms: Some(100.0), ..Slo::default() }, attainment: 0.9 };
            let pace = Pace { decide: Some(rule), ..Pace::default() };
            let mut release = Release::new((0..200).map(|i| Due::At(i as f64 * 0.01)).collect(), pace);
            for k in 0..200 {
                let now = k as f64 * 0.01;
                if let Some(stop) = release.watch(now) {
                    return (k, stop);
                }
                let r = release.next(now).expect("due");
                let ended = RequestRecord {
                    arrival_s: now,
                    sent_s: Some(now),
                    first_token_s: Some(now + ttft_s),
                    token_times_s: vec![now + ttft_s],
                    finish_s: Some(now + ttft_s),
                    output_len: 1,
                    ..RequestRecord::default()
                };
                release.end(r.index, &ended);
            }
            panic!("never decided");
        };
        let (sent, stop) = run(0.5);
        let Stop::Decided(missed) = stop else { panic!("{stop:?}") };
        assert!(!missed.met && sent == 50 && (missed.seen, missed.over) == (50, 50), "{sent}: {missed:?}");
        let (sent, stop) = run(0.05);
        let Stop::Decided(met) = stop else { panic!("{stop:?}") };
        assert!(met.met && sent == 100 && met.over == 0, "{sent}: {met:?}");
    }

    /// 100 arrivals a second that never end: the outstanding count grows and the watch stops the
    /// release; a closed loop is never watched.
    #[test]
    fn an_open_loop_whose_requests_pile_up_is_stopped() {
        let pace = Pace { saturation_stop: true, ..Pace::default() };
        let mut release = Release::new((0..10_000).map(|i| Due::At(i as f64 * 0.01)).collect(), pace.clone());
        let mut verdict = None;
        for k in 0..2_000 {
            let now = k as f64 * 0.05;
            verdict = release.watch(now);
            if verdict.is_some() {
                break;
            }
            while release.next(now).is_some() {}
        }
        let Some(Stop::Saturated(verdict)) = verdict else { panic!("saturated: {verdict:?}") };
        assert!(verdict.outstanding > 100 && release.stopped() && release.next(1e6).is_none(), "{verdict:?}");
        let mut closed = Release::new(vec![Due::Slot; 10], pace);
        assert!((0..1_000).all(|k| closed.watch(k as f64).is_none()));
    }
}
