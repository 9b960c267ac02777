//! Prompt contents: seeded random token ids (for throughput, independent of any text), or
//! built-in English and Chinese text cut or repeated to the planned length.

use rand::Rng;

use crate::bench::workload::{stream, PlannedRequest, WorkloadSpec, STREAM_PREFIXES, STREAM_PROMPTS};
use crate::error::{Error, Result};

/// Token ids at or above this are Qwen's special tokens (`<|endoftext|>` = 151643 onwards).
pub const FIRST_SPECIAL_TOKEN: usize = 151_643;

/// `len` token ids drawn uniformly below `min(vocab, FIRST_SPECIAL_TOKEN)`, the same for the
/// same (seed, id). Panics if `vocab` is 0.
pub fn random_prompt(rng_seed: u64, id: u64, len: usize, vocab: usize) -> Vec<u32> {
    let bound = vocab.min(FIRST_SPECIAL_TOKEN);
    assert!(bound > 0, "random_prompt: empty vocabulary");
    let mut rng = stream(rng_seed, STREAM_PROMPTS, id);
    (0..len).map(|_| rng.random_range(0..bound) as u32).collect()
}

/// Request `p`'s prompt ids: with a shared prefix ([`crate::bench::workload::SharedPrefix`]),
/// its group's prefix (seeded random ids below `vocab`, the same for every request of the group)
/// followed by `own(prompt_len − prefix)`, its own tokens as the workload makes them; without,
/// `own(prompt_len)`.
pub fn with_shared_prefix(
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
pub fn text_prompt(id: u64, len: usize, encode: &dyn Fn(&str) -> Result<Vec<u32>>) -> Result<Vec<u32>> {
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
        use crate::bench::workload::{plan, Arrival, ArrivalSpan, LenRange, SharedPrefix};
        let spec = WorkloadSpec {
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
}
