//! Running the benchmark: the [`target::Target`] trait, the release rules every target follows
//! ([`release`]), the engine's driver and launcher, the session (warm-up, baseline, rates,
//! result), the highest-rate search, experiments, the soak and `speed`.

pub mod driver;
pub mod experiment;
pub mod launch;
pub mod ledger;
pub mod max_rate;
pub mod release;
pub mod session;
pub mod soak;
pub mod speed;
pub mod target;
