// The GPU family's GEMV with a team's 32 partial sums reduced by subgroup shuffles instead of a
// 5-round tree in workgroup memory (devices with `subgroups`; compiled after matmul.wgsl and
// matmul_gpu.wgsl, whose `gemv_part`, `gemv_store` and x block it uses, so the fused x forms
// apply here too).
//
// Subgroups of 8 to 128 lanes: the shuffles sum min(subgroup size, 32) neighbouring lanes, and
// where a subgroup is narrower than a team its 32 / size partial sums meet in workgroup memory
// after one barrier. That needs a subgroup to be consecutive invocations (lane = index % size),
// as on every GPU we know of (NVIDIA, AMD, Intel, Apple, lavapipe); the kernel tests check it on
// the adapter they run on.

@compute @workgroup_size(256)
fn matmul_bf16_gemv_sg(
    @builtin(local_invocation_index) li: u32,
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(subgroup_size) sg_size: u32,
) {
    let part = gemv_part(li, wg);
    let width = min(sg_size, GEMV_LANES);
    var v = part.acc;
    for (var o = width / 2u; o > 0u; o /= 2u) {
        v += subgroupShuffleXor(v, o);
    }
    gemv_sums[li] = v;
    workgroupBarrier();
    // A team's (or in the four-row layout a group's) subgroup sums meet at its first lane.
    let span = gemv_span();
    if (li % span == 0u) {
        var sum = v;
        for (var s = width; s < span; s += width) {
            sum += gemv_sums[li + s];
        }
        gemv_store(part, sum * part.scale);
    }
}
