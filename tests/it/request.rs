//! One run request from either edge: the CLI's flags and the page's form are only maps onto
//! [`RunRequest::parse`], so the same invalid request gives the same problems — every one, on the
//! same fields, with the same messages — from both.

use crate::common;

use common::cli::run;
use tokenmeter::bench::request::{Field, RunRequest};
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
