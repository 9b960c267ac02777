//! Judgements over measured figures: the diagnosis of a run, a sweep's knee, an A/B comparison
//! with its confidence intervals, what a setting costs in output quality, and whether a run can be
//! trusted at all (VALID or INVALID, with its reasons).

pub mod compare;
pub mod diagnosis;
pub mod quality;
pub mod sweep;
pub mod validity;
