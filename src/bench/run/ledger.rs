//! The soak's referee: each request's events checked as they come out of the engine, and its
//! output checked against what it asked for when it finishes. Pure: the soak feeds it, and the
//! tests below feed it broken streams to show that each rule can fail.

use std::collections::HashMap;

use crate::engine::{Event, EventKind, FinishReason};

/// Violations kept word for word; the rest are only counted.
pub const MAX_KEPT_VIOLATIONS: usize = 50;

/// What one request must produce.
#[derive(Clone, Debug)]
pub struct Expected {
    pub max_new_tokens: usize,
    /// Empty when the request ignores EOS.
    pub stop_ids: Vec<u32>,
    pub golden: Option<Vec<u32>>,
    /// The workload cancels it (a planned abort): finishing as cancelled is then no violation,
    /// and its output so far must still fit (a golden one: a prefix of its tokens).
    pub cancels: bool,
}

#[derive(Debug)]
struct Entry {
    expected: Expected,
    submitted_s: f64,
    last_s: f64,
    scheduled: bool,
    finished: bool,
    /// Dropped once the request has finished and been checked.
    tokens: Vec<u32>,
}

/// Checks each request's events as they come: `Scheduled` once, then (with `Preempted` at any
/// point) one `FirstToken`, `Token`s, and one `Finished` whose reason fits the output; nothing
/// after it; times never going back. Pure: fed by the soak, or by hand in the tests.
#[derive(Debug, Default)]
pub struct Ledger {
    entries: HashMap<u64, Entry>,
    pub violations: Vec<String>,
    pub violation_count: usize,
    /// Requests that finished, cancelled ones not counted.
    pub finished: usize,
    /// Requests the workload cancelled that ended so.
    pub cancelled: usize,
    pub finished_by_stop: usize,
    pub golden_checked: usize,
    pub output_tokens: usize,
    pub preemptions: usize,
    /// Prompt tokens served from the prefix cache, as the `Scheduled` events said.
    pub cached_prompt_tokens: usize,
}

impl Ledger {
    pub fn with_capacity(n: usize) -> Ledger {
        Ledger { entries: HashMap::with_capacity(n), ..Ledger::default() }
    }

    pub fn violation(&mut self, text: String) {
        self.violation_count += 1;
        if self.violations.len() < MAX_KEPT_VIOLATIONS {
            self.violations.push(text);
        }
    }

    /// A request the engine accepted under engine id `id` at time `t_s`.
    pub fn submitted(&mut self, id: u64, t_s: f64, expected: Expected) {
        let entry =
            Entry { expected, submitted_s: t_s, last_s: t_s, scheduled: false, finished: false, tokens: Vec::new() };
        if self.entries.insert(id, entry).is_some() {
            self.violation(format!("request {id}: the engine gave its id to two requests"));
        }
    }

    pub fn observe(&mut self, e: &Event) {
        let Some(entry) = self.entries.get_mut(&e.id) else {
            return self.violation(format!("request {}: an event for an id never submitted: {:?}", e.id, e.kind));
        };
        let problem = if entry.finished {
            Some(format!("{:?} after Finished", e.kind))
        } else if e.t_s < entry.last_s || e.t_s.is_nan() {
            Some(format!("{:?} at {} s, before the previous event at {} s", e.kind, e.t_s, entry.last_s))
        } else {
            None
        };
        entry.last_s = entry.last_s.max(e.t_s);
        let problem = problem.or_else(|| match &e.kind {
            EventKind::Scheduled { .. } if entry.scheduled => Some("Scheduled twice".to_string()),
            EventKind::Scheduled { cached_tokens } => {
                entry.scheduled = true;
                self.cached_prompt_tokens += *cached_tokens as usize;
                None
            }
            EventKind::Preempted if !entry.scheduled => Some("Preempted before Scheduled".to_string()),
            EventKind::Preempted => {
                self.preemptions += 1;
                None
            }
            EventKind::Speculated { .. } if entry.tokens.is_empty() => {
                Some("Speculated before FirstToken (a draft needs a first token to follow)".to_string())
            }
            EventKind::Speculated { drafted, accepted } if accepted > drafted => {
                Some(format!("Speculated with {accepted} of {drafted} draft tokens accepted"))
            }
            EventKind::Speculated { .. } => None,
            EventKind::FirstToken { .. } if !entry.scheduled => Some("FirstToken before Scheduled".to_string()),
            EventKind::FirstToken { .. } if !entry.tokens.is_empty() => {
                Some(format!("a second FirstToken after {} tokens", entry.tokens.len()))
            }
            EventKind::Token { .. } if entry.tokens.is_empty() => Some("Token before FirstToken".to_string()),
            EventKind::FirstToken { token } | EventKind::Token { token } => {
                entry.tokens.push(*token);
                None
            }
            EventKind::Finished { reason } => {
                entry.finished = true;
                let problem = check_output(&entry.expected, &entry.tokens, *reason);
                match reason {
                    FinishReason::Cancelled => self.cancelled += 1,
                    _ => self.finished += 1,
                }
                self.output_tokens += entry.tokens.len();
                self.finished_by_stop += (*reason == FinishReason::Stop) as usize;
                self.golden_checked += entry.expected.golden.is_some() as usize;
                entry.tokens = Vec::new();
                problem
            }
        });
        if let Some(p) = problem {
            self.violation(format!("request {}: {p}", e.id));
        }
    }

    /// At the end: every submitted request finished. Returns how many did not.
    pub fn close(&mut self) -> usize {
        let mut open: Vec<(u64, f64)> =
            self.entries.iter().filter(|(_, e)| !e.finished).map(|(&id, e)| (id, e.submitted_s)).collect();
        open.sort_by_key(|&(id, _)| id);
        for &(id, t) in &open {
            self.violation(format!("request {id} (submitted at {t:.3} s) never finished"));
        }
        open.len()
    }
}

/// Whether an output fits its request and the reason it ended with.
fn check_output(expected: &Expected, tokens: &[u32], reason: FinishReason) -> Option<String> {
    let max = expected.max_new_tokens;
    let stop_at = tokens.iter().position(|t| expected.stop_ids.contains(t));
    if reason == FinishReason::Cancelled {
        return cancelled_output(expected, tokens, stop_at);
    }
    if let Some(golden) = &expected.golden {
        if tokens != golden.as_slice() {
            let at = tokens.iter().zip(golden).position(|(a, b)| a != b).unwrap_or(tokens.len().min(golden.len()));
            return Some(format!(
                "golden output differs at token {at} ({} tokens, {} expected)",
                tokens.len(),
                golden.len()
            ));
        }
    }
    match reason {
        FinishReason::Length if tokens.len() != max => {
            Some(format!("finished by length with {} tokens, {max} asked", tokens.len()))
        }
        FinishReason::Length if stop_at.is_some() => Some(format!("went past a stop id at token {stop_at:?}")),
        FinishReason::Stop if stop_at != Some(tokens.len().saturating_sub(1)) || tokens.is_empty() => {
            Some(format!("finished by stop, but the first stop id is at {stop_at:?} of {} tokens", tokens.len()))
        }
        FinishReason::Stop if tokens.len() > max => Some(format!("{} tokens, above the {max} asked", tokens.len())),
        _ => None,
    }
}

/// Whether a cancelled request's output so far fits: a planned cancellation, with no more tokens
/// than asked, none past a stop id, and a golden one's tokens a prefix of its golden output.
fn cancelled_output(expected: &Expected, tokens: &[u32], stop_at: Option<usize>) -> Option<String> {
    let max = expected.max_new_tokens;
    if !expected.cancels {
        return Some("cancelled, though the workload did not cancel it".to_string());
    }
    if tokens.len() > max {
        return Some(format!("cancelled with {} tokens, above the {max} asked", tokens.len()));
    }
    if stop_at.is_some_and(|at| at + 1 < tokens.len()) {
        return Some(format!("cancelled after going past a stop id at token {stop_at:?}"));
    }
    match &expected.golden {
        Some(golden) if !golden.starts_with(tokens) => {
            let at = tokens.iter().zip(golden).position(|(a, b)| a != b).unwrap_or(golden.len());
            Some(format!("cancelled, and its output differs from the golden one at token {at}"))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(id: u64, t_s: f64, kind: EventKind) -> Event {
        Event { id, t_s, kind }
    }

    const SCHEDULED: EventKind = EventKind::Scheduled { cached_tokens: 0 };

    fn first(token: u32) -> EventKind {
        EventKind::FirstToken { token }
    }

    fn token(token: u32) -> EventKind {
        EventKind::Token { token }
    }

    fn finished(reason: FinishReason) -> EventKind {
        EventKind::Finished { reason }
    }

    /// One request of 3 tokens ignoring EOS, fed `events`; the violations.
    fn run(expected: Expected, events: &[EventKind]) -> Vec<String> {
        let mut ledger = Ledger::default();
        ledger.submitted(0, 0.0, expected);
        for (i, kind) in events.iter().enumerate() {
            ledger.observe(&ev(0, i as f64, kind.clone()));
        }
        ledger.close();
        ledger.violations
    }

    fn three() -> Expected {
        Expected { max_new_tokens: 3, stop_ids: vec![], golden: None, cancels: false }
    }

    /// A planned cancellation ends a request with the tokens it had, which must still fit.
    #[test]
    fn a_planned_cancellation_passes_and_an_unplanned_one_does_not() {
        let cancels = Expected { cancels: true, golden: Some(vec![5, 6, 7]), ..three() };
        let cut = [SCHEDULED, first(5), token(6), finished(FinishReason::Cancelled)];
        assert_eq!(run(cancels.clone(), &cut), Vec::<String>::new());
        assert_eq!(run(cancels.clone(), &[SCHEDULED, finished(FinishReason::Cancelled)]), Vec::<String>::new());
        let mut ledger = Ledger::default();
        ledger.submitted(0, 0.0, cancels.clone());
        for (i, kind) in cut.iter().enumerate() {
            ledger.observe(&ev(0, i as f64, kind.clone()));
        }
        assert_eq!((ledger.finished, ledger.cancelled, ledger.close()), (0, 1, 0));
        let wrong = [SCHEDULED, first(5), token(9), finished(FinishReason::Cancelled)];
        assert_eq!(run(cancels.clone(), &wrong).len(), 1, "a golden prefix");
        let long = [SCHEDULED, first(5), token(6), token(7), token(8), finished(FinishReason::Cancelled)];
        assert_eq!(run(Expected { golden: None, ..cancels }, &long).len(), 1, "more than asked");
    }

    #[test]
    fn a_clean_stream_with_preemptions_passes() {
        let events = [
            SCHEDULED,
            EventKind::Preempted,
            first(5),
            EventKind::Preempted,
            token(6),
            token(7),
            finished(FinishReason::Length),
        ];
        assert_eq!(run(three(), &events), Vec::<String>::new());
        let golden = Expected { golden: Some(vec![5, 6, 7]), ..three() };
        assert_eq!(run(golden, &events), Vec::<String>::new());
        let stop = Expected { stop_ids: vec![7, 9], ..three() };
        let stopped = [SCHEDULED, first(5), token(6), token(7), finished(FinishReason::Stop)];
        assert_eq!(run(stop, &stopped), Vec::<String>::new());
    }

    #[test]
    fn each_broken_stream_is_caught() {
        use EventKind::Preempted;
        let len = finished(FinishReason::Length);
        let cases: Vec<(&str, Expected, Vec<EventKind>)> = vec![
            ("never finished", three(), vec![SCHEDULED, first(1), token(2)]),
            ("lost token", three(), vec![SCHEDULED, first(1), token(2), len.clone()]),
            ("repeated token", three(), vec![SCHEDULED, first(1), token(2), token(2), token(3), len.clone()]),
            ("finished twice", three(), vec![SCHEDULED, first(1), token(2), token(3), len.clone(), len.clone()]),
            ("token after finish", three(), vec![SCHEDULED, first(1), token(2), token(3), len.clone(), token(4)]),
            ("two first tokens", three(), vec![SCHEDULED, first(1), first(2), token(3), len.clone()]),
            ("token before first", three(), vec![SCHEDULED, token(1), first(2), token(3), len.clone()]),
            ("unscheduled", three(), vec![first(1), token(2), token(3), len.clone()]),
            ("scheduled twice", three(), vec![SCHEDULED, SCHEDULED, first(1), token(2), token(3), len.clone()]),
            ("preempted unscheduled", three(), vec![Preempted, SCHEDULED, first(1), token(2), token(3), len.clone()]),
            (
                "wrong golden",
                Expected { golden: Some(vec![1, 2, 4]), ..three() },
                vec![SCHEDULED, first(1), token(2), token(3), len.clone()],
            ),
            (
                "went past a stop",
                Expected { stop_ids: vec![2], ..three() },
                vec![SCHEDULED, first(1), token(2), token(3), len.clone()],
            ),
            (
                "stop without a stop id",
                Expected { stop_ids: vec![9], ..three() },
                vec![SCHEDULED, first(1), token(2), finished(FinishReason::Stop)],
            ),
            ("cancelled", three(), vec![SCHEDULED, first(1), finished(FinishReason::Cancelled)]),
        ];
        for (name, expected, events) in cases {
            let violations = run(expected, &events);
            assert!(!violations.is_empty(), "{name}: not caught");
        }
    }

    #[test]
    fn time_going_back_and_unknown_ids_are_caught() {
        let mut ledger = Ledger::default();
        ledger.submitted(0, 0.0, three());
        ledger.observe(&ev(0, 2.0, SCHEDULED));
        ledger.observe(&ev(0, 1.0, first(1)));
        ledger.observe(&ev(7, 3.0, SCHEDULED));
        assert_eq!(ledger.violations.len(), 2, "{:?}", ledger.violations);
        ledger.submitted(0, 4.0, three());
        assert_eq!(ledger.violation_count, 3, "an id given twice");
    }
}
