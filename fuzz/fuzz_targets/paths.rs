//! Fuzz target: see `fastwrite::fuzz::paths`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fastwrite::fuzz::paths(data));
