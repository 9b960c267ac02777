//! A run's results: key numbers, the latency table, the diagnosis with its evidence and advice,
//! the text report (English or Chinese) and the downloads: the results JSON (the CLI's `--out`
//! schema) and the per-request CSV. Everything is computed by `crate::bench`.

use super::history::Entry;
use super::i18n::{text, use_text, Label, UiLang};
use crate::bench::{self, Diagnosis, Lang, Stats, Verdict};
use crate::web::browser;
use leptos::prelude::*;
use std::sync::Arc;

fn num(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.2}")
    } else {
        "–".into()
    }
}

fn percent(fraction: f64) -> String {
    if fraction.is_finite() {
        format!("{:.1}%", fraction * 100.0)
    } else {
        "–".into()
    }
}

/// The diagnosis in `lang`: recomputed from the baseline when there is one (it is a pure
/// function), else the one saved with the run.
fn diagnosis_in(entry: &Entry, lang: Lang) -> Option<Diagnosis> {
    let r = &entry.result;
    match &r.baseline {
        // A failed baseline (its error is shown) leaves nothing to judge the run against.
        Some(base) if base.error.is_some() => None,
        Some(base) => Some(bench::diagnose_in(&r.metrics, base, lang)),
        None => r.diagnosis.clone(),
    }
}

fn verdict_class(v: Verdict) -> &'static str {
    match v {
        Verdict::Healthy => "ok",
        Verdict::UnderUtilised => "info",
        Verdict::PrefillBound | Verdict::DecodeBound => "warn",
        Verdict::Saturated => "bad",
    }
}

/// File names from the run's time: `tokenmeter-2026-11-29-1047.json`.
fn file_name(entry: &Entry, extension: &str) -> String {
    let stamp = browser::local_time(entry.time_ms).replace([' ', ':'], "-");
    format!("tokenmeter-{stamp}.{extension}")
}

#[component]
fn KeyNumbers(entry: Arc<Entry>) -> impl IntoView {
    let t = use_text();
    let m = entry.result.metrics.clone();
    let card = move |label: Label, value: String, unit: &'static str| {
        view! {
            <div class="stat">
                <div class="stat-label">{move || label(t())}</div>
                <div class="stat-value num">{value} <span class="unit">{unit}</span></div>
            </div>
        }
    };
    let goodput = match (m.goodput, m.slo_attainment) {
        (Some(g), Some(a)) => {
            view! { {format!("{} ({})", num(g), percent(a))} <span class="unit">"req/s"</span> }.into_any()
        }
        _ => view! { <span class="unit">{move || t().no_slo}</span> }.into_any(),
    };
    // Cancelled requests (by the workload, the user's Cancel, the saturation stop): apart from
    // the failed ones, and only when there were any.
    let cancelled: usize = m.cancelled.values().sum();
    view! {
        <div class="stats">
            {card(|t| t.completed, format!("{} / {}", m.completed, m.completed + m.failed + cancelled), "")}
            {card(|t| t.failed, m.failed.to_string(), "")}
            {(cancelled > 0).then(|| card(|t| t.cancelled_requests, cancelled.to_string(), ""))}
            {card(|t| t.duration, num(m.duration_s), "s")}
            {card(|t| t.request_throughput, num(m.request_throughput), "req/s")}
            {card(|t| t.output_throughput, num(m.output_throughput), "tok/s")}
            {card(|t| t.total_throughput, num(m.total_token_throughput), "tok/s")}
            <div class="stat">
                <div class="stat-label">{move || t().goodput}</div>
                <div class="stat-value num">{goodput}</div>
            </div>
            {card(|t| t.preemptions, m.preemptions.map_or("-".to_string(), |n| n.to_string()), "")}
            {card(|t| t.gpu_busy, percent(m.gpu_busy_fraction), "")}
        </div>
    }
}

#[component]
fn LatencyTable(entry: Arc<Entry>) -> impl IntoView {
    let t = use_text();
    let m = entry.result.metrics.clone();
    // A server's run: TTFT from arrival and from send, and the queue is the client's lateness.
    let server = entry.result.config.is_server();
    let mut rows: Vec<(&'static str, Stats)> = vec![(if server { "ttft_arrival" } else { "TTFT" }, m.ttft_ms.clone())];
    if let Some(send) = &m.ttft_from_send_ms {
        rows.push(("ttft_send", send.clone()));
    }
    rows.extend([
        ("TPOT", m.tpot_ms.clone()),
        ("ITL", m.itl_ms.clone()),
        ("E2E", m.e2e_ms.clone()),
        (if server { "lateness" } else { "queue" }, m.queue_ms.clone()),
    ]);
    view! {
        <table class="table latency" data-testid="summary">
            <thead>
                <tr>
                    <th scope="col">{move || t().latency_ms}</th>
                    <th scope="col">{move || t().mean}</th>
                    <th scope="col">"P50"</th>
                    <th scope="col">"P90"</th>
                    <th scope="col">"P95"</th>
                    <th scope="col">"P99"</th>
                    <th scope="col">"P99.9"</th>
                    <th scope="col">"n"</th>
                </tr>
            </thead>
            <tbody>
                {rows
                    .into_iter()
                    .map(|(name, s)| {
                        let label = move || match name {
                            "queue" => t().queue,
                            "lateness" => t().client_lateness,
                            "ttft_arrival" => t().ttft_from_arrival,
                            "ttft_send" => t().ttft_from_send,
                            name => name,
                        };
                        view! {
                            <tr>
                                <th scope="row">{label}</th>
                                {[s.mean, s.p50, s.p90, s.p95, s.p99, s.p999]
                                    .map(|x| view! { <td>{num(x)}</td> })
                                    .collect_view()}
                                <td class="muted">{s.count}</td>
                            </tr>
                        }
                    })
                    .collect_view()}
            </tbody>
        </table>
    }
}

#[component]
fn DiagnosisView(entry: Arc<Entry>) -> impl IntoView {
    let t = use_text();
    let UiLang(lang) = expect_context::<UiLang>();
    let baseline = entry.result.baseline.clone();
    let diagnosis = {
        let entry = entry.clone();
        move || diagnosis_in(&entry, lang.get())
    };
    let list = |items: Vec<String>| items.into_iter().map(|item| view! { <li>{item}</li> }).collect_view();
    view! {
        {move || {
            diagnosis()
                .map(|d| {
                    view! {
                        <div class=format!("diagnosis {}", verdict_class(d.verdict)) data-testid="diagnosis">
                            <div class="verdict">
                                <span class="verdict-label">{move || t().diagnosis}</span>
                                <strong>{d.verdict.label(lang.get())}</strong>
                            </div>
                            <div class="diagnosis-cols">
                                <div>
                                    <h4>{move || t().evidence}</h4>
                                    <ul>{list(d.evidence)}</ul>
                                </div>
                                <div>
                                    <h4>{move || t().advice}</h4>
                                    <ul>{list(d.advice)}</ul>
                                </div>
                            </div>
                        </div>
                    }
                })
        }}
        {baseline
            .map(|b| {
                let measured = match b.error {
                    Some(error) => error,
                    None => format!("TTFT {} ms, TPOT {} ms", num(b.ttft_ms), num(b.tpot_ms)),
                };
                view! { <p class="note num">{move || t().baseline} ": " {measured}</p> }
            })}
        // Saved with the run: what ran (the run record).
        {let config = entry.result.config.clone();
        let ran = move || ran_text(&config, lang.get());
        (!ran().is_empty()).then(|| view! { <p class="note num" data-testid="ran">{move || t().ran_on} ": " {ran}</p> })}
        // Saved with the run: its model's load (plain text, from the record).
        {entry.result.config.time_to_ready.clone().map(|ready| {
            let line = move || ready.lines(lang.get()).iter().map(|l| l.trim()).collect::<Vec<_>>().join(" · ");
            view! { <p class="note num" data-testid="ready-recorded">{line}</p> }
        })}
        // Saved with the run: how finely its timestamps could be taken.
        {let isolated = entry.result.config.cross_origin_isolated.unwrap_or(false);
        entry
            .result
            .config
            .timer_resolution_ms
            .map(|ms| {
                view! {
                    <p class="note num" data-testid="timer-resolution">
                        {move || t().timer_resolution} ": " {move || super::model_panel::timer_text(ms, isolated, t())}
                    </p>
                }
            })}
    }
}

/// One line from a run record: the adapter and kernel path of an engine, or the server and API
/// of a remote target (plain text: the record came from a file or a server).
fn ran_text(rc: &crate::bench::RunConfig, lang: Lang) -> String {
    let zh = lang == Lang::Zh;
    let pick = |en: String, zh_text: String| if zh { zh_text } else { en };
    let mut parts = Vec::new();
    if let Some(a) = &rc.adapter {
        parts.push(format!("{} ({})", a.name, a.backend));
    }
    if let Some(k) = &rc.kernels {
        parts.push(k.describe_in(lang));
    }
    if let Some(v) = &rc.verification {
        parts.push(v.line());
    }
    // The engine switches, as the record holds them (scheduler, speculation).
    if let Some(p) = &rc.scheduler {
        let order = serde_json::to_value(p.order).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default();
        let prefill = match (p.chunked_prefill, p.prefill_chunk) {
            (false, _) => pick("whole prefills".into(), "整段预填充".into()),
            (true, Some(n)) => pick(format!("prefill chunks ≤ {n}"), format!("预填充块 ≤ {n}")),
            (true, None) => pick("chunked prefill".into(), "分块预填充".into()),
        };
        parts.push(format!("{order} · {prefill}"));
    }
    match rc.engine.as_ref().map(|e| &e.speculation) {
        Some(crate::engine::Speculation::Ngram { k }) => {
            parts.push(pick(format!("speculation ngram:{k}"), format!("推测解码 ngram:{k}")))
        }
        Some(crate::engine::Speculation::Draft { k, model }) => {
            parts.push(pick(format!("speculation draft:{model}:{k}"), format!("推测解码 draft:{model}:{k}")))
        }
        _ => {}
    }
    if let Some(e) = &rc.engine {
        if e.prefix_cache {
            parts.push(pick("prefix cache".into(), "前缀缓存".into()));
        }
        if e.overlap {
            parts.push(pick("CPU/GPU overlap".into(), "CPU/GPU 重叠".into()));
        }
    }
    if let Some(d) = rc.workload.as_ref().and_then(|w| w.dataset.as_ref()) {
        let (file, format, kept, read) = (&d.file, d.format.name(), d.rows_kept, d.rows_read);
        parts.push(pick(
            format!("dataset {file} ({format}, {kept} of {read} rows)"),
            format!("数据集 {file}（{format}，{read} 行中的 {kept} 行）"),
        ));
    }
    if let Some(url) = rc.target.get("base_url").and_then(|v| v.as_str()) {
        let api = rc.target.get("api").and_then(|v| v.as_str()).unwrap_or("");
        let model = rc.target.get("model").and_then(|v| v.as_str()).unwrap_or("");
        parts.push(format!("{url} · {model} · {api}"));
    }
    if let Some(v) = &rc.tool_version {
        parts.push(format!("tokenmeter {v}"));
    }
    parts.join(" · ")
}

/// The run's verdict on itself ([`bench::validity_lines`]): VALID or INVALID, each reason, and
/// what its SLO claim came to — text only.
#[component]
fn ValidityView(entry: Arc<Entry>, lang: RwSignal<Lang>) -> impl IntoView {
    let t = use_text();
    let valid = entry.result.validity().valid;
    let lines = move || {
        let lines = bench::validity_lines(&entry.result, lang.get());
        let items = lines.into_iter().skip(1).map(|line| line.trim().trim_start_matches("- ").to_string());
        items.map(|line| view! { <li>{line}</li> }).collect_view()
    };
    view! {
        <div class="validity" class:invalid=!valid data-testid="validity">
            <span class="verdict">{move || if valid { t().run_valid } else { t().run_invalid }}</span>
            <ul>{lines}</ul>
        </div>
    }
}

/// A rate sized from the baseline (the page's first run, [`bench::RunConfig::sized_rate`]): what
/// it was, why, and where to go next — text only; nothing for a rate given.
#[component]
fn SizedRateView(entry: Arc<Entry>) -> impl IntoView {
    let t = use_text();
    entry.result.config.sized_rate.map(|z| {
        let line =
            move || t().rate_sized_line.replace("{rate}", &z.text()).replace("{alone}", &format!("{:.2}", z.alone_s));
        view! { <p class="sized-rate note" data-testid="sized-rate">{line}</p> }
    })
}

/// The report of the run in `shown`.
#[component]
pub fn Report(shown: RwSignal<Option<Arc<Entry>>>) -> impl IntoView {
    let t = use_text();
    let UiLang(ui_lang) = expect_context::<UiLang>();
    // The text report's own language, following the page's until toggled.
    let report_lang = RwSignal::new(ui_lang.get_untracked());
    Effect::new(move |_| report_lang.set(ui_lang.get()));
    let download_error = RwSignal::new(None::<String>);
    move || {
        shown.get().map(|entry| {
            let text_report = {
                let entry = entry.clone();
                move || {
                    let lang = report_lang.get();
                    let measured = bench::Measured::of(&entry.result.config);
                    bench::text_report_for(&entry.result.metrics, diagnosis_in(&entry, lang).as_ref(), lang, measured)
                }
            };
            let json = {
                let entry = entry.clone();
                move |_| {
                    let json = serde_json::to_string_pretty(&entry.result).expect("serialisable");
                    let outcome = browser::download(&file_name(&entry, "json"), "application/json", &json);
                    download_error.set(outcome.err().map(|e| e.to_string()));
                }
            };
            let csv = {
                let entry = entry.clone();
                move |_| {
                    let csv = bench::csv(&entry.result.requests);
                    let outcome = browser::download(&file_name(&entry, "csv"), "text/csv", &csv);
                    download_error.set(outcome.err().map(|e| e.to_string()));
                }
            };
            let html = {
                let entry = entry.clone();
                move |_| {
                    let runs = [(entry.title(super::i18n::text(report_lang.get_untracked())), &entry.result)];
                    let html = bench::present::html::html_report(&runs, report_lang.get_untracked());
                    let outcome = browser::download(&file_name(&entry, "html"), "text/html", &html);
                    download_error.set(outcome.err().map(|e| e.to_string()));
                }
            };
            // A saturation stop, a client that sent late: text, one line each.
            let warnings = {
                let entry = entry.clone();
                move || {
                    bench::run_warnings(&entry.result, report_lang.get())
                        .into_iter()
                        .map(|line| view! { <li>{line}</li> })
                        .collect_view()
                }
            };
            let lang_button = move |lang: Lang, label: &'static str| {
                view! {
                    <button
                        class="seg"
                        class:active=move || report_lang.get() == lang
                        on:click=move |_| report_lang.set(lang)
                    >
                        {label}
                    </button>
                }
            };
            view! {
                <section class="card report" aria-labelledby="report-title" data-testid="report">
                    <div class="card-head">
                        <h2 id="report-title">{move || t().report}</h2>
                        <span class="run-name" data-testid="report-name">
                            {
                                let entry = entry.clone();
                                move || entry.title(t())
                            }
                        </span>
                        <div class="actions">
                            <button class="small" data-testid="download-json" on:click=json>
                                {move || t().download_json}
                            </button>
                            <button class="small" data-testid="download-csv" on:click=csv>
                                {move || t().download_csv}
                            </button>
                            <button class="small" data-testid="download-html" on:click=html>
                                {move || t().download_html}
                            </button>
                        </div>
                    </div>
                    <p class="error" role="alert">{move || download_error.get()}</p>
                    <ul class="run-warnings" data-testid="run-warnings">{warnings}</ul>
                    <SizedRateView entry=entry.clone() />
                    <ValidityView entry=entry.clone() lang=report_lang />
                    <KeyNumbers entry=entry.clone() />
                    <LatencyTable entry=entry.clone() />
                    <DiagnosisView entry=entry.clone() />
                    <div class="card-head">
                        <h3>{move || text(report_lang.get()).text_report}</h3>
                        <div class="segmented">{lang_button(Lang::En, "EN")} {lang_button(Lang::Zh, "中文")}</div>
                    </div>
                    <pre class="text-report" data-testid="text-report">{text_report}</pre>
                </section>
            }
        })
    }
}
