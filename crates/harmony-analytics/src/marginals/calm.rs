//! CALM (Zhang et al., CCS'18): materialize m marginals of ≤ l attributes, one user group each,
//! then post-process and answer every k-way query.
//!
//! # Choosing m and l
//! For each candidate l (k … k+3 by default), a greedy covering design picks the attribute sets:
//! start from the uncovered query with the largest domain and add, one at a time, the attribute
//! that covers the most still-uncovered queries per unit of predicted error
//! (|D| Var*(|D|) + 1, the per-user SSE of a marginal with |D| cells), as long as that ratio
//! improves and the set has fewer than l attributes;
//! m is the number of sets needed to cover every query. Two totals are predicted for each
//! candidate: of the raw answers, Σ_q 1/Σ_{j ⊇ q} 1/SSE_jq, where SSE_jq is the noise of
//! marginal j summed down to q ([`noise_sse`]) from n/m users plus the sampling term with its
//! bound 1 − 1/|D_q|; and of the GLS-consistent answers ([`GlsModel`], same bound), which pool
//! every set sharing attributes with the query — the estimate the post-processing starts from.
//! The (l, m) of least predicted GLS total wins (reconstruction error is 0 since every query is
//! covered). A caller may force l; with l < k the queries are reconstructed by maximum entropy
//! from the materialized l-way marginals (no closed-form error: predicted SSE `None`).
//!
//! # Post-processing and predictions
//! [`postprocess_with`] offers the GLS-consistent estimate ([`Post::Gls`], unbiased, predicted
//! exactly by [`GlsModel`]), one non-negative joint table fitted to all marginals
//! ([`Post::Joint`], the default when the table is small enough), a consistent non-negative
//! family ([`Post::Family`], the fallback) and the exact local-polytope projection
//! ([`Post::Local`]). The non-negative outputs are reported with the GLS prediction as a guide
//! (their measured errors are lower; not predicted).
//!
//! # Privacy
//! Each user reports once, one cell of one marginal, by an ε-LDP oracle: ε-LDP. The group
//! assignment is independent of the data.

use super::consistency;
use super::joint::{self, JointOptions};
use super::{
    Dataset, FoParams, MarginalEstimate, adaptive_estimate, gini, ipf, noise_sse, project, random_groups, sampling_sse,
};
use harmony_core::{Error, Result};
use rand::Rng;
use std::collections::HashSet;

/// Options of [`CalmPlan::choose`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CalmOptions {
    /// Force the marginal size l (else chosen among k ..= k + `extra_l`).
    pub l: Option<usize>,
    /// How far above k the automatic choice of l looks.
    pub extra_l: usize,
    /// Largest number of cells of a materialized marginal.
    pub max_cells: usize,
}

impl Default for CalmOptions {
    fn default() -> Self {
        CalmOptions { l: None, extra_l: 3, max_cells: 1 << 20 }
    }
}

/// One (l, m) candidate considered by the planner.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// Marginal size.
    pub l: usize,
    /// Number of marginals (user groups).
    pub m: usize,
    /// Predicted total SSE over the queries of the raw answers.
    pub predicted_total_sse: f64,
    /// Predicted total SSE over the queries of the GLS-consistent answers ([`GlsModel`],
    /// sampling bound); 0 for queries that are not covered.
    pub predicted_gls_total_sse: f64,
}

/// The materialized marginals and how each query is answered.
#[derive(Debug, Clone, PartialEq)]
pub struct CalmPlan {
    /// ε of every report.
    pub epsilon: f64,
    /// Number of users.
    pub n: usize,
    /// The chosen l.
    pub l: usize,
    /// The materialized attribute sets (sorted indices), one user group each.
    pub sets: Vec<Vec<usize>>,
    /// The queries (sorted attribute indices).
    pub queries: Vec<Vec<usize>>,
    /// For each query, the sets covering it (empty: reconstructed by maximum entropy).
    pub cover: Vec<Vec<usize>>,
    /// Predicted total SSE of the chosen plan's raw answers (noise + sampling bound; excludes
    /// reconstruction).
    pub predicted_total_sse: f64,
    /// Predicted total SSE of its GLS-consistent answers ([`GlsModel`]; the planning criterion).
    pub predicted_gls_total_sse: f64,
    /// All candidates considered (for display).
    pub candidates: Vec<Candidate>,
    cards: Vec<usize>,
}

fn mask(attrs: &[usize]) -> u128 {
    attrs.iter().fold(0u128, |m, &a| m | (1u128 << a))
}

fn bits(m: u128) -> Vec<usize> {
    (0..128).filter(|&i| m >> i & 1 == 1).collect()
}

fn domain(cards: &[usize], m: u128) -> usize {
    bits(m).iter().map(|&a| cards[a]).product()
}

/// Per-user SSE of a marginal with d cells (n_g = 1, sampling bound 1).
fn unit_cost(epsilon: f64, d: usize) -> f64 {
    let fo = FoParams::adaptive(epsilon, d).expect("validated ε");
    noise_sse(fo, d, d, 1.0) + 1.0
}

/// Every `t`-subset of `s` (as masks) containing attribute `a` (a ∈ s).
fn subsets_with(s: u128, a: usize, t: usize, out: &mut Vec<u128>) {
    out.clear();
    let rest: Vec<usize> = bits(s & !(1u128 << a));
    if t == 0 || t - 1 > rest.len() {
        return;
    }
    let k = t - 1;
    let mut idx: Vec<usize> = (0..k).collect();
    loop {
        out.push(idx.iter().fold(1u128 << a, |m, &i| m | (1u128 << rest[i])));
        let mut i = k;
        while i > 0 && idx[i - 1] == rest.len() - k + i - 1 {
            i -= 1;
        }
        if i == 0 {
            return;
        }
        idx[i - 1] += 1;
        for j in i..k {
            idx[j] = idx[j - 1] + 1;
        }
    }
}

/// Greedy covering of `targets` (all of size t) by sets of ≤ l attributes from `pool`.
fn greedy_cover(
    targets: &[u128],
    pool: &[usize],
    l: usize,
    cards: &[usize],
    epsilon: f64,
    max_cells: usize,
) -> Vec<u128> {
    let t = targets.first().map_or(0, |m| m.count_ones() as usize);
    let mut uncovered: HashSet<u128> = targets.iter().copied().collect();
    let mut order: Vec<u128> = targets.to_vec();
    order.sort_by_key(|&m| std::cmp::Reverse(domain(cards, m)));
    let mut sets = Vec::new();
    let mut buf = Vec::new();
    for &start in &order {
        if !uncovered.contains(&start) {
            continue;
        }
        let mut s = start;
        let mut newly = 1usize;
        while (s.count_ones() as usize) < l {
            let mut best: Option<(f64, usize, usize)> = None;
            for &a in pool {
                if s >> a & 1 == 1 {
                    continue;
                }
                let s2 = s | (1u128 << a);
                let d2 = domain(cards, s2);
                if d2 > max_cells {
                    continue;
                }
                subsets_with(s2, a, t, &mut buf);
                let gain = buf.iter().filter(|m| uncovered.contains(m)).count();
                if gain == 0 {
                    continue;
                }
                let score = (newly + gain) as f64 / unit_cost(epsilon, d2);
                if best.is_none_or(|(b, _, _)| score > b) {
                    best = Some((score, a, gain));
                }
            }
            // Extend only while covering per unit of error improves.
            let current = newly as f64 / unit_cost(epsilon, domain(cards, s));
            match best.filter(|&(score, _, _)| score > current) {
                Some((_, a, gain)) => {
                    s |= 1u128 << a;
                    newly += gain;
                }
                None => break,
            }
        }
        uncovered.retain(|&m| m & !s != 0);
        sets.push(s);
    }
    sets
}

impl CalmPlan {
    /// Chooses the materialized marginals for `queries` over `data`'s attributes, n users, ε.
    /// Errors: ε invalid, no query, a query empty/unsorted/repeating an attribute/out of range,
    /// a query with more cells than `max_cells`, a forced l of 0 or above the number of
    /// attributes queried.
    pub fn choose(data: &Dataset, epsilon: f64, queries: &[Vec<usize>], opts: CalmOptions) -> Result<Self> {
        let cards = data.cards().to_vec();
        let n = data.n();
        FoParams::adaptive(epsilon, 2)?;
        if queries.is_empty() {
            return Err(Error::input("queries", "none", "at least one marginal to estimate"));
        }
        for q in queries {
            if q.is_empty() || q.windows(2).any(|w| w[0] >= w[1]) || q.iter().any(|&a| a >= cards.len()) {
                return Err(Error::input(
                    "query",
                    format!("{q:?}"),
                    format!("distinct sorted attribute indices < {}", cards.len()),
                ));
            }
            let dq: usize = q.iter().map(|&a| cards[a]).product();
            if dq > opts.max_cells {
                return Err(Error::input(
                    "query",
                    format!("{} with {dq} cells", data.label(q)),
                    format!("at most {} cells", opts.max_cells),
                ));
            }
        }
        let k = queries.iter().map(Vec::len).max().unwrap_or(1);
        let pool: Vec<usize> = bits(queries.iter().fold(0u128, |m, q| m | mask(q)));
        let ls: Vec<usize> = match opts.l {
            Some(l) if l == 0 || l > pool.len() => {
                return Err(Error::param(
                    "l",
                    l,
                    format!("a marginal size between 1 and the number of attributes queried ({})", pool.len()),
                ));
            }
            Some(l) => vec![l],
            None => (k..=(k + opts.extra_l).min(pool.len())).collect(),
        };
        let mut candidates = Vec::new();
        let mut best: Option<CalmPlan> = None;
        for l in ls {
            // Targets: the queries themselves, or (l < k) all their l-subsets.
            let targets: Vec<u128> = if l >= k {
                queries.iter().map(|q| mask(q)).collect()
            } else {
                let mut ts: HashSet<u128> = HashSet::new();
                for q in queries {
                    for s in super::all_queries(q, l.min(q.len()), data.names())? {
                        ts.insert(mask(&s));
                    }
                }
                let mut v: Vec<u128> = ts.into_iter().collect();
                v.sort_unstable();
                v
            };
            // Queries shorter than k are covered through a k-target (or directly).
            let set_masks = greedy_cover(&targets, &pool, l, &cards, epsilon, opts.max_cells);
            let sets: Vec<Vec<usize>> = set_masks.iter().map(|&m| bits(m)).collect();
            let cover: Vec<Vec<usize>> = queries
                .iter()
                .map(|q| {
                    let qm = mask(q);
                    (0..sets.len()).filter(|&j| qm & !set_masks[j] == 0).collect()
                })
                .collect();
            let mut plan = CalmPlan {
                epsilon,
                n,
                l,
                sets,
                queries: queries.to_vec(),
                cover,
                predicted_total_sse: 0.0,
                predicted_gls_total_sse: 0.0,
                candidates: Vec::new(),
                cards: cards.clone(),
            };
            let sizes = plan.group_sizes();
            plan.predicted_total_sse = (0..queries.len())
                .map(|qi| {
                    let dq = plan.query_cells(qi);
                    plan.predicted_query_sse(qi, &sizes, 1.0 - 1.0 / dq as f64).unwrap_or(0.0)
                })
                .sum();
            let model = plan.gls_model(&sizes);
            let gls_total: f64 = queries.iter().map(|q| model.query_sse(q, None).unwrap_or(0.0)).sum();
            candidates.push(Candidate {
                l,
                m: plan.sets.len(),
                predicted_total_sse: plan.predicted_total_sse,
                predicted_gls_total_sse: gls_total,
            });
            plan.predicted_gls_total_sse = gls_total;
            if best.as_ref().is_none_or(|b| gls_total < b.predicted_gls_total_sse) {
                best = Some(plan);
            }
        }
        let mut plan = best.expect("at least one candidate l");
        plan.candidates = candidates;
        Ok(plan)
    }

    /// Number of materialized marginals (user groups).
    pub fn m(&self) -> usize {
        self.sets.len()
    }

    /// Group sizes of a partition of n users into m groups (as [`random_groups`] makes them).
    pub fn group_sizes(&self) -> Vec<usize> {
        let (n, m) = (self.n, self.m());
        (0..m).map(|g| (g + 1) * n / m - g * n / m).collect()
    }

    fn query_cells(&self, qi: usize) -> usize {
        self.queries[qi].iter().map(|&a| self.cards[a]).product()
    }

    fn set_cells(&self, j: usize) -> usize {
        self.sets[j].iter().map(|&a| self.cards[a]).product()
    }

    /// Predicted E\[SSE\] of set j's marginal summed down to query qi, from `n_g` users, with
    /// `s = 1 − Σπ²` of the query's true marginal.
    pub fn predicted_pair_sse(&self, j: usize, qi: usize, n_g: usize, s: f64) -> f64 {
        let dj = self.set_cells(j);
        let fo = FoParams::adaptive(self.epsilon, dj).expect("validated ε");
        noise_sse(fo, dj, self.query_cells(qi), n_g as f64) + sampling_sse(s, n_g as f64, self.n as f64)
    }

    /// Weight of set j in the raw answer to query qi: 1/SSE_jq with the sampling bound
    /// 1 − 1/|D_q| (data-independent, so the weighted answer stays unbiased).
    fn weight(&self, j: usize, qi: usize, sizes: &[usize]) -> f64 {
        1.0 / self.predicted_pair_sse(j, qi, sizes[j], 1.0 - 1.0 / self.query_cells(qi) as f64)
    }

    /// Predicted E\[SSE\] of the raw weighted answer Σ_j w_j P_j / Σ_j w_j to query qi over its
    /// covering sets, with `s = Σπ(1−π) = 1 − Σπ²` of the query's true marginal; `None` if it is
    /// reconstructed. Noise is independent across groups: Σ w_j² N_j. The groups' sampling
    /// errors come from one random partition, so they are correlated: Var = s(n−n_j)/(n_j(n−1)),
    /// Cov = −s/(n−1) between two groups (sampling without replacement). Hence
    /// E\[SSE\] = [Σ w_j² N_j + s/(n−1) (Σ w_j² (n−n_j)/n_j − ((Σw)² − Σw²))] / (Σw)².
    pub fn predicted_query_sse(&self, qi: usize, sizes: &[usize], s: f64) -> Option<f64> {
        let cover = &self.cover[qi];
        if cover.is_empty() {
            return None;
        }
        let n = self.n as f64;
        let (mut noise, mut samp, mut wsum, mut w2sum) = (0.0, 0.0, 0.0, 0.0);
        for &j in cover {
            let w = self.weight(j, qi, sizes);
            let dj = self.set_cells(j);
            let n_j = sizes[j].max(1) as f64;
            let fo = FoParams::adaptive(self.epsilon, dj).expect("validated ε");
            noise += w * w * noise_sse(fo, dj, self.query_cells(qi), n_j);
            samp += w * w * (n - n_j) / n_j;
            wsum += w;
            w2sum += w * w;
        }
        let sampling = if n > 1.0 { s / (n - 1.0) * (samp - (wsum * wsum - w2sum)) } else { 0.0 };
        Some((noise + sampling) / (wsum * wsum))
    }

    /// The prediction model of the GLS-consistent estimate for group sizes `sizes` (see
    /// [`GlsModel`]).
    pub fn gls_model(&self, sizes: &[usize]) -> GlsModel {
        GlsModel::new(self, sizes)
    }

    /// Human-readable summary of the choice (candidates and the winner).
    pub fn describe(&self) -> String {
        let c: Vec<String> = self
            .candidates
            .iter()
            .map(|c| {
                format!(
                    "l={} m={} predicted ΣSSE={:.3e} (GLS {:.3e})",
                    c.l, c.m, c.predicted_total_sse, c.predicted_gls_total_sse
                )
            })
            .collect();
        format!(
            "CALM at ε={}: chose l={}, m={} (n/m ≈ {}); candidates: {}",
            self.epsilon,
            self.l,
            self.m(),
            self.n / self.m().max(1),
            c.join("; ")
        )
    }
}

/// Predicted E\[SSE\] of the generalized-least-squares (GLS) consistent estimate: the weighted
/// consistency pass ([`Post::Gls`]), equivalently the unconstrained weighted least-squares fit
/// of one joint table ([`joint`]). It is unbiased. Its error on a query q splits over the
/// ANOVA components T ⊆ q (orthogonal; see [`joint::component_energies`]): component T is the
/// average of the T-components of the marginals j ⊇ T with weights ω_j = 1/(σ_j² |D_j|)
/// (σ_j² the per-cell variance used as weight), so with dim_T = Π_{a∈T}(c_a − 1):
///
/// - noise: Σ ω_j² E_Tj / (Σω)² with E_Tj = dim_T/|D_T| · N_j for OUE (independent cells, N_j
///   the marginal's noise SSE) and dim_T/|D_T| · (1 − (p−q)²)/(n_j (p−q)²) for GRR (each user's
///   report is one categorical draw with probabilities q + (p−q)·1[cell = own cell]: the
///   covariance of the counts is Σ_u diag(r_u) − r_u r_uᵀ, whose trace on the T-component does
///   not depend on the data);
/// - sampling: s_T/(n−1) · [Σ ω_j² (n−n_j)/n_j − ((Σω)² − Σω²)]/(Σω)² with
///   s_T = dim_T/|D_T| − ‖Π_T π_T‖² (one random partition, as in
///   [`CalmPlan::predicted_query_sse`]);
///
/// and a component's squared norm on D_q is its norm on D_T divided by |D_q|/|D_T|.
/// The post-processed output ([`Post::Joint`], [`Post::Family`]) is not predicted: the joint
/// fit is the projection of this estimate onto the joint distributions in the fit's weighted
/// norm, which cannot increase the weighted total error over the materialized marginals, but
/// no per-query bound follows.
#[derive(Debug, Clone)]
pub struct GlsModel {
    /// Per subset T (mask over global attributes) of some set: (A_T, S_T) with noise
    /// dim_T/|D_T|·A_T and sampling s_T·S_T on D_T.
    comps: std::collections::HashMap<u128, (f64, f64)>,
    cards: Vec<usize>,
}

impl GlsModel {
    fn new(plan: &CalmPlan, sizes: &[usize]) -> Self {
        let n = plan.n as f64;
        let cell_var = cell_variances(plan, sizes);
        // Per subset: Σω, Σω², Σω²u (noise), Σω²(n−n_j)/n_j.
        let mut acc: std::collections::HashMap<u128, [f64; 4]> = std::collections::HashMap::new();
        let kmax = plan.queries.iter().map(Vec::len).max().unwrap_or(0);
        for (j, set) in plan.sets.iter().enumerate() {
            let dj = plan.set_cells(j);
            let n_j = sizes[j].max(1) as f64;
            let fo = FoParams::adaptive(plan.epsilon, dj).expect("validated ε");
            let omega = 1.0 / (cell_var[j] * dj as f64);
            let u = if fo.grr {
                let d2 = (fo.p - fo.q).powi(2);
                (1.0 - d2) / (n_j * d2)
            } else {
                noise_sse(fo, dj, dj, n_j)
            };
            for sub in 1u64..(1u64 << set.len()) {
                if sub.count_ones() as usize > kmax {
                    continue;
                }
                let m = (0..set.len()).filter(|&i| sub >> i & 1 == 1).fold(0u128, |m, i| m | (1u128 << set[i]));
                let e = acc.entry(m).or_insert([0.0; 4]);
                e[0] += omega;
                e[1] += omega * omega;
                e[2] += omega * omega * u;
                e[3] += omega * omega * (n - n_j) / n_j;
            }
        }
        let comps = acc
            .into_iter()
            .map(|(m, [w, w2, wu, wn])| {
                let ww = w * w;
                let samp = if n > 1.0 { (wn - (ww - w2)) / ((n - 1.0) * ww) } else { 0.0 };
                (m, (wu / ww, samp))
            })
            .collect();
        GlsModel { comps, cards: plan.cards.clone() }
    }

    /// Predicted E\[SSE\] of the GLS estimate of the marginal over `q` (sorted attributes), with
    /// `energies[t]` = ‖Π_T π_q‖² of the true marginal π_q for every local mask t (as
    /// [`joint::component_energies`] gives them; `None`: 0, an upper bound). `None` if some
    /// T ⊆ q is in no set (the query is not identified).
    pub fn query_sse(&self, q: &[usize], energies: Option<&[f64]>) -> Option<f64> {
        let k = q.len();
        let dq: f64 = q.iter().map(|&a| self.cards[a] as f64).product();
        let mut total = 0.0;
        for t in 1usize..(1 << k) {
            // Local mask: position i ↔ bit k − 1 − i (as in joint::component_energies).
            let (mut m, mut dim) = (0u128, 1.0);
            for (i, &a) in q.iter().enumerate() {
                if t >> (k - 1 - i) & 1 == 1 {
                    m |= 1u128 << a;
                    dim *= (self.cards[a] - 1) as f64;
                }
            }
            let &(a_t, s_t) = self.comps.get(&m)?;
            let e = energies.map_or(0.0, |e| e[t]);
            total += dim / dq * (a_t + s_t) - e * s_t;
        }
        Some(total.max(0.0))
    }
}

/// The raw (unbiased, not post-processed) estimates of the materialized marginals.
#[derive(Debug, Clone, PartialEq)]
pub struct CalmRaw {
    /// One estimate per set of the plan.
    pub marginals: Vec<Vec<f64>>,
    /// Users in each group.
    pub sizes: Vec<usize>,
}

/// Collection and estimation: users split at random into m groups; group j reports its cell of
/// set j by the adaptive oracle at ε; the aggregator estimates each marginal.
pub fn collect<R: Rng + ?Sized>(plan: &CalmPlan, data: &Dataset, rng: &mut R) -> Result<CalmRaw> {
    let groups = random_groups(data.n(), plan.m(), rng);
    let mut marginals = Vec::with_capacity(plan.m());
    let mut cells = Vec::new();
    for (j, g) in groups.iter().enumerate() {
        let attrs = &plan.sets[j];
        cells.clear();
        cells.extend(g.iter().map(|&i| data.cell(i, attrs)));
        marginals.push(adaptive_estimate(plan.epsilon, data.domain(attrs), &cells, rng)?);
    }
    Ok(CalmRaw { marginals, sizes: groups.iter().map(Vec::len).collect() })
}

fn weighted_answer(plan: &CalmPlan, raw: &[Vec<f64>], sizes: &[usize], qi: usize) -> Vec<f64> {
    let q = &plan.queries[qi];
    let dq = plan.query_cells(qi);
    let mut acc = vec![0.0; dq];
    let mut wsum = 0.0;
    for &j in &plan.cover[qi] {
        let w = plan.weight(j, qi, sizes);
        let p = project(&raw[j], &plan.sets[j], &plan.cards, q);
        acc.iter_mut().zip(&p).for_each(|(a, b)| *a += w * b);
        wsum += w;
    }
    acc.iter_mut().for_each(|a| *a /= wsum);
    acc
}

fn reconstruct(plan: &CalmPlan, margs: &[Vec<f64>], qi: usize) -> Vec<f64> {
    let q = &plan.queries[qi];
    let mut cons: Vec<(Vec<usize>, Vec<f64>)> = Vec::new();
    for (j, s) in plan.sets.iter().enumerate() {
        let inter: Vec<usize> = s.iter().copied().filter(|a| q.contains(a)).collect();
        if inter.is_empty() || cons.iter().any(|(c, _)| inter.iter().all(|a| c.contains(a))) {
            continue;
        }
        let p = harmony_core::postprocess::norm_sub(&project(&margs[j], s, &plan.cards, &inter));
        cons.retain(|(c, _)| !c.iter().all(|a| inter.contains(a)));
        cons.push((inter, p));
    }
    ipf(q, &plan.cards, &cons, 200, 1e-10)
}

/// CALM without post-processing: each covered query is the inverse-variance-weighted average of
/// its covering marginals' projections (unbiased); uncovered ones are reconstructed by maximum
/// entropy from the (clipped) sub-marginals.
pub fn answer_raw(plan: &CalmPlan, raw: &CalmRaw) -> Vec<MarginalEstimate> {
    (0..plan.queries.len())
        .map(|qi| {
            if plan.cover[qi].is_empty() {
                let cells = reconstruct(plan, &raw.marginals, qi);
                return MarginalEstimate { attrs: plan.queries[qi].clone(), cells, predicted_sse: None };
            }
            let cells = weighted_answer(plan, &raw.marginals, &raw.sizes, qi);
            let predicted_sse = plan.predicted_query_sse(qi, &raw.sizes, gini(&cells));
            MarginalEstimate { attrs: plan.queries[qi].clone(), cells, predicted_sse }
        })
        .collect()
}

/// How CALM post-processes its raw marginals.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Post {
    /// One non-negative joint distribution over the attributes of all the marginals, fitted by
    /// weighted least squares ([`joint::fit`]); when the joint table is too large, `Family`.
    Joint,
    /// A consistent, non-negative family of marginals ([`consistency::make_consistent`]).
    Family,
    /// The weighted (GLS) consistency pass only: consistent and summing to 1, cells may be
    /// negative ([`consistency::gls_consistent`]).
    Gls,
    /// The projection onto the consistent non-negative families in the fit's weighted norm
    /// (Dykstra; [`consistency::project_local`]).
    Local,
}

/// Post-processed marginals (one per set of the plan) and the method actually used.
#[derive(Debug, Clone, PartialEq)]
pub struct Postprocessed {
    /// One marginal per set of the plan.
    pub marginals: Vec<Vec<f64>>,
    /// The method used (`Joint` falls back to `Family` for a too large joint table).
    pub used: Post,
    /// Iterations of the joint fit or rounds of the local projection (0 otherwise).
    pub iterations: usize,
}

/// Per-cell variance of each raw marginal (noise + sampling with its bound 1 − 1/|D_j|): the
/// inverse weights of the post-processing.
pub fn cell_variances(plan: &CalmPlan, sizes: &[usize]) -> Vec<f64> {
    (0..plan.m())
        .map(|j| {
            let dj = plan.set_cells(j);
            let fo = FoParams::adaptive(plan.epsilon, dj).expect("validated ε");
            let n_j = sizes[j].max(1) as f64;
            (noise_sse(fo, dj, dj, n_j) + sampling_sse(1.0 - 1.0 / dj as f64, n_j, plan.n as f64)) / dj as f64
        })
        .collect()
}

/// Post-processes the raw marginals by `how` (see [`Post`]).
pub fn postprocess_with(plan: &CalmPlan, raw: &CalmRaw, how: Post) -> Postprocessed {
    let cell_var = cell_variances(plan, &raw.sizes);
    if how == Post::Joint
        && let Some(fit) = joint::fit(&plan.sets, &plan.cards, &raw.marginals, &cell_var, JointOptions::default())
    {
        let marginals = plan.sets.iter().map(|s| project(&fit.cells, &fit.attrs, &plan.cards, s)).collect();
        return Postprocessed { marginals, used: Post::Joint, iterations: fit.iterations };
    }
    let mut margs = raw.marginals.clone();
    let used = if how == Post::Gls {
        consistency::gls_consistent(&plan.sets, &plan.cards, &mut margs, &cell_var);
        Post::Gls
    } else if how == Post::Local {
        let rounds = consistency::project_local(&plan.sets, &plan.cards, &mut margs, &cell_var, 1000, 1e-8);
        return Postprocessed { marginals: margs, used: Post::Local, iterations: rounds };
    } else {
        consistency::make_consistent(&plan.sets, &plan.cards, &mut margs, &cell_var, 30, 1e-6);
        Post::Family
    };
    Postprocessed { marginals: margs, used, iterations: 0 }
}

/// Post-processes the raw marginals: mutually consistent, non-negative, each summing to 1
/// ([`Post::Joint`], falling back to [`Post::Family`]).
pub fn postprocess(plan: &CalmPlan, raw: &CalmRaw) -> Vec<Vec<f64>> {
    postprocess_with(plan, raw, Post::Joint).marginals
}

/// CALM's answers from post-processed marginals: a covered query is the projection of its
/// covering marginal (all covering marginals agree after post-processing); an uncovered one is
/// reconstructed by maximum entropy. The predicted SSE is that of the GLS-consistent estimate
/// ([`GlsModel`], plug-in component energies of the answer): exact for [`Post::Gls`]; for the
/// non-negative outputs an estimate of the error before the non-negativity step (measured
/// errors are usually lower, not predicted).
pub fn answer(plan: &CalmPlan, post: &[Vec<f64>], sizes: &[usize]) -> Vec<MarginalEstimate> {
    let model = plan.gls_model(sizes);
    (0..plan.queries.len())
        .map(|qi| {
            let q = &plan.queries[qi];
            match plan.cover[qi].first() {
                None => MarginalEstimate { attrs: q.clone(), cells: reconstruct(plan, post, qi), predicted_sse: None },
                Some(&j) => {
                    let cells = project(&post[j], &plan.sets[j], &plan.cards, q);
                    let cards: Vec<usize> = q.iter().map(|&a| plan.cards[a]).collect();
                    let energies = joint::component_energies(&cells, &cards);
                    let predicted_sse = model.query_sse(q, Some(&energies));
                    MarginalEstimate { attrs: q.clone(), cells, predicted_sse }
                }
            }
        })
        .collect()
}
