// Microkernels for the roofline probe: copy bandwidth (bytes read + written) and read bandwidth
// (what a GEMV needs: each lane folds what it reads into one vec4 it writes) with two read patterns
// — each invocation streaming its own contiguous block (fast on CPU-backed adapters such as
// lavapipe) and a grid-stride loop (coalesced across lanes, fast on GPUs) — and the f32 FMA rate.
// `fill` writes the pattern the probe checks its copies and reads against (`pattern` in
// src/gpu/roofline.rs mirrors it).

struct Params {
    n: u32,          // vec4 elements to copy
    per_lane: u32,   // blocked: elements per invocation
    iters: u32,      // fma: iterations per invocation
    _pad: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> src: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read_write> dst: array<vec4<u32>>;

@compute @workgroup_size(64)
fn copy_blocked(@builtin(global_invocation_id) gid: vec3<u32>) {
    let start = gid.x * p.per_lane;
    let end = min(start + p.per_lane, p.n);
    for (var i = start; i < end; i++) {
        dst[i] = src[i];
    }
}

@compute @workgroup_size(64)
fn copy_strided(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let stride = groups.x * 64u;
    for (var i = gid.x; i < p.n; i += stride) {
        dst[i] = src[i];
    }
}

fn pattern(i: u32) -> vec4<u32> {
    return vec4<u32>(i * 2654435761u, i ^ 0x9e3779b9u, i * 40503u + 1u, ~i);
}

@compute @workgroup_size(64)
fn fill(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let stride = groups.x * 64u;
    // `src` is read (never, in practice) so that every kernel has the same binding layout.
    let never = select(vec4<u32>(0u), src[0], p.iters == 1u);
    for (var i = gid.x; i < p.n; i += stride) {
        dst[i] = pattern(i) ^ never;
    }
}

@compute @workgroup_size(64)
fn read_blocked(@builtin(global_invocation_id) gid: vec3<u32>) {
    let start = gid.x * p.per_lane;
    let end = min(start + p.per_lane, p.n);
    var acc = vec4<u32>(0u);
    for (var i = start; i < end; i++) {
        acc ^= src[i];
    }
    dst[gid.x] = acc;
}

@compute @workgroup_size(64)
fn read_strided(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let stride = groups.x * 64u;
    var acc = vec4<u32>(0u);
    for (var i = gid.x; i < p.n; i += stride) {
        acc ^= src[i];
    }
    dst[gid.x] = acc;
}

// 8 independent chains of vec4 FMAs: 8 * 4 * 2 = 64 FLOPs per iteration per invocation.
@compute @workgroup_size(64)
fn fma_rate(@builtin(global_invocation_id) gid: vec3<u32>) {
    let seed = f32(gid.x & 255u) * 1e-3;
    var a0 = vec4<f32>(seed);
    var a1 = a0 + 0.1;
    var a2 = a0 + 0.2;
    var a3 = a0 + 0.3;
    var a4 = a0 + 0.4;
    var a5 = a0 + 0.5;
    var a6 = a0 + 0.6;
    var a7 = a0 + 0.7;
    let m = vec4<f32>(0.999);
    let c = vec4<f32>(1e-4);
    for (var i = 0u; i < p.iters; i++) {
        a0 = fma(a0, m, c);
        a1 = fma(a1, m, c);
        a2 = fma(a2, m, c);
        a3 = fma(a3, m, c);
        a4 = fma(a4, m, c);
        a5 = fma(a5, m, c);
        a6 = fma(a6, m, c);
        a7 = fma(a7, m, c);
    }
    let s = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
    if (gid.x < p.n) {
        // `src` is read (never, in practice) so all three kernels share one binding layout.
        dst[gid.x] = bitcast<vec4<u32>>(s) ^ select(vec4<u32>(0u), src[0], p.iters == 0u);
    }
}
