//! What a server's answer may cost the client, whatever the server sends. A benchmark must
//! survive the server it measures: an endless error body, a 200 that is not a stream, a stream
//! that never ends, a `usage` that cannot be true, a redirect to somewhere else. Both clients
//! (native and browser) apply these same bounds; the SSE line bound is [`super::sse`]'s.

use crate::remote::openai::RequestError;

/// Bytes of an error body (or of a 200 that is not an event stream) read for its message; the
/// rest is never read. The message shows 300 characters; an OpenAI error object is far smaller.
pub const MAX_ERROR_BODY_BYTES: usize = 64 << 10;

/// Bytes of a `GET /v1/models` answer (thousands of models fit).
pub const MAX_MODELS_BODY_BYTES: usize = 4 << 20;

/// Bytes of one whole answer with log-probabilities (the quality pass): about 100 bytes per
/// alternative, so 1,024 tokens with 100 alternatives each fit.
pub const MAX_LOGPROBS_BODY_BYTES: usize = 16 << 20;

/// Redirects followed within the endpoint's origin.
pub const MAX_REDIRECTS: usize = 5;

/// Bytes of a reply's text a conversation keeps to send back in its next turn (about 250,000
/// tokens of English); a reply past it fails its request rather than being cut.
pub const MAX_REPLY_BYTES: usize = 1 << 20;

/// Tokens one request may stream before it fails: its `max_tokens` and a quarter more, plus 16
/// (servers may count a token or two differently, or split one token's text over two chunks);
/// past that the server is not honouring `max_tokens`, and the record's timestamps would grow
/// without end.
pub fn token_limit(max_tokens: usize) -> usize {
    max_tokens.saturating_add(max_tokens / 4).saturating_add(16)
}

/// Body bytes up to a cap: what a client reads of a body it only needs a message from.
#[derive(Debug)]
pub struct CappedBody {
    bytes: Vec<u8>,
    max: usize,
    cut: bool,
}

impl CappedBody {
    pub fn new(max: usize) -> Self {
        CappedBody { bytes: Vec::new(), max, cut: false }
    }

    /// Appends what fits; false once the cap is reached (stop reading and drop the body).
    pub fn push(&mut self, bytes: &[u8]) -> bool {
        let room = self.max - self.bytes.len();
        if bytes.len() > room {
            self.cut = true;
        }
        self.bytes.extend_from_slice(&bytes[..bytes.len().min(room)]);
        !self.cut && self.bytes.len() < self.max
    }

    /// The body went past the cap (the rest was not read).
    pub fn is_cut(&self) -> bool {
        self.cut
    }

    /// The bytes read, as text (invalid UTF-8, or a character cut at the cap, replaced).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }
}

/// `scheme://host:port` of an http(s) URL, lower case, with the scheme's default port made
/// explicit; `None` for anything else.
pub fn origin(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    let default_port = match scheme.as_str() {
        "http" => "80",
        "https" => "443",
        _ => return None,
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default().to_ascii_lowercase();
    let host_port = authority.rsplit_once('@').map_or(authority.as_str(), |(_, h)| h);
    // "[::1]:8000" and "[::1]" keep their brackets; a port follows the last colon after them.
    let has_port = host_port.rsplit_once(':').is_some_and(|(_, port)| !port.contains(']'));
    if host_port.is_empty() {
        return None;
    }
    Some(if has_port { format!("{scheme}://{host_port}") } else { format!("{scheme}://{host_port}:{default_port}") })
}

/// A request to `requested` was answered from `answered` (after redirects): `None` when nothing
/// moved, the new URL when it stayed on the endpoint's origin (recorded with the request, as the
/// extra round trip is in its TTFT), and an error when it left it — the run record names the
/// endpoint, so an answer from another server is not a measurement of it.
pub fn check_redirect(requested: &str, answered: &str) -> Result<Option<String>, RequestError> {
    if answered == requested {
        return Ok(None);
    }
    match (origin(requested), origin(answered)) {
        (Some(a), Some(b)) if a == b => Ok(Some(answered.to_string())),
        _ => Err(RequestError::Redirect(format!(
            "the server sent the request on to {answered}, another origin than the endpoint's; not followed \
             (benchmark that server by its own URL)"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capped_bodies_keep_the_start() {
        let mut body = CappedBody::new(10);
        assert!(body.push(b"abcd"));
        assert!(!body.push(b"efghijklmnop"));
        assert_eq!((body.text(), body.is_cut()), ("abcdefghij".to_string(), true));
        let mut exact = CappedBody::new(4);
        assert!(!exact.push(b"abcd"));
        assert!(!exact.is_cut());
        // A UTF-8 character cut at the cap is replaced, not an error.
        let mut cut = CappedBody::new(4);
        cut.push("ab你".as_bytes());
        assert_eq!(cut.text(), "ab\u{fffd}");
    }

    #[test]
    fn origins_and_redirects() {
        assert_eq!(origin("http://Host:8000/v1/completions").as_deref(), Some("http://host:8000"));
        assert_eq!(origin("http://host/v1").as_deref(), Some("http://host:80"));
        assert_eq!(origin("https://host").as_deref(), Some("https://host:443"));
        assert_eq!(origin("http://[::1]/v1").as_deref(), Some("http://[::1]:80"));
        assert_eq!(origin("http://[::1]:9/v1").as_deref(), Some("http://[::1]:9"));
        assert_eq!(origin("ftp://host/x"), None);
        let from = "http://127.0.0.1:8000/v1/completions";
        assert_eq!(check_redirect(from, from), Ok(None));
        let moved = "http://127.0.0.1:8000/v2/completions";
        assert_eq!(check_redirect(from, moved), Ok(Some(moved.to_string())));
        let err = check_redirect(from, "http://127.0.0.1:9000/v1/completions").unwrap_err().to_string();
        assert!(err.starts_with("redirect: the server sent the request on to http://127.0.0.1:9000/"), "{err}");
        assert!(check_redirect("http://host/v1", "http://host:80/v2").unwrap().is_some());
        assert!(check_redirect("http://host/v1", "https://host/v1").is_err());
    }

    #[test]
    fn token_limits_leave_slack_and_never_overflow() {
        assert_eq!(token_limit(0), 16);
        assert_eq!(token_limit(3), 19);
        assert_eq!(token_limit(128), 176);
        assert_eq!(token_limit(usize::MAX), usize::MAX);
    }
}
