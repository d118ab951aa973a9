//! Buffers that start on a cache line. A 64-byte vector load or AMX tile row read from a buffer
//! with the allocator's 16-byte alignment touches two lines, not one, which made the bf16
//! mat-vec measurably slower in builds where its activations happened to land that way.

/// A value aligned to a cache line (for stack arrays: tile staging, result tiles).
#[derive(Debug, Clone, Copy, Default)]
#[repr(C, align(64))]
pub(crate) struct Aligned<T>(pub T);

/// One cache line of plain bytes.
#[derive(Debug, Clone, Copy)]
#[repr(C, align(64))]
struct Line([u8; 64]);

/// A vector of `T` (plain data: integers or floats) whose first element starts on a cache line:
/// scratch buffers refilled per call ([`reset`](Self::reset)), and the KV cache's storage, grown
/// only by explicit reservations (its rows are streamed with 64-byte loads, which the allocator's
/// 16-byte alignment split across two lines). Reads and writes go through the slice it derefs to.
#[derive(Debug, Clone)]
pub(crate) struct LineVec<T> {
    lines: Vec<Line>,
    len: usize,
    _values: std::marker::PhantomData<T>,
}

impl<T: bytemuck::Pod> Default for LineVec<T> {
    fn default() -> Self {
        LineVec {
            lines: Vec::new(),
            len: 0,
            _values: std::marker::PhantomData,
        }
    }
}

impl<T: bytemuck::Pod> LineVec<T> {
    const PER_LINE: usize = 64 / std::mem::size_of::<T>();

    /// `len` zeros, reusing the allocation.
    pub(crate) fn reset(&mut self, len: usize) {
        self.lines.clear();
        self.len = 0;
        self.grow_zeroed(len);
    }

    /// Makes room for `additional` more elements than the length (no-op if there is room);
    /// reserves exactly that (to whole lines), without touching the new pages.
    pub(crate) fn try_reserve_exact(
        &mut self,
        additional: usize,
    ) -> Result<(), std::collections::TryReserveError> {
        let wanted_lines = self.len.saturating_add(additional).div_ceil(Self::PER_LINE);
        self.lines
            .try_reserve_exact(wanted_lines.saturating_sub(self.lines.len()))
    }

    /// Grows to `new_len` elements, the new ones zero (reallocates if past the reservation).
    pub(crate) fn grow_zeroed(&mut self, new_len: usize) {
        if new_len > self.len {
            // Elements past `len` in the last line are zero (`truncate` keeps them so).
            self.lines
                .resize(new_len.div_ceil(Self::PER_LINE), Line([0; 64]));
            self.len = new_len;
        }
    }

    /// `len` elements, reusing the allocation, for a caller that writes every one of them:
    /// only elements past the old length start as zeros, the others keep their old values.
    pub(crate) fn reuse(&mut self, len: usize) {
        if len < self.len {
            self.truncate(len);
        } else {
            self.grow_zeroed(len);
        }
    }

    /// Shortens to `new_len` elements (keeps the allocation).
    pub(crate) fn truncate(&mut self, new_len: usize) {
        if new_len < self.len {
            let old_len = self.len;
            self.len = new_len;
            self.lines.truncate(new_len.div_ceil(Self::PER_LINE));
            let kept = self.lines.len() * Self::PER_LINE;
            let values: &mut [T] = bytemuck::cast_slice_mut(&mut self.lines);
            values[new_len..kept.min(old_len)].fill(T::zeroed());
        }
    }
}

impl<T: bytemuck::Pod> std::ops::Deref for LineVec<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        &bytemuck::cast_slice(&self.lines)[..self.len]
    }
}

impl<T: bytemuck::Pod> std::ops::DerefMut for LineVec<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        &mut bytemuck::cast_slice_mut(&mut self.lines)[..self.len]
    }
}

// SAFETY: a Line is 64 plain bytes, size 64 = its alignment: no padding, any bit pattern valid.
unsafe impl bytemuck::Zeroable for Line {}
// SAFETY: as for Zeroable (and a Line is Copy and 'static).
unsafe impl bytemuck::Pod for Line {}

#[cfg(test)]
mod tests {
    use super::LineVec;

    #[test]
    fn line_vec_starts_on_a_line_and_grows_with_zeros_after_truncation() {
        let mut v = LineVec::<u32>::default();
        v.try_reserve_exact(40).unwrap();
        v.grow_zeroed(21);
        assert_eq!(v.as_ptr() as usize % 64, 0, "first element on a cache line");
        v.iter_mut()
            .enumerate()
            .for_each(|(i, x)| *x = i as u32 + 1);
        v.truncate(18);
        assert_eq!(v.len(), 18);
        v.grow_zeroed(35);
        assert_eq!(&v[..18], &(1..=18).collect::<Vec<u32>>()[..]);
        assert!(v[18..].iter().all(|&x| x == 0), "{:?}", &v[18..]);
        assert_eq!(v.as_ptr() as usize % 64, 0);
        v.truncate(0);
        assert!(v.is_empty());
        v.reset(5);
        assert_eq!(&v[..], &[0; 5]);
    }
}
