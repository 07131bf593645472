//! Euclidean projection of a noisy answer vector y ∈ R^d onto the hull K of the workload's
//! columns (Bassily, AISTATS'19, Alg. 2): ŵ = argmin_{w ∈ K} ‖w − y‖₂.
//!
//! * [`Hull::Symmetric`]: K = conv{±a_v} = {Aλ : ‖λ‖₁ ≤ 1} (the paper's set; the l1 ball when
//!   A = I);
//! * [`Hull::Simplex`]: K = conv{a_v} = {Aλ : λ in the simplex}, the exact set of true answer
//!   vectors A·p (smaller, so at least as accurate).
//!
//! # Method and accuracy
//! A = I: exact, sort-based (O(J log J)). Otherwise **FISTA** (accelerated projected gradient,
//! Beck–Teboulle) on λ ↦ ½‖Aλ − y‖² over the l1 ball or the simplex, step 1/L with
//! L ≥ ‖A‖₂² from a power iteration and adaptive restart (O'Donoghue–Candès), stopped by a
//! **certificate**: at w = Aλ, the Frank–Wolfe
//! duality gap g(w) = ⟨w − y, w − s⟩, s = argmin over the 2J (or J) vertices of ⟨w − y, s⟩,
//! bounds ½‖w − y‖² − min_K ½‖· − y‖² ≥ ½‖w − w*‖² (strong convexity), so
//! **‖w − w*‖₂ ≤ √(2g)**, reported as [`Projection::distance_bound`]. Iterations stop when that
//! bound is below `tolerance` (default 10⁻⁶·(1 + ‖y‖)) or after `max_iterations` (default 5000).
//! Cost O(dJ) per iteration.

use super::Workload;
use harmony_core::postprocess::{project_l1_ball, project_simplex};
use serde::Serialize;

/// Which hull of the workload's columns to project onto.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Hull {
    /// conv{±a_v}: Bassily's K (the l1 ball when A = I).
    Symmetric,
    /// conv{a_v}: the set of answer vectors of distributions.
    Simplex,
}

/// Stopping rule of the iterative projection.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProjectOptions {
    /// Stop when the certified distance bound √(2·gap) is below this (`None`: 10⁻⁶·(1 + ‖y‖)).
    pub tolerance: Option<f64>,
    /// Iteration cap.
    pub max_iterations: usize,
}

impl Default for ProjectOptions {
    fn default() -> Self {
        ProjectOptions { tolerance: None, max_iterations: 5000 }
    }
}

/// A projected answer vector with its accuracy certificate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Projection {
    /// ŵ ∈ K, one entry per query (biased, like every post-processing).
    pub answers: Vec<f64>,
    /// `exact-l1-ball`, `exact-simplex` or `fista`.
    pub method: &'static str,
    /// Iterations used (0 for the exact methods).
    pub iterations: usize,
    /// The Frank–Wolfe duality gap at ŵ (≥ the excess of ½‖ŵ − y‖² over its minimum).
    pub gap: f64,
    /// √(2·gap): a bound on ‖ŵ − w*‖₂, w* the exact projection.
    pub distance_bound: f64,
}

/// The Frank–Wolfe gap at w = Aλ (g = w − y): ⟨g, w⟩ − min over the vertices of ⟨g, s⟩.
fn fw_gap(workload: &Workload, w: &[f64], y: &[f64], hull: Hull) -> f64 {
    let g: Vec<f64> = w.iter().zip(y).map(|(a, b)| a - b).collect();
    let at_g = if workload.is_identity() { g.clone() } else { workload.apply_transpose(&g) };
    let vertex_min = match hull {
        Hull::Symmetric => -at_g.iter().fold(0.0f64, |m, x| m.max(x.abs())),
        Hull::Simplex => at_g.iter().copied().fold(f64::INFINITY, f64::min),
    };
    let gw: f64 = g.iter().zip(w).map(|(a, b)| a * b).sum();
    (gw - vertex_min).max(0.0)
}

fn project_weights(lambda: &[f64], hull: Hull) -> Vec<f64> {
    match hull {
        Hull::Symmetric => project_l1_ball(lambda, 1.0).expect("radius 1 is valid"),
        Hull::Simplex => project_simplex(lambda),
    }
}

/// An upper bound on ‖A‖₂² (power iteration on AᵀA, 50 steps, +1% margin; FISTA needs
/// L ≥ ‖A‖₂², and a slightly larger L only slows it a little).
fn lipschitz(workload: &Workload) -> f64 {
    let j = workload.domain_size();
    let mut x: Vec<f64> = (0..j).map(|v| 1.0 + (v % 7) as f64 * 0.01).collect();
    let mut est = 0.0;
    for _ in 0..50 {
        let norm = x.iter().map(|a| a * a).sum::<f64>().sqrt();
        if norm == 0.0 {
            break;
        }
        x.iter_mut().for_each(|a| *a /= norm);
        let y = workload.apply_transpose(&workload.apply(&x));
        est = x.iter().zip(&y).map(|(a, b)| a * b).sum::<f64>();
        x = y;
    }
    // The Rayleigh quotient is a lower bound; pad it, and never below max column norm².
    (est * 1.01).max(workload.max_column_norm().powi(2)).max(1e-300)
}

/// Projects y (one entry per query) onto the hull of the workload's columns.
///
/// # Panics
/// If `y.len()` is not the number of queries (a programming error).
pub fn project(workload: &Workload, y: &[f64], hull: Hull, opts: ProjectOptions) -> Projection {
    assert_eq!(y.len(), workload.queries(), "project: y has {} entries, d = {}", y.len(), workload.queries());
    if workload.is_identity() {
        let (answers, method) = match hull {
            Hull::Symmetric => (project_l1_ball(y, 1.0).expect("radius 1 is valid"), "exact-l1-ball"),
            Hull::Simplex => (project_simplex(y), "exact-simplex"),
        };
        let gap = fw_gap(workload, &answers, y, hull);
        return Projection { answers, method, iterations: 0, gap, distance_bound: (2.0 * gap).sqrt() };
    }
    let tol = opts.tolerance.unwrap_or(1e-6 * (1.0 + y.iter().map(|a| a * a).sum::<f64>().sqrt()));
    let l = lipschitz(workload);
    let aty = workload.apply_transpose(y);
    let j = workload.domain_size();
    let mut lambda = project_weights(&vec![0.0; j], hull);
    let mut z = lambda.clone();
    let mut t = 1.0f64;
    let (mut gap, mut iterations) = (f64::INFINITY, 0);
    for it in 1..=opts.max_iterations {
        iterations = it;
        // ∇ = Aᵀ(Az − y) = AᵀAz − Aᵀy.
        let grad = workload.apply_transpose(&workload.apply(&z));
        let step: Vec<f64> = z.iter().zip(grad.iter().zip(&aty)).map(|(zi, (g, b))| zi - (g - b) / l).collect();
        let next = project_weights(&step, hull);
        // Adaptive restart (O'Donoghue–Candès, gradient scheme): drop the momentum when the
        // step goes against the gradient mapping.
        let against: f64 = z.iter().zip(&next).zip(&lambda).map(|((zi, ni), li)| (zi - ni) * (ni - li)).sum();
        if against > 0.0 {
            t = 1.0;
        }
        let t_next = (1.0 + (1.0 + 4.0 * t * t).sqrt()) / 2.0;
        let mom = (t - 1.0) / t_next;
        z = next.iter().zip(&lambda).map(|(a, b)| a + mom * (a - b)).collect();
        lambda = next;
        t = t_next;
        if it % 10 == 0 || it == opts.max_iterations {
            gap = fw_gap(workload, &workload.apply(&lambda), y, hull);
            if (2.0 * gap).sqrt() <= tol {
                break;
            }
        }
    }
    let answers = workload.apply(&lambda);
    if !gap.is_finite() {
        gap = fw_gap(workload, &answers, y, hull);
    }
    Projection { answers, method: "fista", iterations, gap, distance_bound: (2.0 * gap).sqrt() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linear::Domain;

    fn dist(a: &[f64], b: &[f64]) -> f64 {
        a.iter().zip(b).map(|(x, y)| (x - y).powi(2)).sum::<f64>().sqrt()
    }

    #[test]
    fn identity_is_the_exact_l1_ball_projection() {
        let w = Workload::identity(&Domain::indices(4).unwrap()).unwrap();
        let p = project(&w, &[0.9, -0.8, 0.1, 0.0], Hull::Symmetric, ProjectOptions::default());
        assert_eq!(p.method, "exact-l1-ball");
        let l1: f64 = p.answers.iter().map(|x| x.abs()).sum();
        assert!((l1 - 1.0).abs() < 1e-12 && p.distance_bound < 1e-6, "{p:?}");
        let inside = project(&w, &[0.2, -0.3, 0.1, 0.0], Hull::Symmetric, ProjectOptions::default());
        assert_eq!(inside.answers, vec![0.2, -0.3, 0.1, 0.0]);
    }

    /// A general workload: FISTA agrees with the exact projection of an equivalent identity
    /// problem (A = 2·I scaled back) and with brute force over a fine grid in 2-D.
    #[test]
    fn fista_matches_exact_projections() {
        // A = diag(2, 2, 2) permuted as rows: K = 2·(l1 ball); projection = 2·P_l1(y/2).
        let w = Workload::from_rows(
            vec!["a".into(), "b".into(), "c".into()],
            3,
            vec![vec![0.0, 2.0, 0.0], vec![2.0, 0.0, 0.0], vec![0.0, 0.0, 2.0]],
        )
        .unwrap();
        let y = [3.0, -1.0, 0.5];
        let p = project(&w, &y, Hull::Symmetric, ProjectOptions::default());
        let exact: Vec<f64> = project_l1_ball(&[1.5, -0.5, 0.25], 1.0).unwrap().iter().map(|x| 2.0 * x).collect();
        assert!(dist(&p.answers, &exact) < 1e-5 && p.distance_bound < 1e-5, "{p:?} vs {exact:?}");
        // 2 queries over 3 values: K = conv{±(1,0), ±(0,1), ±(1,1)} — a hexagon; brute force.
        let w = Workload::from_rows(vec!["x".into(), "y".into()], 3, vec![vec![1.0, 0.0, 1.0], vec![0.0, 1.0, 1.0]])
            .unwrap();
        for (y, hull) in [([2.0, 0.3], Hull::Symmetric), ([-1.0, 2.0], Hull::Symmetric), ([0.2, -0.4], Hull::Simplex)] {
            let p = project(&w, &y, hull, ProjectOptions::default());
            let mut best = (f64::INFINITY, [0.0, 0.0]);
            let steps = 400;
            // Points of K as mixtures of its vertices (barycentric grid over pairs).
            let verts: Vec<[f64; 2]> = match hull {
                Hull::Symmetric => vec![[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [-1.0, 0.0], [0.0, -1.0], [-1.0, -1.0]],
                Hull::Simplex => vec![[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]],
            };
            for a in &verts {
                for b in &verts {
                    for k in 0..=steps {
                        let s = k as f64 / steps as f64;
                        let q = [a[0] * s + b[0] * (1.0 - s), a[1] * s + b[1] * (1.0 - s)];
                        let dd = dist(&q, &y);
                        if dd < best.0 {
                            best = (dd, q);
                        }
                    }
                }
            }
            let mine = dist(&p.answers, &y);
            assert!(mine <= best.0 + 1e-6, "{hull:?} y {y:?}: fista {mine} > brute {}", best.0);
            assert!(dist(&p.answers, &best.1) < 5e-3 + p.distance_bound, "{p:?} vs {best:?}");
        }
    }
}
