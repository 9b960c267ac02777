//! `compare`'s quality flags and passes (`tokenmeter::bench::verdict::quality`): after the timed runs, each
//! setting against the reference where they compute differently (or as asked), or every setting
//! against the CPU oracle; between servers, each against the reference's deployment from their
//! greedy outputs and top-k log-probabilities.

use clap::Args;
use tokenmeter::bench::verdict::quality::{self, computes_differently, Gate, Numerics, Quality, QualityInputs};
use tokenmeter::bench::{self, PromptSource, WorkloadSpec};
use tokenmeter::engine::{Engine, LogitSource};
use tokenmeter::gpu::WeightFormat;
use tokenmeter::limits::parse_count;
use tokenmeter::model::reference::CpuModel;
use tokenmeter::model::Tokenizer;
use tokenmeter::remote::native::Client;
use tokenmeter::remote::Prompt;
use tokenmeter::{Error, Result};

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
    /// Servers only: the log-probabilities asked for at each position, the likeliest K
    /// (`logprobs` / `top_logprobs`; default 20, OpenAI's chat limit; its legacy completions take 5).
    #[arg(long, value_name = "K", allow_negative_numbers = true,
          value_parser = |s: &str| parse_count(s, 1, tokenmeter::remote::logprobs::MAX_TOP_K))]
    pub(crate) quality_top_k: Option<usize>,
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

/// Top-k asked of a server when --quality-top-k is not given.
const SERVER_TOP_K: usize = 20;

/// A server setting after its timed runs: its name, client and prompts, and its requests' timeout.
pub(crate) struct Server<'a> {
    pub(crate) name: &'a str,
    pub(crate) client: &'a Client,
    pub(crate) prompts: &'a PromptSource<'a>,
    pub(crate) timeout_s: f64,
}

/// The passes between servers `args` call for, against `servers[reference]`: unasked for each
/// other deployment (another endpoint or served model; what it computes cannot be looked into),
/// for every setting when asked. Each server answers the workload's first prompts once, one at a
/// time, at temperature 0 ([`Client::greedy`]).
pub(crate) fn server_passes(
    args: &QualityArgs,
    servers: &[Server<'_>],
    reference: usize,
    spec: &WorkloadSpec,
    ignore_eos: bool,
) -> Result<Vec<Quality>> {
    if args.quality_oracle {
        return Err(Error::Invalid(
            "--quality-oracle runs the engine's model on the CPU; servers are measured against one another".into(),
        ));
    }
    let deployment = |s: &Server| (s.client.endpoint().base_url.clone(), s.client.endpoint().model.clone());
    let tested: Vec<usize> = (0..servers.len())
        .filter(|&k| {
            k != reference
                && !args.no_quality
                && (args.asked() || deployment(&servers[k]) != deployment(&servers[reference]))
        })
        .collect();
    if tested.is_empty() {
        return Ok(Vec::new());
    }
    let top_k = args.quality_top_k.unwrap_or(SERVER_TOP_K);
    let planned = bench::plan(spec)?;
    let prompts_of = |s: &Server| -> Result<Vec<Prompt>> {
        planned.iter().take(args.quality_prompts).map(|p| s.prompts.prompt(p)).collect()
    };
    let answers = |s: &Server, prompts: &[Prompt]| -> Result<Vec<quality::Generated>> {
        let start = std::time::Instant::now();
        let out = prompts
            .iter()
            .map(|p| s.client.greedy(p, args.quality_tokens, top_k, ignore_eos, s.timeout_s))
            .collect::<Result<Vec<_>>>()?;
        eprintln!("quality pass: {} answered {} prompts in {:.2} s", s.name, out.len(), start.elapsed().as_secs_f64());
        if out.iter().any(|g| g.tokens.is_none()) {
            eprintln!("note: {} returned no log-probabilities: greedy agreement only", s.name);
        }
        Ok(out)
    };
    let base = &servers[reference];
    let base_prompts = prompts_of(base)?;
    let base_answers = answers(base, &base_prompts)?;
    let mut passes = Vec::new();
    for k in tested {
        let server = &servers[k];
        let prompts = prompts_of(server)?;
        if prompts != base_prompts {
            eprintln!(
                "note: no quality pass for {}: its prompts are not {}'s (--api, --tokenizer or --random-prompts differ)",
                server.name, base.name
            );
            continue;
        }
        let test = answers(server, &prompts)?;
        passes.push(quality::compare_served(
            (base.name, server.name),
            &base_answers,
            &test,
            args.quality_tokens,
            top_k,
        )?);
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
