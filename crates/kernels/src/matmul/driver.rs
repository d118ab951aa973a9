//! Splits a (possibly fused) matmul into column blocks and runs them on the current rayon pool.
//!
//! One job is one column block of one weight matrix for all tokens: wide enough that its
//! weights amortize the task (about 256 KiB streamed for a mat-vec, an L2-sized panel for an
//! int8 mat-mat), narrow enough that every thread gets several jobs.

use std::cell::RefCell;

use super::WeightMatrix;
#[cfg(target_arch = "x86_64")]
use super::amx;
use super::columns::{BlockSpec, ColumnBlock, ColumnsStorage, DisjointColumns};
use super::error::MatmulError;
use super::float::bf16dot::{self, Bf16Activations};
use super::int8::{layout::ROWS, quantize::Q8Activations};
use crate::activations::silu_mul_in_place;
use crate::dispatch::KernelTable;
use crate::dispatch::table::ColumnKernel;
use crate::parallel;

pub(crate) enum Epilogue<'w, 'a> {
    None,
    /// `y = silu(x G^T) * y` with G the gate matrix (same shape as the main one).
    SiluGate(&'w WeightMatrix<'a>),
}

/// A column job of one weight format and shape: columns `col0 .. col0 + out.cols()` of
/// `x w^T` for every token into `out`. The table picks one per matrix (`KernelTable`).
///
/// # Safety
/// The CPU has the instructions of the kernel (what a `KernelTable` proves).
pub(crate) type ColumnsFn =
    unsafe fn(w: &WeightMatrix<'_>, input: &Inputs<'_>, col0: usize, out: &mut ColumnBlock<'_>);

/// What a table's bf16 kernels read as activations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bf16Input {
    /// The f32 activations as given (the weights are widened).
    F32,
    /// Rounded to bf16 ([`Bf16Activations`]).
    Rounded,
    /// Rounded and packed for AMX tiles where k allows, else `Rounded`.
    AmxTiles,
}

/// The activations as every format wants them.
pub(crate) struct Inputs<'x> {
    pub x: &'x [f32],
    pub m: usize,
    pub q8: Option<Q8Activations>,
    /// For bf16 weights where the bf16 dot-product kernels run.
    pub bf16: Option<Bf16Activations>,
    /// For bf16 weights in a mat-mat on AMX tiles.
    #[cfg(target_arch = "x86_64")]
    pub amx_bf16: Option<amx::bf16::AmxBf16Activations>,
    /// For int8 weights in a mat-mat on AMX bf16 tiles (`GATTN_AMX_INT8=bf16`).
    #[cfg(target_arch = "x86_64")]
    pub amx_bf16_rows: Option<amx::int8_bf16::AmxBf16Rows>,
}

thread_local! {
    static Q8_SCRATCH: RefCell<Q8Activations> = RefCell::new(Q8Activations::default());
    static BF16_SCRATCH: RefCell<Bf16Activations> = RefCell::new(Bf16Activations::default());
    #[cfg(target_arch = "x86_64")]
    static AMX_BF16_SCRATCH: RefCell<amx::bf16::AmxBf16Activations> =
        RefCell::new(Default::default());
    #[cfg(target_arch = "x86_64")]
    static AMX_BF16_ROWS_SCRATCH: RefCell<amx::int8_bf16::AmxBf16Rows> =
        RefCell::new(Default::default());
    static JOB_BUFFERS: RefCell<JobBuffers> = RefCell::new(JobBuffers::default());
}

/// The job list of a call and the buffers that make it, kept by the calling thread between
/// calls: a decode step's matmuls allocate nothing once they have grown.
#[derive(Default)]
struct JobBuffers {
    jobs: Vec<BlockSpec>,
    /// One matrix's column blocks `(col0, cols)`, and the mat-vec split's tail cursors.
    spans: Vec<(usize, usize)>,
    tails: Vec<(usize, usize)>,
    kernels: Vec<ColumnKernel>,
    lds: Vec<usize>,
    columns: ColumnsStorage,
    /// The gate's outputs `[m, n]` of a fused gate and up, and their column blocks: the
    /// caller's, not the thread's that runs a job (a helper thread that had never run a gate
    /// job allocated its buffer in the middle of a decode step).
    gate_out: Vec<f32>,
    gate_jobs: Vec<BlockSpec>,
    gate_columns: ColumnsStorage,
}

/// A fused gate: its matrix, kernel and output columns.
struct FusedGate<'g, 'a, 'y> {
    matrix: &'g WeightMatrix<'a>,
    kernel: ColumnKernel,
    columns: DisjointColumns<'y>,
}

pub(crate) fn run(
    table: &KernelTable,
    mats: &[(WeightMatrix<'_>, Option<&[f32]>)],
    x: &[f32],
    ys: &mut [&mut [f32]],
    epilogue: Epilogue<'_, '_>,
) -> Result<(), MatmulError> {
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
    // Only `gate_up_silu_at` fuses a gate, after checking it against its one matrix.
    if let Some(g) = gate {
        assert!(mats.len() == 1 && g.n() == mats[0].0.n() && g.k() == k);
    }
    let mut input = prepare_inputs(table, mats, gate, x, m, k);

    let threads = rayon::current_num_threads();
    let mut buffers = JOB_BUFFERS.with_borrow_mut(std::mem::take);
    let JobBuffers {
        jobs,
        spans,
        tails,
        kernels,
        lds,
        columns: storage,
        gate_out,
        gate_jobs,
        gate_columns: gate_storage,
    } = &mut buffers;
    jobs.clear();
    for (matrix, (w, _)) in mats.iter().enumerate() {
        let width = job_width(w, m, threads);
        if m == 1 {
            matvec_blocks_into(w.n(), width, threads, spans, tails);
        } else {
            spans.clear();
            spans.extend(
                (0..w.n())
                    .step_by(width)
                    .map(|col0| (col0, width.min(w.n() - col0))),
            );
        }
        jobs.extend(
            spans
                .iter()
                .map(|&(col0, cols)| BlockSpec { matrix, col0, cols }),
        );
    }
    kernels.clear();
    kernels.extend(mats.iter().map(|(w, _)| table.column_kernel(w, m)));
    lds.clear();
    lds.extend(mats.iter().map(|(w, _)| w.n()));
    let mut gate_y: Option<[&mut [f32]; 1]> = gate.map(|g| {
        let len = m * g.n();
        if gate_out.len() < len {
            gate_out.resize(len, 0.0);
        }
        [&mut gate_out[..len]]
    });
    // The gate's jobs are the main matrix's column blocks, on the gate's outputs.
    let fused_gate = gate.zip(gate_y.as_mut()).map(|(g, y)| {
        gate_jobs.clear();
        gate_jobs.extend_from_slice(jobs);
        let (blocks, storage) = (std::mem::take(gate_jobs), std::mem::take(gate_storage));
        FusedGate {
            matrix: g,
            kernel: table.column_kernel(g, m),
            columns: DisjointColumns::reusing(y, &[g.n()], m, blocks, storage),
        }
    });
    let columns =
        DisjointColumns::reusing(ys, lds, m, std::mem::take(jobs), std::mem::take(storage));
    let input_ref = &input;
    parallel::for_each(columns.blocks().len(), |j| {
        let job = columns.blocks()[j];
        let (w, bias) = &mats[job.matrix];
        let mut out = columns.take(j);
        kernels[job.matrix].run(w, input_ref, job.col0, &mut out);
        if let Some(b) = bias {
            let b = &b[job.col0..][..job.cols];
            for i in 0..m {
                out.row_mut(i).iter_mut().zip(b).for_each(|(y, b)| *y += b);
            }
        }
        if let Some(gate) = &fused_gate {
            let mut gate_out = gate.columns.take(j);
            gate.kernel
                .run(gate.matrix, input_ref, job.col0, &mut gate_out);
            for i in 0..m {
                silu_mul_in_place(table.level(), gate_out.row_mut(i), out.row_mut(i));
            }
        }
    });

    (*jobs, *storage) = columns.into_storage();
    if let Some(gate) = fused_gate {
        (*gate_jobs, *gate_storage) = gate.columns.into_storage();
    }
    JOB_BUFFERS.with_borrow_mut(|slot| *slot = buffers);
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
    #[cfg(target_arch = "x86_64")]
    if let Some(rows) = input.amx_bf16_rows.take() {
        AMX_BF16_ROWS_SCRATCH.with_borrow_mut(|slot| *slot = rows);
    }
    Ok(())
}

/// Converts the activations once into every form the table's kernels for these matrices read.
fn prepare_inputs<'x>(
    table: &KernelTable,
    mats: &[(WeightMatrix<'_>, Option<&[f32]>)],
    gate: Option<&WeightMatrix<'_>>,
    x: &'x [f32],
    m: usize,
    k: usize,
) -> Inputs<'x> {
    let needs = |f: fn(&WeightMatrix<'_>) -> bool| mats.iter().map(|(w, _)| w).chain(gate).any(f);
    let has_int8 = needs(|w| matches!(w, WeightMatrix::Int8(_)));
    let has_bf16 = needs(|w| matches!(w, WeightMatrix::Bf16 { .. }));
    let forms = table.inputs;
    let bf16_form = if m == 1 {
        forms.bf16_matvec
    } else {
        forms.bf16_matmat
    };
    let mut input = Inputs {
        x,
        m,
        q8: None,
        bf16: None,
        #[cfg(target_arch = "x86_64")]
        amx_bf16: None,
        #[cfg(target_arch = "x86_64")]
        amx_bf16_rows: None,
    };
    let mut round_bf16 = has_bf16 && bf16_form == Bf16Input::Rounded;
    if has_bf16 && bf16_form == Bf16Input::AmxTiles {
        // Where the tiles do not fit k, the table's AMX entry runs the dot-product kernel.
        round_bf16 = true;
        #[cfg(target_arch = "x86_64")]
        if amx::bf16::fits(k) {
            let mut packed = AMX_BF16_SCRATCH.with_borrow_mut(std::mem::take);
            amx::bf16::pack_activations_into(x, m, k, &mut packed);
            input.amx_bf16 = Some(packed);
            round_bf16 = false;
        }
    }
    if round_bf16 {
        let mut xb = BF16_SCRATCH.with_borrow_mut(std::mem::take);
        bf16dot::convert_activations_into(x, m, k, &mut xb);
        input.bf16 = Some(xb);
    }
    #[cfg(target_arch = "x86_64")]
    if has_int8 && m > 1 && forms.int8_matmat_as_bf16_rows {
        let mut rows = AMX_BF16_ROWS_SCRATCH.with_borrow_mut(std::mem::take);
        amx::int8_bf16::pack_rows_into(x, m, k, &mut rows);
        input.amx_bf16_rows = Some(rows);
        return input;
    }
    if has_int8 {
        let mut q8 = Q8_SCRATCH.with_borrow_mut(std::mem::take);
        let pad = if m == 1 { 1 } else { forms.int8_matmat_padding };
        super::int8::quantize::quantize_activations_into(table, x, m, k, pad, &mut q8);
        #[cfg(target_arch = "x86_64")]
        if m > 1 && forms.int8_matmat_tile_order {
            amx::int8::order_tiles(&mut q8);
        }
        input.q8 = Some(q8);
    }
    input
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
/// right after it, and the small blocks even out threads that run at different speeds.
/// Written into `blocks` (`tails`: the segments' tail cursors `(next col0, end)`).
fn matvec_blocks_into(
    n: usize,
    width: usize,
    threads: usize,
    blocks: &mut Vec<(usize, usize)>,
    tails: &mut Vec<(usize, usize)>,
) {
    let align = 2 * ROWS;
    let segment = n.div_ceil(threads.max(1)).div_ceil(align) * align;
    let long = (segment * 3 / 4) / align * align;
    blocks.clear();
    tails.clear();
    for start in (0..n).step_by(segment) {
        let end = (start + segment).min(n);
        let tail_start = (start + long).min(end);
        if tail_start > start {
            blocks.push((start, tail_start - start));
        }
        tails.push((tail_start, end));
    }
    // Round robin over the segments' tails.
    loop {
        let before = blocks.len();
        for (next, end) in tails.iter_mut() {
            if *next < *end {
                blocks.push((*next, width.min(*end - *next)));
                *next += width;
            }
        }
        if blocks.len() == before {
            return;
        }
    }
}

#[cfg(test)]
fn matvec_blocks(n: usize, width: usize, threads: usize) -> Vec<(usize, usize)> {
    let (mut blocks, mut tails) = (Vec::new(), Vec::new());
    matvec_blocks_into(n, width, threads, &mut blocks, &mut tails);
    blocks
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
