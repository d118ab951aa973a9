//! Buffers that start on a cache line. A 64-byte vector load or AMX tile row read from a buffer
//! with the allocator's 16-byte alignment touches two lines, not one: the bf16 mat-vec ran 4%
//! slower in a build where its activations happened to land that way (6.4 against 6.7 tok/s
//! decode, alternated, same machine code).

/// A value aligned to a cache line (for stack arrays: tile staging, result tiles).
#[derive(Debug, Clone, Copy, Default)]
#[repr(C, align(64))]
pub(crate) struct Aligned<T>(pub T);

/// One cache line of plain bytes.
#[derive(Debug, Clone, Copy)]
#[repr(C, align(64))]
struct Line([u8; 64]);

/// A growable buffer of `T` (plain data: integers or floats) whose first element starts on a
/// cache line; its length is rounded up to whole lines.
#[derive(Debug, Clone)]
pub(crate) struct LineVec<T> {
    lines: Vec<Line>,
    _values: std::marker::PhantomData<T>,
}

impl<T: bytemuck::Pod> Default for LineVec<T> {
    fn default() -> Self {
        LineVec {
            lines: Vec::new(),
            _values: std::marker::PhantomData,
        }
    }
}

impl<T: bytemuck::Pod> LineVec<T> {
    const PER_LINE: usize = 64 / std::mem::size_of::<T>();

    /// `len` zeros (rounded up to whole lines), reusing the allocation.
    pub(crate) fn reset(&mut self, len: usize) {
        self.lines.clear();
        self.lines
            .resize(len.div_ceil(Self::PER_LINE), Line([0; 64]));
    }

    pub(crate) fn len(&self) -> usize {
        self.lines.len() * Self::PER_LINE
    }

    pub(crate) fn as_slice(&self) -> &[T] {
        bytemuck::cast_slice(&self.lines)
    }

    pub(crate) fn as_mut_slice(&mut self) -> &mut [T] {
        bytemuck::cast_slice_mut(&mut self.lines)
    }
}

// SAFETY: a Line is 64 plain bytes, size 64 = its alignment: no padding, any bit pattern valid.
unsafe impl bytemuck::Zeroable for Line {}
unsafe impl bytemuck::Pod for Line {}
