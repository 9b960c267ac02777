// BEGIN x (the form of matmul_gpu.wgsl's x block for a matmul whose input is RMSNorm(x): `x` is
// the residual stream, not normed; `Kernel::source` swaps this in)
@group(0) @binding(4) var<storage, read> norm_w: array<vec4<f32>>;  // (k / 4) the norm's weight
const X_NORM: bool = true;
fn x_row(t: u32) -> u32 {
    return t * (p.k / 4u);
}
fn x_load(row: u32, j: u32) -> vec4<f32> {
    return x[row + j];
}
fn x_col_scale(j: u32) -> vec4<f32> {
    return norm_w[j];
}
// sum_k W[r, k] w[k] x[k] / sqrt(mean(x²) + eps): the scale taken out of the sum.
fn x_scale(sum_sq: f32) -> f32 {
    return inverseSqrt(sum_sq / f32(p.k) + p.eps);
}
// END x
