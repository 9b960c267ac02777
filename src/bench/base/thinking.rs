//! Thinking models: Qwen3 reasons inside `<think>…</think>` before it answers, so the first token
//! a user reads as the answer can come long after the first token. One definition for both
//! targets, kept in each request's record:
//!
//! - **Reasoning tokens**: output tokens up to and including the one that closes the thinking
//!   (`</think>`; the tags are counted as reasoning). A reply that opens with `<think>` and never
//!   closes it is reasoning to the end. A reply with neither tag did not think: none.
//! - **First answer token**: the first output token after the thinking closed; for a reply that
//!   did not think, its first token (so the time to first answer token equals TTFT).
//!
//! The engine knows each token's id and splits at the tag ids ([`ThinkTags`], from the
//! tokenizer). A server says it in its stream: text in `delta.reasoning_content` (vLLM, SGLang,
//! llama.cpp) or `delta.reasoning` is reasoning; the first chunk with `content` (or a completion's
//! `text`) after it is the first answer token. A server that streams the tags as plain content
//! (no reasoning parser) shows no thinking to the client; the report then has no split.

use crate::model::Tokenizer;

/// The ids of the tags that open and close thinking.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThinkTags {
    pub open: u32,
    pub close: u32,
}

impl ThinkTags {
    /// Qwen3's `<think>` and `</think>`, when the tokenizer has both as single tokens.
    pub fn of(tokenizer: &Tokenizer) -> Option<ThinkTags> {
        Some(ThinkTags { open: tokenizer.token_id("<think>")?, close: tokenizer.token_id("</think>")? })
    }

    /// Of a reply's output ids: how many are reasoning, and the index of the first answer token
    /// (`None` when it never got to answer).
    pub fn split(&self, ids: &[u32]) -> (usize, Option<usize>) {
        match ids.iter().position(|&id| id == self.close) {
            Some(c) => (c + 1, (c + 1 < ids.len()).then_some(c + 1)),
            None if ids.first() == Some(&self.open) => (ids.len(), None),
            None => (0, (!ids.is_empty()).then_some(0)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TAGS: ThinkTags = ThinkTags { open: 7, close: 9 };

    #[test]
    fn a_reply_splits_at_the_closing_tag() {
        // <think> a b </think> c d: four reasoning tokens, the answer starts at index 4.
        assert_eq!(TAGS.split(&[7, 1, 2, 9, 3, 4]), (4, Some(4)));
        // Thinking opened by the prompt (the template): the closing tag still ends it.
        assert_eq!(TAGS.split(&[1, 2, 9, 3]), (3, Some(3)));
        // Cut off while thinking, or right after closing: no answer token.
        assert_eq!(TAGS.split(&[7, 1, 2]), (3, None));
        assert_eq!(TAGS.split(&[7, 1, 9]), (3, None));
        // No thinking: the first token is the answer's.
        assert_eq!(TAGS.split(&[1, 2, 3]), (0, Some(0)));
        assert_eq!(TAGS.split(&[]), (0, None));
    }
}
