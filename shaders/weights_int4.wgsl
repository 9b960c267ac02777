// BEGIN weights: int4, storage buffer (src/model/quant.rs). Row r is `2 ceil(texels / 16)` words of
// bf16 scales (one per group of 32 weights = 4 blocks of 8; group 2t in the low half of word t,
// four to a texel of two words), then one word per 8 weights (weight 8j + e in bits 4e..4e + 3,
// stored as q + 8; a zero word after an odd count). `weights()` returns them scaled.
@group(0) @binding(2) var<storage, read> w: array<u32>;  // (rows, 2 ceil(k / 128) + 2 ceil(k / 16))
struct Weights8 {
    lo: vec4<f32>,
    hi: vec4<f32>,
}
// Nibbles 0..3 of `v` as q = nibble - 8.
fn int4x4(v: u32) -> vec4<f32> {
    let n = (vec4<u32>(v) >> vec4<u32>(0u, 4u, 8u, 12u)) & vec4<u32>(15u);
    return vec4<f32>(vec4<i32>(n) - vec4<i32>(8));
}
// The 8 weights of word `q`, times their group's scale.
fn scaled8(q: u32, scale: f32) -> Weights8 {
    return Weights8(int4x4(q) * scale, int4x4(q >> 16u) * scale);
}
fn header_words(texels: u32) -> u32 {
    return 2u * ((texels + 15u) / 16u);
}
fn row_start(row: u32, texels: u32) -> u32 {
    return row * (header_words(texels) + 2u * ((texels + 1u) / 2u));
}
// The scale of block i's group of 32, from its word of two.
fn group_scale(base: u32, i: u32) -> f32 {
    let group = i / 4u;
    let pair = w[base + group / 2u];
    return bitcast<f32>(select(pair << 16u, pair & 0xffff0000u, (group & 1u) == 1u));
}
fn weights(row: u32, i: u32, texels: u32) -> Weights8 {
    let base = row_start(row, texels);
    let scale = group_scale(base, i);
    let q = w[base + header_words(texels) + i];
    return scaled8(q, scale);
}
fn unpack_lo(q: Weights8) -> vec4<f32> {
    return q.lo;
}
fn unpack_hi(q: Weights8) -> vec4<f32> {
    return q.hi;
}
// Weights 8i .. 8i + 15 (i even, one group): [scale as f32 bits, block i, block i + 1], unpacked
// by `first8` / `second8` into what `weights()` gives at i and i + 1.
fn weights16(row: u32, i: u32, texels: u32) -> vec3<u32> {
    let base = row_start(row, texels);
    let at = base + header_words(texels) + i;
    return vec3<u32>(bitcast<u32>(group_scale(base, i)), w[at], w[at + 1u]);
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
