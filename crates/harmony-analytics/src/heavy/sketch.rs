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
//! (j, r, l, b) (kind byte 33, `HeavyHitterSketch`: 4–5 bytes of postcard varints after the
//! 2-byte header at the default k and m). Every level shares one public hash family ([`SEED`],
//! k functions onto m buckets).
//!
//! # Server state
//! Level j keeps S_j\[r\]\[l\] = Σ b over its reports with row r and coefficient l (as i64) and its
//! report count: at most `24 + 8·L·(1 + k·m)` bytes saved for L levels
//! ([`SketchProtocol::state_bytes`]), 1,048,632 bytes at the defaults (B = 32: four levels;
//! k = 32, m = 1024), whatever the number of reports; a state of few reports saves only its
//! nonzero sums (16 bytes each, [`SketchAggregator`]), so a small ingest batch stays small.
//! Adding a report is one increment; merging two states adds the arrays (exact: integer sums),
//! so a window's state is the sum of its buckets' states.
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
use harmony_core::frequency::fwht::fwht;
use harmony_core::frequency::fwht::hadamard_positive;
use harmony_core::frequency::{FrequencyOracle, Hcms, HcmsReport};
use harmony_core::sampling::splitmix64;
use harmony_core::state::{SaveState, StateReader, StateWriter};
use harmony_core::wire::{WireKind, WireReport};
use harmony_core::{Aggregator, Error, FrequencyEstimate, Result};
use rand::Rng;
use serde::{Deserialize, Serialize};

/// Hash rows k by default: the most (a power of two) for which a 30-point daily series of a
/// collection's windows answers within 100 ms at the 99th percentile on a loaded 2-core machine
/// (docs/CONTINUOUS.md, "Scale"; 64 rows took 140 ms there). The collision error of a candidate,
/// about √(Σ_x f_x²/(k·m)), grows as 1/√k.
pub const DEFAULT_ROWS: usize = 32;
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
    /// The most bytes a saved state takes, whatever the number of reports: 24 + 8·L·(1 + k·m)
    /// for L levels (the dense encoding; a state of few reports takes 24 + 8·L + 16 per nonzero
    /// sum, at most one per report: [`SketchAggregator`]'s sparse encoding).
    pub fn state_bytes(&self) -> usize {
        24 + 8 * self.tree.levels().len() * (1 + self.rows() * self.columns())
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
        let levels = self.tree.levels().len();
        let sums = vec![0; levels * self.rows() * self.columns()];
        SketchAggregator { protocol: self.clone(), counts: vec![0; levels], sums }
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

/// Server state: per level, its report count and its k × m signed sums S\[r\]\[l\] (row-major,
/// levels one after the other). Merging adds them (exact); `estimate` runs the level search.
///
/// Saved as the level count, the L report counts, then either every sum (dense, tag 0:
/// 8·L·k·m bytes) or the nonzero ones as (index, value) pairs (sparse, tag 1: 16 bytes each),
/// whichever is smaller, so that a batch of a few reports saves a few hundred bytes and a day's
/// bucket at most [`SketchProtocol::state_bytes`].
#[derive(Debug, Clone)]
pub struct SketchAggregator {
    protocol: SketchProtocol,
    counts: Vec<u64>,
    sums: Vec<i64>,
}

impl SketchAggregator {
    /// The sums of `level` (k rows of m), or an error naming the level.
    fn level(&self, level: usize) -> Result<&[i64]> {
        let cells = self.protocol.rows() * self.protocol.columns();
        self.sums
            .get(level * cells..(level + 1) * cells)
            .ok_or_else(|| Error::param("level", level, format!("a level in [0, {})", self.counts.len())))
    }
    /// The transformed sketch of `level`: T\[r\] = S\[r\]·H, one fast Walsh–Hadamard transform per
    /// row. Serial, as the whole estimate: it takes about a millisecond, and on a loaded machine
    /// a parallel section waits for its slowest worker's time slice (rayon here made a 30-point
    /// series 400 ms at the 99th percentile beside a build; serial, the figure in
    /// docs/CONTINUOUS.md).
    fn transformed(&self, level: usize) -> Result<Vec<i64>> {
        let mut t = self.level(level)?.to_vec();
        t.chunks_exact_mut(self.protocol.columns()).for_each(fwht);
        Ok(t)
    }
    /// The estimates from Σ_r T\[r\]\[h_r(v)\] per candidate, with the family-averaged standard
    /// errors (harmony-core's HCMS estimator; module docs).
    fn estimate_from_sums(&self, level: usize, sums: &[i64]) -> FrequencyEstimate {
        let (n, hcms) = (self.counts[level], &self.protocol.hcms);
        if n == 0 {
            return FrequencyEstimate::empty(sums.len());
        }
        let (nf, c, m) = (n as f64, hcms.epsilon().c(), hcms.m() as f64);
        let scale = m / (m - 1.0);
        let frequencies: Vec<f64> = sums.iter().map(|&s| scale * (c * s as f64 / nf - 1.0 / m)).collect();
        let std_errors =
            frequencies.iter().map(|&f| (hcms.family_variance(f.clamp(0.0, 1.0)).max(0.0) / nf).sqrt()).collect();
        FrequencyEstimate { n, frequencies, std_errors }
    }
    /// Unbiased estimates (over the hash family), with standard errors, of the given prefixes of
    /// level `level`: one transform per row, then k look-ups per prefix.
    pub fn estimate_candidates(&self, level: usize, prefixes: &[u64]) -> Result<FrequencyEstimate> {
        let t = self.transformed(level)?;
        let (k, m, hcms) = (self.protocol.rows(), self.protocol.columns(), &self.protocol.hcms);
        let sums: Vec<i64> = prefixes.iter().map(|&v| (0..k).map(|r| t[r * m + hcms.bucket(r, v)]).sum()).collect();
        Ok(self.estimate_from_sums(level, &sums))
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
        let (k, m) = (self.protocol.rows(), self.protocol.columns());
        let level = r.level as usize;
        self.counts[level] += 1;
        self.sums[(level * k + r.hcms.j as usize) * m + r.hcms.l as usize] += if r.hcms.bit { 1 } else { -1 };
    }
    fn merge(&mut self, other: &Self) -> Result<()> {
        harmony_core::aggregate::check_compatible("heavy-hitter sketch", &self.protocol, &other.protocol)?;
        self.counts.iter_mut().zip(&other.counts).for_each(|(a, b)| *a += b);
        self.sums.iter_mut().zip(&other.sums).for_each(|(a, b)| *a += b);
        Ok(())
    }
    fn count(&self) -> u64 {
        self.counts.iter().sum()
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
        self.counts.get(level).copied().unwrap_or(0)
    }
    /// The fast path of the level search: [`block_sums`] over the transformed sketch (the same
    /// numbers as [`SketchAggregator::estimate_candidates`]).
    fn estimate_level_blocks(&self, level: usize, starts: &[u64], len: usize) -> Result<FrequencyEstimate> {
        let t = self.transformed(level)?;
        let hcms = &self.protocol.hcms;
        let sums = block_sums(&t, hcms.m(), &hash_params(hcms.seed(), hcms.k()), starts, len);
        Ok(self.estimate_from_sums(level, &sums))
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

/// The parameters (a_t, b_t) of the public hash family of `seed` (harmony-core's
/// `sketch_hash`, a wire contract: words 4t..4t+3 of the SplitMix64 stream seeded with `seed`),
/// h_t(x) = top log₂m bits of ((a_t·x + b_t) mod 2^128) >> 64. The test
/// `block_walk_matches_the_hash_family` pins them to [`Hcms::bucket`].
fn hash_params(seed: u64, rows: usize) -> Vec<(u128, u128)> {
    const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;
    let w = |j: u64| splitmix64(seed.wrapping_add(j.wrapping_mul(GOLDEN))) as u128;
    (0..rows as u64).map(|t| ((w(4 * t) << 64) | w(4 * t + 1), (w(4 * t + 2) << 64) | w(4 * t + 3))).collect()
}

/// Σ_r T\[r\]\[h_r(v)\] for the candidates v = starts\[b\] + t, t < len (in that order), `t` the
/// transformed sketch (k rows of m, m a power of two). Row by row (its m sums stay in the L1
/// cache), each block walked upwards: a_r·(x + 1) + b_r = (a_r·x + b_r) + a_r mod 2^128, so a
/// candidate costs a 128-bit add, a shift and a load per row. Candidates are prefixes below
/// 2^ℓ (ℓ ≤ 64), so a block never wraps past 2^64.
fn block_sums(t: &[i64], m: usize, params: &[(u128, u128)], starts: &[u64], len: usize) -> Vec<i64> {
    let shift = 64 - m.trailing_zeros();
    let mut sums = vec![0i64; starts.len() * len];
    for (row, &(a, b)) in t.chunks_exact(m).zip(params) {
        for (&s, out) in starts.iter().zip(sums.chunks_exact_mut(len)) {
            let mut y = a.wrapping_mul(s as u128).wrapping_add(b);
            for o in out.iter_mut() {
                *o += row[(((y >> 64) as u64) >> shift) as usize];
                y = y.wrapping_add(a);
            }
        }
    }
    sums
}

/// Saved-state encodings of the sums.
const DENSE: u64 = 0;
const SPARSE: u64 = 1;

impl SaveState for SketchAggregator {
    fn save_state(&self, w: &mut StateWriter<'_>) {
        w.u64s(&self.counts);
        let nonzero = self.sums.iter().filter(|&&s| s != 0).count();
        if 2 * nonzero < self.sums.len() {
            w.u64(SPARSE);
            w.len(nonzero);
            for (i, &s) in self.sums.iter().enumerate().filter(|&(_, &s)| s != 0) {
                w.u64(i as u64);
                w.u64(s as u64);
            }
        } else {
            w.u64(DENSE);
            w.i64s(&self.sums);
        }
    }
    fn merge_state(&mut self, r: &mut StateReader<'_>) -> Result<()> {
        r.add_u64s("sketch level counts", &mut self.counts)?;
        match r.u64("sketch encoding")? {
            DENSE => r.add_i64s("sketch sums", &mut self.sums),
            SPARSE => {
                let cells = self.sums.len();
                for _ in 0..r.len_any("sketch cells", 16)? {
                    let i = r.u64("sketch cell")?;
                    let cell = usize::try_from(i).ok().and_then(|i| self.sums.get_mut(i)).ok_or_else(|| {
                        Error::input("sketch cell", i, format!("an index below {cells} (a state of another shape)"))
                    })?;
                    let v = r.u64("sketch sum")? as i64;
                    *cell = cell
                        .checked_add(v)
                        .ok_or_else(|| Error::input("sketch sum", v, "a sum that does not overflow"))?;
                }
                Ok(())
            }
            other => Err(Error::input("sketch encoding", other, "0 (dense) or 1 (sparse)")),
        }
    }
}

#[cfg(test)]
mod tests;
