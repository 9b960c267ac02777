//! The ground floor of the benchmark: the vocabulary every other floor speaks. Statistics, the
//! report language, a request's fields and the rules a request can break, seeded random streams,
//! a thinking model's tags, and text made safe for markup.

pub mod confidence;
pub mod field;
pub mod lang;
pub mod markup;
pub mod rules;
pub mod stats;
pub mod streams;
pub mod thinking;
