//! The shared checks of the kernel tests fail where they must: NaN or infinity in an output, a
//! required SIMD feature that is missing, a misspelt `GATTN_REQUIRE_SIMD`.

#[path = "checks/mod.rs"]
mod checks;

use checks::{Feature, decide, max_abs_diff, parse_required};

#[test]
fn max_abs_diff_measures_finite_outputs() {
    assert_eq!(max_abs_diff(&[1.0, -2.0, 3.0], &[1.5, -2.0, 1.0]), 2.0);
    assert_eq!(max_abs_diff(&[], &[]), 0.0);
}

#[test]
#[should_panic(expected = "element 1 is not finite")]
fn max_abs_diff_fails_on_nan_output() {
    max_abs_diff(&[0.0, f32::NAN, 0.0], &[0.0, 0.0, 100.0]);
}

#[test]
#[should_panic(expected = "element 0 is not finite")]
fn max_abs_diff_fails_on_infinite_expectation() {
    max_abs_diff(&[0.0], &[f32::INFINITY]);
}

#[test]
fn required_features_parse_as_a_comma_list() {
    assert_eq!(parse_required("").unwrap(), vec![]);
    assert_eq!(
        parse_required("avx512, AMX,vnni").unwrap(),
        vec![Feature::Avx512, Feature::Amx, Feature::Vnni]
    );
    let err = parse_required("avx512,amx2").unwrap_err();
    assert!(
        err.contains("GATTN_REQUIRE_SIMD") && err.contains("amx2"),
        "{err}"
    );
}

#[test]
fn a_missing_feature_is_skipped_aloud_unless_required() {
    assert_eq!(decide("t", Feature::Amx, true, &[Feature::Amx]), Ok(None));
    let skip = decide("my_test", Feature::Amx, false, &[Feature::Avx512])
        .unwrap()
        .expect("a skip message");
    assert!(skip.contains("my_test") && skip.contains("amx"), "{skip}");
    let fail = decide(
        "my_test",
        Feature::Vnni,
        false,
        &[Feature::Avx512, Feature::Vnni],
    )
    .unwrap_err();
    assert!(
        fail.contains("my_test") && fail.contains("vnni") && fail.contains("GATTN_REQUIRE_SIMD"),
        "{fail}"
    );
}
