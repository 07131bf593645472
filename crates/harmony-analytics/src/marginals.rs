//! (marginals: in progress)
