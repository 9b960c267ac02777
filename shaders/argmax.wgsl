// Greedy pick: ids[r] = argmax_i logits[r, i], lowest index on ties (as torch.argmax).
// One workgroup per row; lanes scan strided, then a shared-memory reduction.

struct Params {
    n_rows: u32,
    width: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> logits: array<f32>;      // (n_rows, width)
@group(0) @binding(2) var<storage, read_write> ids: array<u32>;   // (n_rows)

const WG: u32 = 256u;
var<workgroup> best_value: array<f32, WG>;
var<workgroup> best_index: array<u32, WG>;

@compute @workgroup_size(256)
fn argmax(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let r = wg.x;
    if (r >= p.n_rows) {
        return;
    }
    let base = r * p.width;
    var value = -3.4e38;
    var index = 0xffffffffu;
    for (var i = lid.x; i < p.width; i += WG) {
        let v = logits[base + i];
        if (v > value || index == 0xffffffffu) {
            value = v;
            index = i;
        }
    }
    best_value[lid.x] = value;
    best_index[lid.x] = index;
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
        if (lid.x < stride) {
            let ov = best_value[lid.x + stride];
            let oi = best_index[lid.x + stride];
            let mv = best_value[lid.x];
            let mi = best_index[lid.x];
            if (oi != 0xffffffffu && (mi == 0xffffffffu || ov > mv || (ov == mv && oi < mi))) {
                best_value[lid.x] = ov;
                best_index[lid.x] = oi;
            }
        }
        workgroupBarrier();
    }
    if (lid.x == 0u) {
        ids[r] = best_index[0];
    }
}
