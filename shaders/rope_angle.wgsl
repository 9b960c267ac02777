// RoPE's rotation of one pair, shared by rope.wgsl and the GPU family's decode attention with the
// q/k norm and RoPE in its prologue (attention_rope.wgsl): the same arithmetic in the same order,
// so the two paths give the same bits.

// 2*pi split in two so that angle - n * 2*pi keeps its precision for large positions.
const TWO_PI_HI: f32 = 6.28125;
const TWO_PI_LO: f32 = 0.0019353071795864769;
const INV_TWO_PI: f32 = 0.15915494309189535;

fn reduce_angle(a: f32) -> f32 {
    let n = round(a * INV_TWO_PI);
    return (a - n * TWO_PI_HI) - n * TWO_PI_LO;
}

// The pair (x1, x2) = dimensions (d, d + head_dim / 2) of a q or k head, normalised by `scale`
// (the head's 1 / rms) and the norm's weights (n1, n2), then rotated by `pos` at frequency `freq`
// ("rotate_half" layout).
fn rope_pair(x1: f32, x2: f32, n1: f32, n2: f32, scale: f32, pos: u32, freq: f32) -> vec2<f32> {
    let a = n1 * (x1 * scale);
    let b = n2 * (x2 * scale);
    let angle = reduce_angle(f32(pos) * freq);
    let c = cos(angle);
    let s = sin(angle);
    return vec2<f32>(a * c - b * s, b * c + a * s);
}
