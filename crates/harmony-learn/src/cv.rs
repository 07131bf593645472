//! k-fold cross-validation × repeats: held-out users never contribute a report.
//!
//! Repeat r draws a permutation of the users (seeded by `(seed, r)`, the same for every
//! mechanism, so mechanisms are compared on the same folds); fold f holds out the f-th of k equal
//! slices and trains on the rest in permuted order. Each (repeat, fold) run has its own seeded
//! RNG stream, so results do not depend on the thread count. Runs go in parallel (rayon).

use crate::features::{Dataset, Task};
use crate::mechanism::{GradientMechanism, GradientRandomizer, MechanismKind};
use crate::projection::{RandomProjection, Scaling};
use crate::trainer::{TrainConfig, train};
use harmony_core::error::{Error, Result};
use harmony_core::sampling::{fast_rng, stream_seed, uniform_below};
use rayon::prelude::*;

/// Passes over the training users of the non-private reference model.
pub const NON_PRIVATE_EPOCHS: usize = 5;

/// The data and the cross-validation design shared by every run.
#[derive(Debug, Clone, Copy)]
pub struct Experiment<'a> {
    /// Features and targets.
    pub data: &'a Dataset,
    /// The task (its metric).
    pub task: Task,
    /// max ‖x‖₁ over users, a public bound from the schema ([`crate::features::FeatureMap::max_l1`]);
    /// it also bounds ‖x‖² since every feature is in [-1, 1]. Random projection scale and the R²
    /// of [`crate::trainer::Schedule::Noise`].
    pub max_l1: f64,
    /// Whether column 0 is the constant intercept (kept out of random projections).
    pub intercept: bool,
    /// Attribute block lengths of the features (for `hm-attr`; empty: one block per column).
    pub blocks: &'a [usize],
    /// k of k-fold.
    pub folds: usize,
    /// Repeats of the k-fold split.
    pub repeats: usize,
    /// Base seed.
    pub seed: u64,
}

/// How the reports become a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Method {
    /// Private mini-batch gradient descent ([`crate::trainer`]).
    #[default]
    Sgd,
    /// One round of sufficient statistics ([`crate::suffstats`]).
    SuffStats,
}

/// A named collection design: how reports are made and turned into a model. The papers' designs
/// are SGD with one mechanism (`hm`, `pm`, `harmony-1bit`, `duchi-multi`, `laplace`); the extras
/// are `hm-attr` (SGD with attribute-level sampling,
/// [`crate::mechanism::GradientMechanism::Blocks`]) and `hm-ss` (one round of sufficient
/// statistics through HM, [`crate::suffstats`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Design {
    /// The name (CLI, JSON).
    pub name: &'static str,
    /// SGD or sufficient statistics.
    pub method: Method,
    /// The randomizer.
    pub mechanism: MechanismKind,
}

impl Design {
    /// Every design's name: the papers' first, then the extras.
    pub const NAMES: &'static [&'static str] =
        &["hm", "pm", "harmony-1bit", "duchi-multi", "laplace", "hm-attr", "hm-ss"];

    /// The design called `name` (the error lists the valid names).
    pub fn parse(name: &str) -> Result<Self> {
        Ok(match name {
            "hm-ss" => Design { name: "hm-ss", method: Method::SuffStats, mechanism: MechanismKind::Hm },
            // Exact gradients through the design's schedule (5 passes): with a projection, what
            // the projected features can represent at all. Not in NAMES (not a default design).
            "non-private" => Design { name: "non-private", method: Method::Sgd, mechanism: MechanismKind::NonPrivate },
            _ => match MechanismKind::parse(name) {
                Ok(k) => Design { name: k.name(), method: Method::Sgd, mechanism: k },
                Err(_) => {
                    return Err(Error::param(
                        "mechanism",
                        name,
                        format!("one of {} (or non-private)", Self::NAMES.join(", ")),
                    ));
                }
            },
        })
    }
}

/// A random projection (MGD-DR): r target dimensions and the scaling of P.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Projection {
    /// Target dimension r.
    pub r: usize,
    /// ±1/L (Harmony) or ±1/√r.
    pub scaling: Scaling,
    /// Pass the intercept column through unprojected (when the data has one).
    pub keep_intercept: bool,
}

impl Projection {
    /// Harmony's MGD-DR: ±1/L, the intercept projected with the rest.
    pub fn harmony(r: usize) -> Self {
        Projection { r, scaling: Scaling::Cube, keep_intercept: false }
    }
    /// ±1/√r with the intercept kept (the default, see [`crate::projection`]).
    pub fn norm(r: usize) -> Self {
        Projection { r, scaling: Scaling::Norm, keep_intercept: true }
    }
}

/// One configuration to cross-validate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunSpec {
    /// Gradient descent or one-round sufficient statistics.
    pub method: Method,
    /// The gradient randomizer.
    pub mechanism: MechanismKind,
    /// The budget (None for non-private).
    pub epsilon: Option<f64>,
    /// Random projection (MGD-DR), or None.
    pub projection: Option<Projection>,
    /// Training hyper-parameters.
    pub config: TrainConfig,
    /// Distinguishes the RNG streams of different specs.
    pub stream: u64,
}

/// Scores of one configuration over folds × repeats.
#[derive(Debug, Clone, PartialEq)]
pub struct CvResult {
    /// One test score per (repeat, fold), repeat-major.
    pub scores: Vec<f64>,
    /// Mean score.
    pub mean: f64,
    /// Sample standard deviation of the scores (n − 1).
    pub std: f64,
    /// Nominal batch size of the first run.
    pub batch_size: usize,
    /// Batches (gradient steps) of the first run.
    pub batches: usize,
    /// The step of the first run (constant γ, or γ₀ of γ₀/√t); None for the one-round
    /// sufficient-statistics design, which takes no gradient step.
    pub step: Option<f64>,
}

impl CvResult {
    fn from_scores(scores: Vec<f64>, first: Fit) -> Self {
        let (mean, std) = mean_std(&scores);
        CvResult { scores, mean, std, batch_size: first.batch_size, batches: first.batches, step: first.step }
    }
}

/// What one run reports besides its score.
#[derive(Debug, Clone, Copy, Default)]
struct Fit {
    batch_size: usize,
    batches: usize,
    step: Option<f64>,
}

/// Mean and sample standard deviation.
pub fn mean_std(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let var = if v.len() > 1 { v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0) } else { 0.0 };
    (mean, var.sqrt())
}

impl Experiment<'_> {
    /// Checks 2 ≤ folds ≤ n and repeats ≥ 1.
    pub fn validate(&self) -> Result<()> {
        let n = self.data.len();
        if !(2..=n).contains(&self.folds) {
            return Err(Error::param("folds", self.folds, format!("an integer in [2, {n}] (the number of users)")));
        }
        if self.repeats == 0 {
            return Err(Error::param("repeats", 0, "an integer >= 1"));
        }
        Ok(())
    }

    /// The permutation of repeat r.
    pub fn permutation(&self, repeat: usize) -> Vec<u32> {
        let n = self.data.len();
        let mut p: Vec<u32> = (0..n as u32).collect();
        let mut rng = fast_rng(stream_seed(self.seed, repeat as u64));
        for i in (1..n).rev() {
            let j = uniform_below(&mut rng, i as u64 + 1) as usize;
            p.swap(i, j);
        }
        p
    }

    /// (train, test) users of fold f of a permutation: the test slice is held out entirely.
    pub fn split(&self, perm: &[u32], fold: usize) -> (Vec<u32>, Vec<u32>) {
        let n = perm.len();
        let (a, b) = (fold * n / self.folds, (fold + 1) * n / self.folds);
        let test = perm[a..b].to_vec();
        let mut train = Vec::with_capacity(n - test.len());
        train.extend_from_slice(&perm[..a]);
        train.extend_from_slice(&perm[b..]);
        (train, test)
    }

    /// The task's test metric of weights `w` on the rows `test`: misclassification rate
    /// (classification: sign(⟨w, x⟩) against y, 0 predicted as −1) or mean squared error on the
    /// target's [-1, 1] scale (linear: predictions clamped to [-1, 1], the target's public range).
    pub fn score(&self, w: &[f64], test: &[u32]) -> f64 {
        let data = self.data;
        let total: f64 = test
            .iter()
            .map(|&i| {
                let i = i as usize;
                let z = crate::trainer::dot(w, data.row(i));
                if self.task.is_classification() {
                    ((z > 0.0) != (data.y[i] > 0.0)) as u8 as f64
                } else {
                    (z.clamp(-1.0, 1.0) - data.y[i]).powi(2)
                }
            })
            .sum();
        total / test.len() as f64
    }

    /// Runs `f(repeat, fold, train, test) -> (score, fit)` over every run in parallel, calling
    /// `tick` after each.
    fn each_run<F>(&self, tick: &(dyn Fn() + Sync), f: F) -> Result<CvResult>
    where
        F: Fn(usize, usize, &[u32], &[u32]) -> Result<(f64, Fit)> + Sync,
    {
        self.validate()?;
        let perms: Vec<Vec<u32>> = (0..self.repeats).into_par_iter().map(|r| self.permutation(r)).collect();
        let runs: Vec<(usize, usize)> = (0..self.repeats).flat_map(|r| (0..self.folds).map(move |k| (r, k))).collect();
        let out: Vec<Result<(f64, Fit)>> = runs
            .par_iter()
            .map(|&(r, k)| {
                let (train, test) = self.split(&perms[r], k);
                let res = f(r, k, &train, &test);
                tick();
                res
            })
            .collect();
        let out: Vec<(f64, Fit)> = out.into_iter().collect::<Result<_>>()?;
        let first = out[0].1;
        Ok(CvResult::from_scores(out.into_iter().map(|o| o.0).collect(), first))
    }

    /// Cross-validates one configuration.
    pub fn run(&self, spec: &RunSpec, tick: &(dyn Fn() + Sync)) -> Result<CvResult> {
        let d = self.data.d;
        let keep = |p: &Projection| (p.keep_intercept && self.intercept) as usize;
        if let Some(p) = &spec.projection {
            crate::projection::check_projection(p.r, d - keep(p))?;
        }
        let base_dim = spec.projection.map_or(d, |p| p.r + keep(&p));
        let dim = match spec.method {
            Method::Sgd => base_dim,
            Method::SuffStats => crate::suffstats::statistics_dimension(base_dim),
        };
        // Validate once, up front (ε, names), before the parallel runs.
        let blocks: &[usize] = if spec.projection.is_none() && spec.method == Method::Sgd { self.blocks } else { &[] };
        spec.mechanism.build_blocks(spec.epsilon.unwrap_or(1.0), dim, blocks)?;
        spec.config.validate()?;
        self.each_run(tick, |r, k, train_users, test| {
            let mut rng = fast_rng(stream_seed(self.seed, (spec.stream << 32) | ((r as u64) << 16) | k as u64));
            let mut mech = spec.mechanism.build_blocks(spec.epsilon.unwrap_or(1.0), dim, blocks)?;
            // The non-private reference is trained to convergence: NON_PRIVATE_EPOCHS passes over
            // the training users, reshuffled each pass (no privacy, so nothing limits the passes).
            let epochs_users: Vec<u32>;
            let train_users: &[u32] = if spec.mechanism == MechanismKind::NonPrivate {
                let mut all = Vec::with_capacity(train_users.len() * NON_PRIVATE_EPOCHS);
                let mut pass = train_users.to_vec();
                for _ in 0..NON_PRIVATE_EPOCHS {
                    for i in (1..pass.len()).rev() {
                        pass.swap(i, uniform_below(&mut rng, i as u64 + 1) as usize);
                    }
                    all.extend_from_slice(&pass);
                }
                epochs_users = all;
                &epochs_users
            } else {
                train_users
            };
            let mut config = spec.config;
            // R² of the features the trainer sees: ‖x‖² ≤ ‖x‖₁ ≤ L; after projection
            // E_P‖x'‖² ≤ keep + r·v²·(L − keep).
            config.curvature = match &spec.projection {
                None => self.max_l1,
                Some(p) => {
                    let k = keep(p) as f64;
                    let v = p.scaling.entry(p.r, self.max_l1);
                    k + p.r as f64 * v * v * (self.max_l1 - k)
                }
            };
            if spec.mechanism == MechanismKind::NonPrivate && config.batch_size.is_none() {
                config.batch_size =
                    Some(crate::trainer::default_batch_size(dim, None, train_users.len() / NON_PRIVATE_EPOCHS));
            }
            let fit = |data: &Dataset, mech: &mut GradientMechanism, rng: &mut _| -> Result<(Vec<f64>, Fit)> {
                match spec.method {
                    Method::Sgd => {
                        let m = train(data, train_users, mech, spec.epsilon, &config, rng)?;
                        Ok((m.w, Fit { batch_size: m.batch_size, batches: m.batches, step: Some(m.step) }))
                    }
                    Method::SuffStats => {
                        let w = crate::suffstats::fit(data, train_users, mech, spec.config.lambda, rng)?;
                        Ok((w, Fit { batch_size: train_users.len(), batches: 1, step: None }))
                    }
                }
            };
            let (w, fit) = match &spec.projection {
                None => fit(self.data, &mut mech, &mut rng)?,
                Some(p) => {
                    let k = keep(p);
                    // Sufficient statistics need x' in the cube (products of features are
                    // reported as they are), so they always use the ±1/L entries.
                    let scaling = if spec.method == Method::SuffStats { Scaling::Cube } else { p.scaling };
                    let proj = RandomProjection::new(p.r, d, scaling.entry(p.r, self.max_l1), k, &mut rng)?;
                    let projected = proj.project_dataset(self.data);
                    let (w, fit) = fit(&projected, &mut mech, &mut rng)?;
                    (proj.map_back(&w), fit)
                }
            };
            debug_assert_eq!(mech.dimension(), dim);
            Ok((self.score(&w, test), fit))
        })
    }

    /// The trivial predictor of each training fold, scored on its test fold: the majority class
    /// (classification; its misclassification rate) or the mean target (linear; its MSE).
    pub fn baseline(&self) -> Result<CvResult> {
        let data = self.data;
        let classify = self.task.is_classification();
        self.each_run(&|| {}, |_, _, train_users, test| {
            let mean = train_users.iter().map(|&i| data.y[i as usize]).sum::<f64>() / train_users.len() as f64;
            let pred = if classify { mean.signum() } else { mean };
            let s = test
                .iter()
                .map(|&i| {
                    let y = data.y[i as usize];
                    if classify { ((pred > 0.0) != (y > 0.0)) as u8 as f64 } else { (pred - y).powi(2) }
                })
                .sum::<f64>()
                / test.len() as f64;
            Ok((s, Fit::default()))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toy(n: usize) -> Dataset {
        let mut x = Vec::new();
        let mut y = Vec::new();
        for i in 0..n {
            let t = (i % 17) as f64 / 8.0 - 1.0;
            x.extend_from_slice(&[1.0, t]);
            y.push(if t > 0.1 { 1.0 } else { -1.0 });
        }
        Dataset::new(x, y, 2).unwrap()
    }

    fn toy_experiment(data: &Dataset, folds: usize, repeats: usize) -> Experiment<'_> {
        Experiment { data, task: Task::Logistic, max_l1: 2.0, intercept: true, blocks: &[], folds, repeats, seed: 5 }
    }

    #[test]
    fn folds_partition_users_and_test_users_never_train() {
        let data = toy(103);
        let exp = toy_experiment(&data, 10, 2);
        let perm = exp.permutation(1);
        let mut seen = vec![0; 103];
        for k in 0..10 {
            let (train, test) = exp.split(&perm, k);
            assert_eq!(train.len() + test.len(), 103);
            for &t in &test {
                seen[t as usize] += 1;
                assert!(!train.contains(&t));
            }
        }
        assert!(seen.iter().all(|&c| c == 1));
        assert_ne!(exp.permutation(0), exp.permutation(1));
        let bad = Experiment { folds: 1, ..exp };
        assert!(bad.validate().unwrap_err().to_string().contains("folds is 1"));
    }

    #[test]
    fn non_private_learns_and_runs_are_reproducible() {
        let data = toy(2000);
        let exp = toy_experiment(&data, 5, 1);
        let cfg = TrainConfig { batch_size: Some(10), ..TrainConfig::new(crate::loss::Loss::Logistic, 2.0) };
        let spec = RunSpec {
            method: Method::Sgd,
            mechanism: MechanismKind::NonPrivate,
            epsilon: None,
            projection: None,
            config: cfg,
            stream: 0,
        };
        let np = exp.run(&spec, &|| {}).unwrap();
        let base = exp.baseline().unwrap();
        assert!(np.mean < 0.1 && base.mean > 0.3, "{} vs {}", np.mean, base.mean);
        let hm = RunSpec { mechanism: MechanismKind::Hm, epsilon: Some(2.0), ..spec };
        assert_eq!(exp.run(&hm, &|| {}).unwrap(), exp.run(&hm, &|| {}).unwrap());
    }
}
