//! `range`: one numeric attribute, discretized to D equal-width bins over its [min, max], through
//! hierarchical histograms (`hh`), Haar wavelets (`haar`) or flat OUE (`flat`) from
//! harmony-analytics' [`range`](harmony_analytics::range) module. Ranges and quantiles are asked
//! at query time ([`Query`]).
//!
//! A device maps its value to [-1, 1] with the schema and reports bin
//! [`bin_of_unit`]`(t, D)`. With `hh` and `haar` it draws its level itself, uniformly, and sends
//! it in its report; the estimate uses the realized level sizes (see the analytics module's
//! "Groups chosen by devices").
//!
//! # Reports (encoded, wire header included)
//! `haar`: 5–7 bytes whatever D. `hh`: 4–8 bytes on GRR levels; on OUE levels (B^l ≥ 3e^ε + 2
//! nodes) about 1.25·B^l/8 bytes (64-bit words as varints). Measured at ε = 1 over 200,000
//! devices (min / mean / max): hh 5 / 9.6 / 15 at D = 64 and 5 / 44 / 161 at D = 1024; flat
//! 6 / 12.2 / 13 at D = 64 (≈ 1.25·D/8). [`resolve`] refuses a spec whose largest report exceeds
//! [`MAX_REPORT_BYTES`].
//!
//! # Cost of an estimate
//! It does not depend on the number of reports (the state is a fixed set of integer counts): the
//! level oracles' estimates (hh: O(B^h); haar: one FWHT per level, O(D log D)), the consistent
//! leaves (hh, O(B^h)), then O(D·h) for the CDF's standard errors (hh: O(D·h·B)) and O(h) per
//! range asked. One document (three ranges, three quantiles) from 10^6 reports, release, one
//! thread's CPU time: hh 0.02 ms at D = 64 and 0.28 ms at D = 1024; haar 0.03 ms at D = 64 and
//! 34 ms at D = 65,536 ([`MAX_BINS`]); flat 0.01 ms at D = 64. `validate` + `add`: 85–105 ns per
//! report at D = 64 (means: 300 ns in the same run). Reproduce: `cargo run --release -p
//! harmony-tasks --example ingest_facts`.

use crate::erased::{Task, TaskAggregator, Typed, encode_to};
use crate::input::{Input, unit};
use crate::simulate::{at_device, device_rng};
use harmony_analytics::range::{
    Cdf, FlatEstimate, FlatOue, Haar, HaarAggregator, HaarEstimate, HaarReport, HhAggregator, HhEstimate, HhReport,
    Hierarchy, RangeEstimator, Z95, bin_of_unit, choose_branching, cumulative,
};
use harmony_core::aggregate::Aggregator;
use harmony_core::error::{Error, Result};
use harmony_core::frequency::{UnaryAggregator, UnaryReport};
use harmony_core::randomizer::Randomizer;
use harmony_core::schema::{Attribute, Schema};
use harmony_core::wire::{self, WireReport};
use harmony_protocol::estimates::{CdfPoint, Est, QuantileResult, Query, RangeEstimate, RangeResult, TaskEstimate};
use harmony_protocol::spec::{RangeMethod, RangeSpec, TaskSpec};
use harmony_protocol::{CollectionConfig, MAX_REPORT_BYTES};
use rand::Rng;

/// Bins when the spec gives none.
pub const DEFAULT_BINS: usize = 64;
/// The most bins a spec may ask for: an estimate document costs O(D·h) (the CDF's standard
/// errors), about 34 ms at D = 2^16 with `haar` and 0.65 s at 2^20 (release, one thread).
pub const MAX_BINS: usize = 1 << 16;
/// The most CDF points in an estimate document (beyond, every k-th edge).
pub const MAX_CDF_POINTS: usize = 1024;
/// Quantile levels when the query asks for none.
pub const DEFAULT_QUANTILES: [f64; 3] = [0.1, 0.5, 0.9];

/// The attribute's index and [min, max], or an error naming `task.attribute`.
fn numeric(schema: &Schema, name: &str) -> Result<(usize, [f64; 2])> {
    numeric_field(schema, "task.attribute", name)
}

/// A binnable numeric attribute's index and [min, max], or an error naming `field`.
pub(crate) fn numeric_field(schema: &Schema, field: &'static str, name: &str) -> Result<(usize, [f64; 2])> {
    let j =
        schema.position(name).ok_or_else(|| Error::param(field, name, "the name of one of the schema's attributes"))?;
    match &schema.attributes()[j] {
        Attribute::Numeric { min, max, .. } => crate::input::binnable(schema, j, field).map(|_| (j, [*min, *max])),
        Attribute::Categorical { .. } => {
            Err(Error::param(field, name, "a numeric attribute (ranges and quantiles need an ordered one)"))
        }
    }
}

/// A collection's randomizer, by method.
#[derive(Debug, Clone)]
enum Method {
    Hh(Hierarchy),
    Haar(Haar),
    Flat(FlatOue),
}

impl Method {
    fn max_report_bytes(&self) -> usize {
        match self {
            Method::Hh(h) => h.max_report_bytes(),
            Method::Haar(h) => h.max_report_bytes(),
            Method::Flat(f) => f.max_report_bytes(),
        }
    }
}

/// The spec's bins (default [`DEFAULT_BINS`]), checked.
fn bins_of(spec: &RangeSpec) -> Result<usize> {
    let d = spec.bins.unwrap_or(DEFAULT_BINS);
    if !(2..=MAX_BINS).contains(&d) {
        return Err(Error::param("task.bins", d, format!("an integer in [2, {MAX_BINS}]")));
    }
    Ok(d)
}

/// Builds the method of a spec whose bins and branching are written out, with errors naming
/// `task.*`; checks that its largest report fits in [`MAX_REPORT_BYTES`].
fn method(spec: &RangeSpec, epsilon: f64, d: usize) -> Result<Method> {
    let m = match (spec.method, spec.branching) {
        (RangeMethod::Hh, Some(b)) => {
            if b < 2 {
                return Err(Error::param("task.branching", b, "an integer >= 2"));
            }
            let h = Hierarchy::new(epsilon, b, d).map_err(|_| {
                Error::param("task.branching", b, format!("small enough that B^h <= 2^24 for {d} bins"))
            })?;
            Method::Hh(h)
        }
        (RangeMethod::Hh, None) => return Err(Error::param("task.branching", "missing", "the resolved branching B")),
        (m, Some(b)) => {
            return Err(Error::param("task.branching", b, format!("no branching with method {} (hh only)", m.name())));
        }
        (RangeMethod::Haar, None) => Method::Haar(Haar::new(epsilon, d)?),
        (RangeMethod::Flat, None) => Method::Flat(FlatOue::new(epsilon, d)?),
    };
    let bytes = m.max_report_bytes();
    if bytes > MAX_REPORT_BYTES {
        return Err(Error::param(
            "task.bins",
            d,
            format!(
                "few enough bins that a {} report fits in {MAX_REPORT_BYTES} bytes (it takes up to {bytes}); \
                 fewer bins, or method haar",
                spec.method.name()
            ),
        ));
    }
    Ok(m)
}

/// Checks a range spec against the schema and ε and writes out `bins` and, for `hh`, the
/// branching B (the spec's, else [`choose_branching`]).
pub fn resolve(spec: &RangeSpec, schema: &Schema, epsilon: f64) -> Result<RangeSpec> {
    numeric(schema, &spec.attribute)?;
    let d = bins_of(spec)?;
    let branching = match (spec.method, spec.branching) {
        (RangeMethod::Hh, None) => Some(choose_branching(epsilon, d)?),
        (_, b) => b,
    };
    let resolved = RangeSpec { attribute: spec.attribute.clone(), bins: Some(d), method: spec.method, branching };
    method(&resolved, epsilon, d)?;
    Ok(resolved)
}

/// The `range` task.
#[derive(Debug)]
pub struct RangeTask {
    config: CollectionConfig,
    attribute: usize,
    name: String,
    bounds: [f64; 2],
    bins: usize,
    method: Method,
}

impl RangeTask {
    /// Builds the randomizer of a resolved range config.
    pub fn new(config: CollectionConfig) -> Result<Self> {
        let TaskSpec::Range(spec) = &config.task else {
            return Err(Error::param("task", config.task.kind().name(), "range"));
        };
        let (attribute, bounds) = numeric(config.schema()?, &spec.attribute)?;
        let bins = bins_of(spec)?;
        let method = method(spec, config.epsilon, bins)?;
        let name = spec.attribute.clone();
        Ok(RangeTask { config, attribute, name, bounds, bins, method })
    }
    /// The number of bins D.
    pub fn bins(&self) -> usize {
        self.bins
    }
    /// A device's bin, or an error naming the attribute.
    pub fn bin(&self, input: &Input<'_>) -> Result<usize> {
        let t = unit(input.record("range")?, self.attribute, &self.name)?;
        bin_of_unit(t, self.bins)
            .ok_or_else(|| Error::input(self.name.as_str(), t, "a numeric value mapped to [-1, 1]"))
    }
    /// Bin edge t in the attribute's units.
    fn edge(&self, t: usize) -> f64 {
        let [lo, hi] = self.bounds;
        if t == self.bins { hi } else { lo + (hi - lo) * t as f64 / self.bins as f64 }
    }
    /// The bin edge nearest x (in units), within [0, D].
    fn nearest_edge(&self, x: f64) -> usize {
        let [lo, hi] = self.bounds;
        ((x - lo) / (hi - lo) * self.bins as f64).round().clamp(0.0, self.bins as f64) as usize
    }
    /// The estimate document of an estimator (`None` while a level has no report).
    pub fn document(
        &self,
        est: Option<&dyn RangeEstimator>,
        level_reports: Vec<u64>,
        query: &Query,
    ) -> Result<RangeEstimate> {
        let levels = check_query(query)?;
        let d = self.bins;
        let step = d.div_ceil(MAX_CDF_POINTS);
        let mut edges: Vec<usize> = (0..=d).step_by(step).collect();
        if edges.last() != Some(&d) {
            edges.push(d);
        }
        let (cdf, ranges, quantiles) = match est {
            None => {
                let cdf = edges.iter().map(|&t| CdfPoint { bin: t, x: self.edge(t), value: Est::NONE }).collect();
                let ranges = query.ranges.iter().map(|&r| self.range_result(r, |_, _| Est::NONE)).collect();
                let q = levels.iter().map(|&q| QuantileResult {
                    q,
                    bin: None,
                    value: None,
                    interval_bins: None,
                    interval: None,
                });
                (cdf, ranges, q.collect())
            }
            Some(est) => {
                let cum = cumulative(&est.plug_in_freqs());
                let answer = |a: usize, b: usize| {
                    let p = est.range_variance_cum(a, b, &cum);
                    Est::new(est.range_unchecked(a, b), (p.noise + p.split).max(0.0).sqrt())
                };
                let full: Vec<Est> = (0..=d).map(|t| answer(0, t)).collect();
                let cdf = edges.iter().map(|&t| CdfPoint { bin: t, x: self.edge(t), value: full[t] }).collect();
                let ranges = query.ranges.iter().map(|&r| self.range_result(r, answer)).collect();
                let curve = Cdf {
                    values: full.iter().map(Est::value).collect(),
                    std_errors: full.iter().map(Est::se).collect(),
                };
                (cdf, ranges, levels.iter().map(|&q| self.quantile(&curve, q)).collect::<Result<_>>()?)
            }
        };
        let reports = level_reports.iter().sum();
        let mut doc = RangeEstimate {
            attribute: self.name.clone(),
            method: self.config_method().name().to_string(),
            bins: d,
            bounds: self.bounds,
            level_reports,
            cdf,
            ranges,
            quantiles,
            in_domain_note: None,
            warnings: Vec::new(),
        };
        crate::domain::range(&mut doc, reports);
        Ok(doc)
    }
    fn config_method(&self) -> RangeMethod {
        match self.method {
            Method::Hh(_) => RangeMethod::Hh,
            Method::Haar(_) => RangeMethod::Haar,
            Method::Flat(_) => RangeMethod::Flat,
        }
    }
    fn range_result(&self, range: [f64; 2], answer: impl Fn(usize, usize) -> Est) -> RangeResult {
        let (a, b) = (self.nearest_edge(range[0]), self.nearest_edge(range[1]));
        RangeResult { range, bins: [a, b], share: answer(a, b) }
    }
    fn quantile(&self, cdf: &Cdf, q: f64) -> Result<QuantileResult> {
        let e = cdf.quantile(q, Z95)?;
        Ok(QuantileResult {
            q,
            bin: Some(e.bin),
            value: Some([self.edge(e.bin), self.edge(e.bin + 1)]),
            interval_bins: Some([e.lower, e.upper]),
            interval: Some([self.edge(e.lower), self.edge(e.upper + 1)]),
        })
    }
}

/// The estimator behind a range collection's accumulator.
#[derive(Debug, Clone)]
pub enum Estimator {
    /// Hierarchical histograms (answers: the consistent estimate).
    Hh(HhEstimate),
    /// Haar wavelets.
    Haar(HaarEstimate),
    /// Flat OUE.
    Flat(FlatEstimate),
}

impl Estimator {
    /// What the document answers with (`hh`: the consistent estimate).
    pub fn answers(&self) -> &dyn RangeEstimator {
        match self {
            Estimator::Hh(e) => e,
            Estimator::Haar(e) => e,
            Estimator::Flat(e) => e,
        }
    }
    /// The unbiased estimate of `[a, b)` whose variance [`RangeEstimator::range_variance_cum`]
    /// gives exactly (`hh`: the raw hierarchical one; the others: their answers).
    pub fn unbiased_unchecked(&self, a: usize, b: usize) -> f64 {
        match self {
            Estimator::Hh(e) => e.range_raw_unchecked(a, b),
            other => other.answers().range_unchecked(a, b),
        }
    }
}

impl RangeTask {
    /// The estimator of an accumulator of this task (`None` while a level has no report) and the
    /// reports per level: what [`Task::estimate`] documents, for scoring simulations.
    pub fn estimator(&self, agg: &dyn TaskAggregator) -> Result<(Option<Estimator>, Vec<u64>)> {
        Ok(match &self.method {
            Method::Hh(_) => {
                let a = Typed::<HhAggregator>::of(agg)?;
                (a.estimate().ok().map(Estimator::Hh), a.counts())
            }
            Method::Haar(_) => {
                let a = Typed::<HaarAggregator>::of(agg)?;
                (a.estimate().ok().map(Estimator::Haar), a.counts())
            }
            Method::Flat(f) => {
                let a = Typed::<UnaryAggregator>::of(agg)?;
                let est = if a.count() == 0 { None } else { Some(Estimator::Flat(f.estimate(a)?)) };
                (est, vec![a.count()])
            }
        })
    }
}

/// Checks a query's ranges and levels; returns the levels (default [`DEFAULT_QUANTILES`]).
fn check_query(query: &Query) -> Result<Vec<f64>> {
    for (i, &[lo, hi]) in query.ranges.iter().enumerate() {
        if !(lo.is_finite() && hi.is_finite() && lo <= hi) {
            return Err(Error::input(
                format!("query.ranges[{i}]"),
                [lo, hi],
                "[LO, HI]: finite, LO <= HI (the attribute's units)",
            ));
        }
    }
    let levels = query.quantiles.clone().unwrap_or(DEFAULT_QUANTILES.to_vec());
    if let Some(i) = levels.iter().position(|q| !(*q > 0.0 && *q < 1.0)) {
        return Err(Error::input(format!("query.quantiles[{i}]"), levels[i], "a level in (0, 1)"));
    }
    Ok(levels)
}

/// Decodes and validates a report of one randomizer.
fn check<R: Randomizer>(r: &R, bytes: &[u8]) -> Result<()>
where
    R::Report: WireReport,
{
    r.validate(&wire::decode::<R::Report>(bytes)?)
}

/// Simulated devices `first..` straight into a typed accumulator: device i draws with
/// [`device_rng`]`(seed, i)` exactly as [`Task::randomize`] does, without encoding, validating
/// and decoding its report (the same accumulator: tested).
pub(crate) fn simulate_typed<R, A>(r: &R, mut agg: A, inputs: &[usize], seed: u64, first: u64) -> Result<A>
where
    R: Randomizer<Input = usize>,
    A: Aggregator<Report = R::Report>,
{
    for (i, x) in inputs.iter().enumerate() {
        let device = first + i as u64;
        agg.add_unchecked(&r.randomize(x, &mut device_rng(seed, device)).map_err(|e| at_device(e, device))?);
    }
    Ok(agg)
}

impl Task for RangeTask {
    fn config(&self) -> &CollectionConfig {
        &self.config
    }
    fn randomize(&self, input: &Input<'_>, rng: &mut dyn Rng, out: &mut Vec<u8>) -> Result<()> {
        let x = self.bin(input)?;
        match &self.method {
            Method::Hh(h) => encode_to(&h.randomize(&x, rng)?, out),
            Method::Haar(h) => encode_to(&h.randomize(&x, rng)?, out),
            Method::Flat(f) => encode_to(&Randomizer::randomize(f, &x, rng)?, out),
        }
        Ok(())
    }
    fn validate(&self, report: &[u8]) -> Result<()> {
        match &self.method {
            Method::Hh(h) => check(h, report),
            Method::Haar(h) => check(h, report),
            Method::Flat(f) => check(f, report),
        }
    }
    fn aggregator(&self) -> Box<dyn TaskAggregator> {
        match &self.method {
            Method::Hh(h) => Box::new(Typed::wire(h.aggregator())),
            Method::Haar(h) => Box::new(Typed::wire(h.aggregator())),
            Method::Flat(f) => Box::new(Typed::wire(f.aggregator())),
        }
    }
    fn estimate(&self, agg: &dyn TaskAggregator, query: &Query) -> Result<TaskEstimate> {
        let (est, levels) = self.estimator(agg)?;
        Ok(TaskEstimate::Range(self.document(est.as_ref().map(Estimator::answers), levels, query)?))
    }
    fn simulate(&self, inputs: &[Input<'_>], seed: u64, first: u64) -> Result<Box<dyn TaskAggregator>> {
        let mut bins = Vec::with_capacity(inputs.len());
        for (i, input) in inputs.iter().enumerate() {
            bins.push(self.bin(input).map_err(|e| at_device(e, first + i as u64))?);
        }
        Ok(match &self.method {
            Method::Hh(h) => Box::new(Typed::wire(simulate_typed(h, h.aggregator(), &bins, seed, first)?)),
            Method::Haar(h) => Box::new(Typed::wire(simulate_typed(h, h.aggregator(), &bins, seed, first)?)),
            Method::Flat(f) => {
                Box::new(Typed::<UnaryAggregator>::wire(simulate_typed(f, f.aggregator(), &bins, seed, first)?))
            }
        })
    }
}

/// The wire kinds of this task's reports.
pub const REPORT_KINDS: [harmony_core::wire::WireKind; 3] = [HhReport::KIND, HaarReport::KIND, UnaryReport::KIND];
