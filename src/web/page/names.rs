//! A run's name, built from its parts in the page's language whenever it is shown: the model or
//! server, the load, the request count and lengths, the engine's batch ("embedded · poisson 4
//! req/s · 32 × 128→64 · batch 16"; "embedded · 泊松 4 req/s · 32 × 128→64 · 批次 16").

use super::i18n::Text;
use super::sweep::rate_text;
use crate::bench::{self, WorkloadSpec};

/// The name of a run of `s` at its rate on `model`; `batch` is the engine's (none for a server,
/// whose scheduler is its own).
pub fn run_name(s: &WorkloadSpec, model: &str, batch: Option<usize>, t: &Text) -> String {
    named_with_rates(s, &rate_text(s.rate), model, batch, t)
}

/// [`run_name`] with the rates spelled by the caller (a sweep's "1, 2, 4", a search's "max").
pub fn named_with_rates(s: &WorkloadSpec, rates: &str, model: &str, batch: Option<usize>, t: &Text) -> String {
    let arrival = |name: &str| format!("{name} {rates} req/s");
    let load = match s.arrival {
        bench::Arrival::Sequential => t.name_sequential.to_string(),
        bench::Arrival::Concurrency => t.name_concurrency.replace("{n}", &s.concurrency.to_string()),
        bench::Arrival::Poisson => arrival(t.name_poisson),
        bench::Arrival::Gamma => arrival(t.name_gamma),
        bench::Arrival::Constant => arrival(t.name_constant),
        bench::Arrival::Trace => arrival(t.name_trace),
    };
    let len = |r: bench::LenRange| if r.min == r.max { r.min.to_string() } else { format!("{}:{}", r.min, r.max) };
    let batch = batch.map(|b| format!(" · {}", t.name_batch.replace("{b}", &b.to_string()))).unwrap_or_default();
    format!("{model} · {load} · {} × {}→{}{batch}", s.num_requests, len(s.input_len), len(s.output_len))
}
