//! Fuzz target: see `fastwrite::fuzz::zip`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| fastwrite::fuzz::zip(data));
