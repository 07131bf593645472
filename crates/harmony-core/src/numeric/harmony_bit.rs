//! Harmony's 1-bit multidimensional numeric mechanism (Nguyen et al. 2016, Alg. 2;
//! docs/MECHANISMS.md §B6).
//!
//! Derivation. The user draws j uniformly from [0, d) (independently of t) and reports j and a
//! sign: + with probability P₊(t_j) = 1/2 + t_j/(2c), c = (e^ε + 1)/(e^ε − 1) (Duchi's 1-D
//! mechanism on coordinate j). The decoded vector is ±c·d at j and 0 elsewhere, so
//! E\[Y_j] = (1/d)·c·d·(2P₊ − 1) = t_j and E\[Y_j²] = (1/d)(c·d)² = d·c², hence
//! Var_j = d·c² − t_j².

use super::VectorMechanism;
use crate::error::{Error, Result};
use crate::params::{Epsilon, check_dimension};
use crate::sampling::{bernoulli_fast, uniform_below};
use crate::wire::{ReportKind, WireKind, WireReport};
use rand::Rng;
use serde::{Deserialize, Serialize};

/// A [`HarmonyBit`] report: the sampled coordinate and one sign bit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HarmonyBitReport {
    /// The sampled coordinate, in [0, d).
    pub j: u32,
    /// The sign: the coordinate's value is +c·d (true) or −c·d (false).
    pub positive: bool,
}

impl WireReport for HarmonyBitReport {
    const KIND: WireKind = ReportKind::HarmonyBit.wire();
}

/// Harmony's 1-bit mechanism for t ∈ [-1, 1]^d: one uniformly sampled coordinate, randomized
/// with Duchi's 1-D mechanism at the full ε and scaled by d.
///
/// # Privacy
/// P[(j, ±) | t] = (1/d)·P±(t_j), where P₊(t_j) = 1/2 + t_j/(2c) ∈ [1/(e^ε + 1), e^ε/(e^ε + 1)].
/// The 1/d factor does not depend on t, so the ratio between two inputs is that of Duchi's
/// mechanism: at most e^ε, attained when t_j = 1 vs t'_j = −1: exactly ε-LDP for the whole
/// vector. (j may also come from public randomness, e.g. a hash of the user ID.)
///
/// # Utility
/// Var_j = d·c² − t_j², c = (e^ε + 1)/(e^ε − 1); worst case d·c². One bit plus log₂ d bits.
///
/// # Example
/// ```
/// use harmony_core::numeric::{HarmonyBit, VectorMechanism};
/// use harmony_core::{Aggregator, sampling::fast_rng};
///
/// let mech = HarmonyBit::new(2.0, 3)?;
/// let mut rng = fast_rng(42);
/// let rows: Vec<[f64; 3]> = (0..6000).map(|i| [0.5, -0.25, (i % 5) as f64 / 4.0 - 0.5]).collect();
/// let mut reports = Vec::new();
/// mech.randomize_batch(&rows, &mut rng, &mut reports)?;
/// let mut agg = mech.aggregator();
/// agg.add_batch(&reports)?;
/// let est = agg.estimate();
/// for (j, truth) in [0.5, -0.25, 0.0].into_iter().enumerate() {
///     println!("coordinate {j}: {:.3} ± {:.3} (truth {truth})", est[j].value, est[j].std_error);
///     assert!((est[j].value - truth).abs() < 5.0 * est[j].std_error);
/// }
/// # Ok::<(), harmony_core::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HarmonyBit {
    eps: Epsilon,
    d: usize,
    c: f64,
    half_inv_c: f64,
}

impl HarmonyBit {
    /// Harmony's 1-bit mechanism with budget ε (in the global range of [`Epsilon`]) for d ∈ [1, 2²⁴]
    /// coordinates.
    pub fn new(epsilon: f64, d: usize) -> Result<Self> {
        let eps = Epsilon::new(epsilon)?;
        let d = check_dimension("d", d)?;
        let c = eps.c();
        Ok(HarmonyBit { eps, d, c, half_inv_c: 0.5 / c })
    }

    /// Duchi's scale c = (e^ε + 1)/(e^ε − 1); a report's non-zero coordinate is ±c·d.
    pub fn c(&self) -> f64 {
        self.c
    }
    /// The magnitude c·d of the reported coordinate.
    pub fn scale(&self) -> f64 {
        self.c * self.d as f64
    }
    /// P[sign = + | t_j] = 1/2 + t_j/(2c).
    pub fn prob_positive(&self, t_j: f64) -> f64 {
        0.5 + t_j * self.half_inv_c
    }
}

impl VectorMechanism for HarmonyBit {
    type Report = HarmonyBitReport;

    fn name(&self) -> &'static str {
        "harmony-1bit"
    }
    fn epsilon(&self) -> Epsilon {
        self.eps
    }
    fn dimension(&self) -> usize {
        self.d
    }
    #[inline]
    fn randomize_unchecked<R: Rng + ?Sized>(&self, t: &[f64], rng: &mut R) -> HarmonyBitReport {
        let j = uniform_below(rng, self.d as u64) as usize;
        HarmonyBitReport { j: j as u32, positive: bernoulli_fast(rng, self.prob_positive(t[j])) }
    }
    fn validate(&self, report: &HarmonyBitReport) -> Result<()> {
        if report.j as usize >= self.d {
            return Err(Error::report("j", report.j, format!("a coordinate index in [0, {})", self.d)));
        }
        Ok(())
    }
    #[inline]
    fn accumulate(&self, report: &HarmonyBitReport, sum: &mut [f64], sum_sq: &mut [f64]) {
        let s = self.scale();
        let j = report.j as usize;
        sum[j] += if report.positive { s } else { -s };
        sum_sq[j] += s * s;
    }
    fn variance_coefficients(&self) -> (f64, f64) {
        (-1.0, self.d as f64 * self.c * self.c)
    }
    /// ±1 on the sampled coordinate (units of the scale): integer sums, exact whatever the order.
    fn accumulate_units(&self, report: &HarmonyBitReport, sum: &mut [f64], sum_sq: &mut [f64]) {
        let j = report.j as usize;
        sum[j] += if report.positive { 1.0 } else { -1.0 };
        sum_sq[j] += 1.0;
    }
    fn unit(&self) -> f64 {
        self.scale()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire;

    #[test]
    fn enumerated_outputs_give_exactly_e_eps_and_unbiasedness() {
        for eps in [0.5, 1.0, 2.0, 4.0] {
            for d in 1..=4usize {
                let m = HarmonyBit::new(eps, d).unwrap();
                // Inputs: all vectors over {-1, 0, 1}^d.
                let inputs: Vec<Vec<f64>> = (0..3usize.pow(d as u32))
                    .map(|mut code| {
                        (0..d)
                            .map(|_| {
                                let v = (code % 3) as f64 - 1.0;
                                code /= 3;
                                v
                            })
                            .collect()
                    })
                    .collect();
                let prob = |t: &[f64], j: usize, pos: bool| {
                    let p = m.prob_positive(t[j]);
                    (1.0 / d as f64) * if pos { p } else { 1.0 - p }
                };
                let mut worst = 0.0f64;
                for j in 0..d {
                    for pos in [false, true] {
                        let ps: Vec<f64> = inputs.iter().map(|t| prob(t, j, pos)).collect();
                        let (lo, hi) = ps.iter().fold((f64::MAX, 0.0f64), |(lo, hi), &p| (lo.min(p), hi.max(p)));
                        worst = worst.max(hi / lo);
                    }
                }
                let target = eps.exp();
                assert!((worst / target - 1.0).abs() < 1e-9, "eps {eps}, d {d}: ratio {worst}");
                for t in &inputs {
                    let total: f64 = (0..d).flat_map(|j| [prob(t, j, true), prob(t, j, false)]).sum();
                    assert!((total - 1.0).abs() < 1e-12);
                    for k in 0..d {
                        let mean = m.scale() * (prob(t, k, true) - prob(t, k, false));
                        assert!((mean - t[k]).abs() < 1e-12, "eps {eps}, d {d}, t {t:?}: E[Y_{k}] = {mean}");
                    }
                }
            }
        }
    }

    #[test]
    fn validation_and_wire() {
        let m = HarmonyBit::new(1.0, 5).unwrap();
        let e = m.validate(&HarmonyBitReport { j: 5, positive: true }).unwrap_err();
        assert!(e.to_string().contains("j is 5") && e.to_string().contains("[0, 5)"), "{e}");
        let r = HarmonyBitReport { j: 4, positive: false };
        assert_eq!(wire::decode::<HarmonyBitReport>(&wire::encode(&r)).unwrap(), r);
        assert_eq!(wire::from_json::<HarmonyBitReport>(&wire::to_json(&r)).unwrap(), r);
        assert_eq!(m.decode(&r).unwrap(), vec![0.0, 0.0, 0.0, 0.0, -m.scale()]);
        assert!(matches!(HarmonyBit::new(1.0, 0), Err(Error::InvalidParameter { name: "d", .. })));
        assert_eq!(m.worst_case_variance(), 5.0 * m.c() * m.c());
    }
}
