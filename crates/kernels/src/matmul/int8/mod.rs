//! int8 weights x int8 activations (like llama.cpp's Q8_0 x Q8_0), f32 results.
//!
//! `layout` fixes the interleaved weight format, `quantize` makes it (and the activation
//! blocks), `matrix` owns it, the microkernels compute on it, and this file blocks the work.

pub mod layout;
pub mod matrix;
pub mod quantize;
mod scalar;

#[cfg(target_arch = "x86_64")]
mod microkernel_avx2;
#[cfg(target_arch = "x86_64")]
mod microkernel_avx512;
#[cfg(target_arch = "aarch64")]
mod microkernel_neon;

use crate::dispatch::{SimdLevel, cpu_features};
use layout::ROWS;
use matrix::Q8Matrix;
use quantize::{ActRow, Q8Activations};

/// Tokens per AVX-512 microkernel tile (activations are padded to a multiple of it).
pub(crate) const TILE_TOKENS: usize = 6;
/// Row groups per AVX-512 microkernel tile (2 x 16 = 32 output rows).
const TILE_GROUPS: usize = 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kernel {
    Scalar,
    #[cfg(target_arch = "x86_64")]
    Avx2,
    #[cfg(target_arch = "x86_64")]
    Vnni,
    #[cfg(target_arch = "aarch64")]
    Neon,
}

fn kernel(level: SimdLevel) -> Kernel {
    match level {
        #[cfg(target_arch = "x86_64")]
        SimdLevel::Avx512 | SimdLevel::Amx if cpu_features().avx512_vnni => Kernel::Vnni,
        #[cfg(target_arch = "x86_64")]
        SimdLevel::Avx512 | SimdLevel::Amx | SimdLevel::Avx2 => Kernel::Avx2,
        #[cfg(target_arch = "aarch64")]
        SimdLevel::Neon => Kernel::Neon,
        _ => {
            let _ = cpu_features;
            Kernel::Scalar
        }
    }
}

fn group_dot(kernel: Kernel, packed: &[u8], scales: &[f32], x: ActRow<'_>) -> [f32; ROWS] {
    match kernel {
        Kernel::Scalar => scalar::group_dot(packed, scales, x),
        // SAFETY: `kernel` only picks an ISA the CPU has (see `kernel`).
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx2 => unsafe { microkernel_avx2::group_dot(packed, scales, x) },
        #[cfg(target_arch = "x86_64")]
        Kernel::Vnni => unsafe { microkernel_avx512::group_dot(packed, scales, x) },
        #[cfg(target_arch = "aarch64")]
        Kernel::Neon => unsafe { microkernel_neon::group_dot(packed, scales, x) },
    }
}

/// Token padding the activations need for `level`'s matrix-matrix kernel.
pub(crate) fn token_padding(level: SimdLevel) -> usize {
    #[cfg(target_arch = "x86_64")]
    if level == SimdLevel::Amx {
        return crate::matmul::amx::int8::TOKEN_PADDING;
    }
    match kernel(level) {
        #[cfg(target_arch = "x86_64")]
        Kernel::Vnni => TILE_TOKENS,
        _ => 1,
    }
}

/// Rows `row0 .. row0 + out.len()` of `w x` for token 0 of `x`; `row0` is a multiple of 16.
pub(crate) fn matvec_rows(
    level: SimdLevel,
    w: &Q8Matrix<'_>,
    x: &Q8Activations,
    row0: usize,
    out: &mut [f32],
) {
    debug_assert_eq!(row0 % ROWS, 0);
    let kernel = kernel(level);
    let x = x.row(0);
    for (i, chunk) in out.chunks_mut(ROWS).enumerate() {
        let (packed, scales) = w.group(row0 / ROWS + i);
        let y = group_dot(kernel, packed, scales, x);
        chunk.copy_from_slice(&y[..chunk.len()]);
    }
}

/// Columns `col0 .. col0 + cols` of `y = x w^T` for all tokens: writes `y[i * ld + j]` for
/// `i < m`, `j < cols` through `y`, which points at column `col0` of token 0.
///
/// # Safety
/// `y` must be valid for those writes and no other thread may access those elements.
pub(crate) unsafe fn matmat_cols(
    level: SimdLevel,
    w: &Q8Matrix<'_>,
    x: &Q8Activations,
    col0: usize,
    cols: usize,
    y: *mut f32,
    ld: usize,
) {
    debug_assert_eq!(col0 % ROWS, 0);
    #[cfg(target_arch = "x86_64")]
    if level == SimdLevel::Amx {
        // SAFETY: the level is supported, so AMX is usable; the driver padded the activations
        // (token_padding) and put them in tile order; the caller's contract on y.
        return unsafe { crate::matmul::amx::int8::matmat_cols(w, x, col0, cols, y, ld) };
    }
    let kernel = kernel(level);
    let (g0, g1) = (col0 / ROWS, (col0 + cols).div_ceil(ROWS));
    // SAFETY: the caller's contract; `store` only writes rows < m and columns < cols.
    let store = |token: usize, g: usize, values: &[f32; ROWS]| {
        let first = g * ROWS - col0;
        let out = unsafe { y.add(token * ld + first) };
        if cols - first >= ROWS {
            // A constant length: one vector move, not a loop or a memcpy call.
            unsafe { out.cast::<[f32; ROWS]>().write_unaligned(*values) };
        } else {
            unsafe { std::ptr::copy_nonoverlapping(values.as_ptr(), out, cols - first) };
        }
    };
    match kernel {
        #[cfg(target_arch = "x86_64")]
        Kernel::Vnni => {
            assert!(
                x.rows.is_multiple_of(TILE_TOKENS),
                "activations padded for the VNNI tile"
            );
            let nb = x.nb;
            for tok0 in (0..x.m).step_by(TILE_TOKENS) {
                let live = TILE_TOKENS.min(x.m - tok0);
                let mut g = g0;
                while g < g1 {
                    if g + TILE_GROUPS <= g1 {
                        let mut out = [[[0.0f32; ROWS]; TILE_GROUPS]; TILE_TOKENS];
                        let groups = core::array::from_fn(|i| w.group(g + i));
                        // SAFETY: VNNI is present (see `kernel`).
                        unsafe {
                            microkernel_avx512::tile::<TILE_TOKENS, TILE_GROUPS>(
                                groups,
                                &x.qs,
                                &x.scales,
                                &x.offset_fix,
                                nb,
                                tok0,
                                &mut out,
                            )
                        };
                        for (i, row) in out.iter().take(live).enumerate() {
                            for (gi, values) in row.iter().enumerate() {
                                store(tok0 + i, g + gi, values);
                            }
                        }
                        g += TILE_GROUPS;
                    } else {
                        let mut out = [[[0.0f32; ROWS]; 1]; TILE_TOKENS];
                        // SAFETY: VNNI is present (see `kernel`).
                        unsafe {
                            microkernel_avx512::tile::<TILE_TOKENS, 1>(
                                [w.group(g)],
                                &x.qs,
                                &x.scales,
                                &x.offset_fix,
                                nb,
                                tok0,
                                &mut out,
                            )
                        };
                        for (i, row) in out.iter().take(live).enumerate() {
                            store(tok0 + i, g, &row[0]);
                        }
                        g += 1;
                    }
                }
            }
        }
        _ => {
            for token in 0..x.m {
                let row = x.row(token);
                for g in g0..g1 {
                    let (packed, scales) = w.group(g);
                    store(token, g, &group_dot(kernel, packed, scales, row));
                }
            }
        }
    }
}
