//! Workload answers from Hadamard Response (docs/MECHANISMS.md §A6, §G): estimate the distribution
//! p̂ over \[J\] with harmony-core's [`HadamardResponse`] (ε-LDP, log₂ K bits per user), answer
//! A·p̂ (unbiased), and, post-processed, A·Π(p̂) with Π the Euclidean projection onto the
//! simplex (biased, much smaller l2 error when J is large against n).
//!
//! # Utility (closed form, derived here)
//! A report y in block j contributes Z_q(y) = D/(e^ε − 1)·(H_b u_j)\[y mod b\] to ⟨q, p̂⟩, where
//! u_j ∈ R^b holds q's weights on block j's items at their Hadamard rows (u_j\[0\] = 0). With
//! P\[y | x\] = 2/(bD) everywhere plus (2(e^ε − 1)/(bD)) on C_x, Parseval (‖H u‖² = b‖u‖²) and
//! Σ_{y∈C_x} s(y) = (Σ s + (H s)\[r_x\])/2 for s = (H u_j)²:
//!
//! E\[Z_q² | x\] = D/(e^ε − 1)² · [ 2‖q‖² + (e^ε − 1)(‖u_{j(x)}‖² + (H s_{j(x)})\[r_x\]/b) ],
//!
//! and, users' values fixed, `Var⟨q, p̂⟩ = (Σ_x p_x E[Z_q² | x] − Σ_x p_x q_x²)/n`: two FWHTs of
//! size b per block touched by q. For q = e_v it is HR's own `[D(2 + (e^ε − 1)π_v)/(e^ε − 1)² −
//! p_v]/n`. Standard errors plug in Π(p̂) for p.

use super::{Workload, WorkloadEstimate};
use harmony_core::frequency::fwht::fwht;
use harmony_core::frequency::{HadamardResponse, HrReport};
use harmony_core::postprocess::project_simplex;
use harmony_core::{Error, Estimate, FrequencyEstimate, FrequencyOracle, Randomizer, Result};
use rand::Rng;
use std::sync::Arc;

/// Hadamard Response over \[J\] answering a workload.
///
/// # Example
/// ```
/// use harmony_analytics::linear::{Domain, HrWorkload, Workload};
/// use harmony_core::{Aggregator, FrequencyOracle};
/// use std::sync::Arc;
/// let w = Arc::new(Workload::prefix(&Domain::indices(16).unwrap()).unwrap());
/// let hr = HrWorkload::new(1.0, w).unwrap();
/// let mut rng = harmony_core::sampling::fast_rng(9);
/// let mut agg = hr.oracle().aggregator();
/// for i in 0..20_000 {
///     agg.add(&hr.oracle().randomize(i % 16, &mut rng).unwrap()).unwrap();
/// }
/// let ans = hr.answer(&agg.estimate()).unwrap();
/// // Query 7 = P[v <= 7] = 0.5, unbiased with its standard error; projected: biased, inside [0, 1].
/// let q = ans.answers.answers[7];
/// assert!((q.value - 0.5).abs() < 5.0 * q.std_error);
/// assert!((0.0..=1.0).contains(&ans.projected[7]));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct HrWorkload {
    oracle: HadamardResponse,
    workload: Arc<Workload>,
}

/// HR's answers: unbiased, and after simplex projection.
#[derive(Debug, Clone, PartialEq)]
pub struct HrWorkloadEstimate {
    /// A·p̂ with closed-form standard errors (plug-in Π(p̂)).
    pub answers: WorkloadEstimate,
    /// Π(p̂): the projected distribution over \[J\].
    pub distribution: Vec<f64>,
    /// A·Π(p̂) (biased).
    pub projected: Vec<f64>,
}

impl HrWorkload {
    /// HR with budget ε over the workload's domain. Errors: ε not finite and > 0.
    pub fn new(epsilon: f64, workload: Arc<Workload>) -> Result<Self> {
        let oracle = HadamardResponse::new(epsilon, workload.domain_size())?;
        Ok(HrWorkload { oracle, workload })
    }
    /// The frequency oracle (clients randomize with it; the server aggregates with its
    /// aggregator).
    pub fn oracle(&self) -> &HadamardResponse {
        &self.oracle
    }
    /// The largest encoded report (bytes, wire header included): the last output.
    pub fn max_report_bytes(&self) -> usize {
        harmony_core::wire::encode(&HrReport { y: (self.oracle.outputs() - 1) as u32 }).len()
    }
    /// The workload.
    pub fn workload(&self) -> &Arc<Workload> {
        &self.workload
    }
    /// Answers the workload from HR's frequency estimate. Errors: an estimate over another
    /// domain size.
    pub fn answer(&self, est: &FrequencyEstimate) -> Result<HrWorkloadEstimate> {
        let j = self.workload.domain_size();
        if est.frequencies.len() != j {
            return Err(Error::input("frequency estimate", est.frequencies.len(), format!("J = {j} frequencies")));
        }
        let distribution = project_simplex(&est.frequencies);
        let raw = self.workload.apply(&est.frequencies);
        let vars = if est.n == 0 { vec![f64::INFINITY; raw.len()] } else { self.variances(&distribution, est.n) };
        let answers = raw.into_iter().zip(vars).map(|(x, v)| Estimate::from_variance(x, v)).collect();
        let projected = self.workload.apply(&distribution);
        Ok(HrWorkloadEstimate { answers: WorkloadEstimate { n: est.n, answers }, distribution, projected })
    }
    /// The closed-form variance of every unbiased answer ⟨a_t, p̂⟩ for n users with
    /// distribution p (module doc).
    pub fn variances(&self, p: &[f64], n: u64) -> Vec<f64> {
        (0..self.workload.queries()).map(|t| self.query_variance(self.workload.row(t), p, n)).collect()
    }
    /// The closed-form variance of ⟨q, p̂⟩ for n users with distribution p.
    pub fn query_variance(&self, q: &[f64], p: &[f64], n: u64) -> f64 {
        let j = self.workload.domain_size();
        assert!(q.len() == j && p.len() == j, "query_variance: q and p need J = {j} entries");
        let b = self.oracle.block_size();
        let e_m1 = self.oracle.epsilon().exp_m1();
        let big_d = self.oracle.big_d();
        let q_norm2: f64 = q.iter().map(|x| x * x).sum();
        let mut second = 0.0; // Σ_x p_x E[Z² | x]
        let items = b - 1;
        for (qs, ps) in q.chunks(items).zip(p.chunks(items)) {
            let mass: f64 = ps.iter().sum();
            let u_norm2: f64 = qs.iter().map(|x| x * x).sum();
            // Users in a block q does not touch: E[Z²|x] = D·2‖q‖²/(e−1)².
            let mut inner = vec![0.0; b];
            if u_norm2 > 0.0 && mass > 0.0 {
                let mut h = vec![0.0; b];
                h[1..=qs.len()].copy_from_slice(qs);
                fwht(&mut h);
                let mut s: Vec<f64> = h.iter().map(|x| x * x).collect();
                fwht(&mut s);
                for (r, slot) in inner.iter_mut().enumerate().skip(1).take(qs.len()) {
                    *slot = u_norm2 + s[r] / b as f64;
                }
            }
            for (r, &px) in ps.iter().enumerate() {
                second += px * (2.0 * q_norm2 + e_m1 * inner[r + 1]);
            }
        }
        second *= big_d / (e_m1 * e_m1);
        let first: f64 = q.iter().zip(p).map(|(a, b)| a * a * b).sum();
        ((second - first) / n as f64).max(0.0)
    }
}

/// A device: its domain index v < J through Hadamard Response (harmony-core's [`HrReport`],
/// wire kind 6, 3–7 bytes encoded). The server aggregates with the oracle's aggregator.
impl Randomizer for HrWorkload {
    type Input = usize;
    type Report = HrReport;

    fn randomize(&self, v: &usize, rng: &mut dyn Rng) -> Result<HrReport> {
        self.oracle.randomize(*v, rng)
    }
    fn validate(&self, r: &HrReport) -> Result<()> {
        self.oracle.validate_report(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linear::Domain;

    /// The workload variance reduces to HR's own per-item variance for point queries, and is
    /// checked by brute force (explicit sum over the K outputs) for a general query.
    #[test]
    fn variance_matches_hr_and_brute_force() {
        for &(eps, j) in &[(0.5, 13usize), (1.0, 40), (3.0, 40), (5.0, 100)] {
            let dom = Domain::indices(j).unwrap();
            let hr = HrWorkload::new(eps, Arc::new(Workload::identity(&dom).unwrap())).unwrap();
            let p: Vec<f64> = (0..j).map(|v| (v as f64 + 1.0).powf(-1.1)).collect();
            let total: f64 = p.iter().sum();
            let p: Vec<f64> = p.iter().map(|x| x / total).collect();
            for v in [0, 1, j / 2, j - 1] {
                let mut q = vec![0.0; j];
                q[v] = 1.0;
                let mine = hr.query_variance(&q, &p, 10);
                let theirs = hr.oracle().aggregate_variance(&p, v) / 10.0;
                assert!((mine / theirs - 1.0).abs() < 1e-9, "eps {eps} J {j} v {v}: {mine} vs {theirs}");
            }
            // Brute force: E[Z²|x] = Σ_y P[y|x] (Σ_v q_v report_estimate(y, v))².
            let q: Vec<f64> = (0..j).map(|v| ((v * 7) % 5) as f64 - 1.5).collect();
            let o = hr.oracle();
            let mut second = 0.0;
            for (x, &px) in p.iter().enumerate() {
                let mut ez2 = 0.0;
                for y in 0..o.outputs() {
                    let r = harmony_core::frequency::HrReport { y: y as u32 };
                    let z: f64 = (0..j).map(|v| q[v] * o.report_estimate(&r, v)).sum();
                    ez2 += o.output_probability(x, &r) * z * z;
                }
                second += px * ez2;
            }
            let first: f64 = (0..j).map(|x| p[x] * q[x] * q[x]).sum();
            let brute = (second - first) / 7.0;
            let mine = hr.query_variance(&q, &p, 7);
            assert!((mine / brute - 1.0).abs() < 1e-9, "eps {eps} J {j}: {mine} vs brute {brute}");
        }
    }
}
