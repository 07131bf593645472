//! Prefix-tree heavy hitters over OLH: PEM (prefix extending method; Wang, Li, Jha;
//! docs/MECHANISMS.md §D), and the engine [`treehist`](super::treehist) reuses.
//!
//! # Protocol
//! Items are B-bit codes. A schedule ℓ_0 < ℓ_1 < … < ℓ_{m−1} = B of prefix lengths is public.
//! Each user draws a level j uniformly at random (independently of the data), and reports the
//! first ℓ_j bits of its code by OLH at the full ε (harmony-core's [`Olh`], exact
//! integer-optimal g). The server, level by level: estimates every candidate prefix (all 2^ℓ_0
//! prefixes at level 0; the survivors of level j − 1 extended by ℓ_j − ℓ_{j−1} bits after), then
//! prunes ([`Pruning`]). The top k of the last level are the heavy hitters.
//!
//! # Privacy
//! Each user sends one OLH report of one prefix, plus the level, which is drawn independently
//! of the data: ε-LDP (OLH's guarantee; the level carries no information).
//!
//! # Groups drawn by the devices
//! A device draws its level itself, from its own RNG and before looking at its data, and puts
//! it in its report; nobody assigns groups. The level counts n_0, …, n_{m−1} are then
//! multinomial(n; 1/m, …), and the estimates use the realized n_j. Conditional on the counts,
//! every assignment of the n devices to levels with those counts is equally likely, so each
//! level is a uniform random subsample of size n_j (without replacement) and the formulas below
//! hold with the realized n_j (the test `level_estimates_are_unbiased_with_closed_form_variance`
//! checks them with realized counts; harmony-tasks' heavy-hitters tests check the final items'
//! standard errors).
//!
//! # Utility
//! Level j's estimate of a candidate's frequency f (the fraction of users whose code starts with
//! it) is the OLH estimate over the n_j users of that level, f̂ = (C/n_j − 1/g)/(p − 1/g),
//! unbiased because the group is a uniform random subsample. Its variance is
//! `[ (e^ε − 1 + g)²/((e^ε − 1)²(g − 1)) + f (1 − p − 1/g)/(p − 1/g) ] / n_j` with n_j ≈ n/m:
//! m levels cost a factor m in variance, which is why the default schedule uses few, wide levels
//! (more candidates per level, cheap with the fast OLH kernel) rather than PEM's one bit per
//! level. The tests check unbiasedness and this variance at z = 4.42 (false failure 1e-5 per
//! check). That is the noise given the level's devices; as an estimate of the share among all
//! n devices, the level's own share adds the sampling variance f(1 − f)(n − n_j)/(n_j(n − 1))
//! (a subsample without replacement), large next to the noise for frequent items at large ε.
//! With sets padded to L slots ([`super::sets`]) a device holding v reports it w.p. 1/L, so the
//! share f of reports carrying v is F/L (F the share of devices holding v, when their sets have
//! at most L items); the per-report variance gains f(1 − 1/L) (which item is sampled) and the
//! sampling term becomes (f/L − f²)(n − n_j)/(n − 1). The heavy hitters' standard errors
//! ([`LevelOracle::item_std_error`]) are of L·f̂ with these terms, f̂ plugged in.
//!
//! # Cost
//! Server: Σ_j n_j·|candidates_j| hash tests (the OLH candidate kernel, rayon over report
//! chunks); with the default schedule at B = 32, k = 20: about n·(4096 + 3·5,120)/4 ≈ 4,900·n.

use super::tree::{LevelOracle, PrefixTree};
use super::{HeavyHitter, MAX_BITS};
#[cfg(feature = "parallel")]
use harmony_core::fast_rng::FastRng;
use harmony_core::frequency::Olh;
use harmony_core::frequency::olh::{HashParams, OlhReport};
#[cfg(feature = "parallel")]
use harmony_core::sampling::{fast_rng, stream_seed};
use harmony_core::wire::{WireKind, WireReport};
use harmony_core::{Aggregator, Error, FrequencyEstimate, Result};
use rand::Rng;
#[cfg(feature = "parallel")]
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

/// The largest number of candidates a level may have (2^22).
pub const MAX_CANDIDATES: usize = 1 << 22;
/// Reports per rayon task in the aggregation.
const CHUNK: usize = 1 << 14;
/// Users per rayon task in [`PrefixProtocol::collect_parallel`].
#[cfg(feature = "parallel")]
const SIM_CHUNK: usize = 1 << 15;

const LANES: usize = 8;

/// counts[b·len + t] += #{reports supporting key starts[b] + t}, t < len. H_s(v) = y iff the top
/// 32 bits of x_v = a₀·lo(v) + a₁·hi(v) + b (harmony-core's [`HashParams`], the wire contract)
/// lie in [lo, hi) with lo = ⌈y·2^32/g⌉, hi = ⌈(y+1)·2^32/g⌉; walking v upwards within one value
/// of hi(v) adds a₀ to x_v, so each (report, key) test is an add, a subtract and a compare (8
/// lanes). A block that crosses a multiple of 2³² is walked in two runs. The test
/// `block_kernel_matches_olh_hash` pins this to `Olh::support_counts_for`.
fn count_blocks(g: u32, reports: &[OlhReport], starts: &[u64], len: usize, counts: &mut [u32]) {
    let step = |a: u64| a.wrapping_mul(LANES as u64);
    for r in reports {
        let h = HashParams::of(r.seed);
        let ceil_div = |k: u64| (k << 32).div_ceil(g as u64);
        let lo = ceil_div(r.y as u64) << 32;
        let width = (ceil_div(r.y as u64 + 1) << 32).wrapping_sub(lo);
        let st = step(h.a0);
        for (&v0, out) in starts.iter().zip(counts.chunks_exact_mut(len)) {
            // Runs of keys with one high half: [v0, v0 + first) and the rest.
            let first = (len as u64).min((1u64 << 32) - (v0 & 0xffff_ffff)) as usize;
            let (a, b) = out.split_at_mut(first);
            for (start, run) in [(v0, a), (v0.wrapping_add(first as u64), b)] {
                if run.is_empty() {
                    continue;
                }
                let base = h.offset(start >> 32);
                let low = start & 0xffff_ffff;
                let mut x = [0u64; LANES];
                for (i, xi) in x.iter_mut().enumerate() {
                    *xi = h.a0.wrapping_mul(low + i as u64).wrapping_add(base).wrapping_sub(lo);
                }
                let mut chunks = run.chunks_exact_mut(LANES);
                for c in &mut chunks {
                    for i in 0..LANES {
                        c[i] += (x[i] < width) as u32;
                        x[i] = x[i].wrapping_add(st);
                    }
                }
                for (i, c) in chunks.into_remainder().iter_mut().enumerate() {
                    *c += (x[i] < width) as u32;
                }
            }
        }
    }
}

/// How the candidates of an intermediate level are pruned.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pruning {
    /// Keep the `width` best (PEM).
    TopK {
        /// Survivors per level.
        width: usize,
    },
    /// Keep every candidate whose estimate is at least z times the standard error of a zero
    /// frequency, with at least the `min` best and at most the `max` best (TreeHist).
    Threshold {
        /// The threshold in null standard errors.
        z: f64,
        /// Survivors kept regardless of the threshold.
        min: usize,
        /// The cap on survivors.
        max: usize,
    },
}

/// A prefix-tree heavy-hitter protocol (PEM or TreeHist): its OLH, schedule, k and pruning.
#[derive(Debug, Clone, PartialEq)]
pub struct PrefixProtocol {
    olh: Olh,
    tree: PrefixTree,
}

/// One user's report: the level drawn and the OLH report of its prefix of that length.
///
/// On the wire (kind byte 30, `HeavyHitter`): postcard varints of the level, the OLH seed and
/// the hash value, 2 + 1 + (1–10) + (1–5) bytes; 14 typically (a uniform 64-bit seed takes 10).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeavyHitterReport {
    /// The level j (the prefix has the schedule's ℓ_j bits).
    pub level: u16,
    /// OLH of the prefix (the prefix as an integer is the OLH item).
    pub olh: OlhReport,
}

impl WireReport for HeavyHitterReport {
    /// harmony-analytics owns bytes 20–39; heavy hitters take 30.
    const KIND: WireKind = WireKind { byte: 30, name: "HeavyHitter" };
}

/// What happened at one level of the prefix tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LevelSummary {
    /// Prefix length ℓ_j.
    pub prefix_bits: u32,
    /// Users who reported at this level.
    pub users: u64,
    /// Candidates estimated.
    pub candidates: usize,
    /// Candidates kept for the next level (or reported, at the last level).
    pub kept: usize,
}

/// The output: the top k (best first) and the per-level bookkeeping.
#[derive(Debug, Clone, PartialEq)]
pub struct HeavyHitters {
    /// The heavy hitters, by decreasing estimate.
    pub items: Vec<HeavyHitter>,
    /// One entry per level.
    pub levels: Vec<LevelSummary>,
}

/// An even schedule: ℓ_0 = min(first, B), then ⌈(B − ℓ_0)/step⌉ more levels whose increments
/// differ by at most one bit and end at B.
pub fn schedule(bits: u32, first: u32, step: u32) -> Result<Vec<u32>> {
    if !(1..=MAX_BITS).contains(&bits) {
        return Err(Error::param("item bits", bits, format!("an integer in [1, {MAX_BITS}]")));
    }
    if first == 0 {
        return Err(Error::param("first prefix bits", first, "an integer >= 1"));
    }
    if step == 0 {
        return Err(Error::param("bits per level", step, "an integer >= 1"));
    }
    let l0 = first.min(bits);
    let rest = bits - l0;
    let m = rest.div_ceil(step);
    let mut levels = vec![l0];
    for i in 1..=m {
        levels.push(l0 + (rest * i).div_ceil(m));
    }
    Ok(levels)
}

impl PrefixProtocol {
    /// PEM with the default schedule (first level min(B, 12) bits, then steps of at most 7 bits)
    /// and `2k` survivors per intermediate level.
    pub fn pem(epsilon: f64, bits: u32, k: usize) -> Result<Self> {
        let olh = Olh::new(epsilon, 2)?;
        Ok(PrefixProtocol { olh, tree: PrefixTree::pem(bits, k)? })
    }
    /// A protocol with an explicit schedule (strictly increasing prefix lengths ending at
    /// `bits`) and pruning. Errors name the bad parameter: ε, then those of [`PrefixTree::new`].
    pub fn new(epsilon: f64, bits: u32, levels: Vec<u32>, k: usize, pruning: Pruning) -> Result<Self> {
        let olh = Olh::new(epsilon, 2)?;
        Ok(PrefixProtocol { olh, tree: PrefixTree::new(bits, levels, k, pruning)? })
    }
    /// Whether the padding code 2^B − 1 may be reported as a heavy hitter (default: no).
    pub fn with_padding_excluded(mut self, exclude: bool) -> Self {
        self.tree = self.tree.with_padding_excluded(exclude);
        self
    }
    /// The underlying OLH.
    pub fn olh(&self) -> &Olh {
        &self.olh
    }
    /// The prefix tree (schedule, k, pruning).
    pub fn tree(&self) -> &PrefixTree {
        &self.tree
    }
    /// The prefix lengths, one per level.
    pub fn levels(&self) -> &[u32] {
        self.tree.levels()
    }
    /// The code length B.
    pub fn bits(&self) -> u32 {
        self.tree.bits()
    }
    /// The number of heavy hitters reported.
    pub fn k(&self) -> usize {
        self.tree.k()
    }
    /// The pruning rule.
    pub fn pruning(&self) -> Pruning {
        self.tree.pruning()
    }
    /// Randomizes one code (must be < 2^B; not checked here — see [`Self::randomize`]).
    #[inline]
    pub fn randomize_unchecked<R: Rng + ?Sized>(&self, code: u64, rng: &mut R) -> HeavyHitterReport {
        let (level, prefix) = self.tree.draw(code, rng);
        HeavyHitterReport { level, olh: self.olh.randomize_item(prefix, rng) }
    }
    /// Randomizes one code. Errors: code ≥ 2^B.
    pub fn randomize<R: Rng + ?Sized>(&self, code: u64, rng: &mut R) -> Result<HeavyHitterReport> {
        self.tree.check_code(code)?;
        Ok(self.randomize_unchecked(code, rng))
    }
    /// Checks a report against the public constants: a level of the schedule and a hash value
    /// below g. The error names the field.
    pub fn validate_report(&self, r: &HeavyHitterReport) -> Result<()> {
        self.tree.check_level(r.level)?;
        let g = self.olh.g();
        if r.olh.y >= g {
            return Err(Error::report("y", r.olh.y, format!("a hash value in [0, {g})")));
        }
        Ok(())
    }
    /// An empty aggregator.
    pub fn aggregator(&self) -> HeavyHitterAggregator {
        HeavyHitterAggregator { protocol: self.clone(), reports: vec![Vec::new(); self.levels().len()] }
    }
    /// Simulation helper (feature `parallel`): users 0..n, user i holding `code_of(i, rng)` (a code < 2^B, or the
    /// sampled item of its set), randomized in parallel chunks, each with its own fast RNG
    /// seeded by `stream_seed(seed, chunk)` (deterministic for a given seed). Errors: a code
    /// ≥ 2^B (the user is named).
    #[cfg(feature = "parallel")]
    pub fn collect_parallel<F>(&self, n: usize, seed: u64, code_of: F) -> Result<HeavyHitterAggregator>
    where
        F: Fn(usize, &mut FastRng) -> u64 + Sync,
    {
        let max = super::all_ones(self.bits());
        let parts: Vec<Result<HeavyHitterAggregator>> = (0..n.div_ceil(SIM_CHUNK))
            .into_par_iter()
            .map(|c| {
                let mut rng = fast_rng(stream_seed(seed, c as u64));
                let mut agg = self.aggregator();
                for i in c * SIM_CHUNK..((c + 1) * SIM_CHUNK).min(n) {
                    let code = code_of(i, &mut rng);
                    if code > max {
                        return Err(Error::input(
                            format!("user {i}: code"),
                            code,
                            format!("a {}-bit code", self.bits()),
                        ));
                    }
                    let r = self.randomize_unchecked(code, &mut rng);
                    agg.reports[r.level as usize].push(r.olh);
                }
                Ok(agg)
            })
            .collect();
        let mut total = self.aggregator();
        for p in parts {
            let p = p?;
            for (dst, src) in total.reports.iter_mut().zip(p.reports) {
                dst.extend(src);
            }
        }
        Ok(total)
    }
}

/// Server state: the reports of each level (kept, because level j's candidates depend on level
/// j − 1's estimates). Mergeable; `estimate` runs the level-by-level search.
#[derive(Debug, Clone)]
pub struct HeavyHitterAggregator {
    protocol: PrefixProtocol,
    reports: Vec<Vec<OlhReport>>,
}

impl HeavyHitterAggregator {
    /// Unbiased estimates (with standard errors) of the frequencies of the given prefixes of
    /// level `level` (each < 2^ℓ_level), from that level's reports. Rayon over report chunks.
    pub fn estimate_candidates(&self, level: usize, prefixes: &[u64]) -> Result<FrequencyEstimate> {
        let reports = self
            .reports
            .get(level)
            .ok_or_else(|| Error::param("level", level, format!("a level in [0, {})", self.reports.len())))?;
        let olh = &self.protocol.olh;
        let counts = crate::par::sum_chunks(reports, CHUNK, prefixes.len(), |c| olh.support_counts_for(c, prefixes))?;
        Ok(olh.pure_params().estimate_from_counts(reports.len() as u64, counts.into_iter().map(|c| c as f64)))
    }
    /// Like [`Self::estimate_candidates`] for the candidates starts\[b\] + t, t < len (blocks
    /// of consecutive prefixes, in that order): the fast path of the level search.
    pub fn estimate_blocks(&self, level: usize, starts: &[u64], len: usize) -> Result<FrequencyEstimate> {
        let reports = self
            .reports
            .get(level)
            .ok_or_else(|| Error::param("level", level, format!("a level in [0, {})", self.reports.len())))?;
        let olh = &self.protocol.olh;
        let g = olh.g();
        let total = starts.len() * len;
        let counts = crate::par::sum_chunks(reports, CHUNK, total, |c| {
            let mut t = vec![0u32; total];
            count_blocks(g, c, starts, len, &mut t);
            Ok::<_, Error>(t)
        })?;
        Ok(olh.pure_params().estimate_from_counts(reports.len() as u64, counts.into_iter().map(|c| c as f64)))
    }
}

impl Aggregator for HeavyHitterAggregator {
    type Report = HeavyHitterReport;
    type Output = Result<HeavyHitters>;

    fn validate(&self, r: &HeavyHitterReport) -> Result<()> {
        self.protocol.validate_report(r)
    }
    fn add_unchecked(&mut self, r: &HeavyHitterReport) {
        self.reports[r.level as usize].push(r.olh);
    }
    fn merge(&mut self, other: &Self) -> Result<()> {
        harmony_core::aggregate::check_compatible("heavy-hitter protocol", &self.protocol, &other.protocol)?;
        for (dst, src) in self.reports.iter_mut().zip(&other.reports) {
            dst.extend_from_slice(src);
        }
        Ok(())
    }
    fn count(&self) -> u64 {
        self.level_counts().iter().sum()
    }
    /// The level-by-level search for one item per device ([`LevelOracle::estimate_sets`] with L = 1).
    /// Errors: a level without reports.
    fn estimate(&self) -> Result<HeavyHitters> {
        self.estimate_sets(1)
    }
}

impl LevelOracle for HeavyHitterAggregator {
    fn tree(&self) -> &PrefixTree {
        &self.protocol.tree
    }
    fn level_reports(&self, level: usize) -> u64 {
        self.reports.get(level).map_or(0, |r| r.len() as u64)
    }
    fn estimate_level_blocks(&self, level: usize, starts: &[u64], len: usize) -> Result<FrequencyEstimate> {
        self.estimate_blocks(level, starts, len)
    }
    /// √(Var*/n).
    fn null_se(&self, n: u64) -> f64 {
        (self.protocol.olh.pure_params().aggregate_variance(0.0) / n as f64).sqrt()
    }
    /// The module docs' formula,
    /// L·√([Var*_OLH + f(1 − p − q)/(p − q) + f(1 − 1/L) + (f/L − f²)(n − n_j)/(n − 1)]/n_j)
    /// ([`super::tree::item_std_error`] with OLH's per-report variance).
    fn item_std_error(&self, f: f64, n_j: u64, n: u64, pad: usize) -> f64 {
        let olh = self.protocol.olh.pure_params();
        super::tree::item_std_error(|f| olh.aggregate_variance(f), f, n_j, n, pad)
    }
}

impl harmony_core::state::SaveState for HeavyHitterAggregator {
    fn save_state(&self, w: &mut harmony_core::state::StateWriter<'_>) {
        w.len(self.reports.len());
        for level in &self.reports {
            w.len(level.len());
            for o in level {
                w.u64(o.seed);
                w.u64(u64::from(o.y));
            }
        }
    }
    fn merge_state(&mut self, r: &mut harmony_core::state::StateReader<'_>) -> Result<()> {
        r.len_exactly("levels", self.reports.len())?;
        for level in 0..self.reports.len() {
            let n = r.len_any("level reports", 16)?;
            self.reports[level].reserve(n);
            for _ in 0..n {
                let seed = r.u64("report seed")?;
                let y = u32::try_from(r.u64("report value")?).unwrap_or(u32::MAX);
                let report = HeavyHitterReport { level: level as u16, olh: OlhReport { seed, y } };
                self.protocol.validate_report(&report)?;
                self.reports[level].push(report.olh);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A Zipf-like population over 24-bit codes: item r (r = 0..200) held by a share ∝ 1/(r+1)
    /// of 60% of users, the rest unique-ish noise.
    pub(crate) fn population(n: usize, bits: u32) -> (Vec<u64>, Vec<(u64, f64)>) {
        let top: Vec<u64> = (0..200u64).map(|r| harmony_core::sampling::splitmix64(r + 1) >> (64 - bits)).collect();
        let h: f64 = (1..=200).map(|r| 1.0 / r as f64).sum();
        let mut codes = Vec::with_capacity(n);
        let mut acc = 0.0;
        for (r, &c) in top.iter().enumerate() {
            acc += 0.6 * (1.0 / (r + 1) as f64) / h;
            while (codes.len() as f64) < acc * n as f64 {
                codes.push(c);
            }
        }
        let mut i = 0u64;
        while codes.len() < n {
            codes.push(harmony_core::sampling::splitmix64(1_000_000 + i) >> (64 - bits));
            i += 1;
        }
        let mut freq: Vec<(u64, f64)> =
            top.iter().map(|&c| (c, codes.iter().filter(|&&x| x == c).count() as f64 / n as f64)).collect();
        freq.sort_by(|a, b| b.1.total_cmp(&a.1));
        (codes, freq)
    }

    /// The block kernel counts exactly what `Olh::support_counts_for` counts.
    #[test]
    fn block_kernel_matches_olh_hash() {
        let p = PrefixProtocol::pem(1.5, 20, 4).unwrap();
        let mut rng = fast_rng(21);
        let mut agg = p.aggregator();
        for i in 0..3000u64 {
            let r = p.randomize(i * 7919 % (1 << 20), &mut rng).unwrap();
            agg.add(&HeavyHitterReport { level: 0, olh: r.olh }).unwrap();
        }
        // Blocks below 2³², across 2³² and near 2⁶⁴ (the hash's high half in play).
        let starts = [0u64, 64, 1000, 4093, (1 << 32) - 5, (1 << 63) + 7, u64::MAX - 40];
        for len in [1usize, 3, 8, 19] {
            let keys: Vec<u64> = starts.iter().flat_map(|&s| (0..len as u64).map(move |t| s.wrapping_add(t))).collect();
            let want = p.olh().support_counts_for(&agg.reports[0], &keys).unwrap();
            let got = agg.estimate_blocks(0, &starts, len).unwrap();
            let direct = agg.estimate_candidates(0, &keys).unwrap();
            assert_eq!(got.frequencies, direct.frequencies, "len {len}");
            assert!(want.iter().any(|&c| c > 0));
        }
    }

    #[test]
    fn schedule_is_even_and_validated() {
        assert_eq!(schedule(32, 12, 7).unwrap(), vec![12, 19, 26, 32]);
        assert_eq!(schedule(10, 12, 7).unwrap(), vec![10]);
        assert_eq!(schedule(32, 5, 1).unwrap().len(), 28);
        assert!(schedule(32, 0, 1).is_err());
        assert!(schedule(32, 4, 0).unwrap_err().to_string().contains("bits per level"));
    }

    #[test]
    fn constructor_errors_name_the_parameter() {
        let e = PrefixProtocol::pem(1.0, 32, 0).unwrap_err().to_string();
        assert!(e.contains('k') && e.contains('0'), "{e}");
        let e = PrefixProtocol::pem(1.0, 3, 8).unwrap_err().to_string();
        assert!(e.contains("[1, 7]"), "{e}");
        assert!(PrefixProtocol::pem(f64::NAN, 32, 5).is_err());
        let e = PrefixProtocol::new(1.0, 32, vec![12, 12, 32], 5, Pruning::TopK { width: 5 }).unwrap_err();
        assert!(e.to_string().contains("levels"), "{e}");
        let e = PrefixProtocol::new(1.0, 32, vec![10, 32], 5, Pruning::TopK { width: 5 }).unwrap_err();
        assert!(e.to_string().contains("bits per level"), "{e}");
    }

    #[test]
    fn empty_level_is_an_error_and_bad_reports_are_rejected() {
        let p = PrefixProtocol::pem(2.0, 24, 5).unwrap();
        let mut agg = p.aggregator();
        let mut rng = fast_rng(3);
        agg.add(&p.randomize(7, &mut rng).unwrap()).unwrap();
        assert!(agg.estimate().unwrap_err().to_string().contains("at least one report"));
        assert!(agg.add(&HeavyHitterReport { level: 9, olh: OlhReport { seed: 0, y: 0 } }).is_err());
        assert!(agg.add(&HeavyHitterReport { level: 0, olh: OlhReport { seed: 0, y: 1 << 20 } }).is_err());
        assert!(p.randomize(1 << 24, &mut rng).is_err());
    }

    /// PEM finds the top 10 of a Zipf population at ε = 4 (n = 200k, 24-bit codes), and the
    /// merged aggregator of two halves gives the same answer as one.
    #[test]
    fn pem_finds_the_top_items() {
        let n = 200_000;
        let (codes, freq) = population(n, 24);
        let p = PrefixProtocol::pem(4.0, 24, 10).unwrap();
        let agg = p.collect_parallel(n, 5, |i, _| codes[i]).unwrap();
        let hh = agg.estimate().unwrap();
        let truth: Vec<u64> = freq.iter().take(10).map(|x| x.0).collect();
        let found: Vec<u64> = hh.items.iter().map(|h| h.code).collect();
        let (_, _, f1) = super::super::precision_recall_f1(&found, &truth);
        assert!(f1 >= 0.8, "F1 {f1}: {hh:?}");
        for h in &hh.items {
            let f = freq.iter().find(|x| x.0 == h.code).map_or(0.0, |x| x.1);
            assert!((h.estimate - f).abs() < 4.42 * h.std_error, "{h:?} vs {f}");
        }
        assert_eq!(hh.levels.iter().map(|l| l.users).sum::<u64>(), n as u64);
        let mut a = p.aggregator();
        let mut b = p.aggregator();
        let mut rng = fast_rng(9);
        for (i, &c) in codes.iter().enumerate().take(1000) {
            let r = p.randomize(c, &mut rng).unwrap();
            if i % 2 == 0 { a.add(&r).unwrap() } else { b.add(&r).unwrap() }
        }
        a.merge(&b).unwrap();
        assert_eq!(a.count(), 1000);
    }

    /// A level's candidate estimates are unbiased with the closed-form variance: at level 0
    /// (all 2^12 prefixes, fixed candidates) every z-score |f̂ − f|/σ(f) is below 5.0 (two-sided
    /// 5.7e-7 each, 2.3e-3 for the 4096 together), and the mean of z² is 1 within
    /// 4.42·√(2/4096) (chi-square, z = 4.42 ↔ 1e-5), σ(f) being the exact variance at the true f.
    #[test]
    fn level_estimates_are_unbiased_with_closed_form_variance() {
        let n = 150_000;
        let (codes, _) = population(n, 24);
        let p = PrefixProtocol::pem(1.0, 24, 10).unwrap();
        let agg = p.collect_parallel(n, 77, |i, _| codes[i]).unwrap();
        let l0 = p.levels()[0];
        let prefixes: Vec<u64> = (0..1u64 << l0).collect();
        let mut truth = vec![0f64; prefixes.len()];
        for &c in &codes {
            truth[(c >> (24 - l0)) as usize] += 1.0 / n as f64;
        }
        let est = agg.estimate_candidates(0, &prefixes).unwrap();
        let nj = est.n as f64;
        let pp = p.olh().pure_params();
        let mut sum_z2 = 0.0;
        for (v, &f) in truth.iter().enumerate() {
            let sd = (pp.aggregate_variance(f) / nj).sqrt();
            let z = (est.frequencies[v] - f) / sd;
            assert!(z.abs() < 5.0, "prefix {v}: estimate {}, truth {f}, sd {sd}, n_j {nj}", est.frequencies[v]);
            sum_z2 += z * z;
        }
        let mean_z2 = sum_z2 / truth.len() as f64;
        let tol = 4.42 * (2.0 / truth.len() as f64).sqrt();
        assert!((mean_z2 - 1.0).abs() < tol, "mean z² {mean_z2}, tolerance {tol}");
    }
}
