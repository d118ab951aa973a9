//! The AMX tile instructions, as inline assembly (Rust's AMX intrinsics are not stable).
//!
//! Every kernel here uses one configuration: all 8 tiles 16 rows of 64 bytes, the largest
//! (16 x 16 f32 or i32 results; 16 x 32 bf16 or 16 x 64 int8 operands). The tile registers
//! are invisible to the compiler, so their contents live from one `asm!` block to the next;
//! a kernel loads the configuration first ([`Tiles::configure`]) and releases it when done.

use core::arch::asm;

/// Bytes per tile row (and rows per tile) in the one configuration used.
const TILE_BYTES_PER_ROW: usize = 64;
const TILE_ROWS: usize = 16;

/// The 64-byte `ldtilecfg` operand: palette 1, tiles 0..8 each 16 rows x 64 bytes.
#[repr(C, align(64))]
struct TileConfig([u8; 64]);

impl TileConfig {
    fn all_full() -> Self {
        let mut cfg = [0u8; 64];
        cfg[0] = 1; // palette 1
        for tile in 0..8 {
            // Bytes 16..48: bytes per row of each tile (u16 LE); bytes 48..64: rows per tile.
            cfg[16 + 2 * tile..18 + 2 * tile]
                .copy_from_slice(&(TILE_BYTES_PER_ROW as u16).to_le_bytes());
            cfg[48 + tile] = TILE_ROWS as u8;
        }
        TileConfig(cfg)
    }
}

/// A thread's tiles, configured for the lifetime of this value (released on drop).
pub(crate) struct Tiles(());

impl Tiles {
    /// # Safety
    /// AMX must be usable by this process (`CpuFeatures::amx`): the CPU has it
    /// and the OS granted the tile state.
    pub(crate) unsafe fn configure() -> Tiles {
        let cfg = TileConfig::all_full();
        // SAFETY: the caller's contract; cfg is a valid palette-1 configuration.
        unsafe { asm!("ldtilecfg [{}]", in(reg) cfg.0.as_ptr(), options(nostack, readonly)) };
        Tiles(())
    }

    /// Zeroes tile `T`.
    #[inline(always)]
    pub(crate) fn zero<const T: u8>(&self) {
        // SAFETY: tiles are configured while `self` lives.
        unsafe { asm!("tilezero tmm{t}", t = const T, options(nostack, nomem)) };
    }

    /// Loads tile `T`: 16 rows of 64 bytes, row `r` at `base + r * stride`.
    ///
    /// # Safety
    /// Those 16 ranges of 64 bytes must be readable.
    #[inline(always)]
    pub(crate) unsafe fn load<const T: u8>(&self, base: *const u8, stride: usize) {
        // SAFETY: the caller's contract.
        unsafe {
            asm!("tileloadd tmm{t}, [{b} + {s}*1]", t = const T, b = in(reg) base,
                 s = in(reg) stride, options(nostack, readonly))
        };
    }

    /// Stores tile `T`: row `r` to `base + r * stride`, 64 bytes each.
    ///
    /// # Safety
    /// Those 16 ranges of 64 bytes must be writable and not aliased.
    #[inline(always)]
    pub(crate) unsafe fn store<const T: u8>(&self, base: *mut u8, stride: usize) {
        // SAFETY: the caller's contract.
        unsafe {
            asm!("tilestored [{b} + {s}*1], tmm{t}", t = const T, b = in(reg) base,
                 s = in(reg) stride, options(nostack))
        };
    }

    /// `C += A B` in bf16 pairs with f32 sums: `C[i][j] += sum_p A[i][2p..2p+2] . B[p][2j..2j+2]`
    /// (A: 16 rows of 32 bf16; B: 16 rows of 16 bf16 pairs, the "VNNI" layout; C: 16 x 16 f32).
    #[inline(always)]
    pub(crate) fn dot_bf16<const C: u8, const A: u8, const B: u8>(&self) {
        // SAFETY: tiles are configured while `self` lives; the operands are tile registers.
        unsafe {
            asm!("tdpbf16ps tmm{c}, tmm{a}, tmm{b}", c = const C, a = const A, b = const B,
                 options(nostack, nomem))
        };
    }

    /// `C += A B` in groups of 4 signed bytes with i32 sums:
    /// `C[i][j] += sum_p A[i][4p..4p+4] . B[p][4j..4j+4]` (A: 16 rows of 64 i8; B: 16 rows of 16
    /// groups of 4 i8; C: 16 x 16 i32).
    #[inline(always)]
    pub(crate) fn dot_i8<const C: u8, const A: u8, const B: u8>(&self) {
        // SAFETY: as for `dot_bf16`.
        unsafe {
            asm!("tdpbssd tmm{c}, tmm{a}, tmm{b}", c = const C, a = const A, b = const B,
                 options(nostack, nomem))
        };
    }

    /// `C += A B` in groups of 4 bytes, A's unsigned and B's signed, with i32 sums:
    /// `C[i][j] += sum_p A[i][4p..4p+4] (u8) . B[p][4j..4j+4] (i8)`.
    #[inline(always)]
    pub(crate) fn dot_u8_i8<const C: u8, const A: u8, const B: u8>(&self) {
        // SAFETY: as for `dot_bf16`.
        unsafe {
            asm!("tdpbusd tmm{c}, tmm{a}, tmm{b}", c = const C, a = const A, b = const B,
                 options(nostack, nomem))
        };
    }
}

impl Drop for Tiles {
    fn drop(&mut self) {
        // Back to the initial state, so the thread's context switches stop saving 8 KiB of tiles.
        // SAFETY: releasing configured tiles has no other effect.
        unsafe { asm!("tilerelease", options(nostack, nomem)) };
    }
}
