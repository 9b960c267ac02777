//! Every rule a run request can break, with its message in each language: the one place these
//! messages are written. A [`Problem`] is a broken rule and the field it belongs to, so the CLI
//! names the flag ([`Field::flag`]) and the page puts the message under its input.

use std::fmt;

use crate::bench::base::field::Field;
use crate::bench::base::lang::Lang;
use crate::limits::{self, show};

/// One broken rule, on the field it is about.
#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    pub field: Field,
    pub rule: Rule,
}

impl Problem {
    pub fn new(field: Field, rule: Rule) -> Problem {
        Problem { field, rule }
    }

    /// The message in `lang`.
    pub fn text(&self, lang: Lang) -> String {
        self.rule.text(lang)
    }
}

/// English, as the CLI prints it (after the flag).
impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.rule.text(Lang::En))
    }
}

/// Every problem of a run request as one error, a line each, naming the flag: how the CLI and the
/// Dawn runner say them (the page puts each under its input instead).
pub fn problems_error(problems: &[Problem]) -> crate::error::Error {
    crate::error::Error::Invalid(
        problems.iter().map(|p| format!("{}: {p}", p.field.flag())).collect::<Vec<_>>().join("\n"),
    )
}

/// The rules. Numbers are kept as data, so each language words them its own way.
#[derive(Clone, Debug, PartialEq)]
pub enum Rule {
    /// A field that takes a whole number in `min..=max`.
    Count {
        min: u64,
        max: u64,
    },
    /// A field that takes a number in `min..=max`.
    Number {
        min: f64,
        max: f64,
    },
    /// One of a few words: `name` (as the field says it), the text given, the words expected.
    Choice {
        name: &'static str,
        value: String,
        expected: &'static str,
    },
    /// A rate that is neither a number nor `inf`.
    NotARate {
        text: String,
    },
    /// A list of rates (`text`) with an empty entry: two commas with nothing between, or a comma
    /// at an end.
    EmptyRate {
        text: String,
    },
    /// A field that takes a number, given text that is none (`x`, `inf`).
    NotANumber {
        text: String,
    },
    /// A length range ("128", "64:512") with a part that is not a token count.
    LengthNotACount {
        text: String,
        part: String,
    },
    LengthMinZero,
    LengthMinAboveMax {
        min: usize,
        max: usize,
    },
    LengthAboveLimit {
        min: usize,
        max: usize,
    },
    RateTooLow {
        rate: f64,
    },
    Burstiness {
        value: f64,
    },
    Concurrency {
        n: usize,
    },
    Requests {
        n: usize,
    },
    MaxConcurrencyClosedLoop,
    MaxConcurrency {
        n: usize,
    },
    TraceNeedsTrace,
    DatasetRows {
        n: usize,
        file: String,
        rows: usize,
    },
    SpanExactClosedLoop,
    ScheduleTooLong {
        rate: f64,
        n: usize,
        span_s: f64,
    },
    ConversationsOpenLoop,
    ConversationsNeedWholeDataset,
    DrawnTurnsWithDataset,
    ConversationsAlone,
    ThinkTime {
        value: f64,
    },
    HistoryTooLong {
        turns: usize,
        longest: usize,
    },
    WholeConversationsNeedConversations,
    TurnsDatasetNeedsDataset,
    ThinkTimeNeedsTurns,
    CancelShare {
        share: f64,
    },
    CancelAfter {
        text: String,
    },
    CancelNeedsBoth,
    CancelWithConversations,
    SharedPrefixWithDataset,
    SharedPrefixLen {
        len: usize,
        shortest: usize,
    },
    PrefixGroups {
        groups: usize,
    },
    PrefixGroupsNeedSharedPrefix,
    /// Prompt plus output past the model's context.
    Context {
        input: usize,
        output: usize,
        max_position: usize,
    },
    /// A conversation's history past the model's context.
    HistoryContext {
        longest: usize,
        max_position: usize,
    },
    /// An engine size of 0, or above what the loaded model allows.
    AboveZero,
    AtMost {
        limit: usize,
    },
    ChunkNeedsChunking,
    /// The page loads one model: a draft model is the CLI's.
    DraftOnCli,
    /// `--rate max` without an SLO to meet.
    RateMaxNeedsSlo,
    /// `--rate max` for arrivals that are not an open loop at a rate (poisson, gamma, constant).
    RateMaxOpenLoop,
    /// `max` among other rates.
    RateMaxAlone,
    /// An engine setting (scheduler, weights, speculation, prefix cache) asked of a server, whose
    /// own are its own.
    EngineSettingOnServer,
    /// Conversations against a server with random token ids or no tokenizer: each turn sends the
    /// server's reply back, as text.
    ConversationsNeedText,
    /// An endpoint URL that is not an API root.
    Endpoint {
        text: String,
        fault: UrlFault,
    },
    /// An SLO's text (`ttft_ms=200,tpot_ms=50`) that does not read.
    Slo {
        text: String,
        fault: SloFault,
    },
    /// A warm-up that leaves no request to measure.
    WarmupLeavesNone {
        warmup: usize,
        requests: usize,
    },
    /// A warm-up or cool-down duration that is not 0 or more seconds (`flag`: which).
    PhaseSeconds {
        flag: &'static str,
        value: f64,
    },
    /// The engine's scheduling policy cannot serve such a request (its reason, as data).
    Scheduler(crate::engine::PolicyRefusal),
    /// A speculation setting that is none of `ngram:K`, `draft:MODEL:K` (K from 1 to `max`) or `off`.
    Speculation {
        max: usize,
    },
}

/// What is wrong with an endpoint's URL.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UrlFault {
    NotHttp,
    Spaces,
    UserInfo,
    QueryOrFragment,
    NoHost,
}

/// What is wrong with an SLO's text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SloFault {
    NotKeyValue { part: String },
    NotANumber { value: String },
    NotAboveZero { key: String },
    UnknownKey { key: String },
}

impl Rule {
    /// The message in `lang`.
    pub fn text(&self, lang: Lang) -> String {
        match lang {
            Lang::En => self.english(),
            Lang::Zh => self.chinese(),
        }
    }

    fn english(&self) -> String {
        use Rule::*;
        match self {
            Count { min, max } => format!("must be a whole number from {min} to {max}"),
            Number { min, max } => format!("must be a number from {min} to {max}"),
            Choice { name, value, expected } => format!("{name} {value:?}: expected {expected}"),
            NotARate { text } => format!("rate {text:?} is not a number or inf"),
            EmptyRate { text } => format!("rates {text:?}: an entry is empty (a comma too many?)"),
            NotANumber { text } => format!("{text:?} is not a number"),
            LengthNotACount { text, part } => {
                format!("length range {text:?}: {part:?} is not a token count (expected \"128\" or \"64:512\")")
            }
            LengthMinZero => "length range: the minimum must be at least 1".into(),
            LengthMinAboveMax { min, max } => format!("length range {min}:{max}: the minimum is above the maximum"),
            LengthAboveLimit { min, max } => {
                format!("length range {min}:{max}: above the limit of {} tokens", limits::MAX_TOKENS)
            }
            RateTooLow { rate } => format!(
                "rate {}: must be at least {} requests/s (or infinite: all at once)",
                show(*rate),
                limits::MIN_RATE
            ),
            Burstiness { value } => format!(
                "burstiness {}: must be a number from {} to {} (1 = Poisson)",
                show(*value),
                limits::MIN_BURSTINESS,
                limits::MAX_BURSTINESS
            ),
            Concurrency { n } => format!("concurrency {n}: must be from 1 to {}", limits::MAX_CONCURRENCY),
            Requests { n } => format!("number of requests {n}: must be from 1 to {}", limits::MAX_REQUESTS),
            MaxConcurrencyClosedLoop => {
                "max concurrency: only open-loop arrivals take it (closed loops have --concurrency)".into()
            }
            MaxConcurrency { n } => format!("max concurrency {n}: must be from 1 to {}", limits::MAX_CONCURRENCY),
            TraceNeedsTrace => "arrival trace: goes with a trace dataset (--dataset FILE --dataset-format trace), \
                                and a trace with it"
                .into(),
            DatasetRows { n, file, rows } => {
                format!("number of requests {n}: the dataset {file} has {rows} usable rows")
            }
            SpanExactClosedLoop => {
                "arrival span exact: only open-loop arrivals (poisson, gamma, constant) have a span".into()
            }
            ScheduleTooLong { rate, n, span_s } => format!(
                "rate {}: {n} requests would arrive over about {} s, above the limit of {} s",
                show(*rate),
                show(span_s.round()),
                limits::MAX_SCHEDULE_S
            ),
            ConversationsOpenLoop => {
                "conversations: sessions arrive by an open loop (poisson, gamma or constant)".into()
            }
            ConversationsNeedWholeDataset => {
                "conversations from a dataset: they come from a ShareGPT dataset's whole conversations".into()
            }
            DrawnTurnsWithDataset => "conversations: drawn turns do not go with a dataset (its whole conversations \
                                      are its own: turns from the dataset)"
                .into(),
            ConversationsAlone => "conversations: not with a shared prefix or the saturation stop".into(),
            ThinkTime { value } => {
                format!("think time {}: must be from 0 to {} s", show(*value), limits::MAX_SCHEDULE_S)
            }
            HistoryTooLong { turns, longest } => format!(
                "conversations: a {turns}-turn history reaches {longest} prompt tokens, above the limit of {}",
                limits::MAX_TOKENS
            ),
            WholeConversationsNeedConversations => {
                "a dataset's whole conversations: the workload needs its conversations".into()
            }
            TurnsDatasetNeedsDataset => "turns from the dataset: a ShareGPT dataset's own conversations".into(),
            ThinkTimeNeedsTurns => "think time: goes with turns (conversations)".into(),
            CancelShare { share } => format!("cancel share {}: must be above 0 and at most 1", show(*share)),
            CancelAfter { text } => format!(
                "cancel after {text:?}: expected milliseconds from 0 to {} s, one value or a range (50 or 50:200)",
                limits::MAX_SCHEDULE_S
            ),
            CancelNeedsBoth => {
                "cancellations: give both the share and the delay (--cancel-share, --cancel-after-ms)".into()
            }
            CancelWithConversations => {
                "cancellations: not with conversations (a cancelled turn would end its conversation)".into()
            }
            SharedPrefixWithDataset => "shared prefix: not with a dataset (its rows bring their own prompts)".into(),
            SharedPrefixLen { len, shortest } => format!(
                "shared prefix length {len}: must be from 1 to one below the shortest input length ({shortest})"
            ),
            PrefixGroups { groups } => {
                format!("prefix groups {groups}: must be from 1 to {}", limits::MAX_PREFIX_GROUPS)
            }
            PrefixGroupsNeedSharedPrefix => "prefix groups: goes with a shared prefix length".into(),
            Context { input, output, max_position } => format!(
                "prompts up to {input} tokens + outputs up to {output} reach {} tokens, above the model's context \
                 (max_position_embeddings {max_position})",
                input.saturating_add(*output)
            ),
            HistoryContext { longest, max_position } => format!(
                "a conversation's history with its output reaches {longest} tokens, above the model's context \
                 (max_position_embeddings {max_position})"
            ),
            AboveZero => "must be above 0".into(),
            AtMost { limit } => format!("at most {limit}"),
            ChunkNeedsChunking => "a chunk size needs chunked prefill on".into(),
            EngineSettingOnServer => "sets this browser's or machine's engine, not a server's (its scheduler, weights \
                                      and caches are its own): leave it at its default to run against a server"
                .into(),
            ConversationsNeedText => "conversations against a server send text, each turn carrying the server's reply \
                                      back: use text prompts (a tokenizer, not random token ids)"
                .into(),
            DraftOnCli => {
                "a draft model (draft:DIR:K) is the CLI's: expected off, or ngram:K with K from 1 to 16".into()
            }
            RateMaxNeedsSlo => "rate max: searches the highest rate meeting SLOs; give them (--slo ttft_ms=…)".into(),
            RateMaxOpenLoop => "rate max: searches an open loop's rate (arrival poisson, gamma or constant)".into(),
            RateMaxAlone => "rate max: a search of its own, not one of a list of rates".into(),
            Endpoint { text, fault } => format!(
                "endpoint {text:?}: {}",
                match fault {
                    UrlFault::NotHttp => "expected http://host:port/v1",
                    UrlFault::Spaces => "contains spaces or control characters",
                    UrlFault::UserInfo => "user info in the URL; pass the API key with --api-key-env instead",
                    UrlFault::QueryOrFragment =>
                        "a query or fragment; give the API root only, e.g. http://host:port/v1",
                    UrlFault::NoHost => "no host",
                }
            ),
            Slo { text, fault } => format!(
                "SLO {text:?}: {}",
                match fault {
                    SloFault::NotKeyValue { part } => format!("{part:?} is not key=value"),
                    SloFault::NotANumber { value } => format!("{value:?} is not a number"),
                    SloFault::NotAboveZero { key } => format!("{key} must be above 0 ms"),
                    SloFault::UnknownKey { key } =>
                        format!("unknown key {key:?} (expected ttft_ms, tpot_ms or e2e_ms)"),
                }
            ),
            WarmupLeavesNone { warmup, requests } => {
                format!("--warmup-requests {warmup}: leaves none of the {requests} requests to measure")
            }
            PhaseSeconds { flag, value } => format!("{flag} {value}: must be 0 or more seconds"),
            Scheduler(refusal @ crate::engine::PolicyRefusal::PrefillPastStep { .. }) => format!("prompt: {refusal}"),
            Scheduler(refusal) => refusal.to_string(),
            Speculation { max } => format!("expected ngram:K or draft:MODEL:K with K from 1 to {max}, or off"),
        }
    }

    fn chinese(&self) -> String {
        use Rule::*;
        match self {
            Count { min, max } => format!("必须是 {min} 到 {max} 之间的整数"),
            Number { min, max } => format!("必须是 {min} 到 {max} 之间的数"),
            Choice { name: _, value, expected } => {
                // The words expected, listed the Chinese way ("a, b or c" → "a、b、c").
                let listed = expected.replace(" or ", "、").replace(", ", "、");
                format!("{value:?} 无效：应为 {listed} 之一")
            }
            NotARate { text } => format!("速率 {text:?} 不是数字，也不是 inf"),
            EmptyRate { text } => format!("速率 {text:?}：有一项为空（多了一个逗号？）"),
            NotANumber { text } => format!("{text:?} 不是数字"),
            LengthNotACount { text, part } => {
                format!("长度 {text:?}：{part:?} 不是 token 数（应为 N 或 最小:最大，如 \"128\" 或 \"64:512\"）")
            }
            LengthMinZero => "长度：最小值至少为 1".into(),
            LengthMinAboveMax { min, max } => format!("长度 {min}:{max}：最小值大于最大值"),
            LengthAboveLimit { min, max } => format!("长度 {min}:{max}：超过上限 {} 个 token", limits::MAX_TOKENS),
            RateTooLow { rate } => {
                format!("速率 {}：至少为每秒 {} 个请求（或 inf：全部同时到达）", show(*rate), limits::MIN_RATE)
            }
            Burstiness { value } => format!(
                "突发度 {}：必须在 {} 到 {} 之间（1 = 泊松）",
                show(*value),
                limits::MIN_BURSTINESS,
                limits::MAX_BURSTINESS
            ),
            Concurrency { n } => format!("并发数 {n}：必须在 1 到 {} 之间", limits::MAX_CONCURRENCY),
            Requests { n } => format!("请求数 {n}：必须在 1 到 {} 之间", limits::MAX_REQUESTS),
            MaxConcurrencyClosedLoop => "最大并发：只适用于开环到达（闭环用并发数）".into(),
            MaxConcurrency { n } => format!("最大并发 {n}：必须在 1 到 {} 之间", limits::MAX_CONCURRENCY),
            TraceNeedsTrace => "trace 到达：需要 trace 格式的数据集，反之亦然".into(),
            DatasetRows { n, file, rows } => format!("请求数 {n}：数据集 {file} 只有 {rows} 行可用"),
            SpanExactClosedLoop => "exact 跨度：只有开环到达（poisson、gamma、constant）有跨度".into(),
            ScheduleTooLong { rate, n, span_s } => format!(
                "速率 {}：{n} 个请求将在约 {} 秒内到达，超过上限 {} 秒",
                show(*rate),
                show(span_s.round()),
                limits::MAX_SCHEDULE_S
            ),
            ConversationsOpenLoop => "多轮对话：会话须按开环到达（poisson、gamma 或 constant）".into(),
            ConversationsNeedWholeDataset => "来自数据集的对话：须是 ShareGPT 数据集的完整对话".into(),
            DrawnTurnsWithDataset => "多轮对话：随机轮数不能与数据集同用（用数据集自己的对话：轮数填 dataset）".into(),
            ConversationsAlone => "多轮对话：不能与共享前缀或饱和停止同用".into(),
            ThinkTime { value } => format!("思考时间 {}：必须在 0 到 {} 秒之间", show(*value), limits::MAX_SCHEDULE_S),
            HistoryTooLong { turns, longest } => {
                format!("多轮对话：{turns} 轮的历史达到 {longest} 个提示 token，超过上限 {}", limits::MAX_TOKENS)
            }
            WholeConversationsNeedConversations => "数据集的完整对话：工作负载需要多轮对话".into(),
            TurnsDatasetNeedsDataset => "轮数 dataset：需要一个 ShareGPT 数据集".into(),
            ThinkTimeNeedsTurns => "思考时间：需与轮数（多轮对话）同用".into(),
            CancelShare { share } => format!("取消比例 {}：必须大于 0 且不超过 1", show(*share)),
            CancelAfter { text } => format!(
                "取消延迟 {text:?}：应为 0 到 {} 秒之间的毫秒数，一个值或一个范围（50 或 50:200）",
                limits::MAX_SCHEDULE_S
            ),
            CancelNeedsBoth => "取消：比例和延迟需同时给出（--cancel-share、--cancel-after-ms）".into(),
            CancelWithConversations => "取消：不能与多轮对话同用（被取消的一轮会结束整个对话）".into(),
            SharedPrefixWithDataset => "共享前缀：不能与数据集同用（数据集自带提示）".into(),
            SharedPrefixLen { len, shortest } => {
                format!("共享前缀长度 {len}：必须在 1 到最短输入长度减一（{shortest} − 1）之间")
            }
            PrefixGroups { groups } => format!("前缀组数 {groups}：必须在 1 到 {} 之间", limits::MAX_PREFIX_GROUPS),
            PrefixGroupsNeedSharedPrefix => "前缀组数：需与共享前缀长度同用".into(),
            Context { input, output, max_position } => format!(
                "输入最长 {input} + 输出最长 {output} = {} 个 token，超过了模型的上下文长度（{max_position}）",
                input.saturating_add(*output)
            ),
            HistoryContext { longest, max_position } => {
                format!("对话历史加输出达到 {longest} 个 token，超过了模型的上下文长度（{max_position}）")
            }
            AboveZero => "必须大于 0".into(),
            AtMost { limit } => format!("最多 {limit}"),
            ChunkNeedsChunking => "设置块大小需要开启分块预填充".into(),
            EngineSettingOnServer => {
                "此项设置本浏览器或本机的引擎，而非服务器（服务器的调度、权重与缓存由它自己决定）：对服务器运行时请保持默认".into()
            }
            ConversationsNeedText => {
                "对服务器的多轮会话发送文本，每一轮都带回服务器的回复：请使用文本提示词（需要分词器，而非随机 token）".into()
            }
            DraftOnCli => "草稿模型（draft:DIR:K）仅限命令行：应为 off，或 ngram:K（K 为 1 到 16）".into(),
            RateMaxNeedsSlo => "速率 max：搜索满足 SLO 的最高速率，需给出 SLO（--slo ttft_ms=…）".into(),
            RateMaxOpenLoop => "速率 max：只搜索开环到达的速率（poisson、gamma 或 constant）".into(),
            RateMaxAlone => "速率 max：单独一次搜索，不能与其他速率并列".into(),
            Endpoint { text, fault } => format!(
                "端点 {text:?}：{}",
                match fault {
                    UrlFault::NotHttp => "应为 http://主机:端口/v1",
                    UrlFault::Spaces => "含有空格或控制字符",
                    UrlFault::UserInfo => "URL 中含有用户信息；请改用 --api-key-env 传递 API 密钥",
                    UrlFault::QueryOrFragment => "含有查询或片段；只需给出 API 根地址，如 http://主机:端口/v1",
                    UrlFault::NoHost => "没有主机名",
                }
            ),
            Slo { text, fault } => format!(
                "SLO {text:?}：{}",
                match fault {
                    SloFault::NotKeyValue { part } => format!("{part:?} 不是 键=值 的形式"),
                    SloFault::NotANumber { value } => format!("{value:?} 不是数字"),
                    SloFault::NotAboveZero { key } => format!("{key} 必须大于 0 毫秒"),
                    SloFault::UnknownKey { key } => format!("未知的键 {key:?}（应为 ttft_ms、tpot_ms 或 e2e_ms）"),
                }
            ),
            WarmupLeavesNone { warmup, requests } => {
                format!("预热请求数 {warmup}：{requests} 个请求中没有剩下可测量的请求")
            }
            PhaseSeconds { flag, value } => format!("{flag} {value}：必须是 0 或更多秒"),
            Scheduler(crate::engine::PolicyRefusal::PrefillPastStep {
                prompt_len,
                max_new_tokens,
                longest_prefill,
                max_batched_tokens,
            }) => format!(
                "未开启分块预填充时，{prompt_len} 个提示词 token 加 {max_new_tokens} 个新 token 需要在一步内预填充最多 \
                 {longest_prefill} 个 token，超过了每步 token 上限 {max_batched_tokens}"
            ),
            Scheduler(crate::engine::PolicyRefusal::ZeroChunk) => "预填充块大小至少为 1 个 token".into(),
            Speculation { max } => format!("应为 ngram:K、draft:MODEL:K（K 为 1 到 {max}）或 off"),
        }
    }
}
