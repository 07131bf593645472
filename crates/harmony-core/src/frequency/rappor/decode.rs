//! RAPPOR decoding by least squares over a candidate list, and its exact variance.
//!
//! # The regression
//! Rows r = (c, i): cohort c, Bloom bit i (C·m rows). X\[r\]\[x\] = 1 when candidate x's Bloom
//! filter in cohort c has bit i (a bit set by two hashes counts once). From the aggregated
//! counts — N_c reports in cohort c, Y_r of them with bit i set, n in all — the unbiased
//! estimate of the number of cohort-c users whose filter has bit i, rescaled to a fraction of a
//! cohort of the expected size n/C, is
//!
//! ```text
//! y_r = (C/n)·(Y_r − p*·N_c)/(q* − p*)
//! ```
//!
//! (p*, q*: a report's probability of bit 1 when the filter bit is 0 / 1). Given the cohorts,
//! E[y_r] = (C/n)·Σ_x X\[r\]\[x\]·n_{c,x} (n_{c,x}: users of cohort c holding x); cohorts are
//! uniform and independent of the data, so E[n_{c,x}] = n·f_x/C and E[y] = X·f. The ordinary
//! least-squares estimate f̂ = W·Xᵀ·y, W = (XᵀX)⁻¹, is therefore unbiased for every candidate
//! whenever the candidates cover the support and X has full column rank (checked: a Cholesky
//! pivot below 1e-9 of the largest diagonal is an error naming the candidate).
//!
//! # The variance (derivation)
//! f̂_a = (1/n) Σ_u Y_u with one user's estimate Y_u = C·Σ_i A\[a\]\[(c_u, i)\]·(S_{u,i} − p*)/Δ,
//! A = W·Xᵀ, Δ = q* − p*. Given x and the cohort c, the bits are independent with
//! P[S_i = 1] = π_{c,i}(x) = q* if X\[(c, i)\]\[x\] = 1 else p*, and E[Y | x, c] = C·G\[a\]\[x\]\[c\] with
//! G\[a\]\[x\]\[c\] = Σ_{i : X[(c,i)][x] = 1} A\[a\]\[(c, i)\]; Σ_c G\[a\]\[x\]\[c\] = (A·X)\[a\]\[x\] = 1[a = x], so
//! E[Y | x] = 1[a = x]. Over the uniform cohort, by total variance,
//!
//! ```text
//! Var(Y | x) = (C/Δ²)·Σ_r A[a][r]²·π_r(x)(1 − π_r(x))  +  C·Σ_c G[a][x][c]²  −  1[a = x]
//! ```
//!
//! (bit noise + cohort assignment), and n·Var(f̂_a) = Σ_x f_x·Var(Y | x). Standard errors plug in
//! the estimates clamped to [0, 1]. Cost: O(C·m + d·C·h) per candidate, O(d³) once for W.

use super::Rappor;
use crate::error::{Error, Result};
use crate::estimate::FrequencyEstimate;

/// Largest candidate list decoded by regression (W is d × d).
pub const MAX_CANDIDATES: usize = 4096;

/// The least-squares decoder of a candidate list: each candidate's rows and W = (XᵀX)⁻¹.
#[derive(Debug, Clone)]
pub struct Decoder {
    candidates: Vec<u64>,
    /// Rows r = c·m + i of each candidate (sorted, so grouped by cohort; duplicates removed).
    cols: Vec<Vec<u32>>,
    /// W = (XᵀX)⁻¹, row-major d × d.
    w: Vec<f64>,
    /// A = W·Xᵀ, row-major d × (C·m), kept when it has at most 2^22 entries (else rebuilt row
    /// by row from W when needed).
    a: Option<Vec<f64>>,
    rows: usize,
    m: usize,
}

/// Largest A = W·Xᵀ kept in memory (entries; 32 MiB).
const MAX_A: usize = 1 << 22;

impl Decoder {
    /// Builds the design of `candidates` for `o` and inverts its Gram matrix. Errors: an empty
    /// or too long list, or candidates whose Bloom bits do not identify them (singular XᵀX).
    pub fn new(o: &Rappor, candidates: &[u64]) -> Result<Self> {
        let d = candidates.len();
        if !(1..=MAX_CANDIDATES).contains(&d) {
            return Err(Error::param("candidates", d, format!("between 1 and {MAX_CANDIDATES} candidates")));
        }
        let (m, rows) = (o.params.shape.m, o.rows());
        let cols: Vec<Vec<u32>> = candidates
            .iter()
            .map(|&x| {
                let mut rs: Vec<u32> = (0..o.params.shape.cohorts)
                    .flat_map(|c| o.bloom(c, x).into_iter().map(move |i| (c * m + i) as u32))
                    .collect();
                rs.sort_unstable();
                rs.dedup();
                rs
            })
            .collect();
        let mut members: Vec<Vec<u32>> = vec![Vec::new(); rows];
        for (x, rs) in cols.iter().enumerate() {
            rs.iter().for_each(|&r| members[r as usize].push(x as u32));
        }
        let mut gram = vec![0.0; d * d];
        for list in &members {
            for &a in list {
                for &b in list {
                    gram[a as usize * d + b as usize] += 1.0;
                }
            }
        }
        cholesky(&mut gram, d).map_err(|a| {
            Error::param(
                "candidates",
                format!("candidate {a} (item {})", candidates[a]),
                "candidates identified by their Bloom bits (X'X is singular: use more cohorts or bits, or fewer candidates)",
            )
        })?;
        let w = inverse_from_cholesky(&gram, d);
        let mut dec = Decoder { candidates: candidates.to_vec(), cols, w, a: None, rows, m };
        if d * rows <= MAX_A {
            let mut a = vec![0.0; d * rows];
            for (i, row) in a.chunks_exact_mut(rows).enumerate() {
                dec.scatter_a_row(i, row);
            }
            dec.a = Some(a);
        }
        Ok(dec)
    }
    /// The candidates, in decoding order.
    pub fn candidates(&self) -> &[u64] {
        &self.candidates
    }
    /// Row a of A = W·Xᵀ (length C·m), added into `out` (zeros): A[a][r] = Σ_{x has r} W[a][x].
    fn scatter_a_row(&self, a: usize, out: &mut [f64]) {
        let d = self.candidates.len();
        let w = &self.w[a * d..(a + 1) * d];
        for (x, rs) in self.cols.iter().enumerate() {
            rs.iter().for_each(|&r| out[r as usize] += w[x]);
        }
    }
    /// Row a of A: the stored one, or built in `scratch`.
    fn a_row<'s>(&'s self, a: usize, scratch: &'s mut Vec<f64>) -> &'s [f64] {
        match &self.a {
            Some(all) => &all[a * self.rows..(a + 1) * self.rows],
            None => {
                scratch.clear();
                scratch.resize(self.rows, 0.0);
                self.scatter_a_row(a, scratch);
                scratch
            }
        }
    }
    /// C·Σ_c G[a][x][c]² for candidate x, from A's row a.
    fn cohort_term(&self, cohorts: f64, a_row: &[f64], x: usize) -> f64 {
        let (mut total, mut g, mut current) = (0.0, 0.0, usize::MAX);
        for &r in &self.cols[x] {
            let c = r as usize / self.m;
            if c != current {
                total += g * g;
                (g, current) = (0.0, c);
            }
            g += a_row[r as usize];
        }
        cohorts * (total + g * g)
    }
    /// τ = X·f (the fraction of users whose filter has each row's bit) and Σ f.
    fn tau(&self, f: &[f64]) -> (Vec<f64>, f64) {
        let mut tau = vec![0.0; self.rows];
        for (x, rs) in self.cols.iter().enumerate() {
            rs.iter().for_each(|&r| tau[r as usize] += f[x]);
        }
        (tau, f.iter().sum())
    }
    /// Σ_x f_x·Var(Y_a | x) (see the module docs), with `tau`, `mass` from [`Decoder::tau`];
    /// `a_row` is scratch.
    fn variance_of(&self, o: &Rappor, f: &[f64], (tau, mass): (&[f64], f64), a: usize, scratch: &mut Vec<f64>) -> f64 {
        let a_row = self.a_row(a, scratch);
        let (ps, qs) = (o.p_star, o.q_star);
        let (vp, vq) = (ps * (1.0 - ps), qs * (1.0 - qs));
        let cohorts = o.params.shape.cohorts as f64;
        let bits: f64 = a_row.iter().zip(tau).map(|(&v, &t)| v * v * (vp * mass + (vq - vp) * t)).sum();
        let assign: f64 =
            (0..f.len()).filter(|&x| f[x] != 0.0).map(|x| f[x] * self.cohort_term(cohorts, a_row, x)).sum();
        cohorts * bits / ((qs - ps) * (qs - ps)) + assign - f[a]
    }
    /// Var(Y_a | x) for candidates a and x.
    pub(super) fn report_variance(&self, o: &Rappor, x: usize, a: usize) -> f64 {
        let mut scratch = Vec::new();
        let a_row = self.a_row(a, &mut scratch);
        let norm: f64 = a_row.iter().map(|v| v * v).sum();
        self.report_variance_with(o, a_row, norm, x, a)
    }
    /// Var(Y_a | x) from A's row a and its squared norm: O(C·h).
    fn report_variance_with(&self, o: &Rappor, a_row: &[f64], norm: f64, x: usize, a: usize) -> f64 {
        let (ps, qs) = (o.p_star, o.q_star);
        let (vp, vq) = (ps * (1.0 - ps), qs * (1.0 - qs));
        let cohorts = o.params.shape.cohorts as f64;
        let own: f64 = self.cols[x].iter().map(|&r| a_row[r as usize].powi(2)).sum();
        cohorts * (vp * norm + (vq - vp) * own) / ((qs - ps) * (qs - ps)) + self.cohort_term(cohorts, a_row, x)
            - (a == x) as u8 as f64
    }
    /// max over candidate pairs (x, a) of Var(Y_a | x): O(d·(C·m + d·C·h)).
    pub(super) fn worst_case_variance(&self, o: &Rappor) -> f64 {
        let d = self.candidates.len();
        let mut scratch = Vec::new();
        let mut worst = 0.0f64;
        for a in 0..d {
            let a_row = self.a_row(a, &mut scratch);
            let norm: f64 = a_row.iter().map(|v| v * v).sum();
            for x in 0..d {
                worst = worst.max(self.report_variance_with(o, a_row, norm, x, a));
            }
        }
        worst
    }
    /// n·Var(f̂_a) = Σ_x f_x·Var(Y_a | x) for a population with fractions `f` over the candidates.
    pub(super) fn aggregate_variance(&self, o: &Rappor, f: &[f64], a: usize) -> f64 {
        let (tau, mass) = self.tau(f);
        self.variance_of(o, f, (&tau, mass), a, &mut Vec::new())
    }
    /// One user's estimate of candidate a from a (cohort, bits) report.
    pub(super) fn report_estimate(&self, o: &Rappor, cohort: u32, bits: &[u64], a: usize) -> f64 {
        let mut scratch = Vec::new();
        let a_row = self.a_row(a, &mut scratch);
        let base = cohort as usize * self.m;
        let (ps, qs) = (o.p_star, o.q_star);
        let s: f64 = (0..self.m).map(|i| a_row[base + i] * (super::super::rows::bit(bits, i) as u8 as f64 - ps)).sum();
        o.params.shape.cohorts as f64 * s / (qs - ps)
    }
    /// The estimate from the aggregated counts: `counts` row-major (C × m), `per_cohort` N_c.
    pub(super) fn estimate(&self, o: &Rappor, counts: &[u64], per_cohort: &[u64]) -> FrequencyEstimate {
        let d = self.candidates.len();
        let n: u64 = per_cohort.iter().sum();
        if n == 0 {
            return FrequencyEstimate::empty(d);
        }
        let (nf, cohorts) = (n as f64, o.params.shape.cohorts as f64);
        let delta = o.q_star - o.p_star;
        let y: Vec<f64> = counts
            .iter()
            .enumerate()
            .map(|(r, &c)| cohorts / nf * (c as f64 - o.p_star * per_cohort[r / self.m] as f64) / delta)
            .collect();
        let b: Vec<f64> = self.cols.iter().map(|rs| rs.iter().map(|&r| y[r as usize]).sum()).collect();
        let frequencies: Vec<f64> =
            (0..d).map(|a| self.w[a * d..(a + 1) * d].iter().zip(&b).map(|(w, b)| w * b).sum()).collect();
        let plug: Vec<f64> = frequencies.iter().map(|f| f.clamp(0.0, 1.0)).collect();
        let (tau, mass) = self.tau(&plug);
        let mut a_row = Vec::new();
        let std_errors =
            (0..d).map(|a| (self.variance_of(o, &plug, (&tau, mass), a, &mut a_row).max(0.0) / nf).sqrt()).collect();
        FrequencyEstimate { n, frequencies, std_errors }
    }
}

/// In-place Cholesky factorisation of a symmetric positive definite d × d matrix (row-major):
/// the lower triangle becomes L with A = L·Lᵀ. Err(i) if pivot i is below 1e-9 of the largest
/// diagonal entry (singular or nearly so).
fn cholesky(a: &mut [f64], d: usize) -> std::result::Result<(), usize> {
    let scale = (0..d).map(|i| a[i * d + i]).fold(0.0, f64::max).max(f64::MIN_POSITIVE);
    for j in 0..d {
        let tail = &mut a[j * d..];
        let row_j = &mut tail[..d];
        let mut diag = row_j[j] - row_j[..j].iter().map(|v| v * v).sum::<f64>();
        if diag <= 1e-9 * scale {
            return Err(j);
        }
        diag = diag.sqrt();
        row_j[j] = diag;
        let lj = row_j[..j].to_vec();
        // Column j below the diagonal: L[i][j] = (A[i][j] − Σ_k L[i][k]·L[j][k])/L[j][j].
        for i in j + 1..d {
            let row_i = &mut tail[(i - j) * d..(i - j + 1) * d];
            let dot: f64 = row_i[..j].iter().zip(&lj).map(|(x, y)| x * y).sum();
            row_i[j] = (row_i[j] - dot) / diag;
        }
    }
    Ok(())
}

/// W = (L·Lᵀ)⁻¹ = L⁻ᵀ·L⁻¹ from the factor in the lower triangle of `l`.
fn inverse_from_cholesky(l: &[f64], d: usize) -> Vec<f64> {
    // Li = L⁻¹ (lower triangular), by forward substitution, column by column.
    let mut li = vec![0.0; d * d];
    for col in 0..d {
        li[col * d + col] = 1.0 / l[col * d + col];
        for i in col + 1..d {
            let s: f64 = (col..i).map(|k| l[i * d + k] * li[k * d + col]).sum();
            li[i * d + col] = -s / l[i * d + i];
        }
    }
    // W[a][b] = Σ_{k ≥ max(a, b)} Li[k][a]·Li[k][b].
    let mut w = vec![0.0; d * d];
    for k in 0..d {
        let row = &li[k * d..k * d + k + 1];
        for a in 0..=k {
            let la = row[a];
            if la == 0.0 {
                continue;
            }
            for b in 0..=a {
                w[a * d + b] += la * row[b];
            }
        }
    }
    for a in 0..d {
        for b in 0..a {
            w[b * d + a] = w[a * d + b];
        }
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cholesky_inverse_of_a_known_matrix() {
        // A = [[4, 2, 0], [2, 5, 1], [0, 1, 3]]: A·W = I.
        let a = [4.0, 2.0, 0.0, 2.0, 5.0, 1.0, 0.0, 1.0, 3.0];
        let mut l = a;
        cholesky(&mut l, 3).unwrap();
        let w = inverse_from_cholesky(&l, 3);
        for i in 0..3 {
            for j in 0..3 {
                let v: f64 = (0..3).map(|k| a[i * 3 + k] * w[k * 3 + j]).sum();
                assert!((v - (i == j) as u8 as f64).abs() < 1e-12, "({i}, {j}): {v}");
            }
        }
        let mut singular = [1.0, 1.0, 1.0, 1.0];
        assert_eq!(cholesky(&mut singular, 2), Err(1));
    }
}
