//! Consistency and non-negativity of overlapping marginals (as in CALM/PriView).
//!
//! 1. **Consistency** ([`gls_consistent`]). For every attribute subset A shared by two or more
//!    marginals (all subsets of pairwise intersections, the empty set first = the totals, then
//!    from small to large): the target T_A is the inverse-variance-weighted average of the
//!    marginals' projections on A; each marginal adds (T_A(a) − P_A(a))/g to each of the g cells
//!    projecting onto a. Processing A leaves every smaller subset's projections unchanged (they
//!    already agree), so after one pass every pair agrees on its whole intersection. The result
//!    is the generalized-least-squares estimate (see [`super::joint`]), and the pass is the
//!    projection onto the consistent families in the norm Σ_j ‖x_j − y_j‖²/σ_j².
//! 2. **Non-negativity**, two ways:
//!    - [`make_consistent`]: Norm-Sub on each marginal alternating with step 1 for a few
//!      rounds; then, if negative cells remain, an IPF refit of each marginal to common
//!      non-negative targets on its shared subsets and an exact additive fit, and the residual
//!      negatives removed by mixing *all* marginals with the uniform distribution by the
//!      smallest common λ (a convex combination of two consistent families is consistent).
//!    - [`project_local`]: the exact projection onto the consistent non-negative families in
//!      the norm above (Dykstra's alternating projections).
//!
//! Both results are exactly consistent, ≥ 0 and sum to 1 (up to rounding).

use super::sub_map;
use std::collections::BTreeSet;

fn sub_positions(set: &[usize], sub: &[usize]) -> Vec<bool> {
    set.iter().map(|a| sub.contains(a)).collect()
}

/// The attribute subsets shared by two or more marginals (all subsets of pairwise
/// intersections), small to large, each with its members and their cell → sub-cell maps.
fn shared_plan(sets: &[Vec<usize>], cards_all: &[usize]) -> Vec<Shared> {
    let mut subsets: BTreeSet<(usize, Vec<usize>)> = BTreeSet::new();
    for i in 0..sets.len() {
        for j in i + 1..sets.len() {
            let inter: Vec<usize> = sets[i].iter().copied().filter(|a| sets[j].contains(a)).collect();
            for bits in 1u64..(1u64 << inter.len()) {
                let s: Vec<usize> = (0..inter.len()).filter(|&b| bits >> b & 1 == 1).map(|b| inter[b]).collect();
                subsets.insert((s.len(), s));
            }
        }
    }
    subsets
        .into_iter()
        .map(|(_, s)| {
            let members = (0..sets.len())
                .filter(|&j| s.iter().all(|a| sets[j].contains(a)))
                .map(|j| {
                    let cards: Vec<usize> = sets[j].iter().map(|&a| cards_all[a]).collect();
                    (j, sub_map(&cards, &sub_positions(&sets[j], &s)))
                })
                .collect();
            (s, members)
        })
        .collect()
}

/// One weighted consistency pass (totals set to 1, then every shared subset small to large).
fn consistency_pass(plan: &SharedPlan, cards_all: &[usize], margs: &mut [Vec<f64>], cell_var: &[f64]) {
    for m in margs.iter_mut() {
        let shift = (1.0 - m.iter().sum::<f64>()) / m.len() as f64;
        m.iter_mut().for_each(|x| *x += shift);
    }
    for (s, members) in plan {
        let da: usize = s.iter().map(|&a| cards_all[a]).product();
        let mut target = vec![0.0; da];
        let mut wsum = 0.0;
        let mut projs = Vec::with_capacity(members.len());
        for (j, map) in members {
            let mut p = vec![0.0; da];
            for (x, &t) in margs[*j].iter().zip(map) {
                p[t as usize] += x;
            }
            let g = (margs[*j].len() / da) as f64;
            let w = 1.0 / (cell_var[*j] * g).max(f64::MIN_POSITIVE);
            target.iter_mut().zip(&p).for_each(|(t, x)| *t += w * x);
            wsum += w;
            projs.push(p);
        }
        target.iter_mut().for_each(|t| *t /= wsum);
        for ((j, map), p) in members.iter().zip(&projs) {
            let g = (margs[*j].len() / da) as f64;
            let delta: Vec<f64> = target.iter().zip(p).map(|(t, x)| (t - x) / g).collect();
            for (x, &t) in margs[*j].iter_mut().zip(map) {
                *x += delta[t as usize];
            }
        }
    }
}

/// The generalized-least-squares consistent family: one weighted consistency pass (step 1
/// alone). Each marginal sums to 1 and overlapping marginals agree exactly; cells may be
/// negative. For per-cell noise variances `cell_var` (independent cells) this is exactly the
/// weighted least-squares fit of one joint table to all the marginals, restricted to what the
/// marginals identify (see [`super::joint`]).
pub fn gls_consistent(sets: &[Vec<usize>], cards_all: &[usize], marginals: &mut [Vec<f64>], cell_var: &[f64]) {
    let plan = shared_plan(sets, cards_all);
    consistency_pass(&plan, cards_all, marginals, cell_var);
}

/// Smallest common λ with (1−λ)x + λ/|D| ≥ 0 in every marginal.
fn lambda_of(margs: &[Vec<f64>]) -> f64 {
    let mut lambda = 0.0f64;
    for m in margs {
        let u = 1.0 / m.len() as f64;
        for &x in m {
            if x < 0.0 {
                lambda = lambda.max(-x / (u - x));
            }
        }
    }
    lambda
}

/// Mixes every marginal with the uniform distribution by λ (a convex combination of two
/// consistent families is consistent), clamping rounding residue at 0.
fn mix_uniform(margs: &mut [Vec<f64>], lambda: f64) {
    for m in margs.iter_mut() {
        let u = 1.0 / m.len() as f64;
        m.iter_mut().for_each(|x| *x = ((1.0 - lambda) * *x + lambda * u).max(0.0));
    }
}

/// The projection of the family onto the consistent non-negative families ("local polytope")
/// in the weighted norm Σ_j ‖x_j − y_j‖²/σ_j² (σ_j² = `cell_var[j]`), by Dykstra's alternating
/// projections between the consistent families (one weighted consistency pass: the exact
/// projection, see [`gls_consistent`]) and the products of simplices (the Euclidean simplex
/// projection of each marginal: exact in this norm). At most `max_iter` rounds, or until the
/// two iterates differ by at most `tol` in every cell; the consistent iterate is returned,
/// its remaining tiny negatives removed by the smallest common uniform mix. Returns the
/// rounds run.
pub fn project_local(
    sets: &[Vec<usize>],
    cards_all: &[usize],
    marginals: &mut [Vec<f64>],
    cell_var: &[f64],
    max_iter: usize,
    tol: f64,
) -> usize {
    let plan = shared_plan(sets, cards_all);
    let mut x: Vec<Vec<f64>> = marginals.to_vec();
    let mut p: Vec<Vec<f64>> = x.iter().map(|m| vec![0.0; m.len()]).collect();
    let mut q = p.clone();
    let mut z = x.clone();
    let mut rounds = 0;
    for it in 0..max_iter {
        rounds = it + 1;
        // z = P_consistent(x + p); p += x − z.
        for ((zj, xj), pj) in z.iter_mut().zip(&x).zip(&p) {
            zj.iter_mut().zip(xj.iter().zip(pj)).for_each(|(zv, (xv, pv))| *zv = xv + pv);
        }
        consistency_pass(&plan, cards_all, &mut z, cell_var);
        for ((pj, xj), zj) in p.iter_mut().zip(&x).zip(&z) {
            pj.iter_mut().zip(xj.iter().zip(zj)).for_each(|(pv, (xv, zv))| *pv += xv - zv);
        }
        // x = P_simplices(z + q); q += z − x.
        let mut gap = 0.0f64;
        for (((xj, zj), qj), _) in x.iter_mut().zip(&z).zip(q.iter_mut()).zip(0..) {
            let v: Vec<f64> = zj.iter().zip(qj.iter()).map(|(zv, qv)| zv + qv).collect();
            *xj = harmony_core::postprocess::project_simplex(&v);
            for ((qv, zv), xv) in qj.iter_mut().zip(zj).zip(xj.iter()) {
                *qv += zv - xv;
                gap = gap.max((zv - xv).abs());
            }
        }
        if gap <= tol {
            break;
        }
    }
    let lambda = lambda_of(&z);
    if lambda > 0.0 {
        mix_uniform(&mut z, lambda);
    }
    for (m, zj) in marginals.iter_mut().zip(z) {
        *m = zj;
    }
    rounds
}

/// Makes `marginals` (over `sets`, cardinalities `cards_all`) consistent, non-negative and
/// summing to 1. `cell_var[j]` is marginal j's per-cell noise variance (the weights).
pub fn make_consistent(
    sets: &[Vec<usize>],
    cards_all: &[usize],
    marginals: &mut [Vec<f64>],
    cell_var: &[f64],
    rounds: usize,
    tol_lambda: f64,
) {
    let plan = shared_plan(sets, cards_all);
    let pass = |margs: &mut [Vec<f64>]| consistency_pass(&plan, cards_all, margs, cell_var);
    let mut lambda = 0.0;
    for round in 0..=rounds {
        if round > 0 {
            for m in marginals.iter_mut() {
                *m = harmony_core::postprocess::norm_sub(m);
            }
        }
        pass(marginals);
        lambda = lambda_of(marginals);
        if lambda <= tol_lambda {
            break;
        }
    }
    if lambda == 0.0 {
        return;
    }
    // Negative cells left: refit each marginal multiplicatively (iterative proportional fitting,
    // which keeps cells ≥ 0) to common non-negative targets on its shared subsets. The targets
    // are the (now consistent) shared projections, made ≥ 0 by the smallest uniform mix over the
    // target family only (small tables: a small λ). IPF may not reach the targets exactly
    // (pairwise-consistent tables need not have a common non-negative joint), so an exact
    // additive fit follows (as in the consistency pass, small to large) and the few small
    // negatives it leaves are removed by the common uniform mix, now with a small λ.
    refit(&plan, cards_all, marginals);
    let lambda = lambda_of(marginals);
    if lambda > 0.0 {
        mix_uniform(marginals, lambda);
    }
}

const FIT_TOL: f64 = 1e-11;
const FIT_SWEEPS: usize = 200;

/// A shared attribute subset and its members (marginal index, cell → sub-cell map).
type Shared = (Vec<usize>, Vec<(usize, Vec<u32>)>);
type SharedPlan = [Shared];

fn refit(plan: &SharedPlan, cards_all: &[usize], marginals: &mut [Vec<f64>]) {
    let targets = shared_targets(plan, cards_all, marginals);
    let cons = constraints(plan, marginals.len());
    for (j, m) in marginals.iter_mut().enumerate() {
        if cons[j].is_empty() {
            *m = harmony_core::postprocess::norm_sub(m);
        } else {
            fit_marginal(m, &cons[j], &targets);
        }
    }
}

/// Each shared subset's target distribution: its first member's (all members agree after a
/// consistency pass), mixed with the uniform just enough to be non-negative.
fn shared_targets(plan: &SharedPlan, cards_all: &[usize], marginals: &[Vec<f64>]) -> Vec<Vec<f64>> {
    let mut targets: Vec<Vec<f64>> = plan
        .iter()
        .map(|(s, members)| {
            let da: usize = s.iter().map(|&a| cards_all[a]).product();
            let (j, map) = &members[0];
            let mut p = vec![0.0; da];
            for (x, &t) in marginals[*j].iter().zip(map) {
                p[t as usize] += x;
            }
            p
        })
        .collect();
    let mut lt = 0.0f64;
    for t in &targets {
        let u = 1.0 / t.len() as f64;
        for &x in t {
            if x < 0.0 {
                lt = lt.max(-x / (u - x));
            }
        }
    }
    for t in targets.iter_mut() {
        let u = 1.0 / t.len() as f64;
        t.iter_mut().for_each(|x| *x = ((1.0 - lt) * *x + lt * u).max(0.0));
    }
    targets
}

/// A marginal's constraint: the shared subset's index in the plan, the cell → sub-cell map and
/// whether the subset is maximal among the marginal's (IPF uses the maximal ones).
type Constraint<'a> = (usize, &'a Vec<u32>, bool);

/// The constraints of each of `n` marginals, small subsets to large (as in `plan`).
fn constraints(plan: &SharedPlan, n: usize) -> Vec<Vec<Constraint<'_>>> {
    let mut cons: Vec<Vec<Constraint<'_>>> = vec![Vec::new(); n];
    for (ai, (s, members)) in plan.iter().enumerate() {
        for (j, map) in members {
            let maximal = !plan.iter().any(|(s2, m2)| {
                s2.len() > s.len() && s.iter().all(|a| s2.contains(a)) && m2.iter().any(|(j2, _)| j2 == j)
            });
            cons[j.to_owned()].push((ai, map, maximal));
        }
    }
    cons
}

/// One marginal fitted to its constraints' targets: IPF on the maximal subsets, then an exact
/// additive fit, small to large (keeps the smaller subsets' fit).
fn fit_marginal(m: &mut [f64], cons: &[Constraint<'_>], targets: &[Vec<f64>]) {
    let u = 1.0 / m.len() as f64;
    m.iter_mut().for_each(|x| *x = x.max(0.0) + 1e-9 * u);
    for _ in 0..FIT_SWEEPS {
        let mut worst = 0.0f64;
        for (ai, map, _) in cons.iter().filter(|c| c.2) {
            let want = &targets[*ai];
            let mut have = vec![0.0; want.len()];
            for (x, &t) in m.iter().zip(map.iter()) {
                have[t as usize] += x;
            }
            for (h, w) in have.iter().zip(want) {
                worst = worst.max((h - w).abs());
            }
            for (x, &t) in m.iter_mut().zip(map.iter()) {
                let h = have[t as usize];
                *x = if h > 0.0 { *x * want[t as usize] / h } else { 0.0 };
            }
        }
        if worst < FIT_TOL {
            break;
        }
    }
    let shift = (1.0 - m.iter().sum::<f64>()) / m.len() as f64;
    m.iter_mut().for_each(|x| *x += shift);
    for (ai, map, _) in cons {
        let want = &targets[*ai];
        let mut have = vec![0.0; want.len()];
        for (x, &t) in m.iter().zip(map.iter()) {
            have[t as usize] += x;
        }
        let g = (m.len() / want.len()) as f64;
        let delta: Vec<f64> = want.iter().zip(&have).map(|(w, h)| (w - h) / g).collect();
        for (x, &t) in m.iter_mut().zip(map.iter()) {
            *x += delta[t as usize];
        }
    }
}

/// Checks that every cell is ≥ 0, every marginal sums to 1 and every pair agrees on its shared
/// attributes, within `tol`. Returns the first violation found.
pub fn check(sets: &[Vec<usize>], cards_all: &[usize], marginals: &[Vec<f64>], tol: f64) -> Result<(), String> {
    for (j, m) in marginals.iter().enumerate() {
        if let Some(x) = m.iter().find(|&&x| x < 0.0 || x.is_nan()) {
            return Err(format!("marginal {j} ({:?}) has a cell {x} < 0", sets[j]));
        }
    }
    check_consistent(sets, cards_all, marginals, tol)
}

/// Checks that every marginal sums to 1 and every pair agrees on its shared attributes, within
/// `tol` (cells may be negative). Returns the first violation found.
pub fn check_consistent(
    sets: &[Vec<usize>],
    cards_all: &[usize],
    marginals: &[Vec<f64>],
    tol: f64,
) -> Result<(), String> {
    for (j, m) in marginals.iter().enumerate() {
        let s: f64 = m.iter().sum();
        if (s - 1.0).abs() > tol || s.is_nan() {
            return Err(format!("marginal {j} ({:?}) sums to {s}, expected 1", sets[j]));
        }
    }
    for i in 0..sets.len() {
        for j in i + 1..sets.len() {
            let inter: Vec<usize> = sets[i].iter().copied().filter(|a| sets[j].contains(a)).collect();
            if inter.is_empty() {
                continue;
            }
            let a = super::project(&marginals[i], &sets[i], cards_all, &inter);
            let b = super::project(&marginals[j], &sets[j], cards_all, &inter);
            let diff = a.iter().zip(&b).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max);
            if diff > tol {
                return Err(format!("marginals {i} and {j} differ by {diff} on {inter:?}"));
            }
        }
    }
    Ok(())
}
