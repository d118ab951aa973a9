use std::fmt;

/// The element types a checkpoint tensor may have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DType {
    F32,
    F16,
    BF16,
    /// Signed bytes: the values of int8-quantized weights (their scales are a separate F32 tensor).
    I8,
    /// Unsigned bytes: the packed offset-binary int8 weights of `gattn-cpu quantize` checkpoints.
    U8,
}

impl DType {
    pub fn size_in_bytes(self) -> usize {
        match self {
            DType::F32 => 4,
            DType::F16 | DType::BF16 => 2,
            DType::I8 | DType::U8 => 1,
        }
    }

    /// The dtype named as in a safetensors header (`"F32"`, `"BF16"`, ...); `None` for the
    /// dtypes this engine does not read.
    pub fn from_name(name: &str) -> Option<DType> {
        match name {
            "F32" => Some(DType::F32),
            "F16" => Some(DType::F16),
            "BF16" => Some(DType::BF16),
            "I8" => Some(DType::I8),
            "U8" => Some(DType::U8),
            _ => None,
        }
    }

    pub fn from_safetensors(dtype: safetensors::Dtype) -> Option<DType> {
        match dtype {
            safetensors::Dtype::F32 => Some(DType::F32),
            safetensors::Dtype::F16 => Some(DType::F16),
            safetensors::Dtype::BF16 => Some(DType::BF16),
            safetensors::Dtype::I8 => Some(DType::I8),
            safetensors::Dtype::U8 => Some(DType::U8),
            _ => None,
        }
    }

    pub fn to_safetensors(self) -> safetensors::Dtype {
        match self {
            DType::F32 => safetensors::Dtype::F32,
            DType::F16 => safetensors::Dtype::F16,
            DType::BF16 => safetensors::Dtype::BF16,
            DType::I8 => safetensors::Dtype::I8,
            DType::U8 => safetensors::Dtype::U8,
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            DType::F32 => "F32",
            DType::F16 => "F16",
            DType::BF16 => "BF16",
            DType::I8 => "I8",
            DType::U8 => "U8",
        };
        f.write_str(name)
    }
}
