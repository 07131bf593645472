//! Empty: syn is a build dependency only so that its `fold` feature reaches the proc macros.
fn main() {}
