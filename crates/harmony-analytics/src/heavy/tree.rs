//! The public prefix tree every heavy-hitters protocol walks ([`PrefixTree`]: code length,
//! schedule, k, pruning), and the level-by-level search over any per-level frequency oracle
//! ([`LevelOracle`]: OLH reports for [`super::pem`] and [`super::treehist`], a Hadamard count-mean
//! sketch for [`super::sketch`]).
//!
//! A device draws its level uniformly at random ([`PrefixTree::draw`]), independently of its
//! data, and reports the first ℓ_j bits of its code to that level's oracle. The server estimates
//! every candidate prefix of level j (all 2^ℓ_0 at level 0, the survivors of level j − 1
//! extended by ℓ_j − ℓ_{j−1} bits after), prunes ([`Pruning`]) and returns the top k of the last
//! level ([`PrefixTree::search`]).

use super::pem::{HeavyHitters, LevelSummary, MAX_CANDIDATES, Pruning, schedule};
use super::{HeavyHitter, MAX_BITS, all_ones};
use harmony_core::sampling::uniform_below;
use harmony_core::{Error, FrequencyEstimate, Result};
use rand::Rng;

/// The prefix tree of a heavy-hitters protocol: B-bit codes, the prefix length of each level,
/// the number k of heavy hitters and how intermediate levels are pruned.
#[derive(Debug, Clone, PartialEq)]
pub struct PrefixTree {
    bits: u32,
    levels: Vec<u32>,
    k: usize,
    pruning: Pruning,
    exclude_padding: bool,
}

/// Checks a schedule against the code length: strictly increasing, ≥ 1, ending at `bits`.
fn check_levels(bits: u32, levels: &[u32]) -> Result<()> {
    if !(1..=MAX_BITS).contains(&bits) {
        return Err(Error::param("item bits", bits, format!("an integer in [1, {MAX_BITS}]")));
    }
    if levels.is_empty() || levels.last() != Some(&bits) || levels[0] == 0 || levels.windows(2).any(|w| w[0] >= w[1]) {
        return Err(Error::param(
            "levels",
            levels,
            format!("strictly increasing prefix lengths >= 1 ending at {bits}"),
        ));
    }
    if levels.len() > u16::MAX as usize {
        return Err(Error::param("levels", levels.len(), "at most 65535 levels"));
    }
    Ok(())
}

/// The most candidates a level may keep for the next one (one more than the pruning's cap).
fn survivors(pruning: Pruning, k: usize) -> Result<usize> {
    match pruning {
        Pruning::TopK { width } => {
            if width < k {
                return Err(Error::param("width", width, format!("an integer >= k = {k}")));
            }
            Ok(width + 1)
        }
        Pruning::Threshold { z, min, max } => {
            if !(z.is_finite() && z >= 0.0) {
                return Err(Error::param("z", z, "a finite number >= 0"));
            }
            if min < k || max < min {
                return Err(Error::param("min/max survivors", (min, max), format!("k = {k} <= min <= max")));
            }
            Ok(max + 1)
        }
    }
}

impl PrefixTree {
    /// PEM's tree: the default schedule (first level min(B, 12) bits, then steps of at most 7
    /// bits) and `2k` survivors per intermediate level.
    pub fn pem(bits: u32, k: usize) -> Result<Self> {
        let width = k.checked_mul(2).ok_or_else(|| Error::param("k", k, "a small positive integer"))?;
        Self::new(bits, schedule(bits, 12, 7)?, k, Pruning::TopK { width })
    }
    /// A tree with an explicit schedule (strictly increasing prefix lengths ending at `bits`)
    /// and pruning. Errors name the bad parameter: bits, an empty or non-increasing schedule,
    /// k = 0 or k ≥ 2^B − 1 (more items than the codes can hold), a level with more than 2^22
    /// candidates.
    pub fn new(bits: u32, levels: Vec<u32>, k: usize, pruning: Pruning) -> Result<Self> {
        check_levels(bits, &levels)?;
        let domain = all_ones(bits); // codes below it (the all-ones code is the padding item)
        if k == 0 || (k as u64) > domain {
            return Err(Error::param("k", k, format!("an integer in [1, {domain}] (2^{bits} − 1 item codes)")));
        }
        let survivors = survivors(pruning, k)?;
        if levels[0] > 22 {
            return Err(Error::param("first prefix bits", levels[0], "at most 22 (2^22 candidates)"));
        }
        for w in levels.windows(2) {
            let d = w[1] - w[0];
            if d > 22 || survivors.saturating_mul(1usize << d) > MAX_CANDIDATES {
                return Err(Error::param(
                    "bits per level",
                    d,
                    format!("at most log2({MAX_CANDIDATES}/{survivors} survivors) (2^22 candidates per level)"),
                ));
            }
        }
        Ok(PrefixTree { bits, levels, k, pruning, exclude_padding: true })
    }
    /// Whether the padding code 2^B − 1 may be reported as a heavy hitter (default: no).
    pub fn with_padding_excluded(mut self, exclude: bool) -> Self {
        self.exclude_padding = exclude;
        self
    }
    /// The prefix lengths, one per level.
    pub fn levels(&self) -> &[u32] {
        &self.levels
    }
    /// The code length B.
    pub fn bits(&self) -> u32 {
        self.bits
    }
    /// The number of heavy hitters reported.
    pub fn k(&self) -> usize {
        self.k
    }
    /// The pruning rule.
    pub fn pruning(&self) -> Pruning {
        self.pruning
    }
    /// A device's level (uniform, from its own RNG) and the prefix of `code` it reports there.
    #[inline]
    pub fn draw<R: Rng + ?Sized>(&self, code: u64, rng: &mut R) -> (u16, u64) {
        let level = uniform_below(rng, self.levels.len() as u64) as usize;
        (level as u16, code >> (self.bits - self.levels[level]))
    }
    /// Checks a report's level. The error names the field.
    pub fn check_level(&self, level: u16) -> Result<()> {
        if level as usize >= self.levels.len() {
            return Err(Error::report("level", level, format!("a level in [0, {})", self.levels.len())));
        }
        Ok(())
    }
    /// Checks a code against the code length B.
    pub fn check_code(&self, code: u64) -> Result<()> {
        if code > all_ones(self.bits) {
            return Err(Error::input("code", code, format!("a {}-bit code", self.bits)));
        }
        Ok(())
    }

    /// The survivors of one level: the top k at the last level (without the padding code unless
    /// allowed), else the pruning's survivors plus one (so that the padding item's prefix cannot
    /// crowd out a real one). `null_se`: the standard error of a zero frequency at this level.
    fn keep(&self, last: bool, candidates: &[u64], est: &[f64], null_se: f64) -> Vec<usize> {
        let mut order: Vec<usize> = (0..candidates.len()).collect();
        order.sort_unstable_by(|&a, &b| est[b].total_cmp(&est[a]));
        if last {
            let padding = all_ones(self.bits);
            return order
                .into_iter()
                .filter(|&i| !(self.exclude_padding && candidates[i] == padding))
                .take(self.k)
                .collect();
        }
        match self.pruning {
            Pruning::TopK { width } => order.into_iter().take(width + 1).collect(),
            Pruning::Threshold { z, min, max } => {
                let t = z * null_se;
                order
                    .into_iter()
                    .enumerate()
                    .take_while(|&(r, i)| r <= min || (r <= max && est[i] >= t))
                    .map(|(_, i)| i)
                    .collect()
            }
        }
    }

    /// The level-by-level search over `state`, the devices' sets padded to `pad` = L slots: the
    /// heavy hitters' estimates are L times the share of last-level reports carrying them, with
    /// [`LevelOracle::item_std_error`]. Errors: a level without reports.
    pub fn search<S: LevelOracle + ?Sized>(&self, state: &S, pad: usize) -> Result<HeavyHitters> {
        let mut levels = Vec::with_capacity(self.levels.len());
        let mut candidates: Vec<u64> = (0..1u64 << self.levels[0]).collect();
        let (mut starts, mut block) = (vec![0u64], 1usize << self.levels[0]);
        let total: u64 = (0..self.levels.len()).map(|j| state.level_reports(j)).sum();
        let mut last = Vec::new();
        for (j, &len) in self.levels.iter().enumerate() {
            let n = state.level_reports(j);
            if n == 0 {
                return Err(Error::input(
                    format!("level {j} ({len}-bit prefixes)"),
                    0,
                    "at least one report (more users than levels)",
                ));
            }
            let est = state.estimate_level_blocks(j, &starts, block)?;
            let is_last = j + 1 == self.levels.len();
            let keep = self.keep(is_last, &candidates, &est.frequencies, state.null_se(n));
            levels.push(LevelSummary { prefix_bits: len, users: n, candidates: candidates.len(), kept: keep.len() });
            if is_last {
                last = keep
                    .iter()
                    .map(|&i| HeavyHitter {
                        code: candidates[i],
                        estimate: pad as f64 * est.frequencies[i],
                        std_error: state.item_std_error(est.frequencies[i], n, total, pad),
                    })
                    .collect();
            } else {
                let shift = self.levels[j + 1] - len;
                starts = keep.iter().map(|&i| candidates[i] << shift).collect();
                block = 1 << shift;
                candidates = starts.iter().flat_map(|&s| s..s + block as u64).collect();
            }
        }
        Ok(HeavyHitters { items: last, levels })
    }
}

/// A heavy-hitters server state as the level search sees it: per level, its report count and
/// its frequency estimates of blocks of candidate prefixes.
pub trait LevelOracle {
    /// The tree the reports were drawn on.
    fn tree(&self) -> &PrefixTree;
    /// Reports received at `level`.
    fn level_reports(&self, level: usize) -> u64;
    /// Unbiased estimates of the candidates starts\[b\] + t, t < len (in that order), from the
    /// reports of `level`.
    fn estimate_level_blocks(&self, level: usize, starts: &[u64], len: usize) -> Result<FrequencyEstimate>;
    /// The standard error of a zero frequency at a level of `n` reports.
    fn null_se(&self, n: u64) -> f64;
    /// The standard error of L·f̂ for a last-level candidate estimated at f̂ from `n_j` of the
    /// `n` reports, sets padded to `pad` = L.
    fn item_std_error(&self, f: f64, n_j: u64, n: u64, pad: usize) -> f64;

    /// Reports received at each level.
    fn level_counts(&self) -> Vec<u64> {
        (0..self.tree().levels().len()).map(|j| self.level_reports(j)).collect()
    }
    /// The level-by-level search ([`PrefixTree::search`]). Errors: a level without reports.
    fn estimate_sets(&self, pad: usize) -> Result<HeavyHitters> {
        self.tree().search(self, pad)
    }
}

/// The standard error of L·f̂ from a per-report noise variance `noise(f)` at the clamped f̂:
/// L·√([noise(f) + f(1 − 1/L) + (f/L − f²)(n − n_j)/(n − 1)]/n_j) (the sampled slot adds
/// f(1 − 1/L) per report; the level's subsample of the n reports adds the last term).
pub fn item_std_error(noise: impl Fn(f64) -> f64, f: f64, n_j: u64, n: u64, pad: usize) -> f64 {
    let (f, l, nj, n) = (f.clamp(0.0, 1.0), pad as f64, n_j as f64, n as f64);
    let fpc = if n > 1.0 { (n - nj) / (n - 1.0) } else { 0.0 };
    let per_report = noise(f) + f * (1.0 - 1.0 / l);
    l * ((per_report + (f / l - f * f).max(0.0) * fpc) / nj).sqrt()
}
