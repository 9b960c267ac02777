// The roofline probe's patterns for adapters whose weights live in textures
// (WeightStorage::Texture), over an rgba32uint texture TEXTURE_WIDTH texels wide holding the
// probe's pattern (texel i at (i % TEXTURE_WIDTH, i / TEXTURE_WIDTH)): a copy, each invocation its
// own contiguous run of texels into a storage buffer, and the decode GEMV's read (`read_rows` in
// roofline.wgsl, through textureLoad as weights_texture.wgsl reads). Same Params as roofline.wgsl.

struct Params {
    n: u32,          // texels to copy
    per_lane: u32,   // texels per invocation
    iters: u32,
    _pad: u32,
}

const TEXTURE_WIDTH: u32 = 4096u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var src: texture_2d<u32>;
@group(0) @binding(2) var<storage, read_write> dst: array<vec4<u32>>;

@compute @workgroup_size(64)
fn copy_texture(@builtin(global_invocation_id) gid: vec3<u32>) {
    let start = gid.x * p.per_lane;
    let end = min(start + p.per_lane, p.n);
    for (var i = start; i < end; i++) {
        dst[i] = textureLoad(src, vec2<u32>(i % TEXTURE_WIDTH, i / TEXTURE_WIDTH), 0);
    }
}

fn texel(i: u32) -> vec4<u32> {
    return textureLoad(src, vec2<u32>(i % TEXTURE_WIDTH, i / TEXTURE_WIDTH), 0);
}

// 8 rows of `per_lane` texels in lockstep into 8 accumulators; invocation l folds texels
// 8 l per_lane .. 8 (l + 1) per_lane.
@compute @workgroup_size(64)
fn read_rows_texture(@builtin(global_invocation_id) gid: vec3<u32>) {
    let width = p.per_lane;
    let r0 = gid.x * 8u;
    if ((r0 + 8u) * width > p.n) {
        return;
    }
    var a0 = vec4<u32>(0u); var a1 = a0; var a2 = a0; var a3 = a0; var a4 = a0; var a5 = a0; var a6 = a0; var a7 = a0;
    for (var i = 0u; i < width; i++) {
        a0 ^= texel((r0 + 0u) * width + i);
        a1 ^= texel((r0 + 1u) * width + i);
        a2 ^= texel((r0 + 2u) * width + i);
        a3 ^= texel((r0 + 3u) * width + i);
        a4 ^= texel((r0 + 4u) * width + i);
        a5 ^= texel((r0 + 5u) * width + i);
        a6 ^= texel((r0 + 6u) * width + i);
        a7 ^= texel((r0 + 7u) * width + i);
    }
    dst[gid.x] = a0 ^ a1 ^ a2 ^ a3 ^ a4 ^ a5 ^ a6 ^ a7;
}
