//! A software model of the AMX tile instructions, with the interface of `tiles.rs`: built instead
//! of it under the `emulated-amx` feature, so that the AMX kernels (their blocking, packing,
//! masking and epilogues) run and are tested on hosts without AMX. It is slow and only for tests.
//!
//! The integer products are exact, as on the hardware. `tdpbf16ps` adds its products to the f32
//! sum one at a time, rounding to nearest even, with bf16 denormal inputs read as zero and
//! denormal results flushed. The hardware rounds in an order no tried model reproduces bit for
//! bit (`bf16_order`), so a test of a bf16 tile path must state a bound, not bit identity.
//!
//! With `GATTN_AMX_MODEL_SKIP_TILES=1` in the environment the model does nothing at all (every
//! result is garbage): what is left of an AMX kernel's time is everything but its tile
//! instructions, the AVX-512 half (softmax, packing, epilogues), which a host without AMX can
//! then time (`docs/performance.md`). Never for tests.

use std::cell::RefCell;
use std::sync::LazyLock;

static SKIP_TILES: LazyLock<bool> =
    LazyLock::new(|| std::env::var_os("GATTN_AMX_MODEL_SKIP_TILES").is_some_and(|v| v == "1"));

/// Bytes per tile row (and rows per tile) in the one configuration used.
const TILE_BYTES_PER_ROW: usize = 64;
const TILE_ROWS: usize = 16;
const TILE_BYTES: usize = TILE_BYTES_PER_ROW * TILE_ROWS;

/// A thread's 8 tile registers, 16 rows of 64 bytes each.
pub(crate) struct Tiles {
    registers: RefCell<[[u8; TILE_BYTES]; 8]>,
    /// `GATTN_AMX_MODEL_SKIP_TILES=1`: every instruction does nothing.
    skip: bool,
}

impl Tiles {
    /// # Safety
    /// None needed by the model; `unsafe` as on the hardware.
    pub(crate) unsafe fn configure() -> Tiles {
        Tiles {
            registers: RefCell::new([[0; TILE_BYTES]; 8]),
            skip: *SKIP_TILES,
        }
    }

    /// Zeroes tile `T`.
    pub(crate) fn zero<const T: u8>(&self) {
        if self.skip {
            return;
        }
        self.registers.borrow_mut()[T as usize] = [0; TILE_BYTES];
    }

    /// Loads tile `T`: 16 rows of 64 bytes, row `r` at `base + r * stride`.
    ///
    /// # Safety
    /// Those 16 ranges of 64 bytes must be readable.
    pub(crate) unsafe fn load<const T: u8>(&self, base: *const u8, stride: usize) {
        if self.skip {
            return;
        }
        let mut registers = self.registers.borrow_mut();
        for (r, row) in registers[T as usize]
            .chunks_exact_mut(TILE_BYTES_PER_ROW)
            .enumerate()
        {
            // SAFETY: the caller's contract.
            let src = unsafe {
                core::slice::from_raw_parts(base.wrapping_add(r * stride), TILE_BYTES_PER_ROW)
            };
            row.copy_from_slice(src);
        }
    }

    /// Stores tile `T`: row `r` to `base + r * stride`, 64 bytes each.
    ///
    /// # Safety
    /// Those 16 ranges of 64 bytes must be writable and not aliased.
    pub(crate) unsafe fn store<const T: u8>(&self, base: *mut u8, stride: usize) {
        if self.skip {
            return;
        }
        let registers = self.registers.borrow();
        for (r, row) in registers[T as usize]
            .chunks_exact(TILE_BYTES_PER_ROW)
            .enumerate()
        {
            // SAFETY: the caller's contract.
            let dst = unsafe {
                core::slice::from_raw_parts_mut(base.wrapping_add(r * stride), TILE_BYTES_PER_ROW)
            };
            dst.copy_from_slice(row);
        }
    }

    /// `C += A B` in bf16 pairs with f32 sums (`tdpbf16ps`; layouts as in `tiles.rs`).
    pub(crate) fn dot_bf16<const C: u8, const A: u8, const B: u8>(&self) {
        self.dot::<C, A, B>(|sum, a, b| {
            let mut sum = f32::from_bits(sum);
            for e in 0..2 {
                let x = bf16_input(u16::from_le_bytes([a[2 * e], a[2 * e + 1]]));
                let y = bf16_input(u16::from_le_bytes([b[2 * e], b[2 * e + 1]]));
                // bf16 times bf16 is exact in f32; the sum rounds once per product.
                sum = flush_denormal(sum + x * y);
            }
            sum.to_bits()
        });
    }

    /// `C += A B` in groups of 4 signed bytes with i32 sums (`tdpbssd`).
    pub(crate) fn dot_i8<const C: u8, const A: u8, const B: u8>(&self) {
        self.dot::<C, A, B>(|sum, a, b| {
            let dot: i32 = (0..4).map(|e| a[e] as i8 as i32 * b[e] as i8 as i32).sum();
            (sum as i32).wrapping_add(dot) as u32
        });
    }

    /// `C += A B` in groups of 4 bytes, A's unsigned and B's signed, with i32 sums (`tdpbusd`).
    pub(crate) fn dot_u8_i8<const C: u8, const A: u8, const B: u8>(&self) {
        self.dot::<C, A, B>(|sum, a, b| {
            let dot: i32 = (0..4).map(|e| a[e] as i32 * b[e] as i8 as i32).sum();
            (sum as i32).wrapping_add(dot) as u32
        });
    }

    /// `C[i][j] = step(C[i][j], A[i] group p, B[p] group j)` for every group `p` of a row, in
    /// order: A is 16 rows of 16 groups of 4 bytes, B 16 rows (one per group) of 16 groups, C 16
    /// rows of 16 words.
    fn dot<const C: u8, const A: u8, const B: u8>(&self, step: impl Fn(u32, &[u8], &[u8]) -> u32) {
        if self.skip {
            return;
        }
        let mut registers = self.registers.borrow_mut();
        let (a, b) = (registers[A as usize], registers[B as usize]);
        let c = &mut registers[C as usize];
        for i in 0..TILE_ROWS {
            for j in 0..TILE_ROWS {
                let at = i * TILE_BYTES_PER_ROW + 4 * j;
                let mut sum = u32::from_le_bytes(c[at..at + 4].try_into().expect("4 bytes"));
                for p in 0..TILE_ROWS {
                    let a_group = &a[i * TILE_BYTES_PER_ROW + 4 * p..][..4];
                    let b_group = &b[p * TILE_BYTES_PER_ROW + 4 * j..][..4];
                    sum = step(sum, a_group, b_group);
                }
                c[at..at + 4].copy_from_slice(&sum.to_le_bytes());
            }
        }
    }
}

impl Drop for Tiles {
    /// The hardware's `tilerelease`: nothing to do for the model, but callers may end the
    /// tiles' life explicitly, as they do on the hardware.
    fn drop(&mut self) {}
}

/// A bf16 operand as the tile unit reads it: denormals as zero.
fn bf16_input(bits: u16) -> f32 {
    flush_denormal(f32::from_bits((bits as u32) << 16))
}

fn flush_denormal(x: f32) -> f32 {
    if x.is_subnormal() {
        0.0f32.copysign(x)
    } else {
        x
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The model's products against plain loops over the documented layouts.
    #[test]
    fn integer_products_follow_the_layouts() {
        let a: Vec<u8> = (0..TILE_BYTES).map(|i| (i * 37 % 251) as u8).collect();
        let b: Vec<u8> = (0..TILE_BYTES).map(|i| (i * 91 % 241) as u8).collect();
        let mut c = vec![0i32; 256];
        let mut c_unsigned = vec![0i32; 256];
        // SAFETY: the model needs nothing; the buffers hold 16 rows of 64 bytes.
        unsafe {
            let tiles = Tiles::configure();
            tiles.load::<1>(a.as_ptr(), 64);
            tiles.load::<2>(b.as_ptr(), 64);
            tiles.zero::<0>();
            tiles.dot_i8::<0, 1, 2>();
            tiles.store::<0>(c.as_mut_ptr().cast(), 64);
            tiles.zero::<3>();
            tiles.dot_u8_i8::<3, 1, 2>();
            tiles.store::<3>(c_unsigned.as_mut_ptr().cast(), 64);
        }
        for i in 0..16 {
            for j in 0..16 {
                let (mut signed, mut unsigned) = (0i32, 0i32);
                for k in 0..64 {
                    let (x, y) = (a[i * 64 + k], b[(k / 4) * 64 + 4 * j + k % 4]);
                    signed += x as i8 as i32 * y as i8 as i32;
                    unsigned += x as i32 * y as i8 as i32;
                }
                assert_eq!(c[i * 16 + j], signed, "tdpbssd ({i}, {j})");
                assert_eq!(c_unsigned[i * 16 + j], unsigned, "tdpbusd ({i}, {j})");
            }
        }
    }

    #[test]
    fn bf16_products_accumulate_onto_the_sum() {
        let one = half::bf16::from_f32(1.0).to_bits();
        let a: Vec<u16> = (0..512)
            .map(|e| if e % 32 == 0 { one } else { 0 })
            .collect();
        let b: Vec<u16> = (0..512)
            .map(|e| half::bf16::from_f32((e % 32) as f32).to_bits())
            .collect();
        let mut c = vec![0.5f32; 256];
        // SAFETY: as above.
        unsafe {
            let tiles = Tiles::configure();
            tiles.load::<0>(c.as_ptr().cast(), 64);
            tiles.load::<1>(a.as_ptr().cast(), 64);
            tiles.load::<2>(b.as_ptr().cast(), 64);
            tiles.dot_bf16::<0, 1, 2>();
            tiles.store::<0>(c.as_mut_ptr().cast(), 64);
        }
        // Row i of A is 1 at element 0 only: C[i][j] = 0.5 + B[0][2j] = 0.5 + 2j.
        for (at, &v) in c.iter().enumerate() {
            assert_eq!(v, 0.5 + 2.0 * (at % 16) as f32, "at {at}");
        }
    }
}
