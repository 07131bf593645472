//! TreeHist (Bassily, Nissim, Stemmer, Thakurta, "Practical locally private heavy hitters"):
//! the binary prefix tree, one bit per level, with threshold pruning.
//!
//! Each device draws its level uniformly at random, as in PEM; each level reports its
//! prefix by OLH (the paper uses a Hadamard-based oracle; OLH has the same variance up to the
//! +1 of Hadamard, docs/MECHANISMS.md §0). A node survives if its estimate is at least z = 3 null
//! standard errors (√(Var*/n_j)), the best `k` always survive and at most `16k` do. With one bit
//! per level a B-bit code needs B − ℓ_0 + 1 levels, so each level gets fewer users than with
//! PEM's default wide levels: TreeHist is the cheaper server (2·16k candidates per level) and
//! suits short codes; PEM is the more accurate default at B = 32.

use super::pem::{PrefixProtocol, Pruning, schedule};
use harmony_core::Result;

/// The threshold in null standard errors.
pub const Z: f64 = 3.0;

/// TreeHist for the top `k` of `bits`-bit codes: first level ⌊log2 k⌋ + 1 bits (at most B), then
/// one bit per level.
pub fn treehist(epsilon: f64, bits: u32, k: usize) -> Result<PrefixProtocol> {
    let first = (usize::BITS - k.max(1).leading_zeros()).min(bits);
    let max = k.saturating_mul(16);
    PrefixProtocol::new(epsilon, bits, schedule(bits, first, 1)?, k, Pruning::Threshold { z: Z, min: k, max })
}

#[cfg(test)]
mod tests {
    use super::*;
    use harmony_core::Aggregator;

    /// On 12-bit codes with five items holding 12% each, TreeHist finds all five at ε = 4.
    #[test]
    fn treehist_finds_clear_heavy_hitters() {
        let p = treehist(4.0, 12, 5).unwrap();
        assert_eq!(p.levels().first(), Some(&3));
        assert_eq!(p.levels().len(), 10);
        let heavy = [17u64, 300, 1025, 2222, 4000];
        let n = 200_000;
        let agg =
            p.collect_parallel(n, 4, |i, _| if i % 100 < 60 { heavy[i % 5] } else { 100 + (i as u64 % 3000) }).unwrap();
        let hh = agg.estimate().unwrap();
        let mut found: Vec<u64> = hh.items.iter().map(|h| h.code).collect();
        found.sort_unstable();
        assert_eq!(found, heavy.to_vec(), "{hh:?}");
        assert!(treehist(1.0, 12, 0).is_err());
    }
}
