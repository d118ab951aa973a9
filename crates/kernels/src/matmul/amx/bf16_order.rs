//! What `tdpbf16ps` computes, bit for bit (a measurement, run where AMX is present): the
//! candidate emulations below are compared with the hardware on random tiles with wide exponents,
//! accumulated over several tile products.

use super::tiles::Tiles;
use crate::dispatch::cpu_features;
use rand::{Rng, SeedableRng};

const T: usize = 16;

fn bf16_value(bits: u16) -> f32 {
    f32::from_bits((bits as u32) << 16)
}

fn daz(x: f32) -> f32 {
    if x.is_subnormal() {
        0.0f32.copysign(x)
    } else {
        x
    }
}

/// The candidate orders for one output element.
#[derive(Debug, Clone, Copy)]
enum Order {
    /// `acc = fma(a[2k], b[2k], acc)`, then `acc = fma(a[2k+1], b[2k+1], acc)`, for k in order.
    SequentialFma,
    /// `acc = acc + (a[2k] b[2k] + a[2k+1] b[2k+1])` (the pair summed first).
    PairFirst,
    /// The pair added to `acc` with one rounding (exact in f64 for narrow exponents).
    PairOneRounding,
    /// The 32 products of one tile product summed exactly, then added with one rounding.
    TileOneRounding,
    /// As `PairOneRounding`, rounding toward zero.
    PairTruncated,
}

fn truncate(x: f64) -> f32 {
    let r = x as f32;
    if (r as f64).abs() > x.abs() {
        f32::from_bits(r.to_bits() - 1)
    } else {
        r
    }
}

fn emulate(order: Order, c: &mut [f32], a: &[u16], b: &[u16], ftz_each: bool) {
    for m in 0..T {
        for n in 0..T {
            let mut acc = c[m * T + n];
            if let Order::TileOneRounding = order {
                let mut exact = acc as f64;
                for k in 0..T {
                    for h in 0..2 {
                        let x = daz(bf16_value(a[m * 2 * T + 2 * k + h]));
                        let y = daz(bf16_value(b[k * 2 * T + 2 * n + h]));
                        exact += x as f64 * y as f64;
                    }
                }
                c[m * T + n] = daz(exact as f32);
                continue;
            }
            for k in 0..T {
                let (a0, a1) = (
                    daz(bf16_value(a[m * 2 * T + 2 * k])),
                    daz(bf16_value(a[m * 2 * T + 2 * k + 1])),
                );
                let (b0, b1) = (
                    daz(bf16_value(b[k * 2 * T + 2 * n])),
                    daz(bf16_value(b[k * 2 * T + 2 * n + 1])),
                );
                match order {
                    Order::SequentialFma => {
                        acc = a0.mul_add(b0, acc);
                        if ftz_each {
                            acc = daz(acc);
                        }
                        acc = a1.mul_add(b1, acc);
                    }
                    Order::PairFirst => acc += a0.mul_add(b0, a1 * b1),
                    Order::PairOneRounding => {
                        acc = (acc as f64 + a0 as f64 * b0 as f64 + a1 as f64 * b1 as f64) as f32
                    }
                    Order::PairTruncated => {
                        acc = truncate(acc as f64 + a0 as f64 * b0 as f64 + a1 as f64 * b1 as f64)
                    }
                    Order::TileOneRounding => {}
                }
                if ftz_each {
                    acc = daz(acc);
                }
            }
            c[m * T + n] = daz(acc);
        }
    }
}

fn random_bf16(rng: &mut impl Rng, wide: bool) -> u16 {
    let sign = (rng.random::<bool>() as u16) << 15;
    let exponent: u16 = if wide {
        rng.random_range(100..150)
    } else {
        rng.random_range(120..130)
    };
    let exponent = if rng.random_range(0..50) == 0 {
        0
    } else {
        exponent
    }; // some denormals
    sign | (exponent << 7) | rng.random_range(0..128u16)
}

#[test]
fn tdpbf16ps_matches_an_emulation() {
    if !cpu_features().amx {
        return;
    }
    let mut rng = rand::rngs::StdRng::seed_from_u64(5);
    let orders = [
        (Order::SequentialFma, false),
        (Order::SequentialFma, true),
        (Order::PairFirst, false),
        (Order::PairOneRounding, false),
        (Order::TileOneRounding, false),
        (Order::PairTruncated, false),
    ];
    let mut mismatches = [[0usize; 6]; 2];
    for trial in 0..200 {
        let wide = trial % 2 == 0;
        let mut c: Vec<f32> = (0..T * T)
            .map(|_| bf16_value(random_bf16(&mut rng, wide)) * 3.0)
            .collect();
        let mut emulated = vec![c.clone(); orders.len()];
        // SAFETY: AMX is usable (checked above).
        let tiles = unsafe { Tiles::configure() };
        // SAFETY: c holds 16 rows of 64 bytes.
        unsafe { tiles.load::<0>(c.as_ptr().cast(), 64) };
        for _load in 0..3 {
            let a: Vec<u16> = (0..T * 2 * T)
                .map(|_| random_bf16(&mut rng, wide))
                .collect();
            let b: Vec<u16> = (0..T * 2 * T)
                .map(|_| random_bf16(&mut rng, wide))
                .collect();
            // SAFETY: a and b hold 16 rows of 64 bytes.
            unsafe {
                tiles.load::<1>(a.as_ptr().cast(), 64);
                tiles.load::<2>(b.as_ptr().cast(), 64);
            }
            tiles.dot_bf16::<0, 1, 2>();
            for (e, &(order, ftz)) in emulated.iter_mut().zip(&orders) {
                emulate(order, e, &a, &b, ftz);
            }
        }
        // SAFETY: c holds 16 rows of 64 bytes.
        unsafe { tiles.store::<0>(c.as_mut_ptr().cast(), 64) };
        drop(tiles);
        if trial < 2 {
            let rel = c
                .iter()
                .zip(&emulated[4])
                .map(|(x, y)| ((x - y) / y.abs().max(1e-30)).abs())
                .fold(0.0f32, f32::max);
            eprintln!(
                "trial {trial}: max relative difference to one rounding per tile {rel:e}; c[0..4] {:?} vs {:?}",
                &c[..4],
                &emulated[4][..4]
            );
        }
        for (count, e) in mismatches[wide as usize].iter_mut().zip(&emulated) {
            *count += c
                .iter()
                .zip(e)
                .filter(|(x, y)| x.to_bits() != y.to_bits())
                .count();
        }
    }
    eprintln!(
        "mismatching elements of 100 x 256 (wide, narrow): {:?} for {:?}",
        mismatches, orders
    );
    assert!(
        mismatches[0].contains(&0),
        "no emulation matches: {mismatches:?}"
    );
}
