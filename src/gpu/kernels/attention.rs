//! Attention: causal GQA over the paged KV cache — how a step's tokens are cut into ranges and
//! parts (the loop budget of llvmpipe, the parallelism of a decode step, the tiled prefill kernel)
//! and how each range is recorded (attention.wgsl, attention_merge.wgsl).

use super::groups;
use super::options::{KernelFamily, KernelOptions};
use super::params::HeadParams;
use super::recorder::StepRecorder;
use super::registry::Kernel;

/// Loop iterations one shader invocation may run on Mesa's llvmpipe (lavapipe): its
/// `loop_limiter` (`LP_MAX_TGSI_LOOP_ITERATIONS`, gallivm) is one counter per invocation, set to
/// 65,535 and decremented at the end of every iteration of every loop; at zero every loop exits
/// early, silently. Kernels keep their iterations per invocation under half of it.
pub const LLVMPIPE_LOOP_BUDGET: usize = 65_535 / 2;

/// Context positions one attention invocation may walk: each position costs head_dim / 2 + 1
/// loop iterations (attention.wgsl, vec4 loops), plus head_dim / 2 around the walk.
/// (Qwen3, head_dim 128: 503 positions.) Longer contexts are split.
pub fn attention_max_positions(head_dim: usize) -> usize {
    (LLVMPIPE_LOOP_BUDGET - head_dim / 2) / (head_dim / 2 + 1)
}

/// Steps with at most this many (token, head) pairs split contexts of [`SPLIT_MIN_CONTEXT`]+
/// positions [`SPLITS_FOR_PARALLELISM`] ways, so that the whole adapter works on a decode step.
pub const SPLIT_MAX_PAIRS: usize = 512;
pub const SPLIT_MIN_CONTEXT: usize = 128;
pub const SPLITS_FOR_PARALLELISM: usize = 16;

/// Floats per part in the partials buffer: running max, running sum, then head_dim accumulators.
pub fn attention_part_floats(head_dim: usize) -> usize {
    head_dim + 2
}

/// Positions one workgroup of `attention_split_gpu` scores (its workgroup memory, attention.wgsl).
pub const ATTENTION_GPU_PART: usize = 512;
/// The GPU family splits a context so that each part has at least this many positions.
pub const ATTENTION_GPU_MIN_PART: usize = 64;

/// `attention_prefill_gpu` (attention.wgsl): q / accumulator vec4 columns per lane, the most keys
/// of one staged block, and the vec4 of its workgroup K (then V) block.
pub const PREFILL_SLICE: usize = 8;
pub const PREFILL_KEYS: usize = 16;
pub const PREFILL_KV4: usize = 512;
/// Its loop iterations per invocation (llvmpipe's budget): the lanes, q and output loops, and per
/// key block the K and V staging (at most PREFILL_KV4 / 64 each), three PREFILL_KEYS x
/// PREFILL_SLICE nests (dots, scores, P . V), the weights, the rescale and the block loop itself.
const PREFILL_SETUP_LOOPS: usize = 3 + 2 * PREFILL_SLICE + 8;
const PREFILL_BLOCK_LOOPS: usize =
    2 * (PREFILL_KV4 / 64) + 3 * PREFILL_KEYS * (1 + PREFILL_SLICE) + PREFILL_KEYS + PREFILL_SLICE + 1;
/// Runs of at least this many step tokens of one sequence at consecutive positions (prefill
/// chunks) take the GPU family's tiled prefill attention; shorter ones the workgroup per
/// (token, head, part).
pub const ATTENTION_PREFILL_MIN_RUN: usize = 16;
/// The tiled kernel splits contexts further while a run has fewer (tile, head) workgroups than
/// this, into parts of at least [`PREFILL_MIN_PART`] positions (up to [`SPLITS_FOR_PARALLELISM`]).
const PREFILL_MIN_WORKGROUPS: usize = 256;
const PREFILL_MIN_PART: usize = 256;

/// Queries per workgroup tile and keys per staged block of `attention_prefill_gpu` at `head_dim`
/// (mirrors the kernel: 64 lanes, L lanes a query with L * PREFILL_SLICE vec4 >= head_dim / 4).
pub fn attention_prefill_tile(head_dim: usize) -> (usize, usize) {
    let hd4 = head_dim / 4;
    let lanes = hd4.div_ceil(PREFILL_SLICE).next_power_of_two();
    (64 / lanes, PREFILL_KEYS.min(PREFILL_KV4 / hd4))
}

/// Context positions one part of `attention_prefill_gpu` may walk within the loop budget
/// (head_dim 128: 1,104).
pub fn attention_prefill_max_positions(head_dim: usize) -> usize {
    (LLVMPIPE_LOOP_BUDGET - PREFILL_SETUP_LOOPS) / PREFILL_BLOCK_LOOPS * attention_prefill_tile(head_dim).1
}

/// Loop iterations of the longest part `attention_prefill_gpu` walks at `head_dim`.
pub fn attention_prefill_walk(head_dim: usize) -> usize {
    let blocks = attention_prefill_max_positions(head_dim).div_ceil(attention_prefill_tile(head_dim).1);
    PREFILL_SETUP_LOOPS + blocks * PREFILL_BLOCK_LOOPS
}

/// Parts each context of a tiled prefill run of `n_tokens` is split into: enough for the loop
/// budget, and more while the run has few workgroups.
pub fn attention_prefill_splits(n_tokens: usize, n_heads: usize, head_dim: usize, longest_context: usize) -> usize {
    let (per_tile, most) = (attention_prefill_tile(head_dim).0, attention_prefill_max_positions(head_dim));
    prefill_splits(n_tokens.div_ceil(per_tile) * n_heads, most, longest_context)
}

/// `attention_prefill_cpu` (attention.wgsl): queries per invocation (written out by hand there).
pub const PREFILL_CPU_QUERIES: usize = 4;

/// Context positions one part of `attention_prefill_cpu` may walk within the loop budget: the
/// q and output loops (head_dim / 4 each, the output once per query), then per position the
/// score and accumulator loops and the position loop itself (head_dim 128: 501).
pub fn attention_prefill_cpu_max_positions(head_dim: usize) -> usize {
    let hd4 = head_dim / 4;
    (LLVMPIPE_LOOP_BUDGET - (1 + PREFILL_CPU_QUERIES) * hd4) / (2 * hd4 + 1)
}

/// [`attention_prefill_splits`] for the CPU family's tiled kernel.
pub fn attention_prefill_cpu_splits(n_tokens: usize, n_heads: usize, head_dim: usize, longest_context: usize) -> usize {
    let most = attention_prefill_cpu_max_positions(head_dim);
    prefill_splits(n_tokens.div_ceil(PREFILL_CPU_QUERIES) * n_heads, most, longest_context)
}

/// Parts for a tiled prefill run of `workgroups` (tile, head) pairs whose longest context is
/// `longest_context`, when a part may walk at most `most` positions.
fn prefill_splits(workgroups: usize, most: usize, longest_context: usize) -> usize {
    let needed = longest_context.div_ceil(most).max(1);
    let for_parallelism = if workgroups < PREFILL_MIN_WORKGROUPS {
        (longest_context / PREFILL_MIN_PART).clamp(1, SPLITS_FOR_PARALLELISM)
    } else {
        1
    };
    needed.max(for_parallelism)
}

/// How a step's attention is recorded: the step's tokens cut into ranges, each
/// `(tokens, tiled)`. A tiled range is a run of at least [`ATTENTION_PREFILL_MIN_RUN`] tokens of
/// one sequence at consecutive positions; the tokens between them (decodes, short chunks) are
/// gathered into untiled ranges.
pub fn attention_ranges(tokens: &[[u32; 4]]) -> Vec<(std::ops::Range<usize>, bool)> {
    let mut ranges: Vec<(std::ops::Range<usize>, bool)> = Vec::new();
    let mut start = 0;
    while start < tokens.len() {
        let mut end = start + 1;
        while end < tokens.len() && tokens[end][2] == tokens[start][2] && tokens[end][1] == tokens[end - 1][1] + 1 {
            end += 1;
        }
        let tiled = end - start >= ATTENTION_PREFILL_MIN_RUN;
        match ranges.last_mut() {
            Some((last, false)) if !tiled => last.end = end,
            _ => ranges.push((start..end, tiled)),
        }
        start = end;
    }
    ranges
}

/// Parts each context of a step is split into, for the CPU family: 1 (one invocation per
/// (token, head)) unless the longest context is too long for one invocation or the step has few
/// pairs over a long context.
pub fn attention_splits(n_tokens: usize, n_heads: usize, head_dim: usize, longest_context: usize) -> usize {
    let needed = longest_context.div_ceil(attention_max_positions(head_dim)).max(1);
    let for_parallelism = if n_tokens * n_heads <= SPLIT_MAX_PAIRS && longest_context >= SPLIT_MIN_CONTEXT {
        SPLITS_FOR_PARALLELISM
    } else {
        1
    };
    needed.max(for_parallelism)
}

/// Parts for the GPU family (a workgroup each): no part over [`ATTENTION_GPU_PART`] positions (nor
/// the loop budget's limit), and, for steps of few pairs, up to [`SPLITS_FOR_PARALLELISM`] parts
/// of at least [`ATTENTION_GPU_MIN_PART`] positions.
pub fn attention_splits_gpu(n_tokens: usize, n_heads: usize, head_dim: usize, longest_context: usize) -> usize {
    let part = attention_max_positions(head_dim).min(ATTENTION_GPU_PART);
    let needed = longest_context.div_ceil(part).max(1);
    let for_parallelism = if n_tokens * n_heads <= SPLIT_MAX_PAIRS {
        longest_context.div_ceil(ATTENTION_GPU_MIN_PART).min(SPLITS_FOR_PARALLELISM)
    } else {
        1
    };
    needed.max(for_parallelism)
}

/// Partials-buffer floats a model needs at least: one token's parts at the longest context, in
/// either family.
pub fn attention_min_partials(n_heads: usize, head_dim: usize, max_context: usize) -> usize {
    let splits = attention_splits(1, n_heads, head_dim, max_context)
        .max(attention_splits_gpu(1, n_heads, head_dim, max_context))
        .max(attention_prefill_splits(1, n_heads, head_dim, max_context))
        .max(attention_prefill_cpu_splits(1, n_heads, head_dim, max_context));
    n_heads * splits * attention_part_floats(head_dim)
}

/// Records attention for the step's `tokens` (`p.n_tokens` of them, from token 0), in the ranges
/// of [`attention_ranges`], each by its own longest context: prefill runs through the family's
/// tiled kernel (split as [`attention_prefill_splits`] / [`attention_prefill_cpu_splits`] say),
/// the rest an invocation per (token, head, part) ([`attention_splits`]) or, in the GPU family, a
/// workgroup per part ([`attention_splits_gpu`]).
pub fn record_attention<'a>(
    rec: &mut StepRecorder<'a>,
    whole: &'a wgpu::BindGroup,
    split: (&'a wgpu::BindGroup, &'a wgpu::BindGroup),
    p: &HeadParams,
    tokens: &[[u32; 4]],
    partials_floats: usize,
) {
    let plan = attention_plan(&rec.kernels.options(), p.n_heads as usize, p.head_dim as usize, tokens);
    record_attention_plan(rec, whole, split, p, &plan, partials_floats, false);
}

/// Whether a step of `tokens` runs the q/k norm, RoPE and KV write inside attention
/// ([`Kernel::AttentionSplitGpuRope`], a dispatch a layer fewer) instead of `qk_norm_rope`: in the
/// GPU family with fusion on, where no two of the step's tokens share a sequence (decode: each
/// token's earlier keys are in the cache already, and one workgroup writes its own) and the head's
/// halves are whole vec4s (`head_dim % 8 == 0`).
pub fn rope_in_attention(options: &KernelOptions, head_dim: usize, tokens: &[[u32; 4]]) -> bool {
    if options.family != KernelFamily::Gpu || !options.fused || !head_dim.is_multiple_of(8) {
        return false;
    }
    let mut seqs: Vec<u32> = tokens.iter().map(|t| t[2]).collect();
    seqs.sort_unstable();
    seqs.windows(2).all(|w| w[0] != w[1])
}

/// One range of a step's attention ([`attention_plan`]): its tokens, whether the tiled prefill
/// kernel takes them, and the parts each context is split into.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttentionRange {
    pub tokens: std::ops::Range<usize>,
    pub tiled: bool,
    pub splits: usize,
}

/// How [`record_attention`] records a step's `tokens`: the same for every layer, so the engine
/// works it out once per step ([`record_attention_plan`] per layer).
pub fn attention_plan(
    options: &KernelOptions,
    n_heads: usize,
    head_dim: usize,
    tokens: &[[u32; 4]],
) -> Vec<AttentionRange> {
    let longest = |range: &[[u32; 4]]| range.iter().map(|t| t[1] as usize + 1).max().unwrap_or(0);
    let gpu_family = options.family == KernelFamily::Gpu;
    attention_ranges(tokens)
        .into_iter()
        .map(|(range, tiled)| {
            let (count, context) = (range.len(), longest(&tokens[range.clone()]));
            let tiled = tiled && options.prefill_tiles;
            let splits = match (tiled, gpu_family) {
                (true, true) => attention_prefill_splits(count, n_heads, head_dim, context),
                (true, false) => attention_prefill_cpu_splits(count, n_heads, head_dim, context),
                (false, true) => attention_splits_gpu(count, n_heads, head_dim, context),
                (false, false) => attention_splits(count, n_heads, head_dim, context),
            };
            AttentionRange { tokens: range, tiled, splits }
        })
        .collect()
}

/// Records one layer's attention as `plan` (from [`attention_plan`] for this step) says; with
/// `rope` (a step [`rope_in_attention`] allows), through [`Kernel::AttentionSplitGpuRope`], whose
/// bind groups `whole` and `split.0` are then.
pub fn record_attention_plan<'a>(
    rec: &mut StepRecorder<'a>,
    whole: &'a wgpu::BindGroup,
    split: (&'a wgpu::BindGroup, &'a wgpu::BindGroup),
    p: &HeadParams,
    plan: &[AttentionRange],
    partials_floats: usize,
    rope: bool,
) {
    for r in plan {
        let p = HeadParams { n_tokens: r.tokens.len() as u32, token_begin: r.tokens.start as u32, ..*p };
        if r.tiled {
            assert!(!rope, "a prefill run's tokens share a sequence: no RoPE inside attention");
            record_attention_prefill(rec, whole, split, &p, r.splits, partials_floats);
        } else {
            let gpu_kernel = if rope { Kernel::AttentionSplitGpuRope } else { Kernel::AttentionSplitGpu };
            record_attention_split(rec, whole, split, &p, r.splits, partials_floats, gpu_kernel);
        }
    }
}

/// Records attention for tokens `p.token_begin ..` + `p.n_tokens` with each context split `splits`
/// ways: 1 is one invocation per (token, head) (`attention`); more is split-and-merge through the
/// partials buffer (`partials_floats` long), over as many token ranges as it takes to fit. The GPU
/// family runs a workgroup per part (`attention_split_gpu`), which with one part writes the output
/// itself (no merge). The caller keeps each part within [`attention_max_positions`] (and
/// [`ATTENTION_GPU_PART`] for the GPU family). `gpu_kernel` is the GPU family's: `AttentionSplitGpu`
/// or, for a step [`rope_in_attention`] allows, `AttentionSplitGpuRope`.
pub fn record_attention_split<'a>(
    rec: &mut StepRecorder<'a>,
    whole: &'a wgpu::BindGroup,
    (parts, merge): (&'a wgpu::BindGroup, &'a wgpu::BindGroup),
    p: &HeadParams,
    splits: usize,
    partials_floats: usize,
    gpu_kernel: Kernel,
) {
    let (n_tokens, n_heads) = (p.n_tokens as usize, p.n_heads as usize);
    let gpu_family = rec.kernels.options.family == KernelFamily::Gpu;
    if splits <= 1 && !gpu_family {
        let p = HeadParams { splits: 1, direct: 0, ..*p };
        rec.dispatch(Kernel::Attention, whole, &p, [groups(n_tokens * n_heads, 64), 1, 1]);
        return;
    }
    if splits <= 1 {
        // One part per (token, head): the workgroup's softmax is the whole one, written straight
        // to the output through `attention`'s bind group (same bindings), no partials, no merge.
        let p = HeadParams { splits: 1, direct: 1, ..*p };
        let n = n_tokens * n_heads;
        let x = n.min(rec.max_groups as usize);
        rec.dispatch(gpu_kernel, whole, &p, [x as u32, groups(n, x), 1]);
        return;
    }
    let max_groups = rec.max_groups as usize;
    let split = (parts, merge);
    if gpu_family {
        record_parts_and_merge(rec, (gpu_kernel, 1), split, p, splits, partials_floats, |count| {
            // A workgroup per part, numbered across x and y (over 65,535 of them in long chunks).
            let n = count * n_heads * splits;
            let x = n.min(max_groups);
            [x as u32, groups(n, x), 1]
        });
    } else {
        record_parts_and_merge(rec, (Kernel::AttentionSplit, 1), split, p, splits, partials_floats, |count| {
            [groups(count * n_heads * splits, 64), 1, 1]
        });
    }
}

/// Records `kernel` writing partials for tokens `p.token_begin ..` + `p.n_tokens`, each context in
/// `splits` parts, then the merge, over as many token ranges as it takes for the partials to fit
/// `partials_floats` (whole multiples of `tile` tokens where the buffer holds them);
/// `workgroups(count)` sizes a range's dispatch.
fn record_parts_and_merge<'a>(
    rec: &mut StepRecorder<'a>,
    (kernel, tile): (Kernel, usize),
    (parts, merge): (&'a wgpu::BindGroup, &'a wgpu::BindGroup),
    p: &HeadParams,
    splits: usize,
    partials_floats: usize,
    workgroups: impl Fn(usize) -> [u32; 3],
) {
    let (n_tokens, n_heads, head_dim) = (p.n_tokens as usize, p.n_heads as usize, p.head_dim as usize);
    let per_token = n_heads * splits * attention_part_floats(head_dim);
    let fits = partials_floats / per_token;
    assert!(fits > 0, "partials buffer of {partials_floats} floats cannot hold one token's {per_token}");
    let range = if fits >= tile { fits / tile * tile } else { fits };
    for begin in (0..n_tokens).step_by(range) {
        let count = range.min(n_tokens - begin);
        let p = HeadParams {
            n_tokens: count as u32,
            splits: splits as u32,
            token_begin: p.token_begin + begin as u32,
            direct: 0,
            ..*p
        };
        rec.dispatch(kernel, parts, &p, workgroups(count));
        rec.dispatch(Kernel::AttentionMerge, merge, &p, [groups(count * n_heads * head_dim, 64), 1, 1]);
    }
}

/// Records the tiled prefill attention (`attention_prefill_gpu`, or `attention_prefill_cpu` in the
/// CPU family) for tokens `p.token_begin ..` + `p.n_tokens`, which must be one sequence at
/// consecutive positions, each context split `splits` ways (within
/// [`attention_prefill_max_positions`] / [`attention_prefill_cpu_max_positions`]): one part writes
/// the output itself; more go through the partials buffer and the merge, in token ranges of whole
/// tiles that fit it.
pub fn record_attention_prefill<'a>(
    rec: &mut StepRecorder<'a>,
    whole: &'a wgpu::BindGroup,
    split: (&'a wgpu::BindGroup, &'a wgpu::BindGroup),
    p: &HeadParams,
    splits: usize,
    partials_floats: usize,
) {
    let (n_tokens, n_heads, head_dim) = (p.n_tokens as usize, p.n_heads as usize, p.head_dim as usize);
    let (kernel, per_tile) = match rec.kernels.options.family {
        KernelFamily::Gpu => (Kernel::AttentionPrefillGpu, attention_prefill_tile(head_dim).0),
        KernelFamily::Software => (Kernel::AttentionPrefillCpu, PREFILL_CPU_QUERIES),
    };
    let max_groups = rec.max_groups as usize;
    let gpu_family = rec.kernels.options.family == KernelFamily::Gpu;
    let workgroups = |count: usize, splits: usize| {
        // A workgroup (GPU family) or an invocation (CPU family) per (tile, head, part).
        let n = count.div_ceil(per_tile) * n_heads * splits;
        let n = if gpu_family { n } else { n.div_ceil(64) };
        let x = n.min(max_groups);
        [x as u32, groups(n, x), 1]
    };
    if splits <= 1 {
        let p = HeadParams { splits: 1, direct: 1, ..*p };
        let g = workgroups(n_tokens, 1);
        rec.dispatch(kernel, whole, &p, g);
        return;
    }
    // Whole tiles per range where the buffer holds one; a tile cut short still attends correctly.
    record_parts_and_merge(rec, (kernel, per_tile), split, p, splits, partials_floats, |count| {
        workgroups(count, splits)
    })
}
