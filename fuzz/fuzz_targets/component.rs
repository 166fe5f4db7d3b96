//! The `component` target: its body is fuzz/fuzz_targets/bodies/component.rs, which the fuzz smoke
//! in the test build (tests/all/fuzz.rs) runs too.
#![no_main]

#[path = "bodies/component.rs"]
mod body;

libfuzzer_sys::fuzz_target!(|data: &[u8]| body::run(data));
