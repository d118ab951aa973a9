//! f32 and bf16 weights (used in place, e.g. straight from an mmapped checkpoint) times f32
//! activations. bf16 with AVX512-BF16: `bf16dot` (activations rounded to bf16), mat-vec and
//! mat-mat. Otherwise matrix-vector: own row kernels per ISA; matrix-matrix: the `gemm` crate on
//! column panels (bf16 panels widened to f32 first, a cost of one mat-vec per call, amortized
//! over the tokens). The `*_job` functions are the kernel table's entries.

pub(crate) mod bf16dot;
mod scalar;

#[cfg(target_arch = "x86_64")]
mod matvec_avx2;
#[cfg(target_arch = "x86_64")]
mod matvec_avx512;
#[cfg(target_arch = "aarch64")]
mod matvec_neon;

use half::bf16;

use super::WeightMatrix;
use super::columns::ColumnBlock;
use super::driver::Inputs;

/// A weight element the float kernels read: f32 or bf16.
pub(crate) trait FloatWeight: Copy + Send + Sync + 'static {
    fn to_f32(self) -> f32;
    /// Widens `src` into `dst` (same length) for the gemm panels.
    fn widen(src: &[Self], dst: &mut Vec<f32>);
    /// The weights and k of `w`, which must be of this element type.
    fn weights<'a>(w: &WeightMatrix<'a>) -> (&'a [Self], usize);
}

impl FloatWeight for f32 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self
    }

    fn widen(src: &[f32], dst: &mut Vec<f32>) {
        dst.clear();
        dst.extend_from_slice(src);
    }

    fn weights<'a>(w: &WeightMatrix<'a>) -> (&'a [f32], usize) {
        match *w {
            WeightMatrix::F32 { data, k, .. } => (data, k),
            _ => panic!("the table gave an f32 kernel other weights"),
        }
    }
}

impl FloatWeight for bf16 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        bf16::to_f32(self)
    }

    fn widen(src: &[bf16], dst: &mut Vec<f32>) {
        use half::slice::HalfFloatSliceExt;
        dst.clear();
        dst.resize(src.len(), 0.0);
        src.convert_to_f32_slice(dst);
    }

    fn weights<'a>(w: &WeightMatrix<'a>) -> (&'a [bf16], usize) {
        match *w {
            WeightMatrix::Bf16 { data, k, .. } => (data, k),
            _ => panic!("the table gave a bf16 kernel other weights"),
        }
    }
}

/// The row kernel of one ISA: `out[r] = w[r] . x` for the `out.len()` rows of `w` (`[rows, k]`).
pub(crate) trait FloatRows<T> {
    /// # Safety
    /// The CPU has the ISA.
    unsafe fn rows(w: &[T], k: usize, x: &[f32], out: &mut [f32]);
}

pub(crate) struct RowsScalar;
#[cfg(target_arch = "x86_64")]
pub(crate) struct RowsAvx2;
#[cfg(target_arch = "x86_64")]
pub(crate) struct RowsAvx512;
#[cfg(target_arch = "aarch64")]
pub(crate) struct RowsNeon;

impl<T: FloatWeight> FloatRows<T> for RowsScalar {
    unsafe fn rows(w: &[T], k: usize, x: &[f32], out: &mut [f32]) {
        scalar::matvec_rows(w, k, x, out)
    }
}

/// The float row kernels of an ISA module, for both weight types.
macro_rules! float_rows {
    ($isa:ty, $module:ident) => {
        impl FloatRows<f32> for $isa {
            unsafe fn rows(w: &[f32], k: usize, x: &[f32], out: &mut [f32]) {
                // SAFETY: the caller's contract (the CPU has the ISA).
                unsafe { $module::matvec_rows_f32(w, k, x, out) }
            }
        }
        impl FloatRows<bf16> for $isa {
            unsafe fn rows(w: &[bf16], k: usize, x: &[f32], out: &mut [f32]) {
                // SAFETY: the caller's contract (the CPU has the ISA).
                unsafe { $module::matvec_rows_bf16(w, k, x, out) }
            }
        }
    };
}
#[cfg(target_arch = "x86_64")]
float_rows!(RowsAvx2, matvec_avx2);
#[cfg(target_arch = "x86_64")]
float_rows!(RowsAvx512, matvec_avx512);
#[cfg(target_arch = "aarch64")]
float_rows!(RowsNeon, matvec_neon);

/// The mat-vec job (one token) with the row kernel `R`.
///
/// # Safety
/// The CPU has `R`'s ISA.
pub(crate) unsafe fn matvec_job<T: FloatWeight, R: FloatRows<T>>(
    w: &WeightMatrix<'_>,
    input: &Inputs<'_>,
    col0: usize,
    out: &mut ColumnBlock<'_>,
) {
    let (data, k) = T::weights(w);
    let cols = out.cols();
    // SAFETY: the caller's contract.
    unsafe {
        R::rows(
            &data[col0 * k..(col0 + cols) * k],
            k,
            input.x,
            out.row_mut(0),
        )
    }
}

/// The mat-mat job as one mat-vec per token (the scalar level's; the oracle of the others).
///
/// # Safety
/// The CPU has `R`'s ISA.
pub(crate) unsafe fn matmat_rows_job<T: FloatWeight, R: FloatRows<T>>(
    w: &WeightMatrix<'_>,
    input: &Inputs<'_>,
    col0: usize,
    out: &mut ColumnBlock<'_>,
) {
    let (data, k) = T::weights(w);
    let panel = &data[col0 * k..(col0 + out.cols()) * k];
    for (i, x) in input.x.chunks_exact(k).enumerate() {
        // SAFETY: the caller's contract.
        unsafe { R::rows(panel, k, x, out.row_mut(i)) };
    }
}

/// The mat-mat job on the `gemm` crate (which picks its own SIMD kernels at run time).
pub(crate) fn matmat_gemm_job<T: FloatWeight>(
    w: &WeightMatrix<'_>,
    input: &Inputs<'_>,
    col0: usize,
    out: &mut ColumnBlock<'_>,
) {
    let (data, k) = T::weights(w);
    let (m, cols, ld) = (input.m, out.cols(), out.ld());
    let x = input.x;
    assert!(out.rows() == m && x.len() == m * k);
    let panel_w = &data[col0 * k..(col0 + cols) * k];
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
        // SAFETY: dst is the block, `m x cols` with strides (ld, 1) (`ColumnBlock::as_mut_ptr`);
        // lhs is x `[m, k]` row-major; rhs(kk, j) = panel[j * k + kk], i.e. the panel
        // transposed, `cols * k` values either way.
        unsafe {
            gemm::gemm(
                m,
                cols,
                k,
                out.as_mut_ptr(),
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
