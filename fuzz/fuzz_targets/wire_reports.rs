#![no_main]
//! See fuzz/src/wire_reports.rs.
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    harmony_fuzz::wire_reports::run(data);
});
