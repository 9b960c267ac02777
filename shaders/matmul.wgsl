// y[m, row_start + r] (+)= sum_k x[m, k] * W[r, k]  for one row-chunk W of a [N x K] bf16 weight.
// W is stored as the checkpoint stores it, [out_features, in_features], two bf16 per u32
// (element 2i in the low half). K must be a multiple of 8: each load brings 8 weights.
// Each invocation streams one weight row and computes TILE_M outputs, so a weight is read
// ceil(M / TILE_M) times per step (once at decode). `accumulate` fuses the residual add.

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
@group(0) @binding(2) var<storage, read> w: array<vec4<u32>>;      // (rows, k / 8) bf16 x 8
@group(0) @binding(3) var<storage, read_write> y: array<f32>;      // (m, n)

const TILE_M: u32 = 4u;

fn lo(v: u32) -> f32 {
    return bitcast<f32>(v << 16u);
}

fn hi(v: u32) -> f32 {
    return bitcast<f32>(v & 0xffff0000u);
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
fn matmul_bf16(@builtin(global_invocation_id) gid: vec3<u32>) {
    let r = gid.x;
    let m0 = gid.y * TILE_M;
    if (r >= p.rows || m0 >= p.m) {
        return;
    }
    let k4 = p.k / 4u;
    let k8 = p.k / 8u;
    // Rows past the end of x re-read the last row; their results are not stored.
    let x0 = m0 * k4;
    let x1 = min(m0 + 1u, p.m - 1u) * k4;
    let x2 = min(m0 + 2u, p.m - 1u) * k4;
    let x3 = min(m0 + 3u, p.m - 1u) * k4;
    let wbase = r * k8;
    var a0 = 0.0;
    var a1 = 0.0;
    var a2 = 0.0;
    var a3 = 0.0;
    for (var i = 0u; i < k8; i++) {
        let q = w[wbase + i];
        let wa = vec4<f32>(lo(q.x), hi(q.x), lo(q.y), hi(q.y));
        let wb = vec4<f32>(lo(q.z), hi(q.z), lo(q.w), hi(q.w));
        let j = 2u * i;
        a0 += dot(wa, x[x0 + j]) + dot(wb, x[x0 + j + 1u]);
        a1 += dot(wa, x[x1 + j]) + dot(wb, x[x1 + j + 1u]);
        a2 += dot(wa, x[x2 + j]) + dot(wb, x[x2 + j + 1u]);
        a3 += dot(wa, x[x3 + j]) + dot(wb, x[x3 + j + 1u]);
    }
    let col = p.row_start + r;
    store(m0, col, a0);
    if (m0 + 1u < p.m) {
        store(m0 + 1u, col, a1);
    }
    if (m0 + 2u < p.m) {
        store(m0 + 2u, col, a2);
    }
    if (m0 + 3u < p.m) {
        store(m0 + 3u, col, a3);
    }
}
