// Causal attention over the paged KV cache with grouped-query heads.
// One invocation per (token, q head): q head h reads kv head h / (n_heads / n_kv_heads), attends to
// positions 0..=pos of its own sequence (the cache already holds this step's keys), scores scaled by
// 1/sqrt(head_dim), softmax in f32 computed online (running max and sum).
// out[t, h * head_dim + d] = sum_j softmax_j * V[j, d].

struct Params {
    n_tokens: u32,
    n_heads: u32,
    n_kv_heads: u32,
    head_dim: u32,
    qkv_width: u32,
    block_size: u32,
    max_blocks: u32,
    scale: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> qkv: array<f32>;          // (n_tokens, qkv_width), q first
@group(0) @binding(2) var<storage, read> tokens: array<vec4<u32>>; // (n_tokens): (id, position, seq, _)
@group(0) @binding(3) var<storage, read> block_tables: array<u32>; // (seqs, max_blocks)
@group(0) @binding(4) var<storage, read> k_cache: array<f32>;      // (blocks * block_size, n_kv_heads, head_dim)
@group(0) @binding(5) var<storage, read> v_cache: array<f32>;      // (blocks * block_size, n_kv_heads, head_dim)
@group(0) @binding(6) var<storage, read_write> out: array<f32>;    // (n_tokens, n_heads * head_dim)

const MAX_HEAD_DIM: u32 = 256u;

// Online softmax of token t's q head h over context positions begin..end. With `parts`, writes the
// unnormalised partial result [running max, running sum, acc[0..head_dim]] at `o_base`;
// otherwise the normalised head output at `o_base`.
fn attend(t: u32, h: u32, begin: u32, end: u32, o_base: u32, parts: bool) {
    let hd = p.head_dim;
    let kv_head = h / (p.n_heads / p.n_kv_heads);
    let table = tokens[t].z * p.max_blocks;

    var q: array<f32, MAX_HEAD_DIM>;
    var acc: array<f32, MAX_HEAD_DIM>;
    let q_base = t * p.qkv_width + h * hd;
    for (var d = 0u; d < hd; d++) {
        q[d] = qkv[q_base + d] * p.scale;
        acc[d] = 0.0;
    }
    var running_max = -3.4e38;
    var running_sum = 0.0;
    for (var j = begin; j < end; j++) {
        let slot = block_tables[table + j / p.block_size] * p.block_size + j % p.block_size;
        let base = (slot * p.n_kv_heads + kv_head) * hd;
        var score = 0.0;
        for (var d = 0u; d < hd; d++) {
            score += q[d] * k_cache[base + d];
        }
        let new_max = max(running_max, score);
        let correction = exp(running_max - new_max);
        let weight = exp(score - new_max);
        running_sum = running_sum * correction + weight;
        for (var d = 0u; d < hd; d++) {
            acc[d] = acc[d] * correction + weight * v_cache[base + d];
        }
        running_max = new_max;
    }
    if (parts) {
        // An empty range (context shorter than SPLITS) leaves sum 0: it adds nothing in the merge.
        out[o_base] = running_max;
        out[o_base + 1u] = running_sum;
        for (var d = 0u; d < hd; d++) {
            out[o_base + 2u + d] = acc[d];
        }
    } else {
        let inv = 1.0 / running_sum;
        for (var d = 0u; d < hd; d++) {
            out[o_base + d] = acc[d] * inv;
        }
    }
}

@compute @workgroup_size(64)
fn attention(@builtin(global_invocation_id) gid: vec3<u32>) {
    let idx = gid.x;
    if (idx >= p.n_tokens * p.n_heads) {
        return;
    }
    let t = idx / p.n_heads;
    let h = idx % p.n_heads;
    attend(t, h, 0u, tokens[t].y + 1u, idx * p.head_dim, false);
}

// Split-context attention (flash-decoding) for steps with few (token, head) pairs and long
// contexts, where one invocation per pair would leave most of the adapter idle: invocation
// (t, h, s) attends to the s-th of SPLITS equal parts of token t's context and writes its partial
// result to `out` (here the partials buffer) at ((t * n_heads + h) * SPLITS + s) * (head_dim + 2).
// `attention_merge` combines them.
const SPLITS: u32 = 16u;

@compute @workgroup_size(64)
fn attention_split(@builtin(global_invocation_id) gid: vec3<u32>) {
    let idx = gid.x;
    if (idx >= p.n_tokens * p.n_heads * SPLITS) {
        return;
    }
    let s = idx % SPLITS;
    let pair = idx / SPLITS;
    let t = pair / p.n_heads;
    let ctx = tokens[t].y + 1u;
    let part = (ctx + SPLITS - 1u) / SPLITS;
    let begin = min(s * part, ctx);
    attend(t, pair % p.n_heads, begin, min(begin + part, ctx), idx * (p.head_dim + 2u), true);
}
