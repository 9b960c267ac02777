// Random bf16 weights generated in place, for synthetic models: no host generation, no upload.
// Element (row, col) of a tensor is a pure function of (seed, row, col), so the CPU generator in
// src/model/synthetic.rs produces the same bits and any row range can be made alone.
// value = (top byte of the hash - 127.5) * scale: 256 levels, uniform, one correctly rounded multiply,
// then round-to-nearest-even to bf16 with integer operations — bit-identical to the CPU.

struct Params {
    seed: u32,
    scale: f32,
    // bf16 elements per tensor row (even).
    cols: u32,
    // Tensor row of the first element written.
    row0: u32,
    // Destination range in u32 words (two bf16 each).
    word_offset: u32,
    words: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;

fn pcg(v: u32) -> u32 {
    let state = v * 747796405u + 2891336453u;
    let word = ((state >> ((state >> 28u) + 4u)) ^ state) * 277803737u;
    return (word >> 22u) ^ word;
}

fn bf16_bits(row: u32, col: u32) -> u32 {
    let h = pcg(pcg(p.seed ^ row) + col);
    let v = (f32(h >> 24u) - 127.5) * p.scale;
    let bits = bitcast<u32>(v);
    return (bits + 0x7fffu + ((bits >> 16u) & 1u)) >> 16u;
}

@compute @workgroup_size(256)
fn fill_random_bf16(@builtin(global_invocation_id) gid: vec3<u32>,
                    @builtin(num_workgroups) nwg: vec3<u32>) {
    let stride = nwg.x * 256u;
    let half_cols = p.cols / 2u;
    for (var w = gid.x; w < p.words; w += stride) {
        let row = p.row0 + w / half_cols;
        let col = (w % half_cols) * 2u;
        dst[p.word_offset + w] = bf16_bits(row, col) | (bf16_bits(row, col + 1u) << 16u);
    }
}
