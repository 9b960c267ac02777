//! The quality pass's side of the wire format, without any I/O: one greedy request that asks for
//! the top-k log-probabilities of every generated token, answered whole (not streamed), and that
//! answer read into a [`Generated`] for [`crate::bench::verdict::quality::compare_served`].
//!
//! The APIs ask differently: completions takes `"logprobs": K`; chat takes `"logprobs": true,
//! "top_logprobs": K`. Answers come in two shapes: a list per token under `logprobs.content`
//! (`{token, bytes, logprob, top_logprobs: [{token, bytes, logprob}]}`: chat everywhere, and
//! llama-server's completions too) or OpenAI's legacy completions form (`logprobs.tokens`,
//! `token_logprobs`, and `top_logprobs` as one `{token: logprob}` object per token: vLLM's
//! completions). A `null` or absent `logprobs` is a server that returns none.

use serde_json::{json, Value};

use super::openai::{request_body, snippet, Api, Prompt};
use crate::bench::verdict::quality::{Generated, TokenLogprobs};
use crate::error::Result;

/// Top-k the quality pass asks for at most (OpenAI's chat API allows 20; llama-server any).
pub const MAX_TOP_K: usize = 100;

/// Log-probabilities above 0 up to this are rounding (a probability of 1 computed as 1.0000001)
/// and read as 0; past it the server is wrong.
const ABOVE_ZERO_SLACK: f64 = 1e-4;

/// The body of one greedy request with log-probabilities: [`request_body`]'s (temperature 0,
/// `ignore_eos` as asked, the thinking switch), answered whole (`"stream": false`), asking for the
/// `top_k` likeliest tokens at every position.
pub fn greedy_body(
    api: Api,
    model: &str,
    prompt: &Prompt,
    max_tokens: usize,
    ignore_eos: bool,
    thinking: Option<bool>,
    top_k: usize,
) -> Result<Value> {
    let mut body = request_body(api, model, prompt, max_tokens, ignore_eos, thinking)?;
    body["stream"] = json!(false);
    if let Some(fields) = body.as_object_mut() {
        fields.remove("stream_options");
    }
    match api {
        Api::Completions => body["logprobs"] = json!(top_k),
        Api::Chat => {
            body["logprobs"] = json!(true);
            body["top_logprobs"] = json!(top_k);
        }
    }
    Ok(body)
}

/// Probabilities that sum above 1 by up to this are rounding; past it the server is wrong.
const SUM_SLACK: f64 = 1e-3;

/// The output and log-probabilities of one whole answer to a request that asked for the `top_k`
/// likeliest tokens at each position; `Err` says what is malformed. Log-probabilities are checked
/// before they are believed: each finite and at most 0, at most `top_k` alternatives a position,
/// and their probabilities summing to at most 1 (within rounding) — a verdict on quality from
/// an answer that breaks them would be a verdict from nonsense.
pub fn parse_greedy(body: &str, top_k: usize) -> std::result::Result<Generated, String> {
    let value: Value =
        serde_json::from_str(body).map_err(|e| format!("the answer is not JSON ({e}): {}", snippet(body)))?;
    let choice = value
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
        .ok_or_else(|| format!("an answer without choices: {}", snippet(body)))?;
    let text = choice
        .get("text")
        .or_else(|| choice.get("message").and_then(|m| m.get("content")))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let tokens = match choice.get("logprobs").filter(|l| !l.is_null()) {
        None => None,
        Some(logprobs) => Some(match logprobs.get("content") {
            Some(content) => content_form(content)?,
            None => legacy_form(logprobs)?,
        }),
    };
    for (k, position) in tokens.iter().flatten().enumerate() {
        if position.top.len() > top_k {
            return Err(format!(
                "position {k}: {} top_logprobs entries, where {top_k} were asked for",
                position.top.len()
            ));
        }
        let mass: f64 = position.top.iter().map(|(_, logprob)| logprob.exp()).sum();
        if mass > 1.0 + SUM_SLACK {
            return Err(format!("position {k}: the top_logprobs' probabilities sum to {mass:.4}, above 1"));
        }
    }
    Ok(Generated { text, tokens })
}

/// `logprobs.content`: a list of `{token, bytes, logprob, top_logprobs}`.
fn content_form(content: &Value) -> std::result::Result<Vec<TokenLogprobs>, String> {
    let list = content.as_array().ok_or("logprobs.content is not a list")?;
    list.iter()
        .enumerate()
        .map(|(k, entry)| {
            let at = |why: String| format!("logprobs.content[{k}]: {why}");
            let token = token_of(entry).map_err(at)?;
            let logprob = logprob_of(entry.get("logprob")).map_err(at)?;
            let top = match entry.get("top_logprobs").filter(|t| !t.is_null()) {
                None => Vec::new(),
                Some(Value::Array(top)) => top
                    .iter()
                    .map(|alt| Ok((token_of(alt)?, logprob_of(alt.get("logprob"))?)))
                    .collect::<std::result::Result<_, String>>()
                    .map_err(|e| at(format!("top_logprobs: {e}")))?,
                Some(_) => return Err(at("top_logprobs is not a list".into())),
            };
            Ok(TokenLogprobs { token, logprob, top })
        })
        .collect()
}

/// OpenAI's legacy completions form: `tokens`, `token_logprobs` and `top_logprobs` side by side.
fn legacy_form(logprobs: &Value) -> std::result::Result<Vec<TokenLogprobs>, String> {
    let list = |name: &str| {
        logprobs.get(name).and_then(Value::as_array).ok_or_else(|| format!("logprobs has no list {name:?}"))
    };
    let (tokens, token_logprobs) = (list("tokens")?, list("token_logprobs")?);
    let top = logprobs.get("top_logprobs").and_then(Value::as_array);
    if token_logprobs.len() != tokens.len() || top.is_some_and(|t| t.len() != tokens.len()) {
        return Err("logprobs' tokens, token_logprobs and top_logprobs differ in length".into());
    }
    tokens
        .iter()
        .enumerate()
        .map(|(k, token)| {
            let at = |why: String| format!("logprobs token {k}: {why}");
            let token = token.as_str().ok_or_else(|| at("a token is not text".into()))?.to_string();
            let logprob = logprob_of(token_logprobs.get(k)).map_err(at)?;
            let top = match top.and_then(|t| t.get(k)).filter(|t| !t.is_null()) {
                None => Vec::new(),
                Some(Value::Object(alternatives)) => alternatives
                    .iter()
                    .map(|(token, logprob)| Ok((token.clone(), logprob_of(Some(logprob))?)))
                    .collect::<std::result::Result<_, String>>()
                    .map_err(at)?,
                Some(_) => return Err(at("top_logprobs is not a {token: logprob} object".into())),
            };
            Ok(TokenLogprobs { token, logprob, top })
        })
        .collect()
}

/// A token's name: its `bytes` as text when they are UTF-8, `<0xE6 0x97>` when they are part of a
/// character (so two such pieces are not confused by their shared replacement text), else its
/// `token` text.
fn token_of(entry: &Value) -> std::result::Result<String, String> {
    if let Some(bytes) = entry.get("bytes").and_then(Value::as_array) {
        let bytes: Option<Vec<u8>> = bytes.iter().map(|b| b.as_u64().and_then(|b| u8::try_from(b).ok())).collect();
        let bytes = bytes.ok_or("bytes is not a list of bytes")?;
        return Ok(String::from_utf8(bytes).unwrap_or_else(|e| {
            let hex: Vec<String> = e.as_bytes().iter().map(|b| format!("0x{b:02X}")).collect();
            format!("<{}>", hex.join(" "))
        }));
    }
    entry.get("token").and_then(Value::as_str).map(str::to_string).ok_or_else(|| "a token without text".to_string())
}

/// A log-probability: a finite number, at most 0 (rounding slack read as 0).
fn logprob_of(value: Option<&Value>) -> std::result::Result<f64, String> {
    let logprob = value.and_then(Value::as_f64).ok_or("a log-probability is missing or not a number")?;
    if !logprob.is_finite() || logprob > ABOVE_ZERO_SLACK {
        return Err(format!("the log-probability {logprob} is not ≤ 0"));
    }
    Ok(logprob.min(0.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_ask_each_api_its_way() {
        let prompt = Prompt::Ids(vec![1, 2]);
        let body = greedy_body(Api::Completions, "m", &prompt, 4, true, None, 5).unwrap();
        assert_eq!(
            body,
            json!({"model": "m", "prompt": [1, 2], "max_tokens": 4, "temperature": 0.0, "stream": false,
                   "ignore_eos": true, "logprobs": 5})
        );
        let chat = greedy_body(Api::Chat, "m", &Prompt::Text("hi".into()), 4, false, None, 3).unwrap();
        assert_eq!((chat["logprobs"].clone(), chat["top_logprobs"].clone()), (json!(true), json!(3)));
    }

    #[test]
    fn both_answer_forms() {
        // llama-server: the content form, with bytes; a piece of a character keeps its bytes.
        let content = r#"{"choices":[{"text":"a","logprobs":{"content":[
            {"id":1,"token":"a","bytes":[97],"logprob":-0.1,"top_logprobs":[
                {"id":1,"token":"a","bytes":[97],"logprob":-0.1},{"id":2,"token":"","bytes":[230,151],"logprob":-2.5}]}]}}]}"#;
        let got = parse_greedy(content, 3).unwrap();
        assert_eq!(got.text, "a");
        let tokens = got.tokens.unwrap();
        assert_eq!(tokens[0].top, vec![("a".to_string(), -0.1), ("<0xE6 0x97>".to_string(), -2.5)]);
        // vLLM's completions: the legacy form.
        let legacy = r#"{"choices":[{"text":"ab","logprobs":{"tokens":["a","b"],"token_logprobs":[-0.5,0.00001],
            "top_logprobs":[{"a":-0.5,"c":-1.0},null]}}]}"#;
        let tokens = parse_greedy(legacy, 3).unwrap().tokens.unwrap();
        assert_eq!((tokens[1].token.as_str(), tokens[1].logprob, tokens[1].top.len()), ("b", 0.0, 0));
        assert_eq!(tokens[0].top.len(), 2);
        // Chat's message, and no log-probabilities at all.
        let none = parse_greedy(r#"{"choices":[{"message":{"content":"hi"},"logprobs":null}]}"#, 3).unwrap();
        assert_eq!((none.text.as_str(), none.tokens), ("hi", None));
    }

    #[test]
    fn malformed_answers_say_what() {
        let err = |body: &str| parse_greedy(body, 3).unwrap_err();
        assert!(err("{").contains("not JSON"));
        assert!(err(r#"{"choices":[]}"#).contains("without choices"));
        assert!(err(r#"{"choices":[{"logprobs":{"content":{}}}]}"#).contains("not a list"));
        let positive = r#"{"choices":[{"logprobs":{"content":[{"token":"a","logprob":0.5}]}}]}"#;
        assert!(err(positive).contains("logprobs.content[0]: the log-probability 0.5 is not ≤ 0"), "{}", err(positive));
        let missing = r#"{"choices":[{"logprobs":{"content":[{"token":"a"}]}}]}"#;
        assert!(err(missing).contains("missing"));
        let bad_top = r#"{"choices":[{"logprobs":{"content":[{"token":"a","logprob":0,"top_logprobs":[{"token":"b","logprob":"x"}]}]}}]}"#;
        assert!(err(bad_top).contains("top_logprobs"));
        let uneven = r#"{"choices":[{"logprobs":{"tokens":["a"],"token_logprobs":[]}}]}"#;
        assert!(err(uneven).contains("differ in length"));
        let bytes = r#"{"choices":[{"logprobs":{"content":[{"bytes":[300],"logprob":0}]}}]}"#;
        assert!(err(bytes).contains("bytes"));
    }

    /// Log-probabilities are checked before they are believed: a server that answers with more
    /// alternatives than asked (each −1.0: 200,000 of them would be "73,576" of probability), or with
    /// alternatives whose probabilities sum above 1, is refused with the reason; rounding is not.
    #[test]
    fn log_probabilities_past_what_was_asked_or_past_one_are_refused() {
        let answer = |top: &[(String, f64)]| {
            let top: Vec<Value> = top.iter().map(|(t, l)| json!({"token": t, "logprob": l})).collect();
            json!({"choices": [{"message": {"content": "a"}, "logprobs": {"content": [
                {"token": "a", "logprob": -0.1, "top_logprobs": top}
            ]}}]})
            .to_string()
        };
        let many: Vec<(String, f64)> = (0..200_000).map(|i| (format!("t{i}"), -1.0)).collect();
        let why = parse_greedy(&answer(&many), 20).unwrap_err();
        assert_eq!(why, "position 0: 200000 top_logprobs entries, where 20 were asked for");
        let heavy = [("a".to_string(), -0.1), ("b".to_string(), -0.2)];
        let why = parse_greedy(&answer(&heavy), 20).unwrap_err();
        assert!(why.contains("sum to 1.7236, above 1"), "{why}");
        // ln(0.5) twice: a probability of 1 up to rounding.
        let whole = [("a".to_string(), (0.5f64).ln() + 1e-9), ("b".to_string(), (0.5f64).ln())];
        assert_eq!(parse_greedy(&answer(&whole), 2).unwrap().tokens.unwrap()[0].top.len(), 2);
    }
}
