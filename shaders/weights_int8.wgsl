// BEGIN weights: int8, storage buffer (src/model/quant.rs). Row r is `texels + 1` vec2s: a header
// [scale as f32 bits, 0], then 8 int8 per vec2 (weight 4j + e in byte e of word j). `weights()`
// returns the 8 weights unscaled (q as f32); a product with the row is scaled once, after its sum
// (`row_scale`): no scale load and multiply per 8 weights (on lavapipe the load was a second
// texel fetch beside each 8 weights' own).
@group(0) @binding(2) var<storage, read> w: array<vec2<u32>>;  // (rows, 1 + k / 8)
struct Weights8 {
    lo: vec4<f32>,
    hi: vec4<f32>,
}
// Four int8 of a word, sign-extended.
fn int8x4(v: u32) -> vec4<f32> {
    let s = vec4<i32>(bitcast<i32>(v << 24u), bitcast<i32>(v << 16u), bitcast<i32>(v << 8u), bitcast<i32>(v));
    return vec4<f32>(s >> vec4<u32>(24u));
}
fn weights(row: u32, i: u32, texels: u32) -> Weights8 {
    let q = w[row * (texels + 1u) + 1u + i];
    return Weights8(int8x4(q.x), int8x4(q.y));
}
fn unpack_lo(q: Weights8) -> vec4<f32> {
    return q.lo;
}
fn unpack_hi(q: Weights8) -> vec4<f32> {
    return q.hi;
}
fn row_scale(row: u32, texels: u32) -> f32 {
    return bitcast<f32>(w[row * (texels + 1u)].x);
}
// END weights
