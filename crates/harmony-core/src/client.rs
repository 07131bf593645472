//! The client-side entry point: randomize with a cryptographically secure RNG by default.
//!
//! A [`SecureRandomizer`] owns a ChaCha20 generator seeded from the operating system
//! ([`crate::sampling::secure_rng`]); it cannot be seeded by the caller, so a device's reports
//! never come from a predictable stream. Simulations and tests call the mechanisms' own
//! `randomize(.., rng)` with a seeded [`crate::sampling::fast_rng`] instead.
//!
//! # Example
//! ```
//! use harmony_core::client::SecureRandomizer;
//! use harmony_core::frequency::Grr;
//! use harmony_core::numeric::Piecewise;
//!
//! let mut device = SecureRandomizer::new();
//! let pm = Piecewise::new(1.0).unwrap();
//! let report = device.numeric(&pm, 0.25).unwrap(); // a fixed-point report, never the value
//! let grr = Grr::new(1.0, 10).unwrap();
//! let category = device.category(&grr, 3).unwrap();
//! assert!(device.category(&grr, 10).is_err()); // 10 is outside [0, 10)
//! # let _ = (report, category);
//! ```

use crate::error::Result;
use crate::frequency::FrequencyOracle;
use crate::numeric::{NumericMechanism, NumericReport, VectorMechanism};
use crate::schema::Value;
use crate::strategy::{RecordMechanism, RecordReport};
use rand::rngs::ChaCha20Rng;

/// Randomizes a device's values with an OS-seeded ChaCha20 (see the module docs).
pub struct SecureRandomizer {
    rng: ChaCha20Rng,
}

impl std::fmt::Debug for SecureRandomizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the generator's state.
        f.write_str("SecureRandomizer { .. }")
    }
}

impl Default for SecureRandomizer {
    fn default() -> Self {
        Self::new()
    }
}

impl SecureRandomizer {
    /// A randomizer seeded from the OS entropy source.
    pub fn new() -> Self {
        SecureRandomizer { rng: crate::sampling::secure_rng() }
    }
    /// Randomizes a value in [-1, 1] with a 1-D numeric mechanism.
    pub fn numeric<M: NumericMechanism>(&mut self, mechanism: &M, t: f64) -> Result<NumericReport> {
        mechanism.randomize(t, &mut self.rng)
    }
    /// Randomizes a vector in [-1, 1]^d.
    pub fn vector<M: VectorMechanism>(&mut self, mechanism: &M, t: &[f64]) -> Result<M::Report> {
        mechanism.randomize(t, &mut self.rng)
    }
    /// Randomizes a category index with a frequency oracle.
    pub fn category<O: FrequencyOracle>(&mut self, oracle: &O, v: usize) -> Result<O::Report> {
        oracle.randomize(v, &mut self.rng)
    }
    /// Randomizes a whole record under a multi-attribute strategy.
    pub fn record(&mut self, mechanism: &RecordMechanism, record: &[Value]) -> Result<RecordReport> {
        mechanism.randomize(record, &mut self.rng)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frequency::Olh;

    #[test]
    fn two_devices_draw_different_streams() {
        // Seeded from the OS: two devices agree on all of 64 OLH seeds with probability 2^-4096.
        let olh = Olh::new(1.0, 100).unwrap();
        let (mut a, mut b) = (SecureRandomizer::new(), SecureRandomizer::new());
        let ra: Vec<_> = (0..64).map(|_| a.category(&olh, 5).unwrap()).collect();
        let rb: Vec<_> = (0..64).map(|_| b.category(&olh, 5).unwrap()).collect();
        assert_ne!(ra, rb);
        assert_eq!(format!("{a:?}"), "SecureRandomizer { .. }");
    }
}
