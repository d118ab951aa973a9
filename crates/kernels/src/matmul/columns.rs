//! Row-major outputs split into column blocks that parallel jobs write at the same time.
//!
//! [`DisjointColumns::new`] checks that the blocks of each output are disjoint and inside it;
//! [`DisjointColumns::take`] hands each block out once. A [`ColumnBlock`] therefore owns its
//! elements as a `&mut` would, though they are not contiguous (`rows` runs of `cols` values,
//! `ld` apart), which is what lets the jobs of one output run on different threads.

use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, Ordering};

/// One job's block: columns `col0 .. col0 + cols` of output `matrix` (`[rows, ld]`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct BlockSpec {
    pub matrix: usize,
    pub col0: usize,
    pub cols: usize,
}

/// The outputs `[rows, ld_i]` and the blocks the jobs write, each handed out once.
pub(crate) struct DisjointColumns<'y> {
    outputs: Vec<(*mut f32, usize)>,
    rows: usize,
    blocks: Vec<BlockSpec>,
    taken: Vec<AtomicBool>,
    /// The blocks sorted, for the overlap check (kept for the next call's buffers).
    sorted: Vec<BlockSpec>,
    _borrow: PhantomData<&'y mut [f32]>,
}

/// The buffers of a [`DisjointColumns`] between two calls (a decode step's matmuls then
/// allocate nothing): no pointer into an output is kept.
#[derive(Debug, Default)]
pub(crate) struct ColumnsStorage {
    outputs: Vec<(*mut f32, usize)>,
    taken: Vec<AtomicBool>,
    sorted: Vec<BlockSpec>,
}

// SAFETY: the raw pointers come from `&'y mut` slices that this value borrows for 'y, and
// threads reach them only through `take`, which gives each block (disjoint from every other,
// checked in `reusing`) to one caller only.
unsafe impl Send for DisjointColumns<'_> {}
// SAFETY: as for Send: `take` is the only access and gives out each block once.
unsafe impl Sync for DisjointColumns<'_> {}

impl<'y> DisjointColumns<'y> {
    /// `ys[i]` holds `rows * lds[i]` values. Panics if a block leaves its output or overlaps
    /// another block of the same output (the driver's job split guarantees neither happens).
    #[cfg(test)]
    pub(crate) fn new(
        ys: &'y mut [&mut [f32]],
        lds: &[usize],
        rows: usize,
        blocks: Vec<BlockSpec>,
    ) -> Self {
        Self::reusing(ys, lds, rows, blocks, ColumnsStorage::default())
    }

    /// As `new`, in the buffers of `storage` (see [`Self::into_storage`]).
    pub(crate) fn reusing(
        ys: &'y mut [&mut [f32]],
        lds: &[usize],
        rows: usize,
        blocks: Vec<BlockSpec>,
        storage: ColumnsStorage,
    ) -> Self {
        let ColumnsStorage {
            mut outputs,
            mut taken,
            mut sorted,
        } = storage;
        assert_eq!(ys.len(), lds.len());
        outputs.clear();
        outputs.extend(ys.iter_mut().zip(lds).map(|(y, &ld)| {
            assert_eq!(y.len(), rows * ld, "output of {rows} rows of {ld}");
            (y.as_mut_ptr(), ld)
        }));
        sorted.clear();
        sorted.extend_from_slice(&blocks);
        sorted.sort_unstable_by_key(|b| (b.matrix, b.col0));
        for (i, b) in sorted.iter().enumerate() {
            let ld = outputs[b.matrix].1;
            assert!(
                b.col0 + b.cols <= ld,
                "block {b:?} past the output's {ld} columns"
            );
            if let Some(next) = sorted.get(i + 1) {
                assert!(
                    next.matrix != b.matrix || b.col0 + b.cols <= next.col0,
                    "blocks {b:?} and {next:?} overlap"
                );
            }
        }
        taken.clear();
        taken.extend(blocks.iter().map(|_| AtomicBool::new(false)));
        DisjointColumns {
            outputs,
            rows,
            blocks,
            taken,
            sorted,
            _borrow: PhantomData,
        }
    }

    /// The block list and the buffers back, for the next call.
    pub(crate) fn into_storage(self) -> (Vec<BlockSpec>, ColumnsStorage) {
        let mut outputs = self.outputs;
        outputs.clear();
        let storage = ColumnsStorage {
            outputs,
            taken: self.taken,
            sorted: self.sorted,
        };
        (self.blocks, storage)
    }

    pub(crate) fn blocks(&self) -> &[BlockSpec] {
        &self.blocks
    }

    /// Block `j`, for the one job that writes it. Panics if it was taken before.
    pub(crate) fn take(&self, j: usize) -> ColumnBlock<'_> {
        assert!(
            !self.taken[j].swap(true, Ordering::Relaxed),
            "column block {j} taken twice"
        );
        let b = self.blocks[j];
        let (base, ld) = self.outputs[b.matrix];
        ColumnBlock {
            // SAFETY: col0 + cols <= ld (checked in `new`), so col0 is inside row 0.
            first: unsafe { base.add(b.col0) },
            rows: self.rows,
            cols: b.cols,
            ld,
            _borrow: PhantomData,
        }
    }
}

/// Columns of one output that this job alone writes: `rows` runs of `cols` values, `ld` apart.
pub(crate) struct ColumnBlock<'a> {
    first: *mut f32,
    rows: usize,
    cols: usize,
    ld: usize,
    _borrow: PhantomData<&'a mut f32>,
}

impl<'a> ColumnBlock<'a> {
    pub(crate) fn rows(&self) -> usize {
        self.rows
    }

    pub(crate) fn cols(&self) -> usize {
        self.cols
    }

    /// The row stride of the output.
    pub(crate) fn ld(&self) -> usize {
        self.ld
    }

    /// Row `i`'s `cols` values.
    pub(crate) fn row_mut(&mut self, i: usize) -> &mut [f32] {
        assert!(i < self.rows);
        // SAFETY: row i's run of this block is inside the output and belongs to this block
        // only (`DisjointColumns`); `&mut self` keeps two rows from being borrowed at once.
        unsafe { std::slice::from_raw_parts_mut(self.first.add(i * self.ld), self.cols) }
    }

    /// The block for kernels that write through a pointer: valid for writes of
    /// `p[i * ld + j]`, `i < rows`, `j < cols`, which no other thread accesses, while the
    /// `&mut self` borrow lasts.
    pub(crate) fn as_mut_ptr(&mut self) -> *mut f32 {
        self.first
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(matrix: usize, col0: usize, cols: usize) -> BlockSpec {
        BlockSpec { matrix, col0, cols }
    }

    #[test]
    fn blocks_write_their_own_columns_of_every_row() {
        let (mut a, mut b) = (vec![0.0f32; 2 * 5], vec![0.0f32; 2 * 3]);
        let mut ys = [&mut a[..], &mut b[..]];
        let blocks = vec![spec(0, 0, 2), spec(0, 2, 3), spec(1, 0, 3)];
        let columns = DisjointColumns::new(&mut ys, &[5, 3], 2, blocks);
        for j in 0..columns.blocks().len() {
            let mut block = columns.take(j);
            for i in 0..block.rows() {
                block.row_mut(i).fill((10 * j + i) as f32);
            }
        }
        drop(columns);
        assert_eq!(a, [0.0, 0.0, 10.0, 10.0, 10.0, 1.0, 1.0, 11.0, 11.0, 11.0]);
        assert_eq!(b, [20.0, 20.0, 20.0, 21.0, 21.0, 21.0]);
    }

    #[test]
    #[should_panic(expected = "overlap")]
    fn overlapping_blocks_are_refused() {
        let mut a = [0.0f32; 8];
        let mut ys = [&mut a[..]];
        DisjointColumns::new(&mut ys, &[8], 1, vec![spec(0, 0, 4), spec(0, 3, 2)]);
    }

    #[test]
    #[should_panic(expected = "past the output")]
    fn a_block_past_the_output_is_refused() {
        let mut a = [0.0f32; 8];
        let mut ys = [&mut a[..]];
        DisjointColumns::new(&mut ys, &[4], 2, vec![spec(0, 2, 3)]);
    }

    #[test]
    #[should_panic(expected = "taken twice")]
    fn a_block_is_taken_once() {
        let mut a = [0.0f32; 4];
        let mut ys = [&mut a[..]];
        let columns = DisjointColumns::new(&mut ys, &[4], 1, vec![spec(0, 0, 4)]);
        let _first = columns.take(0);
        let _second = columns.take(0);
    }
}
