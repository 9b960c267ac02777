//! Server-sent events, incrementally: bytes in as the network delivers them (any split, even
//! inside a line or between CR and LF), whole events out. Follows the WHATWG event-stream rules
//! that OpenAI-style servers use: `field: value` lines, `:` comments, a blank line ends an event,
//! several `data:` lines join with "\n". Target-independent: fed by reqwest natively and by a
//! `ReadableStream` reader in the browser.

use thiserror::Error;

/// One dispatched event. OpenAI-style streams only use `data` (a JSON chunk or `[DONE]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, when the server named the event type.
    pub event: Option<String>,
    pub data: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum SseError {
    #[error("a line is not valid UTF-8")]
    InvalidUtf8,
    #[error("a line is longer than {max} bytes without a line break")]
    LineTooLong { max: usize },
    #[error("an event's data is longer than {max} bytes without a blank line")]
    EventTooLong { max: usize },
}

/// No OpenAI chunk comes near this; past it the body is not an event stream.
pub const MAX_LINE_BYTES: usize = 8 << 20;
/// Nor an event: without this, endless short `data:` lines with no blank line would grow one
/// event's data without bound.
pub const MAX_EVENT_BYTES: usize = 8 << 20;

#[derive(Debug, Default)]
pub struct SseParser {
    /// The unfinished line (bytes since the last line break).
    line: Vec<u8>,
    /// The last byte seen was CR, so an LF that follows belongs to the same line break.
    after_cr: bool,
    data: String,
    has_data: bool,
    event: Option<String>,
}

impl SseParser {
    pub fn new() -> Self {
        Self::default()
    }

    /// Consumes `bytes`, appending every event they complete to `out`.
    pub fn push(&mut self, bytes: &[u8], out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        for &byte in bytes {
            let after_cr = std::mem::replace(&mut self.after_cr, byte == b'\r');
            match byte {
                b'\n' if after_cr => {} // the LF of a CRLF: the line already ended at the CR
                b'\r' | b'\n' => self.end_line(out)?,
                _ => {
                    if self.line.len() >= MAX_LINE_BYTES {
                        return Err(SseError::LineTooLong { max: MAX_LINE_BYTES });
                    }
                    self.line.push(byte);
                }
            }
        }
        Ok(())
    }

    /// The body ended. Unlike the browser's EventSource, a last event without its closing blank
    /// line is still dispatched: a server that ends with `data: [DONE]\n` meant it.
    pub fn finish(&mut self, out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        if !self.line.is_empty() {
            self.end_line(out)?;
        }
        self.dispatch(out);
        Ok(())
    }

    fn end_line(&mut self, out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        let line = std::mem::take(&mut self.line);
        let line = std::str::from_utf8(&line).map_err(|_| SseError::InvalidUtf8)?;
        if line.is_empty() {
            self.dispatch(out);
            return Ok(());
        }
        if line.starts_with(':') {
            return Ok(()); // a comment (keep-alive)
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "data" => {
                if self.data.len() + value.len() >= MAX_EVENT_BYTES {
                    return Err(SseError::EventTooLong { max: MAX_EVENT_BYTES });
                }
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            "event" => self.event = Some(value.to_string()),
            _ => {} // id, retry and unknown fields mean nothing to a benchmark
        }
        Ok(())
    }

    fn dispatch(&mut self, out: &mut Vec<SseEvent>) {
        let event = self.event.take();
        if std::mem::take(&mut self.has_data) {
            out.push(SseEvent { event, data: std::mem::take(&mut self.data) });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_in_pieces(body: &[u8], piece: usize) -> Vec<SseEvent> {
        let mut parser = SseParser::new();
        let mut out = Vec::new();
        for part in body.chunks(piece) {
            parser.push(part, &mut out).unwrap();
        }
        parser.finish(&mut out).unwrap();
        out
    }

    fn data(events: &[SseEvent]) -> Vec<&str> {
        events.iter().map(|e| e.data.as_str()).collect()
    }

    #[test]
    fn openai_stream_in_any_split() {
        let body = b"data: {\"a\":1}\n\ndata: {\"b\":2}\n\ndata: [DONE]\n\n";
        for piece in 1..body.len() {
            assert_eq!(data(&parse_in_pieces(body, piece)), vec!["{\"a\":1}", "{\"b\":2}", "[DONE]"], "piece {piece}");
        }
    }

    #[test]
    fn line_breaks_crlf_cr_lf_split_between_reads() {
        let body = b"data: x\r\n\r\ndata: y\r\rdata: z\n\n";
        for piece in 1..body.len() {
            assert_eq!(data(&parse_in_pieces(body, piece)), vec!["x", "y", "z"], "piece {piece}");
        }
    }

    #[test]
    fn comments_fields_multiline_data_and_spaces() {
        let body = b": keep-alive\n\nevent: error\nid: 3\nretry: 10\ndata:first\ndata:  second\ndata\n\n";
        let events = parse_in_pieces(body, 1000);
        // The comment alone dispatches nothing; one space after the colon is dropped, not two.
        assert_eq!(events, vec![SseEvent { event: Some("error".into()), data: "first\n second\n".into() }]);
    }

    #[test]
    fn last_event_without_blank_line_and_utf8_split() {
        let body = "data: 你好\ndata: [DONE]".as_bytes();
        for piece in 1..body.len() {
            assert_eq!(data(&parse_in_pieces(body, piece)), vec!["你好\n[DONE]"], "piece {piece}");
        }
        assert!(parse_in_pieces(b"\n\n: only comments\n\n", 3).is_empty());
    }

    #[test]
    fn invalid_utf8_and_endless_lines_are_errors() {
        let mut parser = SseParser::new();
        let mut out = Vec::new();
        assert_eq!(parser.push(b"data: \xff\xfe\n", &mut out), Err(SseError::InvalidUtf8));
        let mut parser = SseParser::new();
        let long = vec![b'a'; MAX_LINE_BYTES + 1];
        assert_eq!(parser.push(&long, &mut out), Err(SseError::LineTooLong { max: MAX_LINE_BYTES }));
        let mut parser = SseParser::new();
        let line = format!("data: {}\n", "a".repeat(1000));
        let endless = line.repeat(MAX_EVENT_BYTES / 1000 + 1);
        assert_eq!(parser.push(endless.as_bytes(), &mut out), Err(SseError::EventTooLong { max: MAX_EVENT_BYTES }));
    }
}
