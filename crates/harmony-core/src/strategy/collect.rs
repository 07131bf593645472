//! Fused collection: randomize many records and aggregate them without a [`RecordReport`] per
//! record (the simulation path of `harmony simulate`).
//!
//! [`RecordColumns`] holds a data set by attribute, validated once against the schema.
//! [`RecordAggregator::collect`] then randomizes a range of its rows as clients would and adds
//! the reports attribute by attribute: the sampled strategies first draw, for every record, which
//! attributes it reports (uniformly without replacement, as [`RecordMechanism::randomize_into`]
//! does), then each attribute's values go through its mechanism's batch kernel in one call (one
//! `match` on the oracle per attribute and batch, not per report) and straight into the
//! attribute's aggregator.
//!
//! # Same distribution as the client path
//! Every record's report is drawn from the same distribution as `randomize_into`'s: the set of
//! sampled attributes is uniform among the k-subsets, each sampled value is randomized by the same
//! oracle or numeric mechanism (their batch kernels are documented, and tested, to have the
//! distribution of `randomize_unchecked`), and records are independent. The aggregate is a sum
//! over records, so it has the distribution of adding `randomize_into`'s reports one by one.
//! Only the order in which random words are consumed differs, so a seed gives other reports than
//! the per-record path. `tests/strategy_collect.rs` checks both against the closed-form moments
//! and the exact report probabilities.

use super::{AttributeMechanism, NumSums, RecordAggregator, cards_of, check_record};
use crate::aggregate::Aggregator;
use crate::error::{Error, Result};
use crate::estimate::FrequencyEstimate;
use crate::frequency::{
    Adaptive, AdaptiveAggregator, AnyAggregator, AnyOracle, AnyReport, FrequencyOracle, Grr, Oue, PureParams,
    UnaryAggregator, UnaryEncoding,
};
use crate::numeric::{AnyNumeric, NumericMechanism, NumericReport, VectorMechanism};
use crate::sampling::{BernoulliWords, padding_mask, sample_k_of_d, uniform_below};
use crate::schema::{Schema, Value};
use rand::Rng;
use std::ops::Range;

/// Records randomized per pass of [`RecordAggregator::collect`]: bounds its scratch buffers
/// (a few tens of KiB, in cache) whatever the range.
const BATCH: usize = 2048;

/// A data set stored by attribute (one column per attribute), every value checked against the
/// schema once: the input of [`RecordAggregator::collect`].
///
/// # Example
/// ```
/// use harmony_core::sampling::fast_rng;
/// use harmony_core::schema::{Attribute, Schema, Value};
/// use harmony_core::strategy::{AttributeEstimate, RecordColumns, RecordMechanism, StrategyKind, StrategyOptions};
/// let schema = Schema::new(vec![
///     Attribute::Categorical { name: "sex".into(), categories: vec!["f".into(), "m".into()] },
///     Attribute::Numeric { name: "age".into(), min: 0.0, max: 100.0 },
/// ])
/// .unwrap();
/// // 4000 records, row-major: 25% "m", age 50 (0 on [-1, 1]).
/// let rows: Vec<Value> =
///     (0..4000).flat_map(|i| [Value::Category((i % 4 == 0) as u32), Value::Unit(0.0)]).collect();
/// let data = RecordColumns::new(&schema, &rows).unwrap();
/// let mech = RecordMechanism::new(schema, StrategyOptions::default_for(StrategyKind::SampleK, 2.0)).unwrap();
/// let mut agg = mech.aggregator();
/// agg.collect(&data, 0..data.len(), &mut fast_rng(7)).unwrap();
/// let AttributeEstimate::Categorical(sex) = &agg.estimates()[0] else { unreachable!() };
/// assert!((sex.frequencies[1] - 0.25).abs() < 5.0 * sex.std_errors[1]);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct RecordColumns {
    n: usize,
    cards: Vec<u32>,
    columns: Vec<Column>,
}

#[derive(Debug, Clone, PartialEq)]
enum Column {
    /// Values on [-1, 1].
    Numeric(Vec<f64>),
    /// Category indices, each below the attribute's category count.
    Categorical(Vec<usize>),
}

/// Prefixes an input error with the row it comes from.
fn at_row(e: Error, i: usize) -> Error {
    match e {
        Error::InvalidInput { name, value, expected } => {
            Error::InvalidInput { name: format!("row {i}: {name}"), value, expected }
        }
        other => other,
    }
}

impl RecordColumns {
    /// Splits row-major records (d values each, encoded by [`Schema::encode`]) into columns.
    /// Errors: a length that is not a multiple of d, or a bad value — the error of
    /// [`RecordMechanism::check_record`](super::RecordMechanism::check_record) for the first bad
    /// record, prefixed with its row index (`row 7: age is Category(3), expected …`).
    pub fn new(schema: &Schema, rows: &[Value]) -> Result<Self> {
        let d = schema.len();
        if d == 0 || !rows.len().is_multiple_of(d) {
            return Err(Error::input(
                "rows",
                format!("{} values", rows.len()),
                format!("a multiple of the schema's {d} attributes (one record per row)"),
            ));
        }
        let n = rows.len() / d;
        let cards = cards_of(schema);
        for (i, record) in rows.chunks_exact(d).enumerate() {
            check_record(schema, &cards, record).map_err(|e| at_row(e, i))?;
        }
        let columns = cards
            .iter()
            .enumerate()
            .map(|(j, &card)| {
                let cells = rows.iter().skip(j).step_by(d);
                if card == 0 {
                    Column::Numeric(cells.map(|v| if let Value::Unit(t) = *v { t } else { 0.0 }).collect())
                } else {
                    Column::Categorical(
                        cells.map(|v| if let Value::Category(c) = *v { c as usize } else { 0 }).collect(),
                    )
                }
            })
            .collect();
        Ok(RecordColumns { n, cards, columns })
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.n
    }

    /// True when there are no records.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }
}

/// Counts by category of the reports a pure oracle (GRR, SUE, OUE, adaptive) received through
/// [`RecordAggregator::collect`]: the sufficient statistic of its estimator, kept beside the
/// oracle's own aggregator (which holds the reports added one by one).
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Tally {
    n: u64,
    /// Reports supporting each category; empty for attributes without a pure oracle.
    counts: Vec<u64>,
}

/// The pure oracle behind `o` (the adaptive oracle's branch), if any.
enum Pure<'a> {
    Grr(&'a Grr),
    Unary(&'a UnaryEncoding),
}

fn pure(o: &AnyOracle) -> Option<Pure<'_>> {
    match o {
        AnyOracle::Grr(g) | AnyOracle::Adaptive(Adaptive::Grr(g)) => Some(Pure::Grr(g)),
        AnyOracle::Sue(u) | AnyOracle::Oue(u) | AnyOracle::Adaptive(Adaptive::Oue(u)) => Some(Pure::Unary(u)),
        _ => None,
    }
}

impl Tally {
    /// An empty tally for attribute mechanism `m` (no counts unless it is a pure oracle).
    pub(super) fn for_mechanism(m: &AttributeMechanism) -> Self {
        match m {
            AttributeMechanism::Categorical(o) if pure(o).is_some() => Tally { n: 0, counts: vec![0; o.domain_size()] },
            _ => Tally::default(),
        }
    }

    /// Reports counted.
    pub(super) fn n(&self) -> u64 {
        self.n
    }

    pub(super) fn merge(&mut self, other: &Tally) {
        self.n += other.n;
        self.counts.iter_mut().zip(&other.counts).for_each(|(a, b)| *a += b);
    }
}

/// The frequency estimate of a categorical attribute from its oracle's aggregator and its tally:
/// the aggregator's own estimate when the tally is empty, else the oracle's estimator
/// ([`PureParams::estimate_from_counts`], as `GrrAggregator`/`UnaryAggregator::estimate`) on the
/// summed counts.
pub(super) fn categorical_estimate(o: &AnyOracle, agg: &AnyAggregator, tally: &Tally) -> FrequencyEstimate {
    if tally.n == 0 {
        return agg.estimate();
    }
    let (pp, own): (PureParams, Vec<u64>) = match (pure(o), agg) {
        (Some(Pure::Grr(g)), AnyAggregator::Grr(a) | AnyAggregator::Adaptive(AdaptiveAggregator::Grr(a))) => {
            (g.pure_params(), a.counts().to_vec())
        }
        (Some(Pure::Unary(u)), AnyAggregator::Unary(a) | AnyAggregator::Adaptive(AdaptiveAggregator::Oue(a))) => {
            (u.pure_params(), a.counts())
        }
        // A tally exists only for the pure oracles matched above.
        _ => return agg.estimate(),
    };
    let counts = own.iter().zip(&tally.counts).map(|(&a, &b)| (a + b) as f64);
    pp.estimate_from_counts(agg.count() + tally.n, counts)
}

/// Uniform draws in [0, m): from 16-bit slices of random words (four draws per word) when
/// m ≤ 256, else one word per draw. Exact either way: Lemire's multiply-shift, where a slice in
/// the rejection zone (probability (2^16 mod m)/2^16 < 2^-8) is replaced by a fresh full-word
/// draw ([`uniform_below`]), so every draw is uniform and independent of the others.
#[derive(Debug, Clone, Copy)]
enum Below {
    Slice { m: u32, reject: u32 },
    Word { m: u64 },
}

/// A random word consumed 16 bits at a time.
#[derive(Default)]
struct Slices {
    word: u64,
    left: u32,
}

impl Below {
    fn new(m: usize) -> Self {
        debug_assert!(m >= 1);
        if m <= 256 {
            Below::Slice { m: m as u32, reject: (1u32 << 16) % m as u32 }
        } else {
            Below::Word { m: m as u64 }
        }
    }

    #[inline(always)]
    fn draw<R: Rng + ?Sized>(self, slices: &mut Slices, rng: &mut R) -> usize {
        match self {
            Below::Slice { m, reject } => {
                if slices.left == 0 {
                    slices.word = rng.next_u64();
                    slices.left = 4;
                }
                let x = slice_below(slices.word, m, reject, rng);
                slices.word >>= 16;
                slices.left -= 1;
                x
            }
            Below::Word { m } => uniform_below(rng, m) as usize,
        }
    }
}

/// Uniform in [0, m) from the low 16 bits of `r` (Lemire), exact: a slice in the rejection zone
/// is replaced by a fresh full-word draw. m ≤ 256 and reject = 2^16 mod m.
#[inline(always)]
fn slice_below<R: Rng + ?Sized>(r: u64, m: u32, reject: u32, rng: &mut R) -> usize {
    let x = (r as u32 & 0xFFFF) * m;
    if (x & 0xFFFF) < reject { uniform_below(rng, m as u64) as usize } else { (x >> 16) as usize }
}

/// Bernoulli lanes of a [`BernoulliWords`] handed out one at a time.
#[derive(Default)]
struct Lanes {
    word: u64,
    left: u32,
}

impl Lanes {
    #[inline(always)]
    fn next<R: Rng + ?Sized>(&mut self, b: &BernoulliWords, rng: &mut R) -> u64 {
        if self.left == 0 {
            self.word = b.sample(rng);
            self.left = 64;
        }
        let x = self.word & 1;
        self.word >>= 1;
        self.left -= 1;
        x
    }
}

/// GRR (Grr::randomize_unchecked's distribution): keep v with probability p (64-lane exact
/// Bernoulli words), else report (v + 1 + U{0..d−2}) mod d; straight into counts.
struct GrrPlan {
    d: usize,
    keep: BernoulliWords,
    other: Below,
}

impl GrrPlan {
    fn new(g: &Grr) -> Self {
        let d = g.domain_size();
        GrrPlan { d, keep: BernoulliWords::new(g.p()), other: Below::new(d - 1) }
    }

    fn run<R: Rng + ?Sized>(&self, vs: &[usize], rng: &mut R, tally: &mut Tally) {
        let d = self.d;
        let counts = &mut tally.counts[..d];
        let mut add = |v: usize, keep: u64, u: usize| {
            let t = v + 1 + u;
            let other = if t >= d { t - d } else { t };
            counts[if keep & 1 == 1 { v } else { other }] += 1;
        };
        for chunk in vs.chunks(64) {
            let mut keep = self.keep.sample_masked(rng, padding_mask(chunk.len()));
            match self.other {
                // Four draws per random word (the match is hoisted out of the report loop).
                Below::Slice { m, reject } => {
                    for quad in chunk.chunks(4) {
                        let mut r = rng.next_u64();
                        for &v in quad {
                            add(v, keep, slice_below(r, m, reject, rng));
                            r >>= 16;
                            keep >>= 1;
                        }
                    }
                }
                Below::Word { m } => {
                    for &v in chunk {
                        add(v, keep, uniform_below(rng, m) as usize);
                        keep >>= 1;
                    }
                }
            }
        }
        tally.n += vs.len() as u64;
    }
}

/// SUE/OUE (UnaryEncoding::randomize_unchecked's distribution): every bit Bernoulli(q), the
/// user's own bit Bernoulli(p), all independent. For d ≤ 64, ⌊64/d⌋ reports share one word (report
/// u in lanes u·d..u·d + d), which is counted as a whole; lane counts are folded into categories at
/// the end. Larger domains: one d-bit report per ⌈d/64⌉ words.
struct UnaryPlan {
    d: usize,
    noise: BernoulliWords,
    own: BernoulliWords,
    /// Bit counts of the packed words (64 lanes, or d bits for d > 64).
    lanes: UnaryAggregator,
    n: u64,
}

impl UnaryPlan {
    fn new(u: &UnaryEncoding) -> Result<Self> {
        let d = u.domain_size();
        Ok(UnaryPlan {
            d,
            noise: BernoulliWords::new(u.q()),
            own: BernoulliWords::new(u.p()),
            lanes: Oue::new(1.0, d.max(64))?.aggregator(),
            n: 0,
        })
    }

    fn run<R: Rng + ?Sized>(&mut self, vs: &[usize], rng: &mut R, words: &mut Vec<u64>) -> Result<()> {
        let d = self.d;
        let mut own = Lanes::default();
        words.clear();
        if d <= 64 {
            for group in vs.chunks(64 / d) {
                let noise = self.noise.sample_masked(rng, padding_mask(group.len() * d));
                let (mut mine, mut bits) = (0u64, 0u64);
                for (u, &v) in group.iter().enumerate() {
                    let pos = u * d + v;
                    mine |= 1 << pos;
                    bits |= own.next(&self.own, rng) << pos;
                }
                words.push((noise & !mine) | bits);
            }
        } else {
            let w = d.div_ceil(64);
            for &v in vs {
                let start = words.len();
                words.resize(start + w, 0);
                let report = &mut words[start..];
                self.noise.fill(rng, report);
                report[w - 1] &= padding_mask(d);
                let bit = own.next(&self.own, rng);
                report[v / 64] = (report[v / 64] & !(1 << (v % 64))) | (bit << (v % 64));
            }
        }
        self.n += vs.len() as u64;
        self.lanes.add_packed(words)
    }

    /// Adds the lane counts, folded into categories, to `tally`.
    fn finish(&self, tally: &mut Tally) {
        let d = self.d;
        let lanes = self.lanes.counts();
        let used = if d <= 64 { 64 / d * d } else { d };
        for (l, c) in lanes[..used].iter().enumerate() {
            tally.counts[l % d] += c;
        }
        tally.n += self.n;
    }
}

/// How one attribute is collected.
enum Plan<'a> {
    Grr(GrrPlan),
    Unary(UnaryPlan),
    /// Any other oracle: its batch kernel, then `add_unchecked` per report.
    Oracle(&'a AnyOracle),
    Numeric(&'a AnyNumeric),
    /// Covered by the joint mechanism.
    Joint,
}

impl<'a> Plan<'a> {
    fn new(m: &'a AttributeMechanism) -> Result<Self> {
        Ok(match m {
            AttributeMechanism::Categorical(o) => match pure(o) {
                Some(Pure::Grr(g)) => Plan::Grr(GrrPlan::new(g)),
                Some(Pure::Unary(u)) => Plan::Unary(UnaryPlan::new(u)?),
                None => Plan::Oracle(o),
            },
            AttributeMechanism::Numeric(x) => Plan::Numeric(x),
            AttributeMechanism::Joint => Plan::Joint,
        })
    }
}

/// The values of one attribute for a batch of records.
enum Values<'v> {
    Categorical(&'v [usize]),
    Numeric(&'v [f64]),
}

/// Reused buffers of one [`RecordAggregator::collect`] call.
#[derive(Default)]
struct Scratch {
    /// Per attribute, the batch offsets of the records that sampled it (sampled strategies).
    picked: Vec<Vec<u32>>,
    /// One record's sampled attributes (k > 1).
    sample: Vec<usize>,
    /// The sampled records' values of one attribute.
    cats: Vec<usize>,
    nums: Vec<f64>,
    /// One record's numeric part (duchi-multi).
    t: Vec<f64>,
    /// Output buffers of the batch kernels.
    words: Vec<u64>,
    any: Vec<AnyReport>,
    numeric: Vec<NumericReport>,
}

/// The parts of a [`RecordAggregator`] that collection adds to.
struct Sinks<'s> {
    numeric: &'s mut [NumSums],
    categorical: &'s mut [Option<AnyAggregator>],
    tallies: &'s mut [Tally],
}

impl RecordAggregator {
    /// Randomizes the records `rows` of `data` as clients would and adds their reports: the
    /// aggregate has the distribution of randomizing each record with
    /// [`RecordMechanism::randomize_into`](super::RecordMechanism::randomize_into) and adding it
    /// (see the [module docs](self)), without building a report per record. Random words are
    /// consumed in another order than the per-record path's (a seed gives other reports).
    ///
    /// Errors: `data` built for a schema of other attribute kinds or category counts, or a
    /// range beyond its records (nothing is added then).
    pub fn collect<R: Rng + ?Sized>(&mut self, data: &RecordColumns, rows: Range<usize>, rng: &mut R) -> Result<()> {
        let RecordAggregator { mechanism: m, n, numeric, categorical, joint, tallies } = self;
        if data.cards != m.cards {
            return Err(Error::input(
                "data",
                format!("columns with category counts {:?} (0 = numeric)", data.cards),
                format!("the schema's {:?}", m.cards),
            ));
        }
        if rows.start > rows.end || rows.end > data.n {
            return Err(Error::input("rows", &rows, format!("a range within the {} records", data.n)));
        }
        let mut plans = m.mechanisms.iter().map(Plan::new).collect::<Result<Vec<_>>>()?;
        let mut sinks = Sinks { numeric, categorical, tallies };
        let mut s = Scratch { picked: vec![Vec::new(); data.columns.len()], ..Scratch::default() };
        let d = data.columns.len();
        let mut start = rows.start;
        while start < rows.end {
            let batch = start..rows.end.min(start + BATCH);
            start = batch.end;
            if m.k == d {
                // Every record reports every attribute: the kernels run on column slices.
                for (j, plan) in plans.iter_mut().enumerate() {
                    let values = match &data.columns[j] {
                        Column::Categorical(c) => Values::Categorical(&c[batch.clone()]),
                        Column::Numeric(c) => Values::Numeric(&c[batch.clone()]),
                    };
                    run(j, plan, values, &mut sinks, rng, &mut s)?;
                }
                if let (Some(jm), Some(ja)) = (m.joint.as_ref(), joint.as_mut()) {
                    for i in batch.clone() {
                        s.t.clear();
                        s.t.extend(m.numeric_positions.iter().map(|&p| match &data.columns[p] {
                            Column::Numeric(c) => c[i],
                            Column::Categorical(_) => 0.0,
                        }));
                        ja.add_unchecked(&jm.randomize_unchecked(&s.t, rng));
                    }
                }
            } else {
                sampled_batch(m.k, data, batch.clone(), &mut plans, &mut sinks, rng, &mut s)?;
            }
            *n += batch.len() as u64;
        }
        for (plan, tally) in plans.iter().zip(sinks.tallies.iter_mut()) {
            if let Plan::Unary(u) = plan {
                u.finish(tally);
            }
        }
        Ok(())
    }
}

/// A batch of a sampled strategy: which attributes each record reports (uniform k-subsets),
/// then each attribute's sampled records through its plan in one call.
fn sampled_batch<R: Rng + ?Sized>(
    k: usize,
    data: &RecordColumns,
    batch: Range<usize>,
    plans: &mut [Plan<'_>],
    sinks: &mut Sinks<'_>,
    rng: &mut R,
    s: &mut Scratch,
) -> Result<()> {
    let d = data.columns.len();
    s.picked.iter_mut().for_each(Vec::clear);
    if k == 1 {
        let (pick, mut slices) = (Below::new(d), Slices::default());
        for i in 0..batch.len() as u32 {
            s.picked[pick.draw(&mut slices, rng)].push(i);
        }
    } else {
        for i in 0..batch.len() as u32 {
            sample_k_of_d(rng, k, d, &mut s.sample);
            for &j in &s.sample {
                s.picked[j].push(i);
            }
        }
    }
    let (mut cats, mut nums) = (std::mem::take(&mut s.cats), std::mem::take(&mut s.nums));
    for (j, plan) in plans.iter_mut().enumerate() {
        let picked = &s.picked[j];
        let values = match &data.columns[j] {
            Column::Categorical(c) => {
                let c = &c[batch.clone()];
                cats.clear();
                cats.extend(picked.iter().map(|&i| c[i as usize]));
                Values::Categorical(&cats)
            }
            Column::Numeric(c) => {
                let c = &c[batch.clone()];
                nums.clear();
                nums.extend(picked.iter().map(|&i| c[i as usize]));
                Values::Numeric(&nums)
            }
        };
        run(j, plan, values, sinks, rng, s)?;
    }
    (s.cats, s.nums) = (cats, nums);
    Ok(())
}

/// Randomizes one attribute's values by its plan and adds them.
fn run<R: Rng + ?Sized>(
    j: usize,
    plan: &mut Plan<'_>,
    values: Values<'_>,
    sinks: &mut Sinks<'_>,
    rng: &mut R,
    s: &mut Scratch,
) -> Result<()> {
    match (plan, values) {
        (Plan::Grr(p), Values::Categorical(vs)) => p.run(vs, rng, &mut sinks.tallies[j]),
        (Plan::Unary(p), Values::Categorical(vs)) => p.run(vs, rng, &mut s.words)?,
        (Plan::Oracle(o), Values::Categorical(vs)) => {
            s.any.clear();
            o.randomize_batch(vs, rng, &mut s.any)?;
            if let Some(a) = sinks.categorical[j].as_mut() {
                s.any.iter().for_each(|r| a.add_unchecked(r));
            }
        }
        (Plan::Numeric(m), Values::Numeric(ts)) => {
            s.numeric.clear();
            m.randomize_batch(ts, rng, &mut s.numeric)?;
            let sums = &mut sinks.numeric[j];
            s.numeric.iter().for_each(|x| sums.add(m, x));
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    //! The fused path against the exact distribution of the aggregate: for small populations
    //! every record's outcomes (sampled attributes × oracle outputs) are enumerated with their
    //! probabilities and convolved; χ² compares the observed states, of `collect` and of the
    //! per-record `randomize_into` path, with it.
    use super::*;
    use crate::frequency::{AdaptiveReport, GrrReport, UnaryReport};
    use crate::sampling::fast_rng;
    use crate::schema::Attribute;
    use crate::strategy::{KChoice, RecordMechanism, RecordReport, StrategyKind, StrategyOptions};
    use std::collections::HashMap;

    /// Every categorical attribute's reports and support counts (aggregator + tally).
    type State = Vec<u64>;

    fn state(agg: &RecordAggregator) -> State {
        let mut s = Vec::new();
        for (a, t) in agg.categorical.iter().zip(&agg.tallies) {
            let Some(a) = a else { continue };
            let counts = match a {
                AnyAggregator::Grr(g) | AnyAggregator::Adaptive(AdaptiveAggregator::Grr(g)) => g.counts().to_vec(),
                AnyAggregator::Unary(u) | AnyAggregator::Adaptive(AdaptiveAggregator::Oue(u)) => u.counts(),
                _ => panic!("not a pure oracle"),
            };
            s.push(a.count() + t.n);
            s.extend(counts.iter().zip(&t.counts).map(|(x, y)| x + y));
        }
        s
    }

    /// Every output of a small pure oracle, with its support vector.
    fn outputs(o: &AnyOracle) -> Vec<(AnyReport, Vec<u64>)> {
        let d = o.domain_size();
        let adaptive = matches!(o, AnyOracle::Adaptive(_));
        match pure(o).expect("a pure oracle") {
            Pure::Grr(_) => (0..d)
                .map(|y| {
                    let r = GrrReport { y: y as u32 };
                    let r = if adaptive { AnyReport::Adaptive(AdaptiveReport::Grr(r)) } else { AnyReport::Grr(r) };
                    (r, (0..d).map(|v| (v == y) as u64).collect())
                })
                .collect(),
            Pure::Unary(_) => (0..1u64 << d)
                .map(|b| {
                    let r = UnaryReport { bits: vec![b] };
                    let r = if adaptive { AnyReport::Adaptive(AdaptiveReport::Oue(r)) } else { AnyReport::Unary(r) };
                    (r, (0..d).map(|v| (b >> v) & 1).collect())
                })
                .collect(),
        }
    }

    /// The exact distribution of [`state`] after adding `rows`.
    fn exact(mech: &RecordMechanism, rows: &[Vec<Value>]) -> HashMap<State, f64> {
        let d = mech.schema().len();
        let mut offset = vec![usize::MAX; d];
        let mut len = 0;
        for (j, m) in mech.mechanisms().iter().enumerate() {
            if let AttributeMechanism::Categorical(o) = m {
                offset[j] = len;
                len += 1 + o.domain_size();
            }
        }
        let subsets: Vec<u32> = (0..1u32 << d).filter(|s| s.count_ones() as usize == mech.k()).collect();
        let mut dist = HashMap::from([(vec![0u64; len], 1.0)]);
        for row in rows {
            // This record's contributions and their probabilities.
            let mut record: HashMap<State, f64> = HashMap::new();
            for &subset in &subsets {
                let mut partial = HashMap::from([(vec![0u64; len], 1.0 / subsets.len() as f64)]);
                for (j, m) in mech.mechanisms().iter().enumerate() {
                    let (AttributeMechanism::Categorical(o), true) = (m, subset >> j & 1 == 1) else { continue };
                    let Value::Category(x) = row[j] else { unreachable!() };
                    let mut next = HashMap::new();
                    for (delta, p) in &partial {
                        for (r, support) in outputs(o) {
                            let mut s = delta.clone();
                            s[offset[j]] += 1;
                            s[offset[j] + 1..][..support.len()].iter_mut().zip(&support).for_each(|(a, b)| *a += b);
                            *next.entry(s).or_insert(0.0) += p * o.output_probability(x as usize, &r);
                        }
                    }
                    partial = next;
                }
                for (s, p) in partial {
                    *record.entry(s).or_insert(0.0) += p;
                }
            }
            let mut next = HashMap::new();
            for (a, pa) in &dist {
                for (b, pb) in &record {
                    let s: State = a.iter().zip(b).map(|(x, y)| x + y).collect();
                    *next.entry(s).or_insert(0.0) += pa * pb;
                }
            }
            dist = next;
        }
        dist
    }

    /// χ² of the observed states against `exact`, cells with expectation < 5 pooled; panics on a
    /// state outside the support. Returns (χ², degrees of freedom).
    fn chi_square(exact: &HashMap<State, f64>, seen: &HashMap<State, u64>, trials: usize) -> (f64, usize) {
        for s in seen.keys() {
            assert!(exact.get(s).is_some_and(|&p| p > 0.0), "state {s:?} has probability 0");
        }
        let (mut chi2, mut cells, mut rest_e, mut rest_c) = (0.0, 0, 0.0, 0.0);
        for (s, &p) in exact {
            let (e, c) = (p * trials as f64, seen.get(s).copied().unwrap_or(0) as f64);
            if e >= 5.0 {
                chi2 += (c - e).powi(2) / e;
                cells += 1;
            } else {
                rest_e += e;
                rest_c += c;
            }
        }
        if rest_e > 0.0 {
            chi2 += (rest_c - rest_e).powi(2) / rest_e;
            cells += 1;
        }
        (chi2, cells - 1)
    }

    /// Upper 1e-6 quantile of χ² with k degrees of freedom (Wilson–Hilferty, z = 4.753).
    fn chi2_critical(k: usize) -> f64 {
        let (k, z) = (k as f64, 4.753);
        let a = 2.0 / (9.0 * k);
        k * (1.0 - a + z * a.sqrt()).powi(3)
    }

    fn schema(cards: &[usize], numeric: bool) -> Schema {
        let mut attributes: Vec<Attribute> = cards
            .iter()
            .enumerate()
            .map(|(j, &c)| Attribute::Categorical {
                name: format!("c{j}"),
                categories: (0..c).map(|v| format!("v{v}")).collect(),
            })
            .collect();
        if numeric {
            attributes.insert(0, Attribute::Numeric { name: "t".into(), min: -1.0, max: 1.0 });
        }
        Schema::new(attributes).unwrap()
    }

    /// Both paths' aggregates over `trials` collections of `rows` against the exact law.
    fn check(kind: StrategyKind, oracle: &str, eps: f64, k: usize, cards: &[usize], numeric: bool, n: usize) {
        check_trials(kind, oracle, eps, k, cards, numeric, n, 20_000)
    }

    #[allow(clippy::too_many_arguments)]
    fn check_trials(
        kind: StrategyKind,
        oracle: &str,
        eps: f64,
        k: usize,
        cards: &[usize],
        numeric: bool,
        n: usize,
        trials: usize,
    ) {
        let schema = schema(cards, numeric);
        let rows: Vec<Vec<Value>> = (0..n)
            .map(|i| {
                let mut r: Vec<Value> = cards
                    .iter()
                    .enumerate()
                    .map(|(j, &c)| Value::Category(((i * (j + 2) + i / 3) % c) as u32))
                    .collect();
                if numeric {
                    r.insert(0, Value::Unit(0.25));
                }
                r
            })
            .collect();
        let opts = StrategyOptions {
            kind,
            epsilon: eps,
            numeric_mechanism: "pm".into(),
            categorical_mechanism: oracle.into(),
            k: KChoice::Fixed(k),
        };
        let mech = RecordMechanism::new(schema.clone(), opts).unwrap();
        let law = exact(&mech, &rows);
        let total: f64 = law.values().sum();
        assert!((total - 1.0).abs() < 1e-9, "exact law sums to {total}");
        let flat: Vec<Value> = rows.concat();
        let data = RecordColumns::new(&schema, &flat).unwrap();
        let mut rng = fast_rng(0xC011EC7 ^ n as u64 ^ (eps * 100.0) as u64);
        let (mut fused, mut per_record) = (HashMap::new(), HashMap::new());
        let (mut report, mut scratch) = (RecordReport::default(), Vec::new());
        for _ in 0..trials {
            let mut agg = mech.aggregator();
            agg.collect(&data, 0..n, &mut rng).unwrap();
            *fused.entry(state(&agg)).or_insert(0u64) += 1;
            let mut agg = mech.aggregator();
            for r in &rows {
                mech.randomize_into(r, &mut rng, &mut report, &mut scratch).unwrap();
                agg.add(&report).unwrap();
            }
            *per_record.entry(state(&agg)).or_insert(0u64) += 1;
        }
        for (path, seen) in [("collect", &fused), ("randomize_into", &per_record)] {
            let (chi2, dof) = chi_square(&law, seen, trials);
            let crit = chi2_critical(dof);
            assert!(
                chi2 < crit,
                "{kind:?} {oracle} eps {eps} k {k} cards {cards:?} n {n}, {path}: chi2 {chi2:.1} >= {crit:.1} ({dof} dof, {} states)",
                law.len()
            );
        }
    }

    #[test]
    fn split_aggregates_follow_the_exact_law() {
        check(StrategyKind::Split, "grr", 1.0, 2, &[3, 2], false, 3);
        check(StrategyKind::Split, "oue", 1.0, 2, &[3, 2], false, 3);
        check(StrategyKind::Split, "sue", 2.0, 2, &[3, 2], false, 3);
        // Adaptive at ε/2 = 0.1: OUE on 6 categories (6 ≥ 3e^0.1 + 2), GRR on 2.
        check(StrategyKind::Split, "adaptive", 0.2, 2, &[6, 2], false, 3);
    }

    #[test]
    fn packed_unary_words_fold_into_categories() {
        // 32 and 21 reports per word: the records span two words.
        check(StrategyKind::Split, "oue", 1.0, 1, &[2], false, 40);
        check(StrategyKind::Split, "oue", 0.5, 1, &[3], false, 25);
    }

    #[test]
    fn sampled_aggregates_follow_the_exact_law() {
        check(StrategyKind::SampleK, "grr", 1.0, 1, &[3, 2], true, 4);
        check(StrategyKind::SampleK, "oue", 1.0, 1, &[3, 2], true, 4);
        check(StrategyKind::SampleK, "oue", 2.0, 2, &[3, 2, 2], false, 3);
        check(StrategyKind::SampleK, "adaptive", 0.1, 1, &[6, 2], false, 3);
    }

    /// The same checks with 25× the trials (release: `cargo test --release -- --ignored`).
    #[test]
    #[ignore]
    fn heavy_aggregates_follow_the_exact_law() {
        let t = 500_000;
        check_trials(StrategyKind::Split, "grr", 1.0, 2, &[3, 2], false, 3, t);
        check_trials(StrategyKind::Split, "oue", 1.0, 2, &[3, 2], false, 3, t);
        check_trials(StrategyKind::Split, "sue", 2.0, 2, &[3, 2], false, 3, t);
        check_trials(StrategyKind::Split, "adaptive", 0.2, 2, &[6, 2], false, 3, t);
        check_trials(StrategyKind::Split, "oue", 1.0, 1, &[2], false, 40, t);
        check_trials(StrategyKind::Split, "oue", 0.5, 1, &[3], false, 25, t);
        check_trials(StrategyKind::SampleK, "grr", 1.0, 1, &[3, 2], true, 4, t);
        check_trials(StrategyKind::SampleK, "oue", 1.0, 1, &[3, 2], true, 4, t);
        check_trials(StrategyKind::SampleK, "oue", 2.0, 2, &[3, 2, 2], false, 3, t);
        check_trials(StrategyKind::SampleK, "adaptive", 0.1, 1, &[6, 2], false, 3, t);
    }
}
