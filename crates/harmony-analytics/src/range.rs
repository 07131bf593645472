//! (range: in progress)
