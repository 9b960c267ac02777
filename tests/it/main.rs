//! The native integration tests, one binary (one compile and link; one GPU device and one set of
//! compiled pipelines shared by every test: `common::gpu`). A module per area; tests that need a
//! process of their own (signals, memory bounds, `soak`) run the CLI as a child.
//!
//! `cargo test --release --test it -- kernels::` runs one area. Tests in a module named `alone`
//! measure a speed difference and need the machine to themselves: `scripts/test` skips them in the
//! parallel run (`--skip ::alone::`) and runs them after it, one at a time.
#![cfg(not(target_arch = "wasm32"))]

#[path = "../common/mod.rs"]
mod common;

mod bad_flags;
mod bad_input;
mod batching;
mod bench;
mod cancel;
mod compare;
mod contracts;
mod docs;
mod energy;
mod first_run;
mod fuzz;
mod gpu_faults;
mod https;
mod invariance;
mod kernels;
mod layers;
mod model;
mod planner;
mod policy;
mod prefix_cache;
mod quality;
mod quantised;
mod rate;
mod real_widths;
mod release;
mod remote;
mod request;
mod servers;
mod serving;
mod soak;
mod speculate;
mod trial;
mod validity;
mod verify;
