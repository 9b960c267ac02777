// BEGIN weights: int8 in an `rgba32uint` texture (src/model/quant.rs): texel (0, r) holds row r's
// scale, texels (1 + j, r) 16 int8 each (weights 16j .. 16j + 15, as in weights_int8.wgsl), so
// `weights16()` is one fetch where bf16 makes two.
@group(0) @binding(2) var w: texture_2d<u32>;
struct Weights8 {
    lo: vec4<f32>,
    hi: vec4<f32>,
}
fn int8x4(v: u32) -> vec4<f32> {
    let s = vec4<i32>(bitcast<i32>(v << 24u), bitcast<i32>(v << 16u), bitcast<i32>(v << 8u), bitcast<i32>(v));
    return vec4<f32>(s >> vec4<u32>(24u));
}
// Unscaled, as in weights_int8.wgsl: the row's scale comes once, from `row_scale`.
fn weights(row: u32, i: u32, texels: u32) -> Weights8 {
    let q = textureLoad(w, vec2<u32>(1u + i / 2u, row), 0);
    if ((i & 1u) == 0u) {
        return Weights8(int8x4(q.x), int8x4(q.y));
    }
    return Weights8(int8x4(q.z), int8x4(q.w));
}
fn unpack_lo(q: Weights8) -> vec4<f32> {
    return q.lo;
}
fn unpack_hi(q: Weights8) -> vec4<f32> {
    return q.hi;
}
// Weights 8i .. 8i + 15 (i even) in one fetch; `first8` / `second8` give `weights()` at i, i + 1.
fn weights16(row: u32, i: u32, texels: u32) -> vec4<u32> {
    return textureLoad(w, vec2<u32>(1u + i / 2u, row), 0);
}
fn first8(q: vec4<u32>) -> Weights8 {
    return Weights8(int8x4(q.x), int8x4(q.y));
}
fn second8(q: vec4<u32>) -> Weights8 {
    return Weights8(int8x4(q.z), int8x4(q.w));
}
fn row_scale(row: u32, texels: u32) -> f32 {
    return bitcast<f32>(textureLoad(w, vec2<u32>(0u, row), 0).x);
}
// END weights
