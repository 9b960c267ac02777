//! Test data shared by the native tests and the browser tests (no I/O, no GPU: builds for wasm32).

/// Deterministic pseudo-random floats in [-1, 1).
pub fn random(seed: u64, n: usize) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// Largest |a - b| / (1 + |b|) and where: the library's, which the engine's own check uses.
pub use tokenmeter::engine::check::worst;
