//! `compare`'s quality flags and passes (`tokenmeter::bench::quality`): after the timed runs, each
//! setting against the reference where they compute differently (or as asked), or every setting
//! against the CPU oracle.

use clap::Args;
use tokenmeter::bench::quality::{self, computes_differently, Gate, Numerics, Quality, QualityInputs};
use tokenmeter::bench::{PromptSource, WorkloadSpec};
use tokenmeter::engine::{Engine, LogitSource};
use tokenmeter::gpu::WeightFormat;
use tokenmeter::limits::parse_count;
use tokenmeter::model::reference::CpuModel;
use tokenmeter::model::Tokenizer;
use tokenmeter::Result;

use super::Opened;

/// The quality pass: after the timed runs, each setting against the reference over the same
/// tokens. Unasked, it runs for settings that compute differently.
#[derive(Args)]
pub(crate) struct QualityArgs {
    /// Run the quality pass for every setting, even those that compute as the reference does.
    #[arg(long, conflicts_with = "no_quality")]
    quality: bool,
    /// No quality pass, even where the settings compute differently.
    #[arg(long)]
    pub(crate) no_quality: bool,
    /// The reference of the quality pass is the CPU oracle (f32 loops, on the reference setting's
    /// weights), for models it can hold; every setting is measured against it.
    #[arg(long, conflicts_with = "no_quality")]
    pub(crate) quality_oracle: bool,
    /// Prompts of the workload the pass continues (its first N).
    #[arg(long, default_value_t = quality::DEFAULT_PROMPTS, allow_negative_numbers = true, value_parser = |s: &str| parse_count(s, 1, 64))]
    quality_prompts: usize,
    /// Greedy tokens per prompt: the reference's continuation (teacher-forced) and the length of the
    /// free-running outputs.
    #[arg(long, default_value_t = quality::DEFAULT_NEW_TOKENS, allow_negative_numbers = true, value_parser = |s: &str| parse_count(s, 1, 1024))]
    quality_tokens: usize,
    /// Gate: exit with code 3 when a setting's top-1 agreement with the reference is below this.
    #[arg(long, value_name = "SHARE", conflicts_with = "no_quality", allow_negative_numbers = true,
          value_parser = |s: &str| tokenmeter::limits::parse_number(s, 0.0, 1.0))]
    min_top1: Option<f64>,
    /// Gate: exit with code 3 when a setting's mean KL(reference ‖ setting), in nats, is above this.
    #[arg(long, value_name = "NATS", conflicts_with = "no_quality", allow_negative_numbers = true,
          value_parser = |s: &str| tokenmeter::limits::parse_number(s, 0.0, 1e6))]
    max_kl: Option<f64>,
}

impl QualityArgs {
    pub(crate) fn gate(&self) -> Gate {
        Gate { min_top1: self.min_top1, max_kl: self.max_kl }
    }

    /// Asked for every setting: by --quality, the oracle or a gate.
    pub(crate) fn asked(&self) -> bool {
        self.quality || self.quality_oracle || self.gate().is_set()
    }
}

/// The settings after their timed runs: names, models (as the run record names them) and engines.
pub(crate) struct Settings<'a> {
    pub(crate) names: Vec<&'a str>,
    pub(crate) models: Vec<Option<String>>,
    pub(crate) engines: &'a mut [Engine],
    pub(crate) reference: usize,
}

/// What the reference setting's prompts are made with: the pass continues the same prompts.
pub(crate) struct PromptsOf<'a> {
    pub(crate) spec: &'a WorkloadSpec,
    pub(crate) prompts: &'a PromptSource<'a>,
    pub(crate) tokenizer: Option<&'a Tokenizer>,
    pub(crate) vocab: usize,
}

/// The CPU oracle of the reference setting's model, on its weight format.
pub(crate) struct Oracle {
    name: String,
    model: CpuModel,
}

impl Oracle {
    /// `loaded`'s model on `weights`, where the oracle can hold it (refused before any run).
    pub(crate) async fn load(loaded: &Opened, weights: WeightFormat) -> Result<Oracle> {
        let start = std::time::Instant::now();
        let model = match loaded {
            Opened::Disk(c, _) => {
                CpuModel::check_fits(&c.config)?;
                CpuModel::load_as(c, weights).await?
            }
            Opened::Synthetic(s) => {
                CpuModel::check_fits(&s.config)?;
                CpuModel::load_as(s, weights).await?
            }
        };
        eprintln!("CPU oracle loaded ({weights} weights) in {:.2} s", start.elapsed().as_secs_f64());
        Ok(Oracle { name: format!("CPU oracle ({weights})"), model })
    }
}

/// The passes `args` and the settings call for, each timed on stderr.
pub(crate) async fn passes(
    args: &QualityArgs,
    settings: Settings<'_>,
    made_with: PromptsOf<'_>,
    mut oracle: Option<Oracle>,
) -> Result<Vec<Quality>> {
    let Settings { names, models, engines, reference } = settings;
    // What each setting computes with decides which get a pass unasked.
    let numerics: Vec<Numerics> =
        engines.iter().zip(&models).map(|(engine, model)| Numerics::of(model.clone(), engine)).collect();
    let vocab = engines[reference].vocab_size();
    let tested: Vec<usize> = (0..engines.len())
        .filter(|&k| {
            if oracle.is_some() {
                return true;
            }
            if args.no_quality || k == reference {
                return false;
            }
            if args.asked() {
                return true;
            }
            let differs = computes_differently(&numerics[reference], &numerics[k]);
            if differs && engines[k].vocab_size() != vocab {
                eprintln!("note: no quality pass for {}: its vocabulary is not {}'s", names[k], names[reference]);
                return false;
            }
            differs
        })
        .collect();
    if tested.is_empty() {
        return Ok(Vec::new());
    }
    let inputs = inputs(args, &made_with, engines[reference].model.cfg.max_position_embeddings)?;
    let mut passes = Vec::new();
    for k in tested {
        let start = std::time::Instant::now();
        let pass = match oracle.as_mut() {
            Some(o) => quality::measure((&o.name, names[k]), &mut o.model, &mut engines[k], &inputs).await?,
            None => {
                let (reference_engine, test_engine) = two_of(engines, reference, k);
                quality::measure((names[reference], names[k]), reference_engine, test_engine, &inputs).await?
            }
        };
        eprintln!("quality pass: {} against {} in {:.2} s", pass.test, pass.reference, start.elapsed().as_secs_f64());
        passes.push(pass);
    }
    Ok(passes)
}

/// The workload's first prompts (as the timed runs sent them) and the passage, through the
/// reference's tokenizer, within its context of `max_positions`.
fn inputs(args: &QualityArgs, made_with: &PromptsOf<'_>, max_positions: usize) -> Result<QualityInputs> {
    let sizes = (args.quality_prompts, args.quality_tokens);
    QualityInputs::for_workload(
        made_with.spec,
        made_with.prompts,
        made_with.tokenizer,
        made_with.vocab,
        max_positions,
        sizes,
    )
}

/// `k`'s and `j`'s items of `items` at once (`k != j`).
fn two_of<T>(items: &mut [T], k: usize, j: usize) -> (&mut T, &mut T) {
    assert_ne!(k, j, "two distinct settings");
    if k < j {
        let (low, high) = items.split_at_mut(j);
        (&mut low[k], &mut high[0])
    } else {
        let (low, high) = items.split_at_mut(k);
        (&mut high[0], &mut low[j])
    }
}
