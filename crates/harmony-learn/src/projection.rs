//! Random projection to r dimensions (Harmony's MGD-DR).
//!
//! P ∈ {±1/L}^{r×d} with independent fair signs, L = the largest ‖x‖₁ of a feature vector
//! ([`crate::features::FeatureMap::max_l1`]), so x' = Px ∈ [-1, 1]^r for every user and nothing
//! needs clipping. Harmony uses L = d, which is this bound for its ±1 encoding; with the zero-one
//! encoding L is the number of attributes, and x' is d/L times larger (a stronger signal against
//! the same noise). The model w' learnt on x' is mapped back to w = Pᵀw', so ⟨w, x⟩ = ⟨w', Px⟩
//! and the model predicts from the original features. P is public randomness (drawn by the
//! server, sent to every user).

use crate::features::Dataset;
use harmony_core::error::{Error, Result};
use rand::Rng;

/// A random ±1/L projection from d to r dimensions.
#[derive(Debug, Clone, PartialEq)]
pub struct RandomProjection {
    r: usize,
    d: usize,
    /// r × d, row-major.
    p: Vec<f64>,
}

impl RandomProjection {
    /// Draws P (r × d, entries ±1/`max_l1`). Errors unless 1 ≤ r < d and `max_l1` ≥ 1.
    pub fn new<R: Rng + ?Sized>(r: usize, d: usize, max_l1: f64, rng: &mut R) -> Result<Self> {
        check_projection(r, d)?;
        if !(max_l1 >= 1.0 && max_l1.is_finite()) {
            return Err(Error::param("max_l1", max_l1, "a finite number >= 1"));
        }
        let v = 1.0 / max_l1;
        let mut p = Vec::with_capacity(r * d);
        while p.len() < r * d {
            let mut bits = rng.next_u64();
            for _ in 0..64.min(r * d - p.len()) {
                p.push(if bits & 1 == 1 { v } else { -v });
                bits >>= 1;
            }
        }
        Ok(RandomProjection { r, d, p })
    }
    /// The target dimension r.
    pub fn dimension(&self) -> usize {
        self.r
    }
    /// x' = Px into `out` (length r); zero features are skipped (one-hot rows are sparse).
    pub fn project(&self, x: &[f64], out: &mut [f64]) {
        out.fill(0.0);
        for (j, &xj) in x.iter().enumerate() {
            if xj != 0.0 {
                for (o, row) in out.iter_mut().zip(self.p.chunks_exact(self.d)) {
                    *o += row[j] * xj;
                }
            }
        }
    }
    /// Projects every row of `data`.
    pub fn project_dataset(&self, data: &Dataset) -> Dataset {
        let n = data.len();
        let mut x = vec![0.0; n * self.r];
        for (i, out) in x.chunks_exact_mut(self.r).enumerate() {
            self.project(data.row(i), out);
            // Rounding could leave |x'| a hair above 1 when ‖x‖₁ = L.
            out.iter_mut().for_each(|v| *v = v.clamp(-1.0, 1.0));
        }
        Dataset { x, y: data.y.clone(), d: self.r }
    }
    /// w = Pᵀw' (length d).
    pub fn map_back(&self, w_projected: &[f64]) -> Vec<f64> {
        let mut w = vec![0.0; self.d];
        for (row, &wi) in self.p.chunks_exact(self.d).zip(w_projected) {
            w.iter_mut().zip(row).for_each(|(a, p)| *a += p * wi);
        }
        w
    }
}

/// Validates a projection dimension: 1 ≤ r < d (the error names `projection` and the range).
pub fn check_projection(r: usize, d: usize) -> Result<usize> {
    if r == 0 || r >= d {
        return Err(Error::param(
            "projection",
            r,
            format!("an integer in [1, {}] (below the feature dimension d = {d})", d.saturating_sub(1)),
        ));
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use harmony_core::sampling::fast_rng;

    #[test]
    fn projected_rows_stay_in_the_cube_and_predictions_map_back() {
        let mut rng = fast_rng(3);
        let d = 12;
        let x: Vec<f64> = (0..5 * d)
            .map(|i| {
                if i % 3 == 0 {
                    1.0
                } else if i % 3 == 1 {
                    0.0
                } else {
                    -0.5
                }
            })
            .collect();
        let data = Dataset::new(x, vec![0.0; 5], d).unwrap();
        let l1 = (0..5).map(|i| data.row(i).iter().map(|v| v.abs()).sum::<f64>()).fold(0.0, f64::max);
        let p = RandomProjection::new(4, d, l1, &mut rng).unwrap();
        let pd = p.project_dataset(&data);
        assert!(pd.x.iter().all(|v| (-1.0..=1.0).contains(v)));
        let w1 = [0.3, -1.2, 0.7, 2.0];
        let w = p.map_back(&w1);
        for i in 0..5 {
            let a: f64 = pd.row(i).iter().zip(&w1).map(|(a, b)| a * b).sum();
            let b: f64 = data.row(i).iter().zip(&w).map(|(a, b)| a * b).sum();
            assert!((a - b).abs() < 1e-12);
        }
        let e = RandomProjection::new(12, 12, 1.0, &mut rng).unwrap_err().to_string();
        assert!(e.contains("projection is 12") && e.contains("[1, 11]"), "{e}");
        assert!(RandomProjection::new(0, 12, 1.0, &mut rng).is_err());
    }
}
