//! A server on a virtual clock, for the arrival loop's tests (its unit tests and tests/it's): a
//! [`Runtime`] whose timers and streams are entries in a list, and an executor
//! ([`SimulatedServer::block_on`]) that, whenever the loop waits, moves the clock to the earliest
//! of them. No I/O, no real time.

use std::cell::{Cell, RefCell};
use std::future::{poll_fn, Future};
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use crate::bench::{Cancelled, CancelledBy, RequestRecord};
use crate::remote::dispatch::Runtime;
use crate::remote::{Prompt, RemoteRequest};

/// A server whose request `id` streams for `lasts_s(id)` seconds (`None`: it fails at once with
/// HTTP 500) and `3` output tokens, answering `r{id}|`; its `/metrics` (or a DCGM exporter's,
/// for a URL with `dcgm` in it) always reads the same.
pub struct SimulatedServer {
    /// Virtual seconds since the run's start.
    pub now: Cell<f64>,
    timers: RefCell<Vec<(f64, Waker)>>,
    stopped: Cell<Option<CancelledBy>>,
    pub lasts_s: Box<dyn Fn(u64) -> Option<f64>>,
    /// How long the client holds request `id` back before sending it (a slow client).
    pub held_s: Box<dyn Fn(u64) -> f64>,
    /// `(time, id, prompt)` of each request sent, in the order sent.
    pub sent: RefCell<Vec<(f64, u64, Prompt)>>,
    /// When each scrape was made.
    pub scraped: RefCell<Vec<f64>>,
}

impl SimulatedServer {
    pub fn new(lasts_s: impl Fn(u64) -> Option<f64> + 'static) -> SimulatedServer {
        SimulatedServer {
            now: Cell::new(0.0),
            timers: RefCell::default(),
            stopped: Cell::new(None),
            lasts_s: Box::new(lasts_s),
            held_s: Box::new(|_| 0.0),
            sent: RefCell::default(),
            scraped: RefCell::default(),
        }
    }

    /// Ready at `at_s`, or once the run stops when `stoppable`.
    async fn until(&self, at_s: f64, stoppable: bool) {
        poll_fn(|cx| {
            if self.now.get() >= at_s || (stoppable && self.stopped.get().is_some()) {
                return Poll::Ready(());
            }
            self.timers.borrow_mut().push((at_s, cx.waker().clone()));
            Poll::Pending
        })
        .await
    }

    /// Runs `run` to its end, moving the clock to the earliest timer whenever it waits.
    ///
    /// # Panics
    /// When `run` waits on no timer, or has not ended after 100,000 wake-ups.
    pub fn block_on<F: Future>(&self, run: F) -> F::Output {
        let mut run = pin!(run);
        let mut cx = Context::from_waker(Waker::noop());
        for _ in 0..100_000 {
            if let Poll::Ready(out) = run.as_mut().poll(&mut cx) {
                return out;
            }
            let next = self.timers.borrow().iter().map(|t| t.0).reduce(f64::min).expect("the loop waits on nothing");
            self.now.set(self.now.get().max(next));
            let now = self.now.get();
            let due: Vec<Waker> = {
                let mut timers = self.timers.borrow_mut();
                let (due, later) = timers.drain(..).partition(|t| t.0 <= now);
                *timers = later;
                due.into_iter().map(|t| t.1).collect()
            };
            due.into_iter().for_each(Waker::wake);
        }
        panic!("the run never ended");
    }
}

impl Runtime for SimulatedServer {
    fn now_s(&self) -> f64 {
        self.now.get()
    }

    async fn sleep_until(&self, at_s: f64) {
        self.until(at_s, false).await;
    }

    async fn send(&self, request: RemoteRequest, arrival_s: f64) -> (RequestRecord, String) {
        let held_s = (self.held_s)(request.id);
        if held_s > 0.0 {
            self.until(self.now.get() + held_s, false).await;
        }
        let sent_s = self.now.get();
        self.sent.borrow_mut().push((sent_s, request.id, request.prompt.clone()));
        let mut record =
            RequestRecord { arrival_s, sent_s: Some(sent_s), ..RequestRecord::unsent(request.id, request.prompt_len) };
        match (self.lasts_s)(request.id) {
            Some(lasts_s) => {
                let aborted_s = request.cancel_after_s.map_or(f64::INFINITY, |after_s| sent_s + after_s);
                self.until((sent_s + lasts_s).min(aborted_s), true).await;
                let at_s = self.now.get();
                if let Some(by) = self.stopped.get() {
                    record.cancelled = Some(Cancelled { by, at_s });
                } else if at_s >= aborted_s && at_s < sent_s + lasts_s {
                    record.cancelled = Some(Cancelled { by: CancelledBy::Workload, at_s });
                } else {
                    (record.finish_s, record.output_len) = (Some(self.now.get()), 3);
                }
            }
            None => record.error = Some("http 500".into()),
        }
        let keep = request.turn.is_some_and(|t| t.has_next);
        (record, if keep { format!("r{}|", request.id) } else { String::new() })
    }

    fn stop_all(&self, by: CancelledBy) {
        self.stopped.set(Some(by));
        self.timers.borrow_mut().drain(..).for_each(|t| t.1.wake());
    }

    async fn scrape(&self, url: &str) -> Result<String, String> {
        self.scraped.borrow_mut().push(self.now.get());
        match url.contains("dcgm") {
            true => Ok("DCGM_FI_DEV_POWER_USAGE{gpu=\"0\"} 100\nDCGM_FI_DEV_POWER_USAGE{gpu=\"1\"} 50\n".into()),
            false => Ok("vllm:num_requests_running 1\n".into()),
        }
    }
}
