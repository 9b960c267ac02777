// Embedding gather over one row-chunk of the table:
// x[t, :] = table[tokens[t].id - row_start, :] for the tokens whose id falls in this chunk.
// Large tables are split into chunks that each fit one storage binding; one dispatch per chunk.
// An id with the top bit set (`PREVIOUS_ID | r`) stands for previous_ids[r]: the id the step
// submitted before this one chose for its logit row r, still on the GPU (CPU/GPU overlap).

struct Params {
    n_tokens: u32,
    hidden: u32,
    row_start: u32,
    row_count: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> tokens: array<vec4<u32>>;  // (n_tokens): (id, position, seq, _)
@group(0) @binding(3) var<storage, read_write> x: array<f32>;       // (n_tokens, hidden)
@group(0) @binding(4) var<storage, read> previous_ids: array<u32>;  // (logit rows of the step before)

// BEGIN weights (weights_texture.wgsl, or an int8 / int4 form, replaces this block: see
// `Kernel::source`; every form gives `weights()`, the two unpack functions and `row_scale()`)
@group(0) @binding(2) var<storage, read> w: array<vec4<u32>>;      // (row_count, hidden / 8) bf16 x 8
alias W8 = vec4<u32>;  // what `weights()` returns (weights_pair.wgsl)
// Eight bf16 weights: row `row`, columns 8i .. 8i + 7, of a matrix `texels` vec4s wide.
fn weights(row: u32, i: u32, texels: u32) -> vec4<u32> {
    return w[row * texels + i];
}
// Weights 0..3 and 4..7 of what `weights()` returned, as f32 (a bf16 is the top half of an f32).
fn lo(v: u32) -> f32 {
    return bitcast<f32>(v << 16u);
}
fn hi(v: u32) -> f32 {
    return bitcast<f32>(v & 0xffff0000u);
}
fn unpack_lo(q: vec4<u32>) -> vec4<f32> {
    return vec4<f32>(lo(q.x), hi(q.x), lo(q.y), hi(q.y));
}
fn unpack_hi(q: vec4<u32>) -> vec4<f32> {
    return vec4<f32>(lo(q.z), hi(q.z), lo(q.w), hi(q.w));
}
// The factor every product with row `row` is multiplied by once, after its sum (int8's row scale;
// 1 for a form whose weights() are already scaled).
fn row_scale(row: u32, texels: u32) -> f32 {
    return 1.0;
}
// END weights

@compute @workgroup_size(64)
fn embed(@builtin(global_invocation_id) gid: vec3<u32>) {
    let pair = gid.x;
    let t = gid.y;
    let half = p.hidden / 2u;
    if (pair >= half || t >= p.n_tokens) {
        return;
    }
    var id = tokens[t].x;
    if ((id & PREVIOUS_ID) != 0u) {
        id = previous_ids[id & ~PREVIOUS_ID];
    }
    if (id < p.row_start || id >= p.row_start + p.row_count) {
        return;
    }
    let q = weights(id - p.row_start, pair / 4u, p.hidden / 8u);
    let four = select(unpack_lo(q), unpack_hi(q), pair % 4u >= 2u) * row_scale(id - p.row_start, p.hidden / 8u);
    let two = select(four.xy, four.zw, pair % 2u == 1u);
    x[t * p.hidden + 2u * pair] = two.x;
    x[t * p.hidden + 2u * pair + 1u] = two.y;
}
