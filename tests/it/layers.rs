//! The layers import downwards only: `gpu` (the ground floor) ← `model` ← `engine` ← `bench` ←
//! `planner` ← `remote` ← `web` (and `src/bin` on top), with `clock`, `error`, `latency` and
//! `limits` below them all. A `crate::X` path (an import, a type, a doc link) in a layer that
//! reaches a layer above it fails here, naming the file and line: a type two layers share belongs
//! in the lower one. A top-level module in neither list fails too: every module has its place.
//!
//! Inside `web`, the page's thread and the engine worker's are two rooms (`web/page/`,
//! `web/worker/`) that talk only through `web/protocol` (`protocol.rs` and its `protocol/`): no file
//! of one room names the other, the protocol names neither room (nor anything else of `web`: it
//! carries library types and its own), the files below both (`web/*.rs`) name no room, and no
//! import circle in `web` is longer than two files. One parser ([`paths`]) reads every path a file
//! names, for both checks.

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
            for (line, segments) in paths(&text, &[]) {
                let [head, to, ..] = segments.as_slice() else { continue };
                if head == "crate" && ORDER.contains(&to.as_str()) && rank(to).unwrap() > from {
                    found.push((rel.display().to_string(), line, first.clone(), to.clone()));
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

/// A token of Rust source, as far as paths go: a word, `::`, or one other character.
#[derive(PartialEq)]
enum Token {
    Word(String),
    PathSep,
    Other(char),
}

/// The tokens of `text` with their line numbers. Comments and strings are read like code, so a
/// doc link (`[`crate::x::Y`]`) or a serde `with = "super::x"` counts as a path too.
fn tokens(text: &str) -> Vec<(usize, Token)> {
    let chars: Vec<char> = text.chars().collect();
    let (mut out, mut line, mut i) = (Vec::new(), 1, 0);
    while i < chars.len() {
        let c = chars[i];
        if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push((line, Token::Word(chars[start..i].iter().collect())));
            continue;
        }
        if c == ':' && chars.get(i + 1) == Some(&':') {
            out.push((line, Token::PathSep));
            i += 2;
            continue;
        }
        if c == '\n' {
            line += 1;
        } else if !c.is_whitespace() {
            out.push((line, Token::Other(c)));
        }
        i += 1;
    }
    out
}

/// Every path `text` names that starts at `crate`, `super`, `self` or one of `children` (the
/// modules the file declares), with its line; a grouped `use a::{b, c::{self, D}}` gives one path
/// per item (`a::b`, `a::c::self`, `a::c::D`). A path that ends at a glob ends before it.
fn paths(text: &str, children: &[String]) -> Vec<(usize, Vec<String>)> {
    let tokens = tokens(text);
    let mut found = Vec::new();
    for (at, (line, token)) in tokens.iter().enumerate() {
        let Token::Word(word) = token else { continue };
        let starts = ["crate", "super", "self"].contains(&word.as_str()) || children.contains(word);
        let after_path = at > 0 && matches!(tokens[at - 1].1, Token::PathSep | Token::Other('.'));
        if !starts || after_path || tokens.get(at + 1).is_none_or(|(_, t)| *t != Token::PathSep) {
            continue;
        }
        let mut rest = Vec::new();
        tail(&tokens, at + 2, vec![word.clone()], &mut rest);
        found.extend(rest.into_iter().map(|segments| (*line, segments)));
    }
    found
}

/// The path(s) from `tokens[at]` on, after `prefix` and a `::`: a word (and more after a `::`), or a
/// `{ … }` group of them, each perhaps renamed (`as`). Returns the index after what it read.
fn tail(tokens: &[(usize, Token)], mut at: usize, prefix: Vec<String>, out: &mut Vec<Vec<String>>) -> usize {
    match tokens.get(at).map(|(_, t)| t) {
        Some(Token::Word(word)) => {
            let mut path = prefix;
            path.push(word.clone());
            at += 1;
            if tokens.get(at).is_some_and(|(_, t)| *t == Token::PathSep) {
                return tail(tokens, at + 1, path, out);
            }
            out.push(path);
            // `a::b as c`: `c` is no path.
            match tokens.get(at) {
                Some((_, Token::Word(word))) if word == "as" => at + 2,
                _ => at,
            }
        }
        Some(Token::Other('{')) => {
            at += 1;
            while let Some((_, t)) = tokens.get(at) {
                match t {
                    Token::Other('}') => return at + 1,
                    Token::Other(',') => at += 1,
                    Token::Word(_) | Token::Other('{') => at = tail(tokens, at, prefix.clone(), out),
                    // `*`, or anything a group should not hold: skip it.
                    _ => at += 1,
                }
            }
            at
        }
        _ => {
            out.push(prefix);
            at
        }
    }
}

/// The room of a file of `src/web` (its path relative to `src/web`): `page`, `worker`,
/// `protocol`, or `below` (the browser utilities both rooms use, and `mod.rs`, which declares them).
fn room(file: &str) -> &'static str {
    match file.split('/').next().unwrap().trim_end_matches(".rs") {
        "page" => "page",
        "worker" => "worker",
        "protocol" => "protocol",
        _ => "below",
    }
}

/// A file's module path below its folder: `page/run.rs` is `["page", "run"]`, `page/mod.rs` is
/// `["page"]`, the folder's own `mod.rs` is `[]`.
fn module_of(file: &str) -> Vec<String> {
    let mut segments: Vec<String> = file.trim_end_matches(".rs").split('/').map(String::from).collect();
    if segments.last().is_some_and(|s| s == "mod") {
        segments.pop();
    }
    segments
}

/// The modules a file declares (`mod x;`, `pub mod x;`): the first segments its paths may start with.
fn declared_modules(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.trim().strip_suffix(';')?.rsplit_once("mod ").map(|(_, name)| name.trim().to_string()))
        .filter(|name| name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
        .collect()
}

/// `segments` (a path a file of module `own` names) as a module path below `folder`, or None when
/// it leads outside it (`crate::other`, `super` past the folder).
fn below_folder(folder: &str, own: &[String], segments: &[String]) -> Option<Vec<String>> {
    let mut module = own.to_vec();
    let mut rest = segments;
    match rest[0].as_str() {
        "crate" if rest.get(1).is_some_and(|s| s == folder) => {
            module.clear();
            rest = &rest[2..];
        }
        "crate" => return None,
        "self" => rest = &rest[1..],
        _ => {}
    }
    while rest.first().is_some_and(|s| s == "super") {
        module.pop()?;
        rest = &rest[1..];
    }
    module.extend(rest.iter().filter(|s| *s != "self").cloned());
    Some(module)
}

/// The import graph of the files of `src/<folder>` (`web`, `bench`, `bin/cli`: every file below it, relative to it, with the
/// files of the folder it names, resolved through `crate::<folder>::…`, `super::…`, `self::…` and
/// the modules it declares). A name a file re-exports (`pub use x::Y;`) resolves to the file that
/// defines it, so `crate::bench::Lang` names `base/lang.rs`, not `mod.rs`. `super` is resolved
/// from the file's own module: an inline `mod` is not tracked.
fn module_graph(
    src: &std::path::Path,
    folder: &str,
) -> std::collections::BTreeMap<String, std::collections::BTreeSet<String>> {
    // `bin/cli` is the module `crate::cli` of its binary.
    let root = src.join(folder);
    let folder = folder.rsplit('/').next().unwrap();
    let mut files = Vec::new();
    let mut stack = vec![root.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path.strip_prefix(&root).unwrap().to_string_lossy().replace('\\', "/"));
            }
        }
    }
    let texts: std::collections::BTreeMap<&String, String> =
        files.iter().map(|f| (f, std::fs::read_to_string(root.join(f)).unwrap())).collect();
    let file_of = |module: &[String]| -> Option<String> {
        if module.is_empty() {
            return files.contains(&"mod.rs".to_string()).then(|| "mod.rs".to_string());
        }
        let joined = module.join("/");
        [format!("{joined}.rs"), format!("{joined}/mod.rs")].into_iter().find(|f| files.contains(f))
    };
    // What each file re-exports: a name and the module path below the folder it comes from.
    let mut reexports: std::collections::BTreeMap<&String, std::collections::BTreeMap<String, Vec<String>>> =
        Default::default();
    for (file, text) in &texts {
        let (own, children) = (module_of(file), declared_modules(text));
        let reexported = ["pub use ", "pub(crate) use ", "pub(super) use "]
            .map(|p| text.match_indices(p).map(|(at, p)| at + p.len() - 4));
        for at in reexported.into_iter().flatten() {
            let statement = &text[at..at + text[at..].find(';').unwrap_or(text.len() - at)];
            for (_, segments) in paths(statement, &children) {
                if let Some(module) = below_folder(folder, &own, &segments) {
                    reexports.entry(file).or_default().insert(segments.last().unwrap().clone(), module);
                }
            }
        }
    }
    // The file a module path below the folder lands in: the longest prefix that is a file, and
    // through that file's re-export of the next segment, if it has one (a few hops at most).
    let resolve = |mut module: Vec<String>| -> Option<String> {
        for _ in 0..8 {
            let n = (0..=module.len()).rev().find(|&n| file_of(&module[..n]).is_some())?;
            let file = file_of(&module[..n]).unwrap();
            let Some(next) = module.get(n) else { return Some(file) };
            let Some(source) = texts.get_key_value(&file).and_then(|(f, _)| reexports.get(f)?.get(next)) else {
                return Some(file);
            };
            let mut rerouted = source.clone();
            rerouted.extend(module[n + 1..].iter().cloned());
            module = rerouted;
        }
        None
    };
    let mut graph = std::collections::BTreeMap::new();
    for (file, text) in &texts {
        let own = module_of(file);
        let mut names = std::collections::BTreeSet::new();
        for (_, segments) in paths(text, &declared_modules(text)) {
            let Some(module) = below_folder(folder, &own, &segments) else { continue };
            if let Some(target) = resolve(module).filter(|t| t != *file) {
                names.insert(target);
            }
        }
        graph.insert((*file).clone(), names);
    }
    graph
}

/// The floors of `src/bench`, bottom first: a file may name files of its own floor and of the
/// floors below, never above. A floor is a folder (`base/`) or a file (`result.rs`, `request.rs`).
const BENCH_FLOORS: [&str; 9] =
    ["base", "traffic", "record", "measure", "verdict", "result", "present", "run", "request"];

/// Every edge of a `src/bench` graph that names a floor above its own (or a file on no floor), as
/// text; `mod.rs`, which declares the floors and re-exports their names upwards, names any.
fn upward_in_bench(graph: &std::collections::BTreeMap<String, std::collections::BTreeSet<String>>) -> Vec<String> {
    let floor = |file: &str| {
        let first = file.split('/').next().unwrap().trim_end_matches(".rs");
        BENCH_FLOORS.iter().position(|f| *f == first)
    };
    let mut found = Vec::new();
    for (file, names) in graph.iter().filter(|(file, _)| *file != "mod.rs") {
        for name in names {
            match (floor(file), floor(name)) {
                (Some(from), Some(to)) if to <= from => {}
                (from, to) => found.push(format!(
                    "{file} ({}) names {name} ({})",
                    from.map_or("no floor", |f| BENCH_FLOORS[f]),
                    to.map_or("no floor", |f| BENCH_FLOORS[f])
                )),
            }
        }
    }
    found
}

/// Every edge of `graph` that crosses between rooms where it may not.
fn room_crossings(graph: &std::collections::BTreeMap<String, std::collections::BTreeSet<String>>) -> Vec<String> {
    let mut found = Vec::new();
    for (file, names) in graph {
        for name in names {
            let (from, to) = (room(file), room(name));
            let allowed = match from {
                _ if from == to => true,
                "page" | "worker" => to == "protocol" || to == "below",
                "protocol" => false,
                _ => file == "mod.rs" || to == "protocol",
            };
            if !allowed {
                found.push(format!("{file} ({from}) names {name} ({to})"));
            }
        }
    }
    found
}

/// An import circle of more than two files in `graph`, as the files in order (the first again at
/// the end), or None.
fn long_circle(graph: &std::collections::BTreeMap<String, std::collections::BTreeSet<String>>) -> Option<Vec<String>> {
    // Depth-first along simple paths from each start, through files after it (each circle is found
    // from its first file), until a path of three or more files leads back to the start.
    fn walk<'a>(
        graph: &'a std::collections::BTreeMap<String, std::collections::BTreeSet<String>>,
        start: &'a String,
        path: &mut Vec<&'a String>,
    ) -> bool {
        let last = *path.last().unwrap();
        for next in graph.get(last).into_iter().flatten() {
            if next == start && path.len() > 2 {
                return true;
            }
            if next > start && !path.contains(&next) {
                path.push(next);
                if walk(graph, start, path) {
                    return true;
                }
                path.pop();
            }
        }
        false
    }
    for start in graph.keys() {
        let mut path = vec![start];
        if walk(graph, start, &mut path) {
            path.push(start);
            return Some(path.into_iter().cloned().collect());
        }
    }
    None
}

#[test]
fn the_web_rooms_meet_only_in_the_protocol_and_no_import_circle_is_longer_than_two_files() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = module_graph(&src, "web");
    assert!(graph.contains_key("page/app.rs") && graph.contains_key("worker/mod.rs"), "{:?}", graph.keys());
    let crossings = room_crossings(&graph);
    assert!(
        crossings.is_empty(),
        "files of src/web that cross rooms (page ↛ worker ↛ page, protocol ↛ any): {crossings:#?}"
    );
    if let Some(circle) = long_circle(&graph) {
        panic!("an import circle in src/web longer than two files: {}", circle.join(" → "));
    }
}

#[test]
fn a_room_crossing_and_a_long_circle_are_found() {
    let dir = std::env::temp_dir().join(format!("tokenmeter-rooms-{}", std::process::id()));
    let web = dir.join("web");
    for folder in ["page", "worker", "protocol"] {
        std::fs::create_dir_all(web.join(folder)).unwrap();
    }
    let files = [
        ("mod.rs", "pub mod cache;\npub mod page;\npub mod protocol;\npub mod worker;\n"),
        ("cache.rs", "use super::protocol::Manifest;\n"),
        ("protocol.rs", "pub mod model;\npub use model::Status;\n/// Drawn by [`super::page::charts`].\n"),
        ("protocol/model.rs", "pub struct Status;\n"),
        ("page/mod.rs", "pub mod charts;\npub mod run;\npub mod state;\n"),
        // A circle of three: run → state → charts → run, through a group and a `self`.
        ("page/run.rs", "use super::{state::{self, AppState}, charts as c};\nuse crate::web::protocol::Status;\n"),
        ("page/state.rs", "pub struct AppState(super::charts::Data);\n"),
        ("page/charts.rs", "pub struct Data;\nfn f() { crate::web::page::run::g() }\n"),
        ("worker/mod.rs", "mod host;\nuse host::Host;\n"),
        ("worker/host.rs", "use crate::web::page::state::AppState;\nuse super::super::cache;\n"),
    ];
    for (file, text) in files {
        std::fs::write(web.join(file), text).unwrap();
    }
    let graph = module_graph(&dir, "web");
    let _ = std::fs::remove_dir_all(&dir);
    let set = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<std::collections::BTreeSet<_>>();
    // `protocol::Status` is `protocol.rs`'s re-export of `protocol/model.rs`'s.
    assert_eq!(graph["page/run.rs"], set(&["page/state.rs", "page/charts.rs", "protocol/model.rs"]));
    assert_eq!(graph["worker/mod.rs"], set(&["worker/host.rs"]));
    assert_eq!(graph["protocol.rs"], set(&["protocol/model.rs", "page/charts.rs"]));
    assert_eq!(
        room_crossings(&graph),
        vec![
            "protocol.rs (protocol) names page/charts.rs (page)".to_string(),
            "worker/host.rs (worker) names page/state.rs (page)".to_string(),
        ]
    );
    let circle = long_circle(&graph).expect("the circle of three");
    assert_eq!(circle, ["page/charts.rs", "page/run.rs", "page/state.rs", "page/charts.rs"]);
}

#[test]
fn the_bench_floors_import_downwards_and_no_import_circle_is_longer_than_two_files() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = module_graph(&src, "bench");
    assert!(graph.contains_key("base/stats.rs") && graph.contains_key("request.rs"), "{:?}", graph.keys());
    let upward = upward_in_bench(&graph);
    assert!(upward.is_empty(), "files of src/bench that name a floor above their own ({BENCH_FLOORS:?}): {upward:#?}");
    if let Some(circle) = long_circle(&graph) {
        panic!("an import circle in src/bench longer than two files: {}", circle.join(" → "));
    }
}

#[test]
fn an_upward_import_a_reexported_name_and_a_long_circle_in_the_bench_floors_are_found() {
    let dir = std::env::temp_dir().join(format!("tokenmeter-floors-{}", std::process::id()));
    let bench = dir.join("bench");
    for folder in ["base", "traffic", "measure"] {
        std::fs::create_dir_all(bench.join(folder)).unwrap();
    }
    let files = [
        ("mod.rs", "pub mod base;\npub mod measure;\npub mod request;\npub mod traffic;\npub use base::lang::Lang;\n"),
        ("base/mod.rs", "pub mod lang;\npub mod stats;\n"),
        // Through the re-export in `mod.rs`: names base/lang.rs, not mod.rs.
        ("base/stats.rs", "use crate::bench::Lang;\n"),
        // Up from base to traffic, in a doc link.
        ("base/lang.rs", "/// See [`crate::bench::traffic::workload`].\npub enum Lang {}\n"),
        ("traffic/mod.rs", "pub mod dataset;\npub mod prompts;\npub mod workload;\n"),
        // A circle of three on one floor: workload → prompts → dataset → workload.
        ("traffic/workload.rs", "use super::prompts::Prompt;\n"),
        ("traffic/prompts.rs", "use crate::bench::traffic::{dataset::Row, workload};\n"),
        ("traffic/dataset.rs", "pub struct Row(super::workload::Spec);\n"),
        ("measure/mod.rs", "pub mod metrics;\n"),
        ("measure/metrics.rs", "use crate::bench::base::stats;\nuse crate::bench::request::Field;\n"),
        ("request.rs", "use crate::bench::measure::metrics::Slo;\n"),
    ];
    for (file, text) in files {
        std::fs::write(bench.join(file), text).unwrap();
    }
    let graph = module_graph(&dir, "bench");
    let _ = std::fs::remove_dir_all(&dir);
    let set = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<std::collections::BTreeSet<_>>();
    assert_eq!(graph["base/stats.rs"], set(&["base/lang.rs"]));
    assert_eq!(graph["traffic/prompts.rs"], set(&["traffic/dataset.rs", "traffic/workload.rs"]));
    assert_eq!(
        upward_in_bench(&graph),
        vec![
            "base/lang.rs (base) names traffic/workload.rs (traffic)".to_string(),
            "measure/metrics.rs (measure) names request.rs (request)".to_string(),
        ]
    );
    let circle = long_circle(&graph).expect("the circle of three");
    assert_eq!(circle, ["traffic/dataset.rs", "traffic/workload.rs", "traffic/prompts.rs", "traffic/dataset.rs"]);
}

#[test]
fn the_clis_files_import_each_other_in_no_circle() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = module_graph(&src, "bin/cli");
    assert!(graph.contains_key("bench.rs") && graph.contains_key("mod.rs"), "{:?}", graph.keys());
    // `mod.rs` declares the commands and dispatches to them: a circle through it is no circle.
    let graph: std::collections::BTreeMap<_, std::collections::BTreeSet<_>> = graph
        .into_iter()
        .filter(|(file, _)| file != "mod.rs")
        .map(|(file, names)| (file, names.into_iter().filter(|n| n != "mod.rs").collect()))
        .collect();
    if let Some(circle) = any_circle(&graph) {
        panic!("an import circle in src/bin/cli: {}", circle.join(" → "));
    }
}

/// An import circle of any length (two files naming each other too) in `graph`, or None.
fn any_circle(graph: &std::collections::BTreeMap<String, std::collections::BTreeSet<String>>) -> Option<Vec<String>> {
    for (file, names) in graph {
        for name in names {
            if graph.get(name).is_some_and(|back| back.contains(file)) {
                return Some(vec![file.clone(), name.clone(), file.clone()]);
            }
        }
    }
    long_circle(graph)
}

#[test]
fn a_two_file_circle_is_found_among_the_clis_files() {
    let dir = std::env::temp_dir().join(format!("tokenmeter-cli-{}", std::process::id()));
    let cli = dir.join("bin/cli");
    std::fs::create_dir_all(&cli).unwrap();
    let files = [
        ("mod.rs", "mod bench;\nmod max_rate;\nmod spec;\npub(crate) use bench::BenchArgs;\n"),
        ("bench.rs", "use super::spec::Spec;\nfn f() { super::max_rate::search() }\n"),
        ("max_rate.rs", "use super::BenchArgs;\n"),
        ("spec.rs", "pub struct Spec;\n"),
    ];
    for (file, text) in files {
        std::fs::write(cli.join(file), text).unwrap();
    }
    let graph = module_graph(&dir, "bin/cli");
    let _ = std::fs::remove_dir_all(&dir);
    // `super::BenchArgs` is `mod.rs`'s re-export of bench.rs's.
    assert_eq!(graph["max_rate.rs"].iter().collect::<Vec<_>>(), ["bench.rs"]);
    assert_eq!(
        any_circle(&graph),
        Some(vec!["bench.rs".to_string(), "max_rate.rs".to_string(), "bench.rs".to_string()])
    );
}

/// The crates `Cargo.toml` depends on (every `…dependencies` table), as Rust names them.
fn dependencies(manifest: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut in_table = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_table = line.trim_end_matches(']').ends_with("dependencies");
        } else if let Some((name, _)) = line.split_once('=').filter(|_| in_table && !line.starts_with('#')) {
            found.push(name.trim().replace('-', "_"));
        }
    }
    found
}

/// Whether `text` (a Rust file) names the crate `name`: `use name…`, `extern crate name`, or a path
/// `name::…` that no module of that name in the file (`mod name`, `use …::name`) could mean.
fn names_crate(text: &str, name: &str) -> bool {
    let words: Vec<&str> = text.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':')).collect();
    // A module of that name: a path naming it after its first segment (`super::name`), or declared.
    let shadowed = words.iter().any(|w| w.split("::").skip(1).any(|segment| segment == name))
        || text.contains(&format!("mod {name}"));
    text.contains(&format!("use {name}::"))
        || text.contains(&format!("use {name};"))
        || text.contains(&format!("extern crate {name}"))
        || (!shadowed && words.iter().any(|w| w.starts_with(&format!("{name}::"))))
}

#[test]
fn every_dependency_is_used() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let deps = dependencies(&manifest);
    assert!(deps.contains(&"wgpu".to_string()) && deps.contains(&"safetensors".to_string()), "{deps:?}");
    let mut texts = vec![std::fs::read_to_string(root.join("build.rs")).unwrap()];
    let mut stack = vec![root.join("src"), root.join("tests"), root.join("benches")];
    while let Some(dir) = stack.pop() {
        for path in std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()) {
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                texts.push(std::fs::read_to_string(&path).unwrap());
            }
        }
    }
    let unused: Vec<&String> = deps.iter().filter(|d| !texts.iter().any(|t| names_crate(t, d))).collect();
    assert!(unused.is_empty(), "dependencies in Cargo.toml that no file imports (use them or remove them): {unused:?}");
}

#[test]
fn a_module_of_a_crates_name_is_not_the_crate() {
    let ours = "use super::safetensors::{self, Dtype};\nfn f() { safetensors::header_len(); }\n";
    assert!(!names_crate(ours, "safetensors"));
    // Written so that this file itself does not name the crate (every_dependency_is_used reads it).
    assert!(names_crate(&format!("use {}::tensor::TensorView;\n", "safetensors"), "safetensors"));
    assert!(names_crate("fn f() { let _ = serde_json::to_string(&1); }\n", "serde_json"));
    assert_eq!(
        dependencies("[package]\nname = \"x\"\n[dependencies]\nfoo-bar = \"1\"\n# note = 1\n[target.'cfg(unix)'.dev-dependencies]\nbaz = \"2\"\n[profile.dev]\nopt-level = 1\n"),
        ["foo_bar", "baz"]
    );
}
