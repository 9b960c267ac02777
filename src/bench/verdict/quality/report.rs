//! The quality rows as the reports show them: text (English or Chinese), a line explaining each
//! row, and the HTML report's section.

use super::{Basis, PassageKind, Quality};
use crate::bench::base::lang::Lang;

/// The quality rows of each pass, with a line saying what each row means.
pub fn text_report(passes: &[Quality], lang: Lang) -> String {
    let zh = lang == Lang::Zh;
    let mut out = if zh {
        "========== 输出质量（不计时）==========\n"
    } else {
        "========== output quality (not timed) ==========\n"
    }
    .to_string();
    for q in passes {
        out += &heading(q, lang);
        for (row, value, meaning) in rows(q, lang) {
            out += &format!("{row:<26} {value:>22}  {meaning}\n");
        }
    }
    out
}

fn heading(q: &Quality, lang: Lang) -> String {
    match (q.basis, lang) {
        (Basis::Logits, _) => {}
        (Basis::TopLogprobs { k }, Lang::En) => {
            return format!(
                "{} against {}: {} positions with the same context ({} requests × {} greedy tokens each, compared up \
                 to and including their first divergence; top-{k} log-probabilities from the servers)\n",
                q.test, q.reference, q.positions, q.requests, q.new_tokens
            )
        }
        (Basis::TopLogprobs { k }, Lang::Zh) => {
            return format!(
                "{} 对比 {}：上下文相同的 {} 个位置（{} 个请求 × 各 {} 个贪心 token，比到首次分歧处为止并含该处；\
                 服务器返回的 top-{k} 对数概率）\n",
                q.test, q.reference, q.positions, q.requests, q.new_tokens
            )
        }
        (Basis::Outputs, Lang::En) => {
            return format!(
                "{} against {}: greedy outputs only ({} requests × {} tokens): no log-probabilities came back, so no \
                 top-1 agreement or KL\n",
                q.test, q.reference, q.requests, q.new_tokens
            )
        }
        (Basis::Outputs, Lang::Zh) => {
            return format!(
                "{} 对比 {}：仅比较贪心输出（{} 个请求 × {} 个 token）：服务器未返回对数概率，故无 top-1 一致率与 KL\n",
                q.test, q.reference, q.requests, q.new_tokens
            )
        }
    }
    let passage = match (q.passage, lang) {
        (PassageKind::Text, Lang::En) => "passage of English text",
        (PassageKind::TokenIds, Lang::En) => "passage of seeded token ids (no tokenizer)",
        (PassageKind::Text, Lang::Zh) => "英文段落",
        (PassageKind::TokenIds, Lang::Zh) => "种子随机 token 段落（无分词器）",
        (PassageKind::None, Lang::En) => "passage (none)",
        (PassageKind::None, Lang::Zh) => "段落（无）",
    };
    match lang {
        Lang::En => format!(
            "{} against {}: {} positions teacher-forced ({} requests × {} tokens of {}'s greedy continuation, \
             and a {}-token {passage})\n",
            q.test, q.reference, q.positions, q.requests, q.new_tokens, q.reference, q.passage_tokens
        ),
        Lang::Zh => format!(
            "{} 对比 {}：教师强制 {} 个位置（{} 个请求 × {} 的 {} 个贪心续写 token，以及 {} 个 token 的{passage}）\n",
            q.test, q.reference, q.positions, q.requests, q.reference, q.new_tokens, q.passage_tokens
        ),
    }
}

/// (row, value, meaning) of one pass.
pub fn rows(q: &Quality, lang: Lang) -> Vec<(String, String, String)> {
    let (r, t) = (&q.reference, &q.test);
    let identical = format!(
        "{}/{} ({:.0}%)",
        q.requests - q.first_divergences.iter().flatten().count(),
        q.requests,
        100.0 * q.identical_fraction
    );
    let diverged = q.first_divergences.iter().flatten().count();
    let divergence = q.median_first_divergence.map_or("-".to_string(), |d| format!("{d:.1}"));
    let row = |name: &str, value: String, meaning: String| (name.to_string(), value, meaning);
    let mut rows = match lang {
        Lang::En => vec![
            row(
                "top-1 agreement",
                format!("{:.4}", q.top1_agreement),
                format!("share of positions where {t}'s likeliest next token is {r}'s"),
            ),
            row(
                "KL mean",
                nats(q.kl_mean),
                format!("KL({r} ‖ {t}) in nats: how far {t}'s next-token distribution is from {r}'s (0: the same)"),
            ),
            row("KL p99 / max", format!("{} / {}", nats(q.kl_p99), nats(q.kl_max)), "the worst positions".into()),
            row(
                "log p of reference token",
                format!("{:.4}", q.test_logprob_mean),
                format!("mean log-probability {t} gives {r}'s top-1 token"),
            ),
            row(
                "passage perplexity",
                format!("{} / {}", perplexity_text(q.reference_perplexity), perplexity_text(q.test_perplexity)),
                format!("{r} / {t}: exp(−mean log p) of the passage's next tokens; lower: less surprised"),
            ),
            row(
                "free-running identical",
                identical,
                format!("requests whose {} greedy tokens equal {r}'s", q.new_tokens),
            ),
            row(
                "first divergence, median",
                divergence,
                format!("token index where an output first differs from {r}'s (over the {diverged} that do)"),
            ),
        ],
        Lang::Zh => vec![
            row(
                "top-1 一致率",
                format!("{:.4}", q.top1_agreement),
                format!("{t} 最可能的下一个 token 与 {r} 相同的位置比例"),
            ),
            row(
                "KL 均值",
                nats(q.kl_mean),
                format!("KL({r} ‖ {t})，单位 nat：{t} 的下一 token 分布离 {r} 多远（0 为相同）"),
            ),
            row("KL p99 / 最大", format!("{} / {}", nats(q.kl_p99), nats(q.kl_max)), "最差的位置".into()),
            row(
                "参照 token 的 log p",
                format!("{:.4}", q.test_logprob_mean),
                format!("{t} 给 {r} 的 top-1 token 的平均对数概率"),
            ),
            row(
                "段落困惑度",
                format!("{} / {}", perplexity_text(q.reference_perplexity), perplexity_text(q.test_perplexity)),
                format!("{r} / {t}：段落下一 token 的 exp(−平均 log p)，越低越不意外"),
            ),
            row("自由生成完全相同", identical, format!("{} 个贪心 token 与 {r} 完全相同的请求", q.new_tokens)),
            row(
                "首次分歧位置中位数",
                divergence,
                format!("输出首次与 {r} 不同的 token 序号（{diverged} 个分歧的请求）"),
            ),
        ],
    };
    // Rows: top-1, KL mean, KL p99/max, log p, perplexity, identical, first divergence.
    let zh = lang == Lang::Zh;
    match q.basis {
        Basis::Logits => {}
        Basis::TopLogprobs { k } => {
            rows[1].2 = if zh {
                format!("在返回的 top-{k} 上的 KL({r} ‖ {t})：两边都列出的 token 各一格，其余概率质量每边并为一格；不超过真实 KL（0 为相同）")
            } else {
                format!(
                    "KL({r} ‖ {t}) over the returned top-{k}: a bucket per token both list, the rest of the mass one \
                     bucket a side; at most the true KL (0: the same)"
                )
            };
            rows[3].2 = if zh {
                format!("{t} 给 {r} 的 top-1 token 的平均对数概率（在 {t} 返回了它的位置上）")
            } else {
                format!("mean log-probability {t} gives {r}'s top-1 token (where {t} returned it)")
            };
            rows.remove(4); // no passage: a server cannot be teacher-forced
            let mass = q.top_k_mass.map_or("-".to_string(), |m| format!("{:.2}%", 100.0 * m));
            let meaning = if zh {
                format!("{r} 返回的 top-{k} 平均占其概率的比例：KL 只看得到这一部分（其余并为一格）")
            } else {
                format!("mean share of {r}'s probability its top-{k} held: all the KL sees (the rest is one bucket)")
            };
            rows.insert(3, (if zh { "top-k 概率质量" } else { "top-k mass" }.to_string(), mass, meaning));
        }
        Basis::Outputs => {
            rows.drain(..5);
            rows[1].2 = if zh {
                format!("输出文本首次与 {r} 不同的字符序号（{diverged} 个分歧的请求）；服务器未返回 token")
            } else {
                format!("character where an output's text first differs from {r}'s (over the {diverged} that do); no tokens came back")
            };
        }
    }
    rows
}

/// A KL divergence: 0 as 0 (the same computation), below 0.001 with an exponent (the oracle
/// against the engine on the same weights: ~1e-9), else six decimals.
fn nats(x: f64) -> String {
    if x == 0.0 {
        "0".into()
    } else if x.abs() < 1e-3 {
        format!("{x:.2e}")
    } else {
        format!("{x:.6}")
    }
}

/// Two decimals, or three significant digits and an exponent past 100,000 (a random model's
/// perplexity can pass its vocabulary by far: confident and wrong).
fn perplexity_text(x: f64) -> String {
    if x.abs() < 1e5 {
        format!("{x:.2}")
    } else {
        format!("{x:.2e}")
    }
}

/// The passes as an HTML section (the compare report's).
pub fn html_section(passes: &[Quality], lang: Lang) -> String {
    use crate::bench::base::markup::escape;
    use std::fmt::Write;
    if passes.is_empty() {
        return String::new();
    }
    let title = if lang == Lang::Zh { "输出质量（不计时）" } else { "Output quality (not timed)" };
    let mut out = format!("<section class=\"quality\" data-testid=\"quality\">\n<h2>{}</h2>\n", escape(title));
    for q in passes {
        let _ = writeln!(out, "<p>{}</p>\n<table>", escape(heading(q, lang).trim_end()));
        for (row, value, meaning) in rows(q, lang) {
            let _ = writeln!(
                out,
                "<tr><th>{}</th><td>{}</td><td class=\"note\">{}</td></tr>",
                escape(&row),
                escape(&value),
                escape(&meaning)
            );
        }
        out.push_str("</table>\n");
    }
    out.push_str("</section>\n");
    out
}
