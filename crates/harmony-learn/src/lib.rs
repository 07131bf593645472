//! # harmony-learn
//!
//! Machine learning under local differential privacy: linear regression, logistic regression
//! and linear SVM trained by private mini-batch gradient descent (Wang et al. ICDE'19 §V;
//! Nguyen et al. "Harmony" 2016, Alg. 4), where every user sends one randomized, clipped gradient
//! in one round and never anything else.
//!
//! * [`features`]: a schema's records as feature vectors in [-1, 1]^d and targets.
//! * [`loss`]: squared, logistic and hinge losses.
//! * [`mechanism`]: gradient randomizers (PM/HM with k-of-d sampling, Harmony 1-bit, corrected
//!   Duchi multidimensional, split-budget Laplace, non-private), built on `harmony-core`.
//! * [`projection`]: random projection to r dimensions (MGD-DR) and back.
//! * [`trainer`]: disjoint mini-batches, clipping, the noise-calibrated constant step with tail
//!   averaging or the papers' γ_t = γ₀/√t, L2.
//! * [`suffstats`]: one-round linear regression from privately estimated XᵀX and Xᵀy.
//! * [`remote`]: wire reports of sampled PM / HM gradients and the rounds' update rule (the
//!   trainer's step sizes and tail averaging), for server rounds.
//! * [`cv`]: k-fold cross-validation × repeats, in parallel, reproducible from a seed.
//!
//! No I/O: the `harmony train` command reads the data and prints the results.
//!
//! # Example
//! ```
//! use harmony_learn::{features::{Dataset, Task}, loss::Loss, mechanism::MechanismKind};
//! use harmony_learn::cv::{Experiment, Method, RunSpec};
//! use harmony_learn::trainer::TrainConfig;
//!
//! // y = sign(x₁), an intercept column and one feature.
//! let n = 4000;
//! let x: Vec<f64> = (0..n).flat_map(|i| [1.0, (i % 201) as f64 / 100.0 - 1.0]).collect();
//! let y: Vec<f64> = (0..n).map(|i| if (i % 201) > 100 { 1.0 } else { -1.0 }).collect();
//! let data = Dataset::new(x, y, 2)?;
//! let exp = Experiment {
//!     data: &data, task: Task::Logistic, max_l1: 2.0, intercept: true, blocks: &[], folds: 5, repeats: 1, seed: 7,
//! };
//! let spec = RunSpec {
//!     method: Method::Sgd,
//!     mechanism: MechanismKind::Hm,
//!     epsilon: Some(2.0),
//!     projection: None,
//!     config: TrainConfig::new(Loss::Logistic, 1.0),
//!     stream: 0,
//! };
//! let res = exp.run(&spec, &|| {})?;
//! let majority = exp.baseline()?;
//! println!("misclassification {:.3} ± {:.3} (majority {:.3})", res.mean, res.std, majority.mean);
//! assert!(res.mean < majority.mean);
//! # Ok::<(), harmony_core::Error>(())
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

#[cfg(feature = "runner")]
pub mod cv;
pub mod features;
pub mod loss;
pub mod mechanism;
pub mod projection;
pub mod remote;
pub mod suffstats;
pub mod trainer;

#[cfg(all(test, feature = "runner"))]
mod once_tests {
    //! Each user's data enters exactly one randomized gradient, and the randomizer sees only the
    //! clipped gradient.
    use crate::cv::Experiment;
    use crate::features::{Dataset, Task};
    use crate::loss::Loss;
    use crate::mechanism::{GradientRandomizer, MechanismKind};
    use crate::trainer::{TrainConfig, train};
    use harmony_core::sampling::fast_rng;
    use rand::Rng;

    /// Records every vector handed to it, then delegates to a real mechanism.
    struct Recorder {
        inner: crate::mechanism::GradientMechanism,
        seen: Vec<Vec<f64>>,
    }

    impl GradientRandomizer for Recorder {
        fn name(&self) -> &'static str {
            "recorder"
        }
        fn dimension(&self) -> usize {
            self.inner.dimension()
        }
        fn variance(&self) -> f64 {
            self.inner.variance()
        }
        fn randomize_add<R: Rng + ?Sized>(&mut self, g: &[f64], rng: &mut R, acc: &mut [f64]) {
            self.seen.push(g.to_vec());
            self.inner.randomize_add(g, rng, acc);
        }
    }

    /// User i (of n) has feature i set to `scale_i` ∈ (0.5, 1] and all others 0, and a target far
    /// outside [-1, 1]: the raw squared-loss gradient (⟨w, x⟩ − y)·x has one non-zero coordinate,
    /// its user's, of magnitude up to ~50, so an unclipped gradient would be seen.
    #[test]
    fn each_training_user_is_randomized_exactly_once_and_only_clipped() {
        let n = 60;
        let mut x = vec![0.0; n * n];
        let mut y = vec![0.0; n];
        for i in 0..n {
            x[i * n + i] = 0.5 + 0.5 * (i + 1) as f64 / n as f64;
            y[i] = if i.is_multiple_of(2) { 50.0 } else { -0.2 };
        }
        let data = Dataset::new(x, y, n).unwrap();
        let exp = Experiment {
            data: &data,
            task: Task::Linear,
            max_l1: 1.0,
            intercept: false,
            blocks: &[],
            folds: 5,
            repeats: 1,
            seed: 9,
        };
        let perm = exp.permutation(0);
        // The papers' schedule, and the noise schedule with gradients scaled by 2 before clipping.
        let configs = [TrainConfig::new(Loss::Squared, 0.5), TrainConfig::noise(Loss::Squared, 1.0)];
        for (fold, mut cfg) in (0..5).flat_map(|f| configs.map(|c| (f, c))) {
            let (train_users, test) = exp.split(&perm, fold);
            let mut rec = Recorder { inner: MechanismKind::Hm.build(1.0, n).unwrap(), seen: Vec::new() };
            cfg.batch_size = Some(7);
            let mut rng = fast_rng(fold as u64);
            train(&data, &train_users, &mut rec, Some(1.0), &cfg, &mut rng).unwrap();
            assert_eq!(rec.seen.len(), train_users.len(), "one report per training user");
            let mut count = vec![0; n];
            for g in &rec.seen {
                assert!(g.iter().all(|v| (-1.0..=1.0).contains(v)), "unclipped gradient {g:?}");
                let nz: Vec<usize> = (0..n).filter(|&j| g[j] != 0.0).collect();
                assert_eq!(nz.len(), 1, "one user per gradient: {nz:?}");
                count[nz[0]] += 1;
                // Users with y = 50 have raw gradient ≤ −25: clipped to exactly −1.
                if nz[0].is_multiple_of(2) {
                    assert_eq!(g[nz[0]], -1.0);
                }
            }
            for &u in &train_users {
                assert_eq!(count[u as usize], 1, "training user {u}");
            }
            for &u in &test {
                assert_eq!(count[u as usize], 0, "held-out user {u} contributed");
            }
        }
    }
}
