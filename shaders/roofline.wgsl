// Microkernels for the roofline probe: copy bandwidth (bytes read + written) and read bandwidth
// (what a GEMV needs: each lane folds what it reads into one vec4 it writes) with three read
// patterns — each invocation streaming its own contiguous block, a grid-stride loop (coalesced
// across lanes, fast on GPUs), and the decode GEMV's own walk of 8 rows in lockstep (what the CPU
// family's matmul_bf16_m1 reads) — and the f32 FMA rate.
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

// The decode GEMV's own read (matmul_bf16_m1 in matmul.wgsl, the CPU family): each invocation walks
// ROWS_1 = 8 weight rows of `per_lane` vec4s in lockstep, one vec4 of each row an iteration, into
// 8 accumulators. Row r is elements r * per_lane .. (r + 1) * per_lane, so invocation l folds
// elements 8 l per_lane .. 8 (l + 1) per_lane.
@compute @workgroup_size(64)
fn read_rows(@builtin(global_invocation_id) gid: vec3<u32>) {
    let width = p.per_lane;
    let r0 = gid.x * 8u;
    if ((r0 + 8u) * width > p.n) {
        return;
    }
    var a0 = vec4<u32>(0u); var a1 = a0; var a2 = a0; var a3 = a0; var a4 = a0; var a5 = a0; var a6 = a0; var a7 = a0;
    for (var i = 0u; i < width; i++) {
        a0 ^= src[(r0 + 0u) * width + i];
        a1 ^= src[(r0 + 1u) * width + i];
        a2 ^= src[(r0 + 2u) * width + i];
        a3 ^= src[(r0 + 3u) * width + i];
        a4 ^= src[(r0 + 4u) * width + i];
        a5 ^= src[(r0 + 5u) * width + i];
        a6 ^= src[(r0 + 6u) * width + i];
        a7 ^= src[(r0 + 7u) * width + i];
    }
    dst[gid.x] = a0 ^ a1 ^ a2 ^ a3 ^ a4 ^ a5 ^ a6 ^ a7;
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
