//! What `tdpbf16ps` computes, bit for bit: a measurement (`cargo test --release -p gattn-kernels
//! --lib bf16_order -- --ignored --nocapture` on an AMX host), kept because the answer decides
//! whether the vector prefill attention could reproduce the AMX one (see docs/performance.md).
//!
//! Candidates: the products of a tile product (exact: bf16 x bf16 fits in f32) are added to the
//! f32 accumulator one at a time, a pair at a time, or all 32 at once, each group summed exactly
//! and added with one rounding, to nearest even or toward zero; bf16 denormal inputs read as
//! zero. Values have exponents in a narrow range, so every exact group sum fits in an f64.

use super::tiles::Tiles;
use crate::dispatch::cpu_features;
use rand::{Rng, SeedableRng};

const T: usize = 16;

fn bf16_value(bits: u16) -> f32 {
    let x = f32::from_bits((bits as u32) << 16);
    if x.is_subnormal() {
        0.0f32.copysign(x)
    } else {
        x
    }
}

fn toward_zero(x: f64) -> f32 {
    let r = x as f32;
    if (r as f64).abs() > x.abs() {
        f32::from_bits(r.to_bits() - 1)
    } else {
        r
    }
}

/// `c += a b` on one tile product with groups of `group` products (1, 2 or 32).
fn emulate(c: &mut [f32], a: &[u16], b: &[u16], group: usize, truncate: bool) {
    for m in 0..T {
        for n in 0..T {
            let products: Vec<f64> = (0..2 * T)
                .map(|e| {
                    let x = bf16_value(a[m * 2 * T + e]);
                    let y = bf16_value(b[(e / 2) * 2 * T + 2 * n + e % 2]);
                    x as f64 * y as f64
                })
                .collect();
            let mut acc = c[m * T + n];
            for g in products.chunks(group) {
                let exact = acc as f64 + g.iter().sum::<f64>();
                acc = if truncate {
                    toward_zero(exact)
                } else {
                    exact as f32
                };
            }
            c[m * T + n] = acc;
        }
    }
}

fn random_bf16(rng: &mut impl Rng) -> u16 {
    let sign = (rng.random::<bool>() as u16) << 15;
    sign | (rng.random_range(120..130u16) << 7) | rng.random_range(0..128u16)
}

#[test]
#[ignore = "a measurement: prints how many sums each emulation gets wrong"]
fn tdpbf16ps_against_emulations() {
    if !cpu_features().amx {
        return;
    }
    let mut rng = rand::rngs::StdRng::seed_from_u64(5);
    let candidates = [
        (1, false),
        (2, false),
        (32, false),
        (1, true),
        (2, true),
        (32, true),
    ];
    let mut mismatches = [0usize; 6];
    let trials = 100;
    for _ in 0..trials {
        let mut c: Vec<f32> = (0..T * T)
            .map(|_| bf16_value(random_bf16(&mut rng)) * 3.0)
            .collect();
        let mut emulated = vec![c.clone(); candidates.len()];
        // SAFETY: AMX is usable (checked above).
        let tiles = unsafe { Tiles::configure() };
        // SAFETY: c holds 16 rows of 64 bytes.
        unsafe { tiles.load::<0>(c.as_ptr().cast(), 64) };
        for _tile_product in 0..3 {
            let a: Vec<u16> = (0..T * 2 * T).map(|_| random_bf16(&mut rng)).collect();
            let b: Vec<u16> = (0..T * 2 * T).map(|_| random_bf16(&mut rng)).collect();
            // SAFETY: a and b hold 16 rows of 64 bytes.
            unsafe {
                tiles.load::<1>(a.as_ptr().cast(), 64);
                tiles.load::<2>(b.as_ptr().cast(), 64);
            }
            tiles.dot_bf16::<0, 1, 2>();
            for (e, &(group, truncate)) in emulated.iter_mut().zip(&candidates) {
                emulate(e, &a, &b, group, truncate);
            }
        }
        // SAFETY: c holds 16 rows of 64 bytes.
        unsafe { tiles.store::<0>(c.as_mut_ptr().cast(), 64) };
        drop(tiles);
        for (count, e) in mismatches.iter_mut().zip(&emulated) {
            *count += c
                .iter()
                .zip(e)
                .filter(|(x, y)| x.to_bits() != y.to_bits())
                .count();
        }
        // The layout is right: the hardware is close to the exactly rounded sum.
        for (x, y) in c.iter().zip(&emulated[2]) {
            assert!((x - y).abs() <= 1e-4 * (1.0 + y.abs()), "{x} vs {y}");
        }
    }
    eprintln!(
        "tdpbf16ps: sums differing from each emulation (of {}), for (group, toward zero) {:?}: {:?}",
        trials * T * T,
        candidates,
        mismatches
    );
}
