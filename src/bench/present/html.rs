//! A self-contained HTML report of one or more runs — the charts as inline SVG, the
//! per-request timeline, the text report and the run record — that a user can attach to a pull
//! request. Shared by the page (a download) and the CLI (`bench --html FILE`).
//!
//! Everything textual that came from outside (model names, URLs, errors, the whole run record)
//! goes through [`escape`]; the only markup is written here, around numbers and fixed labels.

use std::fmt::Write;

use crate::bench::base::markup::escape;

use crate::bench::base::lang::Lang;
use crate::bench::base::stats::nice_step;
use crate::bench::measure::server_metrics::ServerSample;
use crate::bench::present::pareto::{self, ParetoPoint};
use crate::bench::present::report::{text_report_for, Measured};
use crate::bench::present::timeline::{self, Timeline};
use crate::bench::record::raw::RequestRecord;
use crate::bench::record::ready::{Phase, TimeToReady};
use crate::bench::result::BenchResult;
use crate::bench::verdict::diagnosis::{diagnose_in, Diagnosis};

struct Words {
    heading: &'static str,
    ttft: &'static str,
    tpot: &'static str,
    throughput: &'static str,
    batch: &'static str,
    kv: &'static str,
    x_arrival: &'static str,
    x_time: &'static str,
    text_report: &'static str,
    run_record: &'static str,
    running: &'static str,
    waiting: &'static str,
    pareto: &'static str,
    pareto_note: &'static str,
    first_answer: &'static str,
    server: &'static str,
    ready: &'static str,
}

const EN: Words = Words {
    heading: "tokenmeter benchmark report",
    ttft: "TTFT (ms)",
    tpot: "TPOT (ms)",
    throughput: "Output throughput (tok/s)",
    batch: "Batch: running and waiting",
    kv: "KV cache in use (%)",
    x_arrival: "by arrival (s)",
    x_time: "over time (s)",
    text_report: "Text report",
    run_record: "Run record",
    running: "running",
    waiting: "waiting",
    pareto: "Trade-off: speed per user against throughput (Pareto)",
    pareto_note: "Filled points are on the frontier: no other run is faster per user and higher in throughput at once.",
    first_answer: "first answer token",
    server: "The server's own view: running and waiting (its /metrics)",
    ready: "Time to ready: the model load",
};

const ZH: Words = Words {
    heading: "tokenmeter 性能测试报告",
    ttft: "首 token 延迟 TTFT (ms)",
    tpot: "每 token 时间 TPOT (ms)",
    throughput: "输出吞吐 (tok/s)",
    batch: "批次：运行与等待",
    kv: "KV 缓存占用 (%)",
    x_arrival: "横轴：到达时间 (s)",
    x_time: "横轴：时间 (s)",
    text_report: "文字报告",
    run_record: "运行记录",
    running: "运行",
    waiting: "等待",
    pareto: "权衡：每用户速度与吞吐（帕累托）",
    pareto_note: "实心点在前沿上：没有别的运行同时每用户更快、吞吐更高。",
    first_answer: "首个回答 token",
    server: "服务端视角：运行与等待（其 /metrics）",
    ready: "就绪时间：模型加载",
};

/// The report of `runs`, each a (name, result) — the page's run names, or the CLI's rates — in
/// `lang`, as one HTML document with no outside resources.
pub fn html_report(runs: &[(String, &BenchResult)], lang: Lang) -> String {
    html_report_with(runs, "", lang)
}

/// [`html_report`] with `sections` (HTML, e.g. [`crate::bench::verdict::quality::html_section`]) after the
/// trade-off chart, before the runs.
pub fn html_report_with(runs: &[(String, &BenchResult)], sections: &str, lang: Lang) -> String {
    let w = match lang {
        Lang::En => &EN,
        Lang::Zh => &ZH,
    };
    let html_lang = if lang == Lang::Zh { "zh-CN" } else { "en" };
    let title = runs.iter().map(|(name, _)| name.as_str()).collect::<Vec<_>>().join(" | ");
    let mut out = format!(
        "<!DOCTYPE html>\n<html lang=\"{html_lang}\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{} — {}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>{}</h1>\n",
        escape(w.heading),
        escape(&title),
        escape(w.heading)
    );
    pareto_section(&mut out, runs, lang, w);
    out.push_str(sections);
    for (name, result) in runs {
        section(&mut out, name, result, lang, w);
    }
    out.push_str("</body>\n</html>\n");
    out
}

/// Two or more runs with a point each: the Pareto chart of them ([`crate::bench::present::pareto`]).
fn pareto_section(out: &mut String, runs: &[(String, &BenchResult)], lang: Lang, w: &Words) {
    let points: Vec<ParetoPoint> = runs.iter().filter_map(|(name, r)| ParetoPoint::of(name.clone(), r)).collect();
    if points.len() < 2 {
        return;
    }
    let chart = pareto::Chart::draw(&points, pareto::counts_gpus(runs.iter().map(|(_, r)| *r)), lang);
    let _ = write!(
        out,
        "<section class=\"pareto\" data-testid=\"pareto\">\n<h2>{}</h2>\n{}\n<p class=\"note\">{}</p>\n</section>\n",
        escape(w.pareto),
        chart.svg(w.pareto),
        escape(w.pareto_note)
    );
}

fn section(out: &mut String, name: &str, r: &BenchResult, lang: Lang, w: &Words) {
    let _ = write!(out, "<section class=\"run\">\n<h2>{}</h2>\n<div class=\"charts\">\n", escape(name));
    let latency = |value: fn(&RequestRecord) -> Option<f64>| -> Vec<(f64, f64)> {
        r.requests.iter().filter_map(|q| Some((q.arrival_s, value(q)? * 1e3))).collect()
    };
    let ttft = latency(|q| q.ttft_s());
    let tpot = latency(|q| q.succeeded().then(|| q.tpot_s()).flatten());
    let throughput: Vec<(f64, f64)> = r.metrics.series.iter().map(|p| (p.t_s, p.output_tok_s)).collect();
    let stride = r.steps.len().div_ceil(600).max(1);
    let steps: Vec<_> =
        r.steps.iter().enumerate().filter(|(i, _)| i % stride == 0 || i + 1 == r.steps.len()).map(|(_, s)| s).collect();
    let running: Vec<(f64, f64)> = steps.iter().map(|s| (s.t_s, s.running as f64)).collect();
    let waiting: Vec<(f64, f64)> = steps.iter().map(|s| (s.t_s, s.waiting as f64)).collect();
    let kv: Vec<(f64, f64)> =
        steps.iter().map(|s| (s.t_s, 100.0 * s.kv_blocks_used as f64 / s.kv_blocks_total.max(1) as f64)).collect();
    // A thinking model's replies: the first answer token beside the first token.
    let answer = latency(|q| if q.reasoning_tokens > 0 { q.ttfat_s() } else { None });
    let mut ttft_series: Vec<Series> = vec![("TTFT", timeline::DECODE, Shape::Dots, &ttft)];
    if !answer.is_empty() {
        ttft_series.push((w.first_answer, "#f59e0b", Shape::Dots, &answer));
    }
    chart(out, "chart-ttft", w.ttft, w.x_arrival, &ttft_series);
    chart(out, "chart-tpot", w.tpot, w.x_arrival, &[("TPOT", "#14b8a6", Shape::Dots, &tpot)]);
    chart(out, "chart-throughput", w.throughput, w.x_time, &[("tok/s", timeline::DECODE, Shape::Steps, &throughput)]);
    chart(
        out,
        "chart-batch",
        w.batch,
        w.x_time,
        &[(w.running, timeline::PREFILL, Shape::Steps, &running), (w.waiting, "#f43f5e", Shape::Steps, &waiting)],
    );
    chart(out, "chart-kv", w.kv, w.x_time, &[("KV %", timeline::WAITING, Shape::Line, &kv)]);
    if let Some(m) = &r.server_metrics {
        let of = |f: fn(&ServerSample) -> Option<f64>| -> Vec<(f64, f64)> {
            m.samples.iter().filter_map(|s| Some((s.t_s, f(s)?))).collect()
        };
        let (running, waiting) = (of(|s| s.running), of(|s| s.waiting));
        chart(
            out,
            "chart-server",
            w.server,
            w.x_time,
            &[(w.running, timeline::PREFILL, Shape::Line, &running), (w.waiting, "#f43f5e", Shape::Line, &waiting)],
        );
    }
    out.push_str("</div>\n");

    let t = Timeline::draw(&r.requests, &r.steps, None, r.config.is_server())
        .with_steady(r.metrics.steady.as_ref())
        .with_conditions(r.metrics.browser_conditions.as_ref());
    let l = timeline::labels(lang, t.server);
    let _ = write!(
        out,
        "<figure class=\"timeline-card\" data-testid=\"timeline\">\n<figcaption>{}</figcaption>\n",
        escape(l.title)
    );
    out.push_str(&t.svg(lang));
    out.push_str("\n<p class=\"legend\">");
    let mut swatch = |colour: &str, label: &str| {
        let _ = write!(out, "<span class=\"swatch\" style=\"background:{colour}\"></span>{} ", escape(label));
    };
    swatch(timeline::WAITING, l.waiting);
    if !t.server {
        swatch(timeline::PREFILL, l.prefill);
    }
    swatch(timeline::DECODE, l.decode);
    swatch(timeline::MARK, l.marks);
    if !t.server {
        swatch("#64748b", l.steps);
    }
    if !t.steady.is_empty() {
        swatch(timeline::STEADY, l.steady);
    }
    out.push_str("</p>\n");
    if t.server {
        let _ = writeln!(out, "<p class=\"note\">{}</p>", escape(l.server_note));
    }
    out.push_str("</figure>\n");
    if let Some(ready) = &r.config.time_to_ready {
        ready_section(out, ready, lang, w);
    }

    let diagnosis: Option<Diagnosis> = match &r.baseline {
        Some(base) if base.error.is_some() => None,
        Some(base) => Some(diagnose_in(&r.metrics, base, lang)),
        None => r.diagnosis.clone(),
    };
    let text = text_report_for(&r.metrics, diagnosis.as_ref(), lang, Measured::of(&r.config));
    let _ = write!(out, "<h3>{}</h3>\n<pre class=\"text-report\">{}</pre>\n", escape(w.text_report), escape(&text));
    let record = serde_json::to_string_pretty(&r.config).unwrap_or_default();
    let _ = write!(
        out,
        "<h3>{}</h3>\n<pre class=\"run-record\">{}</pre>\n</section>\n",
        escape(w.run_record),
        escape(&record)
    );
}

/// The model load before the run: its phases as one bar, each part as wide as its share of the
/// whole, and the report's lines ([`TimeToReady::lines`]).
fn ready_section(out: &mut String, ready: &TimeToReady, lang: Lang, w: &Words) {
    let _ = write!(
        out,
        "<section class=\"ready\" data-testid=\"time-to-ready\">\n<h3>{}</h3>\n<div class=\"ready-bar\">",
        escape(w.ready)
    );
    let phases = ready.phases();
    for (phase, share) in ready.shares().into_iter().filter(|(_, share)| *share > 0.0) {
        let seconds = phases.iter().find(|(p, _)| *p == phase).map_or(0.0, |(_, s)| *s);
        let _ = write!(
            out,
            "<span class=\"ready-{}\" style=\"width:{:.2}%;background:{}\" title=\"{} {}\"></span>",
            phase.key(),
            share * 100.0,
            phase.colour(),
            escape(phase.label(lang)),
            crate::bench::record::ready::duration(seconds)
        );
    }
    out.push_str("</div>\n<p class=\"legend\">");
    for phase in Phase::ALL {
        let _ = write!(
            out,
            "<span class=\"swatch\" style=\"background:{}\"></span>{} ",
            phase.colour(),
            escape(phase.label(lang))
        );
    }
    let _ =
        write!(out, "</p>\n<pre class=\"ready-lines\">{}</pre>\n</section>\n", escape(&ready.lines(lang).join("\n")));
}

/// One series of a chart: name, colour, shape, (x, y) points.
type Series<'a> = (&'a str, &'a str, Shape, &'a [(f64, f64)]);

#[derive(Clone, Copy)]
enum Shape {
    /// One dot per point (a latency per request).
    Dots,
    /// Each value holds until the next point (a bucket, a step's state).
    Steps,
    Line,
}

const CHART_W: f64 = 460.0;
const CHART_H: f64 = 220.0;
const LEFT: f64 = 48.0;
const RIGHT: f64 = 12.0;
const TOP: f64 = 10.0;
const BOTTOM: f64 = 24.0;

/// A small SVG chart: the series, axes from 0 and round ticks, a legend of the series' names.
fn chart(out: &mut String, testid: &str, title: &str, x_label: &str, series: &[Series]) {
    let finite = |&&(x, y): &&(f64, f64)| x.is_finite() && y.is_finite();
    let all = || series.iter().flat_map(|s| s.3.iter().filter(finite));
    let count = all().count();
    let x_max = all().map(|p| p.0).fold(0.0, f64::max).max(1e-9);
    let y_max = all().map(|p| p.1).fold(0.0, f64::max).max(1e-9);
    let (x_step, y_step) = (nice_step(x_max / 5.0), nice_step(y_max / 4.0));
    let y_top = (y_max / y_step).ceil() * y_step;
    let x_of = |x: f64| LEFT + x / x_max * (CHART_W - LEFT - RIGHT);
    let y_of = |y: f64| TOP + (1.0 - y / y_top) * (CHART_H - TOP - BOTTOM);
    let _ = write!(
        out,
        "<figure class=\"chart\" data-testid=\"{testid}\" data-points=\"{count}\">\n<figcaption>{} <span>{}</span></figcaption>\n\
         <svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {CHART_W} {CHART_H}\" role=\"img\" aria-label=\"{}\">",
        escape(title),
        escape(x_label),
        escape(title)
    );
    // Grid and tick labels.
    let mut grid = String::new();
    let mut labels = String::new();
    let mut y = 0.0;
    while y <= y_top * (1.0 + 1e-9) {
        let _ = write!(grid, "M{LEFT} {:.1}H{:.1}", y_of(y), CHART_W - RIGHT);
        let _ = write!(
            labels,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            LEFT - 4.0,
            y_of(y) + 4.0,
            tick(y)
        );
        y += y_step;
    }
    let mut x = 0.0;
    while x <= x_max * (1.0 + 1e-9) {
        let _ = write!(
            labels,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            x_of(x),
            CHART_H - 6.0,
            tick(x)
        );
        x += x_step;
    }
    let _ = write!(out, "<path d=\"{grid}\" stroke=\"#e2e8f0\"/><g font-size=\"10\" fill=\"#64748b\">{labels}</g>");
    for &(_, colour, shape, points) in series {
        let mut d = String::new();
        let mut points: Vec<(f64, f64)> = points.iter().filter(finite).copied().collect();
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        for (i, &(x, y)) in points.iter().enumerate() {
            let (px, py) = (x_of(x), y_of(y));
            let _ = match (shape, i) {
                (Shape::Dots, _) => write!(d, "M{px:.1} {py:.1}h0"),
                (_, 0) => write!(d, "M{px:.1} {py:.1}"),
                (Shape::Steps, _) => write!(d, "H{px:.1}V{py:.1}"),
                (Shape::Line, _) => write!(d, "L{px:.1} {py:.1}"),
            };
        }
        let style = match shape {
            Shape::Dots => "stroke-width=\"5\" stroke-linecap=\"round\"",
            _ => "stroke-width=\"1.5\"",
        };
        let _ = write!(out, "<path d=\"{d}\" fill=\"none\" stroke=\"{colour}\" {style}/>");
    }
    out.push_str("</svg>\n<p class=\"legend\">");
    for &(name, colour, _, _) in series {
        let _ = write!(out, "<span class=\"swatch\" style=\"background:{colour}\"></span>{} ", escape(name));
    }
    out.push_str("</p>\n</figure>\n");
}

/// A tick label: no trailing zeros.
fn tick(v: f64) -> String {
    let text = format!("{v:.2}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

const STYLE: &str = "body{font:14px/1.45 system-ui,sans-serif;max-width:1100px;margin:2rem auto;padding:0 1rem;color:#0f172a}\
h1{font-size:1.4rem}h2{font-size:1.15rem;border-top:1px solid #e2e8f0;padding-top:1rem}\
.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(340px,1fr));gap:1rem}\
figure{margin:0}figcaption{font-weight:600;margin-bottom:.3rem}figcaption span{font-weight:400;color:#64748b;font-size:.85em}\
svg{width:100%;height:auto;display:block}.timeline-card{margin-top:1rem}\
.legend{font-size:.85em;color:#475569}.swatch{display:inline-block;width:.8em;height:.8em;border-radius:2px;margin:0 .3em 0 .6em}\
.note{color:#475569;font-size:.85em}\
.ready-bar{display:flex;height:16px;border-radius:3px;overflow:hidden;background:#e2e8f0;margin:.3rem 0}.ready-bar span{display:block;height:100%}\
pre{background:#f8fafc;border:1px solid #e2e8f0;padding:.8rem;overflow:auto;font-size:12px}";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::measure::metrics::summarize;
    use crate::bench::record::raw::StepSample;
    use crate::bench::record::run_config::RunConfig;

    fn result(model: &str, error: &str) -> BenchResult {
        let done = RequestRecord {
            id: 0,
            arrival_s: 0.0,
            scheduled_s: Some(0.1),
            first_token_s: Some(0.3),
            token_times_s: vec![0.3, 0.5, 0.7],
            finish_s: Some(0.7),
            prompt_len: 4,
            output_len: 3,
            ..RequestRecord::default()
        };
        let failed = RequestRecord {
            id: 1,
            arrival_s: 0.2,
            error: Some(error.to_string()),
            prompt_len: 4,
            ..RequestRecord::default()
        };
        let steps: Vec<StepSample> = [0.1, 0.3, 0.5, 0.7]
            .iter()
            .map(|&t| StepSample {
                t_s: t,
                duration_s: 0.2,
                running: 1,
                waiting: 1,
                batched_tokens: 1,
                kv_blocks_used: 2,
                kv_blocks_total: 8,
                ..Default::default()
            })
            .collect();
        let requests = vec![done, failed];
        BenchResult {
            decided: None,
            config: RunConfig { target: "local".into(), model: Some(model.to_string()), ..RunConfig::default() },
            metrics: summarize(&requests, &steps, None, 0.25),
            diagnosis: None,
            baseline: None,
            requests,
            steps,
            saturation: None,
            server_metrics: None,
            gpu_metrics: None,
            validity: None,
        }
    }

    #[test]
    fn escape_covers_markup_and_quotes() {
        assert_eq!(escape(r#"<a href="x">'&'</a>"#), "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;");
        assert_eq!(escape("模型 ok"), "模型 ok");
    }

    #[test]
    fn untrusted_text_is_escaped_everywhere() {
        let evil = "<script>alert(1)</script>";
        let r = result(&format!("model{evil}"), &format!("http 500: {evil}"));
        let html = html_report(&[(format!("run {evil}"), &r)], Lang::En);
        assert!(!html.contains("<script"), "unescaped markup in the report");
        assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        // The name is in the title and the heading, the model in the run record, all escaped.
        assert!(html.matches("run &lt;script&gt;").count() >= 2);
        assert!(html.contains("model&lt;script&gt;"));
        // An exporter's error, in the energy row of the report.
        let mut r = r;
        let gpu = crate::bench::measure::energy::GpuReadings {
            source: crate::bench::measure::energy::EnergySource::Dcgm,
            from: format!("http://dcgm/{evil}"),
            readings: Default::default(),
            unavailable: Some(format!("not prometheus: {evil}")),
        };
        r.metrics.energy = Some(crate::bench::measure::energy::Energy::of(&gpu, &r.requests, None));
        let html = html_report(&[("run".into(), &r)], Lang::En);
        assert!(!html.contains("<script"), "unescaped markup in the energy row");
        assert!(html.contains("GPU energy (dcgm http://dcgm/&lt;script&gt;"), "no energy row");
        assert!(!html.contains("http://") || html.contains("xmlns=\"http://www.w3.org/2000/svg\""));
    }

    #[test]
    fn the_report_holds_charts_timeline_text_and_run_record() {
        let r = result("tiny", "timeout: 5 s");
        let html = html_report(&[("first".into(), &r), ("second".into(), &r)], Lang::En);
        assert!(html.starts_with("<!DOCTYPE html>") && html.trim_end().ends_with("</html>"));
        assert_eq!(html.matches("<section class=\"run\">").count(), 2);
        for id in ["chart-ttft", "chart-tpot", "chart-throughput", "chart-batch", "chart-kv", "timeline"] {
            assert_eq!(html.matches(&format!("data-testid=\"{id}\"")).count(), 2, "{id}");
        }
        // One TTFT dot (the failed request has none), four steps in the batch chart.
        assert!(html.contains("data-testid=\"chart-ttft\" data-points=\"1\""));
        assert!(html.contains("data-testid=\"chart-batch\" data-points=\"8\""));
        // Two runs: a Pareto chart of both (TPOT 200 ms: 5 tok/s per user; 3 tokens by 0.7 s).
        assert_eq!(html.matches("data-testid=\"pareto\"").count(), 1);
        assert!(html.contains("first: 5.0 tok/s per user, 4.3 tok/s per GPU"), "{html}");
        assert_eq!(html.matches("<svg").count(), 13);
        assert!(html.contains("Benchmark report"), "no text report");
        assert!(html.contains("&quot;model&quot;: &quot;tiny&quot;"), "no run record");
        assert!(!html.contains("src=") && !html.contains("href="), "outside resources");
        let one = html_report(&[("first".into(), &r)], Lang::En);
        assert!(!one.contains("data-testid=\"pareto\""), "one run is no trade-off");
        let zh = html_report(&[("一".into(), &r)], Lang::Zh);
        assert!(zh.contains("lang=\"zh-CN\"") && zh.contains("请求时间线") && zh.contains("性能测试报告"));
    }

    #[test]
    fn a_run_with_its_model_load_shows_the_phases_as_a_bar() {
        use crate::bench::record::ready::{LoadSource, TimeToReady};
        let mut r = result("tiny", "");
        assert!(!html_report(&[("run".into(), &r)], Lang::En).contains("time-to-ready"), "no load, no section");
        r.config.time_to_ready = Some(TimeToReady {
            source: LoadSource::Network,
            fetched_bytes: 2_000_000,
            download_s: 1.5,
            open_s: 0.25,
            first_step_s: 0.25,
            ready_s: 2.0,
            ..TimeToReady::default()
        });
        let html = html_report(&[("run".into(), &r)], Lang::En);
        assert_eq!(html.matches("data-testid=\"time-to-ready\"").count(), 1);
        // 1.5 of 2 s downloading: three quarters of the bar; no read, no upload: no part.
        assert!(
            html.contains(
                "<span class=\"ready-download\" style=\"width:75.00%;background:#6366f1\" title=\"download 1.50 s\">"
            ),
            "{html}"
        );
        assert!(
            html.contains("class=\"ready-open\" style=\"width:12.50%")
                && html.contains("class=\"ready-compile\" style=\"width:12.50%")
        );
        assert!(!html.contains("class=\"ready-read\"") && !html.contains("class=\"ready-upload\""));
        assert!(html.contains("downloaded 2.0 MB in 1.50 s (1.3 MB/s)"), "{html}");
        let zh = html_report(&[("run".into(), &r)], Lang::Zh);
        assert!(zh.contains("就绪时间：模型加载") && zh.contains("下载 2.0 MB，用时 1.50 s"), "{zh}");
    }
}
