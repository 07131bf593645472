//! Set-valued inputs: each user holds a set of items and reports one of them ("padding and
//! sampling", as the LDP survey recommends; Wang et al., LDPMiner/PSFO).
//!
//! A user with set S pads it to length L with the reserved padding item (code 2^B − 1) and
//! samples one of the L slots uniformly: a real item w.p. 1/L each, the padding item w.p.
//! (L − |S|)/L. The sampled code then goes through the single-item protocol, so the report is
//! ε-LDP for the whole set. If f̂_v estimates the fraction of *reports* carrying v, then L·f̂_v
//! estimates the fraction of users holding v. The support indicator of a report is
//! Bernoulli(q* + π_i(p* − q*)) with π_i = 1[v ∈ S_i]/L, whose variance exceeds the pure
//! oracle's linear interpolation by (p* − q*)²π_i(1 − π_i): the sampled item adds π_i(1 − π_i)
//! to the per-report variance, f(1 − 1/L) on average (see
//! [`super::tree::LevelOracle::item_std_error`], which also adds the finite-population
//! term of a level's subsample).
//!
//! Sets larger than L are truncated by the sampling (an item of such a set is reported w.p.
//! 1/|S| < 1/L), which biases L·f̂ down by the factor L/|S| for those users: choose L at a high
//! percentile of the set sizes ([`SetSampler::percentile_length`]; 90% by default in the CLI)
//! or at the maximum. A larger L costs variance (×L²), a smaller one bias. Empty sets report the
//! padding item.

use harmony_core::sampling::uniform_below;
use harmony_core::{Error, Result};
use rand::Rng;

/// Pads sets to a fixed length L and samples one slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SetSampler {
    length: usize,
    padding: u64,
}

impl SetSampler {
    /// Pads to `length` ≥ 1 slots with the code `padding` (the codec's padding code).
    pub fn new(length: usize, padding: u64) -> Result<Self> {
        if length == 0 {
            return Err(Error::param("padding length", length, "an integer >= 1"));
        }
        Ok(SetSampler { length, padding })
    }
    /// The padding length L (estimates are L times the share of reports).
    pub fn length(&self) -> usize {
        self.length
    }
    /// The smallest L such that at least `q` (in (0, 1]) of the sets have |S| ≤ L (at least 1).
    pub fn percentile_length(sizes: &[usize], q: f64) -> Result<usize> {
        if !(q > 0.0 && q <= 1.0) {
            return Err(Error::param("padding percentile", q, "a number in (0, 1]"));
        }
        if sizes.is_empty() {
            return Err(Error::input("sets", 0, "at least one set"));
        }
        let mut s = sizes.to_vec();
        s.sort_unstable();
        let idx = ((q * s.len() as f64).ceil() as usize).clamp(1, s.len()) - 1;
        Ok(s[idx].max(1))
    }
    /// One code of `set` (padding included): uniform over the L slots if |S| ≤ L, else uniform
    /// over S.
    #[inline]
    pub fn sample<R: Rng + ?Sized>(&self, set: &[u64], rng: &mut R) -> u64 {
        let slots = self.length.max(set.len());
        let j = uniform_below(rng, slots as u64) as usize;
        if j < set.len() { set[j] } else { self.padding }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use harmony_core::sampling::fast_rng;

    #[test]
    fn percentile_and_errors() {
        assert_eq!(SetSampler::percentile_length(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 0.9).unwrap(), 9);
        assert_eq!(SetSampler::percentile_length(&[0, 0], 0.9).unwrap(), 1);
        assert!(SetSampler::percentile_length(&[], 0.9).is_err());
        assert!(SetSampler::percentile_length(&[1], 0.0).is_err());
        assert!(SetSampler::new(0, 7).unwrap_err().to_string().contains("padding length"));
    }

    /// Each slot is drawn w.p. 1/L: counts over 400k draws within z = 4.42 binomial sd.
    #[test]
    fn sampling_is_uniform_over_slots() {
        let s = SetSampler::new(4, 99).unwrap();
        let mut rng = fast_rng(11);
        let set = [5u64, 6];
        let n = 400_000;
        let (mut c5, mut cpad) = (0usize, 0usize);
        for _ in 0..n {
            match s.sample(&set, &mut rng) {
                5 => c5 += 1,
                99 => cpad += 1,
                _ => {}
            }
        }
        let check = |c: usize, p: f64| {
            let sd = (n as f64 * p * (1.0 - p)).sqrt();
            assert!((c as f64 - n as f64 * p).abs() < 4.42 * sd, "{c} vs {}", n as f64 * p);
        };
        check(c5, 0.25);
        check(cpad, 0.5);
    }
}
