//! Fuzz target: see `fastwrite::fuzz::tar`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fastwrite::fuzz::tar(data));
