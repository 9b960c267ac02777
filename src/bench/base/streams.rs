//! Seeded random streams: every random choice of a workload (arrivals, lengths, prompts, shared
//! prefixes, conversations, trace blocks) draws from its own stream, so changing one leaves the
//! others' draws as they were.

use rand::rngs::StdRng;
use rand::SeedableRng;

pub const STREAM_ARRIVALS: u64 = 1;
pub const STREAM_LENGTHS: u64 = 2;
pub const STREAM_PROMPTS: u64 = 3;
pub const STREAM_PREFIXES: u64 = 4;
pub const STREAM_CONVERSATIONS: u64 = 5;
pub const STREAM_BLOCKS: u64 = 6;
pub const STREAM_CANCELS: u64 = 7;

/// An independent RNG per (seed, purpose, index), mixed with SplitMix64 so nearby seeds and
/// indices give unrelated streams.
pub fn stream(seed: u64, purpose: u64, index: u64) -> StdRng {
    let mut x = seed;
    for word in [purpose, index] {
        x = x.wrapping_add(word).wrapping_add(0x9E37_79B9_7F4A_7C15);
        x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        x ^= x >> 31;
    }
    StdRng::seed_from_u64(x)
}
