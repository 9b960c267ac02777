// The roofline probe's third read pattern, for adapters whose weights live in textures
// (WeightStorage::Texture): each invocation copies its own contiguous run of texels from an
// rgba32uint texture TEXTURE_WIDTH texels wide into a storage buffer. Same Params as roofline.wgsl.

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
