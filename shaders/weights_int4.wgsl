// BEGIN weights: int4, storage buffer (src/model/quant.rs). Row r is `ceil(texels / 8)` words of
// bf16 scales (one per group of 32 weights = 4 loads; group 2t in the low half), then one word
// per 8 weights (weight 8j + e in bits 4e..4e + 3, stored as q + 8). `weights()` returns them scaled.
@group(0) @binding(2) var<storage, read> w: array<u32>;  // (rows, ceil(k / 64) + k / 8)
struct Weights8 {
    lo: vec4<f32>,
    hi: vec4<f32>,
}
// Nibbles 0..3 of `v` as q = nibble - 8.
fn int4x4(v: u32) -> vec4<f32> {
    let n = (vec4<u32>(v) >> vec4<u32>(0u, 4u, 8u, 12u)) & vec4<u32>(15u);
    return vec4<f32>(vec4<i32>(n) - vec4<i32>(8));
}
alias W8 = Weights8;  // what `weights()` returns (weights_pair.wgsl)
fn weights(row: u32, i: u32, texels: u32) -> Weights8 {
    let header = (texels + 7u) / 8u;
    let base = row * (header + texels);
    let group = i / 4u;
    let pair = w[base + group / 2u];
    let scale = bitcast<f32>(select(pair << 16u, pair & 0xffff0000u, (group & 1u) == 1u));
    let q = w[base + header + i];
    return Weights8(int4x4(q) * scale, int4x4(q >> 16u) * scale);
}
fn unpack_lo(q: Weights8) -> vec4<f32> {
    return q.lo;
}
fn unpack_hi(q: Weights8) -> vec4<f32> {
    return q.hi;
}
// The factor every product with row `row` is multiplied by once, after its sum (int8's row scale;
// 1 for a form whose weights() are already scaled).
fn row_scale(row: u32, texels: u32) -> f32 {
    return 1.0;
}
// END weights
