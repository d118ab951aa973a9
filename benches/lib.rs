//! Shared helpers of the criterion benchmarks (the bench targets are added beside this file).
