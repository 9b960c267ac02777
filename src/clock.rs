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

/// Waits `seconds` without blocking the page (browser) or by sleeping the thread (native CLI).
pub async fn sleep_s(seconds: f64) {
    if seconds.is_nan() || seconds <= 0.0 {
        return;
    }
    #[cfg(not(target_arch = "wasm32"))]
    std::thread::sleep(std::time::Duration::try_from_secs_f64(seconds).unwrap_or(std::time::Duration::MAX));
    #[cfg(target_arch = "wasm32")]
    gloo_timers::future::TimeoutFuture::new((seconds * 1e3).ceil() as u32).await;
}
