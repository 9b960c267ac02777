//! The scheduling-policy switches of `generate` and `bench` (docs/ARCHITECTURE.md, "Scheduler rules").

use clap::Args;
use tokenmeter::engine::{Order, Policy};
use tokenmeter::limits::{self, parse_count};
use tokenmeter::Result;

#[derive(Args, Clone)]
pub struct PolicyArgs {
    /// Who gets a step's token budget first: fcfs (running sequences in admission order, then the
    /// queue), prefill-first (prefills and admissions, then decodes), decode-first (decodes, then
    /// prefills, then admissions).
    #[arg(long, default_value = "fcfs")]
    pub policy: String,
    /// Run each prefill whole in one step (a prompt waits until a step has room for all of it).
    #[arg(long, conflicts_with = "prefill_chunk")]
    pub no_chunked_prefill: bool,
    /// At most this many prefill tokens of one sequence per step (default: what the step's
    /// --max-batched-tokens leaves).
    #[arg(long, allow_negative_numbers = true, value_parser = |s: &str| parse_count(s, 1, limits::MAX_BATCHED_TOKENS))]
    pub prefill_chunk: Option<usize>,
}

impl PolicyArgs {
    pub fn policy(&self) -> Result<Policy> {
        Ok(Policy {
            order: self.policy.parse::<Order>()?,
            chunked_prefill: !self.no_chunked_prefill,
            prefill_chunk: self.prefill_chunk,
        })
    }
}
