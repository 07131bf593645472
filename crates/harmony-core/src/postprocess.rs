//! Opt-in post-processing of frequency estimates (placeholder, filled by the frequency work).
