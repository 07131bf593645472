//! Post-processing by one joint distribution: the non-negative distribution over all the
//! attributes of the materialized marginals that fits them best in the weighted
//! (generalized) least-squares sense, found by accelerated projected gradient (FISTA) with an
//! exact projection onto the probability simplex.
//!
//! # The objective
//! Marginal j (attribute set S_j, |D_j| cells) is estimated as y_j with per-cell noise variance
//! σ_j². With A_j the marginalization of a joint table p (N cells) onto S_j, the fit is
//!
//! `p̂ = argmin_{p ≥ 0, Σp = 1} ½ Σ_j w_j ‖A_j p − y_j‖²`,  w_j = 1/σ_j².
//!
//! Every marginal of p̂ is non-negative, sums to 1 and agrees with every other on shared
//! attributes — exactly, since all come from one table.
//!
//! # Why it is cheap
//! Take on each attribute an orthonormal basis whose first vector is constant (Helmert
//! contrasts; for two categories the normalized Hadamard matrix) and on the table their tensor
//! product. A basis vector is indexed by one digit per attribute; its *support* T is the set of
//! attributes whose digit is not 0 (the ANOVA decomposition). `A_jᵀA_j` is g_j = N/|D_j| times
//! the orthogonal projection onto the functions of S_j's attributes, so in this basis the
//! Hessian `W = Σ_j w_j A_jᵀA_j` is diagonal: coefficient α gets `c_T = Σ_{j : T ⊆ S_j} w_j g_j`.
//! A gradient is therefore two transforms (O(N Σ_a c_a)) whatever the number of marginals.
//!
//! Without the constraint the minimizer is, on every support T covered by some S_j, the
//! `w_j g_j`-weighted average of the marginals' T-components — the generalized least-squares
//! (GLS) consistent estimate, identical to the output of [`super::consistency`]'s weighted
//! consistency pass; components no marginal covers are not identified (the fit leaves them
//! where the iteration puts them; no answer to a covered query depends on them). With the
//! constraint, p̂ is the projection of that GLS estimate onto the simplex in the seminorm
//! `‖x‖²_W = xᵀWx`, so for the true table p (which is in the simplex)
//! `‖p̂ − p‖_W ≤ ‖p̂_GLS − p‖_W` for every draw: post-processing never increases the weighted total
//! error over the materialized marginals (it does not bound each query separately).

use harmony_core::postprocess::project_simplex;

/// Orthonormal c × c matrix (row-major): row 0 is constant 1/√c, row k ≥ 1 the k-th Helmert
/// contrast (1, …, 1, −k, 0, …)/√(k(k+1)).
fn helmert(c: usize) -> Vec<f64> {
    let mut h = vec![0.0; c * c];
    let r0 = 1.0 / (c as f64).sqrt();
    h[..c].iter_mut().for_each(|x| *x = r0);
    for k in 1..c {
        let s = 1.0 / ((k * (k + 1)) as f64).sqrt();
        h[k * c..k * c + k].iter_mut().for_each(|x| *x = s);
        h[k * c + k] = -(k as f64) * s;
    }
    h
}

/// The orthonormal product basis of a row-major table (last attribute fastest).
#[derive(Debug, Clone)]
pub struct ProductBasis {
    cards: Vec<usize>,
    mats: Vec<Vec<f64>>,
    len: usize,
}

impl ProductBasis {
    /// The basis of a table with these cardinalities (each ≥ 1).
    pub fn new(cards: &[usize]) -> Self {
        ProductBasis {
            cards: cards.to_vec(),
            mats: cards.iter().map(|&c| helmert(c)).collect(),
            len: cards.iter().product(),
        }
    }

    /// Number of cells.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for a table of no cell (never: every cardinality is ≥ 1).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// In place: cells → coefficients (`inverse == false`) or back (`inverse == true`).
    pub fn transform(&self, x: &mut [f64], inverse: bool, buf: &mut Vec<f64>) {
        debug_assert_eq!(x.len(), self.len);
        // The trailing attributes whose blocks fit in a cache-sized chunk are done chunk by
        // chunk (all of them while the chunk is in cache), the others in full passes.
        const CHUNK: usize = 1 << 12;
        let d = self.cards.len();
        let mut split = d;
        let mut size = 1;
        while split > 0 && size * self.cards[split - 1] <= CHUNK {
            split -= 1;
            size *= self.cards[split];
        }
        let mut inners = vec![1usize; d];
        for a in (0..d.saturating_sub(1)).rev() {
            inners[a] = inners[a + 1] * self.cards[a + 1];
        }
        for chunk in x.chunks_exact_mut(size) {
            for (a, &inner) in inners.iter().enumerate().skip(split) {
                self.apply_axis(chunk, a, inner, inverse, buf);
            }
        }
        for (a, &inner) in inners.iter().enumerate().take(split) {
            self.apply_axis(x, a, inner, inverse, buf);
        }
    }

    /// Applies attribute a's matrix (stride `inner`) to every fiber of `x` (a whole number of
    /// blocks of c_a · inner cells).
    fn apply_axis(&self, x: &mut [f64], a: usize, inner: usize, inverse: bool, buf: &mut Vec<f64>) {
        let c = self.cards[a];
        if c == 1 {
            return;
        }
        let block = c * inner;
        if c == 2 {
            let s = std::f64::consts::FRAC_1_SQRT_2;
            for chunk in x.chunks_exact_mut(block) {
                let (lo, hi) = chunk.split_at_mut(inner);
                for (u, v) in lo.iter_mut().zip(hi.iter_mut()) {
                    let (p, q) = (*u, *v);
                    *u = (p + q) * s;
                    *v = (p - q) * s;
                }
            }
            return;
        }
        let m = &self.mats[a];
        buf.resize(block, 0.0);
        for chunk in x.chunks_exact_mut(block) {
            buf.iter_mut().for_each(|v| *v = 0.0);
            for k in 0..c {
                for t in 0..c {
                    // Forward: out_k = Σ_t M[k][t] in_t; inverse: out_t = Σ_k M[k][t] in_k.
                    let (coef, from, to) = if inverse { (m[k * c + t], k, t) } else { (m[k * c + t], t, k) };
                    if coef == 0.0 {
                        continue;
                    }
                    let src = &chunk[from * inner..(from + 1) * inner];
                    let dst = &mut buf[to * inner..(to + 1) * inner];
                    dst.iter_mut().zip(src).for_each(|(d, s)| *d += coef * s);
                }
            }
            chunk.copy_from_slice(buf);
        }
    }

    /// For each coefficient (in table order) its support as a bit mask over the table's
    /// attributes (bit a set when the digit of attribute a is not 0). At most 64 attributes.
    pub fn supports(&self) -> Vec<u64> {
        let d = self.cards.len();
        assert!(d <= 64, "at most 64 attributes");
        let mut out = Vec::with_capacity(self.len);
        let mut digits = vec![0usize; d];
        let mut mask = 0u64;
        for _ in 0..self.len {
            out.push(mask);
            for i in (0..d).rev() {
                digits[i] += 1;
                if digits[i] < self.cards[i] {
                    mask |= 1 << (d - 1 - i);
                    break;
                }
                digits[i] = 0;
                mask &= !(1 << (d - 1 - i));
            }
        }
        out
    }
}

/// The support mask (bit a ↔ position a of the table, first attribute = highest bit) used by
/// [`ProductBasis::supports`] for a subset given by positions.
fn position_mask(positions: &[usize], d: usize) -> u64 {
    positions.iter().fold(0u64, |m, &p| m | (1 << (d - 1 - p)))
}

/// Squared norm of each ANOVA component of a table: the sum of squared coefficients per
/// support (indexed by the mask of [`ProductBasis::supports`], a `Vec` of 2^d entries).
pub fn component_energies(cells: &[f64], cards: &[usize]) -> Vec<f64> {
    let basis = ProductBasis::new(cards);
    let mut x = cells.to_vec();
    let mut buf = Vec::new();
    basis.transform(&mut x, false, &mut buf);
    let mut e = vec![0.0; 1 << cards.len()];
    for (v, m) in x.iter().zip(basis.supports()) {
        e[m as usize] += v * v;
    }
    e
}

/// Options of [`fit`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct JointOptions {
    /// Largest joint table fitted, as cells × Σ cardinalities (the cost of one transform).
    pub max_work: usize,
    /// Most iterations.
    pub max_iter: usize,
    /// Stop once the objective is provably within `tol` per estimated cell of its minimum (the
    /// Frank–Wolfe gap; the objective is in units of the noise variance, so the noise alone
    /// contributes about ½ per estimated cell).
    pub tol: f64,
}

impl Default for JointOptions {
    fn default() -> Self {
        JointOptions { max_work: 1 << 26, max_iter: 1000, tol: 1e-2 }
    }
}

/// The fitted joint distribution.
#[derive(Debug, Clone, PartialEq)]
pub struct JointFit {
    /// The attributes of the table (sorted global indices).
    pub attrs: Vec<usize>,
    /// The cells (row-major over `attrs`, last fastest): ≥ 0, summing to 1.
    pub cells: Vec<f64>,
    /// Iterations run.
    pub iterations: usize,
    /// The Frank–Wolfe gap at the end, per estimated cell: the objective is at most this
    /// above its minimum.
    pub gap_per_cell: f64,
}

/// Exact Euclidean projection onto the probability simplex, in place: w = max(v − θ, 0) with
/// Σw = 1. θ is found by Newton steps on the convex, decreasing, piecewise-linear
/// φ(θ) = Σ max(v − θ, 0) − 1 from the hint (one step from the right of the root lands on its
/// left; from the left the steps increase monotonically to the root: Michelot's algorithm), a
/// few O(N) passes. The hint is updated to the θ found.
fn project_simplex_in_place(v: &mut [f64], hint: &mut f64) {
    let lower = |v: &[f64]| (v.iter().sum::<f64>() - 1.0) / v.len() as f64;
    let mut theta = if hint.is_finite() { *hint } else { lower(v) };
    for _ in 0..200 {
        let (mut s, mut k) = (0.0, 0usize);
        for &x in v.iter() {
            if x > theta {
                s += x;
                k += 1;
            }
        }
        if k == 0 {
            theta = lower(v);
            continue;
        }
        let next = (s - 1.0) / k as f64;
        // φ(θ) ≥ 0 and Newton does not move right: θ is the root (up to rounding).
        if s - k as f64 * theta - 1.0 >= 0.0 && next <= theta {
            v.iter_mut().for_each(|x| *x = (*x - theta).max(0.0));
            *hint = theta;
            return;
        }
        theta = next;
    }
    let w = project_simplex(v);
    v.copy_from_slice(&w);
    *hint = f64::NAN;
}

/// Sums per support mask (W's diagonal): dense over all 2^d masks for at most 26 attributes,
/// sparse beyond.
enum MaskSums {
    Dense(Vec<f64>),
    Sparse(std::collections::HashMap<u64, f64>),
}

impl MaskSums {
    fn new(d: usize) -> Self {
        if d <= 26 { MaskSums::Dense(vec![0.0; 1 << d]) } else { MaskSums::Sparse(Default::default()) }
    }
    fn add(&mut self, mask: u64, v: f64) {
        match self {
            MaskSums::Dense(c) => c[mask as usize] += v,
            MaskSums::Sparse(c) => *c.entry(mask).or_insert(0.0) += v,
        }
    }
    fn get(&self, mask: u64) -> f64 {
        match self {
            MaskSums::Dense(c) => c[mask as usize],
            MaskSums::Sparse(c) => c.get(&mask).copied().unwrap_or(0.0),
        }
    }
}

/// Adds `scale` × a marginal's coefficients `yh` (over `set_cards`, row-major) into `b`, the
/// table's coefficients, at digit 0 on every attribute outside the marginal (`positions`: the
/// marginal's attributes' places in the table, `strides` the table's).
fn embed(yh: &[f64], set_cards: &[usize], positions: &[usize], strides: &[usize], scale: f64, b: &mut [f64]) {
    let mut digits = vec![0usize; set_cards.len()];
    for &v in yh {
        let idx: usize = digits.iter().zip(positions).map(|(&dg, &p)| dg * strides[p]).sum();
        b[idx] += scale * v;
        for i in (0..set_cards.len()).rev() {
            digits[i] += 1;
            if digits[i] < set_cards[i] {
                break;
            }
            digits[i] = 0;
        }
    }
}

/// The weighted least-squares problem in the product basis.
struct Problem {
    attrs: Vec<usize>,
    basis: ProductBasis,
    /// W's diagonal ÷ L (0 for the constant coefficient and unidentified ones).
    diag: Vec<f64>,
    /// b̂ ÷ L.
    b: Vec<f64>,
    /// L: the largest diagonal entry (the gradient's Lipschitz constant on the simplex).
    lip: f64,
    /// Number of estimated cells (Σ_j |D_j|).
    total_cells: usize,
}

impl Problem {
    fn new(
        sets: &[Vec<usize>],
        cards_all: &[usize],
        ys: &[Vec<f64>],
        cell_var: &[f64],
        max_work: usize,
    ) -> Option<Self> {
        let mut attrs: Vec<usize> = sets.iter().flatten().copied().collect();
        attrs.sort_unstable();
        attrs.dedup();
        let d = attrs.len();
        if d == 0 || d > 64 {
            return None;
        }
        let cards: Vec<usize> = attrs.iter().map(|&a| cards_all[a]).collect();
        let mut n_cells: usize = 1;
        for &c in &cards {
            n_cells = n_cells.checked_mul(c)?;
        }
        if n_cells.checked_mul(cards.iter().sum::<usize>())? > max_work {
            return None;
        }
        let basis = ProductBasis::new(&cards);
        let pos = |a: usize| attrs.binary_search(&a).expect("attribute of a set");
        // W's diagonal per support (masks over the table's positions) and b̂ = H Σ_j w_j A_jᵀ y_j.
        let mut sums = MaskSums::new(d);
        let mut b = vec![0.0f64; n_cells];
        let mut buf = Vec::new();
        let mut strides = vec![0usize; d];
        let mut stride = 1;
        for i in (0..d).rev() {
            strides[i] = stride;
            stride *= cards[i];
        }
        for (j, set) in sets.iter().enumerate() {
            let w = 1.0 / cell_var[j].max(f64::MIN_POSITIVE);
            let set_cards: Vec<usize> = set.iter().map(|&a| cards_all[a]).collect();
            let g = (n_cells / set_cards.iter().product::<usize>()) as f64;
            let positions: Vec<usize> = set.iter().map(|&a| pos(a)).collect();
            for sub in 0u64..(1u64 << positions.len()) {
                let ps: Vec<usize> =
                    (0..positions.len()).filter(|&i| sub >> i & 1 == 1).map(|i| positions[i]).collect();
                sums.add(position_mask(&ps, d), w * g);
            }
            // y_j's coefficients, embedded with digit 0 on the other attributes, times w_j √g_j.
            let mut yh = ys[j].clone();
            ProductBasis::new(&set_cards).transform(&mut yh, false, &mut buf);
            embed(&yh, &set_cards, &positions, &strides, w * g.sqrt(), &mut b);
        }
        let mut diag: Vec<f64> = basis.supports().iter().map(|&m| sums.get(m)).collect();
        // The constant coefficient is fixed by Σp = 1 (and the projection ignores a constant
        // shift of the gradient): leave it out.
        diag[0] = 0.0;
        b[0] = 0.0;
        let lip = diag.iter().copied().fold(0.0, f64::max);
        if lip <= 0.0 {
            return None;
        }
        diag.iter_mut().for_each(|c| *c /= lip);
        b.iter_mut().for_each(|v| *v /= lip);
        let total_cells = ys.iter().map(Vec::len).sum();
        Some(Problem { attrs, basis, diag, b, lip, total_cells })
    }
}

/// The unconstrained weighted least-squares (GLS) joint table: on every identified coefficient
/// the weighted average b̂_α / c_α, the constant coefficient of a table summing to 1, the
/// unidentified ones 0 (the minimum-norm solution). Its marginals over the sets equal the
/// output of the weighted consistency pass ([`super::consistency::gls_consistent`]); cells may
/// be negative. `None` as for [`fit`].
pub fn gls_joint(
    sets: &[Vec<usize>],
    cards_all: &[usize],
    ys: &[Vec<f64>],
    cell_var: &[f64],
    max_work: usize,
) -> Option<(Vec<usize>, Vec<f64>)> {
    let pr = Problem::new(sets, cards_all, ys, cell_var, max_work)?;
    let n = pr.basis.len();
    let mut x: Vec<f64> = pr.diag.iter().zip(&pr.b).map(|(&c, &bv)| if c > 0.0 { bv / c } else { 0.0 }).collect();
    x[0] = 1.0 / (n as f64).sqrt();
    pr.basis.transform(&mut x, true, &mut Vec::new());
    Some((pr.attrs, x))
}

/// Fits one non-negative joint distribution to the marginals `ys` over `sets` (global
/// attribute indices, sorted) with per-cell noise variances `cell_var` (the weights are
/// 1/cell_var). Returns `None` when the joint table is larger than `opts.max_work` allows or
/// has more than 64 attributes.
pub fn fit(
    sets: &[Vec<usize>],
    cards_all: &[usize],
    ys: &[Vec<f64>],
    cell_var: &[f64],
    opts: JointOptions,
) -> Option<JointFit> {
    let Problem { attrs, basis, diag, b, lip, total_cells } =
        Problem::new(sets, cards_all, ys, cell_var, opts.max_work)?;
    let n_cells = basis.len();
    let mut buf = Vec::new();
    // In the scaled objective (÷ L), the gap per estimated cell.
    let per_cell = lip / total_cells as f64;

    let gradient = |at: &[f64], out: &mut Vec<f64>, buf: &mut Vec<f64>| {
        out.clear();
        out.extend_from_slice(at);
        basis.transform(out, false, buf);
        out.iter_mut().zip(diag.iter().zip(&b)).for_each(|(g, (c, bv))| *g = c * *g - bv);
        basis.transform(out, true, buf);
    };
    // FISTA from the uniform table, step 1/L, with O'Donoghue–Candès gradient restarts.
    let mut x = vec![1.0 / n_cells as f64; n_cells];
    let mut y = x.clone();
    let mut x_new = vec![0.0; n_cells];
    let mut grad = Vec::with_capacity(n_cells);
    let mut t = 1.0f64;
    let mut theta = f64::NAN;
    let mut iterations = 0;
    let mut gap = f64::INFINITY;
    for it in 0..opts.max_iter {
        iterations = it + 1;
        gradient(&y, &mut grad, &mut buf);
        x_new.iter_mut().zip(y.iter().zip(&grad)).for_each(|(xn, (yv, g))| *xn = yv - g);
        project_simplex_in_place(&mut x_new, &mut theta);
        let uphill: f64 = y.iter().zip(&x_new).zip(&x).map(|((yv, xn), xo)| (yv - xn) * (xn - xo)).sum();
        let (t_new, beta) = if uphill > 0.0 {
            (1.0, 0.0)
        } else {
            let t_new = 0.5 * (1.0 + (1.0 + 4.0 * t * t).sqrt());
            (t_new, (t - 1.0) / t_new)
        };
        for ((yv, xn), xo) in y.iter_mut().zip(&x_new).zip(&x) {
            *yv = xn + beta * (xn - xo);
        }
        std::mem::swap(&mut x, &mut x_new);
        t = t_new;
        if it % 10 == 9 || it + 1 == opts.max_iter {
            // Frank–Wolfe gap at x: ∇f(x)·x − min_i ∇f(x)_i ≥ f(x) − min f.
            gradient(&x, &mut grad, &mut buf);
            let dot: f64 = grad.iter().zip(&x).map(|(g, v)| g * v).sum();
            let min = grad.iter().copied().fold(f64::INFINITY, f64::min);
            gap = (dot - min) * per_cell;
            if gap <= opts.tol {
                break;
            }
        }
    }
    let sum: f64 = x.iter().sum();
    x.iter_mut().for_each(|v| *v /= sum);
    Some(JointFit { attrs, cells: x, iterations, gap_per_cell: gap })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helmert_is_orthonormal_with_a_constant_first_row() {
        for c in 1..7 {
            let h = helmert(c);
            for i in 0..c {
                for j in 0..c {
                    let dot: f64 = (0..c).map(|t| h[i * c + t] * h[j * c + t]).sum();
                    assert!((dot - if i == j { 1.0 } else { 0.0 }).abs() < 1e-12, "c={c} {i},{j}: {dot}");
                }
            }
            assert!(h[..c].iter().all(|&x| (x - 1.0 / (c as f64).sqrt()).abs() < 1e-15));
        }
    }

    #[test]
    fn transform_round_trips_and_diagonalizes_marginalization() {
        let cards = [2usize, 3, 4];
        let basis = ProductBasis::new(&cards);
        let x: Vec<f64> = (0..24).map(|i| ((i * 7) % 11) as f64 / 10.0).collect();
        let mut y = x.clone();
        let mut buf = Vec::new();
        basis.transform(&mut y, false, &mut buf);
        // Parseval.
        let n1: f64 = x.iter().map(|v| v * v).sum();
        let n2: f64 = y.iter().map(|v| v * v).sum();
        assert!((n1 - n2).abs() < 1e-12);
        let mut z = y.clone();
        basis.transform(&mut z, true, &mut buf);
        for (a, b) in x.iter().zip(&z) {
            assert!((a - b).abs() < 1e-12);
        }
        // The marginal on attributes {0, 2} only depends on coefficients supported in {0, 2}:
        // zeroing the others leaves it unchanged.
        let sup = basis.supports();
        let keep = position_mask(&[0, 2], 3);
        let mut w = y.clone();
        for (v, &m) in w.iter_mut().zip(&sup) {
            if m & !keep != 0 {
                *v = 0.0;
            }
        }
        basis.transform(&mut w, true, &mut buf);
        let a = super::super::project(&x, &[0, 1, 2], &cards, &[0, 2]);
        let b = super::super::project(&w, &[0, 1, 2], &cards, &[0, 2]);
        for (p, q) in a.iter().zip(&b) {
            assert!((p - q).abs() < 1e-12);
        }
    }

    #[test]
    fn transform_matches_the_definition_on_a_table_larger_than_a_chunk() {
        // 2·3·4·2·5·3·2·2·3 = 8640 cells: the leading attributes take full passes.
        let cards = [2usize, 3, 4, 2, 5, 3, 2, 2, 3];
        let basis = ProductBasis::new(&cards);
        let n = basis.len();
        let x: Vec<f64> = (0..n).map(|i| ((i * 7919) % 1013) as f64 / 1013.0 - 0.3).collect();
        let mut y = x.clone();
        let mut buf = Vec::new();
        basis.transform(&mut y, false, &mut buf);
        let digits_of = |mut i: usize| {
            let mut d = vec![0usize; cards.len()];
            for a in (0..cards.len()).rev() {
                d[a] = i % cards[a];
                i /= cards[a];
            }
            d
        };
        for alpha in (0..n).step_by(577) {
            let da = digits_of(alpha);
            let want: f64 = (0..n)
                .map(|i| {
                    let di = digits_of(i);
                    x[i] * (0..cards.len()).map(|a| basis.mats[a][da[a] * cards[a] + di[a]]).product::<f64>()
                })
                .sum();
            assert!((y[alpha] - want).abs() < 1e-10, "coefficient {alpha}: {} vs {want}", y[alpha]);
        }
        basis.transform(&mut y, true, &mut buf);
        for (a, b) in x.iter().zip(&y) {
            assert!((a - b).abs() < 1e-12);
        }
    }

    #[test]
    fn michelot_projection_matches_the_sort_based_one() {
        let v: Vec<f64> = (0..50).map(|i| ((i * 37) % 23) as f64 / 20.0 - 0.4).collect();
        let want = project_simplex(&v);
        // From no hint, from hints left and right of the threshold.
        for hint in [f64::NAN, -5.0, 0.0, 0.3, 10.0] {
            let mut w = v.clone();
            let mut h = hint;
            project_simplex_in_place(&mut w, &mut h);
            for (a, b) in w.iter().zip(&want) {
                assert!((a - b).abs() < 1e-12, "hint {hint}: {a} vs {b}");
            }
            assert!(h.is_finite());
        }
    }

    #[test]
    fn fit_recovers_exact_marginals_of_a_joint() {
        // Exact (noise-free) marginals of a positive joint: the fit reproduces them.
        let cards = [2usize, 3, 2, 2];
        let n: usize = cards.iter().product();
        let joint: Vec<f64> = (0..n).map(|i| 1.0 + ((i * 5) % 7) as f64).collect();
        let s: f64 = joint.iter().sum();
        let joint: Vec<f64> = joint.iter().map(|v| v / s).collect();
        let all = [0usize, 1, 2, 3];
        let sets = vec![vec![0, 1, 2], vec![1, 2, 3], vec![0, 3]];
        let ys: Vec<Vec<f64>> = sets.iter().map(|q| super::super::project(&joint, &all, &cards, q)).collect();
        let f = fit(&sets, &cards, &ys, &[1e-8, 2e-8, 0.5e-8], JointOptions::default()).unwrap();
        for (q, y) in sets.iter().zip(&ys) {
            let got = super::super::project(&f.cells, &all, &cards, q);
            for (a, b) in got.iter().zip(y) {
                assert!((a - b).abs() < 1e-7, "{q:?}: {a} vs {b}");
            }
        }
    }
}
