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
    eps: f32,         // the RMSNorm prologue's epsilon (matmul_x_norm.wgsl; unused elsewhere)
    flags: u32,       // the GPU family's variants (bits below; MatmulParams in src/gpu/kernels/params.rs)
}
// A step of one token takes the GEMV's `gemv_m1` (matmul_gpu.wgsl).
const GEMV_M1: u32 = 1u;
// The tiled matmul loads a round ahead (matmul_gpu.wgsl).
const TILE_PREFETCH: u32 = 2u;
// A step of one token takes the GEMV's four-row layout, `gemv_four_rows` (matmul_gpu.wgsl; before
// `GEMV_M1`).
const GEMV_ROWS4: u32 = 4u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;      // (m, k / 4)
// BEGIN weights (weights_texture.wgsl, or an int8 / int4 form, replaces this block: see
// `Kernel::source`; every form gives `weights()`, the two unpack functions and `row_scale()`)
@group(0) @binding(2) var<storage, read> w: array<vec4<u32>>;      // (rows, k / 8) bf16 x 8
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
@group(0) @binding(3) var<storage, read_write> y: array<f32>;      // (m, n)

// Register blocking: an invocation owns ROWS weight rows and walks its chunk of up to M_CHUNK tokens
// TILE_M at a time, so each weight load feeds TILE_M tokens and a chunk's weights are read from
// memory once (they stay in cache across its token tiles).
const ROWS: u32 = 4u;
const TILE_M: u32 = 4u;
const TILE_M_WIDE: u32 = 8u;
const ROWS_TALL: u32 = 8u;
const M_CHUNK: u32 = 32u;

// Every product leaves through here: its row's scale (`row_scale`, 1 but for int8) goes on once.
fn store(m: u32, col: u32, sum: f32) {
    let i = m * p.n + col;
    let value = sum * row_scale(col - p.row_start, p.k / 8u);
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

// The 8-token tiles `matmul_bf16_wide` and `matmul_bf16_tall` are rendered by build.rs (matmul_tiles.wgsl).

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
