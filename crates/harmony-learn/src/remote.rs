//! Gradient descent over the network (the collection server's model rounds): the device-side
//! randomizer produces a [`GradientReport`] that travels on the wire, the server validates and
//! decodes it into the round's accumulator, and [`apply_update`] takes the step when the batch
//! is full. The arithmetic is that of [`crate::trainer::train`]: w ← w − γ_t(ḡ + λw), γ_t = γ₀/√t
//! (t = 1, 2, …), ḡ the mean decoded report of the round.
//!
//! Only `pm` and `hm` with k-of-d sampling (Wang et al. Alg. 4) have a wire report: k sampled
//! coordinates, each one 1-D report at ε/k; decoded values are scaled by d/k.

use crate::mechanism::{MechanismKind, optimal_k};
use crate::trainer::dot;
use harmony_core::error::{Error, Result};
use harmony_core::numeric::{AnyNumeric, NumericMechanism, NumericReport};
use harmony_core::sampling::sample_k_of_d;
use harmony_core::wire::{ReportKind, WireReport};
use rand::Rng;
use serde::{Deserialize, Serialize};

/// One device's randomized gradient: `(coordinate, 1-D report)` for each sampled coordinate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GradientReport {
    /// The sampled coordinates (distinct, < d) and their reports.
    pub coords: Vec<(u32, NumericReport)>,
}

impl WireReport for GradientReport {
    const KIND: ReportKind = ReportKind::Gradient;
}

/// The mechanisms that have a wire report.
pub const REMOTE_MECHANISMS: &[&str] = &["hm", "pm"];

/// The sampled PM / HM gradient randomizer and its decoder, for wire reports.
#[derive(Debug, Clone)]
pub struct RemoteMechanism {
    m: AnyNumeric,
    d: usize,
    k: usize,
    scale: f64,
}

impl RemoteMechanism {
    /// `mechanism` (`hm` or `pm`) at ε for gradients of dimension d ≥ 1.
    pub fn new(mechanism: &str, epsilon: f64, d: usize) -> Result<Self> {
        let kind = MechanismKind::parse(mechanism)?;
        if !matches!(kind, MechanismKind::Hm | MechanismKind::Pm) {
            return Err(Error::param("mechanism", mechanism, format!("one of {}", REMOTE_MECHANISMS.join(", "))));
        }
        if d == 0 {
            return Err(Error::param("dimension", 0, "at least 1 feature"));
        }
        let k = optimal_k(mechanism, epsilon, d)?;
        let m = AnyNumeric::by_name(mechanism, epsilon / k as f64)?;
        Ok(RemoteMechanism { m, d, k, scale: d as f64 / k as f64 })
    }
    /// The dimension d.
    pub fn dimension(&self) -> usize {
        self.d
    }
    /// Coordinates sampled per device.
    pub fn sampled(&self) -> usize {
        self.k
    }
    /// Randomizes a clipped gradient `g` ∈ [-1, 1]^d (device side; sees nothing but `g`).
    pub fn randomize<R: Rng + ?Sized>(&self, g: &[f64], rng: &mut R) -> GradientReport {
        let mut picked = Vec::with_capacity(self.k);
        sample_k_of_d(rng, self.k, self.d, &mut picked);
        let coords =
            picked.iter().map(|&j| (j as u32, self.m.randomize_unchecked(g[j].clamp(-1.0, 1.0), rng))).collect();
        GradientReport { coords }
    }
    /// Checks a report: exactly k distinct coordinates below d, each a valid 1-D report.
    pub fn validate(&self, r: &GradientReport) -> Result<()> {
        if r.coords.len() != self.k {
            return Err(Error::report("coords", format!("{} coordinates", r.coords.len()), format!("{}", self.k)));
        }
        for (i, (j, rep)) in r.coords.iter().enumerate() {
            if *j as usize >= self.d {
                return Err(Error::report("coords", format!("index {j}"), format!("a coordinate in [0, {})", self.d)));
            }
            if r.coords[..i].iter().any(|(p, _)| p == j) {
                return Err(Error::report("coords", format!("index {j} twice"), "distinct coordinates"));
            }
            self.m.decode(rep)?;
        }
        Ok(())
    }
    /// Adds the decoded (unbiased) gradient of a validated report to `acc`.
    pub fn add(&self, r: &GradientReport, acc: &mut [f64]) {
        for (j, rep) in &r.coords {
            acc[*j as usize] += self.scale * self.m.decode(rep).expect("validated report");
        }
    }
}

/// A device's clipped gradient ℓ'(⟨w, x⟩, y)·x at the model `w`, written to `out`.
pub fn clipped_gradient(loss: crate::loss::Loss, w: &[f64], x: &[f64], y: f64, out: &mut [f64]) {
    let s = loss.derivative(dot(w, x), y);
    for (o, &xj) in out.iter_mut().zip(x) {
        *o = (s * xj).clamp(-1.0, 1.0);
    }
}

/// Round `round` (1-based) of the update: w ← w − γ₀/√round·(acc/size + λw).
pub fn apply_update(w: &mut [f64], acc: &[f64], size: usize, round: u64, learning_rate: f64, lambda: f64) {
    let gamma = learning_rate / (round as f64).sqrt();
    let size = size.max(1) as f64;
    for (wj, &aj) in w.iter_mut().zip(acc) {
        *wj -= gamma * (aj / size + lambda * *wj);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use harmony_core::sampling::fast_rng;

    #[test]
    fn reports_roundtrip_validate_and_are_unbiased() {
        let g = [0.6, -0.4, 0.0, 1.0];
        let m = RemoteMechanism::new("hm", 2.0, g.len()).unwrap();
        assert!(RemoteMechanism::new("laplace", 2.0, 4).unwrap_err().to_string().contains("hm, pm"));
        let mut rng = fast_rng(5);
        let n = 20_000;
        let mut acc = vec![0.0; g.len()];
        for _ in 0..n {
            let r = m.randomize(&g, &mut rng);
            let b = harmony_core::wire::encode(&r);
            let back: GradientReport = harmony_core::wire::decode(&b).unwrap();
            m.validate(&back).unwrap();
            m.add(&back, &mut acc);
        }
        for (a, t) in acc.iter().zip(&g) {
            assert!((a / n as f64 - t).abs() < 0.15, "{} vs {t}", a / n as f64);
        }
        let bad = GradientReport { coords: vec![(9, NumericReport::Sign(true)); m.sampled()] };
        assert!(m.validate(&bad).is_err());
    }
}
