//! Figures from the records: latencies and throughput, the steady window, the load actually
//! delivered, saturation, energy and a server's own metrics.

pub mod decided;
pub mod delivered;
pub mod energy;
pub mod metrics;
pub mod saturation;
pub mod server_metrics;
pub mod steady;
