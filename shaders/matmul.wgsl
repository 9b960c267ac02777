// y[m, row_start + r] (+)= sum_k x[m, k] * W[r, k]  for one row-chunk W of a [N x K] bf16 weight.
// W is stored as the checkpoint stores it, [out_features, in_features], two bf16 per u32
// (element 2i in the low half). K must be a multiple of 8: each load brings 8 weights.
// `accumulate` fuses the residual add. Entry points: `matmul_bf16` for any M (`matmul_bf16_wide`,
// the same with a wider token tile, and `matmul_bf16_tall`, with more rows too, on native CPU
// adapters) and `matmul_bf16_m1` for decode at batch 1.

struct Params {
    m: u32,           // tokens in the step
    n: u32,           // full output width (row stride of y)
    k: u32,           // reduction length (row stride of x)
    row_start: u32,   // first output column of this chunk
    rows: u32,        // rows of W in this chunk
    accumulate: u32,  // 1: y += x W^T (residual), 0: y = x W^T
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;      // (m, k / 4)
// BEGIN weights (weights_texture.wgsl replaces this block where weights live in textures)
@group(0) @binding(2) var<storage, read> w: array<vec4<u32>>;      // (rows, k / 8) bf16 x 8
// Eight bf16 weights: row `row`, columns 8i .. 8i + 7, of a matrix `texels` vec4s wide.
fn weights(row: u32, i: u32, texels: u32) -> vec4<u32> {
    return w[row * texels + i];
}
// END weights
@group(0) @binding(3) var<storage, read_write> y: array<f32>;      // (m, n)

// Register blocking: an invocation owns ROWS weight rows and walks its chunk of up to M_CHUNK tokens
// TILE_M at a time, so each weight load feeds TILE_M tokens and a chunk's weights are read from
// memory once (they stay in cache across its token tiles).
const ROWS: u32 = 4u;
const TILE_M: u32 = 4u;
const TILE_M_WIDE: u32 = 8u;
const ROWS_TALL: u32 = 8u;
const M_CHUNK: u32 = 32u;

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

fn store(m: u32, col: u32, value: f32) {
    let i = m * p.n + col;
    if (p.accumulate != 0u) {
        y[i] = y[i] + value;
    } else {
        y[i] = value;
    }
}

@compute @workgroup_size(64)
fn matmul_bf16(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(workgroup_id) wg: vec3<u32>) {
    let r0 = gid.x * ROWS;
    // From the workgroup id, so the compiler sees x's addresses as uniform across the workgroup.
    let m_begin = wg.y * M_CHUNK;
    if (r0 >= p.rows || m_begin >= p.m) {
        return;
    }
    let m_end = min(m_begin + M_CHUNK, p.m);
    let k4 = p.k / 4u;
    let k8 = p.k / 8u;
    // Rows past the chunk, and tokens past the end, re-read the last one; their results are not stored.
    // The 4 x 4 register tile is written out by hand: compilers keep scalars in registers.
    let w0 = min(r0 + 0u, p.rows - 1u);
    let w1 = min(r0 + 1u, p.rows - 1u);
    let w2 = min(r0 + 2u, p.rows - 1u);
    let w3 = min(r0 + 3u, p.rows - 1u);
    for (var m0 = m_begin; m0 < m_end; m0 += TILE_M) {
        let x0 = min(m0 + 0u, p.m - 1u) * k4;
        let x1 = min(m0 + 1u, p.m - 1u) * k4;
        let x2 = min(m0 + 2u, p.m - 1u) * k4;
        let x3 = min(m0 + 3u, p.m - 1u) * k4;
        var a00 = 0.0; var a01 = 0.0; var a02 = 0.0; var a03 = 0.0;
        var a10 = 0.0; var a11 = 0.0; var a12 = 0.0; var a13 = 0.0;
        var a20 = 0.0; var a21 = 0.0; var a22 = 0.0; var a23 = 0.0;
        var a30 = 0.0; var a31 = 0.0; var a32 = 0.0; var a33 = 0.0;
        for (var i = 0u; i < k8; i++) {
            let q0 = weights(w0, i, k8);
            let wa0 = unpack_lo(q0);
            let wb0 = unpack_hi(q0);
            let q1 = weights(w1, i, k8);
            let wa1 = unpack_lo(q1);
            let wb1 = unpack_hi(q1);
            let q2 = weights(w2, i, k8);
            let wa2 = unpack_lo(q2);
            let wb2 = unpack_hi(q2);
            let q3 = weights(w3, i, k8);
            let wa3 = unpack_lo(q3);
            let wb3 = unpack_hi(q3);
            let xa0 = x[x0 + 2u * i];
            let xb0 = x[x0 + 2u * i + 1u];
            let xa1 = x[x1 + 2u * i];
            let xb1 = x[x1 + 2u * i + 1u];
            let xa2 = x[x2 + 2u * i];
            let xb2 = x[x2 + 2u * i + 1u];
            let xa3 = x[x3 + 2u * i];
            let xb3 = x[x3 + 2u * i + 1u];
            a00 += dot(wa0, xa0) + dot(wb0, xb0);
            a01 += dot(wa0, xa1) + dot(wb0, xb1);
            a02 += dot(wa0, xa2) + dot(wb0, xb2);
            a03 += dot(wa0, xa3) + dot(wb0, xb3);
            a10 += dot(wa1, xa0) + dot(wb1, xb0);
            a11 += dot(wa1, xa1) + dot(wb1, xb1);
            a12 += dot(wa1, xa2) + dot(wb1, xb2);
            a13 += dot(wa1, xa3) + dot(wb1, xb3);
            a20 += dot(wa2, xa0) + dot(wb2, xb0);
            a21 += dot(wa2, xa1) + dot(wb2, xb1);
            a22 += dot(wa2, xa2) + dot(wb2, xb2);
            a23 += dot(wa2, xa3) + dot(wb2, xb3);
            a30 += dot(wa3, xa0) + dot(wb3, xb0);
            a31 += dot(wa3, xa1) + dot(wb3, xb1);
            a32 += dot(wa3, xa2) + dot(wb3, xb2);
            a33 += dot(wa3, xa3) + dot(wb3, xb3);
        }
        if (r0 + 0u < p.rows && m0 + 0u < m_end) {
            store(m0 + 0u, p.row_start + r0 + 0u, a00);
        }
        if (r0 + 0u < p.rows && m0 + 1u < m_end) {
            store(m0 + 1u, p.row_start + r0 + 0u, a01);
        }
        if (r0 + 0u < p.rows && m0 + 2u < m_end) {
            store(m0 + 2u, p.row_start + r0 + 0u, a02);
        }
        if (r0 + 0u < p.rows && m0 + 3u < m_end) {
            store(m0 + 3u, p.row_start + r0 + 0u, a03);
        }
        if (r0 + 1u < p.rows && m0 + 0u < m_end) {
            store(m0 + 0u, p.row_start + r0 + 1u, a10);
        }
        if (r0 + 1u < p.rows && m0 + 1u < m_end) {
            store(m0 + 1u, p.row_start + r0 + 1u, a11);
        }
        if (r0 + 1u < p.rows && m0 + 2u < m_end) {
            store(m0 + 2u, p.row_start + r0 + 1u, a12);
        }
        if (r0 + 1u < p.rows && m0 + 3u < m_end) {
            store(m0 + 3u, p.row_start + r0 + 1u, a13);
        }
        if (r0 + 2u < p.rows && m0 + 0u < m_end) {
            store(m0 + 0u, p.row_start + r0 + 2u, a20);
        }
        if (r0 + 2u < p.rows && m0 + 1u < m_end) {
            store(m0 + 1u, p.row_start + r0 + 2u, a21);
        }
        if (r0 + 2u < p.rows && m0 + 2u < m_end) {
            store(m0 + 2u, p.row_start + r0 + 2u, a22);
        }
        if (r0 + 2u < p.rows && m0 + 3u < m_end) {
            store(m0 + 3u, p.row_start + r0 + 2u, a23);
        }
        if (r0 + 3u < p.rows && m0 + 0u < m_end) {
            store(m0 + 0u, p.row_start + r0 + 3u, a30);
        }
        if (r0 + 3u < p.rows && m0 + 1u < m_end) {
            store(m0 + 1u, p.row_start + r0 + 3u, a31);
        }
        if (r0 + 3u < p.rows && m0 + 2u < m_end) {
            store(m0 + 2u, p.row_start + r0 + 3u, a32);
        }
        if (r0 + 3u < p.rows && m0 + 3u < m_end) {
            store(m0 + 3u, p.row_start + r0 + 3u, a33);
        }
    }
}

// BEGIN generated by scripts/matmul-tiles.py (edit there)
// The same with an 8-token tile (4 x 8 accumulators): faster on CPU adapters (lavapipe), but
// SwiftShader in Chromium does not finish compiling it, so the browser uses `matmul_bf16`.
@compute @workgroup_size(64)
fn matmul_bf16_wide(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(workgroup_id) wg: vec3<u32>) {
    let r0 = gid.x * ROWS;
    let m_begin = wg.y * M_CHUNK;
    if (r0 >= p.rows || m_begin >= p.m) {
        return;
    }
    let m_end = min(m_begin + M_CHUNK, p.m);
    let k4 = p.k / 4u;
    let k8 = p.k / 8u;
    let w0 = min(r0 + 0u, p.rows - 1u);
    let w1 = min(r0 + 1u, p.rows - 1u);
    let w2 = min(r0 + 2u, p.rows - 1u);
    let w3 = min(r0 + 3u, p.rows - 1u);
    for (var m0 = m_begin; m0 < m_end; m0 += TILE_M_WIDE) {
        let x0 = min(m0 + 0u, p.m - 1u) * k4;
        let x1 = min(m0 + 1u, p.m - 1u) * k4;
        let x2 = min(m0 + 2u, p.m - 1u) * k4;
        let x3 = min(m0 + 3u, p.m - 1u) * k4;
        let x4 = min(m0 + 4u, p.m - 1u) * k4;
        let x5 = min(m0 + 5u, p.m - 1u) * k4;
        let x6 = min(m0 + 6u, p.m - 1u) * k4;
        let x7 = min(m0 + 7u, p.m - 1u) * k4;
        var a00 = 0.0; var a01 = 0.0; var a02 = 0.0; var a03 = 0.0; var a04 = 0.0; var a05 = 0.0; var a06 = 0.0; var a07 = 0.0;
        var a10 = 0.0; var a11 = 0.0; var a12 = 0.0; var a13 = 0.0; var a14 = 0.0; var a15 = 0.0; var a16 = 0.0; var a17 = 0.0;
        var a20 = 0.0; var a21 = 0.0; var a22 = 0.0; var a23 = 0.0; var a24 = 0.0; var a25 = 0.0; var a26 = 0.0; var a27 = 0.0;
        var a30 = 0.0; var a31 = 0.0; var a32 = 0.0; var a33 = 0.0; var a34 = 0.0; var a35 = 0.0; var a36 = 0.0; var a37 = 0.0;
        for (var i = 0u; i < k8; i++) {
            let q0 = weights(w0, i, k8);
            let wa0 = unpack_lo(q0);
            let wb0 = unpack_hi(q0);
            let q1 = weights(w1, i, k8);
            let wa1 = unpack_lo(q1);
            let wb1 = unpack_hi(q1);
            let q2 = weights(w2, i, k8);
            let wa2 = unpack_lo(q2);
            let wb2 = unpack_hi(q2);
            let q3 = weights(w3, i, k8);
            let wa3 = unpack_lo(q3);
            let wb3 = unpack_hi(q3);
            let xa0 = x[x0 + 2u * i];
            let xb0 = x[x0 + 2u * i + 1u];
            a00 += dot(wa0, xa0) + dot(wb0, xb0);
            a10 += dot(wa1, xa0) + dot(wb1, xb0);
            a20 += dot(wa2, xa0) + dot(wb2, xb0);
            a30 += dot(wa3, xa0) + dot(wb3, xb0);
            let xa1 = x[x1 + 2u * i];
            let xb1 = x[x1 + 2u * i + 1u];
            a01 += dot(wa0, xa1) + dot(wb0, xb1);
            a11 += dot(wa1, xa1) + dot(wb1, xb1);
            a21 += dot(wa2, xa1) + dot(wb2, xb1);
            a31 += dot(wa3, xa1) + dot(wb3, xb1);
            let xa2 = x[x2 + 2u * i];
            let xb2 = x[x2 + 2u * i + 1u];
            a02 += dot(wa0, xa2) + dot(wb0, xb2);
            a12 += dot(wa1, xa2) + dot(wb1, xb2);
            a22 += dot(wa2, xa2) + dot(wb2, xb2);
            a32 += dot(wa3, xa2) + dot(wb3, xb2);
            let xa3 = x[x3 + 2u * i];
            let xb3 = x[x3 + 2u * i + 1u];
            a03 += dot(wa0, xa3) + dot(wb0, xb3);
            a13 += dot(wa1, xa3) + dot(wb1, xb3);
            a23 += dot(wa2, xa3) + dot(wb2, xb3);
            a33 += dot(wa3, xa3) + dot(wb3, xb3);
            let xa4 = x[x4 + 2u * i];
            let xb4 = x[x4 + 2u * i + 1u];
            a04 += dot(wa0, xa4) + dot(wb0, xb4);
            a14 += dot(wa1, xa4) + dot(wb1, xb4);
            a24 += dot(wa2, xa4) + dot(wb2, xb4);
            a34 += dot(wa3, xa4) + dot(wb3, xb4);
            let xa5 = x[x5 + 2u * i];
            let xb5 = x[x5 + 2u * i + 1u];
            a05 += dot(wa0, xa5) + dot(wb0, xb5);
            a15 += dot(wa1, xa5) + dot(wb1, xb5);
            a25 += dot(wa2, xa5) + dot(wb2, xb5);
            a35 += dot(wa3, xa5) + dot(wb3, xb5);
            let xa6 = x[x6 + 2u * i];
            let xb6 = x[x6 + 2u * i + 1u];
            a06 += dot(wa0, xa6) + dot(wb0, xb6);
            a16 += dot(wa1, xa6) + dot(wb1, xb6);
            a26 += dot(wa2, xa6) + dot(wb2, xb6);
            a36 += dot(wa3, xa6) + dot(wb3, xb6);
            let xa7 = x[x7 + 2u * i];
            let xb7 = x[x7 + 2u * i + 1u];
            a07 += dot(wa0, xa7) + dot(wb0, xb7);
            a17 += dot(wa1, xa7) + dot(wb1, xb7);
            a27 += dot(wa2, xa7) + dot(wb2, xb7);
            a37 += dot(wa3, xa7) + dot(wb3, xb7);
        }
        if (r0 + 0u < p.rows && m0 + 0u < m_end) {
            store(m0 + 0u, p.row_start + r0 + 0u, a00);
        }
        if (r0 + 0u < p.rows && m0 + 1u < m_end) {
            store(m0 + 1u, p.row_start + r0 + 0u, a01);
        }
        if (r0 + 0u < p.rows && m0 + 2u < m_end) {
            store(m0 + 2u, p.row_start + r0 + 0u, a02);
        }
        if (r0 + 0u < p.rows && m0 + 3u < m_end) {
            store(m0 + 3u, p.row_start + r0 + 0u, a03);
        }
        if (r0 + 0u < p.rows && m0 + 4u < m_end) {
            store(m0 + 4u, p.row_start + r0 + 0u, a04);
        }
        if (r0 + 0u < p.rows && m0 + 5u < m_end) {
            store(m0 + 5u, p.row_start + r0 + 0u, a05);
        }
        if (r0 + 0u < p.rows && m0 + 6u < m_end) {
            store(m0 + 6u, p.row_start + r0 + 0u, a06);
        }
        if (r0 + 0u < p.rows && m0 + 7u < m_end) {
            store(m0 + 7u, p.row_start + r0 + 0u, a07);
        }
        if (r0 + 1u < p.rows && m0 + 0u < m_end) {
            store(m0 + 0u, p.row_start + r0 + 1u, a10);
        }
        if (r0 + 1u < p.rows && m0 + 1u < m_end) {
            store(m0 + 1u, p.row_start + r0 + 1u, a11);
        }
        if (r0 + 1u < p.rows && m0 + 2u < m_end) {
            store(m0 + 2u, p.row_start + r0 + 1u, a12);
        }
        if (r0 + 1u < p.rows && m0 + 3u < m_end) {
            store(m0 + 3u, p.row_start + r0 + 1u, a13);
        }
        if (r0 + 1u < p.rows && m0 + 4u < m_end) {
            store(m0 + 4u, p.row_start + r0 + 1u, a14);
        }
        if (r0 + 1u < p.rows && m0 + 5u < m_end) {
            store(m0 + 5u, p.row_start + r0 + 1u, a15);
        }
        if (r0 + 1u < p.rows && m0 + 6u < m_end) {
            store(m0 + 6u, p.row_start + r0 + 1u, a16);
        }
        if (r0 + 1u < p.rows && m0 + 7u < m_end) {
            store(m0 + 7u, p.row_start + r0 + 1u, a17);
        }
        if (r0 + 2u < p.rows && m0 + 0u < m_end) {
            store(m0 + 0u, p.row_start + r0 + 2u, a20);
        }
        if (r0 + 2u < p.rows && m0 + 1u < m_end) {
            store(m0 + 1u, p.row_start + r0 + 2u, a21);
        }
        if (r0 + 2u < p.rows && m0 + 2u < m_end) {
            store(m0 + 2u, p.row_start + r0 + 2u, a22);
        }
        if (r0 + 2u < p.rows && m0 + 3u < m_end) {
            store(m0 + 3u, p.row_start + r0 + 2u, a23);
        }
        if (r0 + 2u < p.rows && m0 + 4u < m_end) {
            store(m0 + 4u, p.row_start + r0 + 2u, a24);
        }
        if (r0 + 2u < p.rows && m0 + 5u < m_end) {
            store(m0 + 5u, p.row_start + r0 + 2u, a25);
        }
        if (r0 + 2u < p.rows && m0 + 6u < m_end) {
            store(m0 + 6u, p.row_start + r0 + 2u, a26);
        }
        if (r0 + 2u < p.rows && m0 + 7u < m_end) {
            store(m0 + 7u, p.row_start + r0 + 2u, a27);
        }
        if (r0 + 3u < p.rows && m0 + 0u < m_end) {
            store(m0 + 0u, p.row_start + r0 + 3u, a30);
        }
        if (r0 + 3u < p.rows && m0 + 1u < m_end) {
            store(m0 + 1u, p.row_start + r0 + 3u, a31);
        }
        if (r0 + 3u < p.rows && m0 + 2u < m_end) {
            store(m0 + 2u, p.row_start + r0 + 3u, a32);
        }
        if (r0 + 3u < p.rows && m0 + 3u < m_end) {
            store(m0 + 3u, p.row_start + r0 + 3u, a33);
        }
        if (r0 + 3u < p.rows && m0 + 4u < m_end) {
            store(m0 + 4u, p.row_start + r0 + 3u, a34);
        }
        if (r0 + 3u < p.rows && m0 + 5u < m_end) {
            store(m0 + 5u, p.row_start + r0 + 3u, a35);
        }
        if (r0 + 3u < p.rows && m0 + 6u < m_end) {
            store(m0 + 6u, p.row_start + r0 + 3u, a36);
        }
        if (r0 + 3u < p.rows && m0 + 7u < m_end) {
            store(m0 + 7u, p.row_start + r0 + 3u, a37);
        }
    }
}

// Prefill-sized M (64 tokens or more, native CPU adapters): 8 rows x 8 tokens per invocation, so each
// x load feeds 8 rows; it spills more registers than `matmul_bf16_wide`, which stays faster below 64 tokens.
@compute @workgroup_size(64)
fn matmul_bf16_tall(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(workgroup_id) wg: vec3<u32>) {
    let r0 = gid.x * ROWS_TALL;
    let m_begin = wg.y * M_CHUNK;
    if (r0 >= p.rows || m_begin >= p.m) {
        return;
    }
    let m_end = min(m_begin + M_CHUNK, p.m);
    let k4 = p.k / 4u;
    let k8 = p.k / 8u;
    let w0 = min(r0 + 0u, p.rows - 1u);
    let w1 = min(r0 + 1u, p.rows - 1u);
    let w2 = min(r0 + 2u, p.rows - 1u);
    let w3 = min(r0 + 3u, p.rows - 1u);
    let w4 = min(r0 + 4u, p.rows - 1u);
    let w5 = min(r0 + 5u, p.rows - 1u);
    let w6 = min(r0 + 6u, p.rows - 1u);
    let w7 = min(r0 + 7u, p.rows - 1u);
    for (var m0 = m_begin; m0 < m_end; m0 += TILE_M_WIDE) {
        let x0 = min(m0 + 0u, p.m - 1u) * k4;
        let x1 = min(m0 + 1u, p.m - 1u) * k4;
        let x2 = min(m0 + 2u, p.m - 1u) * k4;
        let x3 = min(m0 + 3u, p.m - 1u) * k4;
        let x4 = min(m0 + 4u, p.m - 1u) * k4;
        let x5 = min(m0 + 5u, p.m - 1u) * k4;
        let x6 = min(m0 + 6u, p.m - 1u) * k4;
        let x7 = min(m0 + 7u, p.m - 1u) * k4;
        var a00 = 0.0; var a01 = 0.0; var a02 = 0.0; var a03 = 0.0; var a04 = 0.0; var a05 = 0.0; var a06 = 0.0; var a07 = 0.0;
        var a10 = 0.0; var a11 = 0.0; var a12 = 0.0; var a13 = 0.0; var a14 = 0.0; var a15 = 0.0; var a16 = 0.0; var a17 = 0.0;
        var a20 = 0.0; var a21 = 0.0; var a22 = 0.0; var a23 = 0.0; var a24 = 0.0; var a25 = 0.0; var a26 = 0.0; var a27 = 0.0;
        var a30 = 0.0; var a31 = 0.0; var a32 = 0.0; var a33 = 0.0; var a34 = 0.0; var a35 = 0.0; var a36 = 0.0; var a37 = 0.0;
        var a40 = 0.0; var a41 = 0.0; var a42 = 0.0; var a43 = 0.0; var a44 = 0.0; var a45 = 0.0; var a46 = 0.0; var a47 = 0.0;
        var a50 = 0.0; var a51 = 0.0; var a52 = 0.0; var a53 = 0.0; var a54 = 0.0; var a55 = 0.0; var a56 = 0.0; var a57 = 0.0;
        var a60 = 0.0; var a61 = 0.0; var a62 = 0.0; var a63 = 0.0; var a64 = 0.0; var a65 = 0.0; var a66 = 0.0; var a67 = 0.0;
        var a70 = 0.0; var a71 = 0.0; var a72 = 0.0; var a73 = 0.0; var a74 = 0.0; var a75 = 0.0; var a76 = 0.0; var a77 = 0.0;
        for (var i = 0u; i < k8; i++) {
            let q0 = weights(w0, i, k8);
            let wa0 = unpack_lo(q0);
            let wb0 = unpack_hi(q0);
            let q1 = weights(w1, i, k8);
            let wa1 = unpack_lo(q1);
            let wb1 = unpack_hi(q1);
            let q2 = weights(w2, i, k8);
            let wa2 = unpack_lo(q2);
            let wb2 = unpack_hi(q2);
            let q3 = weights(w3, i, k8);
            let wa3 = unpack_lo(q3);
            let wb3 = unpack_hi(q3);
            let q4 = weights(w4, i, k8);
            let wa4 = unpack_lo(q4);
            let wb4 = unpack_hi(q4);
            let q5 = weights(w5, i, k8);
            let wa5 = unpack_lo(q5);
            let wb5 = unpack_hi(q5);
            let q6 = weights(w6, i, k8);
            let wa6 = unpack_lo(q6);
            let wb6 = unpack_hi(q6);
            let q7 = weights(w7, i, k8);
            let wa7 = unpack_lo(q7);
            let wb7 = unpack_hi(q7);
            let xa0 = x[x0 + 2u * i];
            let xb0 = x[x0 + 2u * i + 1u];
            a00 += dot(wa0, xa0) + dot(wb0, xb0);
            a10 += dot(wa1, xa0) + dot(wb1, xb0);
            a20 += dot(wa2, xa0) + dot(wb2, xb0);
            a30 += dot(wa3, xa0) + dot(wb3, xb0);
            a40 += dot(wa4, xa0) + dot(wb4, xb0);
            a50 += dot(wa5, xa0) + dot(wb5, xb0);
            a60 += dot(wa6, xa0) + dot(wb6, xb0);
            a70 += dot(wa7, xa0) + dot(wb7, xb0);
            let xa1 = x[x1 + 2u * i];
            let xb1 = x[x1 + 2u * i + 1u];
            a01 += dot(wa0, xa1) + dot(wb0, xb1);
            a11 += dot(wa1, xa1) + dot(wb1, xb1);
            a21 += dot(wa2, xa1) + dot(wb2, xb1);
            a31 += dot(wa3, xa1) + dot(wb3, xb1);
            a41 += dot(wa4, xa1) + dot(wb4, xb1);
            a51 += dot(wa5, xa1) + dot(wb5, xb1);
            a61 += dot(wa6, xa1) + dot(wb6, xb1);
            a71 += dot(wa7, xa1) + dot(wb7, xb1);
            let xa2 = x[x2 + 2u * i];
            let xb2 = x[x2 + 2u * i + 1u];
            a02 += dot(wa0, xa2) + dot(wb0, xb2);
            a12 += dot(wa1, xa2) + dot(wb1, xb2);
            a22 += dot(wa2, xa2) + dot(wb2, xb2);
            a32 += dot(wa3, xa2) + dot(wb3, xb2);
            a42 += dot(wa4, xa2) + dot(wb4, xb2);
            a52 += dot(wa5, xa2) + dot(wb5, xb2);
            a62 += dot(wa6, xa2) + dot(wb6, xb2);
            a72 += dot(wa7, xa2) + dot(wb7, xb2);
            let xa3 = x[x3 + 2u * i];
            let xb3 = x[x3 + 2u * i + 1u];
            a03 += dot(wa0, xa3) + dot(wb0, xb3);
            a13 += dot(wa1, xa3) + dot(wb1, xb3);
            a23 += dot(wa2, xa3) + dot(wb2, xb3);
            a33 += dot(wa3, xa3) + dot(wb3, xb3);
            a43 += dot(wa4, xa3) + dot(wb4, xb3);
            a53 += dot(wa5, xa3) + dot(wb5, xb3);
            a63 += dot(wa6, xa3) + dot(wb6, xb3);
            a73 += dot(wa7, xa3) + dot(wb7, xb3);
            let xa4 = x[x4 + 2u * i];
            let xb4 = x[x4 + 2u * i + 1u];
            a04 += dot(wa0, xa4) + dot(wb0, xb4);
            a14 += dot(wa1, xa4) + dot(wb1, xb4);
            a24 += dot(wa2, xa4) + dot(wb2, xb4);
            a34 += dot(wa3, xa4) + dot(wb3, xb4);
            a44 += dot(wa4, xa4) + dot(wb4, xb4);
            a54 += dot(wa5, xa4) + dot(wb5, xb4);
            a64 += dot(wa6, xa4) + dot(wb6, xb4);
            a74 += dot(wa7, xa4) + dot(wb7, xb4);
            let xa5 = x[x5 + 2u * i];
            let xb5 = x[x5 + 2u * i + 1u];
            a05 += dot(wa0, xa5) + dot(wb0, xb5);
            a15 += dot(wa1, xa5) + dot(wb1, xb5);
            a25 += dot(wa2, xa5) + dot(wb2, xb5);
            a35 += dot(wa3, xa5) + dot(wb3, xb5);
            a45 += dot(wa4, xa5) + dot(wb4, xb5);
            a55 += dot(wa5, xa5) + dot(wb5, xb5);
            a65 += dot(wa6, xa5) + dot(wb6, xb5);
            a75 += dot(wa7, xa5) + dot(wb7, xb5);
            let xa6 = x[x6 + 2u * i];
            let xb6 = x[x6 + 2u * i + 1u];
            a06 += dot(wa0, xa6) + dot(wb0, xb6);
            a16 += dot(wa1, xa6) + dot(wb1, xb6);
            a26 += dot(wa2, xa6) + dot(wb2, xb6);
            a36 += dot(wa3, xa6) + dot(wb3, xb6);
            a46 += dot(wa4, xa6) + dot(wb4, xb6);
            a56 += dot(wa5, xa6) + dot(wb5, xb6);
            a66 += dot(wa6, xa6) + dot(wb6, xb6);
            a76 += dot(wa7, xa6) + dot(wb7, xb6);
            let xa7 = x[x7 + 2u * i];
            let xb7 = x[x7 + 2u * i + 1u];
            a07 += dot(wa0, xa7) + dot(wb0, xb7);
            a17 += dot(wa1, xa7) + dot(wb1, xb7);
            a27 += dot(wa2, xa7) + dot(wb2, xb7);
            a37 += dot(wa3, xa7) + dot(wb3, xb7);
            a47 += dot(wa4, xa7) + dot(wb4, xb7);
            a57 += dot(wa5, xa7) + dot(wb5, xb7);
            a67 += dot(wa6, xa7) + dot(wb6, xb7);
            a77 += dot(wa7, xa7) + dot(wb7, xb7);
        }
        if (r0 + 0u < p.rows && m0 + 0u < m_end) {
            store(m0 + 0u, p.row_start + r0 + 0u, a00);
        }
        if (r0 + 0u < p.rows && m0 + 1u < m_end) {
            store(m0 + 1u, p.row_start + r0 + 0u, a01);
        }
        if (r0 + 0u < p.rows && m0 + 2u < m_end) {
            store(m0 + 2u, p.row_start + r0 + 0u, a02);
        }
        if (r0 + 0u < p.rows && m0 + 3u < m_end) {
            store(m0 + 3u, p.row_start + r0 + 0u, a03);
        }
        if (r0 + 0u < p.rows && m0 + 4u < m_end) {
            store(m0 + 4u, p.row_start + r0 + 0u, a04);
        }
        if (r0 + 0u < p.rows && m0 + 5u < m_end) {
            store(m0 + 5u, p.row_start + r0 + 0u, a05);
        }
        if (r0 + 0u < p.rows && m0 + 6u < m_end) {
            store(m0 + 6u, p.row_start + r0 + 0u, a06);
        }
        if (r0 + 0u < p.rows && m0 + 7u < m_end) {
            store(m0 + 7u, p.row_start + r0 + 0u, a07);
        }
        if (r0 + 1u < p.rows && m0 + 0u < m_end) {
            store(m0 + 0u, p.row_start + r0 + 1u, a10);
        }
        if (r0 + 1u < p.rows && m0 + 1u < m_end) {
            store(m0 + 1u, p.row_start + r0 + 1u, a11);
        }
        if (r0 + 1u < p.rows && m0 + 2u < m_end) {
            store(m0 + 2u, p.row_start + r0 + 1u, a12);
        }
        if (r0 + 1u < p.rows && m0 + 3u < m_end) {
            store(m0 + 3u, p.row_start + r0 + 1u, a13);
        }
        if (r0 + 1u < p.rows && m0 + 4u < m_end) {
            store(m0 + 4u, p.row_start + r0 + 1u, a14);
        }
        if (r0 + 1u < p.rows && m0 + 5u < m_end) {
            store(m0 + 5u, p.row_start + r0 + 1u, a15);
        }
        if (r0 + 1u < p.rows && m0 + 6u < m_end) {
            store(m0 + 6u, p.row_start + r0 + 1u, a16);
        }
        if (r0 + 1u < p.rows && m0 + 7u < m_end) {
            store(m0 + 7u, p.row_start + r0 + 1u, a17);
        }
        if (r0 + 2u < p.rows && m0 + 0u < m_end) {
            store(m0 + 0u, p.row_start + r0 + 2u, a20);
        }
        if (r0 + 2u < p.rows && m0 + 1u < m_end) {
            store(m0 + 1u, p.row_start + r0 + 2u, a21);
        }
        if (r0 + 2u < p.rows && m0 + 2u < m_end) {
            store(m0 + 2u, p.row_start + r0 + 2u, a22);
        }
        if (r0 + 2u < p.rows && m0 + 3u < m_end) {
            store(m0 + 3u, p.row_start + r0 + 2u, a23);
        }
        if (r0 + 2u < p.rows && m0 + 4u < m_end) {
            store(m0 + 4u, p.row_start + r0 + 2u, a24);
        }
        if (r0 + 2u < p.rows && m0 + 5u < m_end) {
            store(m0 + 5u, p.row_start + r0 + 2u, a25);
        }
        if (r0 + 2u < p.rows && m0 + 6u < m_end) {
            store(m0 + 6u, p.row_start + r0 + 2u, a26);
        }
        if (r0 + 2u < p.rows && m0 + 7u < m_end) {
            store(m0 + 7u, p.row_start + r0 + 2u, a27);
        }
        if (r0 + 3u < p.rows && m0 + 0u < m_end) {
            store(m0 + 0u, p.row_start + r0 + 3u, a30);
        }
        if (r0 + 3u < p.rows && m0 + 1u < m_end) {
            store(m0 + 1u, p.row_start + r0 + 3u, a31);
        }
        if (r0 + 3u < p.rows && m0 + 2u < m_end) {
            store(m0 + 2u, p.row_start + r0 + 3u, a32);
        }
        if (r0 + 3u < p.rows && m0 + 3u < m_end) {
            store(m0 + 3u, p.row_start + r0 + 3u, a33);
        }
        if (r0 + 3u < p.rows && m0 + 4u < m_end) {
            store(m0 + 4u, p.row_start + r0 + 3u, a34);
        }
        if (r0 + 3u < p.rows && m0 + 5u < m_end) {
            store(m0 + 5u, p.row_start + r0 + 3u, a35);
        }
        if (r0 + 3u < p.rows && m0 + 6u < m_end) {
            store(m0 + 6u, p.row_start + r0 + 3u, a36);
        }
        if (r0 + 3u < p.rows && m0 + 7u < m_end) {
            store(m0 + 7u, p.row_start + r0 + 3u, a37);
        }
        if (r0 + 4u < p.rows && m0 + 0u < m_end) {
            store(m0 + 0u, p.row_start + r0 + 4u, a40);
        }
        if (r0 + 4u < p.rows && m0 + 1u < m_end) {
            store(m0 + 1u, p.row_start + r0 + 4u, a41);
        }
        if (r0 + 4u < p.rows && m0 + 2u < m_end) {
            store(m0 + 2u, p.row_start + r0 + 4u, a42);
        }
        if (r0 + 4u < p.rows && m0 + 3u < m_end) {
            store(m0 + 3u, p.row_start + r0 + 4u, a43);
        }
        if (r0 + 4u < p.rows && m0 + 4u < m_end) {
            store(m0 + 4u, p.row_start + r0 + 4u, a44);
        }
        if (r0 + 4u < p.rows && m0 + 5u < m_end) {
            store(m0 + 5u, p.row_start + r0 + 4u, a45);
        }
        if (r0 + 4u < p.rows && m0 + 6u < m_end) {
            store(m0 + 6u, p.row_start + r0 + 4u, a46);
        }
        if (r0 + 4u < p.rows && m0 + 7u < m_end) {
            store(m0 + 7u, p.row_start + r0 + 4u, a47);
        }
        if (r0 + 5u < p.rows && m0 + 0u < m_end) {
            store(m0 + 0u, p.row_start + r0 + 5u, a50);
        }
        if (r0 + 5u < p.rows && m0 + 1u < m_end) {
            store(m0 + 1u, p.row_start + r0 + 5u, a51);
        }
        if (r0 + 5u < p.rows && m0 + 2u < m_end) {
            store(m0 + 2u, p.row_start + r0 + 5u, a52);
        }
        if (r0 + 5u < p.rows && m0 + 3u < m_end) {
            store(m0 + 3u, p.row_start + r0 + 5u, a53);
        }
        if (r0 + 5u < p.rows && m0 + 4u < m_end) {
            store(m0 + 4u, p.row_start + r0 + 5u, a54);
        }
        if (r0 + 5u < p.rows && m0 + 5u < m_end) {
            store(m0 + 5u, p.row_start + r0 + 5u, a55);
        }
        if (r0 + 5u < p.rows && m0 + 6u < m_end) {
            store(m0 + 6u, p.row_start + r0 + 5u, a56);
        }
        if (r0 + 5u < p.rows && m0 + 7u < m_end) {
            store(m0 + 7u, p.row_start + r0 + 5u, a57);
        }
        if (r0 + 6u < p.rows && m0 + 0u < m_end) {
            store(m0 + 0u, p.row_start + r0 + 6u, a60);
        }
        if (r0 + 6u < p.rows && m0 + 1u < m_end) {
            store(m0 + 1u, p.row_start + r0 + 6u, a61);
        }
        if (r0 + 6u < p.rows && m0 + 2u < m_end) {
            store(m0 + 2u, p.row_start + r0 + 6u, a62);
        }
        if (r0 + 6u < p.rows && m0 + 3u < m_end) {
            store(m0 + 3u, p.row_start + r0 + 6u, a63);
        }
        if (r0 + 6u < p.rows && m0 + 4u < m_end) {
            store(m0 + 4u, p.row_start + r0 + 6u, a64);
        }
        if (r0 + 6u < p.rows && m0 + 5u < m_end) {
            store(m0 + 5u, p.row_start + r0 + 6u, a65);
        }
        if (r0 + 6u < p.rows && m0 + 6u < m_end) {
            store(m0 + 6u, p.row_start + r0 + 6u, a66);
        }
        if (r0 + 6u < p.rows && m0 + 7u < m_end) {
            store(m0 + 7u, p.row_start + r0 + 6u, a67);
        }
        if (r0 + 7u < p.rows && m0 + 0u < m_end) {
            store(m0 + 0u, p.row_start + r0 + 7u, a70);
        }
        if (r0 + 7u < p.rows && m0 + 1u < m_end) {
            store(m0 + 1u, p.row_start + r0 + 7u, a71);
        }
        if (r0 + 7u < p.rows && m0 + 2u < m_end) {
            store(m0 + 2u, p.row_start + r0 + 7u, a72);
        }
        if (r0 + 7u < p.rows && m0 + 3u < m_end) {
            store(m0 + 3u, p.row_start + r0 + 7u, a73);
        }
        if (r0 + 7u < p.rows && m0 + 4u < m_end) {
            store(m0 + 4u, p.row_start + r0 + 7u, a74);
        }
        if (r0 + 7u < p.rows && m0 + 5u < m_end) {
            store(m0 + 5u, p.row_start + r0 + 7u, a75);
        }
        if (r0 + 7u < p.rows && m0 + 6u < m_end) {
            store(m0 + 6u, p.row_start + r0 + 7u, a76);
        }
        if (r0 + 7u < p.rows && m0 + 7u < m_end) {
            store(m0 + 7u, p.row_start + r0 + 7u, a77);
        }
    }
}

// END generated by scripts/matmul-tiles.py

// Decode (m == 1): one row of x, ROWS_1 weight rows per invocation, so each pair of x loads
// feeds 8 rows of weights; every invocation still streams its own contiguous weight rows. The rows
// are written out (not an array) so the accumulators stay in registers on CPU adapters.
const ROWS_1: u32 = 8u;

@compute @workgroup_size(64)
fn matmul_bf16_m1(@builtin(global_invocation_id) gid: vec3<u32>) {
    let r0 = gid.x * ROWS_1;
    if (r0 >= p.rows) {
        return;
    }
    let k8 = p.k / 8u;
    // Rows past the chunk re-read its last row; their results are not stored.
    let w0 = min(r0 + 0u, p.rows - 1u);
    let w1 = min(r0 + 1u, p.rows - 1u);
    let w2 = min(r0 + 2u, p.rows - 1u);
    let w3 = min(r0 + 3u, p.rows - 1u);
    let w4 = min(r0 + 4u, p.rows - 1u);
    let w5 = min(r0 + 5u, p.rows - 1u);
    let w6 = min(r0 + 6u, p.rows - 1u);
    let w7 = min(r0 + 7u, p.rows - 1u);
    var a0 = 0.0; var a1 = 0.0; var a2 = 0.0; var a3 = 0.0; var a4 = 0.0; var a5 = 0.0; var a6 = 0.0; var a7 = 0.0;
    for (var i = 0u; i < k8; i++) {
        let xa = x[2u * i];
        let xb = x[2u * i + 1u];
        let q0 = weights(w0, i, k8);
        a0 += dot(unpack_lo(q0), xa) + dot(unpack_hi(q0), xb);
        let q1 = weights(w1, i, k8);
        a1 += dot(unpack_lo(q1), xa) + dot(unpack_hi(q1), xb);
        let q2 = weights(w2, i, k8);
        a2 += dot(unpack_lo(q2), xa) + dot(unpack_hi(q2), xb);
        let q3 = weights(w3, i, k8);
        a3 += dot(unpack_lo(q3), xa) + dot(unpack_hi(q3), xb);
        let q4 = weights(w4, i, k8);
        a4 += dot(unpack_lo(q4), xa) + dot(unpack_hi(q4), xb);
        let q5 = weights(w5, i, k8);
        a5 += dot(unpack_lo(q5), xa) + dot(unpack_hi(q5), xb);
        let q6 = weights(w6, i, k8);
        a6 += dot(unpack_lo(q6), xa) + dot(unpack_hi(q6), xb);
        let q7 = weights(w7, i, k8);
        a7 += dot(unpack_lo(q7), xa) + dot(unpack_hi(q7), xb);
    }
    if (r0 + 0u < p.rows) {
        store(0u, p.row_start + r0 + 0u, a0);
    }
    if (r0 + 1u < p.rows) {
        store(0u, p.row_start + r0 + 1u, a1);
    }
    if (r0 + 2u < p.rows) {
        store(0u, p.row_start + r0 + 2u, a2);
    }
    if (r0 + 3u < p.rows) {
        store(0u, p.row_start + r0 + 3u, a3);
    }
    if (r0 + 4u < p.rows) {
        store(0u, p.row_start + r0 + 4u, a4);
    }
    if (r0 + 5u < p.rows) {
        store(0u, p.row_start + r0 + 5u, a5);
    }
    if (r0 + 6u < p.rows) {
        store(0u, p.row_start + r0 + 6u, a6);
    }
    if (r0 + 7u < p.rows) {
        store(0u, p.row_start + r0 + 7u, a7);
    }
}
