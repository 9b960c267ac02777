
// The paired load of a weights form that fetches 8 weights at a time (bf16; the int8 and int4
// forms define their own, one weights fetch of 16): weights 8i .. 8i + 15 (i even), `first8` / `second8` what
// `weights()` gives at i and i + 1. Here the pair is only where to load: each half is fetched
// when it is taken, so a kernel loads as it did before pairs (fetching both halves up front
// holds twice the weights in registers; on lavapipe it looked slower). `Kernel::source`
// appends this to a kernel whose weights form lacks `weights16`; the form names its `weights()`
// type `W8`.
struct Weights16 {
    row: u32,
    i: u32,
    texels: u32,
}
fn weights16(row: u32, i: u32, texels: u32) -> Weights16 {
    return Weights16(row, i, texels);
}
fn first8(q: Weights16) -> W8 {
    return weights(q.row, q.i, q.texels);
}
fn second8(q: Weights16) -> W8 {
    return weights(q.row, q.i + 1u, q.texels);
}
