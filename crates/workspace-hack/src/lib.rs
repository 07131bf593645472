//! No code: see Cargo.toml (the features DataFusion turns on, turned on for every build).
