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

// 2*pi split in two so that angle - n * 2*pi keeps its precision for large positions.
const TWO_PI_HI: f32 = 6.28125;
const TWO_PI_LO: f32 = 0.0019353071795864769;
const INV_TWO_PI: f32 = 0.15915494309189535;

fn reduce_angle(a: f32) -> f32 {
    let n = round(a * INV_TWO_PI);
    return (a - n * TWO_PI_HI) - n * TWO_PI_LO;
}

@compute @workgroup_size(64)
fn qk_norm_rope(@builtin(global_invocation_id) gid: vec3<u32>) {
    let heads_total = p.n_heads + 2u * p.n_kv_heads;
    let head = gid.x;
    let t = gid.y;
    if (head >= heads_total || t >= p.n_tokens) {
        return;
    }
    let tok = tokens[t];
    let pos = tok.y;
    let block = block_tables[tok.z * p.max_blocks + pos / p.block_size];
    let slot = block * p.block_size + pos % p.block_size;
    let hd = p.head_dim;
    let q_dim = p.n_heads * hd;
    let kv_dim = p.n_kv_heads * hd;
    let row = t * p.qkv_width;

    if (head >= p.n_heads + p.n_kv_heads) {
        let j = head - p.n_heads - p.n_kv_heads;
        let src = row + q_dim + kv_dim + j * hd;
        let dst = (slot * p.n_kv_heads + j) * hd;
        for (var d = 0u; d < hd; d++) {
            v_cache[dst + d] = qkv[src + d];
        }
        return;
    }

    let is_q = head < p.n_heads;
    var src: u32;
    var norm_base: u32;
    if (is_q) {
        src = row + head * hd;
        norm_base = 0u;
    } else {
        src = row + q_dim + (head - p.n_heads) * hd;
        norm_base = hd;
    }
    var sum = 0.0;
    for (var d = 0u; d < hd; d++) {
        let v = qkv[src + d];
        sum += v * v;
    }
    let scale = inverseSqrt(sum / f32(hd) + p.eps);
    let half = hd / 2u;
    let dst = (slot * p.n_kv_heads + (head - p.n_heads)) * hd;
    for (var d = 0u; d < half; d++) {
        let x1 = norms[norm_base + d] * (qkv[src + d] * scale);
        let x2 = norms[norm_base + d + half] * (qkv[src + d + half] * scale);
        let angle = reduce_angle(f32(pos) * inv_freq[d]);
        let c = cos(angle);
        let s = sin(angle);
        let o1 = x1 * c - x2 * s;
        let o2 = x2 * c + x1 * s;
        if (is_q) {
            qkv[src + d] = o1;
            qkv[src + d + half] = o2;
        } else {
            k_cache[dst + d] = o1;
            k_cache[dst + d + half] = o2;
        }
    }
}

// The GPU family's form: one workgroup of 64 per (head, token) instead of one invocation, so a
// head's dimensions are read by neighbouring lanes and its sum of squares is reduced in workgroup
// memory. Each lane rotates the pairs (d, d + head_dim / 2) it owns: no lane reads what another
// writes. Workgroup x is the head, y the token.
var<workgroup> rope_sums: array<f32, 64>;

@compute @workgroup_size(64)
fn qk_norm_rope_gpu(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wg: vec3<u32>) {
    let heads_total = p.n_heads + 2u * p.n_kv_heads;
    let head = wg.x;
    let t = wg.y;
    if (head >= heads_total || t >= p.n_tokens) {
        return;
    }
    let tok = tokens[t];
    let pos = tok.y;
    let block = block_tables[tok.z * p.max_blocks + pos / p.block_size];
    let slot = block * p.block_size + pos % p.block_size;
    let hd = p.head_dim;
    let q_dim = p.n_heads * hd;
    let kv_dim = p.n_kv_heads * hd;
    let row = t * p.qkv_width;
    if (head >= p.n_heads + p.n_kv_heads) {
        let j = head - p.n_heads - p.n_kv_heads;
        let src = row + q_dim + kv_dim + j * hd;
        let dst = (slot * p.n_kv_heads + j) * hd;
        for (var d = li; d < hd; d += 64u) {
            v_cache[dst + d] = qkv[src + d];
        }
        return;
    }
    let is_q = head < p.n_heads;
    var src = row + head * hd;
    var norm_base = 0u;
    if (!is_q) {
        src = row + q_dim + (head - p.n_heads) * hd;
        norm_base = hd;
    }
    var sum = 0.0;
    for (var d = li; d < hd; d += 64u) {
        let v = qkv[src + d];
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
    let half = hd / 2u;
    let dst = (slot * p.n_kv_heads + (head - p.n_heads)) * hd;
    for (var d = li; d < half; d += 64u) {
        let x1 = norms[norm_base + d] * (qkv[src + d] * scale);
        let x2 = norms[norm_base + d + half] * (qkv[src + d + half] * scale);
        let angle = reduce_angle(f32(pos) * inv_freq[d]);
        let c = cos(angle);
        let s = sin(angle);
        let o1 = x1 * c - x2 * s;
        let o2 = x2 * c + x1 * s;
        if (is_q) {
            qkv[src + d] = o1;
            qkv[src + d + half] = o2;
        } else {
            k_cache[dst + d] = o1;
            k_cache[dst + d + half] = o2;
        }
    }
}
