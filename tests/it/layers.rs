//! The layers import downwards only: `gpu` (the ground floor) ← `model` ← `engine` ← `bench` ←
//! `planner` ← `remote` ← `web` (and `src/bin` on top), with `clock`, `error`, `latency` and
//! `limits` below them all. A `crate::X` path (an import, a type, a doc link) in a layer that
//! reaches a layer above it fails here, naming the file and line: a type two layers share belongs
//! in the lower one. A top-level module in neither list fails too: every module has its place.

const ORDER: [&str; 7] = ["gpu", "model", "engine", "bench", "planner", "remote", "web"];
const BASE: [&str; 4] = ["clock", "error", "latency", "limits"];

/// Every top-level module of `src` (a folder or a file, `lib.rs` and `bin/` aside) that is in
/// neither [`ORDER`] nor [`BASE`].
fn unplaced_modules(src: &std::path::Path) -> Vec<String> {
    let mut unplaced: Vec<String> = std::fs::read_dir(src)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.is_dir() || path.extension().is_some_and(|e| e == "rs"))
        .map(|path| path.file_name().unwrap().to_string_lossy().trim_end_matches(".rs").to_string())
        .filter(|name| {
            name != "lib" && name != "bin" && !ORDER.contains(&name.as_str()) && !BASE.contains(&name.as_str())
        })
        .collect();
    unplaced.sort();
    unplaced
}

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
    let unplaced = unplaced_modules(&src);
    assert!(unplaced.is_empty(), "modules with no place in the layer order (add each to ORDER or BASE): {unplaced:?}");
    let found = upward_references(&src);
    assert!(found.is_empty(), "upward references (file, line, layer, layer above it): {found:#?}");
}

#[test]
fn a_module_without_a_layer_and_a_reference_up_to_the_planner_are_found() {
    let dir = std::env::temp_dir().join(format!("tokenmeter-layers-planner-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("engine")).unwrap();
    std::fs::create_dir_all(dir.join("planner")).unwrap();
    std::fs::write(dir.join("engine/planted.rs"), "/// See [`crate::planner::CostModel`].\n").unwrap();
    std::fs::write(dir.join("planner/fit.rs"), "use crate::bench::StepSample;\n").unwrap();
    std::fs::write(dir.join("newlayer.rs"), "").unwrap();
    let (unplaced, found) = (unplaced_modules(&dir), upward_references(&dir));
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(unplaced, vec!["newlayer".to_string()]);
    assert_eq!(found, vec![("engine/planted.rs".to_string(), 1, "engine".to_string(), "planner".to_string())]);
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
