//! A newcomer's first commands: `tokenmeter bench` with no model runs on the page's embedded
//! default and says so (and prices its throughput with `--cost-per-hour`); on a machine without
//! a display session no `error:` line on stderr is another program's (Mesa's Vulkan device-select
//! layer reached the Wayland client library, which printed `error: XDG_RUNTIME_DIR is invalid or
//! not set in the environment.` twice).

use std::process::Command;

#[test]
fn opening_the_gpu_headless_prints_no_foreign_error_line() {
    let out = Command::new(env!("CARGO_BIN_EXE_tokenmeter"))
        .arg("adapter")
        .env_remove("XDG_RUNTIME_DIR")
        .env_remove("WAYLAND_DISPLAY")
        .env_remove("NODEVICE_SELECT")
        .env_remove("MESA_VK_DEVICE_SELECT")
        .env_remove("DRI_PRIME")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"backend\""), "the adapter was opened");
    let errors: Vec<&str> = stderr.lines().filter(|l| l.trim_start().starts_with("error:")).collect();
    assert!(errors.is_empty(), "{errors:?}");
}

#[test]
fn bench_without_a_model_runs_the_embedded_default() {
    let out = Command::new(env!("CARGO_BIN_EXE_tokenmeter"))
        .args(["bench", "--num-requests", "2", "--input-len", "8", "--output-len", "4", "--rate", "inf"])
        .args(["--no-baseline", "--cost-per-hour", "3.6"])
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("no --model: the embedded default model") && stderr.contains("vocab 151936"), "{stderr}");
    assert!(stdout.contains("Requests: 2\nFailed: 0\n"), "{stdout}");
    // $3.60 an hour is $0.001 a second, spread over the output tokens served per second.
    let value = |prefix: &str| -> f64 {
        let line = stdout.lines().find(|l| l.starts_with(prefix)).unwrap_or_else(|| panic!("{prefix}: {stdout}"));
        line[prefix.len()..].split_whitespace().next().unwrap().parse().unwrap()
    };
    let per_million = value("Cost: 3.600 per hour -> ");
    let expected = 0.001 / value("Output throughput: ") * 1e6;
    assert!((per_million / expected - 1.0).abs() < 0.01, "{per_million} vs {expected}: {stdout}");
}
