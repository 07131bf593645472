//! One-round linear regression from private sufficient statistics (an extra design, not in the
//! papers).
//!
//! Every user sends once, non-interactively, the vector v = (x_i x_j for i ≤ j, x_j·y) of
//! dimension D = d(d+1)/2 + d — every entry in [-1, 1] because x ∈ [-1, 1]^d and y ∈ [-1, 1] —
//! through a vector randomizer (HM with k-of-D sampling by default). The server averages the
//! decoded reports into unbiased estimates Ĉ of E[xxᵀ] and b̂ of E[xy], projects Ĉ onto the
//! positive semi-definite cone (eigenvalues clipped at 0) and returns the ridge solution
//! w = (Ĉ₊ + μI)⁻¹b̂. The noise of Ĉ has spectral norm about 2√(d·σ²/n) (σ² the worst-case
//! one-report variance of a coordinate), so μ is set to that, at least λ: a ridge as large as the
//! noise keeps the solution stable.
//!
//! There is no gradient step, no batch size and no learning rate, and every user's report is
//! about the same model-free quantity, so the n users' noise averages over all n instead of one
//! batch. With random projection (d = r) it is the one-round version of MGD-DR. The whole
//! collection is ε-LDP: one report per user through an ε-LDP mechanism.

use crate::features::Dataset;
use crate::mechanism::{GradientMechanism, GradientRandomizer};
use harmony_core::error::{Error, Result};
use rand::Rng;

/// D = d(d+1)/2 + d: the length of a user's statistics vector.
pub fn statistics_dimension(d: usize) -> usize {
    d * (d + 1) / 2 + d
}

/// Writes a user's statistics (x_i x_j for i ≤ j row by row, then x·y clamped to [-1, 1]).
#[inline]
pub fn statistics(x: &[f64], y: f64, out: &mut [f64]) {
    let d = x.len();
    let mut k = 0;
    for i in 0..d {
        for j in i..d {
            // A no-op for features in [-1, 1] (cv.rs projects with ±1/L for this design); the
            // randomizer must never see anything outside [-1, 1].
            out[k] = (x[i] * x[j]).clamp(-1.0, 1.0);
            k += 1;
        }
    }
    let y = y.clamp(-1.0, 1.0);
    for (o, &xj) in out[k..].iter_mut().zip(x) {
        *o = (xj * y).clamp(-1.0, 1.0);
    }
}

/// Fits w = (Ĉ₊ + μI)⁻¹b̂ from the reports of `users` sent through `mech` (dimension D). `lambda`
/// is the smallest ridge μ.
pub fn fit<R: Rng + ?Sized>(
    data: &Dataset,
    users: &[u32],
    mech: &mut GradientMechanism,
    lambda: f64,
    rng: &mut R,
) -> Result<Vec<f64>> {
    let d = data.d;
    let dim = statistics_dimension(d);
    if mech.dimension() != dim {
        return Err(Error::param("mechanism dimension", mech.dimension(), format!("d(d+1)/2 + d = {dim}")));
    }
    if users.is_empty() {
        return Err(Error::param("training users", 0, "at least one"));
    }
    let mut acc = vec![0.0; dim];
    let mut v = vec![0.0; dim];
    for &u in users {
        let u = u as usize;
        statistics(data.row(u), data.y[u], &mut v);
        mech.randomize_add(&v, rng, &mut acc);
    }
    let n = users.len() as f64;
    let mut c = vec![0.0; d * d];
    let mut k = 0;
    for i in 0..d {
        for j in i..d {
            c[i * d + j] = acc[k] / n;
            c[j * d + i] = acc[k] / n;
            k += 1;
        }
    }
    let b: Vec<f64> = acc[k..].iter().map(|a| a / n).collect();
    let noise = 2.0 * (d as f64 * mech.worst_case_variance() / n).sqrt();
    let mu = noise.max(lambda).max(1e-12);
    let (vals, vecs) = symmetric_eigen(&mut c, d);
    // w = Σ_k u_k (u_kᵀ b)/(max(λ_k, 0) + μ).
    let mut w = vec![0.0; d];
    for (kk, &lam) in vals.iter().enumerate() {
        let u = &vecs[kk * d..(kk + 1) * d];
        let coef = crate::trainer::dot(u, &b) / (lam.max(0.0) + mu);
        w.iter_mut().zip(u).for_each(|(wi, ui)| *wi += coef * ui);
    }
    Ok(w)
}

/// Eigen-decomposition of a symmetric d × d matrix (row-major, destroyed) by cyclic Jacobi
/// rotations: (eigenvalues, eigenvectors as rows, d × d). O(d³) per sweep; meant for d ≲ 100.
pub fn symmetric_eigen(a: &mut [f64], d: usize) -> (Vec<f64>, Vec<f64>) {
    let mut v = vec![0.0; d * d];
    for i in 0..d {
        v[i * d + i] = 1.0;
    }
    let norm: f64 = a.iter().map(|x| x * x).sum::<f64>().sqrt();
    for _sweep in 0..60 {
        let off: f64 = (0..d)
            .flat_map(|i| (0..d).filter(move |&j| j != i).map(move |j| (i, j)))
            .map(|(i, j)| a[i * d + j].powi(2))
            .sum();
        if off.sqrt() <= 1e-14 * norm.max(1e-300) {
            break;
        }
        for p in 0..d {
            for q in (p + 1)..d {
                let apq = a[p * d + q];
                if apq == 0.0 {
                    continue;
                }
                let (app, aqq) = (a[p * d + p], a[q * d + q]);
                let theta = (aqq - app) / (2.0 * apq);
                let t = theta.signum() / (theta.abs() + (theta * theta + 1.0).sqrt());
                let t = if theta == 0.0 { 1.0 } else { t };
                let c = 1.0 / (t * t + 1.0).sqrt();
                let s = t * c;
                for k in 0..d {
                    let (akp, akq) = (a[k * d + p], a[k * d + q]);
                    a[k * d + p] = c * akp - s * akq;
                    a[k * d + q] = s * akp + c * akq;
                }
                for k in 0..d {
                    let (apk, aqk) = (a[p * d + k], a[q * d + k]);
                    a[p * d + k] = c * apk - s * aqk;
                    a[q * d + k] = s * apk + c * aqk;
                }
                for k in 0..d {
                    // Eigenvectors as rows: row p and row q of v rotate like a's rows.
                    let (vpk, vqk) = (v[p * d + k], v[q * d + k]);
                    v[p * d + k] = c * vpk - s * vqk;
                    v[q * d + k] = s * vpk + c * vqk;
                }
            }
        }
    }
    ((0..d).map(|i| a[i * d + i]).collect(), v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mechanism::MechanismKind;
    use harmony_core::sampling::fast_rng;

    #[test]
    fn eigen_decomposition_reconstructs_the_matrix() {
        let d = 6;
        let m: Vec<f64> = (0..d * d)
            .map(|k| {
                let (i, j) = (k / d, k % d);
                1.0 / (1.0 + i as f64 + j as f64) + if i == j { 0.5 } else { 0.0 } - 0.1 * ((i * j) % 3) as f64
            })
            .collect();
        let mut a = m.clone();
        let (vals, vecs) = symmetric_eigen(&mut a, d);
        for i in 0..d {
            for j in 0..d {
                let r: f64 = (0..d).map(|k| vals[k] * vecs[k * d + i] * vecs[k * d + j]).sum();
                assert!((r - m[i * d + j]).abs() < 1e-10, "({i},{j}): {r} vs {}", m[i * d + j]);
            }
        }
    }

    #[test]
    fn non_private_statistics_give_least_squares() {
        // y = 0.5·x₁ − 0.3·x₂ + 0.1 exactly; the fit recovers it (μ = λ tiny).
        let n = 500;
        let mut x = Vec::new();
        let mut y = Vec::new();
        for i in 0..n {
            let (a, b) = ((i % 13) as f64 / 6.0 - 1.0, (i % 7) as f64 / 3.0 - 1.0);
            x.extend_from_slice(&[1.0, a, b]);
            y.push(0.1 + 0.5 * a - 0.3 * b);
        }
        let data = Dataset::new(x, y, 3).unwrap();
        let users: Vec<u32> = (0..n as u32).collect();
        let mut mech = MechanismKind::NonPrivate.build(1.0, statistics_dimension(3)).unwrap();
        let w = fit(&data, &users, &mut mech, 1e-9, &mut fast_rng(1)).unwrap();
        for (a, b) in w.iter().zip([0.1, 0.5, -0.3]) {
            assert!((a - b).abs() < 1e-6, "{w:?}");
        }
        let mut small = MechanismKind::Hm.build(1.0, 4).unwrap();
        assert!(fit(&data, &users, &mut small, 1e-4, &mut fast_rng(1)).is_err());
    }
}
