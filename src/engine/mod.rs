//! The inference engine: the GPU forward pass over a paged KV cache (`forward`), the continuous
//! batcher that serves requests with it (`batcher`, over the pure `scheduler` and `kv` block
//! allocator), speculative decoding (`speculate`: prompt lookup; `draft`: a draft model), and
//! generation on top of them (`generate`), and the engine's check of itself on its adapter
//! (`verify`: its matmuls, per-head kernels and logits against the CPU, the per-head comparisons in
//! `check`, which the kernel tests share), and its choice among its correct kernels by timing
//! them on that adapter (`trial`). The batcher runs its steps on an `executor`: the forward
//! pass, or the capacity planner's cost model (the `planner` layer above).

pub mod batcher;
pub mod check;
pub mod cost;
pub mod draft;
pub mod executor;
pub mod forward;
pub mod generate;
pub mod kv;
pub mod linear;
pub mod logits;
pub mod scheduler;
pub mod speculate;
pub mod trial;
pub mod verify;

pub use batcher::{Engine, Event, EventKind, Request, StepShape, StepStats, StepWork};
pub use cost::CostModel;
pub use draft::DraftModel;
pub use executor::Executor;
pub use forward::{Batch, EngineOptions, ForwardPass};
pub use generate::{generate, generate_greedy, Completion};
pub use linear::Linear;
pub use logits::LogitSource;
pub use scheduler::{FinishReason, Order, Policy, PolicyRefusal, SamplingParams};
pub use speculate::Speculation;
