//! The engine picks among its own correct kernels by timing them on the adapter it runs on.
//!
//! Where the engine has more than one kernel for a job, each computing to the f32 bound (the
//! greedy tokens of every one are checked against the float64 reference), which is faster depends
//! on the adapter and its compiler: on an H200 the untiled prefill attention beat the tiled one
//! natively by 1.5× while through Dawn the tiled one beat both. A static rule picks wrongly
//! somewhere, and nothing on the user's machine would notice. So after the load, before anything
//! is measured, [`run`] times each variant on the model's real shapes — prefill at the workload's
//! prompt lengths, decode at batch 1 and the run's batch — and keeps the fastest.
//!
//! **The axes** ([`Axis`]): prefill attention tiled over queries or not; subgroup reductions or
//! workgroup memory (only where the device has subgroups); the CPU family's matmul token tile (8
//! or 4, natively only: SwiftShader in the browser never finishes compiling 8); the GPU family's
//! one-token GEMV loop or its 4-token one at batch 1 ([`KernelOptions::gemv_m1`]), and its four-row
//! layout or not ([`KernelOptions::gemv_rows4`]); the GPU family's
//! tiled matmul loading a round ahead or not ([`KernelOptions::tile_prefetch`]). A switch the user
//! set forces its axis, which is then not timed. Weight storage and format stay load-time choices
//! (changing them would upload the weights again).
//!
//! **The rule**: axes in turn, each candidate with the others at their choice so far; a
//! candidate's score is the geometric mean of its jobs' median step times (so a 512-token prefill
//! does not drown a decode step); the default is replaced only by a candidate faster by more than
//! [`MARGIN`] (equal kernels should not flip on noise). The trial stops timing at its budget.
//!
//! **The cache**: a trial is keyed by what decides it ([`key`]: adapter, driver, kernel family,
//! weight storage and format, model shape, jobs, forced axes). [`choose_kernels`] is the one rule
//! of `--kernel-trial on|fresh|off` over a [`TrialStore`], each edge's place for finished trials
//! (the CLI's file under the user's cache directory, the page's Cache Storage): a kept trial with
//! the key is applied without timing, and says so. A trial cut at its budget is kept too (on a
//! slow adapter every load would otherwise pay the budget again); `fresh` times it again.

use super::forward::{Batch, ForwardPass};
use crate::clock::now_s;
use crate::error::{Error, Result};
use crate::gpu::kernels::{KernelFamily, KernelOptions, KernelSwitches, MatmulTile, TrialUse};
use crate::gpu::roofline::median;
use serde::{Deserialize, Serialize};

/// A candidate must beat the default by this fraction of its score to replace it.
pub const MARGIN: f64 = 0.03;
/// Changes whenever what a trial chooses among changes: older cached trials are then not used.
const VERSION: u32 = 4;

/// A kernel choice the trial makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Axis {
    PrefillTiles,
    Subgroups,
    Tile,
    GemvM1,
    GemvRows4,
    TilePrefetch,
}

impl Axis {
    const ALL: [Axis; 6] =
        [Axis::PrefillTiles, Axis::Subgroups, Axis::Tile, Axis::GemvM1, Axis::GemvRows4, Axis::TilePrefetch];

    pub fn name(self) -> &'static str {
        match self {
            Axis::PrefillTiles => "prefill attention",
            Axis::Subgroups => "subgroups",
            Axis::Tile => "matmul tile",
            Axis::GemvM1 => "one-token GEMV",
            Axis::GemvRows4 => "four-row GEMV",
            Axis::TilePrefetch => "tile prefetch",
        }
    }

    /// The value `options` have on this axis, as the trial's record names it.
    pub fn label(self, options: &KernelOptions) -> &'static str {
        match self {
            Axis::PrefillTiles if options.prefill_tiles => "tiled",
            Axis::PrefillTiles => "untiled",
            Axis::Subgroups if options.subgroups => "on",
            Axis::Subgroups => "off",
            Axis::GemvM1 if options.gemv_m1 => "on",
            Axis::GemvM1 => "off",
            Axis::GemvRows4 if options.gemv_rows4 => "on",
            Axis::GemvRows4 => "off",
            Axis::TilePrefetch if options.tile_prefetch => "on",
            Axis::TilePrefetch => "off",
            Axis::Tile => match options.tile {
                MatmulTile::Eight => "8",
                MatmulTile::Four => "4",
            },
        }
    }

    /// `options` with this axis at `label`; `None` for a label this axis does not have.
    fn set(self, options: KernelOptions, label: &str) -> Option<KernelOptions> {
        let mut o = options;
        match (self, label) {
            (Axis::PrefillTiles, "tiled" | "untiled") => o.prefill_tiles = label == "tiled",
            (Axis::Subgroups, "on" | "off") => o.subgroups = label == "on",
            (Axis::GemvM1, "on" | "off") => o.gemv_m1 = label == "on",
            (Axis::GemvRows4, "on" | "off") => o.gemv_rows4 = label == "on",
            (Axis::TilePrefetch, "on" | "off") => o.tile_prefetch = label == "on",
            (Axis::Tile, "8") => o.tile = MatmulTile::Eight,
            (Axis::Tile, "4") => o.tile = MatmulTile::Four,
            _ => return None,
        }
        Some(o)
    }

    /// The values this axis may take on `device_subgroups` and `options`' family, the default
    /// first; one value (or a switch forcing it) means the axis is not timed.
    fn candidates(
        self,
        options: &KernelOptions,
        device_subgroups: bool,
        switches: &KernelSwitches,
    ) -> Vec<&'static str> {
        let default = self.label(options);
        let all: &[&'static str] = match self {
            _ if self.forced(switches) => &[],
            Axis::PrefillTiles => &["tiled", "untiled"],
            Axis::Subgroups if device_subgroups => &["on", "off"],
            // The GPU family's matmuls take no token tile (it is only their fallback's).
            Axis::Tile if options.family == KernelFamily::Software && !cfg!(target_arch = "wasm32") => &["8", "4"],
            Axis::GemvM1 | Axis::GemvRows4 | Axis::TilePrefetch if options.family == KernelFamily::Gpu => {
                &["on", "off"]
            }
            Axis::Subgroups | Axis::Tile | Axis::GemvM1 | Axis::GemvRows4 | Axis::TilePrefetch => &[],
        };
        std::iter::once(default).chain(all.iter().copied().filter(|&l| l != default)).collect()
    }

    /// Whether this axis means anything in `options`' kernel family: the token tile is the CPU
    /// family's, the one-token GEMV's loop and layout and the tile's prefetch the GPU family's. An axis that does not is left out of the
    /// trial and its record (not shown as a choice).
    fn applies(self, options: &KernelOptions) -> bool {
        match self {
            Axis::Tile => options.family == KernelFamily::Software,
            Axis::GemvM1 | Axis::GemvRows4 | Axis::TilePrefetch => options.family == KernelFamily::Gpu,
            Axis::PrefillTiles | Axis::Subgroups => true,
        }
    }

    fn forced(self, switches: &KernelSwitches) -> bool {
        match self {
            Axis::PrefillTiles => switches.prefill_tiles.is_some(),
            Axis::Subgroups => switches.subgroups.is_some(),
            Axis::Tile => switches.tile.is_some(),
            Axis::GemvM1 => switches.gemv_m1.is_some(),
            Axis::GemvRows4 => switches.gemv_rows4.is_some(),
            Axis::TilePrefetch => switches.tile_prefetch.is_some(),
        }
    }

    /// Whether a job's time depends on this axis in `options`: the tiled attention runs only in
    /// prefill, one token's matmuls take no token tile, only they take the one-token GEMV (whose
    /// loop is not run where its four-row layout is), and only steps of more tokens than the GEMV
    /// serves take the GPU family's tiled matmul.
    fn affects(self, job: Job, options: &KernelOptions) -> bool {
        let gemv_max_m = options.gemv_max_m as usize;
        match (self, job) {
            (Axis::TilePrefetch, Job::Prefill { tokens }) => tokens > gemv_max_m,
            (Axis::TilePrefetch, Job::Decode { batch, .. }) => batch > gemv_max_m,
            (Axis::PrefillTiles, Job::Decode { .. }) | (Axis::Tile, Job::Decode { batch: 1, .. }) => false,
            (Axis::GemvM1, _) if options.gemv_rows4 => false,
            (Axis::GemvM1 | Axis::GemvRows4, Job::Decode { batch, .. }) => batch == 1,
            (Axis::GemvM1 | Axis::GemvRows4, Job::Prefill { tokens }) => tokens == 1,
            _ => true,
        }
    }
}

/// One step the trial times.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Job {
    /// One sequence's prompt of `tokens` tokens in one step.
    Prefill { tokens: usize },
    /// `batch` sequences decoding one token each at `context` tokens of context.
    Decode { batch: usize, context: usize },
}

impl Job {
    pub fn name(self) -> String {
        match self {
            Job::Prefill { tokens } => format!("prefill {tokens}"),
            Job::Decode { batch, .. } => format!("decode ×{batch}"),
        }
    }

    /// The step, its sequences' KV blocks counted from 0 (the trial runs before any request, as
    /// `verify` does, and what it writes is overwritten before it is read).
    fn batch(self, block_size: usize, vocab: usize) -> Batch {
        let id = |i: usize| ((i * 7919) % vocab.min(151_643)) as u32;
        match self {
            Job::Prefill { tokens } => Batch {
                tokens: (0..tokens).map(|p| [id(p), p as u32, 0, 0]).collect(),
                logit_rows: vec![tokens as u32 - 1],
                block_tables: vec![(0..tokens.div_ceil(block_size) as u32).collect()],
                ..Default::default()
            },
            Job::Decode { batch, context } => {
                let per_seq = (context + 1).div_ceil(block_size);
                Batch {
                    tokens: (0..batch).map(|b| [id(b), context as u32, b as u32, 0]).collect(),
                    logit_rows: (0..batch as u32).collect(),
                    block_tables: (0..batch)
                        .map(|b| (0..per_seq).map(|j| (b * per_seq + j) as u32).collect())
                        .collect(),
                    ..Default::default()
                }
            }
        }
    }

    /// KV blocks the step holds.
    fn blocks(self, block_size: usize) -> usize {
        match self {
            Job::Prefill { tokens } => tokens.div_ceil(block_size),
            Job::Decode { batch, context } => batch * (context + 1).div_ceil(block_size),
        }
    }
}

/// What a trial times, and for how long at most.
#[derive(Clone, Debug, PartialEq)]
pub struct TrialPlan {
    pub jobs: Vec<Job>,
    /// Timed steps of each job per candidate (after one untimed step that compiles its kernels).
    pub repeats: usize,
    /// Seconds after which no further candidate is timed (the rest keep their choice so far).
    pub budget_s: f64,
}

/// Prompt lengths timed when the workload names none.
pub const DEFAULT_PREFILL: [usize; 2] = [128, 512];
/// Context of the decode steps timed.
const DECODE_CONTEXT: usize = 128;

impl TrialPlan {
    /// Prefill at `prompt_lens` (the workload's; [`DEFAULT_PREFILL`] when empty), decode at batch
    /// 1 and `batch`.
    pub fn new(prompt_lens: &[usize], batch: usize) -> TrialPlan {
        let mut prefill: Vec<usize> =
            if prompt_lens.is_empty() { DEFAULT_PREFILL.to_vec() } else { prompt_lens.to_vec() };
        prefill.sort_unstable();
        prefill.dedup();
        let mut jobs: Vec<Job> = prefill.into_iter().filter(|&t| t > 0).map(|tokens| Job::Prefill { tokens }).collect();
        for b in [1, batch.max(1)] {
            let job = Job::Decode { batch: b, context: DECODE_CONTEXT };
            if !jobs.contains(&job) {
                jobs.push(job);
            }
        }
        TrialPlan { jobs, repeats: 3, budget_s: 30.0 }
    }

    /// The jobs cut to what `pass` can run in one step: prompts to its step's tokens and its
    /// context, batches to its sequences, both to its KV blocks.
    fn fitted(&self, pass: &ForwardPass) -> Vec<Job> {
        let l = &pass.limits;
        let mut jobs: Vec<Job> = Vec::new();
        for &job in &self.jobs {
            let job = match job {
                Job::Prefill { tokens } => {
                    Job::Prefill { tokens: tokens.min(l.max_batched_tokens).min(pass.cfg.max_position_embeddings) }
                }
                Job::Decode { batch, context } => Job::Decode {
                    batch: batch.min(l.max_seqs).min(l.max_logit_rows).min(l.max_batched_tokens),
                    context: context.min(pass.cfg.max_position_embeddings - 1),
                },
            };
            if job.blocks(l.block_size) <= l.num_blocks && !jobs.contains(&job) {
                jobs.push(job);
            }
        }
        jobs
    }
}

/// One candidate's timings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Timed {
    pub label: String,
    /// Each job's median step, in ms, in the plan's order.
    pub ms: Vec<f64>,
    /// The geometric mean of `ms`.
    pub score_ms: f64,
}

/// One axis's trial.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AxisTrial {
    pub axis: Axis,
    /// The jobs timed (those this axis affects), by [`Job::name`].
    pub jobs: Vec<String>,
    /// The default first.
    pub timed: Vec<Timed>,
    pub chosen: String,
}

/// An axis the trial did not time, and its value.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FixedAxis {
    pub axis: Axis,
    pub value: String,
    /// By a switch; else the only value this adapter and kernel family take.
    pub forced: bool,
}

/// What a trial chose, and what it measured to choose it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Trial {
    pub key: String,
    /// The axes timed, in order.
    pub axes: Vec<AxisTrial>,
    /// Axes not timed: forced by a switch, or with one value on this adapter.
    pub fixed: Vec<FixedAxis>,
    /// The budget ran out before every candidate was timed.
    pub cut_short: bool,
    pub seconds: f64,
    /// Taken from an earlier trial with the same key (nothing timed now).
    #[serde(default)]
    pub cached: bool,
}

/// The words a trial is described in ([`Trial::describe`]): [`TrialWords::EN`] here, the page's
/// language there.
pub struct TrialWords {
    pub prefill_attention: &'static str,
    pub subgroups: &'static str,
    pub matmul_tile: &'static str,
    pub gemv_m1: &'static str,
    pub gemv_rows4: &'static str,
    pub tile_prefetch: &'static str,
    pub tiled: &'static str,
    pub untiled: &'static str,
    pub on: &'static str,
    pub off: &'static str,
    pub forced: &'static str,
    pub only_choice: &'static str,
    pub cached: &'static str,
    pub cut_short: &'static str,
}

impl TrialWords {
    pub const EN: TrialWords = TrialWords {
        prefill_attention: "prefill attention",
        subgroups: "subgroups",
        matmul_tile: "matmul tile",
        gemv_m1: "one-token GEMV",
        gemv_rows4: "four-row GEMV",
        tile_prefetch: "tile prefetch",
        tiled: "tiled",
        untiled: "untiled",
        on: "on",
        off: "off",
        forced: "forced",
        only_choice: "only choice here",
        cached: "an earlier load's choice, not timed again",
        cut_short: "cut at its budget",
    };

    fn axis(&self, axis: Axis) -> &'static str {
        match axis {
            Axis::PrefillTiles => self.prefill_attention,
            Axis::Subgroups => self.subgroups,
            Axis::Tile => self.matmul_tile,
            Axis::GemvM1 => self.gemv_m1,
            Axis::GemvRows4 => self.gemv_rows4,
            Axis::TilePrefetch => self.tile_prefetch,
        }
    }

    fn value<'a>(&self, label: &'a str) -> &'a str {
        match label {
            "tiled" => self.tiled,
            "untiled" => self.untiled,
            "on" => self.on,
            "off" => self.off,
            other => other,
        }
    }
}

impl Trial {
    /// "prefill attention untiled (41.02 vs tiled 60.20 ms) · subgroups on (forced) · 2.1 s", or
    /// the choices and that they came from an earlier load.
    pub fn describe(&self, w: &TrialWords) -> String {
        let timed = |a: &AxisTrial| {
            let chosen = a.timed.iter().find(|c| c.label == a.chosen);
            let others: Vec<String> = a
                .timed
                .iter()
                .filter(|c| c.label != a.chosen)
                .map(|c| format!("{} {:.2}", w.value(&c.label), c.score_ms))
                .collect();
            match chosen {
                Some(c) if !others.is_empty() && !self.cached => {
                    format!("{} {} ({:.2} vs {} ms)", w.axis(a.axis), w.value(&a.chosen), c.score_ms, others.join(", "))
                }
                _ => format!("{} {}", w.axis(a.axis), w.value(&a.chosen)),
            }
        };
        let mut parts: Vec<String> = self.axes.iter().map(timed).collect();
        parts.extend(self.fixed.iter().map(|f| {
            let why = if f.forced { w.forced } else { w.only_choice };
            format!("{} {} ({why})", w.axis(f.axis), w.value(&f.value))
        }));
        parts.push(match (self.cached, self.cut_short) {
            (true, _) => w.cached.to_string(),
            (false, true) => format!("{:.1} s, {}", self.seconds, w.cut_short),
            (false, false) => format!("{:.1} s", self.seconds),
        });
        parts.join(" · ")
    }

    /// The CLI's line: "kernel trial: " and [`Trial::describe`] in English.
    pub fn line(&self) -> String {
        format!("kernel trial: {}", self.describe(&TrialWords::EN))
    }

    /// The options this trial chose, applied to `base`; `None` if one no longer applies.
    fn apply(&self, base: KernelOptions) -> Option<KernelOptions> {
        self.axes.iter().try_fold(base, |o, a| a.axis.set(o, &a.chosen))
    }
}

/// What decides a trial on `pass` with `switches` over `plan`: two loads with the same key would
/// time the same kernels on the same shapes.
pub fn key(pass: &ForwardPass, plan: &TrialPlan, switches: &KernelSwitches) -> String {
    let (a, c, o) = (&pass.gpu.adapter, &pass.cfg, pass.kernel_options());
    let jobs: Vec<String> = plan.fitted(pass).iter().map(|j| format!("{j:?}")).collect();
    // The trial's own switch decides nothing it chooses; WGSL read from a folder is other kernels.
    let forced: Vec<String> = switches
        .query_pairs()
        .into_iter()
        .filter(|(k, _)| *k != "kernel-trial")
        .map(|(k, v)| format!("{k}={v}"))
        .chain(switches.shader_dir.map(|d| format!("shaders={}", d.display())))
        .collect();
    format!(
        "v{VERSION}|{}|{}|{}|{}|{}|{}|{}|h{} i{} l{} q{} kv{} d{} v{}|{}|{}",
        a.name,
        a.backend,
        a.driver,
        o.family.name(),
        o.weights.name(),
        o.format.name(),
        if cfg!(target_arch = "wasm32") { "browser" } else { "native" },
        c.hidden_size,
        c.intermediate_size,
        c.num_hidden_layers,
        c.num_attention_heads,
        c.num_key_value_heads,
        c.head_dim,
        c.vocab_size,
        jobs.join(","),
        forced.join(",")
    )
}

/// Where an edge keeps finished trials for later loads ([`choose_kernels`]).
#[allow(async_fn_in_trait)]
pub trait TrialStore {
    /// The trial kept under `key`, if any.
    async fn kept(&self, key: &str) -> Option<Trial>;
    /// Keeps `trial` under its key. A store that cannot keep it costs the next load a trial,
    /// nothing else: it says so where it can, and never fails the load.
    async fn keep(&self, trial: &Trial);
}

/// `pass`'s kernels as `switches.trial` says: `off` leaves the defaults (`None`); `on` applies the
/// trial `store` kept under this key, else times the variants; `fresh` times them again. A trial
/// timed now is kept in `store`.
pub async fn choose_kernels(
    pass: &mut ForwardPass,
    plan: &TrialPlan,
    switches: &KernelSwitches,
    store: &impl TrialStore,
) -> Result<Option<Trial>> {
    let cached = match switches.trial.unwrap_or(TrialUse::On) {
        TrialUse::Off => return Ok(None),
        TrialUse::On => store.kept(&key(pass, plan, switches)).await,
        TrialUse::Fresh => None,
    };
    let chosen = run(pass, plan, switches, cached).await?;
    if !chosen.cached {
        store.keep(&chosen).await;
    }
    Ok(Some(chosen))
}

/// Times the variants `plan` calls for on `pass` (unless `cached` is a trial with this key, whose
/// choices are applied untimed), leaves `pass` on the fastest, and keeps the trial on it
/// ([`ForwardPass::trial`]) for the run's record.
pub async fn run(
    pass: &mut ForwardPass,
    plan: &TrialPlan,
    switches: &KernelSwitches,
    cached: Option<Trial>,
) -> Result<Trial> {
    let key = key(pass, plan, switches);
    let base = pass.kernel_options();
    if let Some(kept) = cached.filter(|t| t.key == key) {
        if let Some(options) = kept.apply(base) {
            pass.use_kernels(options).await?;
            let trial = Trial { cached: true, ..kept };
            pass.trial = Some(trial.clone());
            return Ok(trial);
        }
    }
    let start = now_s();
    let jobs = plan.fitted(pass);
    let mut options = base;
    let (mut axes, mut fixed, mut cut_short) = (Vec::new(), Vec::new(), false);
    for axis in Axis::ALL.into_iter().filter(|a| a.applies(&base)) {
        let candidates = axis.candidates(&options, pass.gpu.subgroups, switches);
        let affected: Vec<Job> = jobs.iter().copied().filter(|&j| axis.affects(j, &options)).collect();
        // One value, or none of the plan's steps runs what the axis changes: nothing to time.
        if candidates.len() < 2 || affected.is_empty() {
            let value = axis.label(&options).to_string();
            fixed.push(FixedAxis { axis, value, forced: axis.forced(switches) });
            continue;
        }
        let mut timed: Vec<Timed> = Vec::new();
        for label in candidates {
            if now_s() - start > plan.budget_s {
                cut_short = true;
                break;
            }
            let candidate = axis.set(options, label).expect("a candidate is one of the axis's labels");
            pass.use_kernels(candidate).await?;
            let mut ms = Vec::with_capacity(affected.len());
            for &job in &affected {
                ms.push(time_job(pass, job, plan.repeats).await? * 1e3);
            }
            let score_ms = geometric_mean(&ms);
            timed.push(Timed { label: label.to_string(), ms, score_ms });
        }
        let chosen = choose(&timed).unwrap_or_else(|| axis.label(&options).to_string());
        options = axis.set(options, &chosen).expect("the chosen label is the axis's");
        axes.push(AxisTrial { axis, jobs: affected.iter().map(|j| j.name()).collect(), timed, chosen });
    }
    pass.use_kernels(options).await?;
    let trial = Trial { key, axes, fixed, cut_short, seconds: now_s() - start, cached: false };
    pass.trial = Some(trial.clone());
    Ok(trial)
}

/// `pass` on the choices of `from`, another load's trial (an A/B's first side), wherever
/// `switches` leave the axis open: the two sides of a comparison then differ only in what the
/// user changed, never in a choice two trials made apart on noise. Nothing is timed; the trial
/// kept on `pass` says the choice came from an earlier load.
pub async fn adopt(pass: &mut ForwardPass, from: &Trial, switches: &KernelSwitches) -> Result<Trial> {
    let mut options = pass.kernel_options();
    let mut axes = Vec::new();
    for a in from.axes.iter().filter(|a| !a.axis.forced(switches)) {
        let takes = a.axis.candidates(&options, pass.gpu.subgroups, switches).contains(&a.chosen.as_str());
        if let (true, Some(o)) = (takes, a.axis.set(options, &a.chosen)) {
            options = o;
            axes.push(a.clone());
        }
    }
    pass.use_kernels(options).await?;
    let plan_key = from.key.clone();
    let trial = Trial { key: plan_key, axes, fixed: Vec::new(), cut_short: false, seconds: 0.0, cached: true };
    pass.trial = Some(trial.clone());
    Ok(trial)
}

/// The trial's rule over one axis's timings (the default first): the fastest, if it beats the
/// default by more than [`MARGIN`]; else the default. `None` when nothing was timed.
pub fn choose(timed: &[Timed]) -> Option<String> {
    let default = timed.first()?;
    let best = timed.iter().min_by(|a, b| a.score_ms.total_cmp(&b.score_ms))?;
    let replaces = best.score_ms < default.score_ms * (1.0 - MARGIN);
    Some(if replaces { best.label.clone() } else { default.label.clone() })
}

fn geometric_mean(ms: &[f64]) -> f64 {
    if ms.is_empty() {
        return f64::NAN;
    }
    (ms.iter().map(|m| m.ln()).sum::<f64>() / ms.len() as f64).exp()
}

/// `job`'s median wall time over `repeats` steps, in seconds, after one untimed step (where a
/// driver compiles the candidate's kernels at their first dispatch).
async fn time_job(pass: &mut ForwardPass, job: Job, repeats: usize) -> Result<f64> {
    let batch = job.batch(pass.kv.block_size, pass.cfg.vocab_size);
    pass.step(&batch).await?;
    let mut times = Vec::with_capacity(repeats.max(1));
    for _ in 0..repeats.max(1) {
        let from = now_s();
        pass.step(&batch).await?;
        times.push(now_s() - from);
    }
    let t = median(times);
    if !t.is_finite() {
        return Err(Error::Gpu(format!("the kernel trial's {} step took no measurable time", job.name())));
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timed(label: &str, score_ms: f64) -> Timed {
        Timed { label: label.into(), ms: vec![score_ms], score_ms }
    }

    #[test]
    fn a_variant_replaces_the_default_only_when_faster_by_the_margin() {
        assert_eq!(choose(&[timed("tiled", 10.0), timed("untiled", 9.0)]).as_deref(), Some("untiled"));
        // 2% faster is within the margin: the default stays.
        assert_eq!(choose(&[timed("tiled", 10.0), timed("untiled", 9.8)]).as_deref(), Some("tiled"));
        assert_eq!(choose(&[timed("on", 5.0), timed("off", 7.0)]).as_deref(), Some("on"));
        assert_eq!(choose(&[]), None);
        assert!((geometric_mean(&[1.0, 100.0]) - 10.0).abs() < 1e-12);
    }

    #[test]
    fn the_plan_times_the_workloads_prompts_and_both_batches() {
        let plan = TrialPlan::new(&[512, 128, 512], 8);
        assert_eq!(
            plan.jobs,
            [
                Job::Prefill { tokens: 128 },
                Job::Prefill { tokens: 512 },
                Job::Decode { batch: 1, context: DECODE_CONTEXT },
                Job::Decode { batch: 8, context: DECODE_CONTEXT },
            ]
        );
        assert_eq!(TrialPlan::new(&[], 1).jobs.len(), 3);
        let forced = KernelSwitches { prefill_tiles: Some(false), ..KernelSwitches::NONE };
        let options = KernelOptions { prefill_tiles: false, ..KernelOptions::default() };
        assert_eq!(Axis::PrefillTiles.candidates(&options, true, &forced), ["untiled"]);
        assert_eq!(Axis::PrefillTiles.candidates(&options, true, &KernelSwitches::NONE), ["untiled", "tiled"]);
        assert_eq!(Axis::Subgroups.candidates(&options, false, &KernelSwitches::NONE), ["off"]);
        assert_eq!(Axis::Subgroups.candidates(&options, true, &KernelSwitches::NONE), ["off", "on"]);
    }

    #[test]
    fn the_one_token_gemv_is_timed_in_the_gpu_family_on_one_token_steps_only() {
        let gpu = KernelOptions { family: KernelFamily::Gpu, ..KernelOptions::default() };
        let none = KernelSwitches::NONE;
        assert_eq!(Axis::GemvM1.candidates(&gpu, false, &none), ["on", "off"]);
        assert_eq!(Axis::GemvM1.candidates(&KernelOptions::default(), false, &none), ["on"]);
        // Each family's record names only its own axes.
        assert!(Axis::GemvM1.applies(&gpu) && !Axis::GemvM1.applies(&KernelOptions::default()));
        assert!(!Axis::Tile.applies(&gpu) && Axis::Tile.applies(&KernelOptions::default()));
        let forced = KernelSwitches { gemv_m1: Some(false), ..none };
        let off = Axis::GemvM1.set(gpu, "off").unwrap();
        assert_eq!(Axis::GemvM1.candidates(&off, false, &forced), ["off"]);
        assert!(!off.gemv_m1 && Axis::GemvM1.label(&off) == "off");
        let affected: Vec<Job> =
            TrialPlan::new(&[1, 128], 8).jobs.into_iter().filter(|&j| Axis::GemvM1.affects(j, &gpu)).collect();
        assert_eq!(affected, [Job::Prefill { tokens: 1 }, Job::Decode { batch: 1, context: DECODE_CONTEXT }]);
    }

    #[test]
    fn the_four_row_gemv_is_timed_on_one_token_steps_and_then_the_loop_it_replaces_is_not() {
        let gpu = KernelOptions { family: KernelFamily::Gpu, ..KernelOptions::default() };
        let none = KernelSwitches::NONE;
        assert_eq!(Axis::GemvRows4.candidates(&gpu, false, &none), ["off", "on"]);
        assert!(Axis::GemvRows4.applies(&gpu) && !Axis::GemvRows4.applies(&KernelOptions::default()));
        let forced = KernelSwitches { gemv_rows4: Some(true), ..none };
        let on = Axis::GemvRows4.set(gpu, "on").unwrap();
        assert_eq!(Axis::GemvRows4.candidates(&on, false, &forced), ["on"]);
        assert!(on.gemv_rows4 && Axis::GemvRows4.label(&on) == "on");
        let plan = TrialPlan::new(&[1, 128], 8);
        let affected = |axis: Axis, o: &KernelOptions| -> Vec<Job> {
            plan.jobs.iter().copied().filter(|&j| axis.affects(j, o)).collect()
        };
        let one_token = [Job::Prefill { tokens: 1 }, Job::Decode { batch: 1, context: DECODE_CONTEXT }];
        assert_eq!(affected(Axis::GemvRows4, &gpu), one_token);
        assert_eq!(affected(Axis::GemvM1, &gpu), one_token);
        // The four-row layout takes every one-token step: the one-token loop runs nowhere.
        assert_eq!(affected(Axis::GemvM1, &on), []);
    }

    #[test]
    fn the_tile_prefetch_is_timed_in_the_gpu_family_on_steps_the_tile_takes() {
        let gpu = KernelOptions { family: KernelFamily::Gpu, ..KernelOptions::default() };
        let none = KernelSwitches::NONE;
        assert_eq!(Axis::TilePrefetch.candidates(&gpu, false, &none), ["off", "on"]);
        assert!(Axis::TilePrefetch.applies(&gpu) && !Axis::TilePrefetch.applies(&KernelOptions::default()));
        let forced = KernelSwitches { tile_prefetch: Some(true), ..none };
        let on = Axis::TilePrefetch.set(gpu, "on").unwrap();
        assert_eq!(Axis::TilePrefetch.candidates(&on, false, &forced), ["on"]);
        assert!(on.tile_prefetch && Axis::TilePrefetch.label(&on) == "on");
        // Steps of more tokens than the GEMV serves (64 by default; fewer where the switch says).
        let plan = TrialPlan::new(&[64, 128, 512], 128);
        let affected = |o: &KernelOptions| -> Vec<Job> {
            plan.jobs.iter().copied().filter(|&j| Axis::TilePrefetch.affects(j, o)).collect()
        };
        assert_eq!(
            affected(&gpu),
            [
                Job::Prefill { tokens: 128 },
                Job::Prefill { tokens: 512 },
                Job::Decode { batch: 128, context: DECODE_CONTEXT }
            ]
        );
        let narrow = KernelOptions { gemv_max_m: 32, ..gpu };
        assert_eq!(affected(&narrow).len(), 4);
    }
}
