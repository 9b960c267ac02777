//! What happened: one raw record per request and one sample per engine step, the phases a run
//! sends but leaves out, the run record (what ran, where, with which settings), the browser's
//! conditions the page saw meanwhile, and the model load's time to ready.

pub mod conditions;
pub mod phases;
pub mod raw;
pub mod ready;
pub mod run_config;
