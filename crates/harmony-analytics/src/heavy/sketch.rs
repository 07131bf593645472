//! Heavy hitters over a Hadamard count-mean sketch per level: PEM's prefix tree (schedule and
//! top-2k pruning, [`PrefixTree::pem`]) with each level's frequency oracle Apple's HCMS
//! ("Learning with Privacy at Scale", 2017; harmony-core's [`Hcms`]), so that the server state
//! is a fixed k × m array of signed sums per level whatever the number of reports.
//!
//! # Protocol
//! A device samples one code of its set ([`super::sets`]), draws its level j uniformly at random
//! (from its own RNG, independently of its data) and reports the ℓ_j-bit prefix x of the code by
//! HCMS: a hash row r uniform in [k], a Hadamard coefficient l uniform in [m] (m a power of two)
//! and the sign b = H\[l, h_r(x)\], flipped with probability 1/(1 + e^ε). The report is
//! (j, r, l, b) (kind byte 33, `HeavyHitterSketch`: 5–9 bytes of postcard varints after the
//! 2-byte header). Every level shares one public hash family ([`SEED`], k functions onto m
//! buckets).
//!
//! # Server state
//! Level j keeps S_j\[r\]\[l\] = Σ b over its reports with row r and coefficient l (as i64) and its
//! report count: `8 + L·(16 + 8·k·m)` bytes saved for L levels ([`SketchProtocol::state_bytes`]),
//! 2,097,224 bytes at the defaults (B = 32: four levels; k = 64, m = 1024), whatever the number
//! of reports. Adding a report is one increment; merging two states adds the arrays (exact:
//! integer sums), so a window's state is the sum of its buckets' states.
//!
//! # Estimates
//! Per level, one fast Walsh–Hadamard transform per row, T\[r\] = S\[r\]·H, then for each
//! candidate prefix v: f̂(v) = m/(m − 1)·((c/n_j)·Σ_r T\[r\]\[h_r(v)\] − 1/m), c = (e^ε + 1)/(e^ε − 1)
//! ([`harmony_core::frequency::hcms`] derives it). The level search then runs as PEM's
//! ([`PrefixTree::search`]). Cost per estimate: k·m·log₂m additions per level plus k hash
//! evaluations per candidate (2^ℓ_0 at level 0, (2·top + 1)·2^(ℓ_j − ℓ_{j−1}) after).
//!
//! # Variance
//! One report of a device holding code x estimates f_v with mean 1 if x = v and
//! m/(m − 1)·(γ(x, v) − 1/m) otherwise (γ the fraction of rows where x and v collide: 1/m on
//! average over the hash family, so f̂ is unbiased over the family; [`Self::expectation`] is the
//! fixed family's mean), and variance (m/(m − 1))²·(c² − γ(x, v)²). Level j's estimate is the mean
//! of its n_j reports, a uniform subsample of the devices (the levels are drawn by the devices),
//! so with μ_i the mean of device i's report and σ²_μ their population variance,
//!
//! ```text
//! Var(f̂) = [ (m/(m − 1))²·(c² − mean_i γ(x_i, v)²) + σ²_μ·(n − n_j)/(n − 1) ] / n_j,
//! ```
//!
//! which over the hash family is `[V(f) + f(1 − 1/L) + (f/L − f²)(n − n_j)/(n − 1)]/n_j` with
//! V(f) = (m/(m − 1))²·(c² − f − (1 − f)(1/m² + (1 − 1/m)/(km))) ([`Hcms::family_variance`]) and
//! sets padded to L slots; the heavy hitters' standard errors are L times its square root at
//! the clamped f̂ ([`LevelOracle::item_std_error`]). For the fixed public family a candidate's
//! mean is off by the collision bias m/(m − 1)·Σ_{x≠v} f_x(γ(x, v) − 1/m), whose spread over
//! candidates is about √(Σ_x f_x²/(k·m)): at a level of n_j reports it stays below the sampling
//! error c/√n_j while n_j < k·m·c²/Σ_x f_x² (more rows or columns for larger windows).
//!
//! # Privacy
//! P\[(j, r, l, b) | x\] = (1/L_levels)·(1/(k·m))·(1 − p if b = H\[l, h_r(prefix_j(x))\] else p):
//! two codes give probabilities whose ratio is 1 or (1 − p)/p = e^ε; with sets, the report is a
//! mixture over the sampled code of such distributions, so ε-LDP for the whole set.

use super::device::LevelProtocol;
use super::pem::HeavyHitters;
use super::tree::{LevelOracle, PrefixTree, item_std_error};
use harmony_core::frequency::fwht::hadamard_positive;
use harmony_core::frequency::{FrequencyOracle, Hcms, HcmsAggregator, HcmsReport};
use harmony_core::state::{SaveState, StateReader, StateWriter, merge_all, save_all};
use harmony_core::wire::{WireKind, WireReport};
use harmony_core::{Aggregator, Error, FrequencyEstimate, Result};
use rand::Rng;
use serde::{Deserialize, Serialize};

/// Hash rows k by default.
pub const DEFAULT_ROWS: usize = 64;
/// Hadamard coefficients (buckets) m by default: Apple's m = 1024.
pub const DEFAULT_COLUMNS: usize = 1024;
/// The public hash seed of every level ("HARMHHSK").
pub const SEED: u64 = 0x4841_524D_4848_534B;

/// PEM's prefix tree over one Hadamard count-mean sketch per level (see the module docs).
#[derive(Debug, Clone, PartialEq)]
pub struct SketchProtocol {
    tree: PrefixTree,
    hcms: Hcms,
}

/// One device's report: its level and the HCMS report of its prefix at that level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SketchReport {
    /// The level j (the prefix has the schedule's ℓ_j bits).
    pub level: u16,
    /// The hash row, the Hadamard coefficient and the sign.
    pub hcms: HcmsReport,
}

impl WireReport for SketchReport {
    /// harmony-analytics owns bytes 20–39; the heavy-hitters sketch takes 33.
    const KIND: WireKind = WireKind { byte: 33, name: "HeavyHitterSketch" };
}

impl SketchProtocol {
    /// A sketch of `rows` = k hash rows onto `columns` = m Hadamard coefficients (a power of two)
    /// per level of `tree`. Errors: ε not finite and > 0, k ∉ [1, 2^20], m not a power of two in
    /// [2, 2^20], k·m > 2^26.
    pub fn new(epsilon: f64, tree: PrefixTree, rows: usize, columns: usize) -> Result<Self> {
        // The items are prefixes (any u64): the oracle's domain bound is not used.
        let hcms = Hcms::with_params(epsilon, 2, rows, columns, SEED)?;
        Ok(SketchProtocol { tree, hcms })
    }
    /// PEM's tree for the top `k` of `bits`-bit codes with the default sketch shape.
    pub fn pem(epsilon: f64, bits: u32, k: usize) -> Result<Self> {
        Self::new(epsilon, PrefixTree::pem(bits, k)?, DEFAULT_ROWS, DEFAULT_COLUMNS)
    }
    /// The prefix tree.
    pub fn tree(&self) -> &PrefixTree {
        &self.tree
    }
    /// The per-level oracle.
    pub fn hcms(&self) -> &Hcms {
        &self.hcms
    }
    /// Hash rows k.
    pub fn rows(&self) -> usize {
        self.hcms.k()
    }
    /// Hadamard coefficients m.
    pub fn columns(&self) -> usize {
        self.hcms.m()
    }
    /// The bytes of a saved state: 8 + L·(16 + 8·k·m), whatever the number of reports.
    pub fn state_bytes(&self) -> usize {
        8 + self.tree.levels().len() * (16 + 8 * self.rows() * self.columns())
    }
    /// Randomizes one code (< 2^B; not checked here — see [`Self::randomize`]).
    #[inline]
    pub fn randomize_unchecked<R: Rng + ?Sized>(&self, code: u64, rng: &mut R) -> SketchReport {
        let (level, prefix) = self.tree.draw(code, rng);
        SketchReport { level, hcms: self.hcms.randomize_item(prefix, rng) }
    }
    /// Randomizes one code. Errors: code ≥ 2^B.
    pub fn randomize<R: Rng + ?Sized>(&self, code: u64, rng: &mut R) -> Result<SketchReport> {
        self.tree.check_code(code)?;
        Ok(self.randomize_unchecked(code, rng))
    }
    /// Checks a report against the public constants: a level of the schedule, a row below k and a
    /// coefficient below m. The error names the field.
    pub fn validate_report(&self, r: &SketchReport) -> Result<()> {
        self.tree.check_level(r.level)?;
        self.hcms.validate_report(&r.hcms)
    }
    /// P\[report | code\] (exact, from the public constants; 0 for an invalid report).
    pub fn output_probability(&self, code: u64, r: &SketchReport) -> f64 {
        if self.validate_report(r).is_err() {
            return 0.0;
        }
        let levels = self.tree.levels();
        let prefix = code >> (self.tree.bits() - levels[r.level as usize]);
        let h = self.hcms.bucket(r.hcms.j as usize, prefix) as u64;
        let p = 1.0 / (1.0 + self.hcms.epsilon().value().exp());
        let agrees = hadamard_positive(r.hcms.l as u64, h) == r.hcms.bit;
        (if agrees { 1.0 - p } else { p }) / (levels.len() * self.rows() * self.columns()) as f64
    }
    /// E\[f̂(v)\] at a level for this (fixed) hash family when the devices' prefixes there have the
    /// shares `shares` ((prefix, share) pairs, shares summing to 1): f_v plus the collision bias.
    pub fn expectation(&self, shares: &[(u64, f64)], v: u64) -> f64 {
        let s = self.columns() as f64 / (self.columns() as f64 - 1.0);
        let m = self.columns() as f64;
        shares
            .iter()
            .map(|&(x, f)| if x == v { f } else { f * s * (self.hcms.collision_fraction(x, v) - 1.0 / m) })
            .sum()
    }
    /// An empty aggregator.
    pub fn aggregator(&self) -> SketchAggregator {
        let levels = vec![self.hcms.aggregator(); self.tree.levels().len()];
        SketchAggregator { protocol: self.clone(), levels }
    }
}

impl LevelProtocol for SketchProtocol {
    type Report = SketchReport;
    fn tree(&self) -> &PrefixTree {
        &self.tree
    }
    fn randomize_code(&self, code: u64, rng: &mut dyn Rng) -> SketchReport {
        self.randomize_unchecked(code, rng)
    }
    fn check_report(&self, report: &SketchReport) -> Result<()> {
        self.validate_report(report)
    }
}

/// Server state: one HCMS aggregator (k × m signed sums and a count) per level. Mergeable
/// exactly; `estimate` runs the level search.
#[derive(Debug, Clone)]
pub struct SketchAggregator {
    protocol: SketchProtocol,
    levels: Vec<HcmsAggregator>,
}

impl SketchAggregator {
    /// Unbiased estimates (over the hash family), with standard errors, of the given prefixes of
    /// level `level`: one transform per row, then k look-ups per prefix.
    pub fn estimate_candidates(&self, level: usize, prefixes: &[u64]) -> Result<FrequencyEstimate> {
        let agg = self
            .levels
            .get(level)
            .ok_or_else(|| Error::param("level", level, format!("a level in [0, {})", self.levels.len())))?;
        Ok(agg.estimate_items(prefixes))
    }
}

impl Aggregator for SketchAggregator {
    type Report = SketchReport;
    type Output = Result<HeavyHitters>;

    fn validate(&self, r: &SketchReport) -> Result<()> {
        self.protocol.validate_report(r)
    }
    #[inline]
    fn add_unchecked(&mut self, r: &SketchReport) {
        self.levels[r.level as usize].add_unchecked(&r.hcms);
    }
    fn merge(&mut self, other: &Self) -> Result<()> {
        harmony_core::aggregate::check_compatible("heavy-hitter sketch", &self.protocol, &other.protocol)?;
        for (dst, src) in self.levels.iter_mut().zip(&other.levels) {
            dst.merge(src)?;
        }
        Ok(())
    }
    fn count(&self) -> u64 {
        self.levels.iter().map(Aggregator::count).sum()
    }
    /// The level search for one item per device. Errors: a level without reports.
    fn estimate(&self) -> Result<HeavyHitters> {
        self.estimate_sets(1)
    }
}

impl LevelOracle for SketchAggregator {
    fn tree(&self) -> &PrefixTree {
        &self.protocol.tree
    }
    fn level_reports(&self, level: usize) -> u64 {
        self.levels.get(level).map_or(0, Aggregator::count)
    }
    fn estimate_level_blocks(&self, level: usize, starts: &[u64], len: usize) -> Result<FrequencyEstimate> {
        let prefixes: Vec<u64> = starts.iter().flat_map(|&s| (0..len as u64).map(move |t| s.wrapping_add(t))).collect();
        self.estimate_candidates(level, &prefixes)
    }
    /// √(V(0)/n).
    fn null_se(&self, n: u64) -> f64 {
        (self.protocol.hcms.family_variance(0.0) / n as f64).sqrt()
    }
    /// [`super::tree::item_std_error`] with the family-averaged per-report variance V(f).
    fn item_std_error(&self, f: f64, n_j: u64, n: u64, pad: usize) -> f64 {
        item_std_error(|f| self.protocol.hcms.family_variance(f), f, n_j, n, pad)
    }
}

impl SaveState for SketchAggregator {
    fn save_state(&self, w: &mut StateWriter<'_>) {
        save_all(w, &self.levels);
    }
    fn merge_state(&mut self, r: &mut StateReader<'_>) -> Result<()> {
        merge_all(r, "sketch levels", &mut self.levels)
    }
}

#[cfg(test)]
mod tests;
