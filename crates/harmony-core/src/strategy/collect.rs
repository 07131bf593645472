//! Fused collection: randomize many records and aggregate them without a [`RecordReport`] per
//! record (the simulation path of `harmony simulate`).
//!
//! [`RecordColumns`] holds a data set by attribute, validated once against the schema.
//! [`RecordAggregator::collect`] then randomizes a range of its rows as clients would and adds
//! the reports attribute by attribute: the sampled strategies first draw, for every record, which
//! attributes it reports (uniformly without replacement, as `randomize_into` does), then each
//! attribute's values go through one kernel call (one `match` on the mechanism per attribute
//! and batch, not per report):
//!
//! * GRR, SUE, OUE and the adaptive oracle's branches (the pure oracles, whose estimator needs
//!   only support counts): fused kernels built once with the [`RecordMechanism`] (GRR: keep-or-not
//!   from 64-lane exact Bernoulli words, the other category from 16-bit slices of random words;
//!   SUE/OUE: reports laid end to end in 64-bit words, counted by a bit-sliced counter) that
//!   count straight into the attribute's tally, kept beside its oracle aggregator;
//! * any other oracle and the numeric mechanisms: their own batch kernels, then their
//!   aggregators.
//!
//! # Same distribution as the client path
//! Every record's report is drawn from the same distribution as `randomize_into`'s: the set of
//! sampled attributes is uniform among the k-subsets, each sampled value is randomized with the
//! oracle's or mechanism's exact output probabilities, and records are independent. The
//! aggregate is a sum over records, so it has the distribution of adding `randomize_into`'s
//! reports one by one. Only the order in which random words are consumed differs, so a seed
//! gives other reports than the per-record path. The unit tests below compare both paths'
//! aggregates with their exact law (small populations, every outcome enumerated);
//! `tests/strategy_collect.rs` checks the estimates' moments against the closed forms.

use super::{AttributeMechanism, NumSums, RecordAggregator, RecordMechanism, cards_of, check_record};
use crate::aggregate::Aggregator;
use crate::error::{Error, Result};
use crate::estimate::FrequencyEstimate;
use crate::frequency::{
    Adaptive, AdaptiveAggregator, AnyAggregator, AnyOracle, AnyReport, FrequencyOracle, Grr, Oue, PureParams,
    UnaryAggregator, UnaryEncoding,
};
use crate::numeric::{NumericMechanism, NumericReport, VectorMechanism};
use crate::sampling::{BernoulliWords, padding_mask, sample_k_of_d, uniform_below};
use crate::schema::{ColumnValues, Schema, Value};
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

    /// Takes columns already encoded (one per attribute, in schema order), validating each
    /// value as [`RecordColumns::new`] does; each categorical column is widened to `usize` and
    /// dropped in turn, so the peak memory is the columns plus one widened column.
    /// Errors: a wrong column count, kind or length, or a bad value (naming attribute and row).
    pub fn from_columns(schema: &Schema, columns: Vec<ColumnValues>) -> Result<Self> {
        schema.check_columns(&columns)?;
        let n = columns.first().map_or(0, ColumnValues::len);
        let cards = cards_of(schema);
        let out = columns
            .into_iter()
            .map(|col| match col {
                ColumnValues::Unit(v) => Column::Numeric(v),
                ColumnValues::Category(v) => Column::Categorical(v.into_iter().map(|c| c as usize).collect()),
            })
            .collect();
        Ok(RecordColumns { n, cards, columns: out })
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

/// The fused kernel of one attribute, precomputed by [`RecordMechanism::new`].
#[derive(Debug, Clone)]
pub(super) enum Kernel {
    Grr(GrrKernel),
    Unary(UnaryKernel),
    /// Numeric, joint, or an oracle without a fused kernel: its own batch kernel.
    Generic,
}

impl Kernel {
    pub(super) fn new(m: &AttributeMechanism) -> Self {
        match m {
            AttributeMechanism::Categorical(o) => match pure(o) {
                Some(Pure::Grr(g)) => Kernel::Grr(GrrKernel::new(g)),
                Some(Pure::Unary(u)) => Kernel::Unary(UnaryKernel::new(u)),
                None => Kernel::Generic,
            },
            _ => Kernel::Generic,
        }
    }
}

/// What [`RecordAggregator::collect`] adds for a pure categorical oracle, kept beside the
/// oracle's own aggregator (which holds the reports added one by one): the sufficient statistic
/// of its estimator, the support counts.
#[derive(Debug, Clone)]
pub(super) enum Tally {
    /// No fused kernel.
    None,
    /// GRR: reports per category.
    Counts { n: u64, counts: Vec<u64> },
    /// SUE/OUE: set bits per position of the kernel's blocks (see [`UnaryKernel`]); the
    /// counter is allocated by the first collection (aggregators that only ever receive single
    /// reports, e.g. a server's, never hold one).
    /// `merged`: counts per category folded in from saved states (empty until one is).
    Lanes { n: u64, d: usize, lanes: Option<UnaryAggregator>, merged: Vec<u64> },
}

impl Tally {
    /// An empty tally for kernel `k`.
    pub(super) fn new(k: &Kernel) -> Self {
        match k {
            Kernel::Grr(g) => Tally::Counts { n: 0, counts: vec![0; g.d] },
            Kernel::Unary(u) => Tally::Lanes { n: 0, d: u.d, lanes: None, merged: Vec::new() },
            Kernel::Generic => Tally::None,
        }
    }

    /// Reports added.
    pub(super) fn n(&self) -> u64 {
        match self {
            Tally::None => 0,
            Tally::Counts { n, .. } | Tally::Lanes { n, .. } => *n,
        }
    }

    /// Support counts per category.
    fn counts(&self) -> Vec<u64> {
        match self {
            Tally::None => Vec::new(),
            Tally::Counts { counts, .. } => counts.clone(),
            Tally::Lanes { d, lanes, merged, .. } => {
                let mut c = vec![0; *d];
                for (pos, x) in lanes.iter().flat_map(|l| l.counts()).enumerate() {
                    c[pos % d] += x;
                }
                c.iter_mut().zip(merged).for_each(|(a, b)| *a += b);
                c
            }
        }
    }

    pub(super) fn merge(&mut self, other: &Tally) -> Result<()> {
        match (self, other) {
            (Tally::Counts { n, counts }, Tally::Counts { n: n2, counts: c2 }) => {
                *n += n2;
                counts.iter_mut().zip(c2).for_each(|(a, b)| *a += b);
            }
            (Tally::Lanes { n, lanes, merged, .. }, Tally::Lanes { n: n2, lanes: l2, merged: m2, .. }) => {
                *n += n2;
                if merged.len() < m2.len() {
                    merged.resize(m2.len(), 0);
                }
                merged.iter_mut().zip(m2).for_each(|(a, b)| *a += b);
                match (lanes.as_mut(), l2) {
                    (Some(a), Some(b)) => a.merge(b)?,
                    (None, Some(b)) => *lanes = Some(b.clone()),
                    (_, None) => {}
                }
            }
            _ => {}
        }
        Ok(())
    }
}

/// A tally saves its sufficient statistic: reports and support counts.
impl crate::state::SaveState for Tally {
    fn save_state(&self, w: &mut crate::state::StateWriter<'_>) {
        w.u64(self.n());
        w.u64s(&self.counts());
    }
    fn merge_state(&mut self, r: &mut crate::state::StateReader<'_>) -> Result<()> {
        let n2 = r.u64("tally reports")?;
        match self {
            Tally::None => r.len_exactly("tally counts", 0),
            Tally::Counts { n, counts } => {
                *n += n2;
                r.add_u64s("tally counts", counts)
            }
            Tally::Lanes { n, d, merged, .. } => {
                *n += n2;
                if merged.is_empty() {
                    *merged = vec![0; *d];
                }
                r.add_u64s("tally counts", merged)
            }
        }
    }
}

/// The frequency estimate of a categorical attribute from its oracle's aggregator and its tally:
/// the aggregator's own estimate when the tally is empty, else the oracle's estimator
/// ([`PureParams::estimate_from_counts`], as `GrrAggregator`/`UnaryAggregator::estimate`) on the
/// summed counts.
pub(super) fn categorical_estimate(o: &AnyOracle, agg: &AnyAggregator, tally: &Tally) -> FrequencyEstimate {
    if tally.n() == 0 {
        return agg.estimate();
    }
    let (pp, own): (PureParams, Vec<u64>) = match (pure(o), agg) {
        (Some(Pure::Grr(g)), AnyAggregator::Grr(a) | AnyAggregator::Adaptive(AdaptiveAggregator::Grr(a))) => {
            (g.pure_params(), a.counts().to_vec())
        }
        (Some(Pure::Unary(u)), AnyAggregator::Unary(a) | AnyAggregator::Adaptive(AdaptiveAggregator::Oue(a))) => {
            (u.pure_params(), a.counts())
        }
        // A tally is filled only for the pure oracles matched above.
        _ => return agg.estimate(),
    };
    let counts = own.iter().zip(tally.counts()).map(|(&a, b)| (a + b) as f64);
    pp.estimate_from_counts(agg.count() + tally.n(), counts)
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

/// GRR (`Grr::randomize_unchecked`'s distribution): keep v with probability p (64-lane exact
/// Bernoulli words, the same p), else report (v + 1 + U{0..d−2}) mod d; straight into counts.
#[derive(Debug, Clone)]
pub(super) struct GrrKernel {
    d: usize,
    keep: BernoulliWords,
    other: Below,
}

impl GrrKernel {
    fn new(g: &Grr) -> Self {
        let d = g.domain_size();
        GrrKernel { d, keep: BernoulliWords::new(g.p()), other: Below::new(d - 1) }
    }

    fn run<R: Rng + ?Sized>(&self, vs: &[usize], rng: &mut R, counts: &mut [u64], keeps: &mut Vec<u64>) {
        let d = self.d;
        let counts = &mut counts[..d];
        let mut add = |v: usize, keep: u64, u: usize| {
            let t = v + 1 + u;
            let other = if t >= d { t - d } else { t };
            counts[if keep & 1 == 1 { v } else { other }] += 1;
        };
        // Keep-or-not for the whole batch in one call, 64 reports per word.
        keeps.clear();
        keeps.resize(vs.len().div_ceil(64), 0);
        self.keep.fill(rng, keeps);
        for (chunk, &keep) in vs.chunks(64).zip(keeps.iter()) {
            let mut keep = keep;
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
    }
}

/// SUE/OUE (`UnaryEncoding::randomize_unchecked`'s distribution): every bit Bernoulli(q) (the
/// same 64-lane exact Bernoulli words), the user's own bit Bernoulli(p), all independent.
///
/// For d ≤ 64 the reports are laid end to end in a bit stream (report u in bits u·d..u·d + d), so
/// no noise lane is wasted: the stream is cut into blocks of P = d/gcd(d, 64) words, 64·P/d
/// reports each, after which the category of bit position p (p mod d) repeats; a bit counter
/// over the 64·P positions of a block counts them all, folded into categories by the tally.
/// Larger domains: one report per ⌈d/64⌉ words (the reports' own layout).
#[derive(Debug, Clone)]
pub(super) struct UnaryKernel {
    d: usize,
    /// Words per block (P above; ⌈d/64⌉ for d > 64).
    block: usize,
    /// Reports per block.
    per_block: usize,
    noise: BernoulliWords,
    own: BernoulliWords,
    /// Bit positions of a block (64·P, or d for d > 64).
    positions: usize,
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a } else { gcd(b, a % b) }
}

impl UnaryKernel {
    fn new(u: &UnaryEncoding) -> Self {
        let d = u.domain_size();
        let (block, per_block, positions) = if d <= 64 {
            let block = d / gcd(d, 64);
            (block, 64 * block / d, 64 * block)
        } else {
            (d.div_ceil(64), 1, d)
        };
        UnaryKernel {
            d,
            block,
            per_block,
            noise: BernoulliWords::new(u.q()),
            own: BernoulliWords::new(u.p()),
            positions,
        }
    }

    fn run<R: Rng + ?Sized>(
        &self,
        vs: &[usize],
        rng: &mut R,
        words: &mut Vec<u64>,
        lanes: &mut Option<UnaryAggregator>,
    ) -> Result<()> {
        let (d, p) = (self.d, self.block);
        if vs.is_empty() {
            return Ok(());
        }
        // Noise on every bit of the batch's blocks in one call ...
        let blocks = vs.len().div_ceil(self.per_block);
        words.clear();
        words.resize(blocks * p, 0);
        self.noise.fill(rng, words);
        // ... then zero the bits no report uses: the padding of every report (d > 64) or the
        // tail of the last, partly filled block (d ≤ 64).
        let stride = if d <= 64 {
            let last = words.len() - p;
            let bits = (vs.len() - (blocks - 1) * self.per_block) * d;
            let used = bits.div_ceil(64);
            words[last + used - 1] &= padding_mask(bits);
            words[last + used..].fill(0);
            d
        } else {
            words.chunks_exact_mut(p).for_each(|r| r[p - 1] &= padding_mask(d));
            64 * p
        };
        // Report i starts at bit i·stride (d ≤ 64: 64·P = (reports per block)·d, so the
        // stream runs on across blocks); its own bit is Bernoulli(p), 64 lanes per word.
        for (c, chunk) in vs.chunks(64).enumerate() {
            let mut own = self.own.sample(rng);
            for (i, &v) in chunk.iter().enumerate() {
                let pos = (64 * c + i) * stride + v;
                let (w, b) = (pos / 64, pos % 64);
                words[w] = (words[w] & !(1 << b)) | ((own & 1) << b);
                own >>= 1;
            }
        }
        let lanes = match lanes {
            Some(l) => l,
            None => lanes.insert(Oue::new(1.0, self.positions)?.aggregator()),
        };
        lanes.add_packed(words)
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
    /// Sampled strategies: the attributes drawn for each record (k per record) ...
    pick: Vec<u32>,
    /// ... and the records sorted by attribute: attribute j's are `order[start[j]..start[j + 1]]`.
    order: Vec<u32>,
    start: Vec<usize>,
    /// One record's sampled attributes (k > 1).
    sample: Vec<usize>,
    /// The sampled records' values of one attribute.
    cats: Vec<usize>,
    nums: Vec<f64>,
    /// One record's numeric part (duchi-multi).
    t: Vec<f64>,
    /// Output buffers of the kernels.
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
    /// Randomizes the records `rows` of `data` as clients would and adds their reports, without
    /// building a report per record: attribute by attribute, through kernels with the oracles'
    /// and mechanisms' exact output probabilities (GRR, SUE, OUE and the adaptive oracle counted
    /// straight into support counts). The aggregate has the distribution of randomizing each
    /// record with [`RecordMechanism::randomize_into`] and adding it; random words are consumed
    /// in another order than the per-record path's (a seed gives other reports). The estimates
    /// and standard errors are the same estimator's.
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
        let d = data.columns.len();
        let mut sinks = Sinks { numeric, categorical, tallies };
        let mut s = Scratch::default();
        let mut start = rows.start;
        while start < rows.end {
            let batch = start..rows.end.min(start + BATCH);
            start = batch.end;
            if m.k == d {
                // Every record reports every attribute: the kernels run on column slices.
                for (j, column) in data.columns.iter().enumerate() {
                    let values = match column {
                        Column::Categorical(c) => Values::Categorical(&c[batch.clone()]),
                        Column::Numeric(c) => Values::Numeric(&c[batch.clone()]),
                    };
                    run(m, j, values, &mut sinks, rng, &mut s)?;
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
                sampled_batch(m, data, batch.clone(), &mut sinks, rng, &mut s)?;
            }
            *n += batch.len() as u64;
        }
        Ok(())
    }
}

/// A batch of a sampled strategy: which attributes each record reports (uniform k-subsets), the
/// records sorted by attribute (counting sort), then each attribute's records in one call.
fn sampled_batch<R: Rng + ?Sized>(
    m: &RecordMechanism,
    data: &RecordColumns,
    batch: Range<usize>,
    sinks: &mut Sinks<'_>,
    rng: &mut R,
    s: &mut Scratch,
) -> Result<()> {
    let (d, k, len) = (data.columns.len(), m.k, batch.len());
    s.pick.resize(len * k, 0);
    s.order.resize(len * k, 0);
    s.start.clear();
    s.start.resize(d + 1, 0);
    if k == 1 {
        let (below, mut slices) = (Below::new(d), Slices::default());
        for p in &mut s.pick[..len] {
            let j = below.draw(&mut slices, rng);
            *p = j as u32;
            s.start[j + 1] += 1;
        }
    } else {
        for picks in s.pick[..len * k].chunks_exact_mut(k) {
            sample_k_of_d(rng, k, d, &mut s.sample);
            for (p, &j) in picks.iter_mut().zip(&s.sample) {
                *p = j as u32;
                s.start[j + 1] += 1;
            }
        }
    }
    for j in 0..d {
        s.start[j + 1] += s.start[j];
    }
    // Scatter (start[j] advances to the end of attribute j's records, then is restored).
    for (i, picks) in s.pick[..len * k].chunks_exact(k).enumerate() {
        for &j in picks {
            let at = &mut s.start[j as usize];
            s.order[*at] = i as u32;
            *at += 1;
        }
    }
    for j in (1..=d).rev() {
        s.start[j] = s.start[j - 1];
    }
    s.start[0] = 0;
    let (mut cats, mut nums) = (std::mem::take(&mut s.cats), std::mem::take(&mut s.nums));
    for (j, column) in data.columns.iter().enumerate() {
        let records = &s.order[s.start[j]..s.start[j + 1]];
        let values = match column {
            Column::Categorical(c) => {
                let c = &c[batch.clone()];
                cats.clear();
                cats.extend(records.iter().map(|&i| c[i as usize]));
                Values::Categorical(&cats)
            }
            Column::Numeric(c) => {
                let c = &c[batch.clone()];
                nums.clear();
                nums.extend(records.iter().map(|&i| c[i as usize]));
                Values::Numeric(&nums)
            }
        };
        run(m, j, values, sinks, rng, s)?;
    }
    (s.cats, s.nums) = (cats, nums);
    Ok(())
}

/// Randomizes attribute j's values of a batch of records by its kernel and adds them.
fn run<R: Rng + ?Sized>(
    m: &RecordMechanism,
    j: usize,
    values: Values<'_>,
    sinks: &mut Sinks<'_>,
    rng: &mut R,
    s: &mut Scratch,
) -> Result<()> {
    match (&m.kernels[j], &mut sinks.tallies[j], &m.mechanisms[j], values) {
        (Kernel::Grr(k), Tally::Counts { n, counts }, _, Values::Categorical(vs)) => {
            k.run(vs, rng, counts, &mut s.words);
            *n += vs.len() as u64;
        }
        (Kernel::Unary(k), Tally::Lanes { n, lanes, .. }, _, Values::Categorical(vs)) => {
            k.run(vs, rng, &mut s.words, lanes)?;
            *n += vs.len() as u64;
        }
        (Kernel::Generic, _, AttributeMechanism::Categorical(o), Values::Categorical(vs)) => {
            s.any.clear();
            o.randomize_batch(vs, rng, &mut s.any)?;
            if let Some(a) = sinks.categorical[j].as_mut() {
                s.any.iter().for_each(|r| a.add_unchecked(r));
            }
        }
        (Kernel::Generic, _, AttributeMechanism::Numeric(x), Values::Numeric(ts)) => {
            s.numeric.clear();
            x.randomize_batch(ts, rng, &mut s.numeric)?;
            let sums = &mut sinks.numeric[j];
            s.numeric.iter().for_each(|r| sums.add(x, r));
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
            s.push(a.count() + t.n());
            s.extend(counts.iter().zip(t.counts()).map(|(x, y)| x + y));
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
        chi2_quantile(k, 4.753)
    }

    /// Upper quantile of χ² with k degrees of freedom at the one-sided normal quantile z.
    fn chi2_quantile(k: usize, z: f64) -> f64 {
        let k = k as f64;
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
            numeric_mechanism: crate::RecordNumeric::Pm,
            categorical_mechanism: oracle.parse().unwrap(),
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

    /// The same checks with 10× the trials (release: `cargo test --release -- --ignored`).
    #[test]
    #[ignore]
    fn heavy_aggregates_follow_the_exact_law() {
        let t = 200_000;
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

    /// Unary reports laid end to end across words and blocks (d = 3: 64 reports per 3-word
    /// block; d = 42: 32 per 21 words; d = 70: two words per report): every category's count
    /// follows its exact law, a sum of independent Bernoulli(p) (holders) and Bernoulli(q)
    /// (others) bits. χ² per category at 1e-8 (z = 5.612).
    #[test]
    fn unary_category_counts_follow_their_exact_laws() {
        let n = 100;
        for (name, eps, d) in [("oue", 1.0, 3), ("sue", 2.0, 42), ("oue", 0.5, 70)] {
            let schema = schema(&[d], false);
            let rows: Vec<Value> = (0..n).map(|i| Value::Category(((i * i + 3 * i) % d) as u32)).collect();
            let data = RecordColumns::new(&schema, &rows).unwrap();
            let opts = StrategyOptions {
                kind: StrategyKind::Split,
                epsilon: eps,
                numeric_mechanism: crate::RecordNumeric::Pm,
                categorical_mechanism: name.parse().unwrap(),
                k: KChoice::Optimal,
            };
            let mech = RecordMechanism::new(schema, opts).unwrap();
            let AttributeMechanism::Categorical(o) = &mech.mechanisms()[0] else { unreachable!() };
            let Some(Pure::Unary(u)) = pure(o) else { unreachable!() };
            let trials = 20_000;
            let mut seen = vec![vec![0u64; n + 1]; d];
            let mut rng = fast_rng(77 + d as u64);
            for _ in 0..trials {
                let mut agg = mech.aggregator();
                agg.collect(&data, 0..n, &mut rng).unwrap();
                let st = state(&agg);
                assert_eq!(st[0], n as u64);
                for v in 0..d {
                    seen[v][st[1 + v] as usize] += 1;
                }
            }
            for (v, seen_v) in seen.iter().enumerate() {
                let holders = rows.iter().filter(|&&x| x == Value::Category(v as u32)).count();
                // Poisson-binomial law of the count by convolution.
                let mut law = vec![1.0];
                for i in 0..n {
                    let p1 = if i < holders { u.p() } else { u.q() };
                    let mut next = vec![0.0; law.len() + 1];
                    for (c, &pc) in law.iter().enumerate() {
                        next[c] += pc * (1.0 - p1);
                        next[c + 1] += pc * p1;
                    }
                    law = next;
                }
                let exact: HashMap<State, f64> = law.iter().enumerate().map(|(c, &p)| (vec![c as u64], p)).collect();
                let observed: HashMap<State, u64> =
                    seen_v.iter().enumerate().filter(|(_, c)| **c > 0).map(|(c, &k)| (vec![c as u64], k)).collect();
                let (chi2, dof) = chi_square(&exact, &observed, trials);
                let crit = chi2_quantile(dof, 5.612);
                assert!(chi2 < crit, "{name} eps {eps} d {d} category {v}: chi2 {chi2:.1} >= {crit:.1} ({dof} dof)");
            }
        }
    }
}
