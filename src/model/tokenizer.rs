//! The Hugging Face tokenizer (`tokenizer.json`) and Qwen3's chat format.

use crate::error::{Error, Result};

pub const ENDOFTEXT: u32 = 151_643;
pub const IM_START: u32 = 151_644;
pub const IM_END: u32 = 151_645;

pub struct Tokenizer {
    inner: tokenizers::Tokenizer,
}

impl Tokenizer {
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let inner = tokenizers::Tokenizer::from_bytes(bytes).map_err(|e| Error::Tokenizer(e.to_string()))?;
        Ok(Tokenizer { inner })
    }

    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        let enc = self.inner.encode(text, false).map_err(|e| Error::Tokenizer(e.to_string()))?;
        Ok(enc.get_ids().to_vec())
    }

    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        self.inner.decode(ids, false).map_err(|e| Error::Tokenizer(e.to_string()))
    }

    /// Qwen3's chat template for one user turn with the generation prompt, as
    /// `apply_chat_template(messages, add_generation_prompt=True)` renders it; with `thinking`
    /// false it adds the empty think block that `enable_thinking=False` adds.
    pub fn chat_prompt(&self, user: &str, thinking: bool) -> Result<Vec<u32>> {
        let mut text = format!("<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n");
        if !thinking {
            text.push_str("<think>\n\n</think>\n\n");
        }
        self.encode(&text)
    }

    /// The id of `token` when the vocabulary has it as one token (a special or added token, or a
    /// plain vocabulary entry).
    pub fn token_id(&self, token: &str) -> Option<u32> {
        self.inner.token_to_id(token)
    }

    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }
}
