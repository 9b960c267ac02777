//! The model and engine flags every model-loading command shares, and opening and loading a model.

use super::{spec, switches};
use clap::Args;
use std::sync::Arc;
use tokenmeter::bench::record::ready::{LoadSource, TimeToReady};
use tokenmeter::clock::now_s;
use tokenmeter::engine::trial::{self, Trial, TrialPlan};
use tokenmeter::engine::{EngineOptions, ForwardPass};
use tokenmeter::gpu::Gpu;
use tokenmeter::limits::{self, parse_count};
use tokenmeter::model::checkpoint::Checkpoint;
use tokenmeter::model::source::DirStore;
use tokenmeter::model::synthetic::SyntheticModel;
use tokenmeter::model::{ModelStore, Qwen3Config, TensorProvider, Tokenizer};
use tokenmeter::{Error, Result};

#[derive(Args)]
pub(crate) struct ModelArgs {
    /// A Hugging Face model folder: config.json, *.safetensors (or sharded with an index), tokenizer.json.
    /// Without it (and without --synthetic): the page's embedded default, a small random model.
    #[arg(long, conflicts_with = "synthetic")]
    pub(crate) model: Option<std::path::PathBuf>,
    /// Random weights with a published shape: qwen3-0.6b, qwen3-1.7b, qwen3-4b, qwen3-8b.
    #[arg(long)]
    pub(crate) synthetic: Option<String>,
    /// Tokens per engine step (prefill chunks + decodes).
    #[arg(long, default_value_t = 512, allow_negative_numbers = true,
          value_parser = |s: &str| parse_count(s, 1, limits::MAX_BATCHED_TOKENS))]
    pub(crate) max_batched_tokens: usize,
    /// Sequences per engine step.
    #[arg(long, default_value_t = 16, allow_negative_numbers = true,
          value_parser = |s: &str| parse_count(s, 1, limits::MAX_SEQS))]
    pub(crate) max_batch: usize,
    /// KV cache blocks (default: as many as 512 MiB and the adapter allow).
    #[arg(long, allow_negative_numbers = true, value_parser = |s: &str| parse_count(s, 1, limits::MAX_KV_BLOCKS))]
    pub(crate) kv_blocks: Option<usize>,
    /// Tokens per KV block.
    #[arg(long, default_value_t = 16, allow_negative_numbers = true,
          value_parser = |s: &str| parse_count(s, 1, limits::MAX_BLOCK_SIZE))]
    pub(crate) block_size: usize,
    #[command(flatten)]
    pub(crate) spec: spec::SpecArgs,
    #[command(flatten)]
    pub(crate) switches: switches::SwitchArgs,
    /// How the matrices are stored on the GPU: bf16 (as the checkpoint), int8 (per-row scales) or
    /// int4 (a scale per 32 weights), quantised at load; norms stay f32.
    #[arg(long, default_value = "bf16")]
    pub(crate) weights: tokenmeter::gpu::WeightFormat,
}

/// A model opened from its files or a synthetic shape, before its weights go to the GPU.
pub(crate) enum Opened {
    Disk(Checkpoint<tokenmeter::model::source::DiskFile>, Box<Option<Tokenizer>>),
    Synthetic(SyntheticModel),
}

impl Opened {
    /// The load's time to ready before its weights go up: where they come from, the bytes stored,
    /// and `open_s`, the time [`open`] took (no download: a folder on disk, or generated weights).
    pub(crate) fn before_load(&self, open_s: f64) -> TimeToReady {
        let (source, stored_bytes) = match self {
            Opened::Disk(checkpoint, _) => (LoadSource::Disk, checkpoint.file_bytes()),
            Opened::Synthetic(_) => (LoadSource::Generated, 0),
        };
        TimeToReady { source, stored_bytes, open_s, ..TimeToReady::default() }
    }
}

/// [`open`], timed: the model and its time to ready so far ([`Opened::before_load`]).
pub(crate) async fn open_timed(args: &ModelArgs) -> Result<(Opened, TimeToReady)> {
    let from_s = now_s();
    let opened = open(args).await?;
    let before = opened.before_load(now_s() - from_s);
    Ok((opened, before))
}

/// [`load`] of what [`open_timed`] opened, its kernels chosen over `trial` ([`choose_kernels`]),
/// with the load's whole time to ready.
pub(crate) async fn load_timed(
    args: &ModelArgs,
    opened: &Opened,
    before: TimeToReady,
    trial: &TrialPlan,
) -> Result<(ForwardPass, TimeToReady)> {
    let from_s = now_s();
    let mut model = match opened {
        Opened::Disk(checkpoint, _) => load(args, checkpoint).await?,
        Opened::Synthetic(model) => load(args, model).await?,
    };
    let ready = before.after_load(&model.load_times, now_s() - from_s);
    let ready = match choose_kernels(args, &mut model, trial).await? {
        Some(t) => ready.after_trial(&t),
        None => ready,
    };
    Ok((model, ready))
}

/// The engine's choice among its kernel variants (`engine::trial`) as `--kernel-trial` says: an
/// earlier load's choice with the same key (kept in [`TRIALS_FILE`] under the cache directory),
/// or the variants timed over `plan` now (and kept). Prints its line. `None` with `off`.
pub(crate) async fn choose_kernels(
    args: &ModelArgs,
    pass: &mut ForwardPass,
    plan: &TrialPlan,
) -> Result<Option<Trial>> {
    let store = TrialFile(cache_dir().map(|d| d.join(TRIALS_FILE)));
    let chosen = trial::choose_kernels(pass, plan, &args.switches.kernels(), &store).await?;
    if let Some(t) = &chosen {
        eprintln!("{}", t.line());
    }
    Ok(chosen)
}

/// The CLI's kept kernel trials: a JSON map from key to trial ([`trial::key`]), `None` where
/// there is no cache directory.
struct TrialFile(Option<std::path::PathBuf>);

impl TrialFile {
    fn read(&self) -> std::collections::BTreeMap<String, Trial> {
        let text = self.0.as_ref().and_then(|p| std::fs::read_to_string(p).ok());
        text.and_then(|t| serde_json::from_str(&t).ok()).unwrap_or_default()
    }
}

impl trial::TrialStore for TrialFile {
    async fn kept(&self, key: &str) -> Option<Trial> {
        self.read().remove(key)
    }

    async fn keep(&self, trial: &Trial) {
        let Some(path) = &self.0 else { return };
        let mut kept = self.read();
        kept.insert(trial.key.clone(), trial.clone());
        let written = path.parent().map_or(Ok(()), std::fs::create_dir_all).and_then(|()| {
            let part = path.with_extension("json.part");
            std::fs::write(&part, serde_json::to_vec_pretty(&kept).expect("serialisable"))?;
            std::fs::rename(&part, path)
        });
        if let Err(e) = written {
            eprintln!("note: the kernel trial is not kept ({}: {e})", path.display());
        }
    }
}

/// Where the CLI keeps what it measured once for later runs: `$XDG_CACHE_HOME/tokenmeter`, else
/// `~/.cache/tokenmeter`.
fn cache_dir() -> Option<std::path::PathBuf> {
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(std::path::PathBuf::from);
    var("XDG_CACHE_HOME").or_else(|| var("HOME").map(|h| h.join(".cache"))).map(|d| d.join("tokenmeter"))
}

/// The kernel trials kept, by key ([`trial::key`]).
const TRIALS_FILE: &str = "kernel-trials.json";

pub(crate) async fn open(args: &ModelArgs) -> Result<Opened> {
    match (&args.model, &args.synthetic) {
        (Some(dir), _) => {
            let store = DirStore::new(dir)?;
            let checkpoint = Checkpoint::open(&store).await?;
            let tokenizer = match store.read_all("tokenizer.json", tokenmeter::limits::TOKENIZER_JSON_MAX_BYTES).await?
            {
                Some(bytes) => Some(Tokenizer::from_bytes(&bytes)?),
                None => None,
            };
            Ok(Opened::Disk(checkpoint, Box::new(tokenizer)))
        }
        (None, Some(name)) => {
            let cfg = Qwen3Config::preset(name).ok_or_else(|| {
                Error::Invalid(format!("unknown synthetic model {name:?} (one of {})", Qwen3Config::PRESETS.join(", ")))
            })?;
            Ok(Opened::Synthetic(SyntheticModel::new(cfg, 0)))
        }
        (None, None) => {
            // As the page starts: the embedded default, so that a first command runs as it is.
            let model = SyntheticModel::embedded_default();
            let c = &model.config;
            eprintln!(
                "no --model: the embedded default model, as the page starts on (random weights, {} layers, hidden {}, \
                 vocab {}); --model DIR for a checkpoint, --synthetic NAME for a real shape",
                c.num_hidden_layers, c.hidden_size, c.vocab_size
            );
            Ok(Opened::Synthetic(model))
        }
    }
}

pub(crate) async fn load<P: TensorProvider>(args: &ModelArgs, src: &P) -> Result<ForwardPass> {
    load_with(args, src, args.max_batch).await
}

/// The engine options `args` ask for, with `max_batch` sequences per step.
pub(crate) fn engine_options(args: &ModelArgs, max_batch: usize) -> EngineOptions {
    let mut options = EngineOptions {
        max_batched_tokens: args.max_batched_tokens,
        max_seqs: max_batch,
        block_size: args.block_size,
        kv_blocks: args.kv_blocks,
        weights: args.weights,
        overlap: args.switches.overlap(),
        kernels: args.switches.kernels(),
        ..EngineOptions::default()
    };
    args.spec.apply(&mut options);
    options
}

pub(crate) async fn load_with<P: TensorProvider>(args: &ModelArgs, src: &P, max_batch: usize) -> Result<ForwardPass> {
    let gpu = Arc::new(Gpu::new().await?);
    let options = engine_options(args, max_batch);
    let start = std::time::Instant::now();
    let mut last_pct = 0;
    let model = ForwardPass::load(gpu, src, &options, &mut |done, total| {
        let pct = done * 100 / total.max(1);
        if pct >= last_pct + 10 {
            last_pct = pct;
            eprint!("\rloading weights: {pct}%");
        }
    })
    .await?;
    eprintln!(
        "\rloaded {:.1} MB of weights in {:.2} s on {} ({})",
        model.weights.bytes as f64 / 1e6,
        start.elapsed().as_secs_f64(),
        model.gpu.adapter.name,
        model.gpu.adapter.backend
    );
    Ok(model)
}
