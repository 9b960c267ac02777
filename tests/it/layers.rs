//! The layers import downwards only: `gpu` (the ground floor) ← `model` ← `engine` ← `bench` ←
//! `remote` ← `web` (and `src/bin` on top), with `clock`, `error`, `latency` and `limits` below
//! them all. A `crate::X` path (an import, a type, a doc link) in a layer that reaches a layer above
//! it fails here, naming the file and line: a type two layers share belongs in the lower one.

const ORDER: [&str; 6] = ["gpu", "model", "engine", "bench", "remote", "web"];
const BASE: [&str; 4] = ["clock", "error", "latency", "limits"];

/// Every `(file, line, from, to)` where a file of layer `from` names `crate::to` above it.
fn upward_references(src: &std::path::Path) -> Vec<(String, usize, String, String)> {
    let mut found = Vec::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path.strip_prefix(src).unwrap();
            let first =
                rel.components().next().unwrap().as_os_str().to_string_lossy().trim_end_matches(".rs").to_string();
            let rank = |layer: &str| {
                if BASE.contains(&layer) {
                    Some(0)
                } else {
                    ORDER.iter().position(|l| *l == layer).map(|i| i + 1)
                }
            };
            let Some(from) = rank(&first) else { continue }; // lib.rs, bin/
            let text = std::fs::read_to_string(&path).unwrap();
            for (i, line) in text.lines().enumerate() {
                for (at, _) in line.match_indices("crate::") {
                    let to: String =
                        line[at + 7..].chars().take_while(|c| c.is_ascii_lowercase() || *c == '_').collect();
                    if ORDER.contains(&to.as_str()) && rank(&to).unwrap() > from {
                        found.push((rel.display().to_string(), i + 1, first.clone(), to));
                    }
                }
            }
        }
    }
    found
}

#[test]
fn layers_import_downwards_only() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let found = upward_references(&src);
    assert!(found.is_empty(), "upward references (file, line, layer, layer above it): {found:#?}");
}

#[test]
fn an_upward_reference_is_found() {
    let dir = std::env::temp_dir().join(format!("tokenmeter-layers-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("gpu")).unwrap();
    std::fs::write(dir.join("gpu/planted.rs"), "use crate::model::Qwen3Config;\nuse crate::error::Result;\n").unwrap();
    std::fs::write(dir.join("engine.rs"), "use crate::gpu::Gpu;\n").unwrap();
    let found = upward_references(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(found, vec![("gpu/planted.rs".to_string(), 1, "gpu".to_string(), "model".to_string())]);
}
