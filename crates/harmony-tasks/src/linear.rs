//! `linear-queries`: a workload A of linear queries over the domain \[J\] of some attributes
//! (the cross-product of categorical ones and of numeric ones in equal-width bins), answered by
//! Hadamard Response (`hr`), the Gaussian mechanism (`gaussian`) or one device group per query
//! (`adaptive`; `adaptive-rounds` asks the queries in rounds, each chosen after the earlier
//! answers: [`crate::linear_rounds`]), from harmony-analytics' [`linear`](harmony_analytics::linear) module. The
//! workload is given inline in the spec in the formats of `harmony simulate --queries`
//! ([`Workload`]: built-ins, a list of queries, a matrix, CSV text).
//!
//! A device maps its record to its domain index v (row-major, the last attribute fastest;
//! numeric values through [`bin_of_unit`]). With `adaptive` it draws its query itself and sends
//! it in its report; the estimate uses the realized group sizes.
//!
//! # Reports (encoded, wire header included)
//! `hr`: harmony-core's `HrReport`, 3–7 bytes. `adaptive`: [`QueryBitReport`], 4–8 bytes.
//! `gaussian`: [`GaussianReport`], about 3 + 2.5·d bytes for d queries (the values are grid
//! units of σ/1024, 2–3 bytes each); [`resolve`] refuses a workload whose largest report exceeds
//! [`MAX_REPORT_BYTES`] (about 1,300 queries).
//!
//! # Cost of an estimate
//! It does not depend on the number of reports (the state is a fixed set of integer counts or
//! sums). `hr`: HR's estimate O(K log b), A·p̂ and A·Π(p̂) O(dJ), the closed-form standard errors
//! two FWHTs of size b per query and block, O(dJ log b). `gaussian`: the projection onto the
//! workload's hull, exact for the identity (O(J log J)), else FISTA at O(dJ) per iteration with
//! its iterations capped at [`PROJECTION_WORK`]/(dJ) (10 to 5,000; the document gives the
//! certified distance to the exact projection). `adaptive`: O(d). One document from 10^6
//! reports, release, one thread's CPU time (prefix workloads over J bins): hr 0.13 ms (J = 64)
//! and 1.2 ms (J = 256); gaussian 16 ms (J = 64) and 27 ms (J = 256; 2.5 s without the cap),
//! 0.13 ms for the identity at J = 1024 (exact projection); adaptive 0.014 ms. `validate` +
//! `add` per report: hr 24 ns, adaptive 19 ns, gaussian 834 ns (64 queries) to 10 µs (1,024).
//! Reproduce: `cargo run --release -p harmony-tasks --example ingest_facts`.
//!
//! Every spec is parsed on devices too (the workload defines a Gaussian device's report), so a
//! workload's d·J entries are held in memory twice (at most 2^26 entries: 1 GiB).

use crate::erased::{Task, TaskAggregator, Typed, encode_to};
use crate::input::{Input, category, unit};
use crate::linear_rounds::{QueryRounds, spec_queries};
use crate::range::simulate_typed;
use crate::simulate::at_device;
use harmony_analytics::linear::{
    AdaptiveWorkload, AdaptiveWorkloadAggregator, Domain, DomainAttribute, GaussianAggregator, GaussianReport,
    GaussianWorkload, HrWorkload, ProjectOptions, QueryBitReport, Workload, WorkloadEstimate, project,
};
use harmony_analytics::range::bin_of_unit;
use harmony_core::aggregate::Aggregator;
use harmony_core::error::{Error, Result, Shown};
use harmony_core::frequency::{HrAggregator, HrReport};
use harmony_core::randomizer::Randomizer;
use harmony_core::schema::{Attribute, Schema};
use harmony_core::wire::{self, WireKind, WireReport};
use harmony_protocol::estimates::{Est, LinearEstimate, LinearResult, Query, TaskEstimate};
use harmony_protocol::spec::{Hull, LinearMechanism, LinearQueriesSpec, TaskSpec};
use harmony_protocol::{CollectionConfig, MAX_REPORT_BYTES};
use rand::Rng;
use serde_json::Value as Json;
use std::sync::Arc;

/// δ of the Gaussian mechanism when the spec gives none.
pub const DEFAULT_DELTA: f64 = 1e-6;
/// The largest |value| of a Gaussian report, in grid steps (σ/1024): it keeps reports small
/// (≤ 5 varint bytes per query). Genuine workloads are far below it (≈ 1024·max|a|/σ + 40,960).
/// The aggregator's sums are `i128`, exact for any n < 2^64 reports of any `i64` entries, so
/// this bound is not what keeps them exact (with the former `i64` sums it allowed only 2^32
/// reports).
pub const MAX_ENTRY_STEPS: i64 = 1 << 31;
/// The work budget (matrix entries × iterations) of the Gaussian answers' projection.
pub const PROJECTION_WORK: usize = 1 << 23;

/// The wire kinds of this task's reports.
pub const REPORT_KINDS: [WireKind; 3] = [HrReport::KIND, GaussianReport::KIND, QueryBitReport::KIND];

/// Where a domain attribute sits in a record: its schema index and, for a numeric one, its bins.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Column {
    pos: usize,
    bins: Option<usize>,
    /// The presence attribute of a numeric attribute reporting missing values (its value after
    /// the bins is "(missing)").
    presence: Option<usize>,
}

/// Labels of k equal-width bins over [min, max]: `[lo, hi)`, the last one closed (as `harmony
/// simulate` labels them).
fn bin_labels(min: f64, max: f64, k: usize) -> Vec<String> {
    let edge = |x: f64| {
        let r = (x * 100.0).round() / 100.0;
        if r == r.trunc() { format!("{r:.0}") } else { format!("{r}") }
    };
    let w = (max - min) / k as f64;
    (0..k)
        .map(|i| {
            let last = i + 1 == k;
            let hi = if last { max } else { min + w * (i + 1) as f64 };
            format!("[{}, {}{}", edge(min + w * i as f64), edge(hi), if last { "]" } else { ")" })
        })
        .collect()
}

/// The domain of a spec's attributes and where each sits in a record; errors name `task.*`.
fn domain(spec: &LinearQueriesSpec, schema: &Schema) -> Result<(Domain, Vec<Column>)> {
    if spec.attributes.is_empty() {
        return Err(Error::param("task.attributes", "[]", "at least one attribute name"));
    }
    let (mut attrs, mut cols) = (Vec::new(), Vec::new());
    for name in &spec.attributes {
        let pos = schema
            .position(name)
            .ok_or_else(|| Error::param("task.attributes", name, "names of the schema's attributes"))?;
        let (labels, bins) = match (&schema.attributes()[pos], spec.bins.get(name)) {
            (Attribute::Categorical { categories, .. }, None) => (categories.clone(), None),
            (Attribute::Categorical { .. }, Some(_)) => {
                return Err(Error::param("task.bins", name, "bins only for numeric attributes"));
            }
            (Attribute::Numeric { min, max, .. }, Some(&k)) if k >= 2 => {
                let mut labels = bin_labels(*min, *max, k);
                // Reporting missing values: one more value after the bins.
                if schema.presence_of(pos).is_some() {
                    labels.push(harmony_core::schema::MISSING_LABEL.to_string());
                }
                (labels, Some(k))
            }
            (Attribute::Numeric { .. }, k) => {
                let value = Shown(format!("{name}: {}", k.map_or("missing".to_string(), |k| k.to_string())));
                let expected = "a number of bins >= 2 for each numeric attribute".to_string();
                return Err(Error::InvalidParameter { name: "task.bins", value, expected });
            }
        };
        attrs.push(DomainAttribute { name: name.clone(), labels });
        cols.push(Column { pos, bins, presence: schema.presence_of(pos) });
    }
    if let Some(name) = spec.bins.keys().find(|n| !spec.attributes.contains(n)) {
        return Err(Error::param("task.bins", name, "bins only for numeric attributes in task.attributes"));
    }
    let dom = Domain::new(attrs).map_err(|e| nested("task.attributes", e))?;
    Ok((dom, cols))
}

/// An analytics error as an error of spec field `field`, keeping the inner name and value.
fn nested(field: &'static str, e: Error) -> Error {
    match e {
        Error::InvalidInput { name, value, expected } => {
            Error::InvalidParameter { name: field, value: Shown(format!("{name} is {value}")), expected }
        }
        Error::InvalidParameter { name, value, expected } => {
            Error::InvalidParameter { name: field, value: Shown(format!("{name} is {value}")), expected }
        }
        other => other,
    }
}

/// Parses the spec's workload over the domain: a built-in name or CSV text (a JSON string), a
/// list of queries or a matrix (JSON); errors name `task.workload`.
fn workload(spec: &Json, dom: &Domain) -> Result<Workload> {
    let parsed = match spec {
        Json::String(s) => match Workload::builtin(s, dom) {
            Some(w) => w,
            None if !s.contains(',') && !s.contains('\n') => {
                return Err(Error::param(
                    "task.workload",
                    s,
                    "\"identity\", \"prefix\", CSV text, a list of queries or a matrix",
                ));
            }
            None => Workload::parse_csv(s, dom.size()),
        },
        Json::Object(_) | Json::Array(_) => Workload::parse_json(&spec.to_string(), dom),
        other => {
            return Err(Error::param(
                "task.workload",
                other,
                "a built-in name, CSV text, a list of queries or a matrix",
            ));
        }
    };
    parsed.map_err(|e| nested("task.workload", e))
}

/// A collection's randomizer, by mechanism.
#[derive(Debug, Clone)]
enum Mechanism {
    Hr(HrWorkload),
    Gaussian(GaussianWorkload),
    Adaptive(AdaptiveWorkload),
    /// `adaptive-rounds`: the rounds of the spec's queries, nothing answered.
    Rounds(QueryRounds),
}

/// Builds the mechanism of a spec (δ written out for `gaussian`) and checks its report size.
fn mechanism(spec: &LinearQueriesSpec, epsilon: f64, w: Arc<Workload>, dom: &Domain) -> Result<Mechanism> {
    match (spec.mechanism, spec.batch_size) {
        (LinearMechanism::AdaptiveRounds, None) => {
            let expected = "an integer >= 1: the devices that answer each query (mechanism adaptive-rounds)";
            return Err(Error::param("task.batch_size", "missing", expected));
        }
        (LinearMechanism::AdaptiveRounds, Some(_)) => {}
        (m, Some(b)) => {
            let expected = format!("no batch_size with mechanism {} (adaptive-rounds only)", m.name());
            return Err(Error::param("task.batch_size", b, expected));
        }
        (_, None) => {}
    }
    if spec.enrollment == Some(true) && spec.mechanism != LinearMechanism::AdaptiveRounds {
        let expected = format!("no enrollment with mechanism {} (adaptive-rounds only)", spec.mechanism.name());
        return Err(Error::param("task.enrollment", true, expected));
    }
    let m = match (spec.mechanism, spec.delta) {
        (LinearMechanism::Gaussian, delta) => {
            let delta = delta.unwrap_or(DEFAULT_DELTA);
            if !(delta > 0.0 && delta < 1.0) {
                return Err(Error::param("task.delta", delta, "a number in (0, 1) (the δ of (ε, δ)-LDP)"));
            }
            Mechanism::Gaussian(GaussianWorkload::new(epsilon, delta, w).map_err(|e| nested("task.workload", e))?)
        }
        (m, Some(delta)) => {
            return Err(Error::param(
                "task.delta",
                delta,
                format!("no delta with mechanism {} (gaussian only)", m.name()),
            ));
        }
        (LinearMechanism::Hr, None) => Mechanism::Hr(HrWorkload::new(epsilon, w)?),
        (LinearMechanism::Adaptive, None) => Mechanism::Adaptive(AdaptiveWorkload::new(epsilon, w)?),
        (LinearMechanism::AdaptiveRounds, None) => {
            let queries = spec_queries(&spec.workload)?;
            let batch = spec.batch_size.unwrap_or_default();
            Mechanism::Rounds(QueryRounds::new(Arc::new(dom.clone()), epsilon, batch, &queries)?)
        }
    };
    if let Mechanism::Gaussian(g) = &m
        && g.entry_bound() > MAX_ENTRY_STEPS
    {
        return Err(Error::param(
            "task.workload",
            format!("entries up to {} grid steps (σ = {})", g.entry_bound(), g.sigma()),
            format!("entries within {MAX_ENTRY_STEPS} grid steps of σ/1024: shift the queries by a constant"),
        ));
    }
    let bytes = match &m {
        Mechanism::Hr(h) => h.max_report_bytes(),
        Mechanism::Gaussian(g) => g.max_report_bytes(),
        Mechanism::Adaptive(a) => a.max_report_bytes(),
        // At most 8 bytes: a query index below 2^32 and a bit.
        Mechanism::Rounds(_) => 0,
    };
    if bytes > MAX_REPORT_BYTES {
        let d = match &m {
            Mechanism::Gaussian(g) => g.queries(),
            _ => 0,
        };
        return Err(Error::param(
            "task.workload",
            format!("{d} queries"),
            format!(
                "few enough queries that a gaussian report fits in {MAX_REPORT_BYTES} bytes (it takes up to {bytes}); fewer queries, or mechanism hr"
            ),
        ));
    }
    Ok(m)
}

/// Checks a linear-queries spec against the schema and ε (domain, workload, mechanism) and
/// writes out δ for `gaussian` and enrollment for `adaptive-rounds` (on unless the request
/// says `false`).
pub fn resolve(spec: &LinearQueriesSpec, schema: &Schema, epsilon: f64) -> Result<LinearQueriesSpec> {
    let (dom, _) = domain(spec, schema)?;
    let w = Arc::new(workload(&spec.workload, &dom)?);
    let mut out = spec.clone();
    match spec.mechanism {
        LinearMechanism::Gaussian => out.delta = Some(spec.delta.unwrap_or(DEFAULT_DELTA)),
        LinearMechanism::AdaptiveRounds => out.enrollment = Some(spec.enrollment.unwrap_or(true)),
        _ => out.enrollment = spec.enrollment.filter(|&e| e),
    }
    mechanism(&out, epsilon, w, &dom)?;
    Ok(out)
}

/// The `linear-queries` task.
#[derive(Debug)]
pub struct LinearTask {
    config: CollectionConfig,
    domain: Domain,
    columns: Vec<Column>,
    workload: Arc<Workload>,
    hull: Hull,
    mechanism: Mechanism,
}

impl LinearTask {
    /// Builds the domain, workload and randomizer of a resolved linear-queries config.
    pub fn new(config: CollectionConfig) -> Result<Self> {
        let TaskSpec::LinearQueries(spec) = &config.task else {
            return Err(Error::param("task", config.task.kind().name(), "linear-queries"));
        };
        let (domain, columns) = domain(spec, config.schema()?)?;
        let workload = Arc::new(workload(&spec.workload, &domain)?);
        let mechanism = mechanism(spec, config.epsilon, workload.clone(), &domain)?;
        let hull = spec.hull;
        Ok(LinearTask { config, domain, columns, workload, hull, mechanism })
    }
    /// The domain \[J\].
    pub fn domain(&self) -> &Domain {
        &self.domain
    }
    /// The workload.
    pub fn workload(&self) -> &Arc<Workload> {
        &self.workload
    }
    /// The closed-form variance of each unbiased answer when the devices' distribution over the
    /// domain is `p` and `n` devices reported (`adaptive`: `groups[t]` of them answered query t,
    /// the realized group sizes; an empty group gives an infinite variance). For scoring
    /// simulations against the truth.
    pub fn answer_variances(&self, p: &[f64], n: u64, groups: &[u64]) -> Result<Vec<f64>> {
        Ok(match &self.mechanism {
            Mechanism::Hr(m) => m.variances(p, n),
            Mechanism::Gaussian(m) => vec![m.answer_variance(n); self.workload.queries()],
            Mechanism::Adaptive(m) => (0..self.workload.queries())
                .map(|t| {
                    let m_t = groups.get(t).copied().unwrap_or(0);
                    Ok(if m_t == 0 { f64::INFINITY } else { m.query(t)?.variance(p, n, m_t) })
                })
                .collect::<Result<_>>()?,
            // Round t's group: the devices in its positions (a random sample of the population
            // when arrival does not depend on the values).
            Mechanism::Rounds(r) => (r.queries().iter().enumerate())
                .map(|(t, q)| match groups.get(t).copied().unwrap_or(0) {
                    0 => f64::INFINITY,
                    m_t => q.query.variance(p, n, m_t),
                })
                .collect(),
        })
    }
    /// The rounds of an `adaptive-rounds` collection (the spec's queries, nothing answered).
    pub fn rounds(&self) -> Option<&QueryRounds> {
        match &self.mechanism {
            Mechanism::Rounds(r) => Some(r),
            _ => None,
        }
    }
    /// A device's domain index, or an error naming the attribute.
    pub fn index(&self, input: &Input<'_>) -> Result<usize> {
        let record = input.record("linear-queries")?;
        let mut v = 0;
        for (a, col) in self.domain.attributes().iter().zip(&self.columns) {
            let k = a.labels.len();
            let c = match (col.bins, col.presence) {
                (None, _) => category(record, col.pos, k, &a.name)?,
                (Some(b), Some(p)) if record.get(p) == Some(&harmony_core::schema::Value::Category(1)) => b,
                (Some(b), _) => bin_of_unit(unit(record, col.pos, &a.name)?, b).unwrap_or(b - 1),
            };
            v = v * k + c;
        }
        Ok(v)
    }
    /// The Gaussian answers' projection: FISTA's iterations capped at
    /// [`PROJECTION_WORK`]`/(d·J)` (10 to 5,000) so that an estimate costs at most about 2·10^7
    /// multiply-adds whatever the workload (the document carries the certified distance bound).
    fn projection(&self) -> ProjectOptions {
        let entries = self.workload.queries() * self.workload.domain_size();
        ProjectOptions { max_iterations: (PROJECTION_WORK / entries.max(1)).clamp(10, 5000), ..Default::default() }
    }
    /// Each query's [min, max] weight (the range of its answers; unbounded when the document's
    /// queries are not the workload's).
    fn weight_bounds(&self, queries: usize) -> Vec<[f64; 2]> {
        let w = &self.workload;
        if w.queries() != queries {
            return vec![[f64::NEG_INFINITY, f64::INFINITY]; queries];
        }
        let bounds = |r: &[f64]| {
            [r.iter().copied().fold(f64::INFINITY, f64::min), r.iter().copied().fold(f64::NEG_INFINITY, f64::max)]
        };
        (0..queries).map(|t| bounds(w.row(t))).collect()
    }
    /// The estimate document of unbiased answers, their projections and the group sizes.
    fn document(&self, est: &WorkloadEstimate, projected: Option<Vec<f64>>, groups: Vec<u64>) -> LinearEstimate {
        let sizes = if groups.is_empty() { vec![est.n; est.answers.len()] } else { groups.clone() };
        let queries = est
            .answers
            .iter()
            .enumerate()
            .map(|(t, e)| LinearResult {
                name: self.workload.name(t).to_string(),
                answer: if sizes[t] == 0 { Est::NONE } else { Est::from_core(e) },
                projected: projected.as_ref().filter(|_| est.n > 0).map(|p| p[t]),
            })
            .collect();
        let (mechanism, sigma) = match &self.mechanism {
            Mechanism::Hr(_) => ("hr", None),
            Mechanism::Gaussian(g) => ("gaussian", Some(g.sigma())),
            Mechanism::Adaptive(_) => ("adaptive", None),
            Mechanism::Rounds(_) => ("adaptive-rounds", None),
        };
        LinearEstimate {
            mechanism: mechanism.to_string(),
            domain_size: self.domain.size(),
            sigma,
            group_reports: groups,
            queries,
            projection_bound: None,
            in_domain_note: None,
            warnings: Vec::new(),
        }
    }
}

/// Decodes and validates a report of one randomizer.
fn check<R: Randomizer>(r: &R, bytes: &[u8]) -> Result<()>
where
    R::Report: WireReport,
{
    r.validate(&wire::decode::<R::Report>(bytes)?)
}

impl Task for LinearTask {
    fn config(&self) -> &CollectionConfig {
        &self.config
    }
    fn randomize(&self, input: &Input<'_>, rng: &mut dyn Rng, out: &mut Vec<u8>) -> Result<()> {
        if let Mechanism::Rounds(r) = &self.mechanism {
            let (record, round) = input.answer("linear-queries adaptive-rounds")?;
            return r.randomize(round, self.index(&Input::Record(record))?, rng, out);
        }
        let v = self.index(input)?;
        match &self.mechanism {
            Mechanism::Hr(m) => encode_to(&m.randomize(&v, rng)?, out),
            Mechanism::Gaussian(m) => encode_to(&m.randomize(&v, rng)?, out),
            Mechanism::Adaptive(m) => encode_to(&m.randomize(&v, rng)?, out),
            Mechanism::Rounds(_) => unreachable!("answered above"),
        }
        Ok(())
    }
    fn validate(&self, report: &[u8]) -> Result<()> {
        match &self.mechanism {
            Mechanism::Hr(m) => check(m, report),
            Mechanism::Gaussian(m) => check(m, report),
            Mechanism::Adaptive(m) => check(m, report),
            // Which round it answers is checked against the rounds' state (`QueryRounds::check`).
            Mechanism::Rounds(_) => wire::decode::<QueryBitReport>(report).map(|_| ()),
        }
    }
    fn mergeable(&self) -> bool {
        !matches!(self.mechanism, Mechanism::Rounds(_))
    }
    fn aggregator(&self) -> Box<dyn TaskAggregator> {
        match &self.mechanism {
            Mechanism::Hr(m) => Box::new(Typed::wire(harmony_core::FrequencyOracle::aggregator(m.oracle()))),
            Mechanism::Gaussian(m) => Box::new(Typed::wire(m.aggregator())),
            Mechanism::Adaptive(m) => Box::new(Typed::wire(m.aggregator())),
            Mechanism::Rounds(r) => Box::new(r.clone()),
        }
    }
    fn estimate(&self, agg: &dyn TaskAggregator, _query: &Query) -> Result<TaskEstimate> {
        let doc = match &self.mechanism {
            Mechanism::Hr(m) => {
                let ans = m.answer(&Typed::<HrAggregator>::of(agg)?.estimate())?;
                self.document(&ans.answers, Some(ans.projected), Vec::new())
            }
            Mechanism::Gaussian(_) => {
                let est = Typed::<GaussianAggregator>::of(agg)?.estimate();
                let proj =
                    (est.n > 0).then(|| project(&self.workload, &est.values(), hull(self.hull), self.projection()));
                let bound = proj.as_ref().map(|p| p.distance_bound);
                let mut doc = self.document(&est, proj.map(|p| p.answers), Vec::new());
                doc.projection_bound = bound;
                doc
            }
            Mechanism::Adaptive(_) => {
                let a = Typed::<AdaptiveWorkloadAggregator>::of(agg)?;
                self.document(&a.estimate(), None, a.counts())
            }
            Mechanism::Rounds(_) => {
                let r = agg.as_any().downcast_ref::<QueryRounds>().ok_or_else(|| {
                    Error::Incompatible("an accumulator of another task, expected adaptive query rounds".into())
                })?;
                // The rounds' queries, posted after the collection's workload was set, give the
                // bounds.
                let mut doc = r.document();
                crate::domain::linear(&mut doc, &r.weight_bounds(), agg.count());
                return Ok(TaskEstimate::LinearQueries(doc));
            }
        };
        let (mut doc, reports) = (doc, agg.count());
        let bounds = self.weight_bounds(doc.queries.len());
        crate::domain::linear(&mut doc, &bounds, reports);
        Ok(TaskEstimate::LinearQueries(doc))
    }
    /// `adaptive-rounds`: devices in order, round by round from a fresh start: device i answers
    /// round ⌊i/batch_size⌋ + 1 through [`Task::randomize`] (as a served device does); devices
    /// after the last query's round do not report.
    fn simulate(&self, inputs: &[Input<'_>], seed: u64, first: u64) -> Result<Box<dyn TaskAggregator>> {
        let mut values = Vec::with_capacity(inputs.len());
        for (i, input) in inputs.iter().enumerate() {
            values.push(self.index(input).map_err(|e| at_device(e, first + i as u64))?);
        }
        Ok(match &self.mechanism {
            Mechanism::Hr(m) => {
                let empty = harmony_core::FrequencyOracle::aggregator(m.oracle());
                Box::new(Typed::wire(simulate_typed(m, empty, &values, seed, first)?))
            }
            Mechanism::Gaussian(m) => Box::new(Typed::wire(simulate_typed(m, m.aggregator(), &values, seed, first)?)),
            Mechanism::Adaptive(m) => Box::new(Typed::wire(simulate_typed(m, m.aggregator(), &values, seed, first)?)),
            Mechanism::Rounds(r) => self.simulate_rounds(r.clone(), inputs, seed, first)?,
        })
    }
}

impl LinearTask {
    fn simulate_rounds(
        &self,
        mut rounds: QueryRounds,
        inputs: &[Input<'_>],
        seed: u64,
        first: u64,
    ) -> Result<Box<dyn TaskAggregator>> {
        let mut out = Vec::new();
        for (i, input) in inputs.iter().enumerate() {
            if !rounds.open() {
                break;
            }
            let device = first + i as u64;
            let record = input.record("linear-queries")?;
            let round = rounds.state();
            let mut rng = crate::simulate::device_rng(seed, device);
            let answer = Input::Answer { record, round: &round };
            self.randomize(&answer, &mut rng, &mut out).map_err(|e| at_device(e, device))?;
            rounds.add(&out)?;
        }
        Ok(Box::new(rounds))
    }
}

/// The analytics hull of the spec's.
fn hull(h: Hull) -> harmony_analytics::linear::Hull {
    match h {
        Hull::Symmetric => harmony_analytics::linear::Hull::Symmetric,
        Hull::Simplex => harmony_analytics::linear::Hull::Simplex,
    }
}
