//! Checks shared by the kernel tests (included with `#[path]`; its own tests are in
//! `checks_self_test.rs`): a tolerance measure that fails on NaN, and the SIMD levels a test runs.
//!
//! A test that iterates over SIMD levels or kernel tables runs only what this CPU has. What it
//! skips it says on stderr (`cargo test -- --nocapture` shows it), and the environment variable
//! `GATTN_REQUIRE_SIMD` (a comma list of `avx2`, `avx512`, `vnni`, `bf16`, `amx`) turns the skip
//! of a listed feature into a failure: set it where the machine is known to have them, e.g.
//! `GATTN_REQUIRE_SIMD=avx512,amx cargo test -p gattn-kernels`.
#![allow(dead_code)]

use gattn_kernels::dispatch::cpu_features;
use gattn_kernels::{KernelTable, SimdLevel};
use std::collections::HashSet;
use std::sync::{Mutex, OnceLock};

/// The largest `|a - b|`. Panics if any value on either side is not finite: `f32::max` drops
/// NaN, so a fold over it would let an output of NaN pass every tolerance.
pub fn max_abs_diff(got: &[f32], want: &[f32]) -> f32 {
    assert_eq!(got.len(), want.len(), "lengths differ");
    let mut max = 0.0f32;
    for (i, (&a, &b)) in got.iter().zip(want).enumerate() {
        assert!(
            a.is_finite() && b.is_finite(),
            "element {i} is not finite: got {a}, want {b}"
        );
        max = max.max((a - b).abs());
    }
    max
}

pub const REQUIRE_VAR: &str = "GATTN_REQUIRE_SIMD";

/// A CPU feature that selects kernels which a test would otherwise skip.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feature {
    Avx2,
    Avx512,
    Vnni,
    Bf16,
    Amx,
}

impl Feature {
    pub const ALL: [Feature; 5] = [
        Feature::Avx2,
        Feature::Avx512,
        Feature::Vnni,
        Feature::Bf16,
        Feature::Amx,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Feature::Avx2 => "avx2",
            Feature::Avx512 => "avx512",
            Feature::Vnni => "vnni",
            Feature::Bf16 => "bf16",
            Feature::Amx => "amx",
        }
    }

    /// Does this process run the kernels of this feature?
    pub fn present(self) -> bool {
        let avx512 = SimdLevel::Avx512.is_supported();
        match self {
            Feature::Avx2 => SimdLevel::Avx2.is_supported(),
            Feature::Avx512 => avx512,
            Feature::Vnni => avx512 && cpu_features().avx512_vnni,
            Feature::Bf16 => avx512 && cpu_features().avx512_bf16,
            Feature::Amx => KernelTable::get(SimdLevel::Avx512, true).is_some(),
        }
    }
}

/// The features a `GATTN_REQUIRE_SIMD` value lists; an unknown name is an error (a typo must not
/// quietly turn the requirement off).
pub fn parse_required(value: &str) -> Result<Vec<Feature>, String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|name| {
            Feature::ALL
                .into_iter()
                .find(|f| f.name().eq_ignore_ascii_case(name))
                .ok_or_else(|| {
                    format!(
                        "{REQUIRE_VAR}: unknown feature {name:?} (expected a comma list of avx2, avx512, vnni, bf16, amx)"
                    )
                })
        })
        .collect()
}

/// What a test does about `feature`: `Ok(None)` runs it, `Ok(Some(message))` skips it (and
/// prints why), `Err` fails the test because the feature is required but missing.
pub fn decide(
    test: &str,
    feature: Feature,
    present: bool,
    required: &[Feature],
) -> Result<Option<String>, String> {
    if present {
        return Ok(None);
    }
    let message = format!(
        "{test}: skipped {}: this CPU (or OS) does not provide it",
        feature.name()
    );
    if required.contains(&feature) {
        Err(format!("{message}, but {REQUIRE_VAR} requires it"))
    } else {
        Ok(Some(message))
    }
}

fn required_from_env() -> Vec<Feature> {
    let value = std::env::var(REQUIRE_VAR).unwrap_or_default();
    parse_required(&value).unwrap_or_else(|e| panic!("{e}"))
}

/// `true` if `test` can run the kernels of `feature`. Otherwise prints the skip (once per test
/// and feature) and returns `false`, or panics when `GATTN_REQUIRE_SIMD` lists the feature.
pub fn feature_or_skip(test: &str, feature: Feature) -> bool {
    match decide(test, feature, feature.present(), &required_from_env()) {
        Ok(None) => true,
        Ok(Some(message)) => {
            static PRINTED: OnceLock<Mutex<HashSet<String>>> = OnceLock::new();
            let printed = PRINTED.get_or_init(Default::default);
            if printed.lock().unwrap().insert(message.clone()) {
                eprintln!("{message}");
            }
            false
        }
        Err(message) => panic!("{message}"),
    }
}

/// The running test's name: libtest names each test's thread after it.
pub fn current_test() -> String {
    std::thread::current()
        .name()
        .filter(|name| *name != "main")
        .map(str::to_string)
        .unwrap_or_else(|| std::env::args().next().unwrap_or_default())
}

/// Every SIMD level the running test can use on this CPU, after reporting (or failing on) the x86
/// levels it cannot.
pub fn levels_under_test() -> Vec<SimdLevel> {
    for feature in [Feature::Avx2, Feature::Avx512] {
        feature_or_skip(&current_test(), feature);
    }
    SimdLevel::all_supported()
}

/// Every kernel table the running test can use on this CPU, after reporting (or failing on) the
/// levels and AVX-512 extensions (VNNI, BF16, AMX) whose kernels it cannot.
pub fn tables_under_test() -> &'static [KernelTable] {
    for feature in Feature::ALL {
        feature_or_skip(&current_test(), feature);
    }
    KernelTable::all_supported()
}
