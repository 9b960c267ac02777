// Causal attention over the paged KV cache with grouped-query heads, for the tokens
// token_begin .. token_begin + n_tokens of the step.
// Token t's q head h reads kv head h / (n_heads / n_kv_heads), attends to positions 0..=pos of its
// own sequence (the cache already holds this step's keys), scores scaled by 1/sqrt(head_dim),
// softmax in f32 computed online (running max and sum).
// out[t, h * head_dim + d] = sum_j softmax_j * V[j, d].
//
// No invocation walks more than a bounded number of positions: Mesa's llvmpipe (lavapipe) ends
// every loop of an invocation once that invocation has run 65,535 loop iterations in all, so a
// longer walk would silently stop early. The host splits longer contexts (`attention_split`).
// head_dim must be a multiple of 4 (q, k and v are read as vec4).

struct Params {
    n_tokens: u32,
    n_heads: u32,
    n_kv_heads: u32,
    head_dim: u32,
    qkv_width: u32,
    block_size: u32,
    max_blocks: u32,
    scale: f32,
    splits: u32,       // attention_split: parts each context is split into
    token_begin: u32,  // first token of this dispatch
    direct: u32,       // attention_split_gpu with splits = 1: 1 writes the output itself, no merge
    eps: f32,          // the q/k norms' epsilon (attention_rope.wgsl's prologue only)
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> qkv: array<vec4<f32>>;    // (step tokens, qkv_width / 4), q first
@group(0) @binding(2) var<storage, read> tokens: array<vec4<u32>>; // (step tokens): (id, position, seq, _)
@group(0) @binding(3) var<storage, read> block_tables: array<u32>; // (seqs, max_blocks)
// attention: (step tokens, n_heads * head_dim); attention_split: (n_tokens, n_heads, splits, head_dim + 2)
@group(0) @binding(6) var<storage, read_write> out: array<f32>;

// BEGIN x (how `attention_split_gpu` finds this step's q, k and v: here as rope.wgsl left them —
// q normalised and rotated in place in qkv, k and v in the cache. attention_rope.wgsl swaps in
// the form that does that itself, for decode steps (`Kernel::source`, `rope_in_attention`).)
@group(0) @binding(4) var<storage, read> k_cache: array<vec4<f32>>; // (blocks * block_size, n_kv_heads, head_dim / 4)
@group(0) @binding(5) var<storage, read> v_cache: array<vec4<f32>>; // (blocks * block_size, n_kv_heads, head_dim / 4)
const ROPE: bool = false;
// Token t's q head h ... (nothing to prepare here).
fn rope_prologue(li: u32, t: u32, h: u32, kv_head: u32, writer: bool) {
}
// Vec4 d of the q head, from its start in qkv (vec4s).
fn gpu_q(q_base: u32, d: u32) -> vec4<f32> {
    return qkv[q_base + d];
}
// Vec4 d of the step's own k and v (ROPE only: read from the cache here).
fn fresh_k(d: u32) -> vec4<f32> {
    return vec4<f32>(0.0);
}
fn fresh_v(d: u32) -> vec4<f32> {
    return vec4<f32>(0.0);
}
// END x

// MAX_HEAD_DIM4 (MAX_HEAD_DIM / 4) and GPU_PART come from the prelude (src/gpu/kernels.rs).

// Online softmax of token t's q head h over context positions begin..end. With `parts`, writes the
// unnormalised partial result [running max, running sum, acc[0..head_dim]] at `o_base`;
// otherwise the normalised head output at `o_base`.
// Loop iterations per invocation: head_dim / 2 + 1 per position, + head_dim / 2 around them.
fn attend(t: u32, h: u32, begin: u32, end: u32, o_base: u32, parts: bool) {
    let hd4 = p.head_dim / 4u;
    let kv_head = h / (p.n_heads / p.n_kv_heads);
    let table = tokens[t].z * p.max_blocks;

    var q: array<vec4<f32>, MAX_HEAD_DIM4>;
    var acc: array<vec4<f32>, MAX_HEAD_DIM4>;
    let q_base = t * (p.qkv_width / 4u) + h * hd4;
    for (var d = 0u; d < hd4; d++) {
        q[d] = qkv[q_base + d] * p.scale;
        acc[d] = vec4<f32>(0.0);
    }
    var running_max = -3.4e38;
    var running_sum = 0.0;
    for (var j = begin; j < end; j++) {
        let slot = block_tables[table + j / p.block_size] * p.block_size + j % p.block_size;
        let base = (slot * p.n_kv_heads + kv_head) * hd4;
        var score4 = vec4<f32>(0.0);
        for (var d = 0u; d < hd4; d++) {
            score4 += q[d] * k_cache[base + d];
        }
        let score = (score4.x + score4.y) + (score4.z + score4.w);
        let new_max = max(running_max, score);
        let correction = exp(running_max - new_max);
        let weight = exp(score - new_max);
        running_sum = running_sum * correction + weight;
        for (var d = 0u; d < hd4; d++) {
            acc[d] = acc[d] * correction + weight * v_cache[base + d];
        }
        running_max = new_max;
    }
    if (parts) {
        // An empty range (context shorter than the splits) leaves sum 0: it adds nothing in the merge.
        out[o_base] = running_max;
        out[o_base + 1u] = running_sum;
        for (var d = 0u; d < hd4; d++) {
            let o = o_base + 2u + 4u * d;
            out[o] = acc[d].x;
            out[o + 1u] = acc[d].y;
            out[o + 2u] = acc[d].z;
            out[o + 3u] = acc[d].w;
        }
    } else {
        let inv = 1.0 / running_sum;
        for (var d = 0u; d < hd4; d++) {
            let o = o_base + 4u * d;
            let v = acc[d] * inv;
            out[o] = v.x;
            out[o + 1u] = v.y;
            out[o + 2u] = v.z;
            out[o + 3u] = v.w;
        }
    }
}

@compute @workgroup_size(64)
fn attention(@builtin(global_invocation_id) gid: vec3<u32>) {
    let idx = gid.x;
    if (idx >= p.n_tokens * p.n_heads) {
        return;
    }
    let t = p.token_begin + idx / p.n_heads;
    let h = idx % p.n_heads;
    attend(t, h, 0u, tokens[t].y + 1u, (p.token_begin * p.n_heads + idx) * p.head_dim, false);
}

// The CPU family's prefill attention: an invocation takes CPU_QUERIES consecutive tokens of one
// sequence (a prefill run, dispatched on its own by `record_attention`) for one q head and one
// part of their context, so every K and V vec4 it loads serves CPU_QUERIES queries instead of
// one. On a software adapter a storage load is a per-lane loop (Mesa's llvmpipe), so loads, not
// FLOPs, set the speed: `attention` makes one per query and key element, this kernel a quarter.
// The queries' q and accumulators are function arrays (kept in the invocation's stack on a CPU);
// scores and softmax state are written out per query (registers). The causal mask is per query
// (key position < its own context); queries past the run repeat the last token and store
// nothing. With `splits` parts, part s covers the s-th of `splits` equal parts of the context of
// the group's last token and writes partials (as `attention_split`); with `direct` the output
// itself. Invocations are numbered gid.x + gid.y * 64 * num_workgroups.x over (tile, part, head),
// heads fastest (neighbouring lanes walk the same positions).
// Loop iterations per invocation: 2 * head_dim / 4 + 1 per position, plus head_dim / 4 for the
// q loop and head_dim / 4 per query stored (`attention_prefill_cpu_max_positions`). CPU_QUERIES
// must be 4: the kernel's queries are written out by hand.

// Query t's result for head h, part s (the output row with `direct`, else its partials).
fn cpu_store(t: u32, h: u32, s: u32, acc: ptr<function, array<vec4<f32>, MAX_HEAD_DIM4>>, running_max: f32, running_sum: f32) {
    let hd4 = p.head_dim / 4u;
    if (p.direct != 0u) {
        let inv = 1.0 / running_sum;
        let o_base = (t * p.n_heads + h) * p.head_dim;
        for (var d = 0u; d < hd4; d++) {
            let o = o_base + 4u * d;
            let v = (*acc)[d] * inv;
            out[o] = v.x;
            out[o + 1u] = v.y;
            out[o + 2u] = v.z;
            out[o + 3u] = v.w;
        }
        return;
    }
    // A part past this query's context leaves sum 0: it adds nothing in the merge.
    let o_base = (((t - p.token_begin) * p.n_heads + h) * p.splits + s) * (p.head_dim + 2u);
    out[o_base] = running_max;
    out[o_base + 1u] = running_sum;
    for (var d = 0u; d < hd4; d++) {
        let o = o_base + 2u + 4u * d;
        let v = (*acc)[d];
        out[o] = v.x;
        out[o + 1u] = v.y;
        out[o + 2u] = v.z;
        out[o + 3u] = v.w;
    }
}

@compute @workgroup_size(64)
fn attention_prefill_cpu(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let tiles = (p.n_tokens + CPU_QUERIES - 1u) / CPU_QUERIES;
    let idx = gid.x + gid.y * nwg.x * 64u;
    if (idx >= tiles * p.n_heads * p.splits) {
        return;
    }
    let h = idx % p.n_heads;
    let s = (idx / p.n_heads) % p.splits;
    let tile = idx / (p.n_heads * p.splits);
    let first = p.token_begin + tile * CPU_QUERIES;
    let last = min(first + CPU_QUERIES, p.token_begin + p.n_tokens) - 1u;
    let t0 = first;
    let t1 = min(first + 1u, last);
    let t2 = min(first + 2u, last);
    let t3 = min(first + 3u, last);
    // Positions each query sees (its own context).
    let c0 = tokens[t0].y + 1u;
    let c1 = tokens[t1].y + 1u;
    let c2 = tokens[t2].y + 1u;
    let c3 = tokens[t3].y + 1u;
    let tile_ctx = tokens[last].y + 1u;
    let part = (tile_ctx + p.splits - 1u) / p.splits;
    let begin = min(s * part, tile_ctx);
    let end = min(begin + part, tile_ctx);
    let hd4 = p.head_dim / 4u;
    let kv_head = h / (p.n_heads / p.n_kv_heads);
    let table = tokens[last].z * p.max_blocks;
    let row = p.qkv_width / 4u;
    var q0: array<vec4<f32>, MAX_HEAD_DIM4>; var q1: array<vec4<f32>, MAX_HEAD_DIM4>;
    var q2: array<vec4<f32>, MAX_HEAD_DIM4>; var q3: array<vec4<f32>, MAX_HEAD_DIM4>;
    var a0: array<vec4<f32>, MAX_HEAD_DIM4>; var a1: array<vec4<f32>, MAX_HEAD_DIM4>;
    var a2: array<vec4<f32>, MAX_HEAD_DIM4>; var a3: array<vec4<f32>, MAX_HEAD_DIM4>;
    for (var d = 0u; d < hd4; d++) {
        q0[d] = qkv[t0 * row + h * hd4 + d] * p.scale;
        q1[d] = qkv[t1 * row + h * hd4 + d] * p.scale;
        q2[d] = qkv[t2 * row + h * hd4 + d] * p.scale;
        q3[d] = qkv[t3 * row + h * hd4 + d] * p.scale;
        a0[d] = vec4<f32>(0.0);
        a1[d] = vec4<f32>(0.0);
        a2[d] = vec4<f32>(0.0);
        a3[d] = vec4<f32>(0.0);
    }
    var m0 = -3.4e38; var m1 = -3.4e38; var m2 = -3.4e38; var m3 = -3.4e38;
    var l0 = 0.0; var l1 = 0.0; var l2 = 0.0; var l3 = 0.0;
    for (var j = begin; j < end; j++) {
        let base = kv_base(table, j, kv_head, hd4);
        var s0 = vec4<f32>(0.0); var s1 = vec4<f32>(0.0); var s2 = vec4<f32>(0.0); var s3 = vec4<f32>(0.0);
        for (var d = 0u; d < hd4; d++) {
            let k = k_cache[base + d];
            s0 += q0[d] * k;
            s1 += q1[d] * k;
            s2 += q2[d] * k;
            s3 += q3[d] * k;
        }
        let n0 = select(m0, max(m0, (s0.x + s0.y) + (s0.z + s0.w)), j < c0);
        let n1 = select(m1, max(m1, (s1.x + s1.y) + (s1.z + s1.w)), j < c1);
        let n2 = select(m2, max(m2, (s2.x + s2.y) + (s2.z + s2.w)), j < c2);
        let n3 = select(m3, max(m3, (s3.x + s3.y) + (s3.z + s3.w)), j < c3);
        let f0 = exp(m0 - n0);
        let f1 = exp(m1 - n1);
        let f2 = exp(m2 - n2);
        let f3 = exp(m3 - n3);
        let w0 = select(0.0, exp((s0.x + s0.y) + (s0.z + s0.w) - n0), j < c0);
        let w1 = select(0.0, exp((s1.x + s1.y) + (s1.z + s1.w) - n1), j < c1);
        let w2 = select(0.0, exp((s2.x + s2.y) + (s2.z + s2.w) - n2), j < c2);
        let w3 = select(0.0, exp((s3.x + s3.y) + (s3.z + s3.w) - n3), j < c3);
        l0 = l0 * f0 + w0;
        l1 = l1 * f1 + w1;
        l2 = l2 * f2 + w2;
        l3 = l3 * f3 + w3;
        m0 = n0;
        m1 = n1;
        m2 = n2;
        m3 = n3;
        for (var d = 0u; d < hd4; d++) {
            let v = v_cache[base + d];
            a0[d] = a0[d] * f0 + w0 * v;
            a1[d] = a1[d] * f1 + w1 * v;
            a2[d] = a2[d] * f2 + w2 * v;
            a3[d] = a3[d] * f3 + w3 * v;
        }
    }
    cpu_store(t0, h, s, &a0, m0, l0);
    if (first + 1u <= last) {
        cpu_store(t1, h, s, &a1, m1, l1);
    }
    if (first + 2u <= last) {
        cpu_store(t2, h, s, &a2, m2, l2);
    }
    if (first + 3u <= last) {
        cpu_store(t3, h, s, &a3, m3, l3);
    }
}

// Split-context attention (flash-decoding), for contexts longer than one invocation may walk and
// for steps with few (token, head) pairs over long contexts, where one invocation per pair would
// leave most of the adapter idle: invocation (t, h, s) attends to the s-th of `splits` equal parts
// of token t's context and writes its partial result to `out` (here the partials buffer) at
// (((t - token_begin) * n_heads + h) * splits + s) * (head_dim + 2). `attention_merge` combines them.
@compute @workgroup_size(64)
fn attention_split(@builtin(global_invocation_id) gid: vec3<u32>) {
    let idx = gid.x;
    if (idx >= p.n_tokens * p.n_heads * p.splits) {
        return;
    }
    let s = idx % p.splits;
    let pair = idx / p.splits;
    let t = p.token_begin + pair / p.n_heads;
    let ctx = tokens[t].y + 1u;
    let part = (ctx + p.splits - 1u) / p.splits;
    let begin = min(s * part, ctx);
    attend(t, pair % p.n_heads, begin, min(begin + part, ctx), idx * (p.head_dim + 2u), true);
}

// The GPU family's split attention: one workgroup of 64 per (token, head, split) instead of one
// invocation, same partial results. Lanes take the part's positions in turn for the scores
// (q . k, at most GPU_PART positions, kept in workgroup memory), the workgroup reduces max and
// sum, then each lane owns one vec4 of head dimensions for a phase of the positions and the phases
// are added: V is read a row at a time by neighbouring lanes. Workgroups are numbered
// wg.x + wg.y * num_workgroups.x (more than 65,535 of them: long prefill chunks).
const GPU_LANES: u32 = 64u;
var<workgroup> gpu_scores: array<f32, GPU_PART>;
var<workgroup> gpu_reduce: array<f32, GPU_LANES>;
var<workgroup> gpu_acc: array<vec4<f32>, GPU_LANES>;

fn kv_base(table: u32, j: u32, kv_head: u32, hd4: u32) -> u32 {
    let slot = block_tables[table + j / p.block_size] * p.block_size + j % p.block_size;
    return (slot * p.n_kv_heads + kv_head) * hd4;
}

@compute @workgroup_size(64)
fn attention_split_gpu(
    @builtin(local_invocation_index) li: u32,
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    let idx = wg.x + wg.y * nwg.x;
    if (idx >= p.n_tokens * p.n_heads * p.splits) {
        return;
    }
    let s = idx % p.splits;
    let pair = idx / p.splits;
    let t = p.token_begin + pair / p.n_heads;
    let h = pair % p.n_heads;
    let ctx = tokens[t].y + 1u;
    let part = (ctx + p.splits - 1u) / p.splits;
    let begin = min(s * part, ctx);
    let n = min(begin + part, ctx) - begin;
    let hd4 = p.head_dim / 4u;
    let kv_head = h / (p.n_heads / p.n_kv_heads);
    let table = tokens[t].z * p.max_blocks;
    let q_base = t * (p.qkv_width / 4u) + h * hd4;
    // ROPE (decode steps: each sequence has one token here): q and this token's k are normalised
    // and rotated here, and its k and v written to the cache by one workgroup of the kv head's —
    // its first q head's, in the part that holds the position. The others take the token's own k
    // and v from the prologue, never from the cache being written.
    let own = ctx - 1u;
    if (ROPE) {
        let writer = h % (p.n_heads / p.n_kv_heads) == 0u && own >= begin && own < begin + n;
        rope_prologue(li, t, h, kv_head, writer);
    }

    var local_max = -3.4e38;
    for (var j = li; j < n; j += GPU_LANES) {
        let base = kv_base(table, begin + j, kv_head, hd4);
        let fresh = ROPE && begin + j == own;
        var s4 = vec4<f32>(0.0);
        for (var d = 0u; d < hd4; d++) {
            var k: vec4<f32>;
            if (fresh) {
                k = fresh_k(d);
            } else {
                k = k_cache[base + d];
            }
            s4 += gpu_q(q_base, d) * k;
        }
        let score = ((s4.x + s4.y) + (s4.z + s4.w)) * p.scale;
        gpu_scores[j] = score;
        local_max = max(local_max, score);
    }
    gpu_reduce[li] = local_max;
    workgroupBarrier();
    for (var w = GPU_LANES / 2u; w > 0u; w /= 2u) {
        if (li < w) {
            gpu_reduce[li] = max(gpu_reduce[li], gpu_reduce[li + w]);
        }
        workgroupBarrier();
    }
    let part_max = gpu_reduce[0];
    workgroupBarrier();
    var local_sum = 0.0;
    for (var j = li; j < n; j += GPU_LANES) {
        let e = exp(gpu_scores[j] - part_max);
        gpu_scores[j] = e;
        local_sum += e;
    }
    gpu_reduce[li] = local_sum;
    workgroupBarrier();
    for (var w = GPU_LANES / 2u; w > 0u; w /= 2u) {
        if (li < w) {
            gpu_reduce[li] += gpu_reduce[li + w];
        }
        workgroupBarrier();
    }
    let part_sum = gpu_reduce[0];

    let phases = GPU_LANES / hd4;
    let c = li % hd4;
    let phase = li / hd4;
    var acc = vec4<f32>(0.0);
    if (phase < phases) {
        for (var j = phase; j < n; j += phases) {
            var v: vec4<f32>;
            if (ROPE && begin + j == own) {
                v = fresh_v(c);
            } else {
                v = v_cache[kv_base(table, begin + j, kv_head, hd4) + c];
            }
            acc += gpu_scores[j] * v;
        }
    }
    gpu_acc[li] = acc;
    workgroupBarrier();
    if (phase == 0u) {
        for (var f = 1u; f < phases; f++) {
            acc += gpu_acc[f * hd4 + c];
        }
        if (p.direct != 0u) {
            // One part: this is the whole softmax; out is the attention output, not partials.
            let o = (t * p.n_heads + h) * p.head_dim + 4u * c;
            let r = acc / part_sum;
            out[o] = r.x;
            out[o + 1u] = r.y;
            out[o + 2u] = r.z;
            out[o + 3u] = r.w;
            return;
        }
        let o_base = idx * (p.head_dim + 2u);
        if (li == 0u) {
            out[o_base] = part_max;
            out[o_base + 1u] = part_sum;
        }
        let o = o_base + 2u + 4u * c;
        out[o] = acc.x;
        out[o + 1u] = acc.y;
        out[o + 2u] = acc.z;
        out[o + 3u] = acc.w;
    }
}

// The GPU family's prefill attention, tiled over queries: a workgroup of 64 takes one q head for a
// tile of consecutive tokens of one sequence (the host dispatches each prefill run of a step on
// its own: `record_attention`), so every K and V row it stages in workgroup memory serves the
// whole tile instead of one query. Lanes per query L = the power of two with L * PREFILL_SLICE
// vec4 >= head_dim / 4, queries per tile 64 / L (16 at head_dim 128); lane (i, c) owns q and the
// accumulator of query i at vec4 columns c, c + L, c + 2L, ... (interleaved, so the L lanes of a
// query read neighbouring words). Keys go in blocks of min(PREFILL_KEYS, PREFILL_KV4 / (head_dim
// / 4)): stage K, each lane's partial dots into workgroup memory, stage V while every lane of a
// query adds its L partials (the same sums in the same order, so the L lanes agree on the online
// softmax), then P . V. The causal mask is per query (key position < its own context). With
// `splits` parts, part s of a tile covers the s-th of `splits` equal parts of the context of the
// tile's last token and writes partials (as `attention_split`, merged by `attention_merge`);
// with one part (`direct`) it writes the output itself. Workgroups are numbered
// wg.x + wg.y * num_workgroups.x over (tile, head, part), heads of a tile adjacent (GQA heads
// that share K/V run together).
// Loop iterations per invocation (llvmpipe's budget, `attention_prefill_max_positions`): at most
// PREFILL_SETUP_LOOPS, plus PREFILL_BLOCK_LOOPS per key block.
var<workgroup> pf_kv: array<vec4<f32>, PREFILL_KV4>;
var<workgroup> pf_dots: array<f32, 1024>; // (64 / L queries, PREFILL_KEYS, L lanes)

@compute @workgroup_size(64)
fn attention_prefill_gpu(
    @builtin(local_invocation_index) li: u32,
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    let hd4 = p.head_dim / 4u;
    var lanes = 1u;
    while (lanes * PREFILL_SLICE < hd4) {
        lanes *= 2u;
    }
    let per_tile = 64u / lanes;
    let keys = min(PREFILL_KEYS, PREFILL_KV4 / hd4);
    let tiles = (p.n_tokens + per_tile - 1u) / per_tile;
    let idx = wg.x + wg.y * nwg.x;
    if (idx >= tiles * p.n_heads * p.splits) {
        return; // the whole workgroup: no barrier below is left waiting
    }
    let s = idx % p.splits;
    let h = (idx / p.splits) % p.n_heads;
    let tile = idx / (p.splits * p.n_heads);
    let i = li / lanes;
    let c = li % lanes;
    let first = p.token_begin + tile * per_tile;
    let end_token = p.token_begin + p.n_tokens;
    let last = min(first + per_tile, end_token) - 1u;
    let t = first + i;
    let live = t < end_token;
    // Positions this lane's query may see (0 for the lanes past the run: everything masked).
    var ctx = 0u;
    if (live) {
        ctx = tokens[t].y + 1u;
    }
    let tile_ctx = tokens[last].y + 1u;
    let part = (tile_ctx + p.splits - 1u) / p.splits;
    let begin = min(s * part, tile_ctx);
    let end = min(begin + part, tile_ctx);
    let kv_head = h / (p.n_heads / p.n_kv_heads);
    let table = tokens[last].z * p.max_blocks;

    var q: array<vec4<f32>, PREFILL_SLICE>;
    var acc: array<vec4<f32>, PREFILL_SLICE>;
    var weight: array<f32, PREFILL_KEYS>;
    let q_base = select(0u, t * (p.qkv_width / 4u) + h * hd4, live);
    for (var d = 0u; d < PREFILL_SLICE; d++) {
        let col = d * lanes + c;
        q[d] = select(vec4<f32>(0.0), qkv[q_base + col] * p.scale, live && col < hd4);
        acc[d] = vec4<f32>(0.0);
    }
    var running_max = -3.4e38;
    var running_sum = 0.0;
    for (var b0 = begin; b0 < end; b0 += keys) {
        let n = min(keys, end - b0);
        // K rows b0 .. b0 + n, neighbouring lanes on neighbouring words of a row.
        for (var e = li; e < n * hd4; e += 64u) {
            pf_kv[e] = k_cache[kv_base(table, b0 + e / hd4, kv_head, hd4) + e % hd4];
        }
        workgroupBarrier();
        for (var j = 0u; j < PREFILL_KEYS; j++) {
            var dot4 = vec4<f32>(0.0);
            for (var d = 0u; d < PREFILL_SLICE; d++) {
                let col = d * lanes + c;
                if (j < n && col < hd4) {
                    dot4 += q[d] * pf_kv[j * hd4 + col];
                }
            }
            pf_dots[(i * PREFILL_KEYS + j) * lanes + c] = (dot4.x + dot4.y) + (dot4.z + dot4.w);
        }
        workgroupBarrier();
        for (var e = li; e < n * hd4; e += 64u) {
            pf_kv[e] = v_cache[kv_base(table, b0 + e / hd4, kv_head, hd4) + e % hd4];
        }
        var block_max = -3.4e38;
        for (var j = 0u; j < PREFILL_KEYS; j++) {
            var score = 0.0;
            for (var l = 0u; l < PREFILL_SLICE; l++) {
                if (l < lanes) {
                    score += pf_dots[(i * PREFILL_KEYS + j) * lanes + l];
                }
            }
            weight[j] = score;
            if (j < n && b0 + j < ctx) {
                block_max = max(block_max, score);
            }
        }
        let new_max = max(running_max, block_max);
        let correction = exp(running_max - new_max);
        running_sum *= correction;
        for (var j = 0u; j < PREFILL_KEYS; j++) {
            var w = 0.0;
            if (j < n && b0 + j < ctx) {
                w = exp(weight[j] - new_max);
            }
            weight[j] = w;
            running_sum += w;
        }
        running_max = new_max;
        for (var d = 0u; d < PREFILL_SLICE; d++) {
            acc[d] *= correction;
        }
        workgroupBarrier();
        for (var j = 0u; j < PREFILL_KEYS; j++) {
            for (var d = 0u; d < PREFILL_SLICE; d++) {
                let col = d * lanes + c;
                if (j < n && col < hd4) {
                    acc[d] += weight[j] * pf_kv[j * hd4 + col];
                }
            }
        }
        workgroupBarrier();
    }
    if (!live) {
        return;
    }
    if (p.direct != 0u) {
        let inv = 1.0 / running_sum;
        for (var d = 0u; d < PREFILL_SLICE; d++) {
            let col = d * lanes + c;
            if (col < hd4) {
                let o = (t * p.n_heads + h) * p.head_dim + 4u * col;
                let v = acc[d] * inv;
                out[o] = v.x;
                out[o + 1u] = v.y;
                out[o + 2u] = v.z;
                out[o + 3u] = v.w;
            }
        }
        return;
    }
    // An empty part (a query whose context ends before it) leaves sum 0: it adds nothing in the merge.
    let o_base = (((t - p.token_begin) * p.n_heads + h) * p.splits + s) * (p.head_dim + 2u);
    if (c == 0u) {
        out[o_base] = running_max;
        out[o_base + 1u] = running_sum;
    }
    for (var d = 0u; d < PREFILL_SLICE; d++) {
        let col = d * lanes + c;
        if (col < hd4) {
            let o = o_base + 2u + 4u * col;
            out[o] = acc[d].x;
            out[o + 1u] = acc[d].y;
            out[o + 2u] = acc[d].z;
            out[o + 3u] = acc[d].w;
        }
    }
}
