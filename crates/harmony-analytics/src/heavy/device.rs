//! The device side of heavy hitters: a device holding a set of item codes pads it to L slots,
//! samples one ([`SetSampler`]), draws its level and reports that prefix of the sampled code by
//! OLH ([`PrefixProtocol`]). One item per device is the case L = 1 with a one-item set.
//!
//! # Privacy
//! The level is drawn from the device's RNG independently of its data; the sampled slot depends
//! on the set, and the OLH report of any code is ε-LDP, so the report — a mixture over the
//! sampled code of ε-LDP distributions — is ε-LDP for the whole set.
//!
//! # Utility
//! See [`super::pem`] (the level estimates, with the realized level counts) and [`super::sets`]
//! (L·f̂ estimates the fraction of devices holding an item, with standard error L·se(f̂)).
//!
//! # Example
//! ```
//! use harmony_analytics::heavy::{ItemsRandomizer, PrefixProtocol};
//! use harmony_core::randomizer::Randomizer;
//! let device = ItemsRandomizer::new(PrefixProtocol::pem(2.0, 16, 5)?, 3)?;
//! let mut rng = harmony_core::sampling::fast_rng(7);
//! let report = device.randomize(&[17, 4_000], &mut rng)?;
//! device.validate(&report)?;
//! assert!(device.randomize(&[4_000, 17], &mut rng).is_err()); // not increasing
//! # Ok::<(), harmony_core::Error>(())
//! ```

use super::pem::{HeavyHitterReport, PrefixProtocol};
use super::sets::SetSampler;
use super::tree::PrefixTree;
use harmony_core::randomizer::Randomizer;
use harmony_core::{Error, Result};
use rand::Rng;

/// A heavy-hitters protocol as a device sees it: the prefix tree, and how one code becomes a
/// report (its level drawn from the device's RNG, the prefix reported to that level's oracle).
pub trait LevelProtocol: Send + Sync {
    /// What a device sends.
    type Report;
    /// The public prefix tree.
    fn tree(&self) -> &PrefixTree;
    /// Randomizes one code (< 2^B; not checked here).
    fn randomize_code(&self, code: u64, rng: &mut dyn Rng) -> Self::Report;
    /// Checks a report against the public constants; the error names the field.
    fn check_report(&self, report: &Self::Report) -> Result<()>;
}

impl LevelProtocol for PrefixProtocol {
    type Report = HeavyHitterReport;
    fn tree(&self) -> &PrefixTree {
        PrefixProtocol::tree(self)
    }
    fn randomize_code(&self, code: u64, rng: &mut dyn Rng) -> HeavyHitterReport {
        self.randomize_unchecked(code, rng)
    }
    fn check_report(&self, report: &HeavyHitterReport) -> Result<()> {
        self.validate_report(report)
    }
}

/// A device's heavy-hitter randomizer: its input is its set of item codes (distinct, in
/// increasing order, each below the padding code 2^B − 1).
#[derive(Debug, Clone, PartialEq)]
pub struct ItemsRandomizer<P = PrefixProtocol> {
    protocol: P,
    sampler: SetSampler,
}

impl<P: LevelProtocol> ItemsRandomizer<P> {
    /// Sets padded to `pad_length` ≥ 1 slots with the protocol's padding code.
    pub fn new(protocol: P, pad_length: usize) -> Result<Self> {
        let sampler = SetSampler::new(pad_length, super::all_ones(protocol.tree().bits()))?;
        Ok(ItemsRandomizer { protocol, sampler })
    }
    /// The prefix protocol.
    pub fn protocol(&self) -> &P {
        &self.protocol
    }
    /// The padding length L (estimates of the fraction of devices are L times the fraction of
    /// reports).
    pub fn pad_length(&self) -> usize {
        self.sampler.length()
    }
}

impl<P: LevelProtocol> Randomizer for ItemsRandomizer<P> {
    type Input = [u64];
    type Report = P::Report;

    /// Errors: a code at or above the padding code 2^B − 1, codes not strictly increasing.
    fn randomize(&self, codes: &[u64], rng: &mut dyn Rng) -> Result<P::Report> {
        let bits = self.protocol.tree().bits();
        let padding = super::all_ones(bits);
        if let Some(i) = codes.iter().position(|&c| c >= padding) {
            return Err(Error::input(
                format!("item {i}"),
                codes[i],
                format!("a {bits}-bit code below the padding code {padding}"),
            ));
        }
        if let Some(i) = codes.windows(2).position(|w| w[0] >= w[1]) {
            return Err(Error::input(
                format!("item {}", i + 1),
                codes[i + 1],
                format!("a code above the previous one ({}): a set in increasing order", codes[i]),
            ));
        }
        let code = self.sampler.sample(codes, rng);
        Ok(self.protocol.randomize_code(code, rng))
    }

    fn validate(&self, report: &P::Report) -> Result<()> {
        self.protocol.check_report(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use harmony_core::frequency::olh::OlhReport;
    use harmony_core::sampling::fast_rng;

    /// Each device draws its level uniformly: level counts of 60,000 devices over 4 levels are
    /// within z = 4.42 binomial standard deviations of n/4 (false failure < 1e-5 per level).
    #[test]
    fn devices_draw_their_level_uniformly() {
        let device = ItemsRandomizer::new(PrefixProtocol::pem(1.0, 32, 5).unwrap(), 1).unwrap();
        assert_eq!(device.protocol().levels().len(), 4);
        let mut rng = fast_rng(5);
        let mut counts = [0u64; 4];
        let n = 60_000;
        for i in 0..n {
            counts[device.randomize(&[i as u64], &mut rng).unwrap().level as usize] += 1;
        }
        let sd = (n as f64 * 0.25 * 0.75).sqrt();
        for c in counts {
            assert!((c as f64 - n as f64 / 4.0).abs() < 4.42 * sd, "{counts:?}");
        }
    }

    #[test]
    fn bad_inputs_and_reports_name_the_field() {
        let device = ItemsRandomizer::new(PrefixProtocol::pem(1.0, 8, 3).unwrap(), 2).unwrap();
        let mut rng = fast_rng(1);
        let e = device.randomize(&[3, 255], &mut rng).unwrap_err().to_string();
        assert!(e.contains("item 1") && e.contains("255") && e.contains("padding"), "{e}");
        let e = device.randomize(&[3, 3], &mut rng).unwrap_err().to_string();
        assert!(e.contains("increasing"), "{e}");
        assert!(device.randomize(&[], &mut rng).is_ok(), "an empty set reports the padding item");
        let g = device.protocol().olh().g();
        let e = device.validate(&HeavyHitterReport { level: 1, olh: OlhReport { seed: 0, y: 0 } }).unwrap_err();
        assert!(e.to_string().contains("level is 1"), "{e}");
        let e = device.validate(&HeavyHitterReport { level: 0, olh: OlhReport { seed: 0, y: g } }).unwrap_err();
        assert!(e.to_string().contains("y is"), "{e}");
        assert!(ItemsRandomizer::new(PrefixProtocol::pem(1.0, 8, 3).unwrap(), 0).is_err());
    }
}
