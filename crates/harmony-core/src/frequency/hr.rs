//! Hadamard Response, general block form (Acharya–Sun–Zhang, AISTATS'19; docs/MECHANISMS.md §A6).
//!
//! Parameters: B = 2^⌊log₂ min(e^ε, 2d)⌋ blocks (B = 1 if e^ε < 2), block size
//! b = 2^⌈log₂(d/B + 1)⌉ (the smallest power of two with (b − 1)·B ≥ d), K = B·b outputs and
//! D = 2B − 1 + e^ε. Item x lives in block j = ⌊x/(b − 1)⌋ and uses row r = (x mod (b − 1)) + 1
//! of H_b; C_x = {j·b + y' : H_b[r, y'] = +1} (|C_x| = b/2).
//!
//! Sampling: with probability 2B/D output uniform on \[K\], otherwise uniform on C_x. Then
//! P[y | x] = 2e^ε/(bD) on C_x and 2/(bD) elsewhere. A report y contributes ±D/(e^ε − 1) to the
//! items of its block (+ if y ∈ C_v) and 0 to all others; the server histograms the reports and
//! runs one FWHT of size b per block: O(n + K log b).

use super::FrequencyOracle;
use super::fwht::{fwht, hadamard_entry, hadamard_positive};
use crate::aggregate::{Aggregator, at_index, check_compatible};
use crate::error::{Error, Result};
use crate::estimate::FrequencyEstimate;
use crate::params::{Epsilon, check_domain};
use crate::sampling::{Bernoulli, BernoulliWords, uniform_below, uniform_below_from};
use crate::wire::{ReportKind, WireKind, WireReport};
use rand::Rng;
use serde::{Deserialize, Serialize};

/// Hadamard Response (general block form).
///
/// # Privacy
/// P[y | x] = 2e^ε/(bD) for y ∈ C_x and 2/(bD) for every other y ∈ \[K\]: (b/2)·2e^ε/(bD) +
/// (K − b/2)·2/(bD) = (e^ε + 2B − 1)/D = 1. Any output's ratio between two inputs is at most
/// e^ε, attained on C_x ∖ C_x': exactly ε-LDP.
///
/// # Utility
/// One report's estimate has mean 1[x = v] and variance
/// D(2 + (e^ε − 1)·1[x ∈ block(v)])/(e^ε − 1)² − 1[x = v], so
/// `Var = [ D(2 + (e^ε − 1)π_v)/(e^ε − 1)² − f_v ] / n` where π_v is the total frequency of
/// v's block (standard errors plug in the estimated block mass). Worst case (π_v = 1):
/// D(e^ε + 1)/((e^ε − 1)² n). HR minimises the *total* error; for a single item at large ε,
/// OUE or GRR is better. Report: log₂ K bits.
///
/// # Example
/// ```
/// use harmony_core::frequency::HadamardResponse;
/// use harmony_core::{Aggregator, FrequencyOracle};
/// let hr = HadamardResponse::new(3.0, 100).unwrap();
/// let mut rng = harmony_core::sampling::fast_rng(42);
/// let mut agg = hr.aggregator();
/// for i in 0..5000 {
///     agg.add(&hr.randomize(if i % 4 == 0 { 42 } else { i % 20 }, &mut rng).unwrap()).unwrap();
/// }
/// let est = agg.estimate();
/// assert!((est.frequencies[42] - 0.25).abs() < 5.0 * est.std_errors[42]);
/// assert!((est.frequencies[90] - 0.0).abs() < 5.0 * est.std_errors[90]);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct HadamardResponse {
    eps: Epsilon,
    d: usize,
    blocks: usize,
    b: usize,
    k: usize,
    /// D = 2B − 1 + e^ε.
    big_d: f64,
    /// 2B/D: probability of the uniform branch.
    uniform: Bernoulli,
    /// D/(e^ε − 1): the magnitude of one report's contribution.
    scale: f64,
    /// 2e^ε/(bD) and 2/(bD).
    p_in: f64,
    p_out: f64,
}

/// A Hadamard Response report: one output index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct HrReport {
    /// The output, in [0, K).
    pub y: u32,
}

impl WireReport for HrReport {
    const KIND: WireKind = ReportKind::HadamardResponse.wire();
}

impl HadamardResponse {
    /// Hadamard Response with budget `epsilon` over [0, d). Errors: ε not finite and > 0,
    /// d < 2, or K = B·b ≥ 2^32.
    pub fn new(epsilon: f64, d: usize) -> Result<Self> {
        let eps = Epsilon::new(epsilon)?;
        let d = check_domain("d", d)?;
        let e = eps.exp();
        // B: the largest power of two ≤ min(e, 2d) (1 if e < 2); compared in integers.
        let m = if e >= (2 * d) as f64 { 2 * d as u64 } else { e.floor() as u64 };
        let blocks = if m < 2 { 1 } else { 1usize << (63 - m.leading_zeros()) };
        let b = (d.div_ceil(blocks) + 1).next_power_of_two();
        let k = blocks * b;
        if k > u32::MAX as usize {
            return Err(Error::param("d", d, format!("a domain whose HR output space K = {k} fits in 32 bits")));
        }
        let big_d = 2.0 * blocks as f64 - 1.0 + e;
        let e_over_d = 1.0 / (1.0 + (2.0 * blocks as f64 - 1.0) * (-eps.value()).exp());
        Ok(HadamardResponse {
            eps,
            d,
            blocks,
            b,
            k,
            big_d,
            uniform: Bernoulli::new(2.0 * blocks as f64 / big_d),
            scale: big_d / eps.exp_m1(),
            p_in: 2.0 / b as f64 * e_over_d,
            p_out: 2.0 / (b as f64 * big_d),
        })
    }
    /// B: the number of blocks.
    pub fn blocks(&self) -> usize {
        self.blocks
    }
    /// b: the block size (a power of two; each block holds b − 1 items).
    pub fn block_size(&self) -> usize {
        self.b
    }
    /// K = B·b: the number of outputs.
    pub fn outputs(&self) -> usize {
        self.k
    }
    /// D = 2B − 1 + e^ε.
    pub fn big_d(&self) -> f64 {
        self.big_d
    }
    /// Block j and Hadamard row r of item x.
    #[inline]
    fn locate(&self, x: usize) -> (usize, u64) {
        (x / (self.b - 1), (x % (self.b - 1)) as u64 + 1)
    }
    /// Items of block j: [j(b − 1), min((j + 1)(b − 1), d)).
    fn block_items(&self, j: usize) -> std::ops::Range<usize> {
        (j * (self.b - 1)).min(self.d)..((j + 1) * (self.b - 1)).min(self.d)
    }
    /// P[report | x] from the oracle's constants (0 if y ≥ K or x ≥ d).
    pub fn output_probability(&self, x: usize, r: &HrReport) -> f64 {
        let y = r.y as usize;
        if y >= self.k || x >= self.d {
            return 0.0;
        }
        let (j, row) = self.locate(x);
        if y / self.b == j && hadamard_positive(row, (y % self.b) as u64) { self.p_in } else { self.p_out }
    }
}

impl FrequencyOracle for HadamardResponse {
    type Report = HrReport;
    type Aggregator = HrAggregator;

    fn name(&self) -> &'static str {
        "hr"
    }
    fn epsilon(&self) -> Epsilon {
        self.eps
    }
    fn domain_size(&self) -> usize {
        self.d
    }
    #[inline]
    fn randomize_unchecked<R: Rng + ?Sized>(&self, v: usize, rng: &mut R) -> HrReport {
        if self.uniform.sample(rng) {
            return HrReport { y: uniform_below(rng, self.k as u64) as u32 };
        }
        let (j, row) = self.locate(v);
        let mut y = uniform_below(rng, self.b as u64);
        if !hadamard_positive(row, y) {
            // Flipping the lowest set bit of the row flips the parity: a bijection onto C_x.
            y ^= row & row.wrapping_neg();
        }
        HrReport { y: (j * self.b) as u32 + y as u32 }
    }
    /// 64 uniform-branch decisions per [`BernoulliWords`] draw and one random word per report,
    /// used by whichever branch the decision picks (both are computed, then selected: no
    /// unpredictable branch); the block of v by a multiply (Lemire–Kaser–Kurz exact division for
    /// 32-bit dividends) instead of a division.
    fn randomize_batch<R: Rng + ?Sized>(&self, vs: &[usize], rng: &mut R, out: &mut Vec<HrReport>) -> Result<()> {
        super::check_batch(vs, self.d)?;
        out.reserve(vs.len());
        let uniform = BernoulliWords::new(self.uniform.probability());
        let (k, b) = (self.k as u64, self.b as u64);
        let shift = 64 - b.trailing_zeros();
        let m = b - 1; // 1 or odd ≥ 3: never divides 2^64 unless 1
        let magic = if m > 1 { u64::MAX / m + 1 } else { 0 }; // ⌈2^64/m⌉
        for chunk in vs.chunks(64) {
            let mut pick = uniform.sample(rng);
            for &v in chunk {
                let x = v as u64; // < d < 2^32
                let j = if m > 1 { ((magic as u128 * x as u128) >> 64) as u64 } else { x };
                let row = x - j * m + 1;
                let r = rng.next_u64();
                let any = uniform_below_from(rng, r, k);
                let mut y = r >> shift;
                y ^= (row & row.wrapping_neg()) & 0u64.wrapping_sub(((row & y).count_ones() & 1) as u64);
                let own = j * b + y;
                out.push(HrReport { y: if pick & 1 == 1 { any } else { own } as u32 });
                pick >>= 1;
            }
        }
        Ok(())
    }
    fn validate_report(&self, r: &HrReport) -> Result<()> {
        if r.y as usize >= self.k {
            return Err(Error::report("y", r.y, format!("an output in [0, {})", self.k)));
        }
        Ok(())
    }
    fn aggregator(&self) -> HrAggregator {
        HrAggregator { oracle: self.clone(), hist: vec![0; self.k], n: 0 }
    }
    fn report_variance(&self, x: usize, v: usize) -> f64 {
        let same_block = self.locate(x).0 == self.locate(v).0;
        self.scale * (2.0 / self.eps.exp_m1() + same_block as u8 as f64) - (x == v) as u8 as f64
    }
    fn worst_case_variance(&self) -> f64 {
        let base = 2.0 / self.eps.exp_m1();
        let same = self.scale * (base + 1.0);
        // b ≥ 4: block 0 holds two items x ≠ v; b = 2: one item per block.
        if self.b >= 4 { same } else { (same - 1.0).max(self.scale * base) }
    }
    fn aggregate_variance(&self, freqs: &[f64], v: usize) -> f64 {
        let mass: f64 = freqs[self.block_items(self.locate(v).0)].iter().sum();
        self.scale * (2.0 / self.eps.exp_m1() + mass) - freqs[v]
    }
    fn report_estimate(&self, r: &HrReport, v: usize) -> f64 {
        let (j, row) = self.locate(v);
        let y = r.y as usize;
        if y / self.b != j {
            return 0.0;
        }
        self.scale * hadamard_entry(row, (y % self.b) as u64) as f64
    }
}

/// Server-side HR state: a histogram of the K outputs. O(K) memory.
#[derive(Debug, Clone)]
pub struct HrAggregator {
    oracle: HadamardResponse,
    hist: Vec<u64>,
    n: u64,
}

impl HrAggregator {
    /// [`Aggregator::add_batch`] of the reports whose outputs are `ys` (`HrReport { y }` each),
    /// without building the reports: the same one-pass count and the same error, naming the
    /// first bad output's index (a numpy array of outputs, as the Python binding holds them).
    pub fn add_outputs(&mut self, ys: &[u32]) -> Result<()> {
        if !histogram(&mut self.hist, ys, |&y| y) {
            let i = ys.iter().position(|&y| y as usize >= self.oracle.k).unwrap_or(0);
            return self.validate(&HrReport { y: ys[i] }).map_err(|e| at_index(e, i));
        }
        self.n += ys.len() as u64;
        Ok(())
    }
}

impl Aggregator for HrAggregator {
    type Report = HrReport;
    type Output = FrequencyEstimate;

    fn validate(&self, r: &HrReport) -> Result<()> {
        if r.y as usize >= self.oracle.k {
            return Err(Error::report("y", r.y, format!("an output in [0, {})", self.oracle.k)));
        }
        Ok(())
    }
    #[inline]
    fn add_unchecked(&mut self, r: &HrReport) {
        self.hist[r.y as usize] += 1;
        self.n += 1;
    }
    fn add_unchecked_times(&mut self, r: &HrReport, times: u64) {
        self.hist[r.y as usize] += times;
        self.n += times;
    }
    /// The range check and the counting in one branch-free pass ([`histogram`]); on a bad
    /// report nothing is added and the error names the first one (searched only then).
    fn add_batch(&mut self, reports: &[HrReport]) -> Result<()> {
        if !histogram(&mut self.hist, reports, |r| r.y) {
            let i = reports.iter().position(|r| r.y as usize >= self.oracle.k).unwrap_or(0);
            return self.validate(&reports[i]).map_err(|e| at_index(e, i));
        }
        self.n += reports.len() as u64;
        Ok(())
    }
    fn merge(&mut self, other: &Self) -> Result<()> {
        check_compatible("hr parameters", &self.oracle, &other.oracle)?;
        self.hist.iter_mut().zip(&other.hist).for_each(|(a, b)| *a += b);
        self.n += other.n;
        Ok(())
    }
    fn count(&self) -> u64 {
        self.n
    }
    fn estimate(&self) -> FrequencyEstimate {
        let o = &self.oracle;
        let (d, n) = (o.d, self.n);
        if n == 0 {
            return FrequencyEstimate::empty(d);
        }
        let nf = n as f64;
        let mut frequencies = vec![0.0; d];
        let mut std_errors = vec![0.0; d];
        let mut t = vec![0i64; o.b];
        for j in 0..d.div_ceil(o.b - 1) {
            t.iter_mut().zip(&self.hist[j * o.b..(j + 1) * o.b]).for_each(|(a, &h)| *a = h as i64);
            fwht(&mut t);
            let items = o.block_items(j);
            for x in items.clone() {
                frequencies[x] = o.scale * t[o.locate(x).1 as usize] as f64 / nf;
            }
            let mass = frequencies[items.clone()].iter().sum::<f64>().clamp(0.0, 1.0);
            for x in items {
                let f = frequencies[x].clamp(0.0, mass);
                std_errors[x] = ((o.scale * (2.0 / o.eps.exp_m1() + mass) - f).max(0.0) / nf).sqrt();
            }
        }
        FrequencyEstimate { n, frequencies, std_errors }
    }
}

/// hist[y] += 1 for every report if every y is < K = hist.len(); false (hist unchanged)
/// otherwise. Small histograms (K ≤ 4096, at least 4K reports) are counted in four interleaved
/// u32 copies of K + 1 cells, report i into copy i mod 4 at min(y, K): consecutive reports with
/// the same output no longer wait on each other's store (store-to-load forwarding), the index is
/// in bounds by construction (no check per report), and cell K counts the bad reports, so the
/// range check costs nothing more. Larger ones: a branch-free maximum, then direct counts.
fn histogram<T>(hist: &mut [u64], reports: &[T], y: impl Fn(&T) -> u32 + Copy) -> bool {
    let k = hist.len();
    if k > 4096 || reports.len() < 4 * k {
        if reports.iter().fold(0u32, |m, r| m.max(y(r))) as usize >= k {
            return false;
        }
        reports.iter().for_each(|r| hist[y(r) as usize] += 1);
        return true;
    }
    let cells = k + 1;
    let mut lanes = vec![0u32; 4 * cells];
    let (l0, rest) = lanes.split_at_mut(cells);
    let (l1, rest) = rest.split_at_mut(cells);
    let (l2, l3) = rest.split_at_mut(cells);
    // Blocks of 2^31 reports keep every u32 cell below 2^32; `hist` changes only at the end.
    let mut total = vec![0u64; k];
    for block in reports.chunks(1 << 31) {
        let at = |r: &T| (y(r) as usize).min(k);
        let quads = block.chunks_exact(4);
        let tail = quads.remainder();
        for q in quads {
            l0[at(&q[0])] += 1;
            l1[at(&q[1])] += 1;
            l2[at(&q[2])] += 1;
            l3[at(&q[3])] += 1;
        }
        tail.iter().for_each(|r| l0[at(r)] += 1);
        if l0[k] | l1[k] | l2[k] | l3[k] != 0 {
            return false;
        }
        for (y, t) in total.iter_mut().enumerate() {
            *t += l0[y] as u64 + l1[y] as u64 + l2[y] as u64 + l3[y] as u64;
        }
        for lane in [&mut *l0, &mut *l1, &mut *l2, &mut *l3] {
            lane.fill(0);
        }
    }
    hist.iter_mut().zip(&total).for_each(|(h, t)| *h += t);
    true
}

impl crate::state::SaveState for HrAggregator {
    fn save_state(&self, w: &mut crate::state::StateWriter<'_>) {
        w.u64(self.n);
        w.u64s(&self.hist);
    }
    fn merge_state(&mut self, r: &mut crate::state::StateReader<'_>) -> Result<()> {
        self.n += r.u64("hr n")?;
        r.add_u64s("hr histogram", &mut self.hist)
    }
}

impl super::registry::Registered for HadamardResponse {
    const ADAPTIVE: bool = true;
    fn build(_: crate::kinds::OracleKind, epsilon: f64, d: usize, _: &super::registry::Params<'_>) -> Result<Self> {
        Self::new(epsilon, d)
    }
    fn output_probability(&self, x: usize, r: &HrReport) -> f64 {
        HadamardResponse::output_probability(self, x, r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `add_batch` (both histogram paths, and a bad report anywhere) equals report-by-report
    /// `add`, and names the first bad report.
    #[test]
    fn add_batch_equals_single_adds() {
        for &(d, n) in &[(16usize, 100_000usize), (16, 50), (3000, 20_000), (5000, 70_000)] {
            let hr = HadamardResponse::new(1.0, d).unwrap();
            let mut rng = fast_rng(d as u64 + n as u64);
            let mut reports = Vec::new();
            hr.randomize_batch(&(0..n).map(|i| i * 7 % d).collect::<Vec<_>>(), &mut rng, &mut reports).unwrap();
            let (mut a, mut b) = (hr.aggregator(), hr.aggregator());
            a.add_batch(&reports).unwrap();
            reports.iter().for_each(|r| b.add(r).unwrap());
            assert_eq!((a.hist.clone(), a.n), (b.hist.clone(), b.n), "d = {d}, n = {n}");
            let mut bad = reports.clone();
            bad[n / 2].y = hr.outputs() as u32;
            bad[n - 1].y = u32::MAX;
            let e = a.add_batch(&bad).unwrap_err().to_string();
            assert!(e.contains(&format!("report {}: y is", n / 2)), "{e}");
            assert_eq!(a.n, n as u64, "a rejected batch adds nothing");
            // The outputs alone (the Python binding's arrays): the same counts, the same error.
            let mut c = hr.aggregator();
            c.add_outputs(&reports.iter().map(|r| r.y).collect::<Vec<_>>()).unwrap();
            assert_eq!((c.hist.clone(), c.n), (b.hist.clone(), b.n), "add_outputs: d = {d}, n = {n}");
            let bad_ys: Vec<u32> = bad.iter().map(|r| r.y).collect();
            assert_eq!(c.add_outputs(&bad_ys).unwrap_err().to_string(), e);
            assert_eq!(c.n, n as u64, "a rejected array adds nothing");
        }
    }

    /// The batch path's output frequencies match `output_probability` cell by cell (z = 4.42,
    /// false-failure rate 1e-5 per cell), for b = 2 (the m = 1 division case) and larger blocks.
    #[test]
    fn batch_randomize_matches_output_probabilities() {
        use crate::sampling::fast_rng;
        for &(d, eps) in &[(2usize, 2.0), (5, 1.0), (37, 3.0), (300, 0.5)] {
            let hr = HadamardResponse::new(eps, d).unwrap();
            let mut rng = fast_rng(d as u64);
            for x in [0, d / 2, d - 1] {
                let n = 200_000;
                let mut out = Vec::new();
                hr.randomize_batch(&vec![x; n], &mut rng, &mut out).unwrap();
                let mut counts = vec![0u64; hr.outputs()];
                for r in &out {
                    counts[r.y as usize] += 1;
                }
                for (y, &c) in counts.iter().enumerate() {
                    let p = hr.output_probability(x, &HrReport { y: y as u32 });
                    let sd = (n as f64 * p * (1.0 - p)).sqrt();
                    assert!(
                        (c as f64 - n as f64 * p).abs() <= 4.42 * sd + 1e-9,
                        "d {d} ε {eps} x {x} y {y}: {c} vs {}",
                        n as f64 * p
                    );
                }
            }
        }
    }
    use crate::sampling::fast_rng;

    #[test]
    fn block_parameters_match_the_reference_examples() {
        // docs/MECHANISMS.md §A6: k = 100, eps = 1 -> B = 2, b = 64, worst 7.20;
        // eps = 3 -> B = 16, b = 8, worst 2.96; k = 1000, eps = 5: worst 2.77.
        let h = HadamardResponse::new(1.0, 100).unwrap();
        assert_eq!((h.blocks(), h.block_size(), h.outputs()), (2, 64, 128));
        assert!((h.worst_case_variance() - 7.20).abs() < 0.005, "{}", h.worst_case_variance());
        let h = HadamardResponse::new(3.0, 100).unwrap();
        assert_eq!((h.blocks(), h.block_size()), (16, 8));
        assert!((h.worst_case_variance() - 2.96).abs() < 0.005, "{}", h.worst_case_variance());
        let h = HadamardResponse::new(5.0, 1000).unwrap();
        assert!((h.worst_case_variance() - 2.77).abs() < 0.005, "{}", h.worst_case_variance());
        // High-privacy form: one block, K = 2^ceil(log2(d + 1)).
        let h = HadamardResponse::new(0.5, 7).unwrap();
        assert_eq!((h.blocks(), h.block_size()), (1, 8));
        // Large eps caps B at the largest power of two <= 2d.
        let h = HadamardResponse::new(20.0, 3).unwrap();
        assert_eq!((h.blocks(), h.block_size()), (4, 2));
    }

    #[test]
    fn estimate_equals_mean_of_report_estimates() {
        for &(eps, d) in &[(0.5, 13usize), (3.0, 100), (20.0, 3)] {
            let h = HadamardResponse::new(eps, d).unwrap();
            let mut rng = fast_rng(501);
            let reports: Vec<_> = (0..400).map(|i| h.randomize(i * 7 % d, &mut rng).unwrap()).collect();
            let mut a = h.aggregator();
            a.add_batch(&reports).unwrap();
            let est = a.estimate();
            for v in 0..d {
                let mean = reports.iter().map(|r| h.report_estimate(r, v)).sum::<f64>() / 400.0;
                assert!((est.frequencies[v] - mean).abs() < 1e-9 * h.scale.max(1.0), "eps {eps} d {d} v {v}");
            }
        }
    }

    #[test]
    fn aggregate_variance_is_the_weighted_report_variance() {
        let h = HadamardResponse::new(3.0, 30).unwrap();
        let f: Vec<f64> = (0..30).map(|i| 2.0 * (i + 1) as f64 / (30.0 * 31.0)).collect();
        for v in [0, 5, 7, 29] {
            let sum: f64 = f.iter().enumerate().map(|(x, &fx)| fx * h.report_variance(x, v)).sum();
            assert!((h.aggregate_variance(&f, v) - sum).abs() < 1e-12, "v = {v}");
        }
        let k = h.outputs();
        let e = h.aggregator().validate(&HrReport { y: k as u32 }).unwrap_err().to_string();
        assert!(e.contains(&format!("y is {k}")) && e.contains(&format!("[0, {k})")), "{e}");
    }
}
