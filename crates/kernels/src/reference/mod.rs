//! Naive f32 kernels: the oracle. Written for obviousness, not speed; never optimize these.

pub mod activations;
pub mod attention;
pub mod matmul;
pub mod norm;
pub mod rope;

pub use activations::{sigmoid, silu, softmax_in_place};
pub use attention::{AttentionShape, GateScores, apply_output_gate, causal_attention};
pub use matmul::{matmul_bf16, matmul_f32, matmul_int8};
pub use norm::{rms_norm, rms_norm_in_place};
pub use rope::apply_rope_rotate_half;
