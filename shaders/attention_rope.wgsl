// BEGIN x (the form of attention.wgsl's x block for a decode step whose q/k norm, RoPE and KV
// write run in `attention_split_gpu`'s prologue instead of rope.wgsl's dispatch: qkv holds this
// step's raw q | k | v, and each workgroup prepares its own q head and its kv head's k and v;
// `Kernel::source` swaps this in, after rope_angle.wgsl)
@group(0) @binding(4) var<storage, read_write> k_cache: array<vec4<f32>>; // (blocks * block_size, n_kv_heads, head_dim / 4)
@group(0) @binding(5) var<storage, read_write> v_cache: array<vec4<f32>>; // (blocks * block_size, n_kv_heads, head_dim / 4)
@group(0) @binding(7) var<storage, read> norms: array<f32>;               // (2, head_dim): q_norm | k_norm
@group(0) @binding(8) var<storage, read> inv_freq: array<f32>;            // (head_dim / 2)
const ROPE: bool = true;

// The workgroup's q head, and its token's k and v heads, ready (MAX_HEAD_DIM4 from the prelude).
var<workgroup> rope_q: array<f32, 4u * MAX_HEAD_DIM4>;
var<workgroup> rope_k: array<f32, 4u * MAX_HEAD_DIM4>;
var<workgroup> rope_v: array<f32, 4u * MAX_HEAD_DIM4>;
var<workgroup> rope_sums: array<vec2<f32>, 64>;

fn qkv_at(i: u32) -> f32 {
    return qkv[i / 4u][i % 4u];
}

// Token t's q head h and kv head `kv_head`: Σx² of q and k over the head (lanes stride it, then a
// tree: the order of rope.wgsl's GPU form, so the same bits), their scales, each pair rotated as
// rope.wgsl does (`rope_pair`), v copied; with `writer`, k and v to the cache at the token's slot.
// Every invocation of the workgroup calls it (it has barriers).
fn rope_prologue(li: u32, t: u32, h: u32, kv_head: u32, writer: bool) {
    let hd = p.head_dim;
    let half = hd / 2u;
    let row = t * p.qkv_width;
    let q_src = row + h * hd;
    let k_src = row + (p.n_heads + kv_head) * hd;
    let v_src = row + (p.n_heads + p.n_kv_heads + kv_head) * hd;
    var sq = vec2<f32>(0.0);
    for (var d = li; d < hd; d += 64u) {
        let q = qkv_at(q_src + d);
        let k = qkv_at(k_src + d);
        sq += vec2<f32>(q * q, k * k);
        rope_v[d] = qkv_at(v_src + d);
    }
    rope_sums[li] = sq;
    workgroupBarrier();
    for (var w = 32u; w > 0u; w /= 2u) {
        if (li < w) {
            rope_sums[li] += rope_sums[li + w];
        }
        workgroupBarrier();
    }
    let q_scale = inverseSqrt(rope_sums[0].x / f32(hd) + p.eps);
    let k_scale = inverseSqrt(rope_sums[0].y / f32(hd) + p.eps);
    let pos = tokens[t].y;
    for (var d = li; d < half; d += 64u) {
        let f = inv_freq[d];
        let q = rope_pair(qkv_at(q_src + d), qkv_at(q_src + d + half), norms[d], norms[d + half], q_scale, pos, f);
        rope_q[d] = q.x;
        rope_q[d + half] = q.y;
        let k = rope_pair(qkv_at(k_src + d), qkv_at(k_src + d + half), norms[hd + d], norms[hd + d + half], k_scale, pos, f);
        rope_k[d] = k.x;
        rope_k[d + half] = k.y;
    }
    workgroupBarrier();
    if (writer) {
        let hd4 = hd / 4u;
        let base = kv_base(tokens[t].z * p.max_blocks, pos, kv_head, hd4);
        for (var c = li; c < hd4; c += 64u) {
            k_cache[base + c] = fresh_k(c);
            v_cache[base + c] = fresh_v(c);
        }
    }
}

fn gpu_q(q_base: u32, d: u32) -> vec4<f32> {
    return vec4<f32>(rope_q[4u * d], rope_q[4u * d + 1u], rope_q[4u * d + 2u], rope_q[4u * d + 3u]);
}
fn fresh_k(d: u32) -> vec4<f32> {
    return vec4<f32>(rope_k[4u * d], rope_k[4u * d + 1u], rope_k[4u * d + 2u], rope_k[4u * d + 3u]);
}
fn fresh_v(d: u32) -> vec4<f32> {
    return vec4<f32>(rope_v[4u * d], rope_v[4u * d + 1u], rope_v[4u * d + 2u], rope_v[4u * d + 3u]);
}
// END x
