//! Shared helpers of the criterion benchmarks (the bench targets are added beside this file).

pub mod bandwidth;

pub use bandwidth::measure_read_bandwidth_gbps;
