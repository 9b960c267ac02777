//! The docs name files; a file moved or renamed leaves them pointing nowhere, and nobody notices
//! until a reader follows the pointer. So every repository path the maps and guides quote (in an
//! inline code span or as a relative link) must exist. Checked: README.md, BENCHMARKS.md and
//! every `.md` under docs/ except docs/benchmarks/, the dated history, which is kept verbatim and
//! may name files that have moved since.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Where a quoted path may start (as written from the repository root).
const ROOTS: &[&str] = &["src", "tests", "docs", "scripts", "shaders", "benches", "vendor", ".ci"];
/// The folders of src/, which the map quotes without the `src/` (`gpu/fill.rs`).
const SRC_FOLDERS: &[&str] = &["gpu", "model", "engine", "bench", "planner", "remote", "web", "bin"];
/// A bare file name with one of these endings must be a file of the repository somewhere.
const CODE_ENDINGS: &[&str] = &[".rs", ".wgsl", ".mjs", ".sh", ".py"];
/// Named in the docs but made at build time: `build.rs` renders them into `OUT_DIR`.
const GENERATED: &[&str] = &["matmul_tiles.wgsl", "matmul_subgroup.wgsl"];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The docs checked, relative to the repository root.
fn docs() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n != "benchmarks") {
                    walk(&path, out);
                }
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    let root = repo();
    let mut out = vec![root.join("README.md"), root.join("BENCHMARKS.md")];
    walk(&root.join("docs"), &mut out);
    out.into_iter().map(|p| p.strip_prefix(&root).unwrap().to_path_buf()).collect()
}

/// `a/{b,c}.rs` → `a/b.rs`, `a/c.rs` (one brace group, as the docs write a module family).
fn expand_braces(token: &str) -> Vec<String> {
    match (token.find('{'), token.find('}')) {
        (Some(open), Some(close)) if open < close => token[open + 1..close]
            .split(',')
            .map(|alt| format!("{}{}{}", &token[..open], alt, &token[close + 1..]))
            .collect(),
        _ => vec![token.to_string()],
    }
}

/// The inline code spans of a line (fenced blocks are skipped by the caller: they hold commands
/// whose arguments are the user's files).
fn code_spans(line: &str) -> Vec<&str> {
    line.split('`').skip(1).step_by(2).collect()
}

/// The relative targets of a line's markdown links and images: `](target)`.
fn link_targets(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let Some(end) = after.find(')') else { break };
        let target = after[..end].split('#').next().unwrap_or("");
        if !target.is_empty() && !target.contains("://") && !target.starts_with("mailto:") {
            out.push(target);
        }
        rest = &after[end..];
    }
    out
}

/// What a code-span word names in the repository, if it looks like a repository path: the
/// candidates it may be (any one existing is enough), or None when it is not a path (a flag, a
/// URL, a Rust path, a user's file, a placeholder).
fn path_candidates(word: &str) -> Option<Vec<PathBuf>> {
    let word = word.trim_matches(|c: char| matches!(c, ',' | ';' | ':' | '.' | '(' | ')' | '"' | '\''));
    // `tests/it/batching.rs::overlap_changes_no_token` names a test in a file: check the file.
    let word = word.split("::").next().unwrap_or(word);
    let placeholder = |c: char| matches!(c, '<' | '>' | '…' | '*' | '=' | '$' | '~' | '@' | '|' | '[' | ']');
    if word.is_empty() || word.contains("://") || word.starts_with('-') || word.chars().any(placeholder) {
        return None;
    }
    let root = repo();
    if let Some((first, _)) = word.split_once('/') {
        if ROOTS.contains(&first) || word == "build.rs" {
            return Some(vec![root.join(word)]);
        }
        if SRC_FOLDERS.contains(&first) {
            return Some(vec![root.join("src").join(word)]);
        }
        return None;
    }
    if word == "build.rs" || word.ends_with(".md") && word.chars().next().is_some_and(|c| c.is_ascii_uppercase()) {
        // Top-level files (README.md, BENCHMARKS.md, build.rs) and the guides are quoted bare.
        return Some(vec![root.join(word), root.join("docs").join(word)]);
    }
    if CODE_ENDINGS.iter().any(|e| word.ends_with(e)) && !GENERATED.contains(&word) {
        return Some(vec![PathBuf::from(word)]); // a bare name: looked up by file name below
    }
    None
}

/// Every file name under the folders the docs quote bare names from.
fn file_names() -> BTreeSet<String> {
    fn walk(dir: &Path, out: &mut BTreeSet<String>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for entry in entries {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if let Some(name) = path.file_name().and_then(|n| n.to_str()) {
                out.insert(name.to_string());
            }
        }
    }
    let mut names = BTreeSet::from(["build.rs".to_string()]);
    for dir in ["src", "shaders", "tests", "scripts", "benches"] {
        walk(&repo().join(dir), &mut names);
    }
    names
}

/// `doc:line: token` for every quoted path that does not exist.
fn missing_paths() -> Vec<String> {
    let root = repo();
    let names = file_names();
    let mut missing = Vec::new();
    let mut checked = 0;
    for doc in docs() {
        let text = std::fs::read_to_string(root.join(&doc)).unwrap();
        let mut fenced = false;
        for (i, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("```") {
                fenced = !fenced;
                continue;
            }
            let mut report = |token: &str| missing.push(format!("{}:{}: {token}", doc.display(), i + 1));
            for target in link_targets(line) {
                checked += 1;
                if !root.join(doc.parent().unwrap()).join(target).exists() {
                    report(target);
                }
            }
            if fenced {
                continue;
            }
            for span in code_spans(line) {
                for word in span.split_whitespace().flat_map(expand_braces) {
                    let Some(candidates) = path_candidates(&word) else { continue };
                    checked += 1;
                    let found = candidates.iter().any(|c| {
                        if c.is_absolute() {
                            c.exists()
                        } else {
                            names.contains(c.to_str().unwrap())
                        }
                    });
                    if !found {
                        report(&word);
                    }
                }
            }
        }
    }
    // A parser that silently stopped finding spans would pass with nothing checked.
    assert!(checked > 100, "only {checked} paths found in the docs: is the span parser broken?");
    missing
}

#[test]
fn every_path_the_docs_quote_exists() {
    let missing = missing_paths();
    assert!(missing.is_empty(), "the docs quote paths that do not exist:\n{}", missing.join("\n"));
}

#[test]
fn the_path_finder_tells_paths_from_other_words() {
    let is_path = |w: &str| path_candidates(w).is_some();
    for path in ["src/gpu/fill.rs", "gpu/fill.rs", "`tests/it/main.rs`,", "embed.wgsl", "build.rs", "README.md"] {
        assert!(is_path(path.trim_matches('`')), "{path} should be checked");
    }
    for word in ["--model", "https://huggingface.co/x/y", "Qwen/Qwen3-0.6B", "gate|up", "tests/it/<area>.rs", "m.json"]
    {
        assert!(!is_path(word), "{word} is not a repository path");
    }
    assert_eq!(expand_braces("a/{b,c}.rs"), ["a/b.rs", "a/c.rs"]);
    assert_eq!(link_targets("see [x](docs/a.md#top) and [y](https://e.org)"), ["docs/a.md"]);
}
