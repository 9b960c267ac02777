//! One run request from either edge: the CLI's flags and the page's form are only maps onto
//! [`RunRequest::parse`], so the same invalid request gives the same problems — every one, on the
//! same fields, with the same messages — from both.

use crate::common;

use common::cli::run;
use tokenmeter::bench::base::field::Field;
use tokenmeter::bench::request::RunRequest;
use tokenmeter::bench::Lang;

/// A request that breaks seven rules in seven fields, as the page's inputs hold it.
const BAD: [(Field, &str); 7] = [
    (Field::Rate, "-4"),
    (Field::Burstiness, "0"),
    (Field::InputLen, "0:5"),
    (Field::Concurrency, "many"),
    (Field::ThinkTime, "2"),
    (Field::WarmupS, "-1"),
    (Field::CostPerHour, "inf"),
];

/// The page's mapping: its inputs' text (`Settings::value`), the CLI's own fields absent.
fn page_form(field: Field) -> Option<String> {
    Field::PAGE
        .contains(&field)
        .then(|| BAD.iter().find(|(f, _)| *f == field).map_or(field.default_value(), |(_, v)| v).to_string())
}

#[test]
fn the_cli_and_the_page_report_the_same_problems() {
    let problems = RunRequest::parse(&page_form, None).expect_err("the request is invalid");
    let page: Vec<String> = problems.iter().map(|p| format!("{}: {p}", p.field.flag())).collect();
    // Every broken field is reported, not the first.
    let fields: Vec<Field> = problems.iter().map(|p| p.field).collect();
    for (field, _) in BAD {
        assert!(fields.contains(&field), "no problem for {field:?}: {page:#?}");
    }

    let mut args = vec!["bench".to_string(), "--synthetic".into(), "tiny".into()];
    for (field, value) in BAD {
        args.push(field.flag().to_string());
        args.push(value.to_string());
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = run(&args);
    assert_eq!(out.code, 2, "{}", out.stderr);
    let cli: Vec<String> = out.stderr.lines().filter_map(|l| l.strip_prefix("error: ")).map(str::to_string).collect();
    assert_eq!(cli, page, "the CLI's problems differ from the page's");
}

/// Against a server, engine settings and conversations of random ids are refused by one rule set
/// (`RunRequest::server_problems`, which the request's parse applies when it names a server): the
/// CLI names the same flags with the same words, every one.
#[test]
fn a_server_run_refuses_engine_settings_the_same_from_both_edges() {
    let set = [
        (Field::Endpoint, "http://127.0.0.1:9/v1"),
        (Field::Policy, "prefill-first"),
        (Field::Weights, "int8"),
        (Field::Turns, "2"),
        (Field::Prompts, "random"),
    ];
    let form = |field: Field| set.iter().find(|(f, _)| *f == field).map(|(_, v)| v.to_string());
    let problems = RunRequest::parse(&form, None).expect_err("engine settings on a server");
    let engine = |field: Field| form(field).filter(|_| field != Field::Endpoint);
    assert_eq!(RunRequest::parse(&engine, None).expect("valid for the engine").server_problems(true), problems);
    let fields: Vec<Field> = problems.iter().map(|p| p.field).collect();
    assert_eq!(fields, [Field::Policy, Field::Weights, Field::Turns]);
    let library: Vec<String> = problems.iter().map(|p| format!("{}: {p}", p.field.flag())).collect();
    for p in &problems {
        assert_ne!(p.text(Lang::En), p.text(Lang::Zh), "{:?} has no Chinese wording", p.rule);
    }
    let out = run(&[
        "bench",
        "--endpoint",
        "http://127.0.0.1:9/v1",
        "--policy",
        "prefill-first",
        "--weights",
        "int8",
        "--turns",
        "2",
        "--random-prompts",
    ]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    let cli: Vec<String> = out.stderr.lines().filter_map(|l| l.strip_prefix("error: ")).map(str::to_string).collect();
    assert_eq!(cli, library);
    // Defaults, and text prompts through a tokenizer: nothing to refuse.
    let plain = RunRequest::parse(&|f| (f == Field::Turns).then(|| "2".to_string()), None).expect("valid");
    assert_eq!(plain.server_problems(true), []);
    assert_eq!(plain.server_problems(false).len(), 1, "conversations need a tokenizer");
}

/// The request names its target: a server's root, model name and API from either edge's text,
/// checked once (a root with a query, an API of neither kind: the same words from both edges).
#[test]
fn the_request_names_its_target_and_checks_it_once() {
    use tokenmeter::bench::traffic::endpoint::{Api, NamedTarget};
    let set = [(Field::Endpoint, "http://h:8000/v1/"), (Field::ServedModel, "qwen3"), (Field::Api, "chat")];
    let form = |field: Field| set.iter().find(|(f, _)| *f == field).map(|(_, v)| v.to_string());
    let request = RunRequest::parse(&form, None).expect("valid");
    let server = request.target.server().expect("a server");
    assert_eq!(
        (server.base_url.as_str(), server.served_model.as_deref(), server.api),
        ("http://h:8000/v1", Some("qwen3"), Api::Chat)
    );
    assert_eq!(RunRequest::parse(&|_| None, None).unwrap().target, NamedTarget::Engine);

    let bad = [(Field::Endpoint, "http://h:8000/v1?key=x"), (Field::Api, "grpc")];
    let form = |field: Field| bad.iter().find(|(f, _)| *f == field).map(|(_, v)| v.to_string());
    let problems = RunRequest::parse(&form, None).expect_err("a bad root and API");
    assert_eq!(problems.iter().map(|p| p.field).collect::<Vec<_>>(), [Field::Endpoint, Field::Api]);
    let library: Vec<String> = problems.iter().map(|p| format!("{}: {p}", p.field.flag())).collect();
    let out = run(&["bench", "--endpoint", bad[0].1, "--api", bad[1].1]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    let cli: Vec<String> = out.stderr.lines().filter_map(|l| l.strip_prefix("error: ")).map(str::to_string).collect();
    assert_eq!(cli, library);
}

#[test]
fn each_problem_is_worded_in_both_languages() {
    let problems = RunRequest::parse(&page_form, None).expect_err("the request is invalid");
    for p in &problems {
        let (en, zh) = (p.text(Lang::En), p.text(Lang::Zh));
        assert!(!en.is_empty() && !zh.is_empty(), "{p:?}");
        assert_ne!(en, zh, "{:?} has no Chinese wording", p.rule);
    }
}

#[test]
fn a_valid_form_gives_the_run_it_describes() {
    let form = |field: Field| match field {
        Field::Rate => Some("1,2,inf".to_string()),
        Field::Turns => Some("2:4".to_string()),
        Field::ThinkTime => Some("0.5".to_string()),
        Field::SloTtft => Some("200".to_string()),
        Field::SloTpot => Some("50".to_string()),
        _ => None,
    };
    let request = RunRequest::parse(&form, None).expect("valid");
    assert_eq!(request.rates, vec![1.0, 2.0, f64::INFINITY]);
    let conversations = request.spec.conversations.expect("conversations");
    assert_eq!((conversations.turns.min, conversations.turns.max, conversations.think_time_s), (2, 4, 0.5));
    // Conversations turn the saturation stop off: their later turns have no arrival times to judge.
    assert!(!request.spec.saturation_stop);
    assert_eq!(request.slo_text.as_deref(), Some("ttft_ms=200,tpot_ms=50"));
    assert_eq!(request.spec.num_requests, 32);
}

/// The page records its request as the CLI's arguments (`args_of`) and *Run again* reads them
/// back (`fields_of`): the fields come back as they were, the CLI parses the arguments into the
/// request the page's form gives, and the target's flags are fields too (outputs are not).
#[test]
fn a_pages_request_as_arguments_reads_back_as_the_same_request() {
    use tokenmeter::bench::base::field::{args_of, fields_of};
    let set = [
        (Field::Arrival, "gamma"),
        (Field::Burstiness, "0.5"),
        (Field::Rate, "2,inf"),
        (Field::InputLen, "16:48"),
        (Field::Prompts, "random"),
        (Field::ChunkedPrefill, "off"),
        (Field::PrefixCache, "on"),
        (Field::SloTtft, "200"),
        (Field::SloTpot, "50"),
        (Field::WarmupS, "1.5"),
    ];
    let page = |field: Field| set.iter().find(|(f, _)| *f == field).map(|(_, v)| v.to_string());
    let args = args_of(page);
    assert!(args.contains(&"--random-prompts".to_string()) && args.contains(&"--no-chunked-prefill".to_string()));
    assert!(args.windows(2).any(|w| w == ["--slo", "ttft_ms=200,tpot_ms=50"]), "{args:?}");
    let mut with_target = args.clone();
    with_target.extend(["--endpoint".to_string(), "http://h:1/v1".to_string(), "--json".into(), "r.json".into()]);
    let (mut fields, other) = fields_of(&with_target);
    // The target's flags are the request's fields too; an output is not.
    assert_eq!(other, ["--json", "r.json"]);
    fields.retain(|f| *f != (Field::Endpoint, "http://h:1/v1".to_string()));
    fields.sort();
    let mut want: Vec<(Field, String)> = set.iter().map(|(f, v)| (*f, v.to_string())).collect();
    want.sort();
    assert_eq!(fields, want);
    // The CLI's reading of the arguments is the page's request.
    let cli = |field: Field| fields.iter().find(|(f, _)| *f == field).map(|(_, v)| v.clone());
    assert_eq!(RunRequest::parse(&cli, None).unwrap(), RunRequest::parse(&page, None).unwrap());
    // `--flag=value` and an SLO the page has no field for.
    let (fields, _) = fields_of(&["--rate=8".to_string(), "--slo".to_string(), "e2e_ms=900,ttft_ms=100".to_string()]);
    assert_eq!(
        fields,
        [(Field::Rate, "8".to_string()), (Field::SloTtft, "100".to_string()), (Field::Slo, "e2e_ms=900".to_string())]
    );
    // The arguments are the CLI's own: a bench with them runs (a short one: one rate, no warm-up).
    let short = |field: Field| match field {
        Field::Rate => Some("50".to_string()),
        Field::WarmupS => None,
        _ => page(field),
    };
    let args = args_of(short);
    let mut bench = vec!["bench", "--synthetic", "tiny", "--num-requests", "3", "--output-len", "2", "--no-baseline"];
    bench.extend(args.iter().map(String::as_str));
    let out = run(&bench);
    assert_eq!(out.code, 0, "{}", out.stderr);
}

/// A results file's `run_config` and its requests' (id, arrival, prompt length, output length).
/// A saved request: (id, arrival, prompt length, output length, prompt digest).
pub(crate) type SavedRequest = (u64, f64, u64, u64, String);

/// A saved run's record and its requests.
pub(crate) fn saved_run(path: &std::path::Path) -> (serde_json::Value, Vec<SavedRequest>) {
    let value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("results written")).expect("results JSON");
    let requests = value["requests"]
        .as_array()
        .expect("requests")
        .iter()
        .map(|r| {
            let n = |k: &str| r[k].as_u64().unwrap_or_else(|| panic!("{k} in {r}"));
            let digest = r["prompt_digest"].as_str().unwrap_or_else(|| panic!("prompt_digest in {r}"));
            (n("id"), r["arrival_s"].as_f64().expect("arrival_s"), n("prompt_len"), n("output_len"), digest.into())
        })
        .collect();
    (value["run_config"].clone(), requests)
}

/// `bench --rerun` runs the saved request again: the same recorded request, workload and
/// requests; a flag beside it overrides the saved one; a dataset run needs the file it read.
#[test]
fn a_rerun_is_the_saved_request_again() {
    let dir = std::env::temp_dir().join(format!("tokenmeter-rerun-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let dataset = dir.join("rows.jsonl");
    std::fs::write(&dataset, "{\"input_len\": 8, \"output_len\": 4}\n".repeat(6)).expect("dataset");
    let path = |name: &str| dir.join(name).to_str().expect("UTF-8").to_string();
    let ok = |args: &[&str]| {
        let out = run(args);
        assert_eq!(out.code, 0, "tokenmeter {}: {}", args.join(" "), out.stderr);
    };
    let first = path("first.json");
    let base = [
        "bench",
        "--synthetic",
        "tiny",
        "--random-prompts",
        "--rate",
        "50",
        "--num-requests",
        "4",
        "--input-len",
        "8",
        "--output-len",
        "3",
        "--seed",
        "7",
        "--no-baseline",
        // The check before a run is `verify.rs`'s to test: here it would only cost seconds a run.
        "--no-verify",
    ];
    ok(&[&base[..], &["--json", &first]].concat());
    let again = path("again.json");
    ok(&["bench", "--rerun", &first, "--json", &again]);
    let (saved, saved_requests) = saved_run(first.as_ref());
    let (rerun, rerun_requests) = saved_run(again.as_ref());
    assert_eq!(rerun["request"], saved["request"], "the recorded request");
    assert_eq!(saved["request"]["args"].as_array().map(Vec::len), Some(base.len() - 1), "{}", saved["request"]);
    assert_eq!(rerun["workload"], saved["workload"]);
    assert_eq!(rerun_requests, saved_requests, "the same requests, planned the same, with the same prompts");
    // Flags beside --rerun override the saved ones, and only those: another rate, and another seed,
    // so other prompts with other digests (the comparison above can fail).
    let faster = path("faster.json");
    ok(&["bench", "--rerun", &first, "--rate", "100", "--seed", "8", "--json", &faster]);
    let (overridden, reseeded_requests) = saved_run(faster.as_ref());
    assert_eq!((&overridden["workload"]["rate"], &overridden["workload"]["seed"]), (&100.0.into(), &8.into()));
    for kept in ["num_requests", "input_len", "output_len"] {
        assert_eq!(overridden["workload"][kept], saved["workload"][kept], "{kept}");
    }
    assert!(saved_requests.iter().zip(&reseeded_requests).all(|(a, b)| a.4 != b.4), "{reseeded_requests:?}");

    // A dataset run: its file's digest is recorded, and a changed file is refused.
    let with_data = path("data.json");
    let data_run = [
        "bench",
        "--synthetic",
        "tiny",
        "--rate",
        "50",
        "--num-requests",
        "3",
        "--no-baseline",
        "--no-verify",
        "--dataset",
        dataset.to_str().expect("UTF-8"),
        "--json",
        &with_data,
    ];
    ok(&data_run);
    let (data_config, data_requests) = saved_run(with_data.as_ref());
    assert_eq!(data_config["request"]["dataset_sha256"].as_str().map(str::len), Some(64), "{data_config}");
    let data_again = path("data-again.json");
    ok(&["bench", "--rerun", &with_data, "--json", &data_again]);
    assert_eq!(saved_run(data_again.as_ref()).1, data_requests);
    std::fs::write(&dataset, "{\"input_len\": 9, \"output_len\": 4}\n".repeat(6)).expect("dataset");
    let refused = run(&["bench", "--rerun", &with_data]);
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(refused.stderr.contains("is not the file the run read"), "{}", refused.stderr);

    // A text-prompt run: a model folder with a tokenizer (the built-in text through it).
    let model = dir.join("model");
    std::fs::create_dir_all(&model).expect("model dir");
    for file in ["config.json", "generation_config.json", "model.safetensors"] {
        std::fs::copy(common::fixture_dir("tiny-mha").join(file), model.join(file)).expect("fixture");
    }
    super::serving::word_tokenizer(&model);
    let text = path("text.json");
    let model_arg = model.to_str().expect("UTF-8");
    let text_run =
        ["--model", model_arg, "--rate", "50", "--num-requests", "3", "--input-len", "6", "--output-len", "2"];
    ok(&[&["bench"][..], &text_run, &["--no-baseline", "--no-verify", "--json", &text]].concat());
    let (text_config, text_requests) = saved_run(text.as_ref());
    assert_eq!(text_config["prompts"], "text", "{text_config}");
    let text_again = path("text-again.json");
    ok(&["bench", "--rerun", &text, "--json", &text_again]);
    assert_eq!(saved_run(text_again.as_ref()).1, text_requests);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The page indexes its inputs by `field as usize`: `Field::ALL` (and the page's first part of
/// it) must be in declaration order, each field once.
#[test]
fn the_field_lists_are_in_declaration_order() {
    for (i, field) in Field::ALL.into_iter().enumerate() {
        assert_eq!(field as usize, i, "{field:?}");
    }
    assert_eq!(Field::PAGE[..], Field::ALL[..Field::PAGE.len()]);
    // Every flag maps back to its field (the page's two SLO inputs share the CLI's `--slo`).
    for field in Field::ALL.into_iter().filter(|f| !matches!(f, Field::SloTtft | Field::SloTpot)) {
        let mapped = Field::from_flag(field.flag(), Some("x")).or_else(|| Field::from_flag(field.flag(), None));
        assert_eq!(mapped.map(|(f, _)| f), Some(field), "{}", field.flag());
    }
}

/// One launcher: outside the tests, an engine becomes a target only in the launcher
/// (`bench/run/launch.rs`: `OnEngine` makes the run's prompts, their kind and thinking tags), never
/// by an edge with prompts made on the side — every other `src/` file is read.
#[test]
fn engine_targets_are_built_by_the_launcher_only() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let (mut stack, mut found) = (vec![src.clone()], Vec::new());
    while let Some(dir) = stack.pop() {
        for path in std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()) {
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") && !path.ends_with("bench/run/launch.rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                found.extend(
                    text.lines()
                        .enumerate()
                        .filter(|(_, l)| builds_engine_target(l))
                        .map(|(i, _)| format!("{}:{}", path.strip_prefix(&src).unwrap().display(), i + 1)),
                );
            }
        }
    }
    assert!(found.is_empty(), "an EngineTarget built outside the launcher (use launch::OnEngine): {found:?}");
}

/// A line that builds an `EngineTarget` (a constructor or a struct literal); naming the type does not.
fn builds_engine_target(line: &str) -> bool {
    line.contains("EngineTarget::") || line.contains("EngineTarget {")
}

#[test]
fn a_planted_engine_target_outside_the_launcher_is_found() {
    for built in [
        "    let mut target = EngineTarget::for_prompts(&mut engine, &prompts, describe);",
        "let t = bench::run::launch::EngineTarget::new(engine, prompt, describe, None);",
        "    EngineTarget { engine, prompt, ..rest }",
    ] {
        assert!(builds_engine_target(built), "{built}");
    }
    assert!(!builds_engine_target("//! ([`crate::bench::run::launch::EngineTarget`]) or a server"));
    assert!(!builds_engine_target("fn f(t: &mut EngineTarget<'_, X>) {}"));
}

/// A dataset whose longest prompt with its output passes the model's context is refused after its
/// rows are attached, by the one load-time check ([`RunRequest::check_loaded`], which the page's
/// worker calls as the CLI does): the same problem, on the dataset's field, from the library and
/// from the CLI binary. The rows' lengths are their own (`input_len`), so the parse, which sees only
/// the flags, cannot know.
#[test]
fn a_dataset_past_the_context_is_one_problem_on_the_dataset_from_the_library_and_the_cli() {
    use tokenmeter::bench::base::rules::Rule;
    use tokenmeter::bench::traffic::dataset::{parse, Attach};
    let rows = "{\"input_len\": 100, \"output_len\": 8}\n{\"input_len\": 4090, \"output_len\": 16}\n";
    let file = std::env::temp_dir().join(format!("tokenmeter-long-rows-{}.jsonl", std::process::id()));
    std::fs::write(&file, rows).unwrap();
    let max_position = tokenmeter::model::Qwen3Config::preset("tiny").unwrap().max_position_embeddings;
    assert_eq!(max_position, 4096, "the rows were sized for the tiny shape's context");

    let form = |field: Field| match field {
        Field::Dataset => Some(file.display().to_string()),
        _ => None,
    };
    let mut request = RunRequest::parse(&form, None).expect("the flags alone are valid");
    let data = parse(&file.display().to_string(), rows.as_bytes(), None).unwrap();
    let attach = Attach {
        tokenizer: None,
        num_requests: None,
        trace_speedup: 1.0,
        block_tokens: 512,
        context: Some(max_position),
        rates: 1,
    };
    request.spec.attach_dataset(&data, &attach).unwrap();
    let problems = request.check_loaded(max_position).expect_err("4,090 + 16 tokens in a context of 4,096");
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].field, Field::Dataset);
    assert_eq!(problems[0].rule, Rule::Context { input: 4090, output: 16, max_position });
    assert_ne!(problems[0].text(Lang::En), problems[0].text(Lang::Zh), "no Chinese wording");

    let out = run(&["bench", "--synthetic", "tiny", "--dataset", &file.display().to_string(), "--no-verify"]);
    let _ = std::fs::remove_file(&file);
    assert_ne!(out.code, 0, "{}", out.stderr);
    let expected = format!("error: {}: {}", problems[0].field.flag(), problems[0]);
    assert!(out.stderr.lines().any(|l| l == expected), "the CLI said:\n{}\nnot: {expected}", out.stderr);
}

/// The rules whose messages other modules used to write in English only — the SLO parser's, the
/// endpoint's URL check, the phases', the engine's scheduling policy's, the speculation
/// setting's — are rules with a wording in each language, on their fields, and the English is what
/// the CLI printed before.
#[test]
fn the_slo_endpoint_phase_scheduler_and_speculation_rules_are_worded_in_both_languages() {
    /// The fields set, the field of the problem, its English.
    type Case<'a> = (&'a [(Field, &'a str)], Field, &'a str);
    let cases: [Case; 5] = [
        (&[(Field::Slo, "ttft=5")], Field::Slo, "SLO \"ttft=5\": unknown key \"ttft\" (expected ttft_ms, tpot_ms or e2e_ms)"),
        (
            &[(Field::Endpoint, "http://user:pw@host:8000/v1")],
            Field::Endpoint,
            "endpoint \"http://user:pw@host:8000/v1\": user info in the URL; pass the API key with --api-key-env instead",
        ),
        (
            &[(Field::Requests, "4"), (Field::WarmupRequests, "4")],
            Field::WarmupRequests,
            "--warmup-requests 4: leaves none of the 4 requests to measure",
        ),
        (
            &[(Field::ChunkedPrefill, "off"), (Field::InputLen, "600"), (Field::OutputLen, "8")],
            Field::ChunkedPrefill,
            "prompt: without chunked prefill, 600 prompt tokens + 8 new tokens need prefills of up to 607 tokens in \
             one step, above max_batched_tokens 512",
        ),
        (
            &[(Field::Speculate, "ngram:0")],
            Field::Speculate,
            "expected ngram:K or draft:MODEL:K with K from 1 to 16, or off",
        ),
    ];
    for (set, field, english) in cases {
        let form = |f: Field| set.iter().find(|(g, _)| *g == f).map(|(_, v)| v.to_string());
        let problems = RunRequest::parse(&form, None).expect_err(english);
        let p = problems.iter().find(|p| p.field == field).unwrap_or_else(|| panic!("none on {field:?}: {problems:?}"));
        assert_eq!(p.text(Lang::En), english);
        let zh = p.text(Lang::Zh);
        assert!(zh.chars().any(|c| ('\u{4e00}'..='\u{9fff}').contains(&c)), "no Chinese in {zh:?}");
    }
}
