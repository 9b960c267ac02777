//! A monotonic clock in seconds, on both targets: `performance.now()` in the browser,
//! `Instant` natively. Token timestamps are taken when ids are back on the CPU.

#[cfg(not(target_arch = "wasm32"))]
pub fn now_s() -> f64 {
    use std::sync::OnceLock;
    use std::time::Instant;
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_secs_f64()
}

/// The global scope's `performance` (a window's, a worker's, Node's), looked up once per thread.
/// Every JavaScript host tokenmeter runs in has one: without it the clock would read a constant
/// and every duration 0, so its absence is a panic, not a silent 0.
#[cfg(target_arch = "wasm32")]
pub fn now_s() -> f64 {
    use wasm_bindgen::JsCast;
    thread_local! {
        static PERFORMANCE: web_sys::Performance = js_sys::Reflect::get(&js_sys::global(), &"performance".into())
            .ok()
            .filter(|p| p.is_object())
            // Node's `performance` is not an instance of a global `Performance` in every version.
            .map(|p| p.unchecked_into::<web_sys::Performance>())
            .expect("the global scope has no `performance`: no clock to time tokens with");
    }
    PERFORMANCE.with(|p| p.now() / 1000.0)
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
