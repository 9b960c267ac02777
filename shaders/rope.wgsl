// Per-head RMSNorm of q and k, then RoPE ("rotate_half" layout), then the KV-cache write.
// One invocation per (token, head) over n_heads q heads, n_kv_heads k heads and n_kv_heads v heads:
//   q heads: normalised with q_norm, rotated, written back in place in qkv;
//   k heads: normalised with k_norm, rotated, written to k_cache at the token's slot;
//   v heads: copied to v_cache at the token's slot.
// slot(token) = block_tables[seq, pos / block_size] * block_size + pos % block_size.

struct Params {
    n_tokens: u32,
    n_heads: u32,
    n_kv_heads: u32,
    head_dim: u32,
    qkv_width: u32,   // n_heads * head_dim + 2 * n_kv_heads * head_dim
    block_size: u32,
    max_blocks: u32,  // row stride of block_tables
    eps: f32,
    _unused0: u32,    // attention's splits and token_begin (the struct is shared)
    _unused1: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> qkv: array<f32>;    // (n_tokens, qkv_width): q | k | v
@group(0) @binding(2) var<storage, read> tokens: array<vec4<u32>>; // (n_tokens): (id, position, seq, _)
@group(0) @binding(3) var<storage, read> block_tables: array<u32>; // (seqs, max_blocks)
@group(0) @binding(4) var<storage, read> norms: array<f32>;        // (2, head_dim): q_norm | k_norm
@group(0) @binding(5) var<storage, read> inv_freq: array<f32>;     // (head_dim / 2)
@group(0) @binding(6) var<storage, read_write> k_cache: array<f32>; // (blocks * block_size, n_kv_heads, head_dim)
@group(0) @binding(7) var<storage, read_write> v_cache: array<f32>; // (blocks * block_size, n_kv_heads, head_dim)

// `reduce_angle` and `rope_pair` come from rope_angle.wgsl, compiled before this file.

// Where one head of token t lives: its source in qkv, and its destination in the cache (k and v
// heads) — `dst` is unused for q heads, which are rotated in place.
struct HeadPlace {
    pos: u32,
    src: u32,
    dst: u32,
    norm_base: u32,  // 0: q_norm, head_dim: k_norm
    kind: u32,       // 0: q, 1: k, 2: v
}

fn head_place(t: u32, head: u32) -> HeadPlace {
    let tok = tokens[t];
    let pos = tok.y;
    let block = block_tables[tok.z * p.max_blocks + pos / p.block_size];
    let slot = block * p.block_size + pos % p.block_size;
    let hd = p.head_dim;
    let row = t * p.qkv_width;
    if (head < p.n_heads) {
        return HeadPlace(pos, row + head * hd, 0u, 0u, 0u);
    }
    let j = head - p.n_heads;  // k heads, then v heads
    if (j < p.n_kv_heads) {
        return HeadPlace(pos, row + (p.n_heads + j) * hd, (slot * p.n_kv_heads + j) * hd, hd, 1u);
    }
    let v = j - p.n_kv_heads;
    return HeadPlace(pos, row + (p.n_heads + p.n_kv_heads + v) * hd, (slot * p.n_kv_heads + v) * hd, 0u, 2u);
}

// Normalises (by `scale` and the norm weights) and rotates the pair (d, d + head_dim / 2) of a q
// or k head, writing it back in place (q) or to the cache (k).
fn rotate_pair(h: HeadPlace, d: u32, scale: f32) {
    let half = p.head_dim / 2u;
    let n1 = norms[h.norm_base + d];
    let n2 = norms[h.norm_base + d + half];
    let o = rope_pair(qkv[h.src + d], qkv[h.src + d + half], n1, n2, scale, h.pos, inv_freq[d]);
    if (h.kind == 0u) {
        qkv[h.src + d] = o.x;
        qkv[h.src + d + half] = o.y;
    } else {
        k_cache[h.dst + d] = o.x;
        k_cache[h.dst + d + half] = o.y;
    }
}

@compute @workgroup_size(64)
fn qk_norm_rope(@builtin(global_invocation_id) gid: vec3<u32>) {
    let head = gid.x;
    let t = gid.y;
    if (head >= p.n_heads + 2u * p.n_kv_heads || t >= p.n_tokens) {
        return;
    }
    let h = head_place(t, head);
    let hd = p.head_dim;
    if (h.kind == 2u) {
        for (var d = 0u; d < hd; d++) {
            v_cache[h.dst + d] = qkv[h.src + d];
        }
        return;
    }
    var sum = 0.0;
    for (var d = 0u; d < hd; d++) {
        let v = qkv[h.src + d];
        sum += v * v;
    }
    let scale = inverseSqrt(sum / f32(hd) + p.eps);
    for (var d = 0u; d < hd / 2u; d++) {
        rotate_pair(h, d, scale);
    }
}

// The GPU family's form: one workgroup of 64 per (head, token) instead of one invocation, so a
// head's dimensions are read by neighbouring lanes and its sum of squares is reduced in workgroup
// memory. Each lane rotates the pairs (d, d + head_dim / 2) it owns: no lane reads what another
// writes. Workgroup x is the head, y the token.
var<workgroup> rope_sums: array<f32, 64>;

@compute @workgroup_size(64)
fn qk_norm_rope_gpu(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wg: vec3<u32>) {
    let head = wg.x;
    let t = wg.y;
    if (head >= p.n_heads + 2u * p.n_kv_heads || t >= p.n_tokens) {
        return;
    }
    let h = head_place(t, head);
    let hd = p.head_dim;
    if (h.kind == 2u) {
        for (var d = li; d < hd; d += 64u) {
            v_cache[h.dst + d] = qkv[h.src + d];
        }
        return;
    }
    var sum = 0.0;
    for (var d = li; d < hd; d += 64u) {
        let v = qkv[h.src + d];
        sum += v * v;
    }
    rope_sums[li] = sum;
    workgroupBarrier();
    for (var w = 32u; w > 0u; w /= 2u) {
        if (li < w) {
            rope_sums[li] += rope_sums[li + w];
        }
        workgroupBarrier();
    }
    let scale = inverseSqrt(rope_sums[0] / f32(hd) + p.eps);
    for (var d = li; d < hd / 2u; d += 64u) {
        rotate_pair(h, d, scale);
    }
}
