//! Losses of a linear model z = ⟨w, x⟩ and their derivative in z.
//!
//! A user's gradient is ℓ'(z, y)·x: a scalar times the feature vector. The L2 term λ‖w‖²/2 does
//! not depend on any user's data, so the aggregator adds λw itself (spending no privacy budget on
//! it; Wang et al. let every user add it before clipping, which only adds noise).

use crate::features::Task;

/// A loss ℓ(z, y).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Loss {
    /// (z − y)²/2 (linear regression).
    Squared,
    /// ln(1 + e^{−yz}), y = ±1 (logistic regression).
    Logistic,
    /// max(0, 1 − yz), y = ±1 (linear SVM); the subgradient at yz = 1 is 0.
    Hinge,
}

impl Loss {
    /// The loss of a task: squared (linear), logistic, hinge (svm).
    pub fn for_task(task: Task) -> Self {
        match task {
            Task::Linear => Loss::Squared,
            Task::Logistic => Loss::Logistic,
            Task::Svm => Loss::Hinge,
        }
    }

    /// β, a bound on ∂²ℓ/∂z²: 1 (squared), ¼ (logistic). The hinge is not smooth; it gets ¼,
    /// the logistic loss's, whose limit it is (ln(1 + e^{s(1−yz)})/s as s → ∞ up to scale), so
    /// SVM and logistic regression take the same steps.
    pub fn smoothness(self) -> f64 {
        match self {
            Loss::Squared => 1.0,
            Loss::Logistic | Loss::Hinge => 0.25,
        }
    }

    /// ℓ(z, y).
    pub fn value(self, z: f64, y: f64) -> f64 {
        match self {
            Loss::Squared => 0.5 * (z - y) * (z - y),
            Loss::Logistic => {
                let m = -y * z;
                // ln(1 + e^m) without overflow.
                if m > 0.0 { m + (-m).exp().ln_1p() } else { m.exp().ln_1p() }
            }
            Loss::Hinge => (1.0 - y * z).max(0.0),
        }
    }

    /// ∂ℓ/∂z at (z, y).
    #[inline]
    pub fn derivative(self, z: f64, y: f64) -> f64 {
        match self {
            Loss::Squared => z - y,
            // −y·σ(−yz), σ(m) = 1/(1 + e^{−m}).
            Loss::Logistic => -y / (1.0 + (y * z).exp()),
            Loss::Hinge => {
                if y * z < 1.0 {
                    -y
                } else {
                    0.0
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derivatives_match_finite_differences() {
        for loss in [Loss::Squared, Loss::Logistic, Loss::Hinge] {
            for &y in &[-1.0, 1.0, 0.3] {
                if loss != Loss::Squared && y == 0.3 {
                    continue;
                }
                for &z in &[-3.0, -0.4, 0.2, 0.7, 2.5, 40.0, -800.0] {
                    let h = 1e-6;
                    let fd = (loss.value(z + h, y) - loss.value(z - h, y)) / (2.0 * h);
                    let d = loss.derivative(z, y);
                    assert!((fd - d).abs() < 1e-5 * (1.0 + d.abs()), "{loss:?} z {z} y {y}: {d} vs {fd}");
                    assert!(loss.value(z, y).is_finite());
                }
            }
        }
        assert_eq!(Loss::for_task(Task::Svm), Loss::Hinge);
    }
}
