// BEGIN weights: the texture form, swapped in by the engine for the storage-buffer block of
// matmul.wgsl and embed.wgsl where weights live in `rgba32uint` textures (CPU adapters: a texel
// fetch is a gather, while lavapipe loads a storage buffer lane by lane). Row r of a chunk is
// texture row r, 8 bf16 per texel.
@group(0) @binding(2) var w: texture_2d<u32>;
fn weights(row: u32, i: u32, texels: u32) -> vec4<u32> {
    return textureLoad(w, vec2<u32>(i, row), 0);
}
// END weights
