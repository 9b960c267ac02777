//! What happened: one raw record per request and one sample per engine step, the phases a run
//! sends but leaves out, the run record (what ran, where, with which settings), and the browser's
//! conditions the page saw meanwhile.

pub mod conditions;
pub mod phases;
pub mod raw;
pub mod run_config;
