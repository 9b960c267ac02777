//! A picked dataset made into a run's requests, in the engine worker: at run time the rows become
//! the workload, their lengths measured with the run's tokenizer, as the CLI's `bench --dataset`.
//! The picker is the page's (`web::page::dataset`); the choice crosses as a
//! [`DatasetChoice`].

use crate::bench::dataset::{DatasetFormat, Select};
use crate::bench::{check_context, Arrival, LenRange};
use crate::limits;
use crate::model::Tokenizer;
use crate::web::protocol::{DatasetChoice, RunRequest};
use crate::{Error, Result};

/// `config` with the dataset's requests: at most the settings' number of requests, lengths
/// measured by `tokenizer` (its name goes into the record), a trace's recorded arrivals (scaled by
/// the speedup). `max_position`: the model's context, when known.
pub fn attach(
    choice: &DatasetChoice,
    config: &mut RunRequest,
    tokenizer: Option<(&Tokenizer, &str)>,
    max_position: Option<usize>,
) -> Result<()> {
    let DatasetChoice { data, speedup } = choice;
    let count = |text: &str| -> Result<usize> {
        let (tok, _) = tokenizer.ok_or_else(|| Error::Invalid("no tokenizer is loaded".into()))?;
        Ok(tok.encode(text)?.len())
    };
    let spec = &mut config.spec;
    let selected = data.select(&Select {
        count_tokens: tokenizer.is_some().then_some(&count as &dyn Fn(&str) -> Result<usize>),
        tokenizer: tokenizer.map_or("", |(_, name)| name),
        num_requests: Some(spec.num_requests),
        seed: spec.seed,
        trace_speedup: *speedup,
        conversations: spec.dataset_conversation_bound(max_position),
    })?;
    if data.format == DatasetFormat::Trace {
        if config.rates.len() > 1 || !matches!(spec.arrival, Arrival::Poisson | Arrival::Trace) {
            return Err(Error::Invalid(
                "a trace replays its recorded times: choose Poisson arrivals and one rate (the speedup scales them)"
                    .into(),
            ));
        }
        spec.arrival = Arrival::Trace;
    }
    let ((input_min, input_max), (output_min, output_max)) = selected.length_ranges();
    spec.input_len = LenRange { min: input_min, max: input_max };
    spec.output_len = LenRange { min: output_min, max: output_max };
    spec.num_requests = selected.items.len();
    if let Some(c) = spec.conversations.as_mut().filter(|c| c.from_dataset) {
        c.turns = selected.conversation_sizes();
    }
    spec.dataset = Some(selected);
    if let Some(max) = max_position {
        check_context(spec.input_len, spec.output_len, max)
            .map_err(|e| Error::Invalid(format!("{}: {e}", limits::printable(&data.file))))?;
    }
    config.policy.check_request(input_max, output_max, config.max_batched_tokens)?;
    spec.validate()?;
    Ok(())
}
