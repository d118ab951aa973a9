//! Encoding one K or V row (one token of one KV head) into its storage words (format: `kv`).
//!
//! A prefill chunk appends many rows a layer, and encoded one value at a time they cost a visible
//! share of an int8 prefill; here each row is written into its slice by loops the compiler
//! vectorizes at the level's width (the same plain code compiled per ISA, the kernel table's
//! "kv row encode" entry, as `matmul::int8::quantize` does). [`encode_row_reference`] is the
//! definition, value by value; the fast path must match it bit for bit.

use super::kv::KvDtype;
use crate::dispatch::KernelTable;
use crate::simd_math::bf16_bits;

/// One row's encoder (a kernel table entry): `x` into `words`, returning the int8 scale.
///
/// # Safety
/// The CPU has the instructions the kernel was compiled for.
pub(crate) type EncodeRowFn = unsafe fn(dtype: KvDtype, x: &[f32], words: &mut [u32]) -> f32;

/// Writes `x` (`head_dim` values) as `words` (`dtype.row_words(head_dim)` words) with `table`'s
/// encoder; returns the row's int8 scale (0 for the other dtypes).
pub(crate) fn encode_row(table: &KernelTable, dtype: KvDtype, x: &[f32], words: &mut [u32]) -> f32 {
    debug_assert_eq!(words.len(), dtype.row_words(x.len()));
    table.encode_kv_row(dtype, x, words)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma")]
pub(crate) fn encode_row_avx512(dtype: KvDtype, x: &[f32], words: &mut [u32]) -> f32 {
    encode_row_generic(dtype, x, words)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
pub(crate) fn encode_row_avx2(dtype: KvDtype, x: &[f32], words: &mut [u32]) -> f32 {
    encode_row_generic(dtype, x, words)
}

#[inline(always)]
pub(crate) fn encode_row_generic(dtype: KvDtype, x: &[f32], words: &mut [u32]) -> f32 {
    match dtype {
        KvDtype::F32 => {
            for (w, &v) in words.iter_mut().zip(x) {
                *w = v.to_bits();
            }
            0.0
        }
        KvDtype::Bf16 => {
            let pairs = x.chunks_exact(2);
            if let [last] = pairs.remainder() {
                words[x.len() / 2] = bf16_bits(*last);
            }
            for (w, pair) in words.iter_mut().zip(pairs) {
                *w = bf16_bits(pair[0]) | (bf16_bits(pair[1]) << 16);
            }
            0.0
        }
        KvDtype::Int8 => {
            let scale = max_abs(x) / 127.0;
            let inverse = if scale > 0.0 { 1.0 / scale } else { 0.0 };
            // 64 values at a time into bytes, then the bytes into words: two plain loops the
            // compiler vectorizes at the level's width.
            let mut bytes = [128u8; 64];
            for (values, out) in x.chunks(64).zip(words.chunks_mut(16)) {
                for (byte, &v) in bytes.iter_mut().zip(values) {
                    *byte = (quantize_int8(v, inverse) + 128) as u8;
                }
                bytes[values.len()..].fill(128);
                for (w, quad) in out.iter_mut().zip(bytes.chunks_exact(4)) {
                    *w = u32::from_le_bytes([quad[0], quad[1], quad[2], quad[3]]);
                }
            }
            scale
        }
    }
}

/// `max |x|`, in 16 independent lanes so that it vectorizes (max is exact in any order).
#[inline(always)]
fn max_abs(x: &[f32]) -> f32 {
    let mut lanes = [0.0f32; 16];
    let chunks = x.chunks_exact(16);
    let tail = chunks.remainder();
    for chunk in chunks {
        for (m, v) in lanes.iter_mut().zip(chunk) {
            *m = m.max(v.abs());
        }
    }
    tail.iter()
        .chain(&lanes)
        .fold(0.0f32, |m, v| m.max(v.abs()))
}

/// `x / scale` rounded to the nearest integer, ties to even (the rule of the vector conversions
/// and of the matmul activations' `quantize`), clamped to +-127.
///
/// Clamped first, then rounded by adding 1.5 * 2^23 (ties to even by IEEE addition), which
/// leaves the integer in the sum's low mantissa bits: `round_ties_even` compiles to a call of
/// libm's `rintf` on x86-64 without SSE4.1 (2 % of a 512-token prefill), and a float-to-int
/// cast (`as i32`, saturating) stays scalar in a vectorized loop. NaN gives 0.
#[inline(always)]
pub(super) fn quantize_int8(x: f32, inverse_scale: f32) -> i32 {
    const ROUNDER: f32 = 12_582_912.0; // 1.5 * 2^23
    let clamped = (x * inverse_scale).clamp(-127.0, 127.0);
    let rounded = (clamped + ROUNDER).to_bits() as i32 - ROUNDER.to_bits() as i32;
    if clamped.is_nan() { 0 } else { rounded }
}

/// The definition of a stored row, one value at a time (the oracle of [`encode_row`]).
#[cfg(test)]
pub(crate) fn encode_row_reference(dtype: KvDtype, x: &[f32], words: &mut [u32]) -> f32 {
    words.fill(0);
    let per_word = dtype.elems_per_word();
    let scale = match dtype {
        KvDtype::Int8 => x.iter().fold(0.0f32, |m, v| m.max(v.abs())) / 127.0,
        _ => 0.0,
    };
    let inverse = if scale > 0.0 { 1.0 / scale } else { 0.0 };
    for e in 0..words.len() * per_word {
        let field = match (dtype, x.get(e)) {
            (KvDtype::F32, Some(&v)) => v.to_bits(),
            (KvDtype::Bf16, Some(&v)) => half::bf16::from_f32(v).to_bits() as u32,
            (KvDtype::Int8, Some(&v)) => (quantize_int8(v, inverse) + 128) as u32,
            (KvDtype::Int8, None) => 128,
            (_, None) => 0,
        };
        words[e / per_word] |= field << (32 / per_word * (e % per_word));
    }
    scale
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::bf16;
    use proptest::prelude::*;

    fn value() -> impl Strategy<Value = f32> {
        prop_oneof![
            8 => -100.0f32..100.0,
            1 => any::<f32>(),
            1 => Just(0.0f32),
        ]
    }

    proptest! {
        #[test]
        fn fast_encoding_matches_the_reference_bit_for_bit(
            x in proptest::collection::vec(value(), 1..300),
        ) {
            for dtype in [KvDtype::F32, KvDtype::Bf16, KvDtype::Int8] {
                let words_len = dtype.row_words(x.len());
                let mut expected = vec![0u32; words_len];
                let expected_scale = encode_row_reference(dtype, &x, &mut expected);
                for table in KernelTable::all_supported() {
                    let mut got = vec![u32::MAX; words_len];
                    let scale = encode_row(table, dtype, &x, &mut got);
                    let name = table.name();
                    prop_assert_eq!(scale.to_bits(), expected_scale.to_bits(), "{} {}", dtype, name);
                    prop_assert_eq!(&got, &expected, "{} {}", dtype, name);
                }
            }
        }
    }

    proptest! {
        /// The add-and-subtract rounding is `round_ties_even` then the clamp, for any input.
        #[test]
        fn quantize_int8_is_round_ties_even_clamped(
            x in prop_oneof![
                4 => -200.0f32..200.0,
                2 => (-300i32..300).prop_map(|h| h as f32 / 2.0), // every tie
                1 => any::<f32>(),
            ],
            inverse in prop_oneof![Just(1.0f32), 0.001f32..1000.0, Just(0.0)],
        ) {
            let expected = (x * inverse).round_ties_even().clamp(-127.0, 127.0) as i32;
            prop_assert_eq!(quantize_int8(x, inverse), expected, "{} * {}", x, inverse);
        }
    }

    #[test]
    fn int8_rows_round_ties_to_even_as_the_activations_do() {
        // max |x| = 127: the scale is 1, and each x.5 is an exact tie.
        let x = [127.0, 2.5, -2.5, 3.5, -3.5, 0.5, -0.5, 126.5];
        let mut words = vec![0u32; KvDtype::Int8.row_words(x.len())];
        let scale = encode_row_reference(KvDtype::Int8, &x, &mut words);
        assert_eq!(scale, 1.0);
        let stored: Vec<i32> = words
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .take(x.len())
            .map(|b| b as i32 - 128)
            .collect();
        assert_eq!(stored, [127, 2, -2, 4, -4, 0, 0, 126]);
        let activations = crate::matmul::quantize_activations(&x, 1, x.len());
        let rounded: Vec<i32> = (0..x.len())
            .map(|c| activations.get(0, c).0 as i32)
            .collect();
        assert_eq!(
            rounded, stored,
            "one rounding rule for the cache and the activations"
        );
    }

    #[test]
    fn bf16_rounding_edge_cases_match_half() {
        let cases = [
            f32::MAX,
            -f32::MAX,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            -f32::NAN,
            f32::from_bits(0x7f80_0001),
            f32::from_bits(0x3f80_8000), // a tie, even below: stays
            f32::from_bits(0x3f81_8000), // a tie, odd below: rounds up
            f32::from_bits(0x3f80_8001),
            f32::MIN_POSITIVE / 3.0,
            -0.0,
        ];
        for v in cases {
            assert_eq!(
                bf16_bits(v),
                bf16::from_f32(v).to_bits() as u32,
                "{v:e} ({:#x})",
                v.to_bits()
            );
        }
    }
}
