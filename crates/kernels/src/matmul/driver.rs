//! Splits a (possibly fused) matmul into column blocks and runs them on the current rayon pool.
//!
//! One job is one column block of one weight matrix for all tokens: wide enough that its
//! weights amortize the task (about 256 KiB streamed for a mat-vec, an L2-sized panel for an
//! int8 mat-mat), narrow enough that every thread gets several jobs.

use std::cell::RefCell;

#[cfg(target_arch = "x86_64")]
use super::amx;
use super::error::MatmulError;
use super::float::bf16dot::{self, Bf16Activations};
use super::float::{self, FloatWeight};
use super::int8::{self, layout::ROWS, quantize::Q8Activations};
use super::{SimdLevel, WeightMatrix};
use crate::activations::silu_mul_in_place;
use crate::parallel;

pub(crate) enum Epilogue<'w, 'a> {
    None,
    /// `y = silu(x G^T) * y` with G the gate matrix (same shape as the main one).
    SiluGate(&'w WeightMatrix<'a>),
}

/// A raw output pointer that jobs write disjoint column blocks through.
#[derive(Clone, Copy)]
struct OutPtr(*mut f32);
// SAFETY: jobs write disjoint elements (different matrices or different column blocks).
unsafe impl Send for OutPtr {}
unsafe impl Sync for OutPtr {}

struct Job {
    matrix: usize,
    col0: usize,
    cols: usize,
}

/// The activations as every format wants them.
struct Input<'x> {
    x: &'x [f32],
    m: usize,
    q8: Option<Q8Activations>,
    /// For bf16 weights where the bf16 dot-product kernels run.
    bf16: Option<Bf16Activations>,
    /// For bf16 weights in a mat-mat on AMX tiles.
    #[cfg(target_arch = "x86_64")]
    amx_bf16: Option<amx::bf16::AmxBf16Activations>,
}

thread_local! {
    static Q8_SCRATCH: RefCell<Q8Activations> = RefCell::new(Q8Activations::default());
    static BF16_SCRATCH: RefCell<Bf16Activations> = RefCell::new(Bf16Activations::default());
    #[cfg(target_arch = "x86_64")]
    static AMX_BF16_SCRATCH: RefCell<amx::bf16::AmxBf16Activations> =
        RefCell::new(Default::default());
    static GATE_SCRATCH: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

pub(crate) fn run(
    level: SimdLevel,
    mats: &[(WeightMatrix<'_>, Option<&[f32]>)],
    x: &[f32],
    ys: &mut [&mut [f32]],
    epilogue: Epilogue<'_, '_>,
) -> Result<(), MatmulError> {
    if !level.is_supported() {
        return Err(MatmulError::UnsupportedLevel(level));
    }
    if mats.is_empty() || mats.len() != ys.len() {
        return Err(MatmulError::Fusion {
            what: format!("{} weight matrices but {} outputs", mats.len(), ys.len()),
        });
    }
    let k = mats[0].0.k();
    if let Some((w, _)) = mats.iter().find(|(w, _)| w.k() != k) {
        return Err(MatmulError::Fusion {
            what: format!("input sizes differ: {k} and {}", w.k()),
        });
    }
    if !x.len().is_multiple_of(k) {
        return Err(MatmulError::RaggedInput { len: x.len(), k });
    }
    let m = x.len() / k;
    for ((w, bias), y) in mats.iter().zip(ys.iter()) {
        if y.len() != m * w.n() {
            return Err(MatmulError::Length {
                what: "y",
                got: y.len(),
                expected: m * w.n(),
            });
        }
        if let Some(b) = bias
            && b.len() != w.n()
        {
            return Err(MatmulError::Length {
                what: "bias",
                got: b.len(),
                expected: w.n(),
            });
        }
    }
    if m == 0 {
        return Ok(());
    }

    let gate = match epilogue {
        Epilogue::SiluGate(g) => Some(g),
        Epilogue::None => None,
    };
    let needs = |f: fn(&WeightMatrix<'_>) -> bool| mats.iter().map(|(w, _)| w).chain(gate).any(f);
    let needs_q8 = needs(|w| matches!(w, WeightMatrix::Int8(_)));
    let has_bf16 = needs(|w| matches!(w, WeightMatrix::Bf16 { .. }));
    #[cfg(target_arch = "x86_64")]
    let bf16_on_amx = has_bf16 && m > 1 && amx::bf16::fits(k) && level == SimdLevel::Amx;
    #[cfg(not(target_arch = "x86_64"))]
    let bf16_on_amx = false;
    let needs_bf16 = bf16dot::available(level) && has_bf16 && !bf16_on_amx;
    let mut input = Input {
        x,
        m,
        q8: None,
        bf16: None,
        #[cfg(target_arch = "x86_64")]
        amx_bf16: None,
    };
    #[cfg(target_arch = "x86_64")]
    if bf16_on_amx {
        let mut packed = AMX_BF16_SCRATCH.with_borrow_mut(std::mem::take);
        amx::bf16::pack_activations_into(x, m, k, &mut packed);
        input.amx_bf16 = Some(packed);
    }
    if needs_bf16 {
        let mut xb = BF16_SCRATCH.with_borrow_mut(std::mem::take);
        bf16dot::convert_activations_into(level, x, m, k, &mut xb);
        input.bf16 = Some(xb);
    }
    if needs_q8 {
        let mut q8 = Q8_SCRATCH.with_borrow_mut(std::mem::take);
        let pad = if m == 1 {
            1
        } else {
            int8::token_padding(level)
        };
        int8::quantize::quantize_activations_into(level, x, m, k, pad, &mut q8);
        #[cfg(target_arch = "x86_64")]
        if m > 1 && level == SimdLevel::Amx {
            amx::int8::order_tiles(&mut q8);
        }
        input.q8 = Some(q8);
    }

    let threads = rayon::current_num_threads();
    let mut jobs = Vec::new();
    for (matrix, (w, _)) in mats.iter().enumerate() {
        let width = job_width(w, m, threads);
        let blocks = if m == 1 {
            matvec_blocks(w.n(), width, threads)
        } else {
            (0..w.n())
                .step_by(width)
                .map(|col0| (col0, width.min(w.n() - col0)))
                .collect()
        };
        jobs.extend(
            blocks
                .into_iter()
                .map(|(col0, cols)| Job { matrix, col0, cols }),
        );
    }
    let outs: Vec<OutPtr> = ys.iter_mut().map(|y| OutPtr(y.as_mut_ptr())).collect();
    let input_ref = &input;
    let outs = &outs;
    parallel::for_each(jobs.len(), |j| {
        let job = &jobs[j];
        let (w, bias) = &mats[job.matrix];
        let ld = w.n();
        let y = outs[job.matrix];
        // SAFETY: each job owns columns col0..col0+cols of its own output, `y` holds m * ld.
        unsafe {
            let y = y.0.add(job.col0);
            compute(level, w, input_ref, job.col0, job.cols, y, ld);
            if let Some(b) = bias {
                for i in 0..m {
                    for j in 0..job.cols {
                        *y.add(i * ld + j) += b[job.col0 + j];
                    }
                }
            }
            if let Some(g) = gate {
                GATE_SCRATCH.with_borrow_mut(|tmp| {
                    tmp.clear();
                    tmp.resize(m * job.cols, 0.0);
                    compute(
                        level,
                        g,
                        input_ref,
                        job.col0,
                        job.cols,
                        tmp.as_mut_ptr(),
                        job.cols,
                    );
                    for i in 0..m {
                        let y_row = std::slice::from_raw_parts_mut(y.add(i * ld), job.cols);
                        let gate_row = &tmp[i * job.cols..][..job.cols];
                        silu_mul_in_place(level, gate_row, y_row);
                    }
                });
            }
        }
    });

    if let Some(q8) = input.q8.take() {
        Q8_SCRATCH.with_borrow_mut(|slot| *slot = q8);
    }
    if let Some(xb) = input.bf16.take() {
        BF16_SCRATCH.with_borrow_mut(|slot| *slot = xb);
    }
    #[cfg(target_arch = "x86_64")]
    if let Some(packed) = input.amx_bf16.take() {
        AMX_BF16_SCRATCH.with_borrow_mut(|slot| *slot = packed);
    }
    Ok(())
}

/// Output columns per job (a multiple of the int8 row group, and of the 32-row VNNI tile).
fn job_width(w: &WeightMatrix<'_>, m: usize, threads: usize) -> usize {
    let n = w.n();
    let row_bytes = (w.bytes() / n).max(1);
    let by_cache = match (m, w) {
        (1, _) => (256 << 10) / row_bytes,
        (_, WeightMatrix::Int8(_)) => (512 << 10) / row_bytes,
        _ => 128,
    };
    let balanced = n.div_ceil(4 * threads.max(1));
    let align = 2 * ROWS;
    by_cache.min(balanced).max(align).div_ceil(align) * align
}

/// The mat-vec's column blocks `(col0, cols)` in the order threads claim them: a mat-vec streams
/// its weights, and every block a thread starts away from where its last one ended restarts the
/// prefetchers. So each of the `threads` equal segments of the rows first gives one block of
/// three quarters of it (one thread's long stream), then its last quarter in blocks of `width`,
/// the segments taking turns, so that a thread finishing its long block usually claims the block
/// right after it, and the small blocks even out threads that run at different speeds. Against
/// blocks of `width` claimed in row order (each thread's next block two ahead), decode in the
/// fast bandwidth phase (probe ~80 GB/s, alternated) went from paired roofline 0.81-0.85 to
/// 0.87-0.90 (int8, 33.7-36.0 -> 36.2-38.5 tok/s) and 0.84-0.88 to 0.88-0.91 (bf16); in the
/// slow phase it is within the noise (int8 +2%).
fn matvec_blocks(n: usize, width: usize, threads: usize) -> Vec<(usize, usize)> {
    let align = 2 * ROWS;
    let segment = n.div_ceil(threads.max(1)).div_ceil(align) * align;
    let long = (segment * 3 / 4) / align * align;
    let mut blocks = Vec::new();
    let mut tails = Vec::new();
    for start in (0..n).step_by(segment) {
        let end = (start + segment).min(n);
        let tail_start = (start + long).min(end);
        if tail_start > start {
            blocks.push((start, tail_start - start));
        }
        tails.push(
            (tail_start..end)
                .step_by(width)
                .map(move |col0| (col0, width.min(end - col0))),
        );
    }
    // Round robin over the segments' tails.
    loop {
        let before = blocks.len();
        blocks.extend(tails.iter_mut().filter_map(Iterator::next));
        if blocks.len() == before {
            return blocks;
        }
    }
}

/// Columns `col0 .. col0 + cols` of `x w^T` into `y` (column col0 of token 0, row stride `ld`).
///
/// # Safety
/// `y` valid for `y[i * ld + j]`, `i < m`, `j < cols`, not accessed by other threads.
unsafe fn compute(
    level: SimdLevel,
    w: &WeightMatrix<'_>,
    input: &Input<'_>,
    col0: usize,
    cols: usize,
    y: *mut f32,
    ld: usize,
) {
    let (x, m) = (input.x, input.m);
    // SAFETY (all arms): the caller's contract on y.
    match *w {
        WeightMatrix::F32 { data, k, .. } => unsafe {
            float_cols(level, data, k, x, m, col0, cols, y, ld)
        },
        #[cfg(target_arch = "x86_64")]
        WeightMatrix::Bf16 { data, k, .. } if input.amx_bf16.is_some() => unsafe {
            let packed = input.amx_bf16.as_ref().expect("checked by the guard");
            amx::bf16::matmat_cols(data, k, packed, col0, cols, y, ld)
        },
        WeightMatrix::Bf16 { data, k, .. } => match &input.bf16 {
            #[cfg(target_arch = "x86_64")]
            Some(xb) if m == 1 => unsafe {
                let out = std::slice::from_raw_parts_mut(y, cols);
                bf16dot::matvec_rows(data, k, xb, col0, out)
            },
            #[cfg(target_arch = "x86_64")]
            Some(xb) => unsafe { bf16dot::matmat_cols(data, k, xb, col0, cols, y, ld) },
            _ => unsafe { float_cols(level, data, k, x, m, col0, cols, y, ld) },
        },
        WeightMatrix::Int8(q) => {
            let q8 = input
                .q8
                .as_ref()
                .expect("int8 weights get quantized activations");
            if m == 1 {
                let out = unsafe { std::slice::from_raw_parts_mut(y, cols) };
                int8::matvec_rows(level, q, q8, col0, out);
            } else {
                unsafe { int8::matmat_cols(level, q, q8, col0, cols, y, ld) };
            }
        }
    }
}

#[allow(clippy::too_many_arguments)]
unsafe fn float_cols<T: FloatWeight>(
    level: SimdLevel,
    data: &[T],
    k: usize,
    x: &[f32],
    m: usize,
    col0: usize,
    cols: usize,
    y: *mut f32,
    ld: usize,
) {
    if m == 1 {
        // SAFETY: the caller's contract on y (m == 1: cols contiguous elements).
        let out = unsafe { std::slice::from_raw_parts_mut(y, cols) };
        T::matvec_rows(level, &data[col0 * k..(col0 + cols) * k], k, x, out);
    } else {
        // SAFETY: the caller's contract on y.
        unsafe { float::matmat_cols(level, data, k, x, m, col0, cols, y, ld) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every row in exactly one block, blocks start on the row-group tile, the segments' long
    /// blocks come first, and the tails of the segments alternate.
    #[test]
    fn matvec_blocks_cover_every_row_once_long_blocks_first() {
        for n in [1, 31, 32, 100, 2048, 2064, 6144, 151_936] {
            for threads in [1, 2, 3, 8] {
                for width in [32, 64, 128, 1024] {
                    let blocks = matvec_blocks(n, width, threads);
                    let mut covered = vec![0u8; n];
                    for &(col0, cols) in &blocks {
                        assert!(cols > 0 && col0 % (2 * ROWS) == 0, "{n} {threads} {width}");
                        covered[col0..col0 + cols].iter_mut().for_each(|c| *c += 1);
                    }
                    assert!(covered.iter().all(|&c| c == 1), "{n} {threads} {width}");
                    let segment = n.div_ceil(threads).div_ceil(2 * ROWS) * 2 * ROWS;
                    if n >= 2048 {
                        // The long blocks, one a segment in order, then a tail block of each.
                        let (long, tails) = blocks.split_at(n.div_ceil(segment));
                        for (s, block) in long.iter().enumerate() {
                            assert_eq!(block.0, s * segment, "{n} {threads} {width}");
                        }
                        if threads > 1 && tails.len() >= 2 {
                            assert_ne!(tails[0].0 / segment, tails[1].0 / segment);
                        }
                    }
                }
            }
        }
    }
}
