//! Argument validation shared by the public entry points, so the kernels below can index freely.

use super::{AttentionCall, AttentionError};
use crate::SimdLevel;
use crate::reference::{AttentionShape, GateScores};

pub(crate) fn check_call(
    level: SimdLevel,
    call: &AttentionCall<'_>,
    out: &[f32],
) -> Result<(), AttentionError> {
    let AttentionCall {
        shape,
        queries: q,
        q_start,
        n,
        kv,
        gate,
    } = *call;
    if !level.is_supported() {
        return Err(AttentionError::UnsupportedLevel(level));
    }
    let AttentionShape {
        num_heads,
        num_kv_heads,
        head_dim,
    } = shape;
    if num_kv_heads == 0 || head_dim == 0 || num_heads % num_kv_heads != 0 || num_heads == 0 {
        return Err(AttentionError::BadShape(shape));
    }
    if kv.num_kv_heads() != num_kv_heads || kv.head_dim() != head_dim {
        return Err(AttentionError::KvShapeMismatch {
            shape,
            kv_heads: kv.num_kv_heads(),
            kv_head_dim: kv.head_dim(),
        });
    }
    let row = num_heads * head_dim;
    check_len("q", q.len(), n * row)?;
    check_len("out", out.len(), n * row)?;
    match gate {
        GateScores::None => {}
        GateScores::Headwise(g) => check_len("headwise gate", g.len(), n * num_heads)?,
        GateScores::Elementwise(g) => check_len("elementwise gate", g.len(), n * row)?,
    }
    if q_start + n > kv.len() {
        return Err(AttentionError::QueriesPastKeys {
            q_end: q_start + n,
            kv_len: kv.len(),
        });
    }
    Ok(())
}

fn check_len(what: &'static str, got: usize, expected: usize) -> Result<(), AttentionError> {
    if got == expected {
        Ok(())
    } else {
        Err(AttentionError::BadLength {
            what,
            got,
            expected,
        })
    }
}
