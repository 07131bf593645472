#![no_main]
//! Not a fuzz target: bench/fuzz/run.sh runs it on one input and expects it to crash with
//! "attempt to add with overflow", proving the targets were built with overflow checks on.
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let x = std::hint::black_box(u8::MAX);
    let y = std::hint::black_box(data.len() as u8 | 1);
    std::hint::black_box(x + y);
});
