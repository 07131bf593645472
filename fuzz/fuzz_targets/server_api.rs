#![no_main]
//! See fuzz/src/server_api.rs.
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    harmony_fuzz::server_api::run(data);
});
