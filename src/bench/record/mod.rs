//! What happened: one raw record per request and one sample per engine step, the phases a run
//! sends but leaves out, and the run record (what ran, where, with which settings).

pub mod phases;
pub mod raw;
pub mod run_config;
