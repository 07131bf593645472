use super::*;
use harmony_core::sampling::fast_rng;

#[test]
fn placeholder() {}
