//! The page (later).
