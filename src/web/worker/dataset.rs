//! A picked dataset made into a run's requests, in the engine worker: at run time the rows become
//! the workload, their lengths measured with the run's tokenizer, as the CLI's `bench --dataset`.
//! The picker is the page's (`web::page::dataset`); the choice crosses as a
//! [`DatasetChoice`].

use crate::bench::traffic::dataset::Attach;
use crate::model::Tokenizer;
use crate::web::protocol::{DatasetChoice, RunRequest};
use crate::Result;

/// `config` with the dataset's requests: at most the settings' number of requests, lengths
/// measured by `tokenizer` (its name goes into the record), a trace's recorded arrivals (scaled by
/// the speedup). `max_position`: the model's context, when known.
pub fn attach(
    choice: &DatasetChoice,
    config: &mut RunRequest,
    tokenizer: Option<(&Tokenizer, &str)>,
    max_position: Option<usize>,
) -> Result<()> {
    let DatasetChoice { data, speedup, block_tokens } = choice;
    let rates = config.rates.len();
    let spec = &mut config.spec;
    spec.attach_dataset(
        data,
        &Attach {
            tokenizer,
            num_requests: Some(spec.num_requests),
            trace_speedup: *speedup,
            block_tokens: *block_tokens,
            context: max_position,
            rates,
        },
    )?;
    spec.validate()?;
    Ok(())
}
