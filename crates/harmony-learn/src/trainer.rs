//! Private mini-batch gradient descent where every user contributes exactly once.
//!
//! The training users are cut into B disjoint consecutive batches of the (shuffled) user list,
//! B = max(1, ⌊n/g⌋), sizes ⌊n/B⌋ or ⌈n/B⌉: a loop over the list, so each user is in exactly one
//! batch and sends exactly one report; the whole run is then ε-LDP for every user (parallel
//! composition over disjoint users, nothing else about a user is ever used). Round t:
//!
//! 1. the accumulator is set to zero (Harmony's Alg. 4 never resets it, so every update would
//!    re-apply all earlier batches' gradients; MECHANISMS.md §J9),
//! 2. each user of the batch computes ℓ'(⟨w_t, x⟩, y)·x at the current model, clips every
//!    coordinate to [-1, 1] and gives only that vector to the randomizer,
//! 3. w_{t+1} = w_t − γ_t(ḡ + λw_t), ḡ the mean decoded report, γ_t = γ₀/√t.
//!
//! With `average`, the model returned is the mean of the iterates of the second half of the run
//! (Polyak–Ruppert tail averaging): post-processing of the same reports, so the same ε, but the
//! noise of the last steps is averaged out.
//!
//! The per-user work allocates nothing: the model, the accumulator and the gradient buffer are
//! allocated once per run.

use crate::features::Dataset;
use crate::loss::Loss;
use crate::mechanism::GradientRandomizer;
use harmony_core::error::{Error, Result};
use rand::Rng;

/// Hyper-parameters of one training run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TrainConfig {
    /// The loss.
    pub loss: Loss,
    /// L2 regularisation λ (default 1e-4, the papers').
    pub lambda: f64,
    /// γ₀ of γ_t = γ₀/√t.
    pub learning_rate: f64,
    /// Users per batch g (None: [`default_batch_size`]).
    pub batch_size: Option<usize>,
    /// Return the mean of the second half's iterates instead of the last one.
    pub average: bool,
}

impl TrainConfig {
    /// λ = 1e-4, γ₀ = `learning_rate`, the papers' batch size, last iterate.
    pub fn new(loss: Loss, learning_rate: f64) -> Self {
        TrainConfig { loss, lambda: 1e-4, learning_rate, batch_size: None, average: false }
    }
    /// Checks λ ≥ 0, γ₀ > 0 (finite) and g ≥ 1.
    pub fn validate(&self) -> Result<()> {
        if !(self.lambda >= 0.0 && self.lambda.is_finite()) {
            return Err(Error::param("lambda", self.lambda, "a finite number >= 0"));
        }
        if !(self.learning_rate > 0.0 && self.learning_rate.is_finite()) {
            return Err(Error::param("learning-rate", self.learning_rate, "a finite number > 0"));
        }
        if self.batch_size == Some(0) {
            return Err(Error::param("batch-size", 0, "an integer >= 1"));
        }
        Ok(())
    }
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
    let mut w = vec![0.0; d];
    let mut acc = vec![0.0; d];
    let mut grad = vec![0.0; d];
    let mut avg = vec![0.0; d];
    let avg_from = batches / 2;
    for (t, range) in batch_ranges(n, batches).enumerate() {
        acc.fill(0.0);
        let size = range.len() as f64;
        for &u in &users[range] {
            let u = u as usize;
            let x = data.row(u);
            let s = cfg.loss.derivative(dot(&w, x), data.y[u]);
            for (gj, &xj) in grad.iter_mut().zip(x) {
                *gj = (s * xj).clamp(-1.0, 1.0);
            }
            mech.randomize_add(&grad, rng, &mut acc);
        }
        let gamma = cfg.learning_rate / ((t + 1) as f64).sqrt();
        for (wj, &aj) in w.iter_mut().zip(&acc) {
            *wj -= gamma * (aj / size + cfg.lambda * *wj);
        }
        if cfg.average && t >= avg_from {
            avg.iter_mut().zip(&w).for_each(|(a, x)| *a += x);
        }
    }
    if cfg.average {
        let m = (batches - avg_from) as f64;
        w = avg.iter().map(|a| a / m).collect();
    }
    Ok(Model { w, batches, batch_size: g })
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
