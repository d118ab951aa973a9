//! Arbitrary bytes as a ruler run's predictions.jsonl. Seeds: records as `gattn-cpu ruler`
//! writes them, and one cut short as a killed run leaves it.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| gattn_fuzz::check_predictions(data));
