//! (heavy: in progress)
