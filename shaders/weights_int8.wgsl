// BEGIN weights: int8, storage buffer (src/model/quant.rs). Row r is `1 + ceil(texels / 2)` texels
// of 16 bytes: a header [scale as f32 bits, 0, 0, 0], then 16 int8 a texel (weight 4j + e in byte
// e of word j; a row of 16n + 8 weights ends in 8 zeros). `weights()` returns 8 weights unscaled
// (q as f32); a product with the row is scaled once, after its sum (`row_scale`): no scale load
// and multiply per 8 weights (on lavapipe the load was a second texel fetch beside each 8 weights').
@group(0) @binding(2) var<storage, read> w: array<vec2<u32>>;  // (rows, 2 + 2 * ceil(k / 16))
struct Weights8 {
    lo: vec4<f32>,
    hi: vec4<f32>,
}
// Four int8 of a word, sign-extended.
fn int8x4(v: u32) -> vec4<f32> {
    let s = vec4<i32>(bitcast<i32>(v << 24u), bitcast<i32>(v << 16u), bitcast<i32>(v << 8u), bitcast<i32>(v));
    return vec4<f32>(s >> vec4<u32>(24u));
}
// vec2s from one row to the next.
fn row_stride(texels: u32) -> u32 {
    return 2u + 2u * ((texels + 1u) / 2u);
}
fn weights(row: u32, i: u32, texels: u32) -> Weights8 {
    let q = w[row * row_stride(texels) + 2u + i];
    return Weights8(int8x4(q.x), int8x4(q.y));
}
fn unpack_lo(q: Weights8) -> vec4<f32> {
    return q.lo;
}
fn unpack_hi(q: Weights8) -> vec4<f32> {
    return q.hi;
}
// Weights 8i .. 8i + 15 (i even); `first8` / `second8` give `weights()` at i, i + 1.
fn weights16(row: u32, i: u32, texels: u32) -> vec4<u32> {
    let at = row * row_stride(texels) + 2u + i;
    return vec4<u32>(w[at], w[at + 1u]);
}
fn first8(q: vec4<u32>) -> Weights8 {
    return Weights8(int8x4(q.x), int8x4(q.y));
}
fn second8(q: vec4<u32>) -> Weights8 {
    return Weights8(int8x4(q.z), int8x4(q.w));
}
fn row_scale(row: u32, texels: u32) -> f32 {
    return bitcast<f32>(w[row * row_stride(texels)].x);
}
// END weights
