//! A monotonic clock in seconds, on both targets: `performance.now()` in the browser,
//! `Instant` natively. Token timestamps are taken when ids are back on the CPU.

#[cfg(not(target_arch = "wasm32"))]
pub fn now_s() -> f64 {
    use std::sync::OnceLock;
    use std::time::Instant;
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_secs_f64()
}

#[cfg(target_arch = "wasm32")]
pub fn now_s() -> f64 {
    let performance = web_sys::window().and_then(|w| w.performance());
    performance.map(|p| p.now() / 1000.0).unwrap_or(0.0)
}
