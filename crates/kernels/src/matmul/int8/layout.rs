//! The int8 weight layout, shared by quantization, every microkernel and the on-disk format.
//!
//! Rows are taken in groups of [`ROWS`] (16, one AVX-512 register of i32 lanes, one lane per row);
//! the input dimension in blocks of [`BLOCK`] (64) values with one f32 scale per (row, block).
//! Inside a group, a block is 1024 bytes: 16 steps `t`, each holding for all 16 rows the 4 bytes
//! `w[row][block*64 + 4t .. +4]`, so one `vpdpbusd` with a broadcast of 4 activation bytes
//! advances 16 row dot products at once and the per-block epilogue is one vector per 16 rows.
//!
//! Why 64 and not Q8_0's 32: the f32 epilogue of a block (convert, scale, accumulate) takes
//! the same vector pipes as `vpdpbusd`; over 16 steps instead of 8 it costs half as much, and
//! the scales take half the bytes.
//!
//! Weights are stored offset-binary: `u8 = q + 128` with `q` in [-127, 127]. VNNI multiplies
//! unsigned by signed bytes; with the offset on the weight side, the correction
//! `-128 * sum(x_q)` depends only on the activations and is computed once per activation block.
//!
//! Byte order, all row-major: `packed[group][block][t][row 0..16][4]`, `scales[group][block][16]`.
//! Rows past `n` (in the last group) and columns past `k` (in the last block) are zero weights
//! (`u8 128`) with scale 0.

/// Rows per interleaved group.
pub const ROWS: usize = 16;
/// Values per quantization block along k.
pub const BLOCK: usize = 64;
/// Bytes of one (group, block) tile.
pub const TILE_BYTES: usize = ROWS * BLOCK;
/// Recorded in checkpoint metadata so a reader can refuse a layout it does not know.
pub const Q8_FORMAT: &str = "gattn-q8-block64-rows16-u8offset-v2";

pub fn groups(n: usize) -> usize {
    n.div_ceil(ROWS)
}

pub fn blocks(k: usize) -> usize {
    k.div_ceil(BLOCK)
}

/// Length in bytes of the packed weights of an `n x k` matrix.
pub fn packed_len(n: usize, k: usize) -> usize {
    groups(n) * blocks(k) * TILE_BYTES
}

/// Number of f32 scales of an `n x k` matrix.
pub fn scales_len(n: usize, k: usize) -> usize {
    groups(n) * blocks(k) * ROWS
}

/// Byte offset in `packed` of weight (row, col).
pub fn packed_index(nb: usize, row: usize, col: usize) -> usize {
    let (g, r) = (row / ROWS, row % ROWS);
    let (b, c) = (col / BLOCK, col % BLOCK);
    let (t, j) = (c / 4, c % 4);
    ((g * nb + b) * BLOCK / 4 + t) * ROWS * 4 + r * 4 + j
}

/// Index in `scales` of the scale of (row, block).
pub fn scale_index(nb: usize, row: usize, block: usize) -> usize {
    ((row / ROWS) * nb + block) * ROWS + row % ROWS
}
