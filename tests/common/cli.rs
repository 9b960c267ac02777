//! Runs the `tokenmeter` binary the way a user would and measures what bad input costs it: exit
//! code, stderr, wall time and peak memory (the child's `VmHWM`, read every 10 ms while it runs).
//!
//! Not `wait4`'s `ru_maxrss`: Linux records the old address space's peak at `exec`, and the child
//! is spawned sharing the test process's (vfork), so `ru_maxrss` is at least the test binary's own
//! peak — 3 GB once the heavy tests have run, whatever the child did.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Bad input must be refused within this...
pub const MAX_WALL: Duration = Duration::from_secs(10);
/// ...and this much resident memory.
pub const MAX_RSS_BYTES: u64 = 200 << 20;

pub struct Outcome {
    pub code: i32,
    pub stderr: String,
    pub wall: Duration,
    pub max_rss_bytes: u64,
}

/// Runs `tokenmeter args…` with stdin closed; a run past 60 s is killed (and fails the checks).
#[allow(clippy::zombie_processes)] // reaped by `wait4`, which also gives the peak memory
pub fn run(args: &[&str]) -> Outcome {
    let start = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_tokenmeter"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("runs");
    let pid = child.id() as libc::pid_t;
    let mut stderr_pipe = child.stderr.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr_pipe, &mut text);
        text
    });
    let watchdog = std::thread::spawn(move || {
        // The highest VmHWM seen (KiB): the child's own address space, from its exec on.
        let mut peak_kib = 0u64;
        let status = format!("/proc/{pid}/status");
        while start.elapsed() < Duration::from_secs(60) {
            if let Some(kib) = std::fs::read_to_string(&status).ok().and_then(|text| {
                let line = text.lines().find(|l| l.starts_with("VmHWM:"))?;
                line.split_whitespace().nth(1)?.parse::<u64>().ok()
            }) {
                peak_kib = peak_kib.max(kib);
            }
            std::thread::sleep(Duration::from_millis(10));
            // Signal 0: is it still there? (The pid stays reserved until wait4 reaps it.)
            if unsafe { libc::kill(pid, 0) } != 0 {
                return peak_kib;
            }
        }
        unsafe { libc::kill(pid, libc::SIGKILL) };
        peak_kib
    });
    let mut status = 0;
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // wait4 reaps the child itself (std's `Child` is not waited on afterwards).
    let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(reaped, pid, "wait4");
    let wall = start.elapsed();
    let stderr = reader.join().expect("reader");
    let peak_kib = watchdog.join().expect("watchdog");
    let code = if libc::WIFEXITED(status) { libc::WEXITSTATUS(status) } else { -1 };
    Outcome { code, stderr, wall, max_rss_bytes: peak_kib * 1024 }
}

/// `args` must fail as a user error should: exit code 1 or 2, no panic, one `error:` line (the
/// last line of stderr) containing `needle`, within [`MAX_WALL`] and [`MAX_RSS_BYTES`].
pub fn expect_error(args: &[&str], needle: &str) {
    let out = run(args);
    let shown = format!("tokenmeter {}", args.join(" "));
    assert!(!out.stderr.contains("panicked"), "{shown}: panic: {}", out.stderr);
    assert!((1..=2).contains(&out.code), "{shown}: exit code {}; stderr: {}", out.code, out.stderr);
    let errors: Vec<&str> = out.stderr.lines().filter(|l| l.starts_with("error: ")).collect();
    assert_eq!(errors.len(), 1, "{shown}: wanted one error line; stderr: {}", out.stderr);
    assert!(errors[0].contains(needle), "{shown}: wanted {needle:?} in {:?}", errors[0]);
    let last = out.stderr.lines().rfind(|l| !l.trim().is_empty()).unwrap_or_default();
    assert_eq!(last, errors[0], "{shown}: the error is not the last line");
    assert!(out.wall < MAX_WALL, "{shown}: took {:?}", out.wall);
    assert!(out.max_rss_bytes < MAX_RSS_BYTES, "{shown}: peak memory {} MB", out.max_rss_bytes >> 20);
}
