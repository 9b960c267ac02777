//! The arrival loop both server clients run. What is released when, and with which clock start,
//! is a [`Release`]'s (the engine's driver follows the same rules); the loop keeps what is a
//! server's: the requests in flight, the runtime's timers, a later conversation turn's request
//! made from the turn before's prompt and reply ([`conversation::next_turn`]), stopping when asked
//! or at saturation (watched every [`WATCH_PERIOD_S`]), and the scrapes of the server's
//! `/metrics`. What differs between the clients is a [`Runtime`]: the clock, timers, one
//! request's stream and one scrape (tokio and reqwest natively, `fetch` and the page's timers in
//! the browser).
//!
//! The loop is one future that polls every request in flight itself (a [`FuturesUnordered`]), so
//! neither it nor a runtime's futures need be `Send`: the browser's are not. A runtime may still
//! run each request elsewhere (the native one spawns it on tokio's worker threads) and hand back
//! a future of its end.

use std::future::{poll_fn, Future};
use std::pin::{pin, Pin};
use std::task::Poll;

use futures_channel::oneshot;
use futures_util::stream::{FuturesUnordered, StreamExt};

use crate::bench::measure::server_metrics::ServerMetrics;
use crate::bench::run::release::{Due, Pace, Release, Released, Stop, TURN_BEFORE_FAILED};
use crate::bench::{CancelledBy, RequestRecord};
use crate::remote::conversation::{self, TurnEnd};
use crate::remote::{Api, Prompt, RemoteRequest, RunOptions, SCRAPE_PERIOD_S};

/// How often the loop asks `stop()` at least, and judges an open loop's outstanding requests
/// ([`crate::bench::measure::saturation`]).
pub const WATCH_PERIOD_S: f64 = 0.05;

/// What a client gives the loop. Times are seconds from the run's start.
#[allow(async_fn_in_trait)] // used generically (no `dyn`), on one thread in the browser
pub trait Runtime {
    /// Seconds since the run's start, on a monotonic clock.
    fn now_s(&self) -> f64;

    /// Resolves at `at_s` (at once if it has passed), as close after it as the runtime can: a
    /// request's lateness is the loop's.
    async fn sleep_until(&self, at_s: f64);

    /// Sends `request`, due at `arrival_s`, and streams its answer: its record (ended within the
    /// run's timeout; failures are data) and its reply's text when a later turn needs it
    /// (`request.turn.has_next`), else empty.
    async fn send(&self, request: RemoteRequest, arrival_s: f64) -> (RequestRecord, String);

    /// Ends every request in flight at once, as cancelled `by` the run's stop with what it had
    /// received. Called once, when the run stops; nothing is sent after it. (A request's own
    /// planned abort, [`RemoteRequest::cancel_after_s`], is the runtime's to time in `send`.)
    fn stop_all(&self, by: CancelledBy);

    /// One GET of a Prometheus `/metrics` URL, bounded by [`crate::remote::SCRAPE_TIMEOUT_S`] and
    /// [`crate::remote::SCRAPE_MAX_BYTES`].
    async fn scrape(&self, url: &str) -> Result<String, String>;
}

/// What a run gave.
pub struct Outcome {
    /// One per request, in request order; a request never sent is [`RequestRecord::unsent`].
    pub records: Vec<RequestRecord>,
    /// Why the run stopped early, if it did: the saturation stop's verdict
    /// ([`RunOptions::saturation_stop`]), or its SLO attainment decided ([`RunOptions::decide`]).
    pub stop: Option<Stop>,
    /// The scrapes of [`RunOptions::server_metrics`], from the start to just after the end.
    pub server_metrics: Option<ServerMetrics>,
    /// The scrapes of [`RunOptions::gpu_metrics`], likewise.
    pub gpu_metrics: Option<ServerMetrics>,
}

/// Sends every request as `options` say and returns their records. `on_progress(finished, total)`
/// runs after each request ends; `stop()` is asked every [`WATCH_PERIOD_S`] at least (and
/// whenever the loop wakes): once true nothing more is sent, what is in flight is cancelled, and
/// what was never sent is recorded as such. `api`: how a later turn carries the conversation.
pub async fn run<R: Runtime>(
    rt: &R,
    api: Api,
    requests: &[RemoteRequest],
    options: &RunOptions,
    on_progress: &mut dyn FnMut(usize, usize),
    stop: &dyn Fn() -> bool,
) -> Outcome {
    // One scraper a URL (the server's, a DCGM exporter's), each ended by its own signal.
    let (server_ended, server_ended_rx) = oneshot::channel::<()>();
    let (gpu_ended, gpu_ended_rx) = oneshot::channel::<()>();
    let release = async {
        let mut lp = Loop::new(api, requests, options);
        let stopped = lp.run(rt, on_progress, stop).await;
        // The scrapers' last scrape: after the last request ended.
        drop((server_ended, gpu_ended));
        (lp.records(), stopped)
    };
    let ((records, stopped), server_metrics, gpu_metrics) = futures_util::future::join3(
        release,
        scrape_if(rt, options.server_metrics.as_deref(), server_ended_rx),
        scrape_if(rt, options.gpu_metrics.as_deref(), gpu_ended_rx),
    )
    .await;
    Outcome { records, stop: stopped, server_metrics, gpu_metrics }
}

/// The first time on the [`WATCH_PERIOD_S`] grid from the start that is after `now_s` (missed
/// ones skipped): strictly after, or a clock that has not moved (a virtual one) would wake the
/// loop at once forever (`k × 0.05` divided by 0.05 may floor to `k − 1`).
fn next_watch(now_s: f64) -> f64 {
    let mut next = ((now_s / WATCH_PERIOD_S).floor() + 1.0) * WATCH_PERIOD_S;
    while next <= now_s {
        next += WATCH_PERIOD_S;
    }
    next
}

/// A request that ended: its record, its reply, and the prompt it was sent with when a later
/// turn follows it.
struct Ended {
    index: usize,
    record: RequestRecord,
    reply: String,
    sent: Option<Prompt>,
}

/// The loop's state between wake-ups.
struct Loop<'a> {
    api: Api,
    requests: &'a [RemoteRequest],
    release: Release,
    /// A later turn's request, made from the end of the turn before (its whole conversation).
    made: Vec<Option<RemoteRequest>>,
    records: Vec<Option<RequestRecord>>,
}

impl<'a> Loop<'a> {
    fn new(api: Api, requests: &'a [RemoteRequest], options: &RunOptions) -> Self {
        let due = requests
            .iter()
            .map(|r| Due::of(r.arrival_s, r.turn.and_then(|t| t.prev.map(|prev| (prev, t.think_s)))))
            .collect();
        let pace = Pace {
            closed_loop: options.closed_loop,
            max_concurrency: options.max_concurrency,
            saturation_stop: options.saturation_stop,
            decide: options.decide.clone(),
        };
        Loop {
            api,
            requests,
            release: Release::new(due, pace),
            made: vec![None; requests.len()],
            records: vec![None; requests.len()],
        }
    }

    /// Until every request has ended or the run stopped and what was in flight ended; why the
    /// watch stopped it, if it did (saturation, or the SLO attainment decided).
    async fn run<R: Runtime>(
        &mut self,
        rt: &R,
        on_progress: &mut dyn FnMut(usize, usize),
        stop: &dyn Fn() -> bool,
    ) -> Option<Stop> {
        let mut in_flight = FuturesUnordered::new();
        let mut stopped = None;
        let mut next_watch_s = 0.0;
        loop {
            let now = rt.now_s();
            if !self.release.stopped() && stop() {
                self.release.stop();
                rt.stop_all(CancelledBy::User);
            }
            if now >= next_watch_s {
                next_watch_s = next_watch(now);
                if let Some(why) = self.release.watch(now) {
                    // Nothing more is sent, and what is in flight is cancelled: at saturation it
                    // would only drain a queue that grew for seconds; a decided run needs no more.
                    rt.stop_all(why.by());
                    stopped = Some(why);
                }
            }
            while let Some(Released { index, arrival_s }) = self.release.next(now) {
                let request = self.made[index].take().unwrap_or_else(|| self.requests[index].clone());
                let keep_prompt = request.turn.is_some_and(|t| t.has_next);
                in_flight.push(sending(rt, index, request, arrival_s, keep_prompt));
            }
            if self.release.done() {
                return stopped;
            }
            // Wake for the next arrival (when a slot is free for it: else an end frees one), the
            // next watch, or a request's end, whichever is first.
            let wake_s = self.release.next_due_s().map_or(next_watch_s, |due_s| due_s.min(next_watch_s));
            let mut timer = pin!(rt.sleep_until(wake_s));
            let ended = poll_fn(|cx| {
                if timer.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(None);
                }
                match in_flight.poll_next_unpin(cx) {
                    Poll::Ready(Some(ended)) => Poll::Ready(Some(ended)),
                    // Empty: nothing to wait for but the timer.
                    Poll::Ready(None) | Poll::Pending => Poll::Pending,
                }
            })
            .await;
            if let Some(ended) = ended {
                self.ended(rt, ended, on_progress);
            }
        }
    }

    fn ended<R: Runtime>(&mut self, rt: &R, ended: Ended, on_progress: &mut dyn FnMut(usize, usize)) {
        let Ended { index, mut record, reply, sent } = ended;
        if let Some(turn) = self.requests[index].turn {
            turn.mark(&mut record);
        }
        let end = sent.map(|sent| TurnEnd::of(sent, &record, reply)).unwrap_or_default();
        let next = self.release.end(index, &record);
        self.record(index, record, on_progress);
        if let Some(next) = next {
            self.follow(rt, next, &end, on_progress);
        }
    }

    /// Later turn `next`, now that the turn before it ended as `end`: made and dated, or failed at
    /// once (and with it the turns after it).
    fn follow<R: Runtime>(&mut self, rt: &R, next: usize, end: &TurnEnd, on_progress: &mut dyn FnMut(usize, usize)) {
        let why = match conversation::next_turn(self.api, &self.requests[next], end) {
            Ok((end_s, made)) => {
                self.made[next] = Some(made);
                self.release.date(next, end_s);
                return;
            }
            Err(why) => why,
        };
        let now = rt.now_s();
        for (k, turn) in self.release.fail(next).into_iter().enumerate() {
            let request = &self.requests[turn];
            let why = if k == 0 { why.clone() } else { TURN_BEFORE_FAILED.to_string() };
            let mut record = conversation::failed(request, now, why);
            if let Some(t) = request.turn {
                t.mark(&mut record);
            }
            self.record(turn, record, on_progress);
        }
    }

    /// Keeps request `index`'s record, already counted ended by the release.
    fn record(&mut self, index: usize, record: RequestRecord, on_progress: &mut dyn FnMut(usize, usize)) {
        self.records[index] = Some(record);
        on_progress(self.release.ended(), self.requests.len());
    }

    /// Every request's record, in request order, with its planned prompt's digest (a turn's own
    /// text); one never sent has no arrival time.
    fn records(self) -> Vec<RequestRecord> {
        self.records
            .into_iter()
            .zip(self.requests)
            .map(|(record, r)| {
                let mut record = record.unwrap_or_else(|| {
                    let mut unsent = RequestRecord::unsent(r.id, r.prompt_len);
                    if let Some(turn) = r.turn {
                        turn.mark(&mut unsent);
                    }
                    unsent
                });
                record.prompt_digest = Some(r.prompt.digest());
                record
            })
            .collect()
    }
}

/// One request through the runtime, as the loop's future of its end; `keep_prompt` when a later
/// turn is made from it.
async fn sending<R: Runtime>(rt: &R, index: usize, request: RemoteRequest, arrival_s: f64, keep_prompt: bool) -> Ended {
    let sent = keep_prompt.then(|| request.prompt.clone());
    let (record, reply) = rt.send(request, arrival_s).await;
    Ended { index, record, reply, sent }
}

/// [`scrape_until`] when there is a URL to scrape.
async fn scrape_if<R: Runtime>(rt: &R, url: Option<&str>, ended: oneshot::Receiver<()>) -> Option<ServerMetrics> {
    match url {
        Some(url) => Some(scrape_until(rt, url, ended).await),
        None => None,
    }
}

/// Scrapes `url` every [`SCRAPE_PERIOD_S`] from the start until `ended` resolves (the run's last
/// request ended), then once more, so the counters' growth spans the whole run. A failed scrape
/// is counted and the scraping goes on; one slower than the period delays the next.
async fn scrape_until<R: Runtime>(rt: &R, url: &str, mut ended: oneshot::Receiver<()>) -> ServerMetrics {
    let mut metrics = ServerMetrics { url: url.to_string(), period_s: SCRAPE_PERIOD_S, ..ServerMetrics::default() };
    let mut last = false;
    loop {
        let started_s = rt.now_s();
        match rt.scrape(url).await {
            Ok(text) => metrics.push(rt.now_s(), &text),
            Err(why) => metrics.fail(why),
        }
        if last {
            return metrics;
        }
        let mut timer = pin!(rt.sleep_until((started_s + SCRAPE_PERIOD_S).max(rt.now_s())));
        last = poll_fn(|cx| {
            if Pin::new(&mut ended).poll(cx).is_ready() {
                Poll::Ready(true)
            } else if timer.as_mut().poll(cx).is_ready() {
                Poll::Ready(false)
            } else {
                Poll::Pending
            }
        })
        .await;
    }
}

#[cfg(test)]
mod tests {
    //! The loop on a virtual clock ([`SimulatedServer`]).
    use super::*;
    use crate::remote::conversation::RemoteTurn;
    use crate::remote::simulated::SimulatedServer as Fake;

    fn request(id: u64, arrival_s: Option<f64>) -> RemoteRequest {
        RemoteRequest {
            cancel_after_s: None,
            id,
            arrival_s,
            prompt: Prompt::Text(format!("p{id}|")),
            prompt_len: 3,
            max_tokens: 3,
            turn: None,
        }
    }

    /// Runs `requests` on `fake` until `stop_at_s` (virtual seconds); the records and the
    /// progress reported.
    fn run_on(
        fake: &Fake,
        requests: &[RemoteRequest],
        options: &RunOptions,
        stop_at_s: f64,
    ) -> (Outcome, Vec<(usize, usize)>) {
        let mut progress = Vec::new();
        let stop = || fake.now.get() >= stop_at_s;
        let outcome =
            fake.block_on(run(fake, Api::Completions, requests, options, &mut |f, t| progress.push((f, t)), &stop));
        (outcome, progress)
    }

    #[test]
    fn watches_are_strictly_ahead() {
        for k in 0..10_000 {
            let now = k as f64 * WATCH_PERIOD_S;
            let next = next_watch(now);
            assert!(next > now && next - now <= WATCH_PERIOD_S + 1e-9, "{now} -> {next}");
        }
    }

    fn sent(fake: &Fake) -> Vec<(f64, u64)> {
        fake.sent.borrow().iter().map(|s| (s.0, s.1)).collect()
    }

    fn assert_near(got: &[(f64, u64)], want: &[(f64, u64)]) {
        assert_eq!(got.len(), want.len(), "{got:?} != {want:?}");
        for (g, w) in got.iter().zip(want) {
            assert!((g.0 - w.0).abs() < 1e-9 && g.1 == w.1, "{got:?} != {want:?}");
        }
    }

    /// Two slots: request 2, due at 0.2 s while 0 and 1 stream, is sent when 0 ends (0.5 s),
    /// keeping its planned arrival; the rest at their arrivals. The server's /metrics is scraped
    /// at 0, 0.5 and 1 s, and once more at the end (1.05 + 0.2 s); a DCGM exporter by the same loop
    /// at the same times.
    #[test]
    fn an_open_loop_sends_at_the_arrivals_within_its_slots() {
        let fake = Fake::new(|id| Some([0.5, 0.5, 0.3, 0.2, 0.2][id as usize]));
        let arrivals = [0.0, 0.1, 0.2, 1.0, 1.05];
        let requests: Vec<_> = arrivals.iter().enumerate().map(|(i, &a)| request(i as u64, Some(a))).collect();
        let options = RunOptions {
            max_concurrency: Some(2),
            server_metrics: Some("http://server/metrics".into()),
            gpu_metrics: Some("http://dcgm:9400/metrics".into()),
            ..RunOptions::default()
        };
        let (outcome, progress) = run_on(&fake, &requests, &options, f64::INFINITY);
        assert_near(&sent(&fake), &[(0.0, 0), (0.1, 1), (0.5, 2), (1.0, 3), (1.05, 4)]);
        let records = &outcome.records;
        assert!(records.iter().zip(&arrivals).all(|(r, &a)| r.succeeded() && r.arrival_s == a), "{records:?}");
        assert_eq!(progress.last(), Some(&(5, 5)));
        let scraped = fake.scraped.borrow().clone();
        assert_eq!(scraped.len(), 8, "{scraped:?}");
        let both = [0.0, 0.0, 0.5, 0.5, 1.0, 1.0, 1.25, 1.25];
        assert!(scraped.iter().zip(both).all(|(&s, w)| (s - w).abs() < 1e-9), "{scraped:?}");
        assert_eq!(outcome.server_metrics.map(|m| m.samples.len()), Some(4));
        let gpu = outcome.gpu_metrics.expect("the exporter's scrapes");
        assert!(gpu.samples.len() == 4 && gpu.samples.iter().all(|s| s.gpu_power_w == Some(150.0)), "{gpu:?}");
        assert!(outcome.stop.is_none());
    }

    /// Two in flight: 0 and 1 at once, 2 when 1 ends (0.1 s), 3 when 0 ends (0.3 s); each
    /// arrives when it is sent.
    #[test]
    fn a_closed_loop_sends_as_slots_free() {
        let fake = Fake::new(|id| Some([0.3, 0.1, 0.2, 0.2][id as usize]));
        let requests: Vec<_> = (0..4).map(|i| request(i, None)).collect();
        let options = RunOptions { closed_loop: Some(2), ..RunOptions::default() };
        let (outcome, _) = run_on(&fake, &requests, &options, f64::INFINITY);
        let want = [(0.0, 0), (0.0, 1), (0.1, 2), (0.3, 3)];
        assert_near(&sent(&fake), &want);
        assert!(outcome.records.iter().zip(want).all(|(r, w)| (r.arrival_s - w.0).abs() < 1e-9));
    }

    /// Session 0: turn 0 at 0 s ends at 0.5; turn 1 (request 2) goes at 0.5 + 0.4 s with turn 0's
    /// prompt and reply before its own text, ends at 1.4; turn 2 (request 4) would go at 1.8, but
    /// the run is interrupted at 1.65 (the first watch after 1.62): never sent, no arrival time.
    /// Session 1: turn 0 fails at 0.1 s, so its turn 1 (request 3) fails then, unsent.
    #[test]
    fn conversation_turns_follow_their_replies_and_an_interrupt_leaves_the_rest_unsent() {
        let fake = Fake::new(|id| (id != 1).then_some(0.5));
        let turn = |session, turn, prev, has_next| RemoteTurn { session, turn, prev, think_s: 0.4, has_next };
        let mut requests: Vec<_> = (0..5).map(|i| request(i, Some(i as f64 * 0.1))).collect();
        for (r, t) in requests.iter_mut().zip([
            turn(0, 0, None, true),
            turn(1, 0, None, true),
            turn(0, 1, Some(0), true),
            turn(1, 1, Some(1), false),
            turn(0, 2, Some(2), false),
        ]) {
            r.turn = Some(t);
        }
        let (outcome, progress) = run_on(&fake, &requests, &RunOptions::default(), 1.62);
        assert_near(&sent(&fake), &[(0.0, 0), (0.1, 1), (0.9, 2)]);
        assert_eq!(fake.sent.borrow()[2].2, Prompt::Text("p0|r0|p2|".into()), "turn 1 carries turn 0");
        let r = &outcome.records;
        assert!((r[2].arrival_s - 0.9).abs() < 1e-9 && r[2].succeeded(), "{:?}", r[2]);
        assert_eq!(r[2].prompt_len, 3 + 3 + 3, "the history's tokens, then its own");
        assert_eq!((r[3].arrival_s, r[3].error.as_deref()), (0.1, Some("the turn before it failed")));
        assert!(r[4].arrival_s.is_nan() && r[4].error.is_none() && r[4].sent_s.is_none(), "{:?}", r[4]);
        let marks: Vec<_> = r.iter().map(|r| (r.session, r.turn)).collect();
        assert_eq!(marks, [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2)].map(|(s, t)| (Some(s), Some(t))));
        assert_eq!(progress.last(), Some(&(4, 5)), "the unsent turn never ended");
    }

    /// The delivered load's check ([`crate::bench::measure::delivered`]) through this runtime: a client that
    /// sends at the plan's Poisson arrivals passes; one that holds every fourth request back 30 ms
    /// bent the load.
    #[test]
    fn a_held_back_client_is_flagged_and_a_prompt_one_passes() {
        use crate::bench::measure::delivered::DeliveredLoad;
        use crate::bench::traffic::workload::{plan, tests::spec, Arrival};
        let spec = spec(Arrival::Poisson, 10.0, 200);
        let requests: Vec<_> = plan(&spec).unwrap().iter().map(|p| request(p.id, p.arrival_s)).collect();
        let check = |held_s: fn(u64) -> f64| {
            let mut fake = Fake::new(|_| Some(0.05));
            fake.held_s = Box::new(held_s);
            let (outcome, _) = run_on(&fake, &requests, &RunOptions::default(), f64::INFINITY);
            DeliveredLoad::of(&outcome.records, &spec).unwrap()
        };
        let prompt = check(|_| 0.0);
        assert!(prompt.passes() && prompt.beyond_plan_ms.max < 1e-6, "{prompt:?}");
        let held = check(|id| if id % 4 == 0 { 0.03 } else { 0.0 });
        assert!(held.bent && (held.beyond_plan_ms.p99 - 30.0).abs() < 1e-6, "{held:?}");
    }

    /// Interrupted at 1.25 s (the first watch after 1.22): 1 and 2, in flight, end cancelled
    /// then; 3 and 4, not yet due, are never sent.
    #[test]
    fn an_interrupt_cancels_what_is_in_flight_and_records_the_rest_unsent() {
        let fake = Fake::new(|id| Some(if id == 1 { 10.0 } else { 0.3 }));
        let requests: Vec<_> = (0..5).map(|i| request(i, Some(i as f64 * 0.5))).collect();
        let (outcome, progress) = run_on(&fake, &requests, &RunOptions::default(), 1.22);
        assert_near(&sent(&fake), &[(0.0, 0), (0.5, 1), (1.0, 2)]);
        let r = &outcome.records;
        assert!(r[0].succeeded());
        let by_user = |r: &RequestRecord| {
            r.cancelled.is_some_and(|c| c.by == CancelledBy::User && (c.at_s - 1.25).abs() < 1e-9) && r.error.is_none()
        };
        assert!(r[1..3].iter().all(by_user), "{r:?}");
        assert!((fake.now.get() - 1.25).abs() < 1e-9, "stopped at {}", fake.now.get());
        for (i, r) in r.iter().enumerate().skip(3) {
            assert_eq!((r.id, r.prompt_len, r.error.as_deref()), (i as u64, 3, None));
            assert!(r.arrival_s.is_nan(), "{r:?}");
        }
        assert_eq!(progress.last(), Some(&(3, 5)));
    }

    /// One slot; request 1 would stream for 0.5 s but the workload aborts it 0.1 s after its send
    /// (at 0.5 s, when 0 ended): it ends cancelled by the workload at 0.6 s, not failed, and its
    /// slot goes to request 2 then.
    #[test]
    fn a_planned_abort_ends_a_request_as_cancelled_and_frees_its_slot() {
        let fake = Fake::new(|_| Some(0.5));
        let mut requests: Vec<_> = (0..3).map(|i| request(i, Some(0.0))).collect();
        requests[1].cancel_after_s = Some(0.1);
        let options = RunOptions { max_concurrency: Some(1), ..RunOptions::default() };
        let (outcome, _) = run_on(&fake, &requests, &options, f64::INFINITY);
        assert_near(&sent(&fake), &[(0.0, 0), (0.5, 1), (0.6, 2)]);
        let r = &outcome.records;
        let c = r[1].cancelled.expect("cancelled");
        assert!(c.by == CancelledBy::Workload && (c.at_s - 0.6).abs() < 1e-9 && r[1].error.is_none(), "{r:?}");
        assert!(r[0].succeeded() && r[2].succeeded() && !r[1].succeeded());
    }
}
