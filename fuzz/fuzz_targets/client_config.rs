#![no_main]
//! See fuzz/src/client_config.rs.
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    harmony_fuzz::client_config::run(data);
});
