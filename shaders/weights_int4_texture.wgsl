// BEGIN weights: int4 in an `r32uint` texture (src/model/quant.rs): the words of weights_int4.wgsl's
// row, one per texel (the scales first).
@group(0) @binding(2) var w: texture_2d<u32>;
struct Weights8 {
    lo: vec4<f32>,
    hi: vec4<f32>,
}
fn int4x4(v: u32) -> vec4<f32> {
    let n = (vec4<u32>(v) >> vec4<u32>(0u, 4u, 8u, 12u)) & vec4<u32>(15u);
    return vec4<f32>(vec4<i32>(n) - vec4<i32>(8));
}
alias W8 = Weights8;  // what `weights()` returns (weights_pair.wgsl)
fn weights(row: u32, i: u32, texels: u32) -> Weights8 {
    let header = (texels + 7u) / 8u;
    let group = i / 4u;
    let pair = textureLoad(w, vec2<u32>(group / 2u, row), 0).x;
    let scale = bitcast<f32>(select(pair << 16u, pair & 0xffff0000u, (group & 1u) == 1u));
    let q = textureLoad(w, vec2<u32>(header + i, row), 0).x;
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
