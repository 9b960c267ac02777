//! Engine features that change how tokens are computed, not which: speculative decoding (by
//! prompt lookup, or with a draft model loaded next to the target) and prefix caching.

use clap::Args;
use tokenmeter::engine::{DraftModel, Engine, EngineOptions, ForwardPass, Speculation};
use tokenmeter::model::checkpoint::Checkpoint;
use tokenmeter::model::source::{DirStore, DiskFile};
use tokenmeter::model::synthetic::SyntheticModel;
use tokenmeter::model::{ModelStore, Qwen3Config, TensorProvider, Tokenizer};
use tokenmeter::{Error, Result};

#[derive(Args, Clone, Debug)]
pub struct SpecArgs {
    /// Speculative decoding for greedy requests: ngram:K drafts up to K tokens (1-16) by prompt
    /// lookup (the last 3, 2 or 1 tokens matched earlier in the prompt and output);
    /// draft:DIR:K has a smaller Qwen3 with the same vocabulary (a model folder, or
    /// synthetic:NAME) propose K tokens greedily. Either is verified in one step; sampled
    /// requests decode plainly. "off" (default) disables it.
    #[arg(long, default_value = "off", value_parser = |s: &str| s.parse::<Speculation>())]
    pub speculate: Speculation,
    /// Prefix caching: requests whose prompts start with the same tokens share those full KV
    /// blocks and skip their prefill (off by default).
    #[arg(long)]
    pub prefix_cache: bool,
}

impl SpecArgs {
    pub fn apply(&self, options: &mut EngineOptions) {
        options.speculation = self.speculate.clone();
        options.prefix_cache = self.prefix_cache;
    }

    /// The draft model `--speculate draft:…` names, opened and checked against the target's
    /// config and tokenizer before any weight is uploaded; `None` without one.
    pub async fn open_draft(&self, target: &Qwen3Config, tokenizer: Option<&Tokenizer>) -> Result<Option<Draft>> {
        let Speculation::Draft { k, model: name } = &self.speculate else { return Ok(None) };
        let source = match name.strip_prefix("synthetic:") {
            Some(shape) => {
                let cfg = Qwen3Config::preset(shape).ok_or_else(|| {
                    Error::Invalid(format!(
                        "--speculate draft:{name}: unknown synthetic model {shape:?} (one of {})",
                        Qwen3Config::PRESETS.join(", ")
                    ))
                })?;
                Source::Synthetic(SyntheticModel::new(cfg, 0))
            }
            None => {
                let store = DirStore::new(name)?;
                let checkpoint = Checkpoint::open(&store).await?;
                let bytes = store.read_all("tokenizer.json", tokenmeter::limits::TOKENIZER_JSON_MAX_BYTES).await?;
                if let (Some(bytes), Some(target_tok)) = (bytes, tokenizer) {
                    let draft_tok = Tokenizer::from_bytes(&bytes)?;
                    if draft_tok.vocab_size() != target_tok.vocab_size()
                        || draft_tok.encode(PROBE)? != target_tok.encode(PROBE)?
                    {
                        return Err(Error::Invalid(format!(
                            "--speculate draft:{name}: its tokenizer.json differs from the target's (vocabulary {} vs \
                             {} tokens, or other ids for the same text); the draft must share the target's tokenizer",
                            draft_tok.vocab_size(),
                            target_tok.vocab_size()
                        )));
                    }
                }
                Source::Disk(Box::new(checkpoint))
            }
        };
        let draft_cfg = match &source {
            Source::Disk(c) => c.config(),
            Source::Synthetic(s) => s.config(),
        };
        if draft_cfg.vocab_size != target.vocab_size {
            return Err(Error::Invalid(format!(
                "--speculate draft:{name}: vocab_size {} differs from the target's {}; the draft must share the \
                 target's vocabulary",
                draft_cfg.vocab_size, target.vocab_size
            )));
        }
        Ok(Some(Draft { name: name.clone(), k: *k, source }))
    }

    /// The engine over `target` (loaded with `options`, these args applied), with `draft` (from
    /// [`SpecArgs::open_draft`]) loaded on the same GPU.
    pub async fn engine(&self, target: ForwardPass, draft: Option<Draft>, options: &EngineOptions) -> Result<Engine> {
        let draft = match draft {
            Some(d) => Some(d.load(&target, options).await?),
            None => None,
        };
        let mut engine = Engine::new(target);
        if let Some(draft) = draft {
            engine.set_draft(draft)?;
        }
        Ok(engine)
    }
}

/// Text whose ids two tokenizers must agree on to share token ids (words, digits, CJK, code,
/// Qwen3's chat markers).
const PROBE: &str = "<|im_start|>user\nWhy is the sky blue? 天空为什么是蓝色的 fn main() { x += 42; }<|im_end|>";

/// A draft model, opened and checked, its weights not yet uploaded.
pub struct Draft {
    name: String,
    k: usize,
    source: Source,
}

enum Source {
    Disk(Box<Checkpoint<DiskFile>>),
    /// Random weights with the seed the target's synthetic weights use, so that a shape drafts
    /// for itself exactly.
    Synthetic(SyntheticModel),
}

impl Draft {
    /// Uploads the draft next to `target`, with the target's engine options (speculation off: one
    /// logit row per sequence). Running out of GPU memory is reported as the pair not fitting.
    async fn load(self, target: &ForwardPass, options: &EngineOptions) -> Result<DraftModel> {
        let options = EngineOptions { speculation: Speculation::Off, ..options.clone() };
        let start = std::time::Instant::now();
        let gpu = target.gpu.clone();
        let loaded = match &self.source {
            Source::Disk(c) => ForwardPass::load(gpu, c.as_ref(), &options, &mut |_, _| {}).await,
            Source::Synthetic(s) => ForwardPass::load(gpu, s, &options, &mut |_, _| {}).await,
        };
        let model = loaded.map_err(|e| match e {
            Error::AdapterLimit(why) => Error::AdapterLimit(format!(
                "the draft model {} does not fit on {} next to the target ({:.1} MB of weights): {why}",
                self.name,
                target.gpu.adapter.name,
                target.weights.bytes as f64 / 1e6
            )),
            e => e,
        })?;
        eprintln!(
            "loaded the draft model {}: {:.1} MB of weights in {:.2} s, {} KV blocks",
            self.name,
            model.weights.bytes as f64 / 1e6,
            start.elapsed().as_secs_f64(),
            model.limits.num_blocks
        );
        DraftModel::new(model, &target.cfg, self.k)
    }
}
