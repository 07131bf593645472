#![no_main]
//! See fuzz/src/schema_csv.rs.
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    harmony_fuzz::schema_csv::run(data);
});
