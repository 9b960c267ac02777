//! The soak: thousands of requests through the batcher at Poisson arrivals on a KV cache too small
//! for them (so sequences are preempted and recomputed), checking every event as it comes out
//! ([`Ledger`]), every KV block back in the allocator at the end, and resident memory flat after
//! warm-up. A bug that loses, repeats or reorders a token, finishes a request twice or never,
//! leaks a block or grows memory per request shows up here as a named violation.

use serde::Serialize;

use crate::bench::run::ledger::{Expected, Ledger};
use crate::bench::traffic::prompts::PromptSource;
use crate::bench::traffic::workload::{plan, PlannedRequest, WorkloadSpec};
use crate::clock::{now_s, sleep_s};
use crate::engine::{Engine, EventKind, Request, SamplingParams};
use crate::error::Result;

/// A request whose greedy output is known (a fixture's `reference.json` case).
#[derive(Clone, Debug)]
pub struct Golden {
    pub prompt: Vec<u32>,
    pub tokens: Vec<u32>,
}

/// What the soak sends and how it judges the run.
#[derive(Clone, Debug)]
pub struct SoakSpec {
    /// Arrivals and lengths; `num_requests` is the soak's size.
    pub workload: WorkloadSpec,
    /// Requests with `id % stop_every == 1` stop at `stop_ids` instead of ignoring EOS (0: none).
    pub stop_every: u64,
    pub stop_ids: Vec<u32>,
    /// Requests with `id % golden_every == 0` are the golden cases in turn and must produce
    /// exactly their tokens, preempted or not (0 or no cases: none).
    pub golden: Vec<Golden>,
    pub golden_every: u64,
    /// Requests finished before the resident-memory baseline is taken.
    pub warmup_requests: usize,
    /// Resident memory is sampled this often.
    pub rss_every_s: f64,
    /// Steps in a row that produce no token before the soak gives up (a livelock: sequences
    /// preempted and recomputed forever, which yields events but no tokens).
    pub max_idle_steps: usize,
}

/// Resident memory at one moment of the run.
#[derive(Clone, Debug, Serialize)]
pub struct RssSample {
    pub t_s: f64,
    pub finished: usize,
    pub bytes: u64,
}

/// What the soak saw. [`SoakReport::failures`] judges it.
#[derive(Clone, Debug, Default, Serialize)]
pub struct SoakReport {
    pub requests: usize,
    pub finished: usize,
    /// Requests the workload cancelled before they finished ([`WorkloadSpec::cancel`]).
    pub cancelled: usize,
    pub finished_by_stop: usize,
    pub golden_checked: usize,
    pub prompt_tokens: usize,
    pub output_tokens: usize,
    pub preemptions: usize,
    /// Prompt tokens served from the prefix cache (0 without `--prefix-cache`).
    pub cached_prompt_tokens: usize,
    pub steps: usize,
    pub duration_s: f64,
    pub kv_blocks_total: usize,
    pub kv_blocks_in_use_at_end: usize,
    /// `None` where the platform has no `/proc/self/status`.
    pub rss_after_warmup_bytes: Option<u64>,
    pub rss_end_bytes: Option<u64>,
    pub rss_peak_after_warmup_bytes: Option<u64>,
    pub rss_samples: Vec<RssSample>,
    /// Every broken rule, up to [`crate::bench::run::ledger::MAX_KEPT_VIOLATIONS`] of them, and how many there were.
    pub violations: Vec<String>,
    pub violation_count: usize,
}

impl SoakReport {
    /// End RSS minus RSS after warm-up, in bytes (negative when memory shrank).
    pub fn rss_growth_bytes(&self) -> Option<i64> {
        Some(self.rss_end_bytes? as i64 - self.rss_after_warmup_bytes? as i64)
    }

    /// Why the run fails, if it does: a broken rule, no preemption (the cache was not under
    /// pressure, so the run proved less than it claims), or memory grown past `rss_bound_bytes`.
    pub fn failures(&self, rss_bound_bytes: u64) -> Vec<String> {
        let mut out: Vec<String> = self.violations.clone();
        if self.violation_count > self.violations.len() {
            out.push(format!("... and {} more violations", self.violation_count - self.violations.len()));
        }
        if self.preemptions == 0 {
            out.push("no request was preempted: the KV cache was not under pressure (use fewer KV blocks)".into());
        }
        if let Some(growth) = self.rss_growth_bytes().filter(|&g| g > rss_bound_bytes as i64) {
            out.push(format!(
                "resident memory grew {:.1} MB after warm-up, above the bound of {:.1} MB",
                growth as f64 / 1e6,
                rss_bound_bytes as f64 / 1e6
            ));
        }
        out
    }
}

/// This process's resident set size (`VmRSS`), on Linux.
pub fn resident_bytes() -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        let status = std::fs::read_to_string("/proc/self/status").ok()?;
        let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
        let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kb * 1024)
    }
    #[cfg(not(target_os = "linux"))]
    None
}

/// The request with plan id `id`: a golden case, a stopping one, or one that ignores EOS.
fn request_for(spec: &SoakSpec, id: u64, prompt_len: usize, output_len: usize, vocab: usize) -> (Request, Expected) {
    let greedy = SamplingParams::default();
    let golden = (spec.golden_every > 0 && !spec.golden.is_empty() && id.is_multiple_of(spec.golden_every))
        .then(|| &spec.golden[(id / spec.golden_every) as usize % spec.golden.len()]);
    let stops = spec.stop_every > 0 && id % spec.stop_every == 1 % spec.stop_every && golden.is_none();
    let (prompt, max_new_tokens) = match golden {
        Some(g) => (g.prompt.clone(), g.tokens.len()),
        None => {
            // Random ids, after the workload's shared prefix if it has one.
            let planned = PlannedRequest { id, arrival_s: None, prompt_len, output_len };
            let prompts = PromptSource::for_model(&spec.workload, None, true, vocab);
            (prompts.ids(&planned).expect("random ids never fail"), output_len)
        }
    };
    let stop_ids = if stops { spec.stop_ids.clone() } else { Vec::new() };
    let expected = Expected {
        max_new_tokens,
        stop_ids: stop_ids.clone(),
        golden: golden.map(|g| g.tokens.clone()),
        cancels: spec.workload.cancel_after_s(id).is_some(),
    };
    let request = Request { prompt, max_new_tokens, sampling: greedy, stop_ids, ignore_eos: !stops };
    (request, expected)
}

/// Progress after each step that finished something.
pub struct SoakProgress {
    pub finished: usize,
    pub total: usize,
    pub preemptions: usize,
    pub rss_bytes: Option<u64>,
}

/// Runs the soak on `engine`, which must be idle. Requests arrive on the wall clock at the plan's
/// times (all at once for an infinite rate).
pub async fn run(
    engine: &mut Engine,
    spec: &SoakSpec,
    on_progress: &mut dyn FnMut(&SoakProgress),
) -> Result<SoakReport> {
    let planned = plan(&spec.workload)?;
    let vocab = engine.model.cfg.vocab_size;
    let mut ledger = Ledger::with_capacity(planned.len());
    let mut report = SoakReport { requests: planned.len(), ..SoakReport::default() };
    let mut rss_samples: Vec<RssSample> = Vec::with_capacity(4096);
    let (mut released, mut idle_steps, mut last_sample_s, mut ended) = (0usize, 0usize, f64::NEG_INFINITY, 0usize);
    // The workload's planned aborts: (due, engine id), cancelled once due (the engine frees their
    // blocks; the ledger expects their `Cancelled` finish).
    let mut cancels: Vec<(f64, u64)> = Vec::new();
    let t0 = now_s();
    while ended < planned.len() {
        let now = now_s() - t0;
        while let Some(p) = planned.get(released).filter(|p| p.arrival_s.is_none_or(|a| a <= now)) {
            let (request, expected) = request_for(spec, p.id, p.prompt_len, p.output_len, vocab);
            report.prompt_tokens += request.prompt.len();
            match engine.submit(request) {
                Ok(id) => {
                    ledger.submitted(id, now_s(), expected);
                    if let Some(after_s) = spec.workload.cancel_after_s(p.id) {
                        cancels.push((now + after_s, id));
                    }
                }
                Err(e) => {
                    ledger.violation(format!("planned request {} refused: {e}", p.id));
                    ended += 1;
                }
            }
            released += 1;
        }
        cancels.retain(|&(due_s, id)| {
            // Already finished (false) or cancelled now: either way no longer due.
            let due = due_s <= now;
            if due {
                engine.cancel(id);
            }
            !due
        });
        if !engine.has_work() {
            if let Some(next) = planned.get(released).and_then(|p| p.arrival_s) {
                sleep_s(next - (now_s() - t0)).await;
            }
            continue;
        }
        let (events, _) = engine.step().await?;
        report.steps += 1;
        let produced = events.iter().any(|e| {
            matches!(e.kind, EventKind::FirstToken { .. } | EventKind::Token { .. } | EventKind::Finished { .. })
        });
        idle_steps = if produced { 0 } else { idle_steps + 1 };
        if idle_steps > spec.max_idle_steps {
            ledger.violation(format!("no token in {idle_steps} steps: the engine is stuck"));
            break;
        }
        let before = ledger.finished + ledger.cancelled;
        for e in &events {
            ledger.observe(e);
        }
        ended += ledger.finished + ledger.cancelled - before;
        let t = now_s() - t0;
        let warm = ledger.finished >= spec.warmup_requests;
        if warm && (report.rss_after_warmup_bytes.is_none() || t - last_sample_s >= spec.rss_every_s) {
            if let Some(bytes) = resident_bytes() {
                report.rss_after_warmup_bytes.get_or_insert(bytes);
                rss_samples.push(RssSample { t_s: t, finished: ledger.finished, bytes });
            }
            last_sample_s = t;
        }
        if ledger.finished + ledger.cancelled > before {
            let rss_bytes = rss_samples.last().map(|s| s.bytes);
            on_progress(&SoakProgress {
                finished: ledger.finished,
                total: planned.len(),
                preemptions: ledger.preemptions,
                rss_bytes,
            });
        }
    }
    report.duration_s = now_s() - t0;
    ledger.close();
    report.rss_end_bytes = resident_bytes();
    if let Some(bytes) = report.rss_end_bytes.filter(|_| report.rss_after_warmup_bytes.is_some()) {
        rss_samples.push(RssSample { t_s: report.duration_s, finished: ledger.finished, bytes });
    }
    report.rss_peak_after_warmup_bytes = rss_samples.iter().map(|s| s.bytes).max();
    report.rss_samples = rss_samples;
    // Every block back, each exactly once.
    let blocks = engine.kv_allocator();
    report.kv_blocks_total = blocks.total();
    report.kv_blocks_in_use_at_end = blocks.total().saturating_sub(blocks.free_ids().len());
    let mut free = blocks.free_ids().to_vec();
    free.sort_unstable();
    if free.len() != blocks.total() || free.iter().enumerate().any(|(i, &b)| b as usize != i) {
        ledger.violation(format!(
            "KV blocks not all returned: {} free of {}, free list {}",
            free.len(),
            blocks.total(),
            if free.windows(2).any(|w| w[0] == w[1]) { "with repeats" } else { "without repeats" }
        ));
    }
    report.finished = ledger.finished;
    report.cancelled = ledger.cancelled;
    report.finished_by_stop = ledger.finished_by_stop;
    report.golden_checked = ledger.golden_checked;
    report.output_tokens = ledger.output_tokens;
    report.preemptions = ledger.preemptions;
    report.cached_prompt_tokens = ledger.cached_prompt_tokens;
    report.violations = std::mem::take(&mut ledger.violations);
    report.violation_count = ledger.violation_count;
    Ok(report)
}
