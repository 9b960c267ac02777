// The matmuls of the GPU kernel family (discrete and integrated GPUs; `TOKENMETER_KERNELS=gpu` or
// `?kernels=gpu` force them anywhere). The engine compiles this file after matmul.wgsl (Params,
// bindings, `weights`, unpacking and `store` come from there).
//
// On a GPU, neighbouring invocations must read neighbouring addresses: the CPU family's kernels,
// where each invocation walks its own weight rows, read addresses a whole row apart.
// - `matmul_bf16_gemv` (steps of 1-4 tokens): 32 lanes share one weight row and stride along K
//   together, one vec4<u32> (8 bf16) each per load, so a team reads 512 contiguous bytes at a time;
//   8 teams (8 rows) per workgroup; the lanes' partial sums meet in workgroup memory. Workgroup x
//   is the group of 4 tokens and y the 8 rows, so the workgroups that share rows run together and
//   re-read them from cache. A step of one token (decode at batch 1) takes `gemv_m1` where the
//   host sets `GEMV_M1` in `p.flags` (`KernelOptions::gemv_m1`, chosen by the kernel trial): only that token's
//   products — the 4-token loop loads x and multiplies 4 times per weight load, for copies of one
//   row — with two weight loads in flight per lane. Where the host sets `GEMV_ROWS4`
//   (`KernelOptions::gemv_rows4`, chosen by the kernel trial) a one-token step takes the four-row
//   layout instead (`gemv_four_rows`): each half of the workgroup (128 lanes) strides along K over
//   four rows at once, so one load of x feeds four rows, a lane has four weight loads in flight a
//   trip, and a row's K is split over 128 lanes instead of 32. The branches are on a uniform, so
//   every invocation of a dispatch takes the same side.
// - `matmul_bf16_tiled` (more tokens): a 64-token x 64-row output tile per workgroup, x and W
//   staged in workgroup memory 16 columns of K at a time (as f32), each invocation owning a
//   4 x 4 register block; W is read once per 64 tokens instead of once per token. Where the host
//   sets `TILE_PREFETCH` (`KernelOptions::tile_prefetch`, chosen by the kernel trial) the next
//   round's loads are issued before this round's products.
// Rows past the chunk and tokens past the step re-read the last one; only the stores are guarded,
// so every invocation reaches every barrier.
//
// Both read x through the `// BEGIN x … // END x` block below: `x_row(t)` (where token t's row
// starts, in vec4s), `x_load(row, j)` (its vec4 j), and where `X_NORM` (the input is RMSNorm(x))
// `x_col_scale(j)` (the norm weight of columns 4j .. 4j + 3) and `x_scale(Σx²)` (the row's
// 1 / rms, applied to the finished sum). The fused kernels swap the block for another form
// (`Kernel::source`): matmul_x_norm.wgsl, RMSNorm of the residual stream in the prologue (the
// norm weight applied to W in the GEMV, to x in the tile, Σx² from the same loads), and
// matmul_x_swiglu.wgsl, silu(gate) * up read from the gate|up output (the GEMV only: see
// `KernelOptions::fuses`). Each saves a dispatch per layer, and the normed or activated x is
// never written.

// BEGIN x
const X_NORM: bool = false;
fn x_row(t: u32) -> u32 {
    return t * (p.k / 4u);
}
fn x_load(row: u32, j: u32) -> vec4<f32> {
    return x[row + j];
}
fn x_col_scale(j: u32) -> vec4<f32> {
    return vec4<f32>(1.0);
}
fn x_scale(sum_sq: f32) -> f32 {
    return 1.0;
}
// END x

// GEMV_TEAMS, GEMV_TOKENS, TILE and TILE_K come from the prelude (src/gpu/kernels.rs).
const GEMV_LANES: u32 = 32u;
// The four-row layout's group of teams (`gemv_rows4`): four teams, half the workgroup.
const GEMV_GROUP: u32 = 128u;

var<workgroup> gemv_sums: array<vec4<f32>, 256>;

// One invocation's share of a GEMV workgroup: its lane's partial sums for the 4 tokens, the
// tokens' 1 / rms (X_NORM; 1 otherwise), and where its team's sums go. The entry points differ
// only in how a team's 32 partial sums meet (workgroup memory here, shuffles in
// matmul_gpu_subgroup.wgsl).
struct GemvPart {
    acc: vec4<f32>,
    scale: vec4<f32>,
    row: u32,
    m0: u32,
}

fn gemv_part(li: u32, wg: vec3<u32>) -> GemvPart {
    let lane = li % GEMV_LANES;
    let team = li / GEMV_LANES;
    let row = wg.y * GEMV_TEAMS + team;
    let w_row = min(row, p.rows - 1u);
    let m0 = wg.x * GEMV_TOKENS;
    let k8 = p.k / 8u;
    // x rows of the (up to) four tokens, clamped to the step's last token.
    let t0 = x_row(min(m0, p.m - 1u));
    let t1 = x_row(min(m0 + 1u, p.m - 1u));
    let t2 = x_row(min(m0 + 2u, p.m - 1u));
    let t3 = x_row(min(m0 + 3u, p.m - 1u));
    // X_NORM: each token's 1 / rms first, the whole workgroup summing x² over the (up to) four
    // rows once (x is small and stays in cache for the loop below).
    var scale = vec4<f32>(1.0);
    if (X_NORM) {
        var sq = vec4<f32>(0.0);
        for (var j = li; j < p.k / 4u; j += 256u) {
            let a0 = x_load(t0, j);
            let a1 = x_load(t1, j);
            let a2 = x_load(t2, j);
            let a3 = x_load(t3, j);
            sq += vec4<f32>(dot(a0, a0), dot(a1, a1), dot(a2, a2), dot(a3, a3));
        }
        gemv_sums[li] = sq;
        workgroupBarrier();
        for (var s = 128u; s > 0u; s /= 2u) {
            if (li < s) {
                gemv_sums[li] += gemv_sums[li + s];
            }
            workgroupBarrier();
        }
        let ss = gemv_sums[0];
        scale = vec4<f32>(x_scale(ss.x), x_scale(ss.y), x_scale(ss.z), x_scale(ss.w));
        workgroupBarrier();
    }
    var acc = vec4<f32>(0.0);
    if (gemv_rows4()) {
        // Group li / 128's four rows; `scale` is one token's in every component.
        let r0 = wg.y * GEMV_TEAMS + (li / GEMV_GROUP) * 4u;
        return GemvPart(gemv_four_rows(r0, li % GEMV_GROUP, t0), scale, r0, m0);
    }
    if (p.m == 1u && (p.flags & GEMV_M1) != 0u) {
        acc.x = gemv_m1(w_row, lane, t0);
        return GemvPart(acc, scale, row, m0);
    }
    for (var i = lane; i < k8; i += GEMV_LANES) {
        let q = weights(w_row, i, k8);
        var wl = unpack_lo(q);
        var wh = unpack_hi(q);
        let j = 2u * i;
        if (X_NORM) {
            // The norm weight goes onto the weights: two products, not one per token.
            wl *= x_col_scale(j);
            wh *= x_col_scale(j + 1u);
        }
        acc.x += dot(wl, x_load(t0, j)) + dot(wh, x_load(t0, j + 1u));
        acc.y += dot(wl, x_load(t1, j)) + dot(wh, x_load(t1, j + 1u));
        acc.z += dot(wl, x_load(t2, j)) + dot(wh, x_load(t2, j + 1u));
        acc.w += dot(wl, x_load(t3, j)) + dot(wh, x_load(t3, j + 1u));
    }
    return GemvPart(acc, scale, row, m0);
}

// One lane's share of row `w_row` times x row `t` (a step of one token): weights 8i .. 8i + 7 for
// i = lane, lane + 32, …, two loads a trip into two sums.
fn gemv_m1(w_row: u32, lane: u32, t: u32) -> f32 {
    let k8 = p.k / 8u;
    var a = 0.0;
    var b = 0.0;
    var i = lane;
    for (; i + GEMV_LANES < k8; i += 2u * GEMV_LANES) {
        let q0 = weights(w_row, i, k8);
        let q1 = weights(w_row, i + GEMV_LANES, k8);
        a += gemv_term(unpack_lo(q0), unpack_hi(q0), i, t);
        b += gemv_term(unpack_lo(q1), unpack_hi(q1), i + GEMV_LANES, t);
    }
    if (i < k8) {
        let q = weights(w_row, i, k8);
        a += gemv_term(unpack_lo(q), unpack_hi(q), i, t);
    }
    return a + b;
}

// Whether this step takes the four-row layout (`GEMV_ROWS4`, one token): 4 teams (128 lanes,
// `GEMV_GROUP`) share four rows, so each load of x feeds four rows and a lane has four weight
// loads in flight a trip; a part's `acc` then holds four rows' sums (rows `row` .. `row` + 3),
// not four tokens'.
fn gemv_rows4() -> bool {
    return p.m == 1u && (p.flags & GEMV_ROWS4) != 0u;
}

// Lanes that share a part's sums: a team, or in the four-row layout a group of four teams.
fn gemv_span() -> u32 {
    return select(GEMV_LANES, GEMV_GROUP, gemv_rows4());
}

// One lane's share of rows r0 .. r0 + 3 times x row `t`: weights 8i .. 8i + 7 of each row for
// i = lane, lane + 128, …, x loaded once for the four.
fn gemv_four_rows(r0: u32, lane: u32, t: u32) -> vec4<f32> {
    let k8 = p.k / 8u;
    let w0 = min(r0, p.rows - 1u);
    let w1 = min(r0 + 1u, p.rows - 1u);
    let w2 = min(r0 + 2u, p.rows - 1u);
    let w3 = min(r0 + 3u, p.rows - 1u);
    var acc = vec4<f32>(0.0);
    for (var i = lane; i < k8; i += GEMV_GROUP) {
        let q0 = weights(w0, i, k8);
        let q1 = weights(w1, i, k8);
        let q2 = weights(w2, i, k8);
        let q3 = weights(w3, i, k8);
        let j = 2u * i;
        var xl = x_load(t, j);
        var xh = x_load(t, j + 1u);
        if (X_NORM) {
            // The norm weight goes onto x here: one product for four rows.
            xl *= x_col_scale(j);
            xh *= x_col_scale(j + 1u);
        }
        acc += vec4<f32>(
            dot(unpack_lo(q0), xl) + dot(unpack_hi(q0), xh),
            dot(unpack_lo(q1), xl) + dot(unpack_hi(q1), xh),
            dot(unpack_lo(q2), xl) + dot(unpack_hi(q2), xh),
            dot(unpack_lo(q3), xl) + dot(unpack_hi(q3), xh),
        );
    }
    return acc;
}

// Weights 8i .. 8i + 7 (as `w_lo`, `w_hi`) times x row `t`'s columns 8i .. 8i + 7.
fn gemv_term(w_lo: vec4<f32>, w_hi: vec4<f32>, i: u32, t: u32) -> f32 {
    let j = 2u * i;
    var wl = w_lo;
    var wh = w_hi;
    if (X_NORM) {
        wl *= x_col_scale(j);
        wh *= x_col_scale(j + 1u);
    }
    return dot(wl, x_load(t, j)) + dot(wh, x_load(t, j + 1u));
}

// Team `part.row`'s sums (lane 0 of the team stores them), or in the four-row layout the
// group's four rows (lane 0 of the group).
fn gemv_store(part: GemvPart, sum: vec4<f32>) {
    if (gemv_rows4()) {
        for (var r = 0u; r < 4u; r++) {
            if (part.row + r < p.rows) {
                store(0u, p.row_start + part.row + r, sum[r]);
            }
        }
        return;
    }
    if (part.row < p.rows) {
        let col = p.row_start + part.row;
        for (var t = 0u; t < GEMV_TOKENS; t++) {
            if (part.m0 + t < p.m) {
                store(part.m0 + t, col, sum[t]);
            }
        }
    }
}

@compute @workgroup_size(256)
fn matmul_bf16_gemv(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wg: vec3<u32>) {
    let part = gemv_part(li, wg);
    let span = gemv_span();
    let lane = li % span;
    gemv_sums[li] = part.acc;
    workgroupBarrier();
    for (var s = span / 2u; s > 0u; s /= 2u) {
        if (lane < s) {
            gemv_sums[li] += gemv_sums[li + s];
        }
        workgroupBarrier();
    }
    if (lane == 0u) {
        gemv_store(part, gemv_sums[li] * part.scale);
    }
}


// tile_x[kk * 16 + g] = x at column kk of the round for tokens 4g .. 4g + 3; tile_w likewise for
// rows. 2 x 16 x 16 vec4 = 8 KiB.
var<workgroup> tile_x: array<vec4<f32>, 256>;
var<workgroup> tile_w: array<vec4<f32>, 256>;

// One invocation's loads for the round at column k0 of the tile: 4 columns of x (loader li / 4's
// token, part li % 4) and, for invocations 0..127, 8 weights of row w_row (part li % 2), unpacked.
struct TileLoad {
    x: vec4<f32>,
    w_lo: vec4<f32>,
    w_hi: vec4<f32>,
}
fn tile_load(x_base: u32, w_row: u32, k0: u32, li: u32, k8: u32) -> TileLoad {
    var l = TileLoad(x_load(x_base, k0 / 4u + li % 4u), vec4<f32>(0.0), vec4<f32>(0.0));
    if (li < 128u) {
        let q = weights(w_row, k0 / 8u + li % 2u, k8);
        l.w_lo = unpack_lo(q);
        l.w_hi = unpack_hi(q);
    }
    return l;
}

@compute @workgroup_size(256)
fn matmul_bf16_tiled(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wg: vec3<u32>) {
    let r_base = wg.x * TILE;
    let m_base = wg.y * TILE;
    let tr = li % 16u;  // rows 4 tr .. 4 tr + 3 of the tile
    let tm = li / 16u;  // tokens 4 tm .. 4 tm + 3
    let k8 = p.k / 8u;
    // Loaders: x, invocation li brings 4 columns of one token; W, invocations 0..127 bring 8
    // columns of one row.
    let x_token = li / 4u;
    let x_part = li % 4u;
    let x_base = x_row(min(m_base + x_token, p.m - 1u));
    // Σx² of the columns this invocation loads (X_NORM): its token's 4 loaders cover the row.
    var sq = 0.0;
    let w_local = li / 2u;
    let w_part = li % 2u;
    let w_row = min(r_base + w_local, p.rows - 1u);
    var acc0 = vec4<f32>(0.0);
    var acc1 = vec4<f32>(0.0);
    var acc2 = vec4<f32>(0.0);
    var acc3 = vec4<f32>(0.0);
    // The round's loads, held in registers until staged: the next round's are issued before this
    // round's products where the host sets `TILE_PREFETCH` (their latency may hide behind the
    // products, at 12 registers more; on lavapipe it is slower), after them otherwise. Either way
    // each output sums the same products in the same order.
    var next = tile_load(x_base, w_row, 0u, li, k8);
    let prefetch = (p.flags & TILE_PREFETCH) != 0u;
    for (var k0 = 0u; k0 < p.k; k0 += TILE_K) {
        let xj = k0 / 4u + x_part;
        var xs = next.x;
        if (X_NORM) {
            sq += dot(xs, xs);
            xs *= x_col_scale(xj);
        }
        let xk = x_part * 4u;
        tile_x[(xk + 0u) * 16u + x_token / 4u][x_token % 4u] = xs.x;
        tile_x[(xk + 1u) * 16u + x_token / 4u][x_token % 4u] = xs.y;
        tile_x[(xk + 2u) * 16u + x_token / 4u][x_token % 4u] = xs.z;
        tile_x[(xk + 3u) * 16u + x_token / 4u][x_token % 4u] = xs.w;
        if (li < 128u) {
            let wk = w_part * 8u;
            let g = w_local / 4u;
            let c = w_local % 4u;
            tile_w[(wk + 0u) * 16u + g][c] = next.w_lo.x;
            tile_w[(wk + 1u) * 16u + g][c] = next.w_lo.y;
            tile_w[(wk + 2u) * 16u + g][c] = next.w_lo.z;
            tile_w[(wk + 3u) * 16u + g][c] = next.w_lo.w;
            tile_w[(wk + 4u) * 16u + g][c] = next.w_hi.x;
            tile_w[(wk + 5u) * 16u + g][c] = next.w_hi.y;
            tile_w[(wk + 6u) * 16u + g][c] = next.w_hi.z;
            tile_w[(wk + 7u) * 16u + g][c] = next.w_hi.w;
        }
        workgroupBarrier();
        let k1 = k0 + TILE_K;
        if (prefetch && k1 < p.k) {
            next = tile_load(x_base, w_row, k1, li, k8);
        }
        for (var kk = 0u; kk < TILE_K; kk++) {
            let a = tile_x[kk * 16u + tm];
            let b = tile_w[kk * 16u + tr];
            acc0 += a.x * b;
            acc1 += a.y * b;
            acc2 += a.z * b;
            acc3 += a.w * b;
        }
        workgroupBarrier();
        if (!prefetch && k1 < p.k) {
            next = tile_load(x_base, w_row, k1, li, k8);
        }
    }
    if (X_NORM) {
        // Each token's 1 / rms from its 4 loaders' sums, through tile_x (free after the last round).
        tile_x[li].x = sq;
        workgroupBarrier();
        if (x_part == 0u) {
            let ss = tile_x[li].x + tile_x[li + 1u].x + tile_x[li + 2u].x + tile_x[li + 3u].x;
            tile_w[x_token].x = x_scale(ss);
        }
        workgroupBarrier();
        acc0 *= tile_w[4u * tm].x;
        acc1 *= tile_w[4u * tm + 1u].x;
        acc2 *= tile_w[4u * tm + 2u].x;
        acc3 *= tile_w[4u * tm + 3u].x;
    }
    let row = r_base + 4u * tr;
    let m = m_base + 4u * tm;
    var accs = array<vec4<f32>, 4>(acc0, acc1, acc2, acc3);
    for (var t = 0u; t < 4u; t++) {
        if (m + t < p.m) {
            for (var r = 0u; r < 4u; r++) {
                if (row + r < p.rows) {
                    store(m + t, p.row_start + row + r, accs[t][r]);
                }
            }
        }
    }
}
