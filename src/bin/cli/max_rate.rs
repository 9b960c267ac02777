//! `tokenmeter bench --rate max`: the search's edge — its progress, the table of its runs and its
//! files. The search itself is the library's (`tokenmeter::bench::run::launch::drive` into
//! `max_rate::find`; on the engine its first guess is the planner's), as on the page.

use super::args::BenchArgs;
use super::interrupt::Interrupt;
use std::rc::Rc;
use tokenmeter::bench;
use tokenmeter::bench::run::max_rate::{MaxRate, Stage};
use tokenmeter::bench::run::target::{Listener, SessionEvent};
use tokenmeter::{Error, Result};

/// The search's progress: the rate being tried and what each run gave.
pub(crate) fn search_listener() -> Listener {
    Rc::new(move |event| match event {
        SessionEvent::Baseline(b) if b.error.is_none() => {
            eprintln!(
                "baseline (median of {} requests alone): TTFT {:.1} ms, TPOT {:.2} ms",
                b.requests, b.ttft_ms, b.tpot_ms
            )
        }
        SessionEvent::RateStarted { rate, requests } if rate.is_finite() => {
            eprint!("trying {rate:.3} req/s ({requests} requests) … ")
        }
        SessionEvent::RateStarted { requests, .. } => eprint!("probing: {requests} requests at once … "),
        SessionEvent::RateDone { result, .. } => {
            // Over the steady window where the run had one, as the search counts it.
            let steady = result.metrics.steady.as_ref().and_then(|s| s.summary.as_deref());
            let (m, over) = match steady {
                Some(m) => (m, "steady window"),
                None => (&result.metrics, "whole run"),
            };
            let decided = result.decided.as_ref().map(|d| format!("; {}", d.text(bench::Lang::En)));
            eprintln!(
                "TTFT p99 {:.1} ms, TPOT p99 {:.2} ms, {:.1}% within the SLOs ({over}){}",
                m.ttft_ms.p99,
                m.tpot_ms.p99,
                m.slo_attainment.unwrap_or(f64::NAN) * 100.0,
                decided.unwrap_or_default()
            )
        }
        _ => {}
    })
}

/// `--rate max`'s end: the runs and the rate found, then the JSON (`max_rate` and every run's full
/// result, `results`), the CSV of every request and the HTML report (a section per run).
pub(crate) fn finish_search(
    args: &BenchArgs,
    found: MaxRate,
    results: &[bench::BenchResult],
    interrupt: &Interrupt,
) -> Result<()> {
    print!("{}", search_table(&found, results));
    let io = |path: &std::path::Path, e: std::io::Error| Error::Io {
        path: path.display().to_string(),
        message: e.to_string(),
    };
    if let Some(path) = &args.json {
        let json = serde_json::json!({ "max_rate": found, "results": results });
        std::fs::write(path, serde_json::to_string_pretty(&json).expect("serialisable")).map_err(|e| io(path, e))?;
    }
    if let Some(path) = &args.csv {
        let rows: Vec<_> = results.iter().flat_map(|r| r.requests.iter().cloned()).collect();
        std::fs::write(path, bench::csv(&rows)).map_err(|e| io(path, e))?;
    }
    if let Some(path) = &args.html {
        // The language was checked when the run began.
        let lang = args.lang.parse().unwrap_or_default();
        let runs: Vec<(String, &bench::BenchResult)> = found
            .trials
            .iter()
            .filter_map(|t| {
                Some((format!("--rate max · {:?} run at {:.3} req/s", t.stage, t.rate), results.get(t.result)?))
            })
            .collect();
        std::fs::write(path, bench::present::html::html_report(&runs, lang)).map_err(|e| io(path, e))?;
    }
    if interrupt.fired() {
        eprintln!("interrupted (Ctrl-C)");
        return Err(Error::Cancelled);
    }
    Ok(())
}

/// Every run of a search and what it found.
fn search_table(found: &MaxRate, results: &[bench::BenchResult]) -> String {
    let mut out = String::from("\n========== Highest rate within the SLOs ==========\n");
    out += &format!(
        "SLOs {}: at least {:.1}% of requests within every one (over each run's steady window, where it had one)\n",
        found.slo,
        found.attainment * 100.0
    );
    out += &format!("first guess: {}\n", found.first_guess);
    out += &format!(
        "{:>10} {:>8} {:>8} {:>12} {:>13}  {}\n",
        "rate", "stage", "requests", "within SLOs", "counted over", "verdict"
    );
    for t in &found.trials {
        let stage = serde_json::to_value(t.stage).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default();
        let verdict = match (&t.decided, t.stage) {
            (_, Stage::Probe) => "– (decides no rate)".to_string(),
            (Some(d), _) => d.text(bench::Lang::En),
            (None, _) => (if t.met { "met" } else { "missed" }).to_string(),
        };
        out += &format!(
            "{:>10} {stage:>8} {:>8} {:>11.1}% {:>13}  {verdict}\n",
            if t.rate.is_finite() { format!("{:.3}", t.rate) } else { "inf".into() },
            results.get(t.result).map_or(0, |r| r.requests.len()),
            t.attainment * 100.0,
            if t.steady { "steady" } else { "whole run" },
        );
    }
    out += &match (&found.unreachable, found.rate) {
        (Some(u), _) => format!("{}\n", u.text(bench::Lang::En)),
        (None, rate) => match rate {
            // Every rate tried met the SLOs: no limit, only how far it was looked for.
            Some(_) if found.no_limit_found() => format!(
                "no limit found up to {:.3} req/s: every rate tried met the SLOs ({}); {} runs of at most {}\n",
                found.lo,
                if found.whole_workload_at_once {
                    "even with every request in at once: this workload is too small to show the limit (raise \
                 --num-requests)"
                } else {
                    "the run budget or the rate bounds ended the search"
                },
                found.trials.len(),
                found.max_runs
            ),
            Some(rate) => format!(
                "highest rate: {rate:.3} req/s (met at {:.3}, missed at {}: {}); {} runs of at most {}\n",
                found.lo,
                if found.hi.is_finite() { format!("{:.3}", found.hi) } else { "none tried".into() },
                if found.converged {
                    format!("within {:.0}%", found.tolerance * 100.0)
                } else if found.whole_workload_at_once {
                    "met even with every request in at once: this workload is too small to show the limit (raise \
                 --num-requests)"
                        .into()
                } else {
                    "not narrowed to the tolerance: the run budget or the rate bounds ended it".into()
                },
                found.trials.len(),
                found.max_runs
            ),
            None => format!("no rate tried met the SLOs (down to {:.3} req/s)\n", found.hi),
        },
    };
    if found.unreachable.is_none() {
        out += &format!("spent: {} requests, {:.1} s of runs\n", found.spent_requests, found.spent_s);
    }
    // A decision that rests on a run stamped INVALID says so.
    for t in &found.trials {
        let Some(validity) = results.get(t.result).map(bench::BenchResult::validity).filter(|v| !v.valid) else {
            continue;
        };
        let stage = format!("{:?}", t.stage).to_lowercase();
        out += &format!("! the {stage} run at {:.3} req/s is {}\n", t.rate, validity.text(bench::Lang::En));
    }
    if let Some((metric, share)) = &found.limiting {
        out += &format!(
            "limiting at the boundary: {metric} ({:.1}% of requests within it at {:.3} req/s)\n",
            share * 100.0,
            found.hi
        );
    }
    out
}
