//! `tokenmeter bench --rerun RESULT.json`: the request a results file recorded
//! (`run_config.request`), run again. The saved arguments come first and the flags given beside
//! `--rerun` after them, so a flag given again overrides the saved one (clap keeps a flag's last
//! value: `args_override_self`): `--rerun r.json --rate 8`. A dataset run needs its file again,
//! checked against the digest recorded with the run.

use sha2::{Digest, Sha256};
use std::path::Path;
use tokenmeter::bench::record::run_config::{RunConfig, SavedRequest};
use tokenmeter::{Error, Result};

/// Flags whose value says where results go, not what runs: never recorded.
const OUTPUTS: [&str; 5] = ["--json", "--out", "--csv", "--html", "--rerun"];

/// `bench`'s arguments as a results file records them: all but the outputs and `--rerun`.
pub(crate) fn recorded(bench_args: &[String]) -> Vec<String> {
    let mut kept = Vec::new();
    let mut skip_value = false;
    for arg in bench_args {
        if std::mem::take(&mut skip_value) {
            continue;
        }
        let flag = arg.split_once('=').map_or(arg.as_str(), |(flag, _)| flag);
        if OUTPUTS.contains(&flag) {
            skip_value = !arg.contains('=');
            continue;
        }
        kept.push(arg.clone());
    }
    kept
}

/// The command line to parse: `argv` itself, or for `bench --rerun FILE` the saved request's
/// arguments with the ones given now after them.
pub(crate) fn expand(argv: Vec<String>) -> Result<Vec<String>> {
    if argv.get(1).map(String::as_str) != Some("bench") {
        return Ok(argv);
    }
    let given = &argv[2..];
    let Some(path) = flag_value(given, "--rerun") else { return Ok(argv) };
    let saved = read_saved(Path::new(&path))?;
    let mut merged = vec![argv[0].clone(), "bench".to_string()];
    merged.extend(saved.args.iter().cloned());
    merged.extend(given.iter().cloned());
    if let Some(want) = &saved.dataset_sha256 {
        let dataset = flag_value(&merged[2..], "--dataset").ok_or_else(|| {
            Error::Invalid(format!("--rerun {path}: the run read a dataset, and no --dataset is given"))
        })?;
        let got = sha256_of(Path::new(&dataset))?;
        if &got != want {
            return Err(Error::Invalid(format!(
                "--rerun {path}: the dataset {dataset} is not the file the run read (SHA-256 {got}, the run's {want})"
            )));
        }
    }
    Ok(merged)
}

/// The request `path` recorded (the first result's, for a sweep: they share it).
fn read_saved(path: &Path) -> Result<SavedRequest> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| Error::Io { path: shown.clone(), message: e.to_string() })?;
    let value: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| Error::Json { path: shown.clone(), message: e.to_string() })?;
    let first = match &value {
        serde_json::Value::Array(results) => results.first().cloned().unwrap_or_default(),
        one => one.clone(),
    };
    let config = first.get("run_config").or_else(|| first.get("config")).cloned().unwrap_or_default();
    let config: RunConfig =
        serde_json::from_value(config).map_err(|e| Error::Json { path: shown.clone(), message: e.to_string() })?;
    match config.request {
        Some(saved) if saved.command == "bench" => Ok(saved),
        Some(saved) => Err(Error::Invalid(format!("--rerun {shown}: a `{}` run, not a bench run", saved.command))),
        None => Err(Error::Invalid(format!(
            "--rerun {shown}: the results record no request (saved before requests were recorded)"
        ))),
    }
}

/// The last value of `flag` in `args` (`--flag V` or `--flag=V`).
fn flag_value(args: &[String], flag: &str) -> Option<String> {
    let mut found = None;
    for (i, arg) in args.iter().enumerate() {
        if arg == flag {
            found = args.get(i + 1).cloned();
        } else if let Some(value) = arg.strip_prefix(flag).and_then(|rest| rest.strip_prefix('=')) {
            found = Some(value.to_string());
        }
    }
    found
}

/// A file's SHA-256, hex.
pub(crate) fn sha256_of(path: &Path) -> Result<String> {
    let bytes =
        std::fs::read(path).map_err(|e| Error::Io { path: path.display().to_string(), message: e.to_string() })?;
    Ok(Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn outputs_and_the_rerun_are_not_recorded() {
        let args = strings(&["--rate", "8", "--json", "a.json", "--csv=a.csv", "--rerun", "r.json", "--seed", "3"]);
        assert_eq!(recorded(&args), strings(&["--rate", "8", "--seed", "3"]));
    }

    #[test]
    fn the_last_value_of_a_flag_wins() {
        let args = strings(&["--rate", "4", "--seed", "1", "--rate=8"]);
        assert_eq!(flag_value(&args, "--rate").as_deref(), Some("8"));
        assert_eq!(flag_value(&args, "--dataset"), None);
    }
}
