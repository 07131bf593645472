//! Heavy hitters over huge domains (strings, item ids): PEM and TreeHist over OLH, and
//! set-valued inputs (each user holds a set of items).
//!
//! # Items as fixed-length bit strings
//! Both protocols walk a prefix tree over B-bit item codes ([`ItemCodec`]). Strings are hashed
//! to B bits (FNV-1a 64 over the UTF-8 bytes, then the splitmix64 finaliser, top B bits; B = 32
//! by default): the code length does not depend on the strings' lengths, the prefix tree is
//! balanced (hashed codes are spread uniformly, so the top items rarely share long prefixes) and
//! no dictionary is needed on the client. The price is collisions: D distinct items collide
//! somewhere with probability at most D(D − 1)/2^(B+1) ([`ItemCodec::collision_bound`]; about
//! 0.2% for D = 4,000 at B = 32, 1.9e-6 at B = 48). The server recovers *codes*; names come from
//! a public candidate dictionary (in a simulation: the data's distinct items). Raw bytes padded
//! to a fixed length would give names back without a dictionary, but need 8 bits per character
//! (a 20-character string is 160 bits, five times the levels or the candidates per level). Items
//! that already are small integer ids can be used as is ([`ItemCodec::ids`]).
//!
//! The all-ones code 2^B − 1 is reserved for the padding item of set-valued inputs ([`sets`]);
//! a hashed string that lands on it is moved to 2^B − 2 (one more collision, probability 2^-B).
//!
//! # Protocols
//! [`pem`]: PEM (Wang, Li, Jha; docs/MECHANISMS.md §D): each device draws one level uniformly at
//! random (its group, independent of its data, sent in its report) and reports the first ℓ_j
//! bits of its code by OLH at the full ε; the server estimates every candidate prefix of level j
//! (the survivors of level j − 1 extended by ℓ_j − ℓ_{j−1} bits), keeps the best and extends
//! them. [`device`]: the device's randomizer over a set of items. [`treehist`]: the binary
//! prefix tree (one bit per level) with threshold pruning (Bassily, Nissim, Stemmer, Thakurta).
//! [`sketch`]: PEM's levels and pruning over a Hadamard count-mean sketch per level (Apple's
//! HCMS), whose server state is a fixed k × m array per level whatever the number of reports.
//! [`tree`]: the prefix tree and the level search the three share.

pub mod device;
pub mod pem;
pub mod sets;
pub mod sketch;
pub mod tree;
pub mod treehist;

pub use device::{ItemsRandomizer, LevelProtocol};
pub use pem::{HeavyHitterAggregator, HeavyHitterReport, HeavyHitters, LevelSummary, PrefixProtocol, Pruning};
pub use sets::SetSampler;
pub use sketch::{SketchAggregator, SketchProtocol, SketchReport};
pub use tree::{LevelOracle, PrefixTree};

use harmony_core::sampling::splitmix64;
use harmony_core::{Error, Result};

/// The shortest and longest item codes.
pub const MIN_BITS: u32 = 2;
/// The longest item codes (bits).
pub const MAX_BITS: u32 = 64;

/// One heavy hitter: the item's code, its estimated frequency (the fraction of users holding
/// it) and the standard error of that estimate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HeavyHitter {
    /// The item's B-bit code.
    pub code: u64,
    /// Estimated fraction of users holding the item (unbiased given that it was found; may be
    /// slightly negative or above 1 before post-processing).
    pub estimate: f64,
    /// Standard error of `estimate` (closed-form OLH variance at the clamped estimate).
    pub std_error: f64,
}

impl HeavyHitter {
    /// The 95% normal confidence interval of the estimate.
    pub fn ci95(&self) -> (f64, f64) {
        (self.estimate - 1.96 * self.std_error, self.estimate + 1.96 * self.std_error)
    }
}

/// How items become B-bit codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// Strings hashed to B bits (FNV-1a 64, splitmix64 finaliser, top B bits).
    Hash,
    /// Items are unsigned integer ids in [0, 2^B − 1).
    Id,
}

/// Maps items to fixed-length B-bit codes (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ItemCodec {
    bits: u32,
    encoding: Encoding,
}

fn check_bits(bits: u32) -> Result<u32> {
    if !(MIN_BITS..=MAX_BITS).contains(&bits) {
        return Err(Error::param("item bits", bits, format!("an integer in [{MIN_BITS}, {MAX_BITS}]")));
    }
    Ok(bits)
}

/// The all-ones B-bit code.
pub(crate) fn all_ones(bits: u32) -> u64 {
    if bits == 64 { u64::MAX } else { (1u64 << bits) - 1 }
}

impl ItemCodec {
    /// Strings hashed to `bits` bits (in [2, 64]).
    pub fn hashed(bits: u32) -> Result<Self> {
        Ok(ItemCodec { bits: check_bits(bits)?, encoding: Encoding::Hash })
    }
    /// Unsigned integer ids below 2^bits − 1.
    pub fn ids(bits: u32) -> Result<Self> {
        Ok(ItemCodec { bits: check_bits(bits)?, encoding: Encoding::Id })
    }
    /// The code length B.
    pub fn bits(&self) -> u32 {
        self.bits
    }
    /// The encoding.
    pub fn encoding(&self) -> Encoding {
        self.encoding
    }
    /// The reserved padding code 2^B − 1.
    pub fn padding_code(&self) -> u64 {
        all_ones(self.bits)
    }
    /// The code of an item. Errors (ids only): not an unsigned integer, or ≥ 2^B − 1.
    pub fn encode(&self, item: &str) -> Result<u64> {
        match self.encoding {
            Encoding::Hash => {
                let h = splitmix64(fnv1a(item.as_bytes())) >> (64 - self.bits);
                Ok(if h == self.padding_code() { h - 1 } else { h })
            }
            Encoding::Id => {
                let max = self.padding_code();
                match item.trim().parse::<u64>() {
                    Ok(v) if v < max => Ok(v),
                    _ => Err(Error::input(
                        "item id",
                        item,
                        format!("an unsigned integer below 2^{} − 1 = {max}", self.bits),
                    )),
                }
            }
        }
    }
    /// An upper bound on the probability that `distinct` items do not all get distinct codes:
    /// D(D − 1)/2^(B+1) for hashes (union bound over pairs), 0 for ids.
    pub fn collision_bound(&self, distinct: usize) -> f64 {
        match self.encoding {
            Encoding::Id => 0.0,
            Encoding::Hash => {
                let d = distinct as f64;
                (d * (d - 1.0) / 2f64.powi(self.bits as i32 + 1)).min(1.0)
            }
        }
    }
}

/// FNV-1a, 64 bits.
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Precision, recall and F1 of a found set of codes against the true top-k set.
pub fn precision_recall_f1(found: &[u64], truth: &[u64]) -> (f64, f64, f64) {
    let hits = found.iter().filter(|c| truth.contains(c)).count() as f64;
    let precision = if found.is_empty() { 0.0 } else { hits / found.len() as f64 };
    let recall = if truth.is_empty() { 0.0 } else { hits / truth.len() as f64 };
    let f1 = if precision + recall == 0.0 { 0.0 } else { 2.0 * precision * recall / (precision + recall) };
    (precision, recall, f1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codec_hashes_to_b_bits_and_rejects_bad_ids() {
        let c = ItemCodec::hashed(20).unwrap();
        for s in ["a", "b", "sex=Male", ""] {
            assert!(c.encode(s).unwrap() < (1 << 20) - 1);
        }
        assert_ne!(c.encode("a").unwrap(), c.encode("b").unwrap());
        let ids = ItemCodec::ids(8).unwrap();
        assert_eq!(ids.encode("17").unwrap(), 17);
        let e = ids.encode("255").unwrap_err().to_string();
        assert!(e.contains("255") && e.contains("below"), "{e}");
        assert!(ids.encode("x").is_err());
        assert!(ItemCodec::hashed(1).unwrap_err().to_string().contains("item bits"));
        assert!(ItemCodec::hashed(65).is_err());
        assert!((ItemCodec::hashed(32).unwrap().collision_bound(4000) - 4000.0 * 3999.0 / 2f64.powi(33)).abs() < 1e-12);
    }

    /// Empirical collision rate of the string hash at B = 16 against the birthday formula:
    /// pairs colliding among 2,000 items ≈ C(2000, 2)/2^16 = 30.5 (Poisson; z = 4.42 bound).
    #[test]
    fn hash_collisions_match_uniform_codes() {
        let c = ItemCodec::hashed(16).unwrap();
        let mut codes: Vec<u64> = (0..2000).map(|i| c.encode(&format!("item-{i}")).unwrap()).collect();
        codes.sort_unstable();
        let mut pairs = 0usize;
        let mut run = 1usize;
        for w in codes.windows(2) {
            if w[0] == w[1] {
                run += 1;
            } else {
                pairs += run * (run - 1) / 2;
                run = 1;
            }
        }
        pairs += run * (run - 1) / 2;
        let mean = 2000.0 * 1999.0 / 2.0 / 65536.0;
        assert!((pairs as f64 - mean).abs() < 4.42 * mean.sqrt(), "pairs {pairs}, expected {mean}");
    }

    #[test]
    fn f1_of_sets() {
        let (p, r, f) = precision_recall_f1(&[1, 2, 3, 4], &[1, 2, 5, 6]);
        assert_eq!((p, r, f), (0.5, 0.5, 0.5));
        assert_eq!(precision_recall_f1(&[], &[1]), (0.0, 0.0, 0.0));
    }
}
