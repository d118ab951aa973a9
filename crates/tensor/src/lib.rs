//! Tensors as the checkpoint stores them: dtypes, shapes, and views over memory-mapped
//! safetensors files (single or sharded). Nothing here computes; `kernels` does.

pub mod checkpoint;
pub mod dtype;
pub mod error;
mod header;
pub mod input_file;
pub mod safetensors_file;
mod storage;
pub mod strict_json;
pub mod view;

pub use checkpoint::{Checkpoint, ShardIndex, parse_shard_index};
pub use dtype::DType;
pub use error::{Result, TensorError};
pub use half::{bf16, f16};
pub use safetensors_file::SafetensorsFile;
pub use view::{MappedTensor, TensorView};
