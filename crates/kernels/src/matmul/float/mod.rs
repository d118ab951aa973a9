//! f32 and bf16 weights (used in place, e.g. straight from an mmapped checkpoint) times f32
//! activations. bf16 with AVX512-BF16: `bf16dot` (activations rounded to bf16), mat-vec and
//! mat-mat. Otherwise matrix-vector: own kernels; matrix-matrix: the `gemm` crate on column
//! panels (bf16 panels widened to f32 first, a cost of one mat-vec per call, amortized over the
//! tokens).

pub(crate) mod bf16dot;
mod scalar;

#[cfg(target_arch = "x86_64")]
mod matvec_avx2;
#[cfg(target_arch = "x86_64")]
mod matvec_avx512;
#[cfg(target_arch = "aarch64")]
mod matvec_neon;

use half::bf16;

use crate::dispatch::SimdLevel;

/// A weight element the float kernels read: f32 or bf16.
pub trait FloatWeight: Copy + Send + Sync + 'static {
    fn to_f32(self) -> f32;
    /// Rows `out.len()` of `w` (`[rows, k]`) dotted with `x`, at `level`.
    fn matvec_rows(level: SimdLevel, w: &[Self], k: usize, x: &[f32], out: &mut [f32]);
    /// Widens `src` into `dst` (same length) for the gemm panels.
    fn widen(src: &[Self], dst: &mut Vec<f32>);
}

impl FloatWeight for f32 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self
    }

    fn matvec_rows(level: SimdLevel, w: &[f32], k: usize, x: &[f32], out: &mut [f32]) {
        match level {
            // SAFETY: a level is only used when the CPU supports it.
            #[cfg(target_arch = "x86_64")]
            SimdLevel::Avx512 | SimdLevel::Amx => unsafe {
                matvec_avx512::matvec_rows_f32(w, k, x, out)
            },
            #[cfg(target_arch = "x86_64")]
            SimdLevel::Avx2 => unsafe { matvec_avx2::matvec_rows_f32(w, k, x, out) },
            #[cfg(target_arch = "aarch64")]
            SimdLevel::Neon => unsafe { matvec_neon::matvec_rows_f32(w, k, x, out) },
            _ => scalar::matvec_rows(w, k, x, out),
        }
    }

    fn widen(src: &[f32], dst: &mut Vec<f32>) {
        dst.clear();
        dst.extend_from_slice(src);
    }
}

impl FloatWeight for bf16 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        bf16::to_f32(self)
    }

    fn matvec_rows(level: SimdLevel, w: &[bf16], k: usize, x: &[f32], out: &mut [f32]) {
        match level {
            // SAFETY: a level is only used when the CPU supports it.
            #[cfg(target_arch = "x86_64")]
            SimdLevel::Avx512 | SimdLevel::Amx => unsafe {
                matvec_avx512::matvec_rows_bf16(w, k, x, out)
            },
            #[cfg(target_arch = "x86_64")]
            SimdLevel::Avx2 => unsafe { matvec_avx2::matvec_rows_bf16(w, k, x, out) },
            #[cfg(target_arch = "aarch64")]
            SimdLevel::Neon => unsafe { matvec_neon::matvec_rows_bf16(w, k, x, out) },
            _ => scalar::matvec_rows(w, k, x, out),
        }
    }

    fn widen(src: &[bf16], dst: &mut Vec<f32>) {
        use half::slice::HalfFloatSliceExt;
        dst.clear();
        dst.resize(src.len(), 0.0);
        src.convert_to_f32_slice(dst);
    }
}

/// Columns `col0 .. col0 + cols` of `y = x w^T` (x `[m, k]`), written through `y` (pointing at
/// column `col0` of token 0) with row stride `ld`.
///
/// # Safety
/// `y` must be valid for writes of `y[i * ld + j]`, `i < m`, `j < cols`, and no other thread may
/// access those elements.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn matmat_cols<T: FloatWeight>(
    level: SimdLevel,
    w: &[T],
    k: usize,
    x: &[f32],
    m: usize,
    col0: usize,
    cols: usize,
    y: *mut f32,
    ld: usize,
) {
    let panel_w = &w[col0 * k..(col0 + cols) * k];
    if level == SimdLevel::Scalar {
        let mut row = vec![0.0f32; cols];
        for i in 0..m {
            T::matvec_rows(level, panel_w, k, &x[i * k..(i + 1) * k], &mut row);
            for (j, v) in row.iter().enumerate() {
                // SAFETY: the caller's contract.
                unsafe { *y.add(i * ld + j) = *v };
            }
        }
        return;
    }
    thread_local! {
        static PANEL: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    PANEL.with_borrow_mut(|panel| {
        let rhs: *const f32 = if core::any::TypeId::of::<T>() == core::any::TypeId::of::<f32>() {
            panel_w.as_ptr().cast()
        } else {
            T::widen(panel_w, panel);
            panel.as_ptr()
        };
        // SAFETY: dst is `m x cols` with strides (ld, 1) per the caller's contract; lhs is x
        // `[m, k]` row-major; rhs(kk, j) = panel[j * k + kk], i.e. the panel transposed.
        unsafe {
            gemm::gemm(
                m,
                cols,
                k,
                y,
                1,
                ld as isize,
                false,
                x.as_ptr(),
                1,
                k as isize,
                rhs,
                k as isize,
                1,
                0.0f32,
                1.0f32,
                false,
                false,
                false,
                gemm::Parallelism::None,
            )
        }
    });
}
