//! (linear: in progress)
