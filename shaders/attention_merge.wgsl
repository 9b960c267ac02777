// Second pass of split-context attention (see `attention_split` in attention.wgsl): one invocation
// per (token, q head, dimension) rescales the `splits` partial results to their common maximum and
// normalises: out[t, h * head_dim + d] = sum_s acc_s[d] e^(m_s - M) / sum_s l_s e^(m_s - M).

struct Params {
    n_tokens: u32,
    n_heads: u32,
    n_kv_heads: u32,
    head_dim: u32,
    qkv_width: u32,
    block_size: u32,
    max_blocks: u32,
    scale: f32,
    splits: u32,
    token_begin: u32,
    direct: u32,  // attention_split_gpu only
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> partials: array<f32>;  // (n_tokens, n_heads, splits, head_dim + 2)
@group(0) @binding(2) var<storage, read_write> out: array<f32>; // (step tokens, n_heads * head_dim)

@compute @workgroup_size(64)
fn attention_merge(@builtin(global_invocation_id) gid: vec3<u32>) {
    let hd = p.head_dim;
    let idx = gid.x;
    if (idx >= p.n_tokens * p.n_heads * hd) {
        return;
    }
    let d = idx % hd;
    let pair = idx / hd;
    let stride = hd + 2u;
    let first = pair * p.splits * stride;
    var m = -3.4e38;
    for (var s = 0u; s < p.splits; s++) {
        m = max(m, partials[first + s * stride]);
    }
    var sum = 0.0;
    var acc = 0.0;
    for (var s = 0u; s < p.splits; s++) {
        let base = first + s * stride;
        let scale = exp(partials[base] - m);
        sum += partials[base + 1u] * scale;
        acc += partials[base + 2u + d] * scale;
    }
    out[(p.token_begin * p.n_heads + pair) * hd + d] = acc / sum;
}
