// SwiGLU: act[t, i] = silu(gate[t, i]) * up[t, i], with gate and up side by side in one buffer
// (the fused gate|up matmul writes [n_tokens, 2 * inter]).

struct Params {
    n_tokens: u32,
    inter: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> gate_up: array<f32>;     // (n_tokens, 2 * inter): gate | up
@group(0) @binding(2) var<storage, read_write> act: array<f32>;   // (n_tokens, inter)

@compute @workgroup_size(64)
fn swiglu(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    let t = gid.y;
    if (i >= p.inter || t >= p.n_tokens) {
        return;
    }
    let g = gate_up[t * 2u * p.inter + i];
    let u = gate_up[t * 2u * p.inter + p.inter + i];
    act[t * p.inter + i] = g / (1.0 + exp(-g)) * u;
}
