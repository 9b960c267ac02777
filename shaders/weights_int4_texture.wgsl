// BEGIN weights: int4 in an `rg32uint` texture (src/model/quant.rs): the words of weights_int4.wgsl's
// row, two per texel: the scales first (four a texel), then 16 weights a texel, so `weights16()`
// is one scale fetch and one weights fetch where `weights()` twice makes two each.
@group(0) @binding(2) var w: texture_2d<u32>;
struct Weights8 {
    lo: vec4<f32>,
    hi: vec4<f32>,
}
fn int4x4(v: u32) -> vec4<f32> {
    let n = (vec4<u32>(v) >> vec4<u32>(0u, 4u, 8u, 12u)) & vec4<u32>(15u);
    return vec4<f32>(vec4<i32>(n) - vec4<i32>(8));
}
// The 8 weights of word `q`, times their group's scale.
fn scaled8(q: u32, scale: f32) -> Weights8 {
    return Weights8(int4x4(q) * scale, int4x4(q >> 16u) * scale);
}
fn header_texels(texels: u32) -> u32 {
    return (texels + 15u) / 16u;
}
// The scale of block i's group of 32: texel group / 4, word (group / 2) % 2, half group % 2.
fn group_scale(row: u32, i: u32) -> f32 {
    let group = i / 4u;
    let scales = textureLoad(w, vec2<u32>(group / 4u, row), 0);
    let pair = select(scales.x, scales.y, ((group / 2u) & 1u) == 1u);
    return bitcast<f32>(select(pair << 16u, pair & 0xffff0000u, (group & 1u) == 1u));
}
fn weights(row: u32, i: u32, texels: u32) -> Weights8 {
    let scale = group_scale(row, i);
    let pair = textureLoad(w, vec2<u32>(header_texels(texels) + i / 2u, row), 0);
    let q = select(pair.x, pair.y, (i & 1u) == 1u);
    return scaled8(q, scale);
}
fn unpack_lo(q: Weights8) -> vec4<f32> {
    return q.lo;
}
fn unpack_hi(q: Weights8) -> vec4<f32> {
    return q.hi;
}
// Weights 8i .. 8i + 15 (i even, one group): [scale as f32 bits, block i, block i + 1].
fn weights16(row: u32, i: u32, texels: u32) -> vec3<u32> {
    let q = textureLoad(w, vec2<u32>(header_texels(texels) + i / 2u, row), 0);
    return vec3<u32>(bitcast<u32>(group_scale(row, i)), q.x, q.y);
}
fn first8(q: vec3<u32>) -> Weights8 {
    return scaled8(q.y, bitcast<f32>(q.x));
}
fn second8(q: vec3<u32>) -> Weights8 {
    return scaled8(q.z, bitcast<f32>(q.x));
}
// The factor every product with row `row` is multiplied by once, after its sum (int8's row scale;
// 1 for a form whose weights() are already scaled).
fn row_scale(row: u32, texels: u32) -> f32 {
    return 1.0;
}
// END weights
