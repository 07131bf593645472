//! Opt-in, composable post-processing of frequency estimates. Every function is O(d log d).
//!
//! The unbiased estimates of a frequency oracle can be negative and need not sum to 1. These
//! maps turn them into a distribution (or a point of an ℓ1 ball). They are post-processing, so
//! they cost no privacy, but **their outputs are biased** (for example, the zero estimates of
//! rare items become ≥ 0 on average). [`PostProcess::apply`] keeps the standard errors of the
//! *unbiased* estimate: use them only as a conservative guide to the post-processed error, not
//! as its exact standard error.
//!
//! * [`norm_sub`]: Norm-Sub (Wang et al., NDSS'20): zero the negative estimates and subtract one
//!   common δ from the positive ones so the total is 1, iterating until all are ≥ 0. Equal to
//!   the simplex projection whenever Σ max(f, 0) ≥ 1.
//! * [`project_simplex`]: the Euclidean projection onto the probability simplex (sort-based,
//!   Held–Wolfe–Crowder / Duchi et al. 2008).
//! * [`clip_renormalize`]: max(f, 0)/Σ max(f, 0). Simple but more biased than the two above.
//! * [`project_l1_ball`]: the Euclidean projection onto {w : ‖w‖₁ ≤ r} (linear queries).
//!
//! Inputs are expected to be finite; a NaN propagates into the output.

use crate::error::{Error, Result};
use crate::estimate::FrequencyEstimate;
use serde::{Deserialize, Serialize};

/// The threshold θ of the projection of `v` onto {w ≥ 0 : Σw = r}: w = max(v − θ, 0).
fn simplex_threshold(v: &[f64], r: f64) -> f64 {
    let mut u = v.to_vec();
    u.sort_unstable_by(|a, b| b.total_cmp(a));
    let (mut cumsum, mut theta) = (0.0, 0.0);
    for (j, &x) in u.iter().enumerate() {
        cumsum += x;
        let t = (cumsum - r) / (j + 1) as f64;
        if x - t > 0.0 {
            theta = t;
        } else {
            break;
        }
    }
    theta
}

/// The Euclidean projection of `f` onto the probability simplex {w ≥ 0 : Σw = 1}: the closest
/// distribution to the estimate. An empty input gives an empty output.
pub fn project_simplex(f: &[f64]) -> Vec<f64> {
    if f.is_empty() {
        return Vec::new();
    }
    let theta = simplex_threshold(f, 1.0);
    f.iter().map(|&x| (x - theta).max(0.0)).collect()
}

/// Norm-Sub (Wang et al., NDSS'20): items with estimate ≤ 0 get 0; the positive ones are
/// shifted by one common δ (iteratively zeroing those that fall below 0) so the total is 1.
/// If no estimate is positive the output is uniform.
pub fn norm_sub(f: &[f64]) -> Vec<f64> {
    let positive: Vec<f64> = f.iter().copied().filter(|&x| x > 0.0).collect();
    if positive.is_empty() {
        return vec![1.0 / f.len() as f64; f.len()];
    }
    // The fixed point of the iteration is the simplex projection of the positive entries
    // (δ < 0 when their sum is below 1: then every positive entry is raised).
    let delta = simplex_threshold(&positive, 1.0);
    f.iter().map(|&x| if x > 0.0 { (x - delta).max(0.0) } else { 0.0 }).collect()
}

/// Clip negatives to 0 and rescale to sum 1 (uniform if nothing is positive). Biased: it
/// shrinks large frequencies whenever the clipped mass of the noise is positive.
pub fn clip_renormalize(f: &[f64]) -> Vec<f64> {
    let total: f64 = f.iter().map(|&x| x.max(0.0)).sum();
    if total <= 0.0 {
        return vec![1.0 / f.len() as f64; f.len()];
    }
    f.iter().map(|&x| x.max(0.0) / total).collect()
}

/// The Euclidean projection of `f` onto the ℓ1 ball of radius r: `f` itself if ‖f‖₁ ≤ r, else
/// sign(f)·max(|f| − θ, 0) with θ chosen so the ℓ1 norm is r. Errors: r not finite and > 0.
pub fn project_l1_ball(f: &[f64], r: f64) -> Result<Vec<f64>> {
    if !(r.is_finite() && r > 0.0) {
        return Err(Error::param("r", r, "a finite radius > 0"));
    }
    let abs: Vec<f64> = f.iter().map(|x| x.abs()).collect();
    if abs.iter().sum::<f64>() <= r {
        return Ok(f.to_vec());
    }
    let theta = simplex_threshold(&abs, r);
    Ok(f.iter().map(|&x| x.signum() * (x.abs() - theta).max(0.0)).collect())
}

/// A post-processing step chosen by name (CLI, configs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PostProcess {
    /// The unbiased estimate, unchanged.
    #[default]
    None,
    /// [`norm_sub`].
    NormSub,
    /// [`project_simplex`].
    Simplex,
    /// [`clip_renormalize`].
    ClipRenormalize,
}

impl PostProcess {
    /// The accepted names, in the order of the variants.
    pub const NAMES: &'static [&'static str] = &["none", "norm-sub", "simplex", "clip"];

    /// Parses a name from [`PostProcess::NAMES`].
    pub fn by_name(name: &str) -> Result<Self> {
        Ok(match name {
            "none" => PostProcess::None,
            "norm-sub" => PostProcess::NormSub,
            "simplex" => PostProcess::Simplex,
            "clip" => PostProcess::ClipRenormalize,
            _ => return Err(Error::param("postprocess", name, "one of none, norm-sub, simplex, clip")),
        })
    }
    /// The name of this step.
    pub fn name(&self) -> &'static str {
        match self {
            PostProcess::None => "none",
            PostProcess::NormSub => "norm-sub",
            PostProcess::Simplex => "simplex",
            PostProcess::ClipRenormalize => "clip",
        }
    }
    /// Applies the step to the frequencies. The output is **biased**; its `std_errors` are those
    /// of the unbiased input (a conservative guide only) and `n` is unchanged.
    pub fn apply(&self, est: &FrequencyEstimate) -> FrequencyEstimate {
        let frequencies = match self {
            PostProcess::None => est.frequencies.clone(),
            PostProcess::NormSub => norm_sub(&est.frequencies),
            PostProcess::Simplex => project_simplex(&est.frequencies),
            PostProcess::ClipRenormalize => clip_renormalize(&est.frequencies),
        };
        FrequencyEstimate { n: est.n, frequencies, std_errors: est.std_errors.clone() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn dist2(a: &[f64], b: &[f64]) -> f64 {
        a.iter().zip(b).map(|(x, y)| (x - y).powi(2)).sum()
    }

    fn on_simplex(w: &[f64]) -> bool {
        w.iter().all(|&x| x >= 0.0) && (w.iter().sum::<f64>() - 1.0).abs() < 1e-9
    }

    /// Every point of the simplex in 3 dimensions on a grid of step 1/200.
    fn simplex_grid() -> Vec<[f64; 3]> {
        let n = 200;
        let mut g = Vec::new();
        for i in 0..=n {
            for j in 0..=(n - i) {
                g.push([i as f64 / n as f64, j as f64 / n as f64, (n - i - j) as f64 / n as f64]);
            }
        }
        g
    }

    #[test]
    fn simplex_projection_is_the_nearest_point_brute_force() {
        let grid = simplex_grid();
        let cases = [[0.5, 0.7, -0.3], [-0.2, -0.1, 0.05], [0.3, 0.3, 0.4], [2.0, -1.0, 0.1], [0.1, 0.1, 0.1]];
        for f in cases {
            let p = project_simplex(&f);
            assert!(on_simplex(&p), "{f:?} -> {p:?}");
            let dp = dist2(&f, &p);
            let best = grid.iter().map(|g| dist2(&f, g)).fold(f64::INFINITY, f64::min);
            // No grid point is closer; the best grid point is within the grid resolution.
            assert!(dp <= best + 1e-12, "{f:?}: projection {dp}, grid {best}");
            assert!(best - dp < 0.02, "{f:?}: projection {dp}, grid {best}");
        }
    }

    #[test]
    fn norm_sub_lifts_positives_when_their_sum_is_below_one() {
        let f = [0.2, -0.1, 0.3, 0.0];
        let w = norm_sub(&f);
        assert!(on_simplex(&w));
        // δ = (0.5 − 1)/2: both positive entries rise by 0.25, the others stay 0.
        assert!((w[0] - 0.45).abs() < 1e-12 && (w[2] - 0.55).abs() < 1e-12 && w[1] == 0.0 && w[3] == 0.0);
        // The simplex projection differs here: it may also lift non-positive entries.
        assert!(dist2(&project_simplex(&f), &w) > 1e-6);
        assert_eq!(norm_sub(&[-1.0, -2.0]), vec![0.5, 0.5]);
    }

    #[test]
    fn clip_and_l1_ball() {
        assert_eq!(clip_renormalize(&[0.5, -0.5, 1.5]), vec![0.25, 0.0, 0.75]);
        assert_eq!(clip_renormalize(&[-0.5, 0.0]), vec![0.5, 0.5]);
        assert_eq!(project_l1_ball(&[0.1, -0.2], 1.0).unwrap(), vec![0.1, -0.2]);
        let w = project_l1_ball(&[3.0, -1.0, 0.5], 2.0).unwrap();
        assert!((w.iter().map(|x| x.abs()).sum::<f64>() - 2.0).abs() < 1e-12);
        assert_eq!(w, vec![2.0, 0.0, 0.0]);
        // Brute force in 2-D: no point of the ball on a grid is closer.
        let f = [1.5, -0.8];
        let p = project_l1_ball(&f, 1.0).unwrap();
        let mut best = f64::INFINITY;
        for i in -200..=200 {
            for j in -200..=200 {
                let g = [i as f64 / 200.0, j as f64 / 200.0];
                if g[0].abs() + g[1].abs() <= 1.0 {
                    best = best.min(dist2(&f, &g));
                }
            }
        }
        assert!(dist2(&f, &p) <= best + 1e-12 && best - dist2(&f, &p) < 0.02);
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(project_l1_ball(&[1.0], bad).unwrap_err().to_string().contains("r is"));
        }
    }

    #[test]
    fn postprocess_enum_keeps_n_and_standard_errors() {
        let est = FrequencyEstimate { n: 10, frequencies: vec![0.7, 0.5, -0.2], std_errors: vec![0.1, 0.2, 0.3] };
        for &name in PostProcess::NAMES {
            let p = PostProcess::by_name(name).unwrap();
            assert_eq!(p.name(), name);
            let out = p.apply(&est);
            assert_eq!((out.n, &out.std_errors), (10, &est.std_errors));
            if p != PostProcess::None {
                assert!(on_simplex(&out.frequencies), "{name}: {:?}", out.frequencies);
            }
        }
        assert_eq!(PostProcess::None.apply(&est), est);
        assert!(PostProcess::by_name("sharpen").unwrap_err().to_string().contains("norm-sub"));
        assert_eq!(serde_json::to_string(&PostProcess::NormSub).unwrap(), "\"norm-sub\"");
    }

    proptest! {
        #[test]
        fn projection_properties(f in proptest::collection::vec(-2.0f64..2.0, 1..40)) {
            let p = project_simplex(&f);
            prop_assert!(on_simplex(&p));
            // Idempotent.
            let pp = project_simplex(&p);
            prop_assert!(dist2(&p, &pp) < 1e-20);
            // Optimality (KKT): f − p = θ on the support, ≤ θ off it.
            let theta = f.iter().zip(&p).find(|(_, w)| **w > 0.0).map(|(x, w)| x - w).unwrap();
            for (x, w) in f.iter().zip(&p) {
                if *w > 0.0 { prop_assert!((x - w - theta).abs() < 1e-9); } else { prop_assert!(*x <= theta + 1e-9); }
            }
            // Norm-sub equals the projection when the positive mass is at least 1.
            let ns = norm_sub(&f);
            prop_assert!(on_simplex(&ns));
            if f.iter().map(|x| x.max(0.0)).sum::<f64>() >= 1.0 {
                prop_assert!(dist2(&ns, &p) < 1e-20);
            }
            prop_assert!(on_simplex(&clip_renormalize(&f)));
        }
    }
}
