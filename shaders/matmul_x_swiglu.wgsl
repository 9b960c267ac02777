// BEGIN x (the form of matmul_gpu.wgsl's x block for down_proj reading the gate|up output:
// x is (m, 2k) = gate | up, and the input is silu(gate) * up as swiglu.wgsl computes it;
// `Kernel::source` swaps this in)
const X_NORM: bool = false;
fn x_row(t: u32) -> u32 {
    return t * (p.k / 2u);
}
fn x_load(row: u32, j: u32) -> vec4<f32> {
    let g = x[row + j];
    let u = x[row + p.k / 4u + j];
    return g / (1.0 + exp(-g)) * u;
}
fn x_col_scale(j: u32) -> vec4<f32> {
    return vec4<f32>(1.0);
}
fn x_scale(sum_sq: f32) -> f32 {
    return 1.0;
}
// END x
