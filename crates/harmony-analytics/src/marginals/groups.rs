//! Marginals collected by device groups — CALM's materialized sets ([`super::calm`]) and the
//! direct baseline's queries ([`super::direct`]): the device draws one group j uniformly at
//! random and reports its cell of set j's cross-product by the adaptive oracle (GRR or OUE,
//! chosen by ε and the set's number of cells) at the full ε.
//!
//! # Groups drawn by the devices
//! Nobody assigns groups: a device draws j from its own RNG before looking at its data, and puts
//! j in its report. The group counts n_1, …, n_m are multinomial(n; 1/m, …), and every estimate
//! uses the realized counts. Conditional on the counts, every assignment of the n devices to
//! groups with those counts is equally likely, so the groups are a uniformly random partition of
//! the devices with sizes n_j, and the finite-population formulas of [`super`] (a group's
//! sampling variance s(n − n_j)/(n_j(n − 1)), the covariance −s/(n − 1) between two groups) hold
//! with the realized sizes. The tests `calm_raw_is_unbiased_with_the_predicted_sse` and
//! `calm_gls_is_unbiased_with_the_predicted_sse` check them with device-drawn groups.
//!
//! # Privacy
//! One ε-LDP report per device; the group is independent of the data: ε-LDP.
//!
//! # Server state
//! One adaptive-oracle accumulator per group: integer counts (GRR) or bit-sliced counters (OUE),
//! so the state, and every estimate from it, does not depend on the order of adds and merges.
//!
//! # Example
//! ```
//! use harmony_analytics::marginals::groups::GroupRandomizer;
//! use harmony_core::{Aggregator, randomizer::Randomizer};
//! let names = ["a".to_string(), "b".to_string(), "c".to_string()];
//! // Two groups: the marginals a×b and b×c.
//! let device = GroupRandomizer::new(&names, &[2, 3, 2], 1.0, &[vec![0, 1], vec![1, 2]])?;
//! let mut agg = device.aggregator();
//! let mut rng = harmony_core::sampling::fast_rng(3);
//! for i in 0..1000u32 {
//!     let report = device.randomize(&[i % 2, i % 3, 0], &mut rng)?; // each device draws its group
//!     agg.add(&report)?;
//! }
//! let sizes = agg.sizes(); // realized group sizes
//! assert_eq!(sizes.iter().sum::<u64>(), 1000);
//! assert_eq!(agg.estimate()[1].frequencies.len(), 6);
//! # Ok::<(), harmony_core::Error>(())
//! ```

use super::MAX_CELLS;
use harmony_core::aggregate::{Aggregator, check_compatible};
use harmony_core::frequency::{Adaptive, AdaptiveAggregator, AdaptiveReport, FrequencyOracle};
use harmony_core::randomizer::Randomizer;
use harmony_core::sampling::uniform_below;
use harmony_core::wire::{WireKind, WireReport};
use harmony_core::{Error, FrequencyEstimate, Result};
use rand::Rng;
use serde::{Deserialize, Serialize};

/// One device's report: its group and the adaptive-oracle report of its cell of that group's
/// attribute set.
///
/// On the wire (kind byte 31, `MarginalGroup`): the group as a varint, the branch tag, then a
/// GRR cell (varint) or the OUE bits (⌈|D_j|/64⌉ 64-bit words as varints, up to 10 bytes each).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupReport {
    /// The group j (the index of the attribute set).
    pub group: u32,
    /// The oracle's report of the cell (row-major over set j, the last attribute fastest).
    pub report: AdaptiveReport,
}

impl WireReport for GroupReport {
    /// harmony-analytics owns bytes 20–39; grouped marginals take 31.
    const KIND: WireKind = WireKind { byte: 31, name: "MarginalGroup" };
}

/// A device's randomizer: its input is its codes of every attribute of the collection (in the
/// collection's attribute order), each below the attribute's cardinality.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupRandomizer {
    names: Vec<String>,
    cards: Vec<usize>,
    sets: Vec<Vec<usize>>,
    oracles: Vec<Adaptive>,
}

impl GroupRandomizer {
    /// The randomizer of `sets` (each a non-empty, strictly increasing list of attribute indices
    /// with at most [`MAX_CELLS`] cells) over attributes `names` with cardinalities `cards`.
    /// Errors: ε invalid, no set, a bad set, a cardinality below 2.
    pub fn new(names: &[String], cards: &[usize], epsilon: f64, sets: &[Vec<usize>]) -> Result<Self> {
        if names.len() != cards.len() || cards.iter().any(|&c| c < 2) {
            return Err(Error::param("cardinalities", cards, "one cardinality >= 2 per attribute name"));
        }
        if sets.is_empty() || sets.len() > u32::MAX as usize {
            return Err(Error::param("sets", sets.len(), "at least one attribute set"));
        }
        let oracles = sets
            .iter()
            .map(|s| {
                if s.is_empty() || s.windows(2).any(|w| w[0] >= w[1]) || s.iter().any(|&a| a >= cards.len()) {
                    return Err(Error::param(
                        "sets",
                        s,
                        format!("strictly increasing attribute indices < {}", cards.len()),
                    ));
                }
                let cells = s.iter().try_fold(1usize, |acc, &a| acc.checked_mul(cards[a]).filter(|&c| c <= MAX_CELLS));
                let cells =
                    cells.ok_or_else(|| Error::param("sets", s, format!("a set of at most {MAX_CELLS} cells")))?;
                Adaptive::new(epsilon, cells)
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(GroupRandomizer { names: names.to_vec(), cards: cards.to_vec(), sets: sets.to_vec(), oracles })
    }
    /// The attribute sets, one per group.
    pub fn sets(&self) -> &[Vec<usize>] {
        &self.sets
    }
    /// The oracle of each group.
    pub fn oracles(&self) -> &[Adaptive] {
        &self.oracles
    }
    /// The cell of `codes` in the marginal over set j (row-major, the last attribute fastest).
    pub fn cell(&self, codes: &[u32], j: usize) -> usize {
        self.sets[j].iter().fold(0, |acc, &a| acc * self.cards[a] + codes[a] as usize)
    }
    /// An empty accumulator.
    pub fn aggregator(&self) -> GroupAggregator {
        GroupAggregator { groups: self.oracles.iter().map(|o| o.aggregator()).collect() }
    }
    fn check_codes(&self, codes: &[u32]) -> Result<()> {
        if codes.len() != self.cards.len() {
            return Err(Error::input("codes", codes.len(), format!("{} codes, one per attribute", self.cards.len())));
        }
        for ((&v, &c), name) in codes.iter().zip(&self.cards).zip(&self.names) {
            if v as usize >= c {
                return Err(Error::input(name.as_str(), v, format!("a code in [0, {c})")));
            }
        }
        Ok(())
    }
}

impl Randomizer for GroupRandomizer {
    type Input = [u32];
    type Report = GroupReport;

    /// Draws the group, then randomizes the cell. Errors: a wrong number of codes, a code at or
    /// above its attribute's cardinality (named).
    fn randomize(&self, codes: &[u32], rng: &mut dyn Rng) -> Result<GroupReport> {
        self.check_codes(codes)?;
        let j = uniform_below(rng, self.sets.len() as u64) as usize;
        let report = self.oracles[j].randomize_unchecked(self.cell(codes, j), rng);
        Ok(GroupReport { group: j as u32, report })
    }

    fn validate(&self, r: &GroupReport) -> Result<()> {
        let oracle = self
            .oracles
            .get(r.group as usize)
            .ok_or_else(|| Error::report("group", r.group, format!("a group in [0, {})", self.oracles.len())))?;
        oracle.validate_report(&r.report)
    }
}

/// The server state: one adaptive-oracle accumulator per group.
#[derive(Debug, Clone)]
pub struct GroupAggregator {
    groups: Vec<AdaptiveAggregator>,
}

impl GroupAggregator {
    /// Reports received per group (the realized group sizes).
    pub fn sizes(&self) -> Vec<u64> {
        self.groups.iter().map(Aggregator::count).collect()
    }
}

impl Aggregator for GroupAggregator {
    type Report = GroupReport;
    /// Each group's unbiased cell frequencies (all zero, infinite standard errors, for a group
    /// without reports).
    type Output = Vec<FrequencyEstimate>;

    fn validate(&self, r: &GroupReport) -> Result<()> {
        let g = self
            .groups
            .get(r.group as usize)
            .ok_or_else(|| Error::report("group", r.group, format!("a group in [0, {})", self.groups.len())))?;
        g.validate(&r.report)
    }
    fn add_unchecked(&mut self, r: &GroupReport) {
        self.groups[r.group as usize].add_unchecked(&r.report);
    }
    fn merge(&mut self, other: &Self) -> Result<()> {
        check_compatible("marginal groups", &self.groups.len(), &other.groups.len())?;
        self.groups.iter_mut().zip(&other.groups).try_for_each(|(a, b)| a.merge(b))
    }
    fn count(&self) -> u64 {
        self.groups.iter().map(Aggregator::count).sum()
    }
    fn estimate(&self) -> Vec<FrequencyEstimate> {
        self.groups.iter().map(Aggregator::estimate).collect()
    }
}

impl harmony_core::state::SaveState for GroupAggregator {
    fn save_state(&self, w: &mut harmony_core::state::StateWriter<'_>) {
        harmony_core::state::save_all(w, &self.groups);
    }
    fn merge_state(&mut self, r: &mut harmony_core::state::StateReader<'_>) -> Result<()> {
        harmony_core::state::merge_all(r, "marginal groups", &mut self.groups)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use harmony_core::frequency::GrrReport;
    use harmony_core::sampling::fast_rng;

    fn names(d: usize) -> Vec<String> {
        (0..d).map(|j| format!("a{j}")).collect()
    }

    /// Devices draw their group uniformly: counts of 30,000 devices over 3 groups within z = 4.42
    /// binomial standard deviations of n/3 (false failure < 1e-5 per group); the cell reported
    /// is the device's own cell of its group's set (ε = 20, the largest accepted: GRR keeps it
    /// w.p. 1 − 11/(e^20 + 11) ≈ 1 − 2.3e-8, so at most 3 of 30,000 differ except w.p. < 1e-12).
    #[test]
    fn groups_are_uniform_and_cells_row_major() {
        let sets = vec![vec![0, 1], vec![1, 2], vec![0, 2]];
        let dev = GroupRandomizer::new(&names(3), &[2, 3, 4], 20.0, &sets).unwrap();
        assert_eq!(dev.cell(&[1, 2, 3], 0), 5);
        assert_eq!(dev.cell(&[1, 2, 3], 1), 11);
        let mut rng = fast_rng(3);
        let mut agg = dev.aggregator();
        let (n, mut flipped) = (30_000, 0);
        for _ in 0..n {
            let r = dev.randomize(&[1, 2, 3], &mut rng).unwrap();
            if let AdaptiveReport::Grr(g) = &r.report {
                flipped += usize::from(g.y as usize != dev.cell(&[1, 2, 3], r.group as usize));
            }
            agg.add(&r).unwrap();
        }
        assert!(flipped <= 3, "{flipped} of {n} reports are not the device's own cell");
        let sd = (n as f64 / 3.0 * (2.0 / 3.0)).sqrt();
        for s in agg.sizes() {
            assert!((s as f64 - n as f64 / 3.0).abs() < 4.42 * sd, "{:?}", agg.sizes());
        }
        assert_eq!(agg.count(), n);
    }

    #[test]
    fn bad_inputs_sets_and_reports_are_named() {
        let sets = vec![vec![0, 1]];
        let dev = GroupRandomizer::new(&names(2), &[2, 3], 1.0, &sets).unwrap();
        let mut rng = fast_rng(1);
        let e = dev.randomize(&[1, 3], &mut rng).unwrap_err().to_string();
        assert!(e.contains("a1") && e.contains("[0, 3)"), "{e}");
        assert!(dev.randomize(&[1], &mut rng).unwrap_err().to_string().contains("codes"));
        let bad = GroupReport { group: 1, report: AdaptiveReport::Grr(GrrReport { y: 0 }) };
        assert!(dev.validate(&bad).unwrap_err().to_string().contains("group is 1"));
        assert!(dev.aggregator().validate(&bad).is_err());
        let bad = GroupReport { group: 0, report: AdaptiveReport::Grr(GrrReport { y: 6 }) };
        assert!(dev.validate(&bad).is_err());
        let e = GroupRandomizer::new(&names(2), &[2, 3], 1.0, &[vec![1, 0]]).unwrap_err().to_string();
        assert!(e.contains("sets") && e.contains("increasing"), "{e}");
        let big = GroupRandomizer::new(&names(2), &[200, 200], 1.0, &[vec![0, 1]]).unwrap_err().to_string();
        assert!(big.contains("at most 16384 cells"), "{big}");
    }
}
