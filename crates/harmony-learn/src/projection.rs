//! Random projection to r dimensions (Harmony's MGD-DR).
//!
//! P ∈ {±v}^{r×d} with independent fair signs, drawn by the server and sent to every user (public
//! randomness); the model w' learnt on x' = Px is mapped back to w = Pᵀw', so ⟨w, x⟩ = ⟨w', Px⟩
//! and the model predicts from the original features. Two scalings ([`Scaling`]):
//!
//! * [`Scaling::Cube`] (Harmony): v = 1/L with L = the largest ‖x‖₁ of a feature vector
//!   ([`crate::features::FeatureMap::max_l1`]), so x' ∈ [-1, 1]^r for every user. Harmony uses
//!   L = d, this bound for its ±1 encoding. The price: ‖x'‖² ≈ r‖x‖²/L², the features shrink and
//!   the projected loss is ~L²/r times flatter than the original one.
//! * [`Scaling::Norm`] (Johnson–Lindenstrauss): v = 1/√r, so E_P‖Px‖² = ‖x‖² and the projected
//!   problem keeps the curvature scale of the original; a coordinate of x' may exceed 1, which is
//!   harmless because every gradient coordinate is clipped to [-1, 1] before randomization anyway.
//!
//! With `keep` = 1 the first column (the intercept, a public constant) is passed through
//! unprojected: x' = (x₀, P x₁..) of dimension 1 + r, so the intercept keeps its own weight
//! instead of being smeared over the r random directions.

use crate::features::Dataset;
use harmony_core::error::{Error, Result};
use rand::Rng;

/// The size of P's entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Scaling {
    /// ±1/L, L = max ‖x‖₁: x' stays in [-1, 1]^r (Harmony).
    Cube,
    /// ±1/√r: E‖Px‖² = ‖x‖² (Johnson–Lindenstrauss).
    #[default]
    Norm,
}

impl Scaling {
    /// Names used by the CLI.
    pub const NAMES: &'static [&'static str] = &["norm", "cube"];
    /// Parses a name.
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "norm" => Ok(Scaling::Norm),
            "cube" => Ok(Scaling::Cube),
            _ => Err(Error::param("projection-scaling", name, "one of norm, cube")),
        }
    }
    /// The entry size v for r target dimensions and max ‖x‖₁ = `max_l1`.
    pub fn entry(self, r: usize, max_l1: f64) -> f64 {
        match self {
            Scaling::Cube => 1.0 / max_l1,
            Scaling::Norm => 1.0 / (r as f64).sqrt(),
        }
    }
}

/// A random ±v projection from d to `keep` + r dimensions (the first `keep` columns pass through).
#[derive(Debug, Clone, PartialEq)]
pub struct RandomProjection {
    r: usize,
    d: usize,
    keep: usize,
    /// r × (d − keep), row-major.
    p: Vec<f64>,
}

impl RandomProjection {
    /// Draws P (r × (d − keep), entries ±`entry`). Errors unless 1 ≤ r < d − keep, keep ≤ 1 and
    /// 0 < `entry` ≤ 1.
    pub fn new<R: Rng + ?Sized>(r: usize, d: usize, entry: f64, keep: usize, rng: &mut R) -> Result<Self> {
        if keep >= d {
            return Err(Error::param("keep", keep, format!("below d = {d}")));
        }
        check_projection(r, d - keep)?;
        if !(entry > 0.0 && entry <= 1.0) {
            return Err(Error::param("projection entry", entry, "a number in (0, 1]"));
        }
        let cols = d - keep;
        let mut p = Vec::with_capacity(r * cols);
        while p.len() < r * cols {
            let mut bits = rng.next_u64();
            for _ in 0..64.min(r * cols - p.len()) {
                p.push(if bits & 1 == 1 { entry } else { -entry });
                bits >>= 1;
            }
        }
        Ok(RandomProjection { r, d, keep, p })
    }
    /// The projected dimension `keep` + r.
    pub fn dimension(&self) -> usize {
        self.keep + self.r
    }
    /// x' = (x[..keep], P x[keep..]) into `out` (length keep + r); zero features are skipped
    /// (one-hot rows are sparse).
    pub fn project(&self, x: &[f64], out: &mut [f64]) {
        let (head, tail) = out.split_at_mut(self.keep);
        head.copy_from_slice(&x[..self.keep]);
        tail.fill(0.0);
        let cols = self.d - self.keep;
        for (j, &xj) in x[self.keep..].iter().enumerate() {
            if xj != 0.0 {
                for (o, row) in tail.iter_mut().zip(self.p.chunks_exact(cols)) {
                    *o += row[j] * xj;
                }
            }
        }
    }
    /// Projects every row of `data`. With [`Scaling::Norm`] a projected feature may lie outside
    /// [-1, 1] (the trainer clips gradient coordinates, never features).
    pub fn project_dataset(&self, data: &Dataset) -> Dataset {
        let n = data.len();
        let k = self.dimension();
        let mut x = vec![0.0; n * k];
        for (i, out) in x.chunks_exact_mut(k).enumerate() {
            self.project(data.row(i), out);
        }
        Dataset { x, y: data.y.clone(), d: k }
    }
    /// w = (w'[..keep], Pᵀw'[keep..]) (length d).
    pub fn map_back(&self, w_projected: &[f64]) -> Vec<f64> {
        let mut w = vec![0.0; self.d];
        w[..self.keep].copy_from_slice(&w_projected[..self.keep]);
        let cols = self.d - self.keep;
        for (row, &wi) in self.p.chunks_exact(cols).zip(&w_projected[self.keep..]) {
            w[self.keep..].iter_mut().zip(row).for_each(|(a, p)| *a += p * wi);
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
            format!("an integer in [1, {}] (fewer than the {d} projected feature columns)", d.saturating_sub(1)),
        ));
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use harmony_core::sampling::fast_rng;

    #[test]
    fn projected_rows_map_back_and_the_cube_scaling_stays_in_the_cube() {
        let mut rng = fast_rng(3);
        let d = 12;
        let x: Vec<f64> = (0..5 * d)
            .map(|i| match i % 3 {
                0 => 1.0,
                1 => 0.0,
                _ => -0.5,
            })
            .collect();
        let data = Dataset::new(x, vec![0.0; 5], d).unwrap();
        let l1 = (0..5).map(|i| data.row(i).iter().map(|v| v.abs()).sum::<f64>()).fold(0.0, f64::max);
        for (scaling, keep) in [(Scaling::Cube, 0), (Scaling::Norm, 1), (Scaling::Norm, 0)] {
            let p = RandomProjection::new(4, d, scaling.entry(4, l1), keep, &mut rng).unwrap();
            assert_eq!(p.dimension(), 4 + keep);
            let pd = p.project_dataset(&data);
            if scaling == Scaling::Cube {
                assert!(pd.x.iter().all(|v| (-1.0..=1.0).contains(v)));
            }
            if keep == 1 {
                assert!((0..5).all(|i| pd.row(i)[0] == data.row(i)[0]), "intercept passed through");
            }
            let w1: Vec<f64> = [0.3, -1.2, 0.7, 2.0, -0.4][..4 + keep].to_vec();
            let w = p.map_back(&w1);
            for i in 0..5 {
                let a: f64 = pd.row(i).iter().zip(&w1).map(|(a, b)| a * b).sum();
                let b: f64 = data.row(i).iter().zip(&w).map(|(a, b)| a * b).sum();
                assert!((a - b).abs() < 1e-12);
            }
        }
        // ±1/√r preserves squared norms on average over P.
        let x = [0.0, 1.0, 0.0, -1.0, 1.0, 0.5, 0.0, 0.0, 1.0, 0.0, 0.0, 1.0];
        let norm2: f64 = x.iter().map(|v| v * v).sum();
        let (mut mean, draws) = (0.0, 2000);
        for _ in 0..draws {
            let p = RandomProjection::new(8, d, Scaling::Norm.entry(8, l1), 0, &mut rng).unwrap();
            let mut out = vec![0.0; 8];
            p.project(&x, &mut out);
            mean += out.iter().map(|v| v * v).sum::<f64>() / draws as f64;
        }
        assert!((mean - norm2).abs() < 0.05 * norm2, "{mean} vs {norm2}");
        let e = RandomProjection::new(12, 12, 0.1, 0, &mut rng).unwrap_err().to_string();
        assert!(e.contains("projection is 12") && e.contains("[1, 11]"), "{e}");
        assert!(RandomProjection::new(0, 12, 0.1, 0, &mut rng).is_err());
        assert!(RandomProjection::new(11, 12, 0.1, 1, &mut rng).is_err());
        assert!(Scaling::parse("jl").unwrap_err().to_string().contains("norm, cube"));
    }
}
