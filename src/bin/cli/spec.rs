//! Engine features that change how tokens are computed, not which: speculative decoding and
//! prefix caching.

use clap::Args;
use tokenmeter::engine::{EngineOptions, Speculation};

#[derive(Args, Clone, Debug)]
pub struct SpecArgs {
    /// Speculative decoding for greedy requests: ngram:K drafts up to K tokens (1-16) by prompt
    /// lookup (the last 3, 2 or 1 tokens matched earlier in the prompt and output) and verifies
    /// them in one step; sampled requests decode plainly. "off" (default) disables it.
    #[arg(long, default_value = "off", value_parser = |s: &str| s.parse::<Speculation>())]
    pub speculate: Speculation,
    /// Prefix caching: requests whose prompts start with the same tokens share those full KV
    /// blocks and skip their prefill (off by default).
    #[arg(long)]
    pub prefix_cache: bool,
}

impl SpecArgs {
    pub fn apply(&self, options: &mut EngineOptions) {
        options.speculation = self.speculate;
        options.prefix_cache = self.prefix_cache;
    }
}
