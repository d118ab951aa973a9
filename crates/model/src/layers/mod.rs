//! The parts of a Qwen3 decoder, each a struct with `load` and `forward`.

pub mod attention;
pub mod decoder_layer;
pub mod embedding;
pub mod mlp;
pub mod norm;

pub use attention::Attention;
pub use decoder_layer::DecoderLayer;
pub use embedding::Embedding;
pub use mlp::Mlp;
pub use norm::RmsNorm;
