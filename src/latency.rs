//! The latency definitions, written once: the benchmark's request records
//! (`bench::RequestRecord`) and the engine's completions (`engine::Completion`, for `generate`
//! and the playground) both compute TTFT and TPOT here. TTFT's clock starts wherever the caller
//! says: the planned arrival (the user's view) or, for a server, the send.

/// Time to first token: first token − `arrival_s` (whatever waiting came after it included).
pub fn ttft_s(arrival_s: f64, first_token_s: Option<f64>) -> Option<f64> {
    Some(first_token_s? - arrival_s)
}

/// Time per output token after the first: (last token − first token) / (tokens − 1), defined
/// only for more than one output token.
pub fn tpot_s(first_token_s: Option<f64>, last_token_s: Option<f64>, tokens: usize) -> Option<f64> {
    if tokens < 2 {
        return None;
    }
    Some((last_token_s? - first_token_s?) / (tokens - 1) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn definitions() {
        assert_eq!(ttft_s(1.0, Some(1.5)), Some(0.5));
        assert_eq!(ttft_s(1.0, None), None);
        assert_eq!(tpot_s(Some(1.0), Some(2.0), 5), Some(0.25));
        assert_eq!(tpot_s(Some(1.0), Some(1.0), 1), None);
        assert_eq!(tpot_s(Some(1.0), None, 3), None);
    }
}
