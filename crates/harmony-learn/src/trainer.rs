//! Private mini-batch gradient descent where every user contributes exactly once.
//!
//! The training users are cut into B disjoint consecutive batches of the (shuffled) user list,
//! B = max(1, ⌊n/g⌋), sizes ⌊n/B⌋ or ⌈n/B⌉: a loop over the list, so each user is in exactly one
//! batch and sends exactly one report; the whole run is then ε-LDP for every user (parallel
//! composition over disjoint users, nothing else about a user is ever used). Round t:
//!
//! 1. the accumulator is set to zero (Harmony's Alg. 4 never resets it, so every update would
//!    re-apply all earlier batches' gradients; docs/MECHANISMS.md §J9),
//! 2. each user of the batch computes c·ℓ'(⟨w_t, x⟩, y)·x at the current model, clips every
//!    coordinate to [-1, 1] and gives only that vector to the randomizer (c = 1 in the papers),
//! 3. w_{t+1} = w_t − γ_t(ḡ/c + λw_t), ḡ the mean decoded report.
//!
//! # Step sizes ([`Schedule`])
//!
//! * [`Schedule::Decay`] — the papers': γ_t = γ₀/√t, the last iterate is the model.
//! * [`Schedule::Noise`] — a constant step set from public quantities only, and the mean of the
//!   second half's iterates (Polyak–Ruppert tail averaging) as the model:
//!
//!   γ = min(1, κ/(σ_b·√T)) / (β·R²),  σ_b² = V/(c²·g),
//!
//!   where β·R² bounds the curvature of the loss (β = 1 squared, ¼ logistic and hinge; R² the
//!   schema's bound on ‖x‖², [`TrainConfig::curvature`]), so 1/(βR²) is the classical stable step
//!   of smooth gradient descent; V is the randomizer's worst-case variance of one decoded
//!   coordinate ([`GradientRandomizer::variance`]), σ_b the noise of one batch mean and T the
//!   number of steps. Without noise γ = 1/(βR²); with noise the step is the robust stochastic
//!   approximation step D/(G√T) (Nemirovski et al. 2009), i.e. the total distance travelled
//!   γT = (κ/(βR²))·√(n·c²/V) grows as the square root of the signal-to-noise ratio n/V. κ is
//!   one constant for every loss, data set, mechanism and ε ([`NOISE_KAPPA`]).
//!
//! # Gradient scale c
//!
//! The randomizers' noise does not depend on the size of their input, so a gradient coordinate
//! far below 1 in magnitude is mostly noise. Multiplying by c before clipping and dividing the
//! decoded mean by c keeps the estimate unbiased wherever |c·ℓ'·x_j| ≤ 1 and divides the noise
//! variance by c². c = 2 ([`GRADIENT_SCALE`]) makes the logistic gradient at the start (|ℓ'| = ½)
//! exactly fill [-1, 1]; afterwards only users with |ℓ'·x_j| > ½ (misclassified ones, large
//! residuals) are clipped, a bounded-influence (Huber-like) loss. Post-processing of the clipped
//! vector: the randomizer still sees one vector in [-1, 1]^d per user.
//!
//! The per-user work allocates nothing: the model, the accumulator and the gradient buffer are
//! allocated once per run.

use crate::features::Dataset;
use crate::loss::Loss;
use crate::mechanism::GradientRandomizer;
use harmony_core::error::{Error, Result};
use rand::Rng;

/// κ of [`Schedule::Noise`]: chosen on development tasks (other targets than the reported
/// ones: Adult `sex`, `age`, Census-Income `sex`, `age` with 33 and 6 features; docs/LEARN.md,
/// "How the defaults were chosen"), then frozen.
pub const NOISE_KAPPA: f64 = 2.0;

/// The default gradient scale c of [`Schedule::Noise`] runs (see the module docs).
pub const GRADIENT_SCALE: f64 = 2.0;

/// How the step size is set (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Schedule {
    /// γ_t = γ₀/√t (Wang et al., Harmony), with this γ₀.
    Decay(f64),
    /// Constant γ = min(1, κ/(σ_b√T))/(βR²), with this κ.
    Noise(f64),
}

/// Hyper-parameters of one training run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TrainConfig {
    /// The loss.
    pub loss: Loss,
    /// L2 regularisation λ (default 1e-4, the papers').
    pub lambda: f64,
    /// The step sizes.
    pub schedule: Schedule,
    /// Users per batch g (None: [`default_batch_size`]).
    pub batch_size: Option<usize>,
    /// Return the mean of the second half's iterates instead of the last one.
    pub average: bool,
    /// c: gradients are multiplied by c before clipping and the decoded mean divided by c.
    pub gradient_scale: f64,
    /// R²: a public bound on ‖x‖² of the features the trainer sees (for [`Schedule::Noise`]).
    pub curvature: f64,
}

impl TrainConfig {
    /// The papers' design: γ_t = `learning_rate`/√t, λ = 1e-4, the papers' batch size, c = 1,
    /// the last iterate.
    pub fn new(loss: Loss, learning_rate: f64) -> Self {
        TrainConfig {
            loss,
            lambda: 1e-4,
            schedule: Schedule::Decay(learning_rate),
            batch_size: None,
            average: false,
            gradient_scale: 1.0,
            curvature: 1.0,
        }
    }
    /// The noise-calibrated design: [`Schedule::Noise`] with [`NOISE_KAPPA`], tail averaging,
    /// c = [`GRADIENT_SCALE`], for features with ‖x‖² ≤ `curvature`.
    pub fn noise(loss: Loss, curvature: f64) -> Self {
        TrainConfig {
            schedule: Schedule::Noise(NOISE_KAPPA),
            average: true,
            gradient_scale: GRADIENT_SCALE,
            curvature,
            ..TrainConfig::new(loss, 1.0)
        }
    }
    /// Checks λ ≥ 0, γ₀ or κ > 0, g ≥ 1, c ≥ 1 and R² > 0 (all finite).
    pub fn validate(&self) -> Result<()> {
        if !(self.lambda >= 0.0 && self.lambda.is_finite()) {
            return Err(Error::param("lambda", self.lambda, "a finite number >= 0"));
        }
        let (name, v) = match self.schedule {
            Schedule::Decay(g) => ("learning-rate", g),
            Schedule::Noise(k) => ("kappa", k),
        };
        if !(v > 0.0 && v.is_finite()) {
            return Err(Error::param(name, v, "a finite number > 0"));
        }
        if self.batch_size == Some(0) {
            return Err(Error::param("batch-size", 0, "an integer >= 1"));
        }
        if !(self.gradient_scale >= 1.0 && self.gradient_scale.is_finite()) {
            return Err(Error::param("gradient-scale", self.gradient_scale, "a finite number >= 1"));
        }
        if !(self.curvature > 0.0 && self.curvature.is_finite()) {
            return Err(Error::param("curvature", self.curvature, "a finite number > 0"));
        }
        Ok(())
    }
    /// The constant step of [`Schedule::Noise`] for T = `steps` batches of `batch` users through
    /// a randomizer of per-coordinate variance `variance` (None for [`Schedule::Decay`]). The
    /// collection server computes its rounds' step with this function too
    /// (`harmony_learn::remote::RoundRule`).
    pub fn noise_step(&self, variance: f64, batch: usize, steps: usize) -> Option<f64> {
        let Schedule::Noise(kappa) = self.schedule else { return None };
        let c = self.gradient_scale;
        let sigma_b = (variance / (c * c * batch.max(1) as f64)).sqrt();
        let damp = (kappa / (sigma_b * (steps.max(1) as f64).sqrt())).min(1.0);
        Some(damp / (self.loss.smoothness() * self.curvature))
    }
}

/// γ₀/√t, the step of [`Schedule::Decay`] at step t (1-based).
#[inline]
pub fn decay_step(learning_rate: f64, t: u64) -> f64 {
    learning_rate / (t as f64).sqrt()
}

/// The first averaged step (0-based) of tail averaging over `steps` steps: the model is the mean
/// of the iterates after steps ⌊T/2⌋, …, T − 1 (the second half).
#[inline]
pub fn tail_start(steps: u64) -> u64 {
    steps / 2
}

/// A user's gradient c·ℓ'(⟨w, x⟩, y)·x at the model `w`, every coordinate clipped to [-1, 1],
/// written to `out` (what the randomizer sees; c = `gradient_scale`, 1 in the papers). A
/// coordinate that is not finite (NaN from 0·∞ or ∞ − ∞, ±∞ from an overflow) becomes 0
/// ([`clip_coordinate`]): no NaN ever reaches a mechanism. Devices use [`device_gradient`],
/// which also refuses the model and scale that could make one.
#[inline]
pub fn clipped_gradient(loss: Loss, w: &[f64], x: &[f64], y: f64, gradient_scale: f64, out: &mut [f64]) {
    let s = loss.derivative(dot(w, x), y);
    for (o, &xj) in out.iter_mut().zip(x) {
        *o = clip_coordinate(gradient_scale * s * xj);
    }
}

/// A gradient coordinate as a randomizer input: clipped to [-1, 1], and 0 if it is not finite.
///
/// A NaN input made the 1-D mechanisms' unchecked samplers deterministic (PM always reported
/// −C: every comparison with NaN fails and `max(−C)` returns −C; HM's Duchi branch always −1),
/// so a server that sends a model overflowing the gradient learned which coordinates were 0.
#[inline(always)]
pub fn clip_coordinate(v: f64) -> f64 {
    if v.is_finite() { v.clamp(-1.0, 1.0) } else { 0.0 }
}

/// The largest |w_j| of a model a device accepts in [`device_gradient`].
pub const MAX_PARAMETER: f64 = 1e6;

/// The largest gradient scale c a device accepts in [`device_gradient`].
pub const MAX_GRADIENT_SCALE: f64 = 1e3;

/// A device's [`clipped_gradient`] at a model it received, checked first: every parameter finite
/// with |w_j| ≤ [`MAX_PARAMETER`], the gradient scale finite in (0, [`MAX_GRADIENT_SCALE`]], the
/// features and the target finite, and as many features as parameters. Errors
/// ([`Error::InvalidParameter`], naming `parameters`, `gradient_scale`, `features` or `target`)
/// instead of a report. Within these bounds no product overflows (|⟨w, x⟩| ≤ 10⁶·Σ|x_j|), and
/// any non-finite coordinate would still become 0.
pub fn device_gradient(loss: Loss, w: &[f64], x: &[f64], y: f64, gradient_scale: f64, out: &mut [f64]) -> Result<()> {
    if let Some((j, &v)) = w.iter().enumerate().find(|(_, v)| !(v.is_finite() && v.abs() <= MAX_PARAMETER)) {
        return Err(Error::param(
            "parameters",
            format!("w[{j}] = {v}"),
            format!("finite coefficients with |w_j| <= {MAX_PARAMETER}"),
        ));
    }
    if !(gradient_scale.is_finite() && gradient_scale > 0.0 && gradient_scale <= MAX_GRADIENT_SCALE) {
        return Err(Error::param(
            "gradient_scale",
            gradient_scale,
            format!("a number > 0 and <= {MAX_GRADIENT_SCALE}"),
        ));
    }
    if x.len() != w.len() || out.len() != w.len() {
        return Err(Error::param("features", x.len(), format!("{} features (the model's dimension)", w.len())));
    }
    if let Some((j, &v)) = x.iter().enumerate().find(|(_, v)| !v.is_finite()) {
        return Err(Error::param("features", format!("x[{j}] = {v}"), "finite features"));
    }
    if !y.is_finite() {
        return Err(Error::param("target", y, "a finite target"));
    }
    clipped_gradient(loss, w, x, y, gradient_scale, out);
    Ok(())
}

/// One gradient step: w ← w − γ(acc/(c·size) + λw), `acc` the sum of the `size` decoded reports
/// of the batch (c = `gradient_scale`).
#[inline]
pub fn descend(w: &mut [f64], acc: &[f64], size: usize, gamma: f64, gradient_scale: f64, lambda: f64) {
    let size = size.max(1) as f64;
    for (wj, &aj) in w.iter_mut().zip(acc) {
        *wj -= gamma * (aj / (gradient_scale * size) + lambda * *wj);
    }
}

/// The model after `averaged` iterates were summed into `sum`: their mean, or the last iterate
/// `w` while none is.
pub fn tail_average(w: &[f64], sum: &[f64], averaged: u64) -> Vec<f64> {
    if averaged == 0 {
        return w.to_vec();
    }
    let m = averaged as f64;
    sum.iter().map(|a| a / m).collect()
}

/// The papers' batch size g = max(2·d·ln d/ε², n/1000), rounded up, within [1, n]. Without ε
/// (non-private) g = max(1, n/1000).
pub fn default_batch_size(d: usize, epsilon: Option<f64>, n: usize) -> usize {
    let by_n = (n as f64 / 1000.0).ceil();
    let by_d = match epsilon {
        Some(e) if d > 1 => (2.0 * d as f64 * (d as f64).ln() / (e * e)).ceil(),
        _ => 1.0,
    };
    (by_d.max(by_n) as usize).clamp(1, n.max(1))
}

/// Cuts `n` users into `batches` contiguous ranges whose sizes differ by at most one.
pub fn batch_ranges(n: usize, batches: usize) -> impl Iterator<Item = std::ops::Range<usize>> {
    let b = batches.max(1);
    (0..b).map(move |i| (i * n / b)..((i + 1) * n / b))
}

/// A trained linear model.
#[derive(Debug, Clone, PartialEq)]
pub struct Model {
    /// The weights (intercept first when the features have one).
    pub w: Vec<f64>,
    /// Number of batches (gradient steps).
    pub batches: usize,
    /// The nominal batch size g.
    pub batch_size: usize,
    /// The constant step γ ([`Schedule::Noise`]) or γ₀ ([`Schedule::Decay`]).
    pub step: f64,
}

impl Model {
    /// ⟨w, x⟩.
    #[inline]
    pub fn predict(&self, x: &[f64]) -> f64 {
        dot(&self.w, x)
    }
}

/// ⟨a, b⟩.
#[inline]
pub fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Trains on the rows `users` of `data` (each used exactly once, in this order) with `mech`.
/// `epsilon` sets the default batch size (None for exact gradients).
pub fn train<M: GradientRandomizer, R: Rng + ?Sized>(
    data: &Dataset,
    users: &[u32],
    mech: &mut M,
    epsilon: Option<f64>,
    cfg: &TrainConfig,
    rng: &mut R,
) -> Result<Model> {
    cfg.validate()?;
    let d = data.d;
    if mech.dimension() != d {
        return Err(Error::param("mechanism dimension", mech.dimension(), format!("the data's {d} features")));
    }
    let n = users.len();
    if n == 0 {
        return Err(Error::param("training users", 0, "at least one"));
    }
    let g = cfg.batch_size.unwrap_or_else(|| default_batch_size(d, epsilon, n)).min(n);
    let batches = (n / g).max(1);
    let c = cfg.gradient_scale;
    let constant = cfg.noise_step(mech.variance(), g, batches);
    let mut w = vec![0.0; d];
    let mut acc = vec![0.0; d];
    let mut grad = vec![0.0; d];
    let mut avg = vec![0.0; d];
    let avg_from = tail_start(batches as u64) as usize;
    for (t, range) in batch_ranges(n, batches).enumerate() {
        acc.fill(0.0);
        let size = range.len();
        for &u in &users[range] {
            let u = u as usize;
            clipped_gradient(cfg.loss, &w, data.row(u), data.y[u], c, &mut grad);
            mech.randomize_add(&grad, rng, &mut acc);
        }
        let gamma = match (constant, cfg.schedule) {
            (Some(step), _) => step,
            (None, Schedule::Decay(g0)) => decay_step(g0, t as u64 + 1),
            (None, Schedule::Noise(_)) => unreachable!("noise_step is Some for Schedule::Noise"),
        };
        descend(&mut w, &acc, size, gamma, c, cfg.lambda);
        if cfg.average && t >= avg_from {
            avg.iter_mut().zip(&w).for_each(|(a, x)| *a += x);
        }
    }
    if cfg.average {
        w = tail_average(&w, &avg, (batches - avg_from) as u64);
    }
    let step = match (constant, cfg.schedule) {
        (Some(step), _) | (None, Schedule::Decay(step)) => step,
        (None, Schedule::Noise(k)) => k,
    };
    Ok(Model { w, batches, batch_size: g, step })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mechanism::{GradientMechanism, MechanismKind};
    use harmony_core::sampling::fast_rng;

    #[test]
    fn batch_sizes_follow_the_papers_rule() {
        // d = 101, ε = 4: 2·101·ln 101/16 = 58.3 → 59 > 43958/1000.
        assert_eq!(default_batch_size(101, Some(4.0), 43_958), 59);
        assert_eq!(default_batch_size(101, Some(0.5), 43_958), 3730);
        assert_eq!(default_batch_size(20, Some(4.0), 43_958), 44);
        assert_eq!(default_batch_size(101, None, 43_958), 44);
        assert_eq!(default_batch_size(101, Some(0.01), 100), 100);
        let r: Vec<_> = batch_ranges(10, 3).collect();
        assert_eq!(r, vec![0..3, 3..6, 6..10]);
    }

    #[test]
    fn the_noise_step_follows_its_formula() {
        // Without noise: 1/(βR²).
        let cfg = TrainConfig::noise(Loss::Logistic, 15.0);
        assert!((cfg.noise_step(0.0, 59, 745).unwrap() - 1.0 / (0.25 * 15.0)).abs() < 1e-12);
        // V = 14.32, c = 2, g = 59, T = 745: σ_b = √(14.32/(4·59)), γ = κ/(σ_b√T)/(βR²).
        let sb = (14.32f64 / (4.0 * 59.0)).sqrt();
        let want = NOISE_KAPPA / (sb * 745f64.sqrt()) / (0.25 * 15.0);
        assert!((cfg.noise_step(14.32, 59, 745).unwrap() - want).abs() < 1e-12);
        // Squared loss: β = 1; the papers' schedule has no constant step.
        let sq = TrainConfig::noise(Loss::Squared, 15.0);
        assert!((sq.noise_step(14.32, 59, 745).unwrap() - want / 4.0).abs() < 1e-12);
        assert_eq!(TrainConfig::new(Loss::Squared, 0.3).noise_step(1.0, 1, 1), None);
    }

    /// Scaling the gradient by c before clipping and the mean by 1/c changes nothing while no
    /// coordinate reaches the clip (exact gradients, |ℓ'·x_j| ≤ ½ here), and bounds what the
    /// randomizer sees otherwise.
    #[test]
    fn gradient_scaling_is_exact_below_the_clip() {
        let n = 200;
        let x: Vec<f64> = (0..n).flat_map(|i| [1.0, (i % 11) as f64 / 10.0 - 0.5]).collect();
        let y: Vec<f64> = (0..n).map(|i| 0.2 * ((i % 7) as f64 / 6.0 - 0.5)).collect();
        let data = Dataset::new(x, y, 2).unwrap();
        let users: Vec<u32> = (0..n as u32).collect();
        let mut cfg = TrainConfig::new(Loss::Squared, 0.1);
        cfg.batch_size = Some(10);
        let mut m = GradientMechanism::NonPrivate { d: 2 };
        let a = train(&data, &users, &mut m, None, &cfg, &mut fast_rng(1)).unwrap();
        cfg.gradient_scale = 2.0;
        let b = train(&data, &users, &mut m, None, &cfg, &mut fast_rng(1)).unwrap();
        for (u, v) in a.w.iter().zip(&b.w) {
            assert!((u - v).abs() < 1e-12, "{:?} vs {:?}", a.w, b.w);
        }
        cfg.gradient_scale = 0.5;
        assert!(cfg.validate().unwrap_err().to_string().contains("gradient-scale"));
    }

    #[test]
    fn bad_configs_are_rejected() {
        let data = Dataset::new(vec![1.0, 0.5], vec![1.0, -1.0], 1).unwrap();
        let mut m = GradientMechanism::NonPrivate { d: 1 };
        let mut rng = fast_rng(1);
        let mut cfg = TrainConfig::new(Loss::Logistic, 1.0);
        cfg.lambda = f64::NAN;
        assert!(train(&data, &[0, 1], &mut m, None, &cfg, &mut rng).unwrap_err().to_string().contains("lambda"));
        cfg = TrainConfig::new(Loss::Logistic, -1.0);
        assert!(train(&data, &[0, 1], &mut m, None, &cfg, &mut rng).unwrap_err().to_string().contains("learning-rate"));
        cfg = TrainConfig::new(Loss::Logistic, 1.0);
        cfg.batch_size = Some(0);
        assert!(train(&data, &[0, 1], &mut m, None, &cfg, &mut rng).unwrap_err().to_string().contains("batch-size"));
        let mut m2 = MechanismKind::Hm.build(1.0, 2).unwrap();
        assert!(train(&data, &[0, 1], &mut m2, Some(1.0), &TrainConfig::new(Loss::Logistic, 1.0), &mut rng).is_err());
    }
}
