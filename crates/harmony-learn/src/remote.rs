//! Gradient descent over the network (the collection server's model rounds): the device-side
//! randomizer produces a [`GradientReport`] that travels on the wire, the server validates and
//! decodes it into the round's accumulator, and [`RoundRule::apply`] takes the step when the
//! batch is full. The arithmetic is that of [`crate::trainer::train`] (the same functions:
//! [`clipped_gradient`], [`descend`], [`TrainConfig::noise_step`], [`tail_average`]):
//! w ← w − γ_t(ḡ/c + λw), ḡ the mean decoded report of round t (t = 1, 2, …), with
//!
//! * [`RoundSchedule::Decay`]: γ_t = γ₀/√t, the last iterate is the model (the papers'), or
//! * [`RoundSchedule::Noise`]: the constant step of [`crate::trainer::Schedule::Noise`] for the T
//!   planned rounds, the model the mean of the iterates after rounds ⌊T/2⌋ + 1, …, T.
//!
//! Only `pm` and `hm` with k-of-d sampling (Wang et al. Alg. 4) have a wire report: k sampled
//! coordinates, each one 1-D report at ε/k; decoded values are scaled by d/k.

use crate::loss::Loss;
use crate::mechanism::{MechanismKind, optimal_k};
use crate::trainer::{Schedule, TrainConfig, decay_step, tail_start};
pub use crate::trainer::{clip_coordinate, clipped_gradient, descend, device_gradient, tail_average};
use harmony_core::error::{Error, Result};
use harmony_core::numeric::{AnyNumeric, NumericMechanism, NumericReport};
use harmony_core::sampling::sample_k_of_d;
use harmony_core::strategy::sampled_numeric_worst;
use harmony_core::wire::{WireKind, WireReport};
use rand::Rng;
use serde::{Deserialize, Serialize};

/// One device's randomized gradient: `(coordinate, 1-D report)` for each sampled coordinate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GradientReport {
    /// The sampled coordinates (distinct, < d) and their reports.
    pub coords: Vec<(u32, NumericReport)>,
}

/// harmony-learn owns kind byte 12 (see [`harmony_core::wire::WireKind`]).
impl WireReport for GradientReport {
    const KIND: WireKind = WireKind { byte: 12, name: "Gradient" };
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
    /// `mechanism` (`hm` or `pm`) at ε for gradients of dimension d ≥ 1. Errors: an unknown
    /// mechanism, d = 0, or ε outside the global range ([`harmony_core::params::Epsilon`]; a
    /// huge ε is an error, not an overflow).
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
    /// The worst-case variance of one decoded coordinate of one report (over gradients in
    /// [-1, 1]^d): V of [`TrainConfig::noise_step`], the same closed form as the trainer's `pm`
    /// / `hm` ([`crate::mechanism::GradientRandomizer::variance`]).
    pub fn variance(&self) -> f64 {
        let (a, b) = self.m.variance_coefficients();
        sampled_numeric_worst(a, b, self.scale)
    }
    /// Randomizes a clipped gradient `g` ∈ [-1, 1]^d (device side; sees nothing but `g`). Each
    /// sampled coordinate goes through [`clip_coordinate`] first (clipped to [-1, 1], 0 if not
    /// finite), so no NaN reaches the mechanism's unchecked sampler.
    pub fn randomize<R: Rng + ?Sized>(&self, g: &[f64], rng: &mut R) -> GradientReport {
        let mut picked = Vec::with_capacity(self.k);
        sample_k_of_d(rng, self.k, self.d, &mut picked);
        let coords =
            picked.iter().map(|&j| (j as u32, self.m.randomize_unchecked(clip_coordinate(g[j]), rng))).collect();
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

/// The step sizes of a collection's rounds, fixed at its creation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RoundSchedule {
    /// γ_t = γ₀/√t with this γ₀; the last iterate is the model.
    Decay {
        /// γ₀.
        learning_rate: f64,
    },
    /// A constant step for T planned rounds; the model is the mean of the second half's iterates.
    Noise {
        /// γ ([`RoundRule::noise_step`]).
        step: f64,
        /// T.
        rounds: u64,
    },
}

/// How a collection's rounds update the model: the schedule, the gradient scale c and λ.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RoundRule {
    /// The step sizes.
    pub schedule: RoundSchedule,
    /// c: devices multiply ℓ'·x by c before clipping, the server divides the mean by c.
    pub gradient_scale: f64,
    /// L2 regularisation λ.
    pub lambda: f64,
}

impl RoundRule {
    /// The constant step γ = min(1, κ/(σ_b√T))/(βR²), σ_b² = V/(c²g), of T = `rounds` rounds of
    /// g = `batch` devices through `mech`, for `loss` (β) on features with ‖x‖² ≤ `curvature`
    /// (R²): [`TrainConfig::noise_step`], the function `harmony train` uses.
    pub fn noise_step(
        loss: Loss,
        curvature: f64,
        kappa: f64,
        gradient_scale: f64,
        mech: &RemoteMechanism,
        batch: u64,
        rounds: u64,
    ) -> f64 {
        let cfg = TrainConfig {
            schedule: Schedule::Noise(kappa),
            average: true,
            gradient_scale,
            curvature,
            batch_size: Some(batch as usize),
            ..TrainConfig::new(loss, 1.0)
        };
        cfg.noise_step(mech.variance(), batch as usize, rounds as usize).expect("a noise schedule has a step")
    }
    /// γ_t of round t (1-based).
    pub fn step(&self, round: u64) -> f64 {
        match self.schedule {
            RoundSchedule::Decay { learning_rate } => decay_step(learning_rate, round),
            RoundSchedule::Noise { step, .. } => step,
        }
    }
    /// How many of the iterates after the first `completed` rounds are in the tail average (0
    /// for [`RoundSchedule::Decay`] and before the second half).
    pub fn averaged(&self, completed: u64) -> u64 {
        match self.schedule {
            RoundSchedule::Decay { .. } => 0,
            RoundSchedule::Noise { rounds, .. } => completed.min(rounds).saturating_sub(tail_start(rounds)),
        }
    }
    /// Round `round`'s update from the sum `acc` of its `size` decoded reports: w ← w − γ_t(acc/(c·size)
    /// + λw), and the new iterate added to `sum` when it is in the tail average.
    pub fn apply(&self, w: &mut [f64], sum: &mut [f64], acc: &[f64], size: usize, round: u64) {
        descend(w, acc, size, self.step(round), self.gradient_scale, self.lambda);
        if self.averaged(round) > self.averaged(round.saturating_sub(1)) {
            sum.iter_mut().zip(w.iter()).for_each(|(a, x)| *a += x);
        }
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

    /// A NaN gradient coordinate through the device path, 1000
    /// reports. It used to give PM's −C every time (HM's Duchi branch: always −1); now the NaN
    /// is the value 0 and the reports are PM(0) / Duchi(0): spread over [−C, C], mean 0 within
    /// z = 4.42 (false failure 1e-5 per check). Fails on the old main (1 distinct report).
    #[test]
    fn nan_gradient_gives_a_non_degenerate_report() {
        use harmony_core::sampling::secure_rng;
        let n = 1000;
        let pm = RemoteMechanism::new("pm", 1.0, 1).unwrap();
        let mut rng = secure_rng();
        let ys: Vec<f64> = (0..n)
            .map(|_| {
                let r = pm.randomize(&[f64::NAN], &mut rng);
                pm.m.decode(&r.coords[0].1).unwrap()
            })
            .collect();
        let mut distinct = ys.clone();
        distinct.sort_by(f64::total_cmp);
        distinct.dedup();
        assert!(distinct.len() > 900, "{} distinct PM reports of {n}", distinct.len());
        let mean = ys.iter().sum::<f64>() / n as f64;
        let sd = (pm.m.variance(0.0) / n as f64).sqrt();
        assert!(mean.abs() < 4.42 * sd, "PM mean {mean}, sd {sd}");
        // HM at ε = 0.5 ≤ ε*: the Duchi branch only; P[+] = 1/2 at t = 0.
        let hm = RemoteMechanism::new("hm", 0.5, 1).unwrap();
        let plus =
            (0..n).filter(|_| hm.randomize(&[f64::NAN], &mut rng).coords[0].1 == NumericReport::Sign(true)).count();
        let z = (plus as f64 - n as f64 / 2.0) / (n as f64 / 4.0).sqrt();
        assert!(z.abs() < 4.42, "HM: {plus} of {n} positive");
        // ±∞ too become 0 (a huge gradient is refused upstream by `device_gradient`).
        for v in [f64::INFINITY, f64::NEG_INFINITY, f64::NAN] {
            assert_eq!(clip_coordinate(v), 0.0);
        }
        assert_eq!((clip_coordinate(3.0), clip_coordinate(-0.25)), (1.0, -0.25));
    }

    /// The device refuses a model or scale that could overflow the gradient, with the field
    /// named, and never writes a NaN (the server's squared-loss model of the audit: w = 1e300).
    #[test]
    fn device_gradient_refuses_hostile_models() {
        let (x, mut out) = ([0.5, 0.0, -1.0], [9.0; 3]);
        let ok = device_gradient(Loss::Squared, &[0.1, -0.2, 0.3], &x, 0.5, 2.0, &mut out);
        assert!(ok.is_ok() && out.iter().all(|v| (-1.0..=1.0).contains(v)));
        let cases: [(&[f64], f64, &str); 6] = [
            (&[f64::NAN, 0.0, 0.0], 2.0, "parameters"),
            (&[1e300, 0.0, 0.0], 2.0, "parameters"),
            (&[0.0, f64::INFINITY, 0.0], 2.0, "parameters"),
            (&[0.0; 3], f64::NAN, "gradient_scale"),
            (&[0.0; 3], 1e300, "gradient_scale"),
            (&[0.0; 3], -1.0, "gradient_scale"),
        ];
        for (w, c, field) in cases {
            let e = device_gradient(Loss::Squared, w, &x, 0.5, c, &mut out).unwrap_err();
            assert!(matches!(e, Error::InvalidParameter { name, .. } if name == field), "{e}");
        }
        let e = device_gradient(Loss::Logistic, &[0.0; 3], &[f64::NAN, 0.0, 0.0], 1.0, 2.0, &mut out).unwrap_err();
        assert!(e.to_string().contains("features"), "{e}");
        assert!(device_gradient(Loss::Logistic, &[0.0; 3], &x, f64::NAN, 2.0, &mut out).is_err());
        assert!(device_gradient(Loss::Logistic, &[0.0; 2], &x, 1.0, 2.0, &mut out).is_err());
        // The unchecked form maps the overflow's NaN (∞·0) to 0 instead of passing it on.
        clipped_gradient(Loss::Squared, &[1e300, 1e300, 1e300], &x, 0.0, 1e300, &mut out);
        assert!(out.iter().all(|v| v.is_finite()), "{out:?}");
        assert_eq!(out[1], 0.0);
    }

    /// Found by fuzzing: ε = 1e20 made `optimal_k` compute usize::MAX + 2 (a panic in debug builds).
    /// Now an ε error, like every ε outside the global range. Fails on the old main (panic).
    #[test]
    fn huge_epsilon_is_an_error_not_an_overflow() {
        for eps in [1e20, f64::MAX, f64::INFINITY, f64::NAN, 21.0, 0.0] {
            let e = RemoteMechanism::new("hm", eps, 5).unwrap_err();
            assert!(matches!(e, Error::InvalidParameter { name: "epsilon", .. }), "{eps}: {e}");
            assert!(optimal_k("pm", eps, 5).is_err());
        }
        assert!(RemoteMechanism::new("pm", 20.0, 5).is_ok());
    }

    #[test]
    fn round_rules_follow_the_trainer() {
        use crate::mechanism::GradientRandomizer;
        // V is the trainer's for the same mechanism, ε and d.
        for (name, kind) in [("hm", MechanismKind::Hm), ("pm", MechanismKind::Pm)] {
            for (eps, d) in [(0.5, 1), (4.0, 7), (8.0, 30)] {
                let r = RemoteMechanism::new(name, eps, d).unwrap();
                assert_eq!(r.variance(), kind.build(eps, d).unwrap().variance(), "{name} ε = {eps} d = {d}");
            }
        }
        // γ: TrainConfig::noise_step with the round's g and T.
        let m = RemoteMechanism::new("hm", 4.0, 5).unwrap();
        let step = RoundRule::noise_step(Loss::Logistic, 5.0, 2.0, 2.0, &m, 40, 9);
        let cfg = TrainConfig::noise(Loss::Logistic, 5.0);
        assert_eq!(Some(step), cfg.noise_step(m.variance(), 40, 9));
        // T = 5: the iterates after rounds 3, 4, 5 are averaged (the trainer's steps 2, 3, 4).
        let noise = RoundRule { schedule: RoundSchedule::Noise { step, rounds: 5 }, gradient_scale: 2.0, lambda: 0.0 };
        let counts: Vec<u64> = (0..=6).map(|t| noise.averaged(t)).collect();
        assert_eq!(counts, [0, 0, 0, 1, 2, 3, 3]);
        assert_eq!(noise.step(4), step);
        let decay =
            RoundRule { schedule: RoundSchedule::Decay { learning_rate: 3.0 }, gradient_scale: 1.0, lambda: 0.0 };
        assert_eq!((decay.step(4), decay.averaged(4)), (1.5, 0));
        // The update divides by c·size; the sum gains the iterate only in the tail.
        let (mut w, mut sum) = (vec![1.0, 0.0], vec![0.0, 0.0]);
        noise.apply(&mut w, &mut sum, &[4.0, -2.0], 2, 2);
        assert_eq!((w.clone(), sum.clone()), (vec![1.0 - step, 0.5 * step], vec![0.0, 0.0]));
        noise.apply(&mut w, &mut sum, &[0.0, 0.0], 2, 3);
        assert_eq!(sum, w);
        assert_eq!(tail_average(&w, &[2.0, 4.0], 2), vec![1.0, 2.0]);
        assert_eq!(tail_average(&w, &sum, 0), w);
    }
}
