//! The OpenAI-compatible wire format, without any I/O: the base URL, request bodies for
//! `/v1/completions` and `/v1/chat/completions`, the streamed chunks, `/v1/models`, and the error
//! kinds a request can end with. Shared by the native client and the browser's `fetch` client.

use serde_json::{json, Value};
use thiserror::Error;

use crate::error::{Error, Result};

/// The API and the API root, as a run request names them (`bench::traffic::endpoint`).
pub use crate::bench::traffic::endpoint::{Api, BaseUrl};

/// A bearer token, held in memory only: it has no `Display` or `Serialize`, its `Debug` hides it,
/// and [`redact`] scrubs it from any text a server sends back.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// `None` for an empty key.
    pub fn new(key: String) -> Option<Self> {
        let key = key.trim().to_string();
        (!key.is_empty()).then_some(ApiKey(key))
    }

    /// For the `Authorization` header, and nothing else.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiKey(***)")
    }
}

/// `text` with every occurrence of the key replaced by `***`.
pub fn redact(text: &str, key: Option<&ApiKey>) -> String {
    match key {
        Some(key) if text.contains(key.expose()) => text.replace(key.expose(), "***"),
        _ => text.to_string(),
    }
}

/// What one request sends as its prompt: made by [`crate::bench::PromptSource::prompt`].
pub use crate::bench::traffic::prompts::Prompt;

/// The streamed request body, exactly: `model`, the prompt (`prompt`: token ids or text for
/// completions; `messages`: one user message for chat, or a conversation's messages),
/// `max_tokens`, `"temperature": 0.0`, `"stream": true`, `"stream_options": {"include_usage": true}`, and `"ignore_eos": true` when
/// asked (a non-standard field that vLLM, SGLang and llama-server accept), and for chat with
/// `thinking` set, `"chat_template_kwargs": {"enable_thinking": thinking}`. Nothing else: no
/// `logprobs`, `top_p`, `seed` or `min_tokens`, so other benchmark clients' bodies may differ.
pub fn request_body(
    api: Api,
    model: &str,
    prompt: &Prompt,
    max_tokens: usize,
    ignore_eos: bool,
    thinking: Option<bool>,
) -> Result<Value> {
    let mut body = match (api, prompt) {
        (Api::Completions, Prompt::Ids(ids)) => json!({ "prompt": ids }),
        (Api::Completions, Prompt::Text(text)) => json!({ "prompt": text }),
        (Api::Chat, Prompt::Text(text)) => json!({ "messages": [{ "role": "user", "content": text }] }),
        (Api::Chat, Prompt::Messages(messages)) => {
            let messages: Vec<Value> =
                messages.iter().map(|m| json!({ "role": m.role.as_str(), "content": m.content })).collect();
            json!({ "messages": messages })
        }
        (Api::Chat, Prompt::Ids(_)) => {
            return Err(Error::Invalid("the chat API takes text prompts, not token ids".into()));
        }
        (Api::Completions, Prompt::Messages(_)) => {
            return Err(Error::Invalid("a conversation's messages go to the chat API, not completions".into()));
        }
    };
    body["model"] = model.into();
    body["max_tokens"] = max_tokens.into();
    body["temperature"] = 0.0.into();
    body["stream"] = true.into();
    body["stream_options"] = json!({ "include_usage": true });
    if ignore_eos {
        body["ignore_eos"] = true.into();
    }
    match (api, thinking) {
        (Api::Chat, Some(on)) => body["chat_template_kwargs"] = json!({ "enable_thinking": on }),
        (Api::Completions, Some(_)) => {
            return Err(Error::Invalid("thinking on/off is a chat template's switch: use the chat API".into()));
        }
        (_, None) => {}
    }
    Ok(body)
}

/// Token counts from the server's `usage` object.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub prompt_tokens: Option<usize>,
    pub completion_tokens: Option<usize>,
    /// Prompt tokens the server served from its prefix cache
    /// (`prompt_tokens_details.cached_tokens`: vLLM with `--enable-prompt-tokens-details`,
    /// SGLang, llama-server), where it says.
    pub cached_tokens: Option<usize>,
}

/// What one streamed JSON chunk says.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Chunk {
    /// Output tokens it carries: the length of its per-token `logprobs` (or llama.cpp's `tokens`)
    /// when present, else 1 for non-empty text, else 0.
    pub tokens: usize,
    /// Its text is the model's thinking (`delta.reasoning_content` or `delta.reasoning`) and
    /// nothing else: a chunk that also carries answer text counts as answer
    /// ([`crate::bench::base::thinking`]).
    pub reasoning: bool,
    pub finish_reason: Option<String>,
    pub usage: Option<Usage>,
}

/// Parses the `data` of one event (not `[DONE]`). An `{"error": …}` object, which vLLM and
/// llama.cpp send when a stream fails midway, is a [`RequestError::Server`]. The answer text the
/// chunk carries (completions' `text`, chat's `delta.content`; never the thinking) is appended to
/// `answer_text` when given: a conversation's next turn sends it back. Without it nothing is
/// copied (every chunk of every stream goes through here).
pub fn parse_chunk(data: &str, answer_text: Option<&mut String>) -> Result<Chunk, RequestError> {
    let value: Value = serde_json::from_str(data)
        .map_err(|e| RequestError::Malformed(format!("a data line is not JSON ({e}): {}", snippet(data))))?;
    if let Some(error) = value.get("error") {
        return Err(RequestError::Server(error_message(error)));
    }
    let choices = value.get("choices").filter(|c| !c.is_null());
    let usage = value.get("usage").filter(|u| !u.is_null());
    if choices.is_none() && usage.is_none() {
        return Err(RequestError::Malformed(format!("a chunk with neither choices nor usage: {}", snippet(data))));
    }
    let mut chunk = Chunk { usage: usage.map(parse_usage), ..Chunk::default() };
    let choices = match choices {
        Some(Value::Array(choices)) => choices.as_slice(),
        Some(_) => return Err(RequestError::Malformed(format!("choices is not a list: {}", snippet(data)))),
        None => &[],
    };
    // One prompt per request, so one choice.
    if let Some(choice) = choices.first() {
        let text_len = |v: Option<&Value>| v.and_then(Value::as_str).map_or(0, str::len);
        let delta = choice.get("delta");
        let field = |name: &str| delta.and_then(|d| d.get(name));
        let answer = text_len(choice.get("text")) > 0
            || text_len(field("content")) > 0
            || field("tool_calls").and_then(Value::as_array).is_some_and(|calls| !calls.is_empty());
        let reasoning = text_len(field("reasoning_content")) > 0 || text_len(field("reasoning")) > 0;
        let has_text = answer || reasoning;
        chunk.reasoning = reasoning && !answer;
        if let Some(out) = answer_text {
            for part in [choice.get("text"), field("content")].into_iter().flatten().filter_map(Value::as_str) {
                out.push_str(part);
            }
        }
        let listed = [
            choice.get("logprobs").and_then(|l| l.get("content")),
            choice.get("logprobs").and_then(|l| l.get("tokens")),
            choice.get("tokens"),
        ]
        .into_iter()
        .flatten()
        .filter_map(Value::as_array)
        .map(Vec::len)
        .find(|&n| n > 0);
        chunk.tokens = listed.unwrap_or(has_text as usize);
        chunk.finish_reason = choice.get("finish_reason").and_then(Value::as_str).map(str::to_string);
    }
    Ok(chunk)
}

fn parse_usage(usage: &Value) -> Usage {
    // Saturated, not wrapped, where usize is 32 bits (wasm): an absurd count stays absurd.
    let count =
        |v: &Value, name: &str| v.get(name).and_then(Value::as_u64).map(|n| usize::try_from(n).unwrap_or(usize::MAX));
    Usage {
        prompt_tokens: count(usage, "prompt_tokens"),
        completion_tokens: count(usage, "completion_tokens"),
        cached_tokens: usage.get("prompt_tokens_details").and_then(|d| count(d, "cached_tokens")),
    }
}

/// The `message` of an OpenAI error object (`{"error": {"message": …}}` or a bare string).
pub fn error_message(error: &Value) -> String {
    let text = error.get("message").and_then(Value::as_str).or_else(|| error.as_str());
    snippet(&text.map_or_else(|| error.to_string(), str::to_string))
}

/// The body of an HTTP error, for its message: the OpenAI error's `message` when it is one.
pub fn http_error_text(body: &str) -> String {
    match serde_json::from_str::<Value>(body).ok().as_ref().and_then(|v| v.get("error")) {
        Some(error) => error_message(error),
        None => snippet(body),
    }
}

/// The model ids in a `GET /v1/models` answer (`{"object": "list", "data": [{"id": …}]}`).
pub fn parse_models(body: &str) -> Result<Vec<String>> {
    let not_a_list = || Error::Invalid(format!("/models did not answer with an OpenAI model list: {}", snippet(body)));
    let value: Value = serde_json::from_str(body).map_err(|_| not_a_list())?;
    let data = value.get("data").and_then(Value::as_array).ok_or_else(not_a_list)?;
    Ok(data.iter().filter_map(|m| m.get("id").and_then(Value::as_str)).map(str::to_string).collect())
}

/// How a request failed. `Display` starts with the kind (`"http 500: …"`), which is what the
/// report counts ([`crate::bench::RequestRecord::error_kind`]).
#[derive(Clone, Debug, PartialEq, Error)]
pub enum RequestError {
    #[error("connect: {0}")]
    Connect(String),
    #[error("timeout: no complete answer within {0} s")]
    Timeout(f64),
    #[error("http {status}: {body}")]
    Http { status: u16, body: String },
    #[error("not an event stream: {0}")]
    NotEventStream(String),
    #[error("malformed SSE: {0}")]
    Malformed(String),
    #[error("server error: {0}")]
    Server(String),
    #[error("stream closed early: {0}")]
    ClosedEarly(String),
    #[error("network: {0}")]
    Network(String),
    /// The answer came from another origin than the endpoint's (see [`crate::remote::bounds`]).
    #[error("redirect: {0}")]
    Redirect(String),
    /// The stream went on past the request's `max_tokens` (see [`crate::remote::bounds`]).
    #[error("too many tokens: {0}")]
    TooManyTokens(String),
    /// Cancelled while it was out, at `at_s` (seconds from the run's start): the workload's planned
    /// abort, the run's stop (Cancel in the page, Ctrl-C in the CLI) or the saturation stop.
    #[error("cancelled")]
    Cancelled { by: crate::bench::CancelledBy, at_s: f64 },
    #[error("bad request: {0}")]
    Request(String),
}

/// At most 300 characters of `text`, on one line, for error messages.
pub fn snippet(text: &str) -> String {
    const MAX: usize = 300;
    let one_line: String = text.trim().chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    match one_line.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}…", &one_line[..cut]),
        None => one_line,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::traffic::prompts::{Message, Role};

    #[test]
    fn base_urls() {
        let url = BaseUrl::parse("http://127.0.0.1:8012/v1/").unwrap();
        assert_eq!(url.url("models"), "http://127.0.0.1:8012/v1/models");
        assert_eq!(BaseUrl::parse("https://api.example.com/v1").unwrap().url("completions").len(), 38);
        for (bad, why) in [
            ("127.0.0.1:8012/v1", "expected http"),
            ("ftp://host/v1", "expected http"),
            ("http://user:sk-secret@host/v1", "user info"),
            ("http://host/v1?key=sk-secret", "query"),
            ("http:///v1", "no host"),
            ("http://:80/v1", "no host"),
            ("http://host /v1", "spaces"),
        ] {
            let err = BaseUrl::parse(bad).unwrap_err().to_string();
            assert!(err.contains(why), "{bad}: {err}");
        }
    }

    #[test]
    fn api_key_never_prints() {
        let key = ApiKey::new(" sk-secret-123 \n".into()).unwrap();
        assert_eq!(key.expose(), "sk-secret-123");
        assert_eq!(format!("{key:?}"), "ApiKey(***)");
        assert_eq!(redact("bad key sk-secret-123!", Some(&key)), "bad key ***!");
        assert!(ApiKey::new("  ".into()).is_none());
    }

    #[test]
    fn bodies() {
        let ids = request_body(Api::Completions, "m", &Prompt::Ids(vec![1, 2]), 8, true, None).unwrap();
        assert_eq!(
            ids,
            json!({"model": "m", "prompt": [1, 2], "max_tokens": 8, "temperature": 0.0, "stream": true,
                   "stream_options": {"include_usage": true}, "ignore_eos": true})
        );
        let chat = request_body(Api::Chat, "m", &Prompt::Text("hi".into()), 4, false, None).unwrap();
        assert_eq!(chat["messages"], json!([{"role": "user", "content": "hi"}]));
        assert!(chat.get("ignore_eos").is_none() && chat.get("prompt").is_none());
        let text = request_body(Api::Completions, "m", &Prompt::Text("hi".into()), 4, false, None).unwrap();
        assert_eq!(text["prompt"], "hi");
        assert!(request_body(Api::Chat, "m", &Prompt::Ids(vec![1]), 4, true, None).is_err());
        // A conversation: its messages in order, to the chat API only.
        let said = |role, content: &str| Message { role, content: content.into() };
        let history =
            Prompt::Messages(vec![said(Role::User, "hi"), said(Role::Assistant, "yo"), said(Role::User, "so")]);
        let turn = request_body(Api::Chat, "m", &history, 4, false, None).unwrap();
        assert_eq!(
            turn["messages"],
            json!([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}, {"role": "user", "content": "so"}])
        );
        assert!(request_body(Api::Completions, "m", &history, 4, false, None).is_err());
        // Thinking off through the chat template; refused for completions, which has none.
        let off = request_body(Api::Chat, "m", &Prompt::Text("hi".into()), 4, false, Some(false)).unwrap();
        assert_eq!(off["chat_template_kwargs"]["enable_thinking"], false);
        assert!(chat.get("chat_template_kwargs").is_none());
        assert!(request_body(Api::Completions, "m", &Prompt::Text("hi".into()), 4, false, Some(true)).is_err());
        assert_eq!("chat".parse::<Api>().unwrap().path(), "chat/completions");
        assert!("Chat".parse::<Api>().is_err());
    }

    #[test]
    fn chunks_of_both_apis() {
        let completion = r#"{"choices":[{"index":0,"text":" the","finish_reason":null}],"usage":null}"#;
        // The answer's text goes into the buffer when one is given.
        let mut answer = String::new();
        assert_eq!(parse_chunk(completion, Some(&mut answer)).unwrap(), Chunk { tokens: 1, ..Chunk::default() });
        let chat = r#"{"choices":[{"delta":{"content":"Hi"},"finish_reason":"length"}]}"#;
        assert_eq!(
            parse_chunk(chat, Some(&mut answer)).unwrap(),
            Chunk { tokens: 1, finish_reason: Some("length".into()), ..Chunk::default() }
        );
        // Thinking is not the answer's text.
        parse_chunk(r#"{"choices":[{"delta":{"reasoning_content":"Hm"}}]}"#, Some(&mut answer)).unwrap();
        assert_eq!(answer, " theHi");
        assert_eq!(parse_chunk(chat, None).unwrap(), parse_chunk(chat, Some(&mut String::new())).unwrap());
        // A role-only first delta, and Qwen3's thinking in reasoning_content.
        assert_eq!(
            parse_chunk(r#"{"choices":[{"delta":{"role":"assistant","content":null}}]}"#, None).unwrap().tokens,
            0
        );
        assert_eq!(parse_chunk(r#"{"choices":[{"delta":{"reasoning_content":"Hm"}}]}"#, None).unwrap().tokens, 1);
        assert!(parse_chunk(r#"{"choices":[{"delta":{"reasoning_content":"Hm"}}]}"#, None).unwrap().reasoning);
        assert!(parse_chunk(r#"{"choices":[{"delta":{"reasoning":"Hm"}}]}"#, None).unwrap().reasoning);
        assert!(!parse_chunk(r#"{"choices":[{"delta":{"content":"Hi"}}]}"#, None).unwrap().reasoning);
        assert!(
            !parse_chunk(r#"{"choices":[{"delta":{"reasoning_content":"Hm","content":"Hi"}}]}"#, None)
                .unwrap()
                .reasoning
        );
        // Several tokens in one chunk, counted by their logprobs or llama.cpp's token list.
        let three = r#"{"choices":[{"text":"abc","logprobs":{"tokens":["a","b","c"],"token_logprobs":[0,0,0]}}]}"#;
        assert_eq!(parse_chunk(three, None).unwrap().tokens, 3);
        let two = r#"{"choices":[{"delta":{"content":"ab"},"logprobs":{"content":[{},{}]}}]}"#;
        assert_eq!(parse_chunk(two, None).unwrap().tokens, 2);
        assert_eq!(parse_chunk(r#"{"choices":[{"text":"ab","tokens":[5,6]}]}"#, None).unwrap().tokens, 2);
        let usage = r#"{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17}}"#;
        let usage = parse_chunk(usage, None).unwrap();
        assert_eq!(
            usage.usage,
            Some(Usage { prompt_tokens: Some(12), completion_tokens: Some(5), cached_tokens: None })
        );
        assert_eq!(usage.tokens, 0);
        // llama-server's (and vLLM's) cached prompt tokens.
        let cached = r#"{"choices":[],"usage":{"prompt_tokens":15,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":14}}}"#;
        assert_eq!(parse_chunk(cached, None).unwrap().usage.unwrap().cached_tokens, Some(14));
    }

    #[test]
    fn bad_chunks() {
        let kind = |data: &str| parse_chunk(data, None).unwrap_err().to_string();
        assert!(kind("{not json").starts_with("malformed SSE: a data line is not JSON"));
        assert!(kind(r#"{"id":"x"}"#).starts_with("malformed SSE: a chunk with neither"));
        assert!(kind(r#"{"choices":{"text":"a"}}"#).starts_with("malformed SSE: choices is not a list"));
        assert_eq!(kind(r#"{"error":{"message":"out of memory","code":500}}"#), "server error: out of memory");
        assert_eq!(kind(r#"{"error":"boom"}"#), "server error: boom");
        assert!(kind(&format!("{{{}", "x".repeat(1000))).ends_with('…'));
        assert_eq!(http_error_text(r#"{"error":{"code":401,"message":"Invalid API Key"}}"#), "Invalid API Key");
        assert_eq!(http_error_text("<html>Bad Gateway</html>\n"), "<html>Bad Gateway</html>");
    }

    #[test]
    fn model_lists() {
        let body = r#"{"object":"list","data":[{"id":"qwen3-tiny","object":"model"},{"id":"b"}]}"#;
        assert_eq!(parse_models(body).unwrap(), vec!["qwen3-tiny", "b"]);
        assert!(parse_models("<html>").unwrap_err().to_string().contains("not answer with an OpenAI model list"));
        assert!(parse_models(r#"{"models":[]}"#).is_err());
    }
}
