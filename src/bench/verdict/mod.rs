//! Judgements over measured figures: the diagnosis of a run, a sweep's knee, an A/B comparison
//! with its confidence intervals, and what a setting costs in output quality.

pub mod compare;
pub mod diagnosis;
pub mod quality;
pub mod sweep;
