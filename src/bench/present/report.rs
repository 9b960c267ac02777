//! What a run leaves behind: a text report (English or Chinese, laid out like the tutorial's,
//! extended), a per-request CSV, and one JSON schema shared by the app and the CLI.

use crate::bench::base::confidence::Decision;
use crate::bench::base::confidence::{min_count_for, INTERVAL_LEVEL};
use crate::bench::base::lang::Lang;
use crate::bench::base::stats::{supports, Stats, PERCENTILES};
use crate::bench::measure::metrics::BenchmarkMetrics;
use crate::bench::record::raw::RequestRecord;
use crate::bench::result::BenchResult;
use crate::bench::verdict::diagnosis::Diagnosis;

struct Labels {
    title: &'static str,
    requests: &'static str,
    failed: &'static str,
    ttft: &'static str,
    ttft_from_arrival: &'static str,
    ttft_from_send: &'static str,
    client_lateness: &'static str,
    ttft_arrival_row: &'static str,
    ttft_send_row: &'static str,
    lateness_row: &'static str,
    tpot: &'static str,
    mean: &'static str,
    total_throughput: &'static str,
    output_throughput: &'static str,
    request_throughput: &'static str,
    req_s: &'static str,
    goodput: &'static str,
    slo_attainment: &'static str,
    cost: &'static str,
    per_hour: &'static str,
    per_million_tokens: &'static str,
    per_request: &'static str,
    energy: &'static str,
    energy_measured_phase: &'static str,
    per_output_token: &'static str,
    average: &'static str,
    over: &'static str,
    failed_readings: &'static str,
    preemptions: &'static str,
    speculation: &'static str,
    tokens_per_chunk: &'static str,
    chunk_gap_row: &'static str,
    /// The footnote to a marked percentile, given what each marked one would need (`P99 needs 368`).
    unsupported: fn(&[(&str, usize)]) -> String,
    thinking: &'static str,
    server: &'static str,
    excluded: &'static str,
    measured_from: &'static str,
    steady: &'static str,
    steady_never: &'static str,
    outstanding: &'static str,
    delivered: &'static str,
    headers: &'static str,
    headers_note: &'static str,
    asked: &'static str,
    fits: &'static str,
    rejected: &'static str,
    send_lateness: &'static str,
    beyond_plan: &'static str,
    bound: &'static str,
    peak_in_flight: &'static str,
    conversations: &'static str,
    completed_sessions: &'static str,
    session_duration: &'static str,
    turn: &'static str,
    prompt: &'static str,
    first_answer: &'static str,
    reasoning_share: &'static str,
    still_thinking: &'static str,
    prefix_cache: &'static str,
    trace_implies: &'static str,
    prompt_tokens: &'static str,
    gpu_busy: &'static str,
    duration: &'static str,
    latency_ms: &'static str,
    queue: &'static str,
    diagnosis: &'static str,
    evidence: &'static str,
    advice: &'static str,
    success_rate: &'static str,
    errors: &'static str,
    cancelled: &'static str,
    cancelled_note: &'static str,
    by_workload: &'static str,
    by_user: &'static str,
    by_saturation_stop: &'static str,
    by_decided: &'static str,
    stopped_short: &'static str,
    usage_mismatch: &'static str,
    redirected: &'static str,
    timestamp_lag: &'static str,
    long_tasks: &'static str,
    longest: &'static str,
}

const EN: Labels = Labels {
    title: "Benchmark report",
    requests: "Requests",
    failed: "Failed",
    ttft: "Time to first token (TTFT)",
    ttft_from_arrival: "Time to first token (TTFT, from the planned arrival)",
    ttft_from_send: "TTFT from send",
    client_lateness: "client lateness",
    ttft_arrival_row: "TTFT (arrival)",
    ttft_send_row: "TTFT (send)",
    lateness_row: "Client lateness",
    tpot: "Time per output token (TPOT)",
    mean: "mean",
    total_throughput: "Total throughput",
    output_throughput: "Output throughput",
    request_throughput: "Request throughput",
    req_s: "req/s",
    goodput: "Goodput",
    slo_attainment: "SLO attainment",
    cost: "Cost",
    per_hour: "per hour",
    per_million_tokens: "per million output tokens",
    per_request: "per request",
    energy: "GPU energy",
    energy_measured_phase: "the measured phase: warm-up and cool-down left out",
    per_output_token: "J per output token",
    average: "average",
    over: "over",
    failed_readings: "failed readings, the first",
    preemptions: "Preemptions",
    speculation: "Speculation: draft tokens accepted / verified, per verifying step",
    tokens_per_chunk: "Tokens per chunk: ITL below is the gap between chunks, not between tokens; mean",
    chunk_gap_row: "ITL (chunk)",
    unsupported: |needs| {
        let needs: Vec<String> = needs.iter().map(|(name, n)| format!("{name} needs {n}")).collect();
        format!("* too few values to bound this percentile at 95% ({})", needs.join(", "))
    },
    thinking: "Thinking: reasoning / answer tokens",
    server: "Server's /metrics: peak running / waiting, KV cache, preemptions, prefix-cache hits",
    excluded: "Not measured (warm-up + cool-down requests, sent but left out of this summary)",
    measured_from: "measured from",
    steady: "Steady state",
    steady_never: "never reached",
    outstanding: "outstanding",
    delivered: "Delivered load",
    headers: "Send → headers",
    headers_note: "not in the send lateness: a browser's connection queue (six per HTTP/1.1 host), connecting, \
                   and any wait of the server's before it answers; TTFT from send includes it",
    asked: "asked",
    fits: "fits",
    rejected: "rejected",
    send_lateness: "Send lateness",
    beyond_plan: "beyond the plan",
    bound: "bound",
    peak_in_flight: "peak in flight",
    conversations: "Conversations",
    completed_sessions: "complete",
    session_duration: "mean length",
    turn: "turn",
    prompt: "prompt",
    first_answer: "Time to first answer token (after the thinking)",
    reasoning_share: "of the output",
    still_thinking: "ended still thinking",
    prefix_cache: "Prefix cache hit rate",
    trace_implies: "the trace's block ids imply {} for an unbounded cache",
    prompt_tokens: "prompt tokens",
    gpu_busy: "GPU busy",
    duration: "Duration",
    latency_ms: "Latency (ms)",
    queue: "Queue",
    diagnosis: "Diagnosis",
    evidence: "Evidence",
    advice: "Advice",
    success_rate: "Success rate",
    errors: "errors",
    cancelled: "Cancelled",
    cancelled_note: "neither completed nor failed, in no latency figure",
    by_workload: "by the workload",
    by_user: "by the user",
    by_saturation_stop: "by the saturation stop",
    by_decided: "by the search, its SLO attainment decided",
    stopped_short: "completed requests returned fewer tokens than asked (the server may not honour ignore_eos)",
    usage_mismatch:
        "requests: the server's usage.completion_tokens disagrees with the streamed tokens (usage_mismatch in the JSON)",
    redirected:
        "requests were redirected within the server (redirected_to in the JSON; the extra round trip is in TTFT)",
    timestamp_lag: "Stamp lag",
    long_tasks: "Main-thread long tasks (>50 ms)",
    longest: "longest",
};

// The first lines are the tutorial's own labels.
const ZH: Labels = Labels {
    title: "性能测试报告",
    requests: "请求数",
    failed: "失败请求数",
    ttft: "首 Token 延迟 (TTFT)",
    ttft_from_arrival: "首 Token 延迟 (TTFT，自计划到达时刻)",
    ttft_from_send: "自发送起的 TTFT",
    client_lateness: "客户端发送滞后",
    ttft_arrival_row: "TTFT (自到达)",
    ttft_send_row: "TTFT (自发送)",
    lateness_row: "客户端滞后",
    tpot: "每 Token 延迟 (TPOT)",
    mean: "平均",
    total_throughput: "总吞吐量",
    output_throughput: "输出吞吐量",
    request_throughput: "请求吞吐量",
    req_s: "请求/秒",
    goodput: "有效吞吐量 (Goodput)",
    slo_attainment: "SLO 达成率",
    cost: "成本",
    per_hour: "每小时",
    per_million_tokens: "每百万输出 token",
    per_request: "每个请求",
    energy: "GPU 能耗",
    energy_measured_phase: "测量阶段：不含预热与冷却",
    per_output_token: "焦耳/输出 token",
    average: "平均",
    over: "时长",
    failed_readings: "次读取失败，首个",
    preemptions: "抢占次数",
    speculation: "推测解码：接受 / 验证的草稿 token，每个验证步",
    tokens_per_chunk: "每个分块的 token 数：下表的 ITL 是分块之间的间隔，而非 token 之间；平均",
    chunk_gap_row: "ITL（分块）",
    unsupported: |needs| {
        let needs: Vec<String> = needs.iter().map(|(name, n)| format!("{name} 需 {n} 个")).collect();
        format!("* 数值太少，无法给出该百分位的 95% 区间（{}）", needs.join("，"))
    },
    thinking: "思考：推理 / 回答 token",
    server: "服务端 /metrics：运行 / 等待峰值，KV 缓存，抢占，前缀缓存命中",
    excluded: "未计入（预热 + 收尾请求：已发送，但不计入本摘要）",
    measured_from: "计量起点",
    steady: "稳态",
    steady_never: "未达到",
    outstanding: "未完成请求",
    delivered: "实际负载",
    headers: "发送 → 响应头",
    headers_note: "不计入发送延迟：浏览器的连接队列（每个 HTTP/1.1 主机六个）、建立连接，以及服务器应答前的等待；从发送起算的 TTFT 包含它",
    asked: "要求",
    fits: "符合",
    rejected: "拒绝",
    send_lateness: "发送滞后",
    beyond_plan: "超出计划",
    bound: "界限",
    peak_in_flight: "最多同时在途",
    conversations: "多轮会话",
    completed_sessions: "个完整",
    session_duration: "平均时长",
    turn: "第",
    prompt: "提示",
    first_answer: "首个回答 token 时间（思考之后）",
    reasoning_share: "占输出",
    still_thinking: "结束时仍在思考",
    prefix_cache: "前缀缓存命中率",
    trace_implies: "按 trace 的块 id，无限大缓存应为 {}",
    prompt_tokens: "提示 token",
    gpu_busy: "GPU 忙碌占比",
    duration: "测试时长",
    latency_ms: "延迟 (ms)",
    queue: "排队",
    diagnosis: "诊断",
    evidence: "依据",
    advice: "建议",
    success_rate: "成功率",
    errors: "错误",
    cancelled: "已取消",
    cancelled_note: "既不算完成也不算失败，不计入任何延迟数据",
    by_workload: "工作负载取消",
    by_user: "用户停止",
    by_saturation_stop: "饱和停止",
    by_decided: "搜索已判定 SLO 达成率",
    stopped_short: "个完成的请求输出少于要求的 token 数（服务器可能不支持 ignore_eos）",
    usage_mismatch: "个请求的 usage.completion_tokens 与流式收到的 token 数不符（见 JSON 中的 usage_mismatch）",
    redirected: "个请求被服务器重定向（见 JSON 中的 redirected_to；多出的往返计入 TTFT）",
    timestamp_lag: "时间戳延迟",
    long_tasks: "主线程长任务（>50 ms）",
    longest: "最长",
};

/// What measured the run, which decides what some numbers mean.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Measured {
    /// The engine in this process or the page: queue = waiting for the scheduler, preemptions
    /// and GPU busy known.
    Engine,
    /// A server, seen from its client: queue = the client's lateness in sending, TTFT from
    /// arrival and from send, no preemptions or GPU busy.
    Server,
}

impl Measured {
    pub fn of(config: &crate::bench::record::run_config::RunConfig) -> Measured {
        if config.is_server() {
            Measured::Server
        } else {
            Measured::Engine
        }
    }
}

/// [`text_report_for`] an engine run.
pub fn text_report(m: &BenchmarkMetrics, d: Option<&Diagnosis>, lang: Lang) -> String {
    text_report_for(m, d, lang, Measured::Engine)
}

/// The report as printed by the CLI and shown by the app. Pass a diagnosis made in the same
/// language (`diagnose_in(.., lang)`): its evidence and advice are printed as they are.
pub fn text_report_for(m: &BenchmarkMetrics, d: Option<&Diagnosis>, lang: Lang, measured: Measured) -> String {
    let server = measured == Measured::Server;
    let l = match lang {
        Lang::En => &EN,
        Lang::Zh => &ZH,
    };
    let sections = [
        headline_lines(m, l, lang, server),
        throughput_lines(m, l),
        thinking_lines(m, l),
        server_lines(m, l),
        conversation_lines(m, l),
        engine_lines(m, l),
        vec![String::new()],
        latency_table(m, l, server),
        d.map_or_else(Vec::new, |d| diagnosis_lines(d, l, lang)),
    ];
    let mut out = String::new();
    for text in sections.iter().flatten() {
        out.push_str(text);
        out.push('\n');
    }
    out
}

/// The tutorial's layout first: requests, failures, TTFT (and from send), the delivered load, the
/// steady state, TPOT and total throughput.
fn headline_lines(m: &BenchmarkMetrics, l: &Labels, lang: Lang, server: bool) -> Vec<String> {
    let mut out = Vec::new();
    let mut line = |text: String| out.push(text);
    // Tutorial layout first.
    line(format!("========== {} ==========", l.title));
    let cancelled: usize = m.cancelled.values().sum();
    line(format!("{}: {}", l.requests, m.completed + m.failed + cancelled));
    if let Some(x) = &m.excluded {
        line(format!(
            "{}: {} + {} ({} {} s)",
            l.excluded,
            x.warmup,
            x.cooldown,
            l.measured_from,
            num(x.measured_from_s)
        ));
    }
    line(format!("{}: {}", l.failed, m.failed));
    if cancelled > 0 {
        let by = |who: &str| match who {
            "workload" => l.by_workload,
            "user" => l.by_user,
            "decided" => l.by_decided,
            _ => l.by_saturation_stop,
        };
        let kinds: Vec<String> = m.cancelled.iter().map(|(who, n)| format!("{} × {n}", by(who))).collect();
        line(format!("{}: {cancelled} ({}; {})", l.cancelled, kinds.join(", "), l.cancelled_note));
    }
    let ttft = if server { l.ttft_from_arrival } else { l.ttft };
    line(format!("{ttft}: {} {} ms, P50 {} ms", l.mean, num(m.ttft_ms.mean), num(m.ttft_ms.p50)));
    // Over the same completed requests, the difference of the means is the mean lateness.
    if let Some(send) = &m.ttft_from_send_ms {
        line(format!(
            "{}: {} {} ms, P50 {} ms ({} {} {} ms)",
            l.ttft_from_send,
            l.mean,
            num(send.mean),
            num(send.p50),
            l.client_lateness,
            l.mean,
            num(m.ttft_ms.mean - send.mean)
        ));
    }
    if let Some(d) = &m.delivered {
        delivered_lines(d, l).into_iter().for_each(&mut line);
    }
    if let Some(st) = &m.steady {
        line(steady_line(st, l, lang));
    }
    line(format!("{}: {} {} ms", l.tpot, l.mean, num(m.tpot_ms.mean)));
    line(format!("{}: {} tokens/s", l.total_throughput, num(m.total_token_throughput)));
    out
}

/// Output and request throughput, goodput, cost and energy.
fn throughput_lines(m: &BenchmarkMetrics, l: &Labels) -> Vec<String> {
    let mut out = Vec::new();
    let mut line = |text: String| out.push(text);
    line(format!("{}: {} tokens/s", l.output_throughput, num(m.output_throughput)));
    line(format!("{}: {} {}", l.request_throughput, num(m.request_throughput), l.req_s));
    if let (Some(goodput), Some(attainment)) = (m.goodput, m.slo_attainment) {
        line(format!("{}: {} {} ({} {})", l.goodput, num(goodput), l.req_s, l.slo_attainment, percent(attainment)));
    }
    if let Some(c) = &m.cost {
        let mut text = format!(
            "{}: {} {} -> {} {}, {} {}",
            l.cost,
            money(c.per_hour),
            l.per_hour,
            money(c.per_million_output_tokens),
            l.per_million_tokens,
            money(c.per_request),
            l.per_request
        );
        if let Some(j) = m.energy.as_ref().and_then(|e| e.j_per_output_token) {
            text += &format!(", {} {}", significant(Some(j)), l.per_output_token);
        }
        line(text);
    }
    if let Some(e) = &m.energy {
        line(energy_line(e, l));
    }
    out
}

/// A thinking model's reasoning share and time to the first answer token.
fn thinking_lines(m: &BenchmarkMetrics, l: &Labels) -> Vec<String> {
    let mut out = Vec::new();
    let mut line = |text: String| out.push(text);
    if let Some(t) = &m.thinking {
        let share = t.reasoning_tokens as f64 / (t.reasoning_tokens + t.answer_tokens).max(1) as f64;
        let mut text = format!(
            "{}: {} / {} ({} {}; {} / {} {})",
            l.thinking,
            t.reasoning_tokens,
            t.answer_tokens,
            percent(share),
            l.reasoning_share,
            t.requests_thinking,
            m.completed,
            l.requests.to_lowercase()
        );
        if t.unanswered > 0 {
            text += &format!(", {} {}", t.unanswered, l.still_thinking);
        }
        line(text);
        line(format!(
            "{}: {} {} ms, P50 {} ms, P99 {} ms",
            l.first_answer,
            l.mean,
            num(t.ttfat_ms.mean),
            num(t.ttfat_ms.p50),
            num(t.ttfat_ms.p99)
        ));
    }
    out
}

/// What the server's own `/metrics` said.
fn server_lines(m: &BenchmarkMetrics, l: &Labels) -> Vec<String> {
    let mut out = Vec::new();
    let mut line = |text: String| out.push(text);
    if let Some(s) = &m.server {
        let count = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.0}"));
        let share = |v: Option<f64>| v.map_or("-".to_string(), percent);
        line(format!(
            "{}: {} / {}, {}, {}, {} ({} × /metrics)",
            l.server,
            count(s.max_running),
            count(s.max_waiting),
            share(s.max_kv_cache_usage),
            count(s.preemptions),
            share(s.prefix_cache_hit_rate),
            s.samples
        ));
    }
    out
}

/// Conversations, turn by turn.
fn conversation_lines(m: &BenchmarkMetrics, l: &Labels) -> Vec<String> {
    let mut out = Vec::new();
    let mut line = |text: String| out.push(text);
    if let Some(c) = &m.conversations {
        line(format!(
            "{}: {} ({} {}), {} {} s",
            l.conversations,
            c.sessions,
            c.completed_sessions,
            l.completed_sessions,
            l.session_duration,
            num(c.session_duration_s.mean)
        ));
        for t in &c.per_turn {
            line(format!(
                "  {} {}: {} {}, {} {} tok, TTFT P50 {} ms, {} {}",
                l.turn,
                t.turn + 1,
                t.completed,
                l.requests.to_lowercase(),
                l.prompt,
                num(t.mean_prompt_len),
                num(t.ttft_ms.p50),
                l.prefix_cache,
                t.prefix_cache_hit_rate.map_or("-".to_string(), percent)
            ));
        }
    }
    out
}

/// Preemptions, speculation, the prefix cache, GPU busy, duration, and what went wrong.
fn engine_lines(m: &BenchmarkMetrics, l: &Labels) -> Vec<String> {
    let mut out = Vec::new();
    let mut line = |text: String| out.push(text);
    line(format!("{}: {}", l.preemptions, m.preemptions.map_or("-".to_string(), |n| n.to_string())));
    if let Some(c) = &m.tokens_per_chunk {
        let max = c.max.map_or(String::new(), |n| format!(", max {n}"));
        line(format!("{} {}{max}", l.tokens_per_chunk, num(c.mean)));
    }
    if let Some(s) = &m.speculation {
        line(format!(
            "{}: {} / {} ({}), {}",
            l.speculation,
            s.accepted_tokens,
            s.drafted_tokens,
            percent(s.acceptance_rate),
            num(s.accepted_per_step)
        ));
    }
    line(
        match (m.prefix_cache_hit_rate, m.cached_prompt_tokens) {
            (Some(rate), Some(cached)) => format!(
                "{}: {} ({cached} / {} {})",
                l.prefix_cache,
                percent(rate),
                m.prefix_cache_prompt_tokens.unwrap_or(0),
                l.prompt_tokens
            ),
            _ => format!("{}: -", l.prefix_cache),
        } + &m
            .prefix_cache_implied_rate
            .map_or(String::new(), |rate| format!("; {}", l.trace_implies.replace("{}", &percent(rate)))),
    );
    line(format!("{}: {}", l.gpu_busy, percent(m.gpu_busy_fraction)));
    line(format!("{}: {} s", l.duration, num(m.duration_s)));
    if m.failed > 0 {
        let kinds: Vec<String> = m.errors.iter().map(|(kind, n)| format!("{kind} × {n}")).collect();
        line(format!("{}: {} ({}: {})", l.success_rate, percent(m.success_rate()), l.errors, kinds.join(", ")));
    }
    if m.stopped_short > 0 {
        line(format!("! {} / {} {}", m.stopped_short, m.completed, l.stopped_short));
    }
    if m.usage_mismatch > 0 {
        line(format!("! {} / {} {}", m.usage_mismatch, m.completed + m.failed, l.usage_mismatch));
    }
    if m.redirected > 0 {
        line(format!("! {} / {} {}", m.redirected, m.completed + m.failed, l.redirected));
    }
    out
}

/// The latency table: mean and percentiles of TTFT (from send too), TPOT, ITL, E2E and queue
/// or lateness, the engine's timestamp lag, long tasks.
fn latency_table(m: &BenchmarkMetrics, l: &Labels, server: bool) -> Vec<String> {
    let mut out = Vec::new();
    let mut line = |text: String| out.push(text);
    const NAMES: [&str; 5] = ["P50", "P90", "P95", "P99", "P99.9"];
    let header = [l.mean, NAMES[0], NAMES[1], NAMES[2], NAMES[3], NAMES[4]].map(String::from);
    line(table_row(l.latency_ms, header));
    let (ttft, queue) = if server { (l.ttft_arrival_row, l.lateness_row) } else { ("TTFT", l.queue) };
    let mut rows = vec![(ttft, &m.ttft_ms)];
    if let Some(send) = &m.ttft_from_send_ms {
        rows.push((l.ttft_send_row, send));
    }
    // Chunks that carried several tokens each: ITL is the gap between chunks, and says so.
    let itl = if m.tokens_per_chunk.is_some() { l.chunk_gap_row } else { "ITL" };
    rows.extend([("TPOT", &m.tpot_ms), (itl, &m.itl_ms), ("E2E", &m.e2e_ms), (queue, &m.queue_ms)]);
    let mut marked = [false; 5];
    // A percentile its count cannot bracket at 95% carries a mark.
    let mut cells = |s: &Stats| {
        let mut cells = [s.mean, s.p50, s.p90, s.p95, s.p99, s.p999].map(num);
        for ((cell, q), marked) in cells[1..].iter_mut().zip(PERCENTILES).zip(&mut marked) {
            if cell != "-" && !supports(s.count, q) {
                cell.push('*');
                *marked = true;
            }
        }
        cells
    };
    let mut table: Vec<String> = rows.into_iter().map(|(name, s)| table_row(name, cells(s))).collect();
    // The engine only: from each step's readback resolving to its tokens' timestamp.
    if let Some(s) = &m.timestamp_lag_ms {
        table.push(table_row(l.timestamp_lag, cells(s)));
    }
    out.extend(table);
    let mut line = |text: String| out.push(text);
    if marked.contains(&true) {
        let needs: Vec<(&str, usize)> = (NAMES.iter().zip(PERCENTILES).zip(marked))
            .filter(|&(_, marked)| marked)
            .map(|((&name, q), _)| (name, min_count_for(q, INTERVAL_LEVEL)))
            .collect();
        line((l.unsupported)(&needs));
    }
    if let Some(t) = &m.long_tasks {
        line(format!("{}: {} ({} {} ms)", l.long_tasks, t.count, l.longest, num(t.longest_ms)));
    }
    out
}

/// The diagnosis: its verdict, evidence and advice.
fn diagnosis_lines(d: &Diagnosis, l: &Labels, lang: Lang) -> Vec<String> {
    let mut out = Vec::new();
    let mut line = |text: String| out.push(text);
    line(String::new());
    line(format!("{}: {}", l.diagnosis, d.verdict.label(lang)));
    for (heading, items) in [(l.evidence, &d.evidence), (l.advice, &d.advice)] {
        line(format!("  {heading}:"));
        for item in items {
            line(format!("  - {item}"));
        }
    }
    out
}

/// The steady window ([`crate::bench::measure::steady`]) and its figures, or why there was none.
fn steady_line(st: &crate::bench::measure::steady::SteadyState, l: &Labels, lang: Lang) -> String {
    match (&st.never, &st.summary) {
        (None, Some(s)) => format!(
            "{}: {}–{} s ({} {}, ~{} {}): TTFT P50 {} ms, P99 {} ms, TPOT P99 {} ms{}",
            l.steady,
            num(st.from_s),
            num(st.to_s),
            st.requests,
            l.requests.to_lowercase(),
            num(st.level),
            l.outstanding,
            num(s.ttft_ms.p50),
            num(s.ttft_ms.p99),
            num(s.tpot_ms.p99),
            s.slo_attainment.map_or(String::new(), |a| format!(", {} {}", l.slo_attainment, percent(a)))
        ),
        _ => format!("{}: {} ({})", l.steady, l.steady_never, st.never_text(lang).as_deref().unwrap_or("-")),
    }
}

/// What the client delivered ([`crate::bench::measure::delivered`]): two lines, and a third with the time to
/// the response headers where it was recorded.
fn delivered_lines(d: &crate::bench::measure::delivered::DeliveredLoad, l: &Labels) -> Vec<String> {
    let asked = |x: Option<f64>| x.filter(|x| x.is_finite()).map_or("-".to_string(), num);
    let fit = d.fit.as_ref().map_or(String::new(), |f| {
        format!("; KS p {} (α {}): {}", num(f.p_value), f.alpha, if f.rejected { l.rejected } else { l.fits })
    });
    let headers = d.headers_ms.as_ref().map(|h| {
        format!(
            "{}: P50 {} ms, P99 {} ms, max {} ms ({})",
            l.headers,
            num(h.p50),
            num(h.p99),
            num(h.max),
            l.headers_note
        )
    });
    [
        format!(
            "{}: {} {} (95% {}–{}), {} {}; CV {} ({} {}){fit}",
            l.delivered,
            num(d.achieved_rps),
            l.req_s,
            num(d.achieved_rps_low),
            num(d.achieved_rps_high),
            l.asked,
            asked(Some(d.requested_rps)),
            num(d.interarrival_cv),
            l.asked,
            asked(d.expected_cv),
        ),
        format!(
            "{}: P50 {} ms, P99 {} ms, max {} ms; {} P99 {} ms ({} {} ms); {} {}",
            l.send_lateness,
            num(d.lateness_ms.p50),
            num(d.lateness_ms.p99),
            num(d.lateness_ms.max),
            l.beyond_plan,
            num(d.beyond_plan_ms.p99),
            l.bound,
            d.bound_ms,
            l.peak_in_flight,
            d.peak_in_flight
        ),
    ]
    .into_iter()
    .chain(headers)
    .collect()
}

const LABEL_WIDTH: usize = 16;
const NUMBER_WIDTH: usize = 10;

/// The label left-aligned, the numbers right-aligned, by terminal width (a CJK character
/// takes two columns, which `format!`'s padding does not know).
fn table_row(label: &str, numbers: [String; 6]) -> String {
    let pad = |text: &str, width: usize| " ".repeat(width.saturating_sub(display_width(text)));
    let mut row = format!("{label}{}", pad(label, LABEL_WIDTH));
    for number in numbers {
        row.push_str(&pad(&number, NUMBER_WIDTH));
        row.push_str(&number);
    }
    row
}

fn display_width(s: &str) -> usize {
    s.chars().map(|c| if c as u32 >= 0x2E80 { 2 } else { 1 }).sum()
}

/// An amount of money with four significant digits (at least two decimals): a request may cost
/// a hundredth of a cent.
fn money(x: f64) -> String {
    if !x.is_finite() {
        return "-".into();
    }
    let decimals = if x > 0.0 { (3 - x.log10().floor() as i32).max(2) } else { 2 };
    format!("{x:.*}", decimals as usize)
}

/// Four significant digits (at least one decimal), "–" where absent.
fn significant(x: Option<f64>) -> String {
    match x.filter(|x| x.is_finite()) {
        Some(x) => {
            let decimals = if x.abs() > 0.0 { (3 - x.abs().log10().floor() as i32).max(1) } else { 1 };
            format!("{x:.*}", decimals as usize)
        }
        None => "–".into(),
    }
}

/// `GPU energy (dcgm http://h:9400/metrics, 2 GPUs, energy counter): 500.0 W average, 1000 J over
/// 2.000 s, 0.2500 J per output token`; "–" and the reason where a figure is absent.
fn energy_line(e: &crate::bench::measure::energy::Energy, l: &Labels) -> String {
    let source = serde_json::to_value(e.source).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default();
    let mut head = format!("{source} {}", e.from);
    if let Some(gpus) = e.gpus {
        head += &format!(", {gpus} GPU{}", if gpus == 1 { "" } else { "s" });
    }
    if let Some(basis) = e.basis {
        head += match basis {
            crate::bench::measure::energy::EnergyBasis::EnergyCounter => ", energy counter",
            crate::bench::measure::energy::EnergyBasis::PowerGauge => ", power gauge",
        };
    }
    let mut text = format!(
        "{} ({head}): {} W {}, {} J {} {} s, {} {}",
        l.energy,
        significant(e.avg_power_w),
        l.average,
        significant(e.energy_j),
        l.over,
        significant(e.window_s),
        significant(e.j_per_output_token),
        l.per_output_token
    );
    if e.measured_phase {
        text += &format!(" ({})", l.energy_measured_phase);
    }
    if let Some(why) = &e.unavailable {
        text += &format!(" ({why})");
    } else if let (n, Some(first)) = (e.failed_readings, &e.first_error) {
        text += &format!(" ({n} {}: {first})", l.failed_readings);
    }
    text
}

fn num(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.2}")
    } else {
        "-".into()
    }
}

fn percent(fraction: f64) -> String {
    if fraction.is_finite() {
        format!("{:.1}%", fraction * 100.0)
    } else {
        "-".into()
    }
}

/// One row per request; latencies in ms; empty cells for what did not happen (`sent_s`: only
/// a server run has a send). Quoted per
/// RFC 4180 (CRLF line ends; a field with a comma, quote or line break is quoted, quotes doubled).
pub fn csv(records: &[RequestRecord]) -> String {
    let mut out = String::from(
        "id,arrival_s,scheduled_s,sent_s,first_token_s,finish_s,prompt_len,output_len,ttft_ms,tpot_ms,e2e_ms,preemptions,error\r\n",
    );
    let seconds = |v: Option<f64>| v.map(|s| format!("{s:.6}")).unwrap_or_default();
    let ms = |v: Option<f64>| v.map(|s| format!("{:.3}", s * 1000.0)).unwrap_or_default();
    for r in records {
        let fields = [
            r.id.to_string(),
            format!("{:.6}", r.arrival_s),
            seconds(r.scheduled_s),
            seconds(r.sent_s),
            seconds(r.first_token_s),
            seconds(r.finish_s),
            r.prompt_len.to_string(),
            r.output_len.to_string(),
            ms(r.ttft_s()),
            ms(r.tpot_s()),
            ms(r.e2e_s()),
            r.preemptions.to_string(),
            r.error.as_deref().map(csv_field).unwrap_or_default(),
        ];
        out.push_str(&fields.join(","));
        out.push_str("\r\n");
    }
    out
}

fn csv_field(text: &str) -> String {
    if text.contains([',', '"', '\r', '\n']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

/// Client lateness above this at p99 is warned about: the client, not the plan, then shapes the
/// offered load (issue 17's bound for "the client is never the bottleneck").
pub const LATENESS_WARN_MS: f64 = 1.0;

/// The run's verdict on itself, for after its report: "Result: VALID", or "Result: INVALID" and
/// a line per reason; then what its SLO claim came to, where it has one.
pub fn validity_lines(result: &BenchResult, lang: Lang) -> Vec<String> {
    let v = result.validity();
    let head = match (lang, v.valid) {
        (Lang::En, true) => "Result: VALID",
        (Lang::En, false) => "Result: INVALID",
        (Lang::Zh, true) => "结果：有效",
        (Lang::Zh, false) => "结果：无效",
    };
    let mut lines = vec![head.to_string()];
    lines.extend(v.reasons.iter().map(|r| format!("  - {}", r.text(lang))));
    // An undecided claim is a reason above already.
    if !v.slo.is_some_and(|c| matches!(c.decision, Decision::Undecided { .. })) {
        lines.extend(v.slo_text(lang).map(|t| format!("  {t}")));
    }
    lines
}

/// Warnings that go with a rate's report, one line each (the CLI prints them after the report,
/// the page shows them above it): a saturation stop, a search's run stopped once decided, and a
/// client that sent late.
pub fn run_warnings(result: &BenchResult, lang: Lang) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(cost) = &result.config.simulated {
        lines.push(match lang {
            Lang::En => format!("SIMULATED by tokenmeter plan, not measured; cost model: {}", cost.describe()),
            Lang::Zh => format!("由 tokenmeter plan 模拟，并非实测；开销模型：{}", cost.describe()),
        });
    }
    if let Some(s) = &result.saturation {
        lines.push(match lang {
            Lang::En => s.reason.clone(),
            Lang::Zh => format!("提前停止（无法维持该速率）：{}", s.reason),
        });
    }
    if let Some(d) = &result.decided {
        lines.push(match lang {
            Lang::En => format!("a --rate max run stopped early: {}", d.text(lang)),
            Lang::Zh => format!("--rate max 的运行提前停止：{}", d.text(lang)),
        });
    }
    if let Some(d) = result.metrics.delivered.as_ref().filter(|d| d.bent) {
        lines.push(match lang {
            Lang::En => format!(
                "the client bent the load: p99 {:.2} ms later than due, above the {} ms bound (waits for a \
                 max-concurrency slot are the plan and left out): the load offered was the client's, not the plan's",
                d.beyond_plan_ms.p99, d.bound_ms
            ),
            Lang::Zh => format!(
                "客户端改变了负载：P99 比应发送时间晚 {:.2} ms，超过 {} ms 的界限（等待最大并发名额属于计划，不计入）：\
                 实际负载由客户端而非计划决定",
                d.beyond_plan_ms.p99, d.bound_ms
            ),
        });
    }
    if let Some(f) = result.metrics.delivered.as_ref().and_then(|d| d.fit.as_ref()).filter(|f| f.rejected) {
        lines.push(match lang {
            Lang::En => {
                format!("the sends do not fit the requested process: {} (p {:.2e} < α {})", f.test, f.p_value, f.alpha)
            }
            Lang::Zh => format!("发送时间不符合要求的到达过程：{}（p {:.2e} < α {}）", f.test, f.p_value, f.alpha),
        });
    }
    let lateness_ms: Vec<f64> =
        result.requests.iter().filter_map(|r| r.client_lateness_s()).map(|s| s * 1000.0).collect();
    let p99 = crate::bench::base::stats::stats(&lateness_ms).p99;
    if p99 > LATENESS_WARN_MS {
        let capped = result.config.workload.as_ref().and_then(|w| w.max_concurrency).is_some();
        lines.push(match (lang, capped) {
            (Lang::En, capped) => format!(
                "the client sent requests late: p99 {p99:.2} ms after their planned arrival{}; above \
                 {LATENESS_WARN_MS} ms the offered load is the client's, not the plan's",
                if capped { " (this includes waits for a max-concurrency slot)" } else { "" }
            ),
            (Lang::Zh, capped) => format!(
                "客户端发送滞后：P99 比计划到达时间晚 {p99:.2} ms{}；超过 {LATENESS_WARN_MS} ms 时，\
                 实际负载由客户端而非计划决定",
                if capped { "（含等待最大并发名额的时间）" } else { "" }
            ),
        });
    }
    lines
}

#[cfg(test)]
mod tests {

    #[test]
    fn money_keeps_four_significant_digits() {
        assert_eq!(
            (money(2.5), money(0.0005), money(1234.5), money(0.0)),
            ("2.500".into(), "0.0005000".into(), "1234.50".into(), "0.00".into())
        );
        assert_eq!(money(f64::NAN), "-");
    }
    use super::*;
    use crate::bench::measure::metrics::{summarize, Slo};
    use crate::bench::verdict::diagnosis::{diagnose_in, Baseline, Verdict};

    fn records() -> Vec<RequestRecord> {
        let done = RequestRecord {
            id: 0,
            arrival_s: 0.0,
            scheduled_s: Some(0.1),
            first_token_s: Some(0.3),
            token_times_s: vec![0.3, 0.4, 0.6],
            finish_s: Some(0.6),
            prompt_len: 10,
            output_len: 3,
            preemptions: 1,
            error: None,
            ..RequestRecord::default()
        };
        let failed = RequestRecord {
            id: 1,
            scheduled_s: None,
            first_token_s: None,
            token_times_s: vec![],
            finish_s: None,
            output_len: 0,
            error: Some("he said \"no\", then\nquit".into()),
            ..done.clone()
        };
        vec![done, failed]
    }

    fn metrics() -> BenchmarkMetrics {
        summarize(&records(), &[], Some(&"ttft_ms=500".parse::<Slo>().unwrap()), 0.25)
    }

    #[test]
    fn chinese_report_keeps_the_tutorial_lines() {
        let d =
            diagnose_in(&metrics(), &Baseline { ttft_ms: 50.0, tpot_ms: 140.0, requests: 3, error: None }, Lang::Zh);
        assert_eq!(d.verdict, Verdict::PrefillBound);
        let report = text_report(&metrics(), Some(&d), Lang::Zh);
        for expected in [
            "========== 性能测试报告 ==========\n请求数: 2\n",
            "首 Token 延迟 (TTFT): 平均 300.00 ms, P50 300.00 ms\n",
            "每 Token 延迟 (TPOT): 平均 150.00 ms\n",
            "总吞吐量: 21.67 tokens/s\n",
            "有效吞吐量 (Goodput): 1.67 请求/秒 (SLO 达成率 50.0%)",
            "失败请求数: 1",
            "诊断: 预填充受限",
            "分块预填充",
        ] {
            assert!(report.contains(expected), "missing {expected:?} in\n{report}");
        }
    }

    #[test]
    fn english_report_table_is_aligned() {
        let report = text_report(&metrics(), None, Lang::En);
        assert!(report.contains("Time to first token (TTFT): mean 300.00 ms, P50 300.00 ms"));
        assert!(report.contains("Goodput: 1.67 req/s") && !report.contains("Diagnosis"));
        assert!(report.contains("Success rate: 50.0% (errors: he said \"no\", then\nquit × 1)\n"), "{report}");
        assert!(report.contains("GPU busy: 0.0%\n"), "{report}");
        let table: Vec<&str> = report.lines().skip_while(|l| !l.starts_with("Latency")).collect();
        // Six rows and the note that one value (or two) cannot bound a percentile: each is marked.
        assert_eq!(table.len(), 7, "{report}");
        assert!(table[6].starts_with("* too few values") && table[1].contains(" 300.00*"), "{report}");
        // The counts each marked percentile would need (P50: 0.5^6 < 2.5% is the first count whose
        // lowest value can be below the median at 95%; P90 and P99 as in confidence.rs's tests).
        assert!(
            table[6].contains("(P50 needs 6, P90 needs 36, P95 needs ")
                && table[6].contains(", P99 needs 368, P99.9 needs "),
            "{}",
            table[6]
        );
        assert!(table[3].starts_with("ITL") && table[3].contains(" 150.00 "), "{}", table[3]);
        assert!(table[5].starts_with("Queue") && table[5].contains("100.00"));
        for lang in [Lang::En, Lang::Zh] {
            let report = text_report(&metrics(), None, lang);
            let widths: Vec<usize> = report.lines().rev().skip(1).take(6).map(display_width).collect();
            assert!(widths.iter().all(|&w| w == LABEL_WIDTH + 6 * NUMBER_WIDTH), "{widths:?}\n{report}");
        }
        // Prefix caching: the engine's hit rate, "-" where nothing says (a server).
        assert!(report.contains("Prefix cache hit rate: -\n"), "{report}");
        let mut cached = records();
        for r in &mut cached {
            r.cached_tokens = Some(r.prompt_len / 4);
        }
        let m = summarize(&cached, &[], None, 0.25);
        let want = format!(
            "Prefix cache hit rate: 20.0% ({} / {} prompt tokens)\n",
            m.cached_prompt_tokens.unwrap(),
            m.prefix_cache_prompt_tokens.unwrap()
        );
        assert!(text_report(&m, None, Lang::En).contains(&want), "{want}");
        assert!(text_report(&m, None, Lang::Zh).contains("前缀缓存命中率: 20.0%"));
        // No goodput line without an SLO; empty stats print as "-".
        let bare = text_report(&summarize(&[], &[], None, 0.25), None, Lang::En);
        assert!(!bare.contains("Goodput") && bare.contains("mean - ms") && bare.contains("GPU busy: -"));
    }

    #[test]
    fn a_server_run_is_labelled_as_seen_from_its_client() {
        let mut records = records();
        (records[0].sent_s, records[0].scheduled_s) = (Some(0.02), Some(0.02));
        let mut m = summarize(&records, &[], None, 0.25);
        m.preemptions = None;
        for (lang, arrival, send, lateness, preemptions) in [
            (
                Lang::En,
                "Time to first token (TTFT, from the planned arrival): mean 300.00 ms",
                "TTFT from send: mean 280.00 ms, P50 280.00 ms (client lateness mean 20.00 ms)",
                "Client lateness",
                "Preemptions: -\n",
            ),
            (
                Lang::Zh,
                "首 Token 延迟 (TTFT，自计划到达时刻): 平均 300.00 ms",
                "自发送起的 TTFT: 平均 280.00 ms, P50 280.00 ms (客户端发送滞后 平均 20.00 ms)",
                "客户端滞后",
                "抢占次数: -\n",
            ),
        ] {
            let report = text_report_for(&m, None, lang, Measured::Server);
            for expected in [arrival, send, preemptions] {
                assert!(report.contains(expected), "missing {expected:?} in\n{report}");
            }
            let table: Vec<&str> = report.lines().rev().skip(1).take(7).collect();
            assert!(table[0].starts_with(lateness) && table[0].contains(" 20.00"), "{report}");
            assert!(table[4].starts_with("TTFT (") && table[4].contains(" 280.00"), "{report}");
            assert!(table[5].starts_with("TTFT (") && table[5].contains(" 300.00"), "{report}");
            assert!(table.iter().all(|row| display_width(row) == LABEL_WIDTH + 6 * NUMBER_WIDTH), "{report}");
            assert!(!report.contains("Queue") && !report.contains("排队"), "{report}");
        }
        // The engine's report keeps its labels and never shows a send.
        let engine = text_report(&metrics(), None, Lang::En);
        assert!(engine.contains("Time to first token (TTFT): mean") && engine.contains("Preemptions: 2\n"));
        assert!(!engine.contains("from send") && !engine.contains("lateness"), "{engine}");
        let server = crate::bench::record::run_config::RunConfig {
            target: serde_json::json!({"kind": "openai"}),
            ..Default::default()
        };
        assert_eq!((Measured::of(&server), Measured::of(&Default::default())), (Measured::Server, Measured::Engine));
    }

    #[test]
    fn energy_is_a_line_with_dashes_and_the_reason_where_absent_and_beside_the_cost() {
        use crate::bench::measure::energy::{Energy, EnergyBasis, EnergySource};
        let absent = Energy {
            source: EnergySource::Nvml,
            from: "the engine's GPU".into(),
            basis: None,
            window_s: None,
            avg_power_w: None,
            energy_j: None,
            output_tokens: 0,
            j_per_output_token: None,
            gpus: None,
            readings: 0,
            failed_readings: 2,
            first_error: Some("NVML not loaded (libnvidia-ml.so.1): <gone>".into()),
            unavailable: Some("NVML not loaded (libnvidia-ml.so.1): <gone>".into()),
            measured_phase: false,
        };
        let m = BenchmarkMetrics { energy: Some(absent.clone()), ..metrics() };
        let text = text_report(&m, None, Lang::En);
        let line = text.lines().find(|l| l.contains("GPU energy")).expect("an energy line");
        assert_eq!(
            line.trim(),
            "GPU energy (nvml the engine's GPU): – W average, – J over – s, – J per output token \
             (NVML not loaded (libnvidia-ml.so.1): <gone>)"
        );
        let measured = Energy {
            source: EnergySource::Dcgm,
            from: "http://h:9400/metrics".into(),
            basis: Some(EnergyBasis::EnergyCounter),
            window_s: Some(2.0),
            avg_power_w: Some(500.0),
            energy_j: Some(1000.0),
            output_tokens: 4000,
            j_per_output_token: Some(0.25),
            gpus: Some(2),
            unavailable: None,
            first_error: None,
            failed_readings: 0,
            ..absent
        };
        let cost =
            crate::bench::measure::metrics::Cost { per_hour: 2.0, per_million_output_tokens: 5.0, per_request: 0.01 };
        let m = BenchmarkMetrics { energy: Some(measured), cost: Some(cost), ..metrics() };
        let text = text_report(&m, None, Lang::En);
        assert!(
            text.contains(
                "GPU energy (dcgm http://h:9400/metrics, 2 GPUs, energy counter): 500.0 W average, 1000.0 J over \
                 2.000 s, 0.2500 J per output token"
            ),
            "{text}"
        );
        assert!(text.contains("per request, 0.2500 J per output token"), "beside the cost: {text}");
        assert!(!text.contains("measured phase"), "{text}");
        let phase =
            BenchmarkMetrics { energy: m.energy.clone().map(|e| Energy { measured_phase: true, ..e }), ..metrics() };
        assert!(text_report(&phase, None, Lang::En).contains("J per output token (the measured phase: warm-up"));
        assert!(text_report(&m, None, Lang::Zh).contains("GPU 能耗"));
    }

    #[test]
    fn csv_rows_and_rfc4180_quoting() {
        let text = csv(&records());
        let rows: Vec<&str> = text.split("\r\n").collect();
        assert_eq!(rows.len(), 4); // header, two rows, trailing empty
        assert!(rows[0].starts_with("id,arrival_s,") && rows[0].ends_with(",preemptions,error"));
        assert!(rows[0].starts_with("id,arrival_s,scheduled_s,sent_s,first_token_s,"), "{}", rows[0]);
        // The engine's records have no send: an empty sent_s cell.
        assert_eq!(rows[1], "0,0.000000,0.100000,,0.300000,0.600000,10,3,300.000,150.000,600.000,1,");
        assert_eq!(rows[2], "1,0.000000,,,,,10,0,,,,1,\"he said \"\"no\"\", then\nquit\"");
        let sent = RequestRecord { sent_s: Some(0.125), ..records()[0].clone() };
        assert!(csv(&[sent]).contains("\r\n0,0.000000,0.100000,0.125000,0.300000,"), "a server's send time");
        assert_eq!(csv_field("plain"), "plain");
    }

    #[test]
    fn result_json_round_trips_with_nan_as_null() {
        let config = crate::bench::record::run_config::RunConfig {
            target: "local".into(),
            model: Some("qwen3-0.6b".into()),
            kernels: Some(crate::bench::record::run_config::KernelPath {
                gemv_rows4: Some(true),
                tile_prefetch: Some(true),
                ..crate::bench::record::run_config::KernelPath::gpu_defaults()
            }),
            ..crate::bench::record::run_config::RunConfig::default()
        };
        let result = BenchResult {
            decided: None,
            config,
            metrics: metrics(),
            diagnosis: None,
            baseline: Some(Baseline { ttft_ms: 50.0, tpot_ms: f64::NAN, requests: 3, error: None }),
            requests: records(),
            steps: vec![],
            saturation: None,
            server_metrics: None,
            gpu_metrics: None,
            validity: None,
        };
        let json = serde_json::to_string(&result).unwrap();
        assert!(json.contains("\"tpot_ms\":null"), "{json}");
        assert!(json.contains("\"run_config\":{\"target\":\"local\""), "{json}");
        assert!(!json.contains("\"adapter\""), "absent fields are left out: {json}");
        let back: BenchResult = serde_json::from_str(&json).unwrap();
        assert_eq!(back.config.kernels, result.config.kernels);
        assert!(back.baseline.unwrap().tpot_ms.is_nan());
        assert_eq!(back.requests, result.requests);
        assert_eq!(back.metrics.itl_ms.count, 2);
    }

    /// Results saved before the run record was typed (`config`, an adapter without its kernel
    /// family, a server's `target` object) still load.
    #[test]
    fn results_saved_with_the_untyped_config_still_load() {
        let mut json = serde_json::to_value(BenchResult {
            decided: None,
            config: crate::bench::record::run_config::RunConfig::default(),
            metrics: metrics(),
            diagnosis: None,
            baseline: None,
            requests: records(),
            steps: vec![],
            saturation: None,
            server_metrics: None,
            gpu_metrics: None,
            validity: None,
        })
        .unwrap();
        let object = json.as_object_mut().unwrap();
        object.remove("run_config");
        object.insert(
            "config".into(),
            serde_json::json!({
                "target": "browser",
                "model": "embedded",
                "adapter": {
                    "name": "SwiftShader", "backend": "BrowserWebGpu", "device_type": "Other", "driver": "",
                    "max_storage_buffer_binding_size": 134217728, "max_buffer_size": 268435456,
                    "max_compute_workgroups_per_dimension": 65535, "features": []
                },
                "engine": { "max_batched_tokens": 512, "max_seqs": 16, "block_size": 16, "num_blocks": 64,
                            "max_blocks_per_seq": 256 },
                "slo": null,
                "prompts": "random",
                "timer_resolution_ms": 0.1,
                "cross_origin_isolated": false
            }),
        );
        let back: BenchResult = serde_json::from_value(json).unwrap();
        assert_eq!(back.config.target, "browser");
        assert_eq!(back.config.adapter.unwrap().kernel_family, crate::gpu::kernels::KernelFamily::Software);
        assert_eq!(back.config.engine.unwrap().max_seqs, 16);
        assert_eq!(back.config.timer_resolution_ms, Some(0.1));
        let server = serde_json::json!({ "target": { "kind": "openai", "base_url": "http://h/v1/" } });
        let back: crate::bench::record::run_config::RunConfig = serde_json::from_value(server).unwrap();
        assert_eq!(back.target["kind"], "openai");
    }

    #[test]
    fn warnings_name_a_saturation_stop_and_a_late_client() {
        let base = BenchResult {
            decided: None,
            config: crate::bench::record::run_config::RunConfig::default(),
            metrics: metrics(),
            diagnosis: None,
            baseline: None,
            requests: records(),
            steps: vec![],
            saturation: None,
            server_metrics: None,
            gpu_metrics: None,
            validity: None,
        };
        assert!(run_warnings(&base, Lang::En).is_empty(), "engine records have no send time");
        let late = |ms: f64| {
            let requests = (0..100)
                .map(|i| RequestRecord {
                    sent_s: Some(1.0 + ms / 1000.0 * (i as f64 / 99.0)),
                    arrival_s: 1.0,
                    ..records()[0].clone()
                })
                .collect();
            BenchResult { requests, ..base.clone() }
        };
        assert!(run_warnings(&late(0.5), Lang::En).is_empty());
        let lines = run_warnings(&late(3.0), Lang::En);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].starts_with("the client sent requests late: p99 2.9"), "{lines:?}");
        assert!(run_warnings(&late(3.0), Lang::Zh)[0].starts_with("客户端发送滞后"));
        let saturation = crate::bench::measure::saturation::Saturation {
            at_s: 6.0,
            outstanding: 40,
            growth_per_s: 5.0,
            window_s: 3.0,
            reason: "requests outstanding grew".into(),
        };
        let stopped = BenchResult { saturation: Some(saturation), ..base.clone() };
        assert_eq!(run_warnings(&stopped, Lang::En), vec!["requests outstanding grew".to_string()]);
    }
}
