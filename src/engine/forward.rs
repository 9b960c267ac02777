//! Qwen3 on the GPU: weights, activation buffers and bind groups made once; a step runs any mix of
//! prefill and decode tokens from several sequences as one command buffer and reads back only the
//! chosen token ids.

use super::kv::KvCache;
use super::linear::Linear;
use crate::clock::now_s;
use crate::error::{Error, Result};
use crate::gpu::kernels::RowSample;
use crate::gpu::kernels::{
    attention_min_partials, attention_part_floats, attention_plan, groups, record_attention_plan, record_qk_norm_rope,
    rope_in_attention, DispatchTime, EmbedParams, HeadParams, KernelFamily, KernelOptions, KernelSwitches, PairParams,
    Prologue, RmsNormParams, SPLITS_FOR_PARALLELISM, SPLIT_MAX_PAIRS,
};
use crate::gpu::readback::{self, PendingRead, Staging};
use crate::gpu::WeightFormat;
use crate::gpu::{Gpu, Kernel, Kernels, SharedGpu, StepRecorder, PREVIOUS_ID};
use crate::limits;
use crate::model::config::inv_freq;
use crate::model::weights::{self, Matrix, ModelWeights};
use crate::model::{Qwen3Config, TensorProvider};

/// A step submitted by [`ForwardPass::submit`] whose ids are not read yet.
#[must_use = "a submitted step's ids must be read (ForwardPass::ids) before two more steps are submitted"]
pub struct Submitted {
    read: Option<(usize, PendingRead, wgpu::SubmissionIndex)>,
}

/// Engine sizes the user may set; the adapter's limits may lower them (reported in [`ForwardPass::limits`]).
#[derive(Debug, Clone)]
pub struct EngineOptions {
    /// Tokens per step (prefill chunk + decodes).
    pub max_batched_tokens: usize,
    /// Sequences per step.
    pub max_seqs: usize,
    /// Tokens per KV block.
    pub block_size: usize,
    /// KV blocks; `None`: as many as `kv_budget_bytes` and the adapter allow.
    pub kv_blocks: Option<usize>,
    pub kv_budget_bytes: u64,
    /// Speculative decoding (off by default): sizes the logit rows for `1 + K` per sequence.
    pub speculation: super::Speculation,
    /// How the matrices are stored: the checkpoint's bf16, or quantised at load (`--weights`).
    pub weights: WeightFormat,
    /// Prefix caching (off by default): requests whose prompts start with the same full KV blocks
    /// share them and skip their prefill (see [`super::kv::BlockAllocator`]).
    pub prefix_cache: bool,
    /// CPU/GPU overlap in decode ([`super::batcher`]): on by default (`--overlap off`, `?overlap=off`
    /// in the page); off in force with prefix caching or speculative decoding, which need each
    /// step's ids before planning the next.
    pub overlap: bool,
    /// The user's kernel switches, resolved against the device at load
    /// ([`KernelOptions::for_gpu`]; [`ForwardPass::kernel_options`] says what runs).
    pub kernels: KernelSwitches,
}

impl EngineOptions {
    /// CPU/GPU overlap as it runs: asked for, and neither prefix caching nor speculative decoding
    /// (which need each step's ids before planning the next).
    pub fn overlap_in_force(&self) -> bool {
        self.overlap && !self.prefix_cache && self.speculation.max_draft() == 0
    }
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            max_batched_tokens: 512,
            max_seqs: 16,
            block_size: 16,
            kv_blocks: None,
            kv_budget_bytes: 512 << 20,
            speculation: super::Speculation::Off,
            weights: WeightFormat::Bf16,
            prefix_cache: false,
            overlap: true,
            kernels: KernelSwitches::default(),
        }
    }
}

/// The sizes actually in force.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct EngineLimits {
    pub max_batched_tokens: usize,
    pub max_seqs: usize,
    pub block_size: usize,
    pub num_blocks: usize,
    /// Block-table width: blocks one sequence may hold (max_position_embeddings / block_size).
    pub max_blocks_per_seq: usize,
    /// Speculative decoding in force (see [`super::Speculation`]).
    #[serde(default)]
    pub speculation: super::Speculation,
    /// Logit rows (token choices read back) per step: `max_seqs × (1 + K)` with K draft tokens,
    /// at most `max_batched_tokens`; `max_seqs` without speculation.
    #[serde(default)]
    pub max_logit_rows: usize,
    /// Prefix caching in force (absent, so off, in results saved before it existed).
    #[serde(default)]
    pub prefix_cache: bool,
    /// CPU/GPU overlap in force: each step was submitted before the previous one's ids were read
    /// ([`EngineOptions::overlap`]; absent, so off, in results saved before it existed).
    #[serde(default)]
    pub overlap: bool,
}

/// One step's work. `tokens[i] = [id, position, seq, 0]` where `seq` indexes `block_tables`, and
/// `id` may be `PREVIOUS_ID | r`: the id row `r` of the step submitted just before chose, read on
/// the GPU (CPU/GPU overlap, see [`ForwardPass::submit`]); `logit_rows` lists the tokens whose
/// next-token choice is wanted (in output order), and `sampling` how to choose each (empty: all
/// greedy).
#[derive(Debug, Clone, Default)]
pub struct Batch {
    pub tokens: Vec<[u32; 4]>,
    pub logit_rows: Vec<u32>,
    pub block_tables: Vec<Vec<u32>>,
    pub sampling: Vec<RowSample>,
}

/// Floats of the split-attention partials buffer (16 MiB): long prefill chunks are split over as
/// many token ranges as it takes (`record_attention`).
const PARTIALS_FLOATS: usize = 4 << 20;

struct Buffers {
    tokens: wgpu::Buffer,       // (max_tokens) vec4<u32>
    identity: wgpu::Buffer,     // (max_tokens) u32: 0, 1, 2, ...
    logit_rows: wgpu::Buffer,   // (max_logit_rows) u32
    block_tables: wgpu::Buffer, // (max_seqs, max_blocks_per_seq) u32
    inv_freq: wgpu::Buffer,     // (head_dim / 2) f32
    x: wgpu::Buffer,            // (max_tokens, hidden) residual stream
    normed: wgpu::Buffer,       // (max_tokens, hidden)
    qkv: wgpu::Buffer,          // (max_tokens, q_dim + 2 kv_dim)
    attn: wgpu::Buffer,         // (max_tokens, q_dim)
    partials: wgpu::Buffer,     // (partials_floats): (tokens, heads, splits, head_dim + 2), split attention
    gate_up: wgpu::Buffer,      // (max_tokens, 2 inter)
    act: wgpu::Buffer,          // (max_tokens, inter)
    final_h: wgpu::Buffer,      // (max_logit_rows, hidden)
    logits: wgpu::Buffer,       // (max_logit_rows, vocab)
    row_sample: wgpu::Buffer,   // (max_logit_rows) RowSample
    ids: wgpu::Buffer,          // (max_logit_rows) u32
}

struct LayerGroups {
    norm_in: wgpu::BindGroup,
    qkv: Vec<wgpu::BindGroup>,
    rope: wgpu::BindGroup,
    attention: wgpu::BindGroup,
    attention_split: wgpu::BindGroup,
    o: Vec<wgpu::BindGroup>,
    norm_post: wgpu::BindGroup,
    gate_up: Vec<wgpu::BindGroup>,
    swiglu: wgpu::BindGroup,
    down: Vec<wgpu::BindGroup>,
    /// The GPU family's fused matmuls (`None` in the CPU family or with fusion off).
    fused: Option<FusedGroups>,
}

/// A layer's matmuls with their prologue inside (`gpu::kernels::Prologue`): q|k|v and gate|up
/// read the residual stream x and normalise it themselves, down_proj reads gate|up and applies
/// SwiGLU, so a layer is 6 dispatches instead of 9 (plus attention's merge when split); in a
/// decode step attention does the q/k norm, RoPE and KV write itself (`rope_in_attention`): 5.
struct FusedGroups {
    qkv: Vec<wgpu::BindGroup>,
    gate_up: Vec<wgpu::BindGroup>,
    down: Vec<wgpu::BindGroup>,
    /// `AttentionSplitGpuRope` writing the attention output, and its partials.
    attention_rope: wgpu::BindGroup,
    attention_rope_split: wgpu::BindGroup,
}

struct Groups {
    embed: Vec<wgpu::BindGroup>,
    layers: Vec<LayerGroups>,
    attention_merge: wgpu::BindGroup,
    final_norm: wgpu::BindGroup,
    lm_head: Vec<wgpu::BindGroup>,
    argmax: wgpu::BindGroup,
    sample: wgpu::BindGroup,
}

pub struct ForwardPass {
    pub gpu: SharedGpu,
    pub cfg: Qwen3Config,
    pub weights: ModelWeights,
    pub limits: EngineLimits,
    pub kv: KvCache,
    kernels: Kernels,
    buffers: Buffers,
    groups: Groups,
    /// Two, used in turn: a step's ids come back while the next step runs ([`ForwardPass::submit`]).
    staging: [Staging; 2],
    /// Which of `staging` the next step reads back through, and which are awaiting a readback.
    next_staging: usize,
    staging_busy: [bool; 2],
    /// Logit rows of the last step submitted: what `PREVIOUS_ID | r` may refer to in the next.
    previous_rows: usize,
    /// See [`ForwardPass::readback_resolved_s`] (0: none yet).
    readback_resolved_s: f64,
    /// The engine's check of itself on this adapter, where it ran (`verify::before_run`): what a
    /// run's record says about it.
    pub verified: Option<super::verify::Verification>,
    /// Where [`ForwardPass::load`]'s time went.
    pub load_times: LoadTimes,
    /// Dispatches in the last step recorded (one compute pass): what `speed` attributes a step's
    /// time to beside its bytes.
    pub step_dispatches: usize,
    /// Extra one-workgroup dispatches recorded into every step (0 but in `speed
    /// --planted-dispatches`): a known count whose time checks the roofline's cost of a dispatch
    /// against a real step's.
    pub planted_dispatches: usize,
    /// How the kernels were chosen, where a trial chose them (`trial::run`): what a run's record
    /// says about it.
    pub trial: Option<super::trial::Trial>,
}

/// Where [`ForwardPass::load`]'s time went, in seconds on [`crate::clock`]; the edges add what
/// came before it (download, parsing) to make a run's time to ready (`bench::record::ready`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LoadTimes {
    /// Waiting for the source's matrix rows ([`weights::ModelWeights::read_s`]): a disk or
    /// browser-cache read, or weights generated on the host.
    pub read_s: f64,
    /// The bytes those rows came to (0 where the GPU generates the weights itself).
    pub read_bytes: u64,
    /// The rest of the weights' way onto the GPU until its queue drained (writes, quantising),
    /// then the KV cache, the step's buffers and bind groups.
    pub upload_s: f64,
    /// Creating the compute pipelines.
    pub pipelines_s: f64,
    /// The first step (one token, thrown away: [`ForwardPass::warm_up`]), until its id is read
    /// back: where most drivers compile the pipelines, and the engine's first token.
    pub first_step_s: f64,
}

impl ForwardPass {
    /// Uploads the weights and builds everything a step needs.
    pub async fn load<P: TensorProvider>(
        gpu: SharedGpu,
        src: &P,
        options: &EngineOptions,
        progress: weights::UploadProgress<'_>,
    ) -> Result<ForwardPass> {
        // Allocation failures (a model too big for this GPU's memory) become errors, not panics.
        let oom = gpu.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let loaded = Self::load_unscoped(gpu.clone(), src, options, progress).await;
        if let Some(e) = oom.pop().await {
            return Err(Error::AdapterLimit(format!("out of GPU memory while loading the model: {e}")));
        }
        // Validation errors and a lost device arrive through the device's callbacks (see
        // `Gpu::fault`); they outrank whatever the load itself returned.
        gpu.check()?;
        loaded
    }

    async fn load_unscoped<P: TensorProvider>(
        gpu: SharedGpu,
        src: &P,
        options: &EngineOptions,
        progress: weights::UploadProgress<'_>,
    ) -> Result<ForwardPass> {
        let started_s = now_s();
        let cfg = src.config().clone();
        let limits = plan(&gpu, &cfg, options)?;
        let kernel_options =
            KernelOptions { format: options.weights, ..KernelOptions::for_gpu(&gpu, &options.kernels) };
        let weights = weights::upload(&gpu, src, kernel_options.weights, options.weights, progress).await?;
        // The writes are queued: drained here, they count as the upload, not as the first step.
        gpu.sync().await?;
        let kv = KvCache::new(&gpu, &cfg, limits.block_size, limits.num_blocks)?;
        let pipelines_from_s = now_s();
        let kernels = Kernels::with_options(&gpu, kernel_options);
        let pipelines_s = now_s() - pipelines_from_s;
        // `s`: logit rows, which bound everything sized per sampled token.
        let (t, s) = (limits.max_batched_tokens as u64, limits.max_logit_rows as u64);
        let f = 4u64;
        let (h, q, kvd, i) =
            (cfg.hidden_size as u64, cfg.q_dim() as u64, cfg.kv_dim() as u64, cfg.intermediate_size as u64);
        let identity: Vec<u32> = (0..t as u32).collect();
        let buffers = Buffers {
            tokens: gpu.storage_buffer("tokens", t * 16),
            identity: gpu.storage_with("identity rows", bytemuck::cast_slice(&identity)),
            logit_rows: gpu.storage_buffer("logit rows", s * 4),
            block_tables: gpu
                .storage_buffer("block tables", limits.max_seqs as u64 * limits.max_blocks_per_seq as u64 * 4),
            inv_freq: gpu.storage_with("rope inv_freq", bytemuck::cast_slice(&inv_freq(cfg.head_dim, cfg.rope_theta))),
            x: gpu.storage_buffer("x (residual)", t * h * f),
            normed: gpu.storage_buffer("normed", t * h * f),
            qkv: gpu.storage_buffer("qkv", t * (q + 2 * kvd) * f),
            attn: gpu.storage_buffer("attention out", t * q * f),
            partials: gpu.storage_buffer("split attention partials", partials_floats(&cfg) as u64 * f),
            gate_up: gpu.storage_buffer("gate|up", t * 2 * i * f),
            act: gpu.storage_buffer("swiglu out", t * i * f),
            final_h: gpu.storage_buffer("final norm", s * h * f),
            logits: gpu.storage_buffer("logits", s * cfg.vocab_size as u64 * f),
            row_sample: gpu.storage_buffer("sampling settings", s * std::mem::size_of::<RowSample>() as u64),
            ids: gpu.storage_buffer("next ids", s * 4),
        };
        let groups = bind_all(&gpu, &kernels, &weights, &kv, &buffers);
        let staging = [0, 1].map(|i| Staging::new(&gpu.device, &format!("next ids readback {i}"), s * 4));
        let mut model = ForwardPass {
            gpu,
            cfg,
            weights,
            limits,
            kv,
            kernels,
            buffers,
            groups,
            staging,
            next_staging: 0,
            staging_busy: [false; 2],
            previous_rows: 0,
            readback_resolved_s: 0.0,
            verified: None,
            load_times: LoadTimes::default(),
            step_dispatches: 0,
            planted_dispatches: 0,
            trial: None,
        };
        let first_step_from_s = now_s();
        model.warm_up().await?;
        let first_step_s = now_s() - first_step_from_s;
        let (read_s, read_bytes) = (model.weights.read_s, model.weights.read_bytes);
        let upload_s = (first_step_from_s - started_s - pipelines_s - read_s).max(0.0);
        model.load_times = LoadTimes { read_s, read_bytes, upload_s, pipelines_s, first_step_s };
        Ok(model)
    }

    /// One throw-away step so that drivers compile every pipeline now, not during the first
    /// request (which would inflate its TTFT). It writes slot 0 of KV block 0, which any
    /// later user of that block overwrites before reading.
    async fn warm_up(&mut self) -> Result<()> {
        let batch = Batch {
            tokens: vec![[0, 0, 0, 0]],
            logit_rows: vec![0],
            block_tables: vec![vec![0]],
            ..Default::default()
        };
        self.step(&batch).await.map(|_| ())
    }

    /// Runs on `options` from the next step: another variant of the same kernels (`trial`), the
    /// weights as they are. Their storage and format are the load's: another would need them
    /// uploaded again, and is refused.
    pub async fn use_kernels(&mut self, options: KernelOptions) -> Result<()> {
        let now = self.kernels.options();
        if (options.weights, options.format, options.family) != (now.weights, now.format, now.family) {
            return Err(Error::Invalid(format!(
                "a kernel variant must keep the loaded weights' storage, format and kernel family ({} {} {})",
                now.weights.name(),
                now.format.name(),
                now.family.name()
            )));
        }
        if options != now {
            self.kernels = Kernels::with_options(&self.gpu, options);
            self.groups = bind_all(&self.gpu, &self.kernels, &self.weights, &self.kv, &self.buffers);
        }
        self.gpu.check()
    }

    /// The kernel choices this model runs with (for the run record).
    pub fn kernel_options(&self) -> crate::gpu::kernels::KernelOptions {
        self.kernels.options()
    }

    /// Runs one step and returns the next id of each logit row; a device fault (see
    /// [`Gpu::fault`]) is the step's error.
    pub async fn step(&mut self, batch: &Batch) -> Result<Vec<u32>> {
        let submitted = self.submit(batch)?;
        self.ids(submitted).await
    }

    /// Records and submits one step, and asks for its ids without waiting for them: the caller may
    /// submit the next step (whose tokens may read these ids on the GPU, `PREVIOUS_ID | r`) before
    /// awaiting [`ForwardPass::ids`]. At most two steps may await their ids at once: a third
    /// submission abandons the oldest readback (as when a `Submitted` was dropped unread).
    pub fn submit(&mut self, batch: &Batch) -> Result<Submitted> {
        self.gpu.check()?;
        let submitted = self.submit_unchecked(batch);
        self.checked(submitted)
    }

    /// The ids of a [`ForwardPass::submit`]ted step, once they are back on the CPU (natively: the
    /// device is polled until that step, not any later one, is done).
    pub async fn ids(&mut self, submitted: Submitted) -> Result<Vec<u32>> {
        let ids = self.ids_unchecked(submitted).await;
        self.checked(ids)
    }

    /// The device's fault, if it has one, in place of `result`: a readback that failed because
    /// the device was lost says so, and ids read after a validation error are not trusted.
    fn checked<T>(&self, result: Result<T>) -> Result<T> {
        self.gpu.check()?;
        result
    }

    fn submit_unchecked(&mut self, batch: &Batch) -> Result<Submitted> {
        let n = batch.logit_rows.len();
        let mut encoder = self.record(batch)?;
        self.previous_rows = n;
        if n == 0 {
            // A prefill chunk that needs no token: nothing to wait for (the queue keeps order).
            self.gpu.queue.submit([encoder.finish()]);
            return Ok(Submitted { read: None });
        }
        let slot = self.next_staging;
        if self.staging_busy[slot] {
            // Its reader was dropped unread (an engine dropped with a step in flight, at the end
            // of a stopped run): cancel that mapping so the buffer can take this step's ids.
            self.staging[slot].abandon();
        }
        self.next_staging = 1 - slot;
        let bytes = n as u64 * 4;
        self.staging[slot].copy_from(&mut encoder, &self.buffers.ids, bytes);
        let index = self.gpu.queue.submit([encoder.finish()]);
        // Asked for now, the mapping waits for this step only, not for the next one.
        let pending = self.staging[slot].begin_read(bytes);
        self.staging_busy[slot] = true;
        Ok(Submitted { read: Some((slot, pending, index)) })
    }

    async fn ids_unchecked(&mut self, submitted: Submitted) -> Result<Vec<u32>> {
        let Some((slot, pending, index)) = submitted.read else { return Ok(Vec::new()) };
        let read = self.staging[slot].finish_read(&self.gpu.device, pending, Some(index)).await;
        self.staging_busy[slot] = false;
        let (bytes, resolved_s) = read?;
        self.readback_resolved_s = resolved_s;
        Ok(bytemuck::pod_collect_to_vec(&bytes))
    }

    /// When the last [`ForwardPass::step`]'s ids readback resolved (its map callback ran), on the
    /// [`crate::clock`]; `None` before the first step that read ids back.
    pub fn readback_resolved_s(&self) -> Option<f64> {
        (self.readback_resolved_s > 0.0).then_some(self.readback_resolved_s)
    }

    /// Runs one step and returns the logits of each logit row, `(rows, vocab)` (tests, sampling checks).
    pub async fn step_logits(&mut self, batch: &Batch) -> Result<Vec<f32>> {
        self.gpu.check()?;
        let encoder = self.record(batch)?;
        self.previous_rows = batch.logit_rows.len();
        self.gpu.queue.submit([encoder.finish()]);
        let count = batch.logit_rows.len() * self.cfg.vocab_size;
        let logits = readback::read_f32(&self.gpu.device, &self.gpu.queue, &self.buffers.logits, count).await;
        self.checked(logits)
    }

    /// Runs one step kernel by kernel and returns each dispatch's wall time (see
    /// [`StepRecorder::profile`]); the results land in the same buffers as a normal step.
    pub async fn profile_step(&mut self, batch: &Batch) -> Result<(Vec<u32>, Vec<DispatchTime>)> {
        self.gpu.check()?;
        let profiled = self.profile_step_unchecked(batch).await;
        self.checked(profiled)
    }

    async fn profile_step_unchecked(&mut self, batch: &Batch) -> Result<(Vec<u32>, Vec<DispatchTime>)> {
        let rec = self.record_dispatches(batch)?;
        let times = rec.profile(&self.gpu).await?;
        let n = batch.logit_rows.len();
        self.previous_rows = n;
        if n == 0 {
            return Ok((Vec::new(), times));
        }
        let staging = Staging::new(&self.gpu.device, "profiled ids readback", n as u64 * 4);
        let mut encoder = self.gpu.device.create_command_encoder(&Default::default());
        staging.copy_from(&mut encoder, &self.buffers.ids, n as u64 * 4);
        self.gpu.queue.submit([encoder.finish()]);
        let (bytes, resolved_s) = staging.read_timed(&self.gpu.device, n as u64 * 4).await?;
        self.readback_resolved_s = resolved_s;
        Ok((bytemuck::pod_collect_to_vec(&bytes), times))
    }

    fn record(&mut self, batch: &Batch) -> Result<wgpu::CommandEncoder> {
        let rec = self.record_dispatches(batch)?;
        let dispatches = rec.dispatch_count();
        let mut encoder =
            self.gpu.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("step") });
        rec.encode(&self.gpu.queue, &mut encoder);
        self.step_dispatches = dispatches;
        Ok(encoder)
    }

    fn record_dispatches(&self, batch: &Batch) -> Result<StepRecorder<'_>> {
        let cfg = &self.cfg;
        let m = batch.tokens.len();
        let r = batch.logit_rows.len();
        let lim = &self.limits;
        if m == 0 || m > lim.max_batched_tokens || r > lim.max_logit_rows || batch.block_tables.len() > lim.max_seqs {
            return Err(Error::Invalid(format!(
                "step of {m} tokens, {r} logit rows, {} sequences exceeds the engine limits {lim:?}",
                batch.block_tables.len()
            )));
        }
        if let Some(t) = batch.tokens.iter().find(|t| t[0] & PREVIOUS_ID == 0 && t[0] as usize >= cfg.vocab_size) {
            return Err(Error::Prompt(format!(
                "token id {} is outside the vocabulary (size {})",
                t[0], cfg.vocab_size
            )));
        }
        if let Some(t) = batch
            .tokens
            .iter()
            .find(|t| t[0] & PREVIOUS_ID != 0 && (t[0] & !PREVIOUS_ID) as usize >= self.previous_rows)
        {
            return Err(Error::Invalid(format!(
                "token reads row {} of the previous step's ids, which had {} rows",
                t[0] & !PREVIOUS_ID,
                self.previous_rows
            )));
        }
        let q = &self.gpu.queue;
        let b = &self.buffers;
        q.write_buffer(&b.tokens, 0, bytemuck::cast_slice(&batch.tokens));
        q.write_buffer(&b.logit_rows, 0, bytemuck::cast_slice(&batch.logit_rows));
        let greedy = batch.sampling.iter().all(RowSample::is_greedy);
        if !greedy {
            q.write_buffer(&b.row_sample, 0, bytemuck::cast_slice(&batch.sampling));
        }
        let mut tables = vec![0u32; batch.block_tables.len() * lim.max_blocks_per_seq];
        for (s, table) in batch.block_tables.iter().enumerate() {
            tables[s * lim.max_blocks_per_seq..][..table.len()].copy_from_slice(table);
        }
        if !tables.is_empty() {
            q.write_buffer(&b.block_tables, 0, bytemuck::cast_slice(&tables));
        }

        let max_groups = self.gpu.limits.max_compute_workgroups_per_dimension;
        let mut rec = StepRecorder::new(&self.kernels, max_groups);
        let (h, hd) = (cfg.hidden_size, cfg.head_dim);
        let (nh, nkv) = (cfg.num_attention_heads, cfg.num_key_value_heads);
        let qkv_width = cfg.q_dim() + 2 * cfg.kv_dim();
        let eps = cfg.rms_norm_eps as f32;
        let w = &self.weights;
        let g = &self.groups;

        // 1. Embedding gather, one dispatch per row chunk of the table.
        for (chunk, group) in w.embed_tokens.chunks.iter().zip(&g.embed) {
            let p = EmbedParams {
                n_tokens: m as u32,
                hidden: h as u32,
                row_start: chunk.row_start as u32,
                row_count: chunk.rows as u32,
            };
            rec.dispatch(Kernel::Embed, group, &p, [groups(h / 2, 64), m as u32, 1]);
        }
        let norm = RmsNormParams { n_rows: m as u32, width: h as u32, eps, _pad: 0 };
        let heads = |eps_or_scale| HeadParams {
            n_tokens: m as u32,
            n_heads: nh as u32,
            n_kv_heads: nkv as u32,
            head_dim: hd as u32,
            qkv_width: qkv_width as u32,
            block_size: lim.block_size as u32,
            max_blocks: lim.max_blocks_per_seq as u32,
            eps_or_scale,
            splits: 1,
            token_begin: 0,
            direct: 0,
            eps,
        };
        // Contexts too long for one invocation, or few (token, head) pairs over a long context, are
        // split (flash-decoding) and merged; the GPU family tiles prefill runs over queries.
        let partials = (b.partials.size() / 4) as usize;
        let attention = attention_plan(&self.kernels.options(), nh, hd, &batch.tokens);
        // The GPU family folds each RMSNorm into the matmul after it and SwiGLU into down_proj
        // where its kernels serve this step's size (`KernelOptions::fuses`).
        let options = self.kernels.options();
        let inter = cfg.intermediate_size;
        let fuse_norm = options.fuses(Prologue::RmsNorm, m, h);
        let fuse_swiglu = options.fuses(Prologue::SwiGlu, m, inter);
        // Decode steps take the q/k norm, RoPE and KV write inside attention (`rope_in_attention`).
        let rope_fused = rope_in_attention(&options, hd, &batch.tokens);
        for (layer, lg) in w.layers.iter().zip(&g.layers) {
            let fused = lg.fused.as_ref();
            // 2. Attention: norm -> q|k|v -> per-head norm + RoPE + cache write -> attention -> o_proj (+= x).
            match fused.filter(|_| fuse_norm) {
                Some(f) => layer.qkv_proj.record_matmul_with(&mut rec, &f.qkv, m, false, Prologue::RmsNorm, eps),
                None => {
                    rec.dispatch(Kernel::RmsNorm, &lg.norm_in, &norm, [m as u32, 1, 1]);
                    layer.qkv_proj.record_matmul(&mut rec, &lg.qkv, m, false);
                }
            }
            let scale = heads(1.0 / (hd as f32).sqrt());
            match fused.filter(|_| rope_fused) {
                Some(f) => {
                    let split = (&f.attention_rope_split, &g.attention_merge);
                    record_attention_plan(&mut rec, &f.attention_rope, split, &scale, &attention, partials, true);
                }
                None => {
                    record_qk_norm_rope(&mut rec, &lg.rope, &heads(eps));
                    let split = (&lg.attention_split, &g.attention_merge);
                    record_attention_plan(&mut rec, &lg.attention, split, &scale, &attention, partials, false);
                }
            }
            layer.o_proj.record_matmul(&mut rec, &lg.o, m, true);
            // 3. MLP: norm -> gate|up -> SwiGLU -> down_proj (+= x).
            match fused.filter(|_| fuse_norm) {
                Some(f) => {
                    layer.gate_up_proj.record_matmul_with(&mut rec, &f.gate_up, m, false, Prologue::RmsNorm, eps)
                }
                None => {
                    rec.dispatch(Kernel::RmsNorm, &lg.norm_post, &norm, [m as u32, 1, 1]);
                    layer.gate_up_proj.record_matmul(&mut rec, &lg.gate_up, m, false);
                }
            }
            match fused.filter(|_| fuse_swiglu) {
                Some(f) => layer.down_proj.record_matmul_with(&mut rec, &f.down, m, true, Prologue::SwiGlu, 0.0),
                None => {
                    rec.dispatch(
                        Kernel::SwiGlu,
                        &lg.swiglu,
                        &PairParams { a: m as u32, b: inter as u32, _pad: [0; 2] },
                        [groups(inter, 64), m as u32, 1],
                    );
                    layer.down_proj.record_matmul(&mut rec, &lg.down, m, true);
                }
            }
        }
        // 4. Final norm of the rows that need logits, lm_head, argmax.
        if r > 0 {
            let p = RmsNormParams { n_rows: r as u32, width: h as u32, eps, _pad: 0 };
            rec.dispatch(Kernel::RmsNorm, &g.final_norm, &p, [r as u32, 1, 1]);
            w.lm_head().record_matmul(&mut rec, &g.lm_head, r, false);
            let p = PairParams { a: r as u32, b: cfg.vocab_size as u32, _pad: [0; 2] };
            if greedy {
                rec.dispatch(Kernel::Argmax, &g.argmax, &p, [r as u32, 1, 1]);
            } else {
                rec.dispatch(Kernel::Sample, &g.sample, &p, [r as u32, 1, 1]);
            }
        }
        // A measurement's plant (`speed --planted-dispatches N`): N one-workgroup dispatches, each
        // recomputing the final norm's first row as it already is (each writes what the next
        // reads, so each waits on a barrier, as a step's own do).
        let one = RmsNormParams { n_rows: 1, width: h as u32, eps, _pad: 0 };
        for _ in 0..self.planted_dispatches {
            rec.dispatch(Kernel::RmsNorm, &g.final_norm, &one, [1, 1, 1]);
        }
        Ok(rec)
    }
}

/// Floats of the split-attention partials buffer: [`PARTIALS_FLOATS`], or more where one token's
/// parts at the longest context need it, and at least a decode step's worth of split pairs.
pub(crate) fn partials_floats(cfg: &Qwen3Config) -> usize {
    let one_token = attention_min_partials(cfg.num_attention_heads, cfg.head_dim, cfg.max_position_embeddings);
    let decode = SPLIT_MAX_PAIRS * SPLITS_FOR_PARALLELISM * attention_part_floats(cfg.head_dim);
    PARTIALS_FLOATS.max(one_token).max(decode)
}

/// Engine sizes from the options, lowered to what the adapter's limits allow.
fn plan(gpu: &Gpu, cfg: &Qwen3Config, o: &EngineOptions) -> Result<EngineLimits> {
    if o.block_size == 0 || o.max_seqs == 0 || o.max_batched_tokens == 0 {
        return Err(Error::Invalid("block size, max batch and max batched tokens must be positive".into()));
    }
    let binding = gpu.max_binding();
    let widest_row = 4 * (2 * cfg.intermediate_size).max(cfg.q_dim() + 2 * cfg.kv_dim()).max(cfg.hidden_size) as u64;
    let max_tokens = ((binding / widest_row) as usize).min(o.max_batched_tokens).min(65_535);
    // A sequence's logit rows: 1, or 1 + K with speculative decoding.
    let rows_per_seq = 1 + o.speculation.max_draft();
    let logits_row = cfg.vocab_size as u64 * 4;
    let max_seqs = ((binding / (logits_row * rows_per_seq as u64)) as usize).min(o.max_seqs).min(max_tokens);
    if max_tokens == 0 || max_seqs == 0 {
        return Err(Error::AdapterLimit(format!(
            "one token's activations ({widest_row} bytes) or one sequence's logits ({rows_per_seq} rows of {logits_row} bytes) exceed maxStorageBufferBindingSize {binding}"
        )));
    }
    let max_blocks_per_seq = cfg.max_position_embeddings.div_ceil(o.block_size);
    // One row of the block tables per sequence; a long context with small blocks lowers max_seqs.
    limits::fits_binding("one sequence's block table", max_blocks_per_seq as u64 * 4, binding)?;
    let max_seqs = max_seqs.min((binding / (max_blocks_per_seq as u64 * 4)) as usize);
    limits::fits_binding(
        &format!("split attention at max_position_embeddings {}", cfg.max_position_embeddings),
        partials_floats(cfg) as u64 * 4,
        binding,
    )?;
    let adapter_blocks = KvCache::max_blocks(gpu, cfg, o.block_size);
    if adapter_blocks == 0 {
        limits::fits_binding(
            &format!("one KV block of {} tokens", o.block_size),
            o.block_size as u64 * cfg.kv_dim() as u64 * 4,
            binding,
        )?;
    }
    let wanted = o.kv_blocks.unwrap_or_else(|| {
        let budget = (o.kv_budget_bytes / (KvCache::bytes_per_token(cfg) * o.block_size as u64)) as usize;
        budget.min(max_blocks_per_seq.saturating_mul(max_seqs)).max(1)
    });
    if o.kv_blocks.is_some() && wanted > adapter_blocks {
        return Err(Error::AdapterLimit(format!(
            "{wanted} KV blocks of {} tokens need more than maxStorageBufferBindingSize {binding} per layer (at most {adapter_blocks})",
            o.block_size
        )));
    }
    Ok(EngineLimits {
        max_batched_tokens: max_tokens,
        max_seqs,
        block_size: o.block_size,
        num_blocks: wanted.min(adapter_blocks),
        max_blocks_per_seq,
        speculation: o.speculation.clone(),
        max_logit_rows: (max_seqs * rows_per_seq).min(max_tokens),
        prefix_cache: o.prefix_cache,
        overlap: o.overlap_in_force(),
    })
}

fn bind_all(gpu: &Gpu, k: &Kernels, w: &ModelWeights, kv: &KvCache, b: &Buffers) -> Groups {
    let d = &gpu.device;
    let mm = |label: &str, x: &wgpu::Buffer, m: &Matrix, y: &wgpu::Buffer| -> Vec<wgpu::BindGroup> {
        m.chunks.iter().map(|c| k.bind(d, Kernel::Matmul, label, &[x, c, y])).collect()
    };
    let mm_norm = |label: &str, m: &Matrix, norm: &wgpu::Buffer, y: &wgpu::Buffer| -> Vec<wgpu::BindGroup> {
        m.chunks.iter().map(|c| k.bind(d, Kernel::MatmulGemvNorm, label, &[&b.x, c, y, norm])).collect()
    };
    // Only where they can run (`KernelOptions::fused`: the GPU family, unless turned off).
    let fused = k.options().fused && k.options().family == KernelFamily::Gpu;
    let layers = w
        .layers
        .iter()
        .enumerate()
        .map(|(l, lw)| {
            let attention_rope = |label: &str, out: &wgpu::Buffer| {
                let (qkv, ks, vs) = (&b.qkv, &kv.k[l], &kv.v[l]);
                k.bind(
                    d,
                    Kernel::AttentionSplitGpuRope,
                    label,
                    &[qkv, &b.tokens, &b.block_tables, ks, vs, out, &lw.qk_norm, &b.inv_freq],
                )
            };
            LayerGroups {
                norm_in: k.bind(
                    d,
                    Kernel::RmsNorm,
                    &format!("L{l} input_layernorm"),
                    &[&b.x, &b.identity, &lw.input_layernorm, &b.normed],
                ),
                qkv: mm(&format!("L{l} qkv_proj"), &b.normed, &lw.qkv_proj, &b.qkv),
                rope: k.bind(
                    d,
                    Kernel::QkNormRope,
                    &format!("L{l} qk_norm_rope"),
                    &[&b.qkv, &b.tokens, &b.block_tables, &lw.qk_norm, &b.inv_freq, &kv.k[l], &kv.v[l]],
                ),
                attention: k.bind(
                    d,
                    Kernel::Attention,
                    &format!("L{l} attention"),
                    &[&b.qkv, &b.tokens, &b.block_tables, &kv.k[l], &kv.v[l], &b.attn],
                ),
                attention_split: k.bind(
                    d,
                    Kernel::AttentionSplit,
                    &format!("L{l} attention split"),
                    &[&b.qkv, &b.tokens, &b.block_tables, &kv.k[l], &kv.v[l], &b.partials],
                ),
                o: mm(&format!("L{l} o_proj"), &b.attn, &lw.o_proj, &b.x),
                norm_post: k.bind(
                    d,
                    Kernel::RmsNorm,
                    &format!("L{l} post_attention_layernorm"),
                    &[&b.x, &b.identity, &lw.post_attention_layernorm, &b.normed],
                ),
                gate_up: mm(&format!("L{l} gate_up_proj"), &b.normed, &lw.gate_up_proj, &b.gate_up),
                swiglu: k.bind(d, Kernel::SwiGlu, &format!("L{l} swiglu"), &[&b.gate_up, &b.act]),
                down: mm(&format!("L{l} down_proj"), &b.act, &lw.down_proj, &b.x),
                fused: fused.then(|| FusedGroups {
                    qkv: mm_norm(&format!("L{l} input_layernorm+qkv_proj"), &lw.qkv_proj, &lw.input_layernorm, &b.qkv),
                    gate_up: mm_norm(
                        &format!("L{l} post_attention_layernorm+gate_up_proj"),
                        &lw.gate_up_proj,
                        &lw.post_attention_layernorm,
                        &b.gate_up,
                    ),
                    down: mm(&format!("L{l} swiglu+down_proj"), &b.gate_up, &lw.down_proj, &b.x),
                    attention_rope: attention_rope(&format!("L{l} attention+rope"), &b.attn),
                    attention_rope_split: attention_rope(&format!("L{l} attention+rope split"), &b.partials),
                }),
            }
        })
        .collect();
    Groups {
        embed: w
            .embed_tokens
            .chunks
            .iter()
            .map(|c| k.bind(d, Kernel::Embed, "embed_tokens", &[&b.tokens, c, &b.x, &b.ids]))
            .collect(),
        layers,
        attention_merge: k.bind(d, Kernel::AttentionMerge, "attention merge", &[&b.partials, &b.attn]),
        final_norm: k.bind(d, Kernel::RmsNorm, "final norm", &[&b.x, &b.logit_rows, &w.norm, &b.final_h]),
        lm_head: mm("lm_head", &b.final_h, w.lm_head(), &b.logits),
        argmax: k.bind(d, Kernel::Argmax, "argmax", &[&b.logits, &b.ids]),
        sample: k.bind(d, Kernel::Sample, "sample", &[&b.logits, &b.row_sample, &b.ids]),
    }
}
