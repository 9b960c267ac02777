// RMSNorm of gathered rows: y[r, :] = weight * x[rows[r], :] / sqrt(mean(x[rows[r], :]^2) + eps), in f32.
// One workgroup per output row. `rows` lets the final norm pick only the rows that need logits.

struct Params {
    n_rows: u32,
    width: u32,
    eps: f32,
    _pad: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;            // (rows_in, width)
@group(0) @binding(2) var<storage, read> rows: array<u32>;         // (n_rows) source row of each output row
@group(0) @binding(3) var<storage, read> weight: array<f32>;       // (width)
@group(0) @binding(4) var<storage, read_write> y: array<f32>;      // (n_rows, width)

const WG: u32 = 64u;
var<workgroup> partial: array<f32, WG>;

@compute @workgroup_size(64)
fn rms_norm(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let r = wg.x;
    if (r >= p.n_rows) {
        return;
    }
    let src = rows[r] * p.width;
    var sum = 0.0;
    for (var i = lid.x; i < p.width; i += WG) {
        let v = x[src + i];
        sum += v * v;
    }
    partial[lid.x] = sum;
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
        if (lid.x < stride) {
            partial[lid.x] += partial[lid.x + stride];
        }
        workgroupBarrier();
    }
    let scale = inverseSqrt(partial[0] / f32(p.width) + p.eps);
    let dst = r * p.width;
    for (var i = lid.x; i < p.width; i += WG) {
        y[dst + i] = weight[i] * (x[src + i] * scale);
    }
}
