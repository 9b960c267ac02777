// Sampling on the GPU, one workgroup per row, so only the chosen id crosses to the CPU.
// For each row: greedy (temperature <= 0 or top_k == 1) returns the argmax (lowest index on ties).
// Otherwise, with z_i = (logit_i - max) / temperature and weights w_i = exp(z_i):
//   top-k: keep z_i >= the k-th largest z (ties kept, as transformers' TopKLogitsWarper);
//   top-p: of those, keep the smallest top set whose mass is >= top_p of theirs (TopPLogitsWarper);
//   draw: the first index, in index order, where the running kept mass exceeds u * kept mass.
// Thresholds are found by bisection on z (32 halvings), so no sort is needed.
// `u` in [0, 1) comes from the request's seeded generator on the CPU.

struct Params {
    n_rows: u32,
    width: u32,
    _pad0: u32,
    _pad1: u32,
}

struct RowParams {
    temperature: f32,
    top_k: u32,   // 0: off
    top_p: f32,   // 1: off
    u: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> logits: array<f32>;      // (n_rows, width)
@group(0) @binding(2) var<storage, read> rows: array<RowParams>;  // (n_rows)
@group(0) @binding(3) var<storage, read_write> ids: array<u32>;   // (n_rows)

const WG: u32 = 256u;
const BISECTIONS: u32 = 32u;
const NONE: u32 = 0xffffffffu;
var<workgroup> red_f: array<f32, WG>;
var<workgroup> red_u: array<u32, WG>;
var<workgroup> prefix: array<f32, WG>;
var<workgroup> row: RowParams;
var<workgroup> chosen: u32;

fn sum_f(lid: u32, v: f32) -> f32 {
    red_f[lid] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s /= 2u) {
        if (lid < s) {
            red_f[lid] += red_f[lid + s];
        }
        workgroupBarrier();
    }
    let total = workgroupUniformLoad(&red_f[0]);
    return total;
}

fn sum_u(lid: u32, v: u32) -> u32 {
    red_u[lid] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s /= 2u) {
        if (lid < s) {
            red_u[lid] += red_u[lid + s];
        }
        workgroupBarrier();
    }
    let total = workgroupUniformLoad(&red_u[0]);
    return total;
}

fn min_f(lid: u32, v: f32) -> f32 {
    red_f[lid] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s /= 2u) {
        if (lid < s) {
            red_f[lid] = min(red_f[lid], red_f[lid + s]);
        }
        workgroupBarrier();
    }
    let m = workgroupUniformLoad(&red_f[0]);
    return m;
}

@compute @workgroup_size(256)
fn sample(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid3: vec3<u32>) {
    let lid = lid3.x;
    let r = wg.x;
    if (r >= p.n_rows) {
        return;
    }
    if (lid == 0u) {
        row = rows[r];
    }
    let rp = workgroupUniformLoad(&row);
    let base = r * p.width;
    // Lane `lid` owns the contiguous index range [begin, end).
    let seg = (p.width + WG - 1u) / WG;
    let begin = min(lid * seg, p.width);
    let end = min(begin + seg, p.width);

    // 1. Max and argmax (lowest index on ties).
    var best = -3.4e38;
    var best_i = NONE;
    var least = 3.4e38;
    for (var i = begin; i < end; i++) {
        let v = logits[base + i];
        if (v > best || best_i == NONE) {
            best = v;
            best_i = i;
        }
        least = min(least, v);
    }
    red_f[lid] = best;
    red_u[lid] = best_i;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s /= 2u) {
        if (lid < s) {
            let ov = red_f[lid + s];
            let oi = red_u[lid + s];
            if (oi != NONE && (red_u[lid] == NONE || ov > red_f[lid] || (ov == red_f[lid] && oi < red_u[lid]))) {
                red_f[lid] = ov;
                red_u[lid] = oi;
            }
        }
        workgroupBarrier();
    }
    let m = workgroupUniformLoad(&red_f[0]);
    let arg = workgroupUniformLoad(&red_u[0]);
    if (rp.temperature <= 0.0 || rp.top_k == 1u) {
        if (lid == 0u) {
            ids[r] = arg;
        }
        return;
    }
    let inv_t = 1.0 / rp.temperature;
    var tau = (min_f(lid, least) - m) * inv_t;

    // 2. Top-k: the largest tau with count(z >= tau) >= k.
    if (rp.top_k > 0u && rp.top_k < p.width) {
        var lo = tau;
        var hi = 0.0;
        for (var it = 0u; it < BISECTIONS; it++) {
            let mid = 0.5 * (lo + hi);
            var c = 0u;
            for (var i = begin; i < end; i++) {
                if ((logits[base + i] - m) * inv_t >= mid) {
                    c += 1u;
                }
            }
            if (sum_u(lid, c) >= rp.top_k) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        tau = lo;
    }

    // 3. Top-p: the largest threshold whose kept mass is >= top_p of the top-k mass.
    if (rp.top_p < 1.0) {
        var kept = 0.0;
        for (var i = begin; i < end; i++) {
            let z = (logits[base + i] - m) * inv_t;
            if (z >= tau) {
                kept += exp(z);
            }
        }
        let goal = rp.top_p * sum_f(lid, kept);
        var lo = tau;
        var hi = 0.0;
        for (var it = 0u; it < BISECTIONS; it++) {
            let mid = 0.5 * (lo + hi);
            var s = 0.0;
            for (var i = begin; i < end; i++) {
                let z = (logits[base + i] - m) * inv_t;
                if (z >= mid) {
                    s += exp(z);
                }
            }
            if (sum_f(lid, s) >= goal) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        tau = lo;
    }

    // 4. Draw in index order: lane masses, their exclusive prefix, then the lane holding u * mass scans.
    var mine = 0.0;
    for (var i = begin; i < end; i++) {
        let z = (logits[base + i] - m) * inv_t;
        if (z >= tau) {
            mine += exp(z);
        }
    }
    red_f[lid] = mine;
    if (lid == 0u) {
        chosen = arg;
    }
    workgroupBarrier();
    if (lid == 0u) {
        var acc = 0.0;
        for (var l = 0u; l < WG; l++) {
            prefix[l] = acc;
            acc += red_f[l];
        }
    }
    workgroupBarrier();
    let total = prefix[WG - 1u] + red_f[WG - 1u];
    let goal = rp.u * total;
    let last_lane_with_mass = goal >= total && mine > 0.0 && prefix[lid] + mine >= total;
    if ((prefix[lid] <= goal && goal < prefix[lid] + mine) || last_lane_with_mass) {
        var acc = prefix[lid];
        var pick = NONE;
        for (var i = begin; i < end; i++) {
            let z = (logits[base + i] - m) * inv_t;
            if (z >= tau) {
                acc += exp(z);
                pick = i;
                if (acc > goal) {
                    break;
                }
            }
        }
        if (pick != NONE) {
            chosen = pick;
        }
    }
    workgroupBarrier();
    if (lid == 0u) {
        ids[r] = chosen;
    }
}
