//! The bodies of Harmony's coverage-guided fuzz targets (docs/FUZZ.md), one module per target;
//! `fuzz_targets/*.rs` only hand libFuzzer's bytes to `run`. Each module uses nothing but the
//! workspace crates, so a workspace test can compile it with `#[path]` and replay the committed
//! seeds and regressions in the fast tier.
#![forbid(unsafe_code)]

pub mod client_config;
pub mod schema_csv;
pub mod server_api;
pub mod wire_reports;
