//! Speculative decoding: a draft of up to K tokens, verified by the model in the sequence's next
//! step. The draft comes from prompt lookup (here: copied from earlier in the sequence, prompt +
//! output so far; pure CPU) or from a smaller draft model (`super::draft`).
//!
//! The rule: take the last n tokens of the sequence, for n = [`NGRAM_MAX`] down to [`NGRAM_MIN`];
//! the first n with an earlier occurrence wins (longer context, better guess). Among that n's
//! occurrences the most recent one is used (recent text is the likeliest to repeat next), and the
//! draft is the K tokens that followed it, copied as LZ77 copies: when the copy reaches the end of
//! the sequence it goes on with the draft itself, so a text repeating with period p (the latest
//! occurrence is then p tokens back) is continued for all K tokens. No occurrence at any n: no
//! draft (plain decode).

/// The longest suffix matched.
pub const NGRAM_MAX: usize = 3;
/// The shortest suffix matched (a single token).
pub const NGRAM_MIN: usize = 1;
/// The largest K accepted (each draft token is a logit row of the step).
pub const MAX_DRAFT: usize = 16;

/// How (and whether) the engine drafts tokens.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Speculation {
    #[default]
    Off,
    /// Prompt lookup: drafts of up to `k` tokens from n-gram matches in the sequence itself.
    Ngram { k: usize },
    /// A draft model proposes `k` tokens greedily (`super::draft`). `model` names it as the run
    /// record names the target: a folder, or `synthetic:NAME`.
    Draft { k: usize, model: String },
}

impl Speculation {
    /// Draft tokens per sequence per step at most (0: off).
    pub fn max_draft(&self) -> usize {
        match *self {
            Speculation::Off => 0,
            Speculation::Ngram { k } | Speculation::Draft { k, .. } => k,
        }
    }
}

impl std::str::FromStr for Speculation {
    type Err = String;

    /// `ngram:K`, `draft:MODEL:K` (1 ≤ K ≤ [`MAX_DRAFT`]; MODEL a folder or `synthetic:NAME`, K
    /// after its last colon) or `off`; the error is one line naming the forms.
    fn from_str(text: &str) -> std::result::Result<Speculation, String> {
        let bad = || format!("expected ngram:K or draft:MODEL:K with K from 1 to {MAX_DRAFT}, or off");
        let k = |digits: &str| match digits.parse::<usize>() {
            Ok(k) if (1..=MAX_DRAFT).contains(&k) => Ok(k),
            _ => Err(bad()),
        };
        if text == "off" {
            return Ok(Speculation::Off);
        }
        if let Some(rest) = text.strip_prefix("draft:") {
            let (model, digits) = rest.rsplit_once(':').ok_or_else(bad)?;
            if model.is_empty() {
                return Err(bad());
            }
            return Ok(Speculation::Draft { k: k(digits)?, model: model.to_string() });
        }
        Ok(Speculation::Ngram { k: k(text.strip_prefix("ngram:").ok_or_else(bad)?)? })
    }
}

/// The draft for `tokens` (prompt + output so far): the `k` tokens that followed the most recent
/// earlier occurrence of the longest matching suffix (see the module comment), or none.
pub fn ngram_draft(tokens: &[u32], k: usize) -> Vec<u32> {
    if k == 0 {
        return Vec::new();
    }
    let len = tokens.len();
    for n in (NGRAM_MIN..=NGRAM_MAX).rev() {
        if len <= n {
            continue;
        }
        let suffix = &tokens[len - n..];
        // Occurrences start at `start < len - n` (not the suffix itself); latest first.
        let found = (0..len - n).rev().find(|&start| &tokens[start..start + n] == suffix);
        if let Some(start) = found {
            let from = start + n; // < len
            let mut draft = Vec::with_capacity(k);
            for j in from..from + k {
                draft.push(if j < len { tokens[j] } else { draft[j - len] });
            }
            return draft;
        }
    }
    Vec::new()
}

/// How many draft tokens the model confirmed: the longest prefix of `draft` equal to the model's
/// own choices `chosen` (`chosen[i]` is the model's token after draft position i − 1, so
/// `chosen.len() == draft.len() + 1`).
pub fn accepted_prefix(draft: &[u32], chosen: &[u32]) -> usize {
    draft.iter().zip(chosen).take_while(|(d, c)| d == c).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_suffix_and_its_latest_occurrence_win() {
        // Suffix [2, 3] occurs at 1 (followed by 9) and at 5 (followed by 4, 5); the trigram
        // [1, 2, 3] occurs only at 0, so n = 3 wins with what followed it there.
        let t = [1, 2, 3, 9, 7, 2, 3, 4, 5, 1, 2, 3];
        assert_eq!(ngram_draft(&t, 2), vec![9, 7]);
        // Without the trigram, the latest bigram occurrence.
        let t = [8, 2, 3, 9, 7, 2, 3, 4, 5, 1, 2, 3];
        assert_eq!(ngram_draft(&t, 3), vec![4, 5, 1]);
        // Past the end of the sequence the copy continues with itself (period 2 here).
        let t = [5, 6, 5];
        assert_eq!(ngram_draft(&t, 4), vec![6, 5, 6, 5]);
        assert_eq!(ngram_draft(&[4, 7, 7, 7], 3), vec![7, 7, 7]);
        // No earlier occurrence of even the last token: nothing.
        assert_eq!(ngram_draft(&[1, 2, 3], 4), Vec::<u32>::new());
        assert_eq!(ngram_draft(&[1], 4), Vec::<u32>::new());
        assert_eq!(ngram_draft(&[1, 1, 1], 0), Vec::<u32>::new());
    }

    #[test]
    fn acceptance_is_the_matching_prefix() {
        assert_eq!(accepted_prefix(&[4, 5, 6], &[4, 5, 7, 1]), 2);
        assert_eq!(accepted_prefix(&[4, 5, 6], &[3, 5, 6, 1]), 0);
        assert_eq!(accepted_prefix(&[4, 5, 6], &[4, 5, 6, 1]), 3);
    }

    #[test]
    fn the_flag_parses_or_names_the_range() {
        assert_eq!("ngram:4".parse::<Speculation>().unwrap(), Speculation::Ngram { k: 4 });
        assert_eq!("off".parse::<Speculation>().unwrap(), Speculation::Off);
        let draft = |k, model: &str| Speculation::Draft { k, model: model.to_string() };
        assert_eq!("draft:/m/Qwen3-0.6B:4".parse::<Speculation>().unwrap(), draft(4, "/m/Qwen3-0.6B"));
        assert_eq!("draft:synthetic:qwen3-0.6b:16".parse::<Speculation>().unwrap(), draft(16, "synthetic:qwen3-0.6b"));
        assert_eq!(draft(3, "m").max_draft(), 3);
        for bad in
            ["ngram:0", "ngram:17", "ngram:", "ngram:x", "draft", "4", "draft:4", "draft::4", "draft:m:0", "draft:m:x"]
        {
            let e = bad.parse::<Speculation>().unwrap_err();
            assert!(e.contains("ngram:K or draft:MODEL:K") && !e.contains('\n'), "{bad}: {e}");
        }
    }
}
