//! Fuzz target: see `fastwrite::fuzz::detect`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fastwrite::fuzz::detect(data));
