//! Two-dimensional range queries over two ordered attributes (location heatmaps): a hierarchy
//! of grids (a quadtree; Cormode et al.'s LDP survey, §2.5.2) with constrained inference.
//!
//! Each attribute is cut into `2^L` bins; the `4^L` finest cells are numbered in Morton
//! (Z-) order, the bits of the x bin and the y bin interleaved ([`morton`]). Every quadtree node
//! at depth ℓ is then a contiguous, aligned run of `4^(L−ℓ)` Morton codes, so the quadtree is the
//! 1-D [`Hierarchy`] with branching 4 over the `4^L` codes: a device reports its cell's code
//! through it (one level drawn uniformly, that level's node through the adaptive GRR/OUE
//! oracle at the full ε), and the server's estimate, consistency, save/merge and variance are
//! the hierarchy's.
//!
//! # Privacy
//! The hierarchy's randomizer unchanged: one report per device at the full ε (ε-LDP), the level
//! drawn independently of the value.
//!
//! # Answers
//! A rectangle `[x1, x2) × [y1, y2)` on bin boundaries is the disjoint union of the quadtree
//! nodes of its decomposition, i.e. of a few Morton intervals ([`rect_intervals`]). Its estimate
//! sums the consistent cells; its variance is that of one linear combination of the raw node
//! estimates ([`HhEstimate::consistent_union`]), exact given the level sizes, so the intervals'
//! correlations after consistency are accounted for.

use super::{HhEstimate, Hierarchy, VarianceParts};
use harmony_core::{Error, Result};

/// The most levels L (a `2^6 × 2^6` grid: the finest OUE report carries 4,096 bits).
pub const MAX_GRID_LEVELS: usize = 6;

/// The Morton code of cell `(ix, iy)`: bit k of x at bit 2k, bit k of y at bit 2k + 1.
pub fn morton(ix: usize, iy: usize) -> usize {
    let mut code = 0;
    for k in 0..usize::BITS as usize / 2 {
        code |= ((ix >> k) & 1) << (2 * k) | ((iy >> k) & 1) << (2 * k + 1);
    }
    code
}

/// The cell `(ix, iy)` of a Morton code (the inverse of [`morton`]).
pub fn demorton(code: usize) -> (usize, usize) {
    let (mut ix, mut iy) = (0, 0);
    for k in 0..usize::BITS as usize / 2 {
        ix |= ((code >> (2 * k)) & 1) << k;
        iy |= ((code >> (2 * k + 1)) & 1) << k;
    }
    (ix, iy)
}

/// The Morton intervals `[a, b)` whose union is the rectangle `[x1, x2) × [y1, y2)` of a
/// `2^levels`-sided grid: its quadtree nodes, in increasing order, adjacent runs merged.
/// Empty when either side is empty. Bounds must satisfy `x1 ≤ x2 ≤ 2^levels` (same for y).
pub fn rect_intervals(levels: usize, x: [usize; 2], y: [usize; 2]) -> Vec<(usize, usize)> {
    let mut out: Vec<(usize, usize)> = Vec::new();
    if x[0] < x[1] && y[0] < y[1] {
        quad(levels, 0, (0, 0), x, y, &mut out);
    }
    out
}

/// Appends the Morton intervals of the node at depth `depth` with corner cell `(cx, cy)` (in
/// units of its side) that lie in the rectangle.
fn quad(levels: usize, depth: usize, c: (usize, usize), x: [usize; 2], y: [usize; 2], out: &mut Vec<(usize, usize)>) {
    let side = 1 << (levels - depth);
    let (x0, y0) = (c.0 * side, c.1 * side);
    if x0 >= x[1] || x0 + side <= x[0] || y0 >= y[1] || y0 + side <= y[0] {
        return;
    }
    if x[0] <= x0 && x0 + side <= x[1] && y[0] <= y0 && y0 + side <= y[1] {
        let a = morton(x0, y0);
        let b = a + side * side;
        match out.last_mut() {
            Some(last) if last.1 == a => last.1 = b,
            _ => out.push((a, b)),
        }
        return;
    }
    for k in 0..4 {
        quad(levels, depth + 1, (2 * c.0 + (k & 1), 2 * c.1 + (k >> 1)), x, y, out);
    }
}

/// The quadtree collection over a `2^L × 2^L` grid.
#[derive(Debug, Clone, PartialEq)]
pub struct Grid2d {
    levels: usize,
    hierarchy: Hierarchy,
}

impl Grid2d {
    /// The quadtree with budget ε over `2^levels` bins per axis. Errors: levels outside
    /// `1..=`[`MAX_GRID_LEVELS`], ε not finite and > 0.
    pub fn new(epsilon: f64, levels: usize) -> Result<Self> {
        if !(1..=MAX_GRID_LEVELS).contains(&levels) {
            return Err(Error::param("levels", levels, format!("an integer in [1, {MAX_GRID_LEVELS}]")));
        }
        Ok(Grid2d { levels, hierarchy: Hierarchy::new(epsilon, 4, 1 << (2 * levels))? })
    }
    /// The levels L.
    pub fn levels(&self) -> usize {
        self.levels
    }
    /// Bins per axis, `2^L`.
    pub fn side(&self) -> usize {
        1 << self.levels
    }
    /// The 1-D hierarchy over Morton codes (the device's randomizer, the server's aggregator).
    pub fn hierarchy(&self) -> &Hierarchy {
        &self.hierarchy
    }
    /// The Morton code a device reports for cell `(ix, iy)`. Errors: a bin ≥ `2^L`.
    pub fn cell(&self, ix: usize, iy: usize) -> Result<usize> {
        for (name, v) in [("x bin", ix), ("y bin", iy)] {
            if v >= self.side() {
                return Err(Error::input(name, v, format!("< the bins per axis {}", self.side())));
            }
        }
        Ok(morton(ix, iy))
    }
}

/// Answers over an estimate of a [`Grid2d`] collection.
#[derive(Debug, Clone)]
pub struct GridAnswers<'a> {
    levels: usize,
    est: &'a HhEstimate,
    cum: Vec<f64>,
    fractions: Vec<Vec<f64>>,
}

impl<'a> GridAnswers<'a> {
    /// Answers from `est` (a hierarchy with branching 4 over `4^levels` Morton cells) whose
    /// variances take the cells' fractions `freqs` in Morton order (the truth, or a plug-in
    /// estimate). Errors: `est` or `freqs` not of that grid.
    pub fn new(levels: usize, est: &'a HhEstimate, freqs: &[f64]) -> Result<Self> {
        let cells = 1usize << (2 * levels);
        if est.branching() != 4 || est.levels() != levels {
            return Err(Error::param("estimate", est.levels(), format!("a quadtree of {levels} levels")));
        }
        if freqs.len() != cells {
            return Err(Error::input("cell fractions", freqs.len(), format!("{cells} (one per cell)")));
        }
        let cum = super::cumulative(freqs);
        let fractions = est.level_fractions(&cum);
        Ok(GridAnswers { levels, est, cum, fractions })
    }
    /// The consistent estimate of the rectangle `[x1, x2) × [y1, y2)` (bins) and its variance.
    /// Errors: a bound outside the grid or a reversed side.
    pub fn rect(&self, x: [usize; 2], y: [usize; 2]) -> Result<(f64, VarianceParts)> {
        let side = 1 << self.levels;
        for (name, [a, b]) in [("x bins", x), ("y bins", y)] {
            if a > b || b > side {
                return Err(Error::input(name, format!("[{a}, {b})"), format!("a <= b <= {side}")));
            }
        }
        Ok(self.est.consistent_union_with(&rect_intervals(self.levels, x, y), &self.cum, &self.fractions))
    }
    /// The finest grid: `(estimate, variance)` of cell `(ix, iy)` at index `iy · 2^L + ix`.
    pub fn heatmap(&self) -> Vec<(f64, f64)> {
        let side = 1 << self.levels;
        (0..side * side)
            .map(|i| {
                let c = morton(i % side, i / side);
                let (e, v) = self.est.consistent_union_with(&[(c, c + 1)], &self.cum, &self.fractions);
                (e, v.noise + v.split)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::range::hierarchy::consistent_for_test;
    use harmony_core::Aggregator;
    use harmony_core::sampling::fast_rng;
    use rand::RngExt;

    #[test]
    fn morton_is_a_bijection_and_quadtree_nodes_are_aligned_runs() {
        let levels = 3;
        let side = 1 << levels;
        let mut seen = vec![false; side * side];
        for iy in 0..side {
            for ix in 0..side {
                let c = morton(ix, iy);
                assert!(!seen[c], "({ix}, {iy}) collides");
                seen[c] = true;
                assert_eq!(demorton(c), (ix, iy));
                // The depth-ℓ node holding the cell is the run c / 4^(L−ℓ).
                for depth in 0..=levels {
                    let s = levels - depth;
                    assert_eq!(c >> (2 * s), morton(ix >> s, iy >> s));
                }
            }
        }
    }

    #[test]
    fn rectangles_decompose_into_exactly_their_cells_brute_force() {
        let levels = 3;
        let side = 1 << levels;
        let mut worst = 0;
        for x1 in 0..=side {
            for x2 in x1..=side {
                for y1 in 0..=side {
                    for y2 in y1..=side {
                        let runs = rect_intervals(levels, [x1, x2], [y1, y2]);
                        let mut covered = vec![false; side * side];
                        for w in runs.windows(2) {
                            assert!(w[0].1 < w[1].0, "sorted, disjoint, merged: {runs:?}");
                        }
                        for &(a, b) in &runs {
                            assert!(a < b);
                            covered[a..b].iter_mut().for_each(|c| *c = true);
                        }
                        for (c, &cov) in covered.iter().enumerate() {
                            let (ix, iy) = demorton(c);
                            let inside = (x1..x2).contains(&ix) && (y1..y2).contains(&iy);
                            assert_eq!(cov, inside, "cell ({ix}, {iy}) in [{x1},{x2})×[{y1},{y2})");
                        }
                        worst = worst.max(runs.len());
                    }
                }
            }
        }
        assert!(worst <= 2 * side, "at most a few runs per rectangle: {worst}");
    }

    #[test]
    fn the_consistent_answer_is_the_adjoint_linear_combination() {
        let mut rng = fast_rng(5);
        for (b, h) in [(4usize, 3usize), (2, 4), (5, 2)] {
            let x: Vec<Vec<f64>> =
                (1..=h).map(|l| (0..b.pow(l as u32)).map(|_| rng.random::<f64>() - 0.3).collect()).collect();
            let sigma2: Vec<f64> = (0..h).map(|_| 0.1 + rng.random::<f64>()).collect();
            let r: Vec<f64> = (0..b.pow(h as u32)).map(|_| f64::from(u8::from(rng.random::<bool>()))).collect();
            let (direct, linear) = consistent_for_test(b, &x, &sigma2, &r);
            assert!((direct - linear).abs() < 1e-9, "b = {b}, h = {h}: {direct} vs {linear}");
        }
    }

    /// A small grid, many seeded collections: each rectangle's consistent estimate is unbiased
    /// and its variance matches the closed form at the truth.
    #[test]
    fn rectangles_are_unbiased_with_the_closed_form_variance() {
        let (levels, n, runs) = (2, 3000, 400);
        let grid = Grid2d::new(1.0, levels).unwrap();
        let mut rng = fast_rng(11);
        let values: Vec<usize> = (0..n)
            .map(|_| {
                let ix = (rng.random::<f64>().powi(2) * 4.0) as usize;
                let iy = (rng.random::<f64>() * 4.0) as usize;
                morton(ix, iy)
            })
            .collect();
        let truth = crate::range::true_freqs(&values, 16);
        let rects = [([0, 1], [0, 1]), ([0, 4], [1, 3]), ([1, 4], [0, 4]), ([2, 3], [3, 4])];
        let mut sums = vec![(0.0, 0.0, 0.0); rects.len()];
        for _ in 0..runs {
            let mut agg = grid.hierarchy().aggregator();
            for &v in &values {
                agg.add(&harmony_core::Randomizer::randomize(grid.hierarchy(), &v, &mut rng).unwrap()).unwrap();
            }
            let est = agg.estimate().unwrap();
            let ans = GridAnswers::new(levels, &est, &truth).unwrap();
            for (s, &(x, y)) in sums.iter_mut().zip(&rects) {
                let (e, v) = ans.rect(x, y).unwrap();
                *s = (s.0 + e, s.1 + e * e, s.2 + v.noise + v.split);
            }
        }
        let rf = runs as f64;
        for (&(x, y), &(s, s2, v)) in rects.iter().zip(&sums) {
            let t: f64 = (x[0]..x[1]).flat_map(|i| (y[0]..y[1]).map(move |j| morton(i, j))).map(|c| truth[c]).sum();
            let (mean, var) = (s / rf, s2 / rf - (s / rf).powi(2));
            let z = (mean - t) / (var / rf).sqrt();
            let ratio = var / (v / rf);
            assert!(z.abs() < 4.42, "{x:?}×{y:?}: z = {z}");
            assert!((0.8..1.2).contains(&ratio), "{x:?}×{y:?}: variance / predicted = {ratio}");
        }
    }
}
