// BEGIN weights: the texture form, swapped in by the engine for the storage-buffer block of
// matmul.wgsl and embed.wgsl where weights live in `rgba32uint` textures (CPU adapters: a texel
// fetch is a gather, while lavapipe loads a storage buffer lane by lane). Row r of a chunk is
// texture row r, 8 bf16 per texel.
@group(0) @binding(2) var w: texture_2d<u32>;
alias W8 = vec4<u32>;  // what `weights()` returns (weights_pair.wgsl)
fn weights(row: u32, i: u32, texels: u32) -> vec4<u32> {
    return textureLoad(w, vec2<u32>(i, row), 0);
}
fn lo(v: u32) -> f32 {
    return bitcast<f32>(v << 16u);
}
fn hi(v: u32) -> f32 {
    return bitcast<f32>(v & 0xffff0000u);
}
fn unpack_lo(q: vec4<u32>) -> vec4<f32> {
    return vec4<f32>(lo(q.x), hi(q.x), lo(q.y), hi(q.y));
}
fn unpack_hi(q: vec4<u32>) -> vec4<f32> {
    return vec4<f32>(lo(q.z), hi(q.z), lo(q.w), hi(q.w));
}
// The factor every product with row `row` is multiplied by once, after its sum (int8's row scale;
// 1 for a form whose weights() are already scaled).
fn row_scale(row: u32, texels: u32) -> f32 {
    return 1.0;
}
// END weights
