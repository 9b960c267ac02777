// Embedding gather over one row-chunk of the table:
// x[t, :] = table[tokens[t].id - row_start, :] for the tokens whose id falls in this chunk.
// Large tables are split into chunks that each fit one storage binding; one dispatch per chunk.

struct Params {
    n_tokens: u32,
    hidden: u32,
    row_start: u32,
    row_count: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> tokens: array<vec4<u32>>;  // (n_tokens): (id, position, seq, _)
@group(0) @binding(3) var<storage, read_write> x: array<f32>;       // (n_tokens, hidden)

// BEGIN weights (weights_texture.wgsl replaces this block where weights live in textures)
@group(0) @binding(2) var<storage, read> w: array<vec4<u32>>;      // (row_count, hidden / 8) bf16 x 8
// Eight bf16 weights: row `row`, columns 8i .. 8i + 7, of a matrix `texels` vec4s wide.
fn weights(row: u32, i: u32, texels: u32) -> vec4<u32> {
    return w[row * texels + i];
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
    let id = tokens[t].x;
    if (id < p.row_start || id >= p.row_start + p.row_count) {
        return;
    }
    let w = weights(id - p.row_start, pair / 4u, p.hidden / 8u)[pair % 4u];
    x[t * p.hidden + 2u * pair] = bitcast<f32>(w << 16u);
    x[t * p.hidden + 2u * pair + 1u] = bitcast<f32>(w & 0xffff0000u);
}
