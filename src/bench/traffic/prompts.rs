//! Prompt contents: seeded random token ids (for throughput, independent of any text), built-in
//! English and Chinese text cut or repeated to the planned length, or a dataset row's own text.
//! [`PromptSource`] chooses among them for each request of a run; the CLI and the page, for the
//! engine and for a server, build every prompt through it.

use rand::Rng;
use sha2::{Digest, Sha256};

use crate::bench::base::streams::{stream, STREAM_BLOCKS, STREAM_PREFIXES, STREAM_PROMPTS};
use crate::bench::traffic::workload::{PlannedRequest, WorkloadSpec};
use crate::error::{Error, Result};
use crate::model::Tokenizer;

/// Token ids at or above this are Qwen's special tokens (`<|endoftext|>` = 151643 onwards).
pub const FIRST_SPECIAL_TOKEN: usize = 151_643;

/// What one request sends to a server as its prompt (the remote layer above sends it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Prompt {
    /// Token ids (completions only): exactly the planned length, no tokenizer involved.
    Ids(Vec<u32>),
    /// Text the server tokenizes (its count comes back in `usage.prompt_tokens`).
    Text(String),
    /// A conversation so far (chat only): user and assistant messages, in order, the last the
    /// user's (made by the remote layer's conversation module).
    Messages(Vec<Message>),
}

impl Prompt {
    /// The prompt's digest: the first 16 hex digits of the SHA-256 of its kind and contents (ids
    /// as little-endian u32s; text as UTF-8; each message's role and text, NUL-separated). Equal
    /// prompts have equal digests on every platform; the kind is part of it, so token ids and
    /// text never compare equal.
    pub fn digest(&self) -> String {
        let mut hash = Sha256::new();
        match self {
            Prompt::Ids(ids) => return Prompt::digest_ids(ids),
            Prompt::Text(text) => {
                hash.update(b"text\0");
                hash.update(text.as_bytes());
            }
            Prompt::Messages(messages) => {
                hash.update(b"messages\0");
                for m in messages {
                    for part in [m.role.as_str(), &m.content] {
                        hash.update(part.as_bytes());
                        hash.update(b"\0");
                    }
                }
            }
        }
        short_hex(hash)
    }

    /// [`Prompt::digest`] of token ids, without copying them into a prompt.
    pub fn digest_ids(ids: &[u32]) -> String {
        let mut hash = Sha256::new();
        hash.update(b"ids\0");
        for id in ids {
            hash.update(id.to_le_bytes());
        }
        short_hex(hash)
    }
}

/// The first 8 bytes of a digest, hex.
fn short_hex(hash: Sha256) -> String {
    hash.finalize()[..8].iter().map(|b| format!("{b:02x}")).collect()
}

/// One message of a conversation sent to a chat server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    pub role: Role,
    pub content: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    User,
    Assistant,
}

impl Role {
    /// The chat API's `role` field.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

/// Where a run's prompts come from, decided once for the run. A request's prompt is:
///
/// 1. its dataset row's text, when the row has text: encoded by the tokenizer for the engine,
///    sent as it is to a server (which tokenizes it);
/// 2. otherwise a synthetic prompt of its planned length: the workload's shared prefix (seeded
///    random ids) if any, then built-in text through the tokenizer ([`TEXT_PROMPTS`]) or, with
///    random ids asked for or no tokenizer, seeded random ids ([`random_prompt`]).
///
/// The tokenizer and the model's vocabulary: a tokenizer whose vocabulary is larger than the
/// model's (a small test model next to Qwen's tokenizer) can make ids the model does not have, so
/// the engine does not use it at all: the run is as without a tokenizer (random ids of the planned
/// lengths, a dataset row's text included). A server's vocabulary is not known, so its tokenizer
/// is always used; random ids for it are drawn below `--vocab-size`, else the tokenizer's
/// vocabulary, else Qwen's regular tokens, never among Qwen's special tokens.
pub struct PromptSource<'a> {
    spec: &'a WorkloadSpec,
    /// Encodes dataset rows (engine) and built-in text.
    tokenizer: Option<&'a Tokenizer>,
    /// Built-in text through `tokenizer` for synthetic prompts; else seeded random ids.
    builtin_text: bool,
    /// Random ids (shared prefixes included) are drawn below `min(vocab, FIRST_SPECIAL_TOKEN)`.
    vocab: usize,
    /// A dataset row's text is its request's prompt (a server: always; the engine: with a
    /// tokenizer, which encodes it).
    rows: bool,
}

impl<'a> PromptSource<'a> {
    /// Prompts for the engine, whose model has `vocab_size` ids; `random_ids`: seeded random ids
    /// instead of built-in text (a dataset row's text is still encoded).
    pub fn for_model(
        spec: &'a WorkloadSpec,
        tokenizer: Option<&'a Tokenizer>,
        random_ids: bool,
        vocab_size: usize,
    ) -> PromptSource<'a> {
        let tokenizer = tokenizer.filter(|tok| tok.vocab_size() <= vocab_size);
        PromptSource {
            spec,
            tokenizer,
            builtin_text: tokenizer.is_some() && !random_ids,
            vocab: vocab_size,
            rows: tokenizer.is_some(),
        }
    }

    /// Prompts for a server: random ids below `vocab_size` when given (`--vocab-size`). A caller
    /// whose API takes only text (chat) passes a tokenizer and `random_ids` false.
    pub fn for_server(
        spec: &'a WorkloadSpec,
        tokenizer: Option<&'a Tokenizer>,
        random_ids: bool,
        vocab_size: Option<usize>,
    ) -> PromptSource<'a> {
        let vocab = vocab_size.or(tokenizer.map(Tokenizer::vocab_size)).unwrap_or(FIRST_SPECIAL_TOKEN);
        PromptSource {
            spec,
            tokenizer,
            builtin_text: tokenizer.is_some() && !random_ids,
            vocab: vocab.min(FIRST_SPECIAL_TOKEN),
            rows: true,
        }
    }

    /// Request `p`'s prompt for the engine: token ids.
    pub fn ids(&self, p: &PlannedRequest) -> Result<Vec<u32>> {
        if let Some((blocks, size)) = self.blocks(p) {
            return Ok(blocks.iter().flat_map(|&id| self.block(id, size)).take(p.prompt_len).collect());
        }
        match (self.row(p), self.tokenizer) {
            (Some(row), Some(tok)) => tok.encode(row),
            (Some(_), None) => Err(Error::Prompt(format!("request {}: its dataset text needs a tokenizer", p.id))),
            (None, _) => self.synthetic(p),
        }
    }

    /// Request `p`'s prompt for a server: a dataset row's text as it is, built-in text (the
    /// synthetic ids decoded: the server tokenizes them again), or token ids.
    ///
    /// A trace row's blocks ([`crate::bench::traffic::dataset`]): as token ids (exact), or, where text is
    /// sent, each block's ids decoded on their own and the texts joined, so equal blocks are equal
    /// text; the server's tokenizer may then cut tokens across a block's edge, so a server's cache
    /// can match a little less than the trace implies.
    pub fn prompt(&self, p: &PlannedRequest) -> Result<Prompt> {
        if let Some(row) = self.row(p) {
            return Ok(Prompt::Text(row.to_string()));
        }
        if let Some((blocks, size)) = self.blocks(p) {
            let Some(tok) = self.text() else { return self.ids(p).map(Prompt::Ids) };
            let mut text = String::new();
            let mut left = p.prompt_len;
            for &id in blocks {
                let block = self.block(id, size.min(left));
                left -= block.len();
                text.push_str(&tok.decode(&block)?);
            }
            return Ok(Prompt::Text(text));
        }
        let ids = self.synthetic(p)?;
        match self.text() {
            Some(tok) => Ok(Prompt::Text(tok.decode(&ids)?)),
            None => Ok(Prompt::Ids(ids)),
        }
    }

    /// The thinking tags of the tokenizer the engine's prompts go through: only a tokenizer the
    /// model's vocabulary covers is used, so its ids are the model's
    /// ([`crate::bench::base::thinking`]).
    pub fn think_tags(&self) -> Option<crate::bench::base::thinking::ThinkTags> {
        self.tokenizer.and_then(crate::bench::base::thinking::ThinkTags::of)
    }

    /// For the run record: "dataset text" (the dataset's rows bring text), "text" (built-in
    /// texts) or "token ids" (seeded random ids).
    pub fn kind(&self) -> &'static str {
        let rows_with_text =
            self.rows && self.spec.dataset.as_ref().is_some_and(|d| d.items.iter().any(|i| i.prompt.is_some()));
        match (rows_with_text, self.builtin_text) {
            (true, _) => "dataset text",
            (false, true) => "text",
            (false, false) => "token ids",
        }
    }

    /// The text of `p`'s dataset row, when this source sends rows and the row has text.
    fn row(&self, p: &PlannedRequest) -> Option<&'a str> {
        if !self.rows {
            return None;
        }
        self.spec.dataset.as_ref()?.items.get(p.id as usize)?.prompt.as_deref()
    }

    /// `p`'s trace blocks and the tokens of one, when its row has `hash_ids`.
    fn blocks(&self, p: &PlannedRequest) -> Option<(&'a [u64], usize)> {
        let d = self.spec.dataset.as_ref()?;
        Some((d.items.get(p.id as usize)?.blocks.as_deref()?, d.block_tokens?))
    }

    /// The tokens of block `id`: `len` seeded random ids that depend on the block's id alone.
    fn block(&self, id: u64, len: usize) -> Vec<u32> {
        let bound = self.vocab.min(FIRST_SPECIAL_TOKEN);
        let mut rng = stream(self.spec.seed, STREAM_BLOCKS, id);
        (0..len).map(|_| rng.random_range(0..bound) as u32).collect()
    }

    /// The tokenizer of built-in texts, when they are wanted.
    fn text(&self) -> Option<&'a Tokenizer> {
        self.tokenizer.filter(|_| self.builtin_text)
    }

    /// `p`'s synthetic prompt: shared prefix, then built-in text or random ids.
    fn synthetic(&self, p: &PlannedRequest) -> Result<Vec<u32>> {
        with_shared_prefix(self.spec, p, self.vocab, &|len| match self.text() {
            Some(tok) => text_prompt(p.id, len, &|s| tok.encode(s)),
            None => Ok(random_prompt(self.spec.seed, p.id, len, self.vocab)),
        })
    }
}

/// `len` token ids drawn uniformly below `min(vocab, FIRST_SPECIAL_TOKEN)`, the same for the
/// same (seed, id). Panics if `vocab` is 0.
pub fn random_prompt(rng_seed: u64, id: u64, len: usize, vocab: usize) -> Vec<u32> {
    let bound = vocab.min(FIRST_SPECIAL_TOKEN);
    assert!(bound > 0, "random_prompt: empty vocabulary");
    let mut rng = stream(rng_seed, STREAM_PROMPTS, id);
    (0..len).map(|_| rng.random_range(0..bound) as u32).collect()
}

/// Request `p`'s prompt ids: with a shared prefix ([`crate::bench::traffic::workload::SharedPrefix`]),
/// its group's prefix (seeded random ids below `vocab`, the same for every request of the group)
/// followed by `own(prompt_len − prefix)`, its own tokens as the workload makes them; without,
/// `own(prompt_len)`.
fn with_shared_prefix(
    spec: &WorkloadSpec,
    p: &PlannedRequest,
    vocab: usize,
    own: &dyn Fn(usize) -> Result<Vec<u32>>,
) -> Result<Vec<u32>> {
    let Some(shared) = &spec.shared_prefix else { return own(p.prompt_len) };
    let bound = vocab.min(FIRST_SPECIAL_TOKEN);
    assert!(bound > 0, "with_shared_prefix: empty vocabulary");
    let mut rng = stream(spec.seed, STREAM_PREFIXES, shared.group(p.id));
    let mut ids: Vec<u32> = (0..shared.len).map(|_| rng.random_range(0..bound) as u32).collect();
    ids.extend(own(p.prompt_len.saturating_sub(shared.len))?);
    Ok(ids)
}

/// Built-in prompts of varied style, English and Chinese, for runs where real text matters
/// (tokenizer speed, realistic prefix statistics).
pub const TEXT_PROMPTS: &[&str] = &[
    "Explain, step by step, why the sky looks blue at noon and red at sunset.",
    "请用三句话介绍一下长城的历史，以及它今天对游客的意义。",
    "Write a short story about a lighthouse keeper who finds a message in a bottle.",
    "把下面这句话翻译成英文：今天的会议推迟到下午三点，请大家准时参加。",
    "List five practical tips for keeping a sourdough starter alive while travelling.",
    "In Rust, what is the difference between Box<dyn Trait> and impl Trait? Give an example.",
    "为一家街角的咖啡店写一段温暖的广告词，突出手冲咖啡和安静的氛围。",
    "Summarise the causes of the French Revolution for a fourteen-year-old student.",
    "一个水池有两个进水管，甲管单独注满需要六小时，乙管需要三小时，两管同时开需要多久？",
    "Compose a haiku about the chinese snow of winter, then explain its imagery.",
];

/// Prompt `id % TEXT_PROMPTS.len()`, tokenized and cut or repeated to exactly `len` ids.
fn text_prompt(id: u64, len: usize, encode: &dyn Fn(&str) -> Result<Vec<u32>>) -> Result<Vec<u32>> {
    let text = TEXT_PROMPTS[(id % TEXT_PROMPTS.len() as u64) as usize];
    let ids = encode(text)?;
    if ids.is_empty() {
        return Err(Error::Prompt(format!("{text:?} encodes to no tokens")));
    }
    Ok(ids.iter().copied().cycle().take(len).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::traffic::dataset::{DatasetFormat, DatasetItem, DatasetWorkload};
    use crate::bench::traffic::workload::{plan, Arrival, ArrivalSpan, LenRange, SharedPrefix};
    use std::sync::Arc;

    /// The words of `TEXT_PROMPTS[0]` as the Whitespace pre-tokenizer splits it, ids 1 onwards
    /// ("[UNK]" is 0).
    const WORDS: [&str; 15] =
        ["Explain", ",", "step", "by", "why", "the", "sky", "looks", "blue", "at", "noon", "and", "red", "sunset", "."];

    /// A word-level tokenizer of `WORDS` (vocabulary 16): one id per word or punctuation run.
    fn word_tokenizer() -> Tokenizer {
        let vocab: Vec<String> =
            std::iter::once("[UNK]").chain(WORDS).enumerate().map(|(i, w)| format!("{w:?}: {i}")).collect();
        let json = format!(
            r#"{{"version": "1.0", "truncation": null, "padding": null, "added_tokens": [], "normalizer": null,
                "pre_tokenizer": {{"type": "Whitespace"}}, "post_processor": null, "decoder": null,
                "model": {{"type": "WordLevel", "vocab": {{{}}}, "unk_token": "[UNK]"}}}}"#,
            vocab.join(", ")
        );
        Tokenizer::from_bytes(json.as_bytes()).unwrap()
    }

    /// Three sequential requests of `input_len` tokens, seed 42.
    fn spec(input_len: usize) -> WorkloadSpec {
        WorkloadSpec {
            cancel: None,
            arrival: Arrival::Sequential,
            rate: f64::INFINITY,
            burstiness: 1.0,
            concurrency: 1,
            span: ArrivalSpan::Drawn,
            num_requests: 3,
            input_len: LenRange { min: input_len, max: input_len },
            output_len: LenRange { min: 1, max: 1 },
            seed: 42,
            dataset: None,
            max_concurrency: None,
            saturation_stop: false,
            shared_prefix: None,
            conversations: None,
        }
    }

    /// `spec(6)` with a dataset: row 0 is text ("why is the sky blue", 5 tokens), rows 1 and 2
    /// give only lengths (6 and 7).
    fn with_dataset() -> WorkloadSpec {
        let item = |prompt: Option<&str>, prompt_len| DatasetItem {
            prompt: prompt.map(Arc::from),
            prompt_len,
            output_len: 1,
            arrival_s: None,
            conversation: None,
            blocks: None,
        };
        let items = vec![item(Some("why is the sky blue"), 5), item(None, 6), item(None, 7)];
        let dataset = DatasetWorkload {
            file: "rows.jsonl".into(),
            format: DatasetFormat::Jsonl,
            rows_read: 3,
            rows_kept: 3,
            filters: String::new(),
            lengths_measured_by: "words".into(),
            trace_speedup: None,
            whole_conversations: false,
            block_tokens: None,
            items: Arc::new(items),
        };
        WorkloadSpec { input_len: LenRange { min: 5, max: 7 }, dataset: Some(dataset), ..spec(6) }
    }

    #[test]
    fn random_ids_are_those_of_before() {
        // Printed by the prompt code before `PromptSource` (seed 42, 6 tokens, requests 0..3).
        let qwen: [[u32; 6]; 3] = [
            [128880, 28690, 128081, 32486, 20772, 109277],
            [150150, 11783, 18728, 140344, 134347, 91180],
            [128628, 69929, 21042, 125526, 44934, 72474],
        ];
        let small: [[u32; 6]; 3] =
            [[849, 189, 844, 214, 136, 720], [990, 77, 123, 925, 885, 601], [848, 461, 138, 827, 296, 477]];
        let spec = spec(6);
        let planned = plan(&spec).unwrap();
        let engine = PromptSource::for_model(&spec, None, false, 151_936);
        let tiny = PromptSource::for_model(&spec, None, false, 1000);
        // A server's ids are drawn below Qwen's special tokens, as the model's are.
        let server = PromptSource::for_server(&spec, None, false, None);
        for (p, (qwen, small)) in planned.iter().zip(qwen.iter().zip(&small)) {
            assert_eq!(engine.ids(p).unwrap(), qwen, "request {}", p.id);
            assert_eq!(tiny.ids(p).unwrap(), small, "request {}", p.id);
            assert_eq!(server.prompt(p).unwrap(), Prompt::Ids(qwen.to_vec()), "request {}", p.id);
        }
        assert_eq!((engine.kind(), server.kind()), ("token ids", "token ids"));
        // A tokenizer and random ids asked for: the same ids, the tokenizer unused.
        let tok = word_tokenizer();
        assert_eq!(PromptSource::for_model(&spec, Some(&tok), true, 1000).ids(&planned[1]).unwrap(), small[1]);
        let below_16 = PromptSource::for_server(&spec, Some(&tok), true, None);
        assert_eq!(below_16.prompt(&planned[0]).unwrap(), Prompt::Ids(random_prompt(42, 0, 6, 16)));
        let flag = PromptSource::for_server(&spec, Some(&tok), true, Some(1000));
        assert_eq!(flag.prompt(&planned[2]).unwrap(), Prompt::Ids(small[2].to_vec()), "--vocab-size wins");
    }

    #[test]
    fn shared_prefix_then_each_request_s_own_tokens() {
        // Printed by the prompt code before `PromptSource`: a 4-token prefix, 2 groups, vocab 1000.
        let before: [[u32; 6]; 3] =
            [[313, 558, 286, 361, 849, 189], [701, 814, 625, 389, 990, 77], [313, 558, 286, 361, 848, 461]];
        let spec = WorkloadSpec { shared_prefix: Some(SharedPrefix { len: 4, groups: 2 }), ..spec(6) };
        let planned = plan(&spec).unwrap();
        let ids = PromptSource::for_model(&spec, None, false, 1000);
        for (p, before) in planned.iter().zip(&before) {
            assert_eq!(ids.ids(p).unwrap(), before, "request {}", p.id);
        }
        // With built-in text: the prefix's ids, then the text's.
        let tok = word_tokenizer();
        let text = PromptSource::for_model(&spec, Some(&tok), false, 1000);
        assert_eq!(text.ids(&planned[0]).unwrap(), [313, 558, 286, 361, 1, 2]);
        let server = PromptSource::for_server(&spec, Some(&tok), false, Some(1000));
        let decoded = tok.decode(&[313, 558, 286, 361, 1, 2]).unwrap();
        assert_eq!(server.prompt(&planned[0]).unwrap(), Prompt::Text(decoded));
    }

    #[test]
    fn built_in_text_is_cut_to_the_planned_length() {
        let spec = spec(20);
        let planned = plan(&spec).unwrap();
        let tok = word_tokenizer();
        // "Explain, step by step, why the sky looks blue at noon and red at sunset." is 18 words
        // and marks; 20 tokens start it again.
        let sky = [1, 2, 3, 4, 3, 2, 5, 6, 7, 8, 9, 10, 11, 12, 13, 10, 14, 15, 1, 2];
        let engine = PromptSource::for_model(&spec, Some(&tok), false, 1000);
        assert_eq!(engine.ids(&planned[0]).unwrap(), sky);
        assert_eq!(engine.ids(&planned[1]).unwrap(), [0; 20], "request 1's prompt is Chinese: unknown words");
        assert_eq!(engine.kind(), "text");
        let server = PromptSource::for_server(&spec, Some(&tok), false, None);
        let text = tok.decode(&sky).unwrap();
        assert!(text.starts_with("Explain , step by step ,"), "{text}");
        assert_eq!(server.prompt(&planned[0]).unwrap(), Prompt::Text(text));
        assert_eq!(server.kind(), "text");
    }

    #[test]
    fn dataset_rows_go_through_the_tokenizer_or_as_they_are() {
        let spec = with_dataset();
        let planned = plan(&spec).unwrap();
        assert_eq!(planned.iter().map(|p| p.prompt_len).collect::<Vec<_>>(), [5, 6, 7]);
        let tok = word_tokenizer();
        // The engine: the row's words through the tokenizer ("is" is unknown), even with random
        // ids asked for; rows without text get random ids of their length.
        let engine = PromptSource::for_model(&spec, Some(&tok), true, 1000);
        assert_eq!(engine.ids(&planned[0]).unwrap(), [5, 0, 6, 7, 9]);
        assert_eq!(engine.ids(&planned[1]).unwrap(), random_prompt(42, 1, 6, 1000));
        assert_eq!(engine.kind(), "dataset text");
        // A server: the row's text as it is, with or without a tokenizer.
        let row = Prompt::Text("why is the sky blue".into());
        for server in [
            PromptSource::for_server(&spec, Some(&tok), false, None),
            PromptSource::for_server(&spec, None, false, None),
        ] {
            assert_eq!(server.prompt(&planned[0]).unwrap(), row);
            assert_eq!(server.kind(), "dataset text");
        }
        let ids = PromptSource::for_server(&spec, None, false, None).prompt(&planned[2]).unwrap();
        assert_eq!(ids, Prompt::Ids(random_prompt(42, 2, 7, FIRST_SPECIAL_TOKEN)));
        // The engine without a tokenizer: random ids of the row's measured length.
        let untokenized = PromptSource::for_model(&spec, None, false, 1000);
        assert_eq!(untokenized.ids(&planned[0]).unwrap(), random_prompt(42, 0, 5, 1000));
        assert_eq!(untokenized.kind(), "token ids");
    }

    #[test]
    fn a_tokenizer_larger_than_the_model_s_vocabulary_is_not_used() {
        let tok = word_tokenizer();
        assert_eq!(tok.vocab_size(), 16);
        let spec = spec(20);
        let planned = plan(&spec).unwrap();
        // 16 ids fit a vocabulary of 16; not one of 15, which gets random ids below 15.
        assert_eq!(PromptSource::for_model(&spec, Some(&tok), false, 16).kind(), "text");
        let small = PromptSource::for_model(&spec, Some(&tok), false, 15);
        assert_eq!(small.kind(), "token ids");
        assert_eq!(small.ids(&planned[0]).unwrap(), random_prompt(42, 0, 20, 15));
        // A dataset row's text too: random ids of its length.
        let spec = with_dataset();
        let planned = plan(&spec).unwrap();
        let rows = PromptSource::for_model(&spec, Some(&tok), false, 15);
        assert_eq!(rows.ids(&planned[0]).unwrap(), random_prompt(42, 0, 5, 15));
        assert_eq!(rows.kind(), "token ids");
        // A server's vocabulary is not known: its tokenizer is used whatever `--vocab-size` says.
        let server = PromptSource::for_server(&spec, Some(&tok), false, Some(15));
        assert_eq!(server.prompt(&planned[0]).unwrap(), Prompt::Text("why is the sky blue".into()));
    }

    #[test]
    fn prompts_are_seeded_in_range_and_exact_length() {
        let p = random_prompt(1, 3, 1000, 200_000);
        assert_eq!(p, random_prompt(1, 3, 1000, 200_000));
        assert_ne!(p, random_prompt(1, 4, 1000, 200_000));
        assert!(p.iter().all(|&t| (t as usize) < FIRST_SPECIAL_TOKEN));
        assert!(random_prompt(1, 3, 500, 10).iter().all(|&t| t < 10));
        assert!(TEXT_PROMPTS.len() >= 8);
        // A stand-in tokenizer: one id per character.
        let encode = |s: &str| Ok(s.chars().map(|c| c as u32).collect::<Vec<u32>>());
        let chinese: Vec<u32> = TEXT_PROMPTS[1].chars().map(|c| c as u32).collect();
        let long = text_prompt(1 + TEXT_PROMPTS.len() as u64, chinese.len() * 2 + 3, &encode);
        let long = long.unwrap();
        assert_eq!(long.len(), chinese.len() * 2 + 3);
        assert_eq!(&long[chinese.len()..chinese.len() * 2], &chinese[..]);
        assert_eq!(text_prompt(1, 4, &encode).unwrap(), chinese[..4].to_vec());
        assert!(text_prompt(0, 4, &|_| Ok(vec![])).is_err());
    }

    #[test]
    fn shared_prefixes_start_each_group_s_prompts() {
        use crate::bench::traffic::workload::{plan, Arrival, ArrivalSpan, LenRange, SharedPrefix};
        let spec = WorkloadSpec {
            cancel: None,
            arrival: Arrival::Sequential,
            rate: f64::INFINITY,
            burstiness: 1.0,
            concurrency: 1,
            span: ArrivalSpan::Drawn,
            num_requests: 6,
            input_len: LenRange { min: 20, max: 30 },
            output_len: LenRange { min: 1, max: 1 },
            seed: 5,
            dataset: None,
            max_concurrency: None,
            saturation_stop: false,
            shared_prefix: Some(SharedPrefix { len: 12, groups: 2 }),
            conversations: None,
        };
        let planned = plan(&spec).unwrap();
        let prompts: Vec<Vec<u32>> = planned
            .iter()
            .map(|p| with_shared_prefix(&spec, p, 1000, &|n| Ok(random_prompt(spec.seed, p.id, n, 1000))).unwrap())
            .collect();
        for (p, prompt) in planned.iter().zip(&prompts) {
            assert_eq!(prompt.len(), p.prompt_len, "the prefix counts in the input length");
            assert_eq!(prompt[..12], prompts[p.id as usize % 2][..12], "request {}", p.id);
        }
        assert_ne!(prompts[0][..12], prompts[1][..12], "two groups, two prefixes");
        assert_ne!(prompts[0][12..], prompts[2][12..18], "the rest is each request's own");
        let plain = WorkloadSpec { shared_prefix: None, ..spec.clone() };
        let own = with_shared_prefix(&plain, &planned[0], 1000, &|n| Ok(vec![3; n])).unwrap();
        assert_eq!(own, vec![3; planned[0].prompt_len]);
    }

    /// A trace's `hash_ids`: equal ids are equal tokens for the engine and for a server taking
    /// ids, and equal text for a server taking text; different ids differ.
    #[test]
    fn trace_blocks_repeat_exactly_where_their_ids_repeat() {
        use crate::bench::traffic::dataset::{parse, Attach};
        // Blocks of 4: request 1 shares request 0's first block; request 2 is block 2 then 3.
        let trace = "{\"timestamp\": 0, \"input_length\": 8, \"output_length\": 1, \"hash_ids\": [1, 2]}\n\
                     {\"timestamp\": 1, \"input_length\": 6, \"output_length\": 1, \"hash_ids\": [1, 3]}\n\
                     {\"timestamp\": 2, \"input_length\": 7, \"output_length\": 1, \"hash_ids\": [2, 3]}\n";
        let data = parse("t.jsonl", trace.as_bytes(), None).unwrap();
        let mut spec = WorkloadSpec { arrival: Arrival::Poisson, rate: 1.0, ..spec(6) };
        let attach = Attach {
            tokenizer: None,
            num_requests: None,
            trace_speedup: 1.0,
            block_tokens: 4,
            context: None,
            rates: 1,
        };
        spec.attach_dataset(&data, &attach).unwrap();
        let planned = plan(&spec).unwrap();
        let engine = PromptSource::for_model(&spec, None, false, 1000);
        let ids: Vec<Vec<u32>> = planned.iter().map(|p| engine.ids(p).unwrap()).collect();
        assert_eq!(ids.iter().map(Vec::len).collect::<Vec<_>>(), [8, 6, 7], "each prompt its trace length");
        assert_eq!(ids[0][..4], ids[1][..4], "block 1 twice");
        assert_eq!(ids[0][4..8], ids[2][..4], "block 2, second in one and first in the other");
        assert_eq!(ids[1][4..6], ids[2][4..6], "block 3, cut short in request 1");
        assert_ne!(ids[0][4..6], ids[1][4..6], "blocks 2 and 3 differ");
        let server = PromptSource::for_server(&spec, None, false, Some(1000));
        assert_eq!(server.prompt(&planned[2]).unwrap(), Prompt::Ids(ids[2].clone()), "ids as the engine's");
        // Text: each block decoded alone, so the shared block is the same text in both prompts.
        let tok = word_tokenizer();
        let chat = PromptSource::for_server(&spec, Some(&tok), false, Some(16));
        let text = |p: &PlannedRequest| match chat.prompt(p).unwrap() {
            Prompt::Text(text) => text,
            other => panic!("{other:?}"),
        };
        let (a, b) = (text(&planned[0]), text(&planned[1]));
        let block_1 = tok.decode(&chat.ids(&planned[0]).unwrap()[..4]).unwrap();
        assert!(!block_1.is_empty() && a.starts_with(&block_1) && b.starts_with(&block_1), "{a:?} {b:?} {block_1:?}");
        assert_ne!(a, b);
    }
}
