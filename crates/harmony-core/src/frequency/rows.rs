//! What the row-and-bits sketch oracles share ([`Cms`](super::Cms): row = hash function;
//! [`Rappor`](super::Rappor): row = cohort): a report is a row index and m bits; the batch form
//! packs many reports into two flat buffers (no allocation per report); the aggregators keep,
//! per row, the number of reports and the number of reports with each bit set, in the unary
//! aggregator's bit-sliced counters (16 reports of a row are added with one carry-save pass).

use super::unary::BitSlicedCounts;
use crate::aggregate::at_index;
use crate::error::{Error, Result};
use crate::sampling::{BernoulliWords, padding_mask};
use rand::Rng;

/// Reports of a row-and-bits oracle packed without a per-report allocation: report i is row
/// `rows[i]` with bits `bits[i·w..(i+1)·w]`, w = ⌈m/64⌉ words (bit b is bit b % 64 of word
/// b / 64; padding bits zero).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PackedRows {
    /// Row index of each report.
    pub rows: Vec<u32>,
    /// The reports' bits, w words each.
    pub bits: Vec<u64>,
}

impl PackedRows {
    /// An empty buffer.
    pub fn new() -> Self {
        Self::default()
    }
    /// Number of reports.
    pub fn len(&self) -> usize {
        self.rows.len()
    }
    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
    /// Empties both buffers, keeping their allocations.
    pub fn clear(&mut self) {
        self.rows.clear();
        self.bits.clear();
    }
    /// Report i as (row, bits), for reports of `words` words.
    pub fn get(&self, i: usize, words: usize) -> (u32, &[u64]) {
        (self.rows[i], &self.bits[i * words..(i + 1) * words])
    }
}

/// Checks a report of `rows` rows and m bits: the row index (named `row_field`), the word
/// count and the padding bits.
pub(crate) fn validate(row_field: &str, row: u32, rows: usize, bits: &[u64], m: usize) -> Result<()> {
    if row as usize >= rows {
        return Err(Error::report(row_field, row, format!("an index in [0, {rows})")));
    }
    let words = m.div_ceil(64);
    if bits.len() != words {
        return Err(Error::report("bits", format!("{} words", bits.len()), format!("{words} words ({m} bits)")));
    }
    let pad = bits[words - 1] & !padding_mask(m);
    if pad != 0 {
        return Err(Error::report(
            "bits",
            format!("padding bits {pad:#x} set in word {}", words - 1),
            format!("zero bits at positions >= {m}"),
        ));
    }
    Ok(())
}

/// Validates a packed batch, `row_of[i]` and `bits[i·w..(i+1)·w]` per report (all of it first:
/// the error names the first bad report's index).
pub(crate) fn validate_packed(row_field: &str, row_of: &[u32], bits: &[u64], rows: usize, m: usize) -> Result<()> {
    let w = m.div_ceil(64);
    if bits.len() != row_of.len() * w {
        return Err(Error::report(
            "packed",
            format!("{} words for {} reports", bits.len(), row_of.len()),
            format!("{w} words per report ({m} bits)"),
        ));
    }
    for (i, (&row, bits)) in row_of.iter().zip(bits.chunks_exact(w)).enumerate() {
        validate(row_field, row, rows, bits, m).map_err(|e| at_index(e, i))?;
    }
    Ok(())
}

/// Bit b of a packed vector.
#[inline(always)]
pub(crate) fn bit(bits: &[u64], b: usize) -> bool {
    (bits[b / 64] >> (b % 64)) & 1 == 1
}

/// Sets bit b of a packed vector to `value` (0 or 1).
#[inline(always)]
pub(crate) fn put(bits: &mut [u64], b: usize, value: u64) {
    let word = &mut bits[b / 64];
    *word = (*word & !(1u64 << (b % 64))) | (value << (b % 64));
}

/// Appends `count` vectors of m i.i.d. Bernoulli bits (`noise`: exact for its f64 p) with zero
/// padding: one long [`BernoulliWords::fill`] run.
pub(crate) fn append_noise<R: Rng + ?Sized>(
    noise: &BernoulliWords,
    m: usize,
    count: usize,
    rng: &mut R,
    out: &mut Vec<u64>,
) {
    let w = m.div_ceil(64);
    let start = out.len();
    out.resize(start + count * w, 0);
    noise.fill(rng, &mut out[start..]);
    let last = padding_mask(m);
    out[start..].chunks_exact_mut(w).for_each(|bits| bits[w - 1] &= last);
}

/// Independent Bernoulli(p) draws handed out one at a time from 64-lane words.
#[derive(Debug, Default)]
pub(crate) struct Lanes {
    word: u64,
    left: u32,
}

impl Lanes {
    /// The next draw, 0 or 1.
    #[inline(always)]
    pub(crate) fn next<R: Rng + ?Sized>(&mut self, p: &BernoulliWords, rng: &mut R) -> u64 {
        if self.left == 0 {
            self.word = p.sample(rng);
            self.left = 64;
        }
        let b = self.word & 1;
        self.word >>= 1;
        self.left -= 1;
        b
    }
}

/// Per-row set-bit counters: for each of `rows` rows, the number of reports and, for each of
/// the m bits, the number of reports with it set (bit-sliced, see the unary aggregator).
#[derive(Debug, Clone)]
pub(crate) struct RowBits {
    m: usize,
    counters: Vec<BitSlicedCounts>,
    reports: Vec<u64>,
}

impl RowBits {
    /// Zero counters.
    pub(crate) fn new(rows: usize, m: usize) -> Self {
        RowBits {
            m,
            counters: (0..rows).map(|_| BitSlicedCounts::new(m.div_ceil(64))).collect(),
            reports: vec![0; rows],
        }
    }
    /// Adds one validated report.
    #[inline]
    pub(crate) fn add(&mut self, row: u32, bits: &[u64]) {
        self.counters[row as usize].add_one(bits);
        self.reports[row as usize] += 1;
    }
    /// Adds every report of a validated packed batch, grouped by row (a counting sort of the
    /// report indices): each row's counters then take its reports 16 at a time through one
    /// carry-save pass while they are in cache, instead of one staged report at a time in
    /// arrival order (rows interleaved at random).
    pub(crate) fn add_packed(&mut self, row_of: &[u32], bits: &[u64]) {
        let w = self.m.div_ceil(64);
        let rows = self.counters.len();
        let mut start = vec![0usize; rows + 1];
        row_of.iter().for_each(|&r| start[r as usize + 1] += 1);
        for r in 0..rows {
            start[r + 1] += start[r];
        }
        let mut next = start.clone();
        let mut order = vec![0u32; row_of.len()];
        for (i, &r) in row_of.iter().enumerate() {
            order[next[r as usize]] = i as u32;
            next[r as usize] += 1;
        }
        let report = |i: u32| &bits[i as usize * w..(i as usize + 1) * w];
        for (r, counter) in self.counters.iter_mut().enumerate() {
            let group = &order[start[r]..start[r + 1]];
            let mut sixteens = group.chunks_exact(16);
            for g in &mut sixteens {
                counter.add16(&std::array::from_fn(|k| report(g[k])));
            }
            sixteens.remainder().iter().for_each(|&i| counter.add_one(report(i)));
            self.reports[r] += group.len() as u64;
        }
    }
    /// Adds another state of the same shape.
    pub(crate) fn merge(&mut self, other: &Self) {
        self.counters.iter_mut().zip(&other.counters).for_each(|(a, b)| a.absorb(b));
        self.reports.iter_mut().zip(&other.reports).for_each(|(a, b)| *a += b);
    }
    /// Reports per row.
    pub(crate) fn reports(&self) -> &[u64] {
        &self.reports
    }
    /// Total number of reports.
    pub(crate) fn total(&self) -> u64 {
        self.reports.iter().sum()
    }
    /// Set-bit counts, row-major (`rows × m`).
    pub(crate) fn counts(&self) -> Vec<u64> {
        let mut out = Vec::with_capacity(self.counters.len() * self.m);
        for c in &self.counters {
            out.extend_from_slice(&c.totals()[..self.m]);
        }
        out
    }
}

impl crate::state::SaveState for RowBits {
    fn save_state(&self, w: &mut crate::state::StateWriter<'_>) {
        w.u64s(&self.reports);
        crate::state::save_all(w, &self.counters);
    }
    fn merge_state(&mut self, r: &mut crate::state::StateReader<'_>) -> crate::error::Result<()> {
        r.add_u64s("reports per row", &mut self.reports)?;
        crate::state::merge_all(r, "rows", &mut self.counters)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sampling::fast_rng;

    #[test]
    fn row_counts_equal_naive_counts_and_merge() {
        let (rows, m) = (3usize, 70usize);
        let mut rng = fast_rng(11);
        let mut packed = PackedRows::new();
        let noise = BernoulliWords::new(0.3);
        let n = 5000;
        append_noise(&noise, m, n, &mut rng, &mut packed.bits);
        packed.rows.extend((0..n).map(|i| (i * 7 % rows) as u32));
        validate_packed("row", &packed.rows, &packed.bits, rows, m).unwrap();
        let mut naive = vec![0u64; rows * m];
        for i in 0..n {
            let (r, bits) = packed.get(i, 2);
            for b in 0..m {
                naive[r as usize * m + b] += bit(bits, b) as u64;
            }
        }
        let mut a = RowBits::new(rows, m);
        a.add_packed(&packed.rows, &packed.bits);
        assert_eq!(a.counts(), naive);
        let mut b = RowBits::new(rows, m);
        let mut c = RowBits::new(rows, m);
        for i in 0..n {
            let (r, bits) = packed.get(i, 2);
            if i % 3 == 0 { b.add(r, bits) } else { c.add(r, bits) }
        }
        b.merge(&c);
        assert_eq!(b.counts(), naive);
        assert_eq!(b.total(), n as u64);
        assert_eq!(b.reports().iter().sum::<u64>(), n as u64);
    }

    #[test]
    fn validation_names_the_field() {
        let e = validate("cohort", 4, 4, &[0, 0], 70).unwrap_err().to_string();
        assert!(e.contains("cohort is 4") && e.contains("[0, 4)"), "{e}");
        let e = validate("j", 0, 4, &[0], 70).unwrap_err().to_string();
        assert!(e.contains("bits is \"1 words\"") && e.contains("2 words (70 bits)"), "{e}");
        let e = validate("j", 0, 4, &[0, 1 << 6], 70).unwrap_err().to_string();
        assert!(e.contains("padding"), "{e}");
        let bad = PackedRows { rows: vec![0, 9], bits: vec![0; 4] };
        let e = validate_packed("j", &bad.rows, &bad.bits, 4, 70).unwrap_err().to_string();
        assert!(e.contains("report 1: j is 9"), "{e}");
        let short = PackedRows { rows: vec![0], bits: vec![0; 3] };
        assert!(validate_packed("j", &short.rows, &short.bits, 4, 70).unwrap_err().to_string().contains("packed"));
    }

    #[test]
    fn noise_pads_with_zeros_and_lanes_are_bernoulli() {
        let mut rng = fast_rng(12);
        let mut out = Vec::new();
        append_noise(&BernoulliWords::new(1.0), 70, 5, &mut rng, &mut out);
        assert!(out.chunks_exact(2).all(|b| b[0] == u64::MAX && b[1] == (1 << 6) - 1));
        let p = BernoulliWords::new(0.25);
        let mut lanes = Lanes::default();
        let n = 100_000;
        let ones: u64 = (0..n).map(|_| lanes.next(&p, &mut rng)).sum();
        let z = (ones as f64 - 0.25 * n as f64) / (n as f64 * 0.25 * 0.75).sqrt();
        assert!(z.abs() < crate::estimate::Z_TEST, "{ones} ones of {n}, z = {z}");
    }
}
