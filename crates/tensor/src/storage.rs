//! The bytes of one safetensors file: memory-mapped from disk, or owned in memory (for data that
//! never was a file, and for fuzzing the loader without writing one file per input).

use std::ops::Deref;

use memmap2::Mmap;

#[derive(Debug)]
pub enum FileBytes {
    Mapped(Mmap),
    Owned(Vec<u8>),
}

impl Deref for FileBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            FileBytes::Mapped(mmap) => mmap,
            FileBytes::Owned(bytes) => bytes,
        }
    }
}
