//! Adaptive queries answered by disjoint user groups (Bassily, AISTATS'19; docs/MECHANISMS.md §G):
//! the n users are split into d disjoint groups, one per query; query t may be chosen after
//! the answers to queries < t (adaptively), since its group has not reported yet. A user of
//! group t with value v sends Duchi's 1-bit mechanism on ⟨q_t, e_v⟩/r_t = q_t\[v\]/r_t, with
//! r_t = max_v |q_t\[v\]| (public, from the query): ε-LDP, 1 bit per user, each user once.
//!
//! # Utility
//! Group estimate: r_t·C·(2·#positive/m − 1), C = (e^ε + 1)/(e^ε − 1), unbiased for the
//! group's mean of q_t\[v\]. With the groups a uniformly random partition (group size m out of
//! n), it is unbiased for ⟨q_t, p⟩ over all n users, with
//!
//! Var = (r²C² − a)/m + n/(n − 1)·(1/m − 1/n)·(a − b²),  a = Σ_v p_v q_t\[v\]², b = ⟨q_t, p⟩
//!
//! (the mechanism's variance plus the sampling variance of a simple random sample). The second
//! factor is below 1/m, so Var is largest at a = b²: the reported standard error is
//! √((r²C² − b̂²)/m) (b̂ clamped to \[−r, r\]), exact when q_t is constant on the users' values and
//! otherwise conservative by at most (a − b²)/n. About r²C²·d/n per query.
//!
//! # Groups chosen by devices
//! [`AdaptiveWorkload`] is the servable form of a whole workload known in advance: each device
//! draws its query t uniformly from its own RNG, independently of its value, and sends
//! [`QueryBitReport`] (t and its bit; wire kind 23, 4–7 bytes). The server counts each query's
//! reports, the realized group sizes m_t. Conditional on those counts, every assignment of the n
//! devices to queries with these counts is equally likely, so the groups are a uniformly random
//! partition with sizes m_t and the variance above holds with the realized m_t. A query with no
//! report yet has no estimate. (Queries chosen after earlier answers need rounds, as `train`
//! runs; [`partition`] and `simulate::adaptive` split users into balanced groups in process.)

use super::{Workload, WorkloadEstimate};
use harmony_core::numeric::duchi::Duchi;
use harmony_core::sampling::{bernoulli, uniform_below};
use harmony_core::wire::{WireKind, WireReport};
use harmony_core::{Aggregator, Epsilon, Error, Estimate, Randomizer, Result};
use rand::Rng;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Duchi 1-D answering one query on its own user group.
///
/// # Example
/// ```
/// use harmony_analytics::linear::AdaptiveQuery;
/// // "Share of values 0 and 1, minus half the share of value 3" over J = 4.
/// let q = AdaptiveQuery::new(1.0, &[1.0, 1.0, 0.0, -0.5]).unwrap();
/// let mut rng = harmony_core::sampling::fast_rng(4);
/// let mut agg = q.aggregator();
/// for i in 0..40_000 {
///     agg.add(q.randomize(i % 4, &mut rng).unwrap());
/// }
/// let est = agg.estimate(); // truth: 0.25 + 0.25 − 0.125 = 0.375
/// assert!((est.value - 0.375).abs() < 5.0 * est.std_error);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct AdaptiveQuery {
    duchi: Duchi,
    q: Vec<f64>,
    r: f64,
}

impl AdaptiveQuery {
    /// The query's weights over \[J\].
    pub fn weights(&self) -> &[f64] {
        &self.q
    }
    /// A query (weights over \[J\]) under budget ε. Errors: ε not finite and > 0, J < 1, a
    /// non-finite weight.
    pub fn new(epsilon: f64, q: &[f64]) -> Result<Self> {
        let eps = Epsilon::new(epsilon)?;
        if q.is_empty() {
            return Err(Error::input("query", "[]", "weights over a domain of J >= 1 values"));
        }
        if let Some(v) = q.iter().position(|x| !x.is_finite()) {
            return Err(Error::input(format!("query weight {v}"), q[v], "a finite number"));
        }
        let r = q.iter().fold(0.0f64, |m, x| m.max(x.abs()));
        Ok(AdaptiveQuery { duchi: Duchi::from_epsilon(eps), q: q.to_vec(), r })
    }
    /// r = max |q_v|.
    pub fn scale(&self) -> f64 {
        self.r
    }
    /// C = (e^ε + 1)/(e^ε − 1).
    pub fn c(&self) -> f64 {
        self.duchi.scale()
    }
    /// The 1-bit report of a user with value v. Errors: v ≥ J.
    pub fn randomize<R: Rng + ?Sized>(&self, v: usize, rng: &mut R) -> Result<bool> {
        let x = *self.q.get(v).ok_or_else(|| Error::input("value", v, format!("an index in [0, {})", self.q.len())))?;
        let t = if self.r > 0.0 { x / self.r } else { 0.0 };
        Ok(bernoulli(rng, self.duchi.prob_positive(t)))
    }
    /// An empty aggregator for this query's group.
    pub fn aggregator(&self) -> AdaptiveAggregator {
        AdaptiveAggregator { rc: self.r * self.c(), r: self.r, positive: 0, n: 0 }
    }
    /// The exact variance of the group estimate (module doc) for a group of m out of n users
    /// with distribution p.
    pub fn variance(&self, p: &[f64], n: u64, m: u64) -> f64 {
        let a: f64 = self.q.iter().zip(p).map(|(q, p)| p * q * q).sum();
        let b: f64 = self.q.iter().zip(p).map(|(q, p)| p * q).sum();
        let (n, m) = (n as f64, m as f64);
        let rc = self.r * self.c();
        let sampling = if n > 1.0 { n / (n - 1.0) * (1.0 / m - 1.0 / n) * (a - b * b) } else { 0.0 };
        (rc * rc - a) / m + sampling
    }
}

/// One group's counts. Mergeable.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdaptiveAggregator {
    rc: f64,
    /// max |q\[v\]|: the answer lies in [−r, r].
    r: f64,
    positive: u64,
    n: u64,
}

impl AdaptiveAggregator {
    /// Adds one report.
    pub fn add(&mut self, positive: bool) {
        self.positive += positive as u64;
        self.n += 1;
    }
    /// Merges another aggregator of the same query.
    pub fn merge(&mut self, other: &Self) -> Result<()> {
        if self.rc != other.rc {
            return Err(Error::Incompatible(format!(
                "adaptive query aggregators with r·C {} and {}",
                self.rc, other.rc
            )));
        }
        self.positive += other.positive;
        self.n += other.n;
        Ok(())
    }
    /// Reports added (the group size m).
    pub fn count(&self) -> u64 {
        self.n
    }
    /// The unbiased answer with its (conservative) standard error √((r²C² − b̂²)/m), b̂ clamped
    /// to the answer's range [−r, r]: at least r·√((C² − 1)/m), never 0, even when every answer
    /// is the same bit.
    pub fn estimate(&self) -> Estimate {
        if self.n == 0 {
            return Estimate::new(0.0, f64::INFINITY);
        }
        let m = self.n as f64;
        let b = self.rc * (2.0 * self.positive as f64 / m - 1.0);
        let clamped = b.clamp(-self.r, self.r);
        Estimate::from_variance(b, (self.rc * self.rc - clamped * clamped) / m)
    }
}

/// A whole workload answered by disjoint groups that devices choose themselves (module docs).
///
/// # Example
/// ```
/// use harmony_analytics::linear::{AdaptiveWorkload, Domain, Workload};
/// use harmony_core::{Aggregator, Randomizer};
/// use std::sync::Arc;
/// let w = Arc::new(Workload::prefix(&Domain::indices(4).unwrap()).unwrap());
/// let mech = AdaptiveWorkload::new(1.0, w).unwrap();
/// let mut rng = harmony_core::sampling::fast_rng(5);
/// let mut agg = mech.aggregator();
/// for i in 0..40_000 {
///     agg.add(&mech.randomize(&(i % 4), &mut rng).unwrap()).unwrap();
/// }
/// let est = agg.estimate(); // query 1 = P[v <= 1] = 0.5
/// assert!((est.answers[1].value - 0.5).abs() < 5.0 * est.answers[1].std_error);
/// assert_eq!(agg.counts().iter().sum::<u64>(), 40_000);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct AdaptiveWorkload {
    workload: Arc<Workload>,
    eps: Epsilon,
    duchi: Duchi,
    /// r_t = max_v |a_t\[v\]| per query.
    r: Vec<f64>,
}

/// One device's report: the query it drew and its Duchi bit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct QueryBitReport {
    /// The query t < d, drawn by the device.
    pub query: u32,
    /// The 1-bit answer (+1 when true).
    pub positive: bool,
}

impl WireReport for QueryBitReport {
    const KIND: WireKind = WireKind { byte: 23, name: "QueryBitReport" };
}

impl AdaptiveWorkload {
    /// The mechanism for budget ε on `workload`. Errors: ε not finite and > 0, more than 2^32
    /// queries.
    pub fn new(epsilon: f64, workload: Arc<Workload>) -> Result<Self> {
        let eps = Epsilon::new(epsilon)?;
        if workload.queries() > u32::MAX as usize {
            return Err(Error::input("workload", workload.queries(), "at most 2^32 queries"));
        }
        let r = (0..workload.queries()).map(|t| workload.row(t).iter().fold(0.0f64, |m, x| m.max(x.abs()))).collect();
        Ok(AdaptiveWorkload { workload, eps, duchi: Duchi::from_epsilon(eps), r })
    }
    /// The workload.
    pub fn workload(&self) -> &Arc<Workload> {
        &self.workload
    }
    /// Query t as a one-group mechanism (its closed-form variance:
    /// [`AdaptiveQuery::variance`]).
    pub fn query(&self, t: usize) -> Result<AdaptiveQuery> {
        AdaptiveQuery::new(self.eps.value(), self.workload.row(t))
    }
    /// The report of a device holding v that drew query t. Errors: v ≥ J, t ≥ d.
    pub fn randomize_at<R: Rng + ?Sized>(&self, v: usize, t: usize, rng: &mut R) -> Result<QueryBitReport> {
        let j = self.workload.domain_size();
        if v >= j {
            return Err(Error::input("value", v, format!("an index in [0, {j})")));
        }
        if t >= self.r.len() {
            return Err(Error::input("query", t, format!("a query in [0, {})", self.r.len())));
        }
        let x = self.workload.column(v)[t];
        let scaled = if self.r[t] > 0.0 { x / self.r[t] } else { 0.0 };
        Ok(QueryBitReport { query: t as u32, positive: bernoulli(rng, self.duchi.prob_positive(scaled)) })
    }
    /// The largest encoded report (bytes, wire header included): the last query.
    pub fn max_report_bytes(&self) -> usize {
        harmony_core::wire::encode(&QueryBitReport { query: (self.r.len() - 1) as u32, positive: true }).len()
    }
    /// An empty aggregator (one count pair per query).
    pub fn aggregator(&self) -> AdaptiveWorkloadAggregator {
        let c = self.duchi.scale();
        AdaptiveWorkloadAggregator {
            groups: self.r.iter().map(|&r| AdaptiveAggregator { rc: r * c, r, positive: 0, n: 0 }).collect(),
        }
    }
}

/// A device: draws its query t uniformly from `rng` (independently of v), then sends Duchi's
/// bit on a_t\[v\]/r_t. Input: the device's domain index v < J.
impl Randomizer for AdaptiveWorkload {
    type Input = usize;
    type Report = QueryBitReport;

    fn randomize(&self, v: &usize, rng: &mut dyn Rng) -> Result<QueryBitReport> {
        let j = self.workload.domain_size();
        if *v >= j {
            return Err(Error::input("value", v, format!("an index in [0, {j})")));
        }
        let t = uniform_below(rng, self.r.len() as u64) as usize;
        self.randomize_at(*v, t, rng)
    }
    fn validate(&self, r: &QueryBitReport) -> Result<()> {
        check_query(r.query, self.r.len())
    }
}

fn check_query(t: u32, d: usize) -> Result<()> {
    if t as usize >= d {
        return Err(Error::report("query", t, format!("a query in [0, {d})")));
    }
    Ok(())
}

/// The server side of [`AdaptiveWorkload`]: per query, the reports and the positive bits
/// (exact integer counts). Mergeable.
#[derive(Debug, Clone, PartialEq)]
pub struct AdaptiveWorkloadAggregator {
    groups: Vec<AdaptiveAggregator>,
}

impl AdaptiveWorkloadAggregator {
    /// Reports per query (the realized group sizes m_t).
    pub fn counts(&self) -> Vec<u64> {
        self.groups.iter().map(|g| g.n).collect()
    }
}

impl Aggregator for AdaptiveWorkloadAggregator {
    type Report = QueryBitReport;
    /// One answer per query; a query without reports has value 0 and an infinite standard
    /// error (no estimate).
    type Output = WorkloadEstimate;

    fn validate(&self, r: &QueryBitReport) -> Result<()> {
        check_query(r.query, self.groups.len())
    }
    fn add_unchecked(&mut self, r: &QueryBitReport) {
        self.groups[r.query as usize].add(r.positive);
    }
    fn merge(&mut self, other: &Self) -> Result<()> {
        if self.groups.len() != other.groups.len() {
            return Err(Error::Incompatible(format!(
                "adaptive workload aggregators of {} and {} queries",
                self.groups.len(),
                other.groups.len()
            )));
        }
        // Check every group before changing any (all or nothing).
        for (a, b) in self.groups.iter().zip(&other.groups) {
            a.clone().merge(b)?;
        }
        self.groups.iter_mut().zip(&other.groups).try_for_each(|(a, b)| a.merge(b))
    }
    fn count(&self) -> u64 {
        self.groups.iter().map(|g| g.n).sum()
    }
    fn estimate(&self) -> WorkloadEstimate {
        WorkloadEstimate { n: self.count(), answers: self.groups.iter().map(AdaptiveAggregator::estimate).collect() }
    }
}

/// A uniformly random balanced partition of n users into `groups` groups (sizes ⌊n/g⌋ or
/// ⌈n/g⌉): entry i is user i's group. Errors: groups = 0 or groups > n.
pub fn partition<R: Rng + ?Sized>(n: usize, groups: usize, rng: &mut R) -> Result<Vec<u32>> {
    if groups == 0 || groups > n || groups > u32::MAX as usize {
        return Err(Error::input("groups", groups, format!("between 1 and the number of users ({n})")));
    }
    let mut g: Vec<u32> = (0..n).map(|i| (i % groups) as u32).collect();
    for i in (1..n).rev() {
        let k = uniform_below(rng, i as u64 + 1) as usize;
        g.swap(i, k);
    }
    Ok(g)
}

impl harmony_core::state::SaveState for AdaptiveAggregator {
    fn save_state(&self, w: &mut harmony_core::state::StateWriter<'_>) {
        w.u64(self.n);
        w.u64(self.positive);
    }
    fn merge_state(&mut self, r: &mut harmony_core::state::StateReader<'_>) -> Result<()> {
        let (n, positive) = (r.u64("query answers")?, r.u64("query positive answers")?);
        if positive > n {
            return Err(Error::report("query positive answers", positive, format!("at most the answers, {n}")));
        }
        self.n += n;
        self.positive += positive;
        Ok(())
    }
}

impl harmony_core::state::SaveState for AdaptiveWorkloadAggregator {
    fn save_state(&self, w: &mut harmony_core::state::StateWriter<'_>) {
        harmony_core::state::save_all(w, &self.groups);
    }
    fn merge_state(&mut self, r: &mut harmony_core::state::StateReader<'_>) -> Result<()> {
        harmony_core::state::merge_all(r, "queries", &mut self.groups)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use harmony_core::sampling::fast_rng;

    #[test]
    fn partition_is_balanced_and_errors_are_clear() {
        let mut rng = fast_rng(5);
        let g = partition(10, 3, &mut rng).unwrap();
        let sizes: Vec<usize> = (0..3).map(|t| g.iter().filter(|&&x| x == t).count()).collect();
        assert_eq!(sizes, vec![4, 3, 3]);
        assert!(partition(2, 3, &mut rng).unwrap_err().to_string().contains("between 1 and"));
        let q = AdaptiveQuery::new(1.0, &[1.0, -2.0, 0.0]).unwrap();
        assert_eq!(q.scale(), 2.0);
        assert!(q.randomize(3, &mut rng).is_err());
        assert!(AdaptiveQuery::new(1.0, &[f64::NAN]).is_err());
    }
}
