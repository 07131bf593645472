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
//! from the materialized l-way marginals (no closed-form error: predicted SSE `None`). Queries of
//! several sizes (2- and 3-way) are covered through the largest ones.
//!
//! # Post-processing and predictions
//! [`postprocess_with`] offers the GLS-consistent estimate ([`Post::Gls`], unbiased, predicted
//! exactly by [`GlsModel`]), one non-negative joint table fitted to all marginals
//! ([`Post::Joint`], the default when the table is small enough), a consistent non-negative
//! family ([`Post::Family`], the fallback) and the exact local-polytope projection
//! ([`Post::Local`]). The non-negative outputs are reported with the GLS prediction as a guide
//! (their measured errors are lower; not predicted).
//!
//! # Collection
//! The plan is public: a collection chooses it once ([`CalmPlan::choose_for`], from the
//! attributes, ε and the number of devices expected) and publishes its sets
//! ([`CalmPlan::with_sets`] rebuilds it). Each device draws its group itself and reports its cell
//! of that group's set ([`CalmPlan::randomizer`], [`super::groups`]); the server's accumulator
//! holds integer counts per group. [`estimate`] answers with the realized group sizes (n = Σ n_j,
//! the groups a uniformly random partition given their sizes — see [`super::groups`]), dropping
//! the groups that have no report yet. The planning predictions (`predicted_*_sse`) assume the
//! even split of the expected n.
//!
//! # Privacy
//! Each user reports once, one cell of one marginal, by an ε-LDP oracle: ε-LDP. The group
//! is drawn by the device independently of its data.

use super::consistency;
use super::groups::GroupRandomizer;
use super::joint::{self, JointOptions};
use super::{Dataset, FoParams, MAX_CELLS, MarginalEstimate, gini, ipf, noise_sse, project, sampling_sse};
use harmony_core::randomizer::Randomizer;
use harmony_core::{Aggregator, Error, FrequencyEstimate, Result};
use rand::Rng;
use std::collections::HashSet;

/// Options of [`CalmPlan::choose`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CalmOptions {
    /// Force the marginal size l (else chosen among k ..= k + `extra_l`).
    pub l: Option<usize>,
    /// How far above k the automatic choice of l looks.
    pub extra_l: usize,
    /// Largest number of cells of a materialized marginal (default [`MAX_CELLS`]: one device's
    /// OUE report of it fits the wire).
    pub max_cells: usize,
}

impl Default for CalmOptions {
    fn default() -> Self {
        CalmOptions { l: None, extra_l: 3, max_cells: MAX_CELLS }
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
    names: Vec<String>,
    /// The direct baseline: query i is answered from set i only.
    own_cover: bool,
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

fn label(names: &[String], q: &[usize]) -> String {
    q.iter().map(|&a| names[a].as_str()).collect::<Vec<_>>().join("×")
}

/// Checks that the queries are non-empty sorted lists of distinct attribute indices < d, each
/// with at most `max_cells` cells.
fn check_queries(names: &[String], cards: &[usize], queries: &[Vec<usize>], max_cells: usize) -> Result<()> {
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
        let dq = q.iter().try_fold(1usize, |acc, &a| acc.checked_mul(cards[a])).unwrap_or(usize::MAX);
        if dq > max_cells {
            return Err(Error::input(
                "query",
                format!("{} with {dq} cells", label(names, q)),
                format!("at most {max_cells} cells"),
            ));
        }
    }
    Ok(())
}

/// The attributes and the collection's size a plan is made for.
struct Frame<'a> {
    names: &'a [String],
    cards: &'a [usize],
    n: usize,
    epsilon: f64,
}

impl Frame<'_> {
    /// The plan materializing `sets` (covering: every set ⊇ the query, or with `own_cover` set
    /// i for query i), with its predicted totals for the even split of n.
    fn plan(&self, l: usize, sets: Vec<Vec<usize>>, queries: &[Vec<usize>], own_cover: bool) -> CalmPlan {
        let set_masks: Vec<u128> = sets.iter().map(|s| mask(s)).collect();
        let cover: Vec<Vec<usize>> = if own_cover {
            (0..queries.len()).map(|i| vec![i]).collect()
        } else {
            queries
                .iter()
                .map(|q| {
                    let qm = mask(q);
                    (0..sets.len()).filter(|&j| qm & !set_masks[j] == 0).collect()
                })
                .collect()
        };
        let mut plan = CalmPlan {
            epsilon: self.epsilon,
            n: self.n,
            l,
            sets,
            queries: queries.to_vec(),
            cover,
            predicted_total_sse: 0.0,
            predicted_gls_total_sse: 0.0,
            candidates: Vec::new(),
            cards: self.cards.to_vec(),
            names: self.names.to_vec(),
            own_cover,
        };
        let sizes = plan.group_sizes();
        plan.predicted_total_sse = (0..queries.len())
            .map(|qi| {
                let dq = plan.query_cells(qi);
                plan.predicted_query_sse(qi, &sizes, 1.0 - 1.0 / dq as f64).unwrap_or(0.0)
            })
            .sum();
        let model = plan.gls_model(&sizes);
        plan.predicted_gls_total_sse = queries.iter().map(|q| model.query_sse(q, None).unwrap_or(0.0)).sum();
        let (m, raw, gls) = (plan.m(), plan.predicted_total_sse, plan.predicted_gls_total_sse);
        plan.candidates = vec![Candidate { l, m, predicted_total_sse: raw, predicted_gls_total_sse: gls }];
        plan
    }
}

/// The queries the covering design must cover when l ≥ k: those not contained in another
/// query (a set covering a query covers its subsets), as masks.
fn maximal_targets(queries: &[Vec<usize>]) -> Vec<u128> {
    let masks: Vec<u128> = queries.iter().map(|q| mask(q)).collect();
    let mut out: Vec<u128> = Vec::new();
    for &m in &masks {
        if !out.contains(&m) && !masks.iter().any(|&o| o != m && m & !o == 0) {
            out.push(m);
        }
    }
    // The greedy design scores targets of one size: the largest first (in query order).
    let t = out.iter().map(|m| m.count_ones()).max().unwrap_or(0);
    let (big, small): (Vec<u128>, Vec<u128>) = out.into_iter().partition(|m| m.count_ones() == t);
    big.into_iter().chain(small).collect()
}

impl CalmPlan {
    /// Chooses the materialized marginals for `queries` over `data`'s attributes, n users, ε.
    /// Errors: ε invalid, no query, a query empty/unsorted/repeating an attribute/out of range,
    /// a query with more cells than `max_cells`, a forced l of 0 or above the number of
    /// attributes queried.
    pub fn choose(data: &Dataset, epsilon: f64, queries: &[Vec<usize>], opts: CalmOptions) -> Result<Self> {
        Self::choose_for(data.names(), data.cards(), data.n(), epsilon, queries, opts)
    }

    /// [`Self::choose`] from the attributes' names and cardinalities and the number of users
    /// expected (a collection plans before any device reports).
    pub fn choose_for(
        names: &[String],
        cards: &[usize],
        n: usize,
        epsilon: f64,
        queries: &[Vec<usize>],
        opts: CalmOptions,
    ) -> Result<Self> {
        FoParams::adaptive(epsilon, 2)?;
        check_queries(names, cards, queries, opts.max_cells)?;
        let frame = Frame { names, cards, n, epsilon };
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
            // Targets: the maximal queries, or (l < k) all l-subsets of the queries.
            let targets: Vec<u128> = if l >= k {
                maximal_targets(queries)
            } else {
                let mut ts: HashSet<u128> = HashSet::new();
                for q in queries {
                    for s in super::all_queries(q, l.min(q.len()), names)? {
                        ts.insert(mask(&s));
                    }
                }
                let mut v: Vec<u128> = ts.into_iter().collect();
                v.sort_unstable();
                v
            };
            let set_masks = greedy_cover(&targets, &pool, l, cards, epsilon, opts.max_cells);
            let plan = frame.plan(l, set_masks.iter().map(|&m| bits(m)).collect(), queries, false);
            candidates.extend(plan.candidates.iter().cloned());
            if best.as_ref().is_none_or(|b| plan.predicted_gls_total_sse < b.predicted_gls_total_sse) {
                best = Some(plan);
            }
        }
        let mut plan = best.expect("at least one candidate l");
        plan.candidates = candidates;
        Ok(plan)
    }

    /// The plan materializing the given `sets` (published by a collection, so devices never
    /// re-plan) for `queries`, n users. Errors: as [`Self::choose_for`], a set that is empty,
    /// unsorted, repeats an attribute, is out of range or has more than `max_cells` cells, and
    /// a queried attribute in no set.
    pub fn with_sets(
        names: &[String],
        cards: &[usize],
        n: usize,
        epsilon: f64,
        sets: Vec<Vec<usize>>,
        queries: &[Vec<usize>],
        max_cells: usize,
    ) -> Result<Self> {
        FoParams::adaptive(epsilon, 2)?;
        check_queries(names, cards, queries, max_cells)?;
        check_queries(names, cards, &sets, max_cells)
            .map_err(|e| Error::param("sets", e.to_string(), "attribute sets like the queries"))?;
        let held = sets.iter().fold(0u128, |m, s| m | mask(s));
        if let Some(q) = queries.iter().find(|q| mask(q) & !held != 0) {
            return Err(Error::param(
                "sets",
                format!("no set holding an attribute of {}", label(names, q)),
                "sets that together hold every queried attribute",
            ));
        }
        let l = sets.iter().map(Vec::len).max().unwrap_or(0);
        Ok(Frame { names, cards, n, epsilon }.plan(l, sets, queries, false))
    }

    /// The direct baseline as a plan: one set per query, each query answered from its own set
    /// only (no pooling, no post-processing). Errors: as [`Self::with_sets`].
    pub fn direct(
        names: &[String],
        cards: &[usize],
        n: usize,
        epsilon: f64,
        queries: &[Vec<usize>],
        max_cells: usize,
    ) -> Result<Self> {
        FoParams::adaptive(epsilon, 2)?;
        check_queries(names, cards, queries, max_cells)?;
        let l = queries.iter().map(Vec::len).max().unwrap_or(0);
        Ok(Frame { names, cards, n, epsilon }.plan(l, queries.to_vec(), queries, true))
    }

    /// The devices' randomizer of this plan: group j reports its cell of set j.
    pub fn randomizer(&self) -> Result<GroupRandomizer> {
        GroupRandomizer::new(&self.names, &self.cards, self.epsilon, &self.sets)
    }

    /// The plan restricted to the sets `keep` (the groups that received reports), for `n`
    /// devices: covers are those of the plan among the kept sets.
    pub fn restricted(&self, keep: &[usize], n: usize) -> CalmPlan {
        let mut index = vec![usize::MAX; self.m()];
        keep.iter().enumerate().for_each(|(i, &j)| index[j] = i);
        let cover = self
            .cover
            .iter()
            .map(|c| c.iter().filter(|&&j| index[j] != usize::MAX).map(|&j| index[j]).collect())
            .collect();
        CalmPlan { n, sets: keep.iter().map(|&j| self.sets[j].clone()).collect(), cover, ..self.clone() }
    }

    /// The attribute names.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The attributes' cardinalities.
    pub fn cards(&self) -> &[usize] {
        &self.cards
    }

    /// Number of materialized marginals (user groups).
    pub fn m(&self) -> usize {
        self.sets.len()
    }

    /// The even split of n users into m groups (the expected group sizes, used for planning;
    /// estimates use the realized sizes).
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

    /// The variance of each cell of the raw weighted answer to query qi with the cells' shares
    /// `cells` plugged in (clamped to [0, 1]): for a cell C of share F, summing g cells of set j,
    /// the noise of set j is [q'(1−q') + F(p'(1−p') − q'(1−q'))]/(n_j(p−q)²) (GRR, p' = p +
    /// (g−1)q, q' = gq) or [g·q(1−q) + F(p(1−p) − q(1−q))]/(n_j(p−q)²) (OUE); with the sampling
    /// variance F(1−F)(n−n_j)/(n_j(n−1)) and covariance −F(1−F)/(n−1) between groups,
    /// Var = [Σ w_j²(N_j + S_j) − F(1−F)/(n−1)((Σw)² − Σw²)]/(Σw)². Summed over the cells, it is
    /// [`Self::predicted_query_sse`] with s = 1 − ΣF².
    pub fn raw_cell_variances(&self, qi: usize, sizes: &[usize], cells: &[f64]) -> Vec<f64> {
        let n = self.n as f64;
        let dq = self.query_cells(qi);
        let parts: Vec<(f64, FoParams, f64, f64)> = self.cover[qi]
            .iter()
            .map(|&j| {
                let dj = self.set_cells(j);
                let fo = FoParams::adaptive(self.epsilon, dj).expect("validated ε");
                (self.weight(j, qi, sizes), fo, (dj / dq) as f64, sizes[j].max(1) as f64)
            })
            .collect();
        let wsum: f64 = parts.iter().map(|p| p.0).sum();
        let w2sum: f64 = parts.iter().map(|p| p.0 * p.0).sum();
        cells
            .iter()
            .map(|&f| {
                let f = f.clamp(0.0, 1.0);
                let s = f * (1.0 - f);
                let mut acc = 0.0;
                for &(w, fo, g, n_j) in &parts {
                    let (p, q, base) = if fo.grr {
                        let q = g * fo.q;
                        (fo.p + (g - 1.0) * fo.q, q, q * (1.0 - q))
                    } else {
                        (fo.p, fo.q, g * fo.q * (1.0 - fo.q))
                    };
                    let noise = (base + f * (p * (1.0 - p) - q * (1.0 - q))) / (n_j * (fo.p - fo.q).powi(2));
                    let samp = if n > 1.0 { s * (n - n_j) / (n_j * (n - 1.0)) } else { 0.0 };
                    acc += w * w * (noise + samp);
                }
                let cross = if n > 1.0 { s / (n - 1.0) * (wsum * wsum - w2sum) } else { 0.0 };
                ((acc - cross) / (wsum * wsum)).max(0.0)
            })
            .collect()
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

impl CalmRaw {
    /// From the groups' frequency estimates ([`super::groups::GroupAggregator`]'s output).
    pub fn from_estimates(groups: &[FrequencyEstimate]) -> Self {
        CalmRaw {
            marginals: groups.iter().map(|e| e.frequencies.clone()).collect(),
            sizes: groups.iter().map(|e| e.n as usize).collect(),
        }
    }
}

/// Simulated collection: every record of `data` is a device that draws its group and randomizes
/// its cell ([`CalmPlan::randomizer`]) with `rng`; the groups' accumulators give the raw
/// marginals with the realized group sizes. Errors: a record that does not fit the plan.
pub fn collect<R: Rng>(plan: &CalmPlan, data: &Dataset, rng: &mut R) -> Result<CalmRaw> {
    let device = plan.randomizer()?;
    let mut agg = device.aggregator();
    for i in 0..data.n() {
        agg.add_unchecked(&device.randomize(data.record(i), rng)?);
    }
    Ok(CalmRaw::from_estimates(&agg.estimate()))
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
/// Each cell's standard error is [`CalmPlan::raw_cell_variances`] at the answer.
pub fn answer_raw(plan: &CalmPlan, raw: &CalmRaw) -> Vec<MarginalEstimate> {
    (0..plan.queries.len())
        .map(|qi| {
            let attrs = plan.queries[qi].clone();
            if plan.cover[qi].is_empty() {
                let cells = reconstruct(plan, &raw.marginals, qi);
                return MarginalEstimate { attrs, cells, predicted_sse: None, std_errors: None };
            }
            let cells = weighted_answer(plan, &raw.marginals, &raw.sizes, qi);
            let predicted_sse = plan.predicted_query_sse(qi, &raw.sizes, gini(&cells));
            let se = plan.raw_cell_variances(qi, &raw.sizes, &cells).into_iter().map(f64::sqrt).collect();
            MarginalEstimate { attrs, cells, predicted_sse, std_errors: Some(se) }
        })
        .collect()
}

/// CALM's answers to a collection: one per query, and the post-processing run.
#[derive(Debug, Clone, PartialEq)]
pub struct Answers {
    /// One per query of the plan; `None` when the query cannot be estimated: no report at all,
    /// or (some groups without reports) no covering set left and an attribute of the query in
    /// none of the sets that have reports (or a direct plan, which never reconstructs).
    pub marginals: Vec<Option<MarginalEstimate>>,
    /// The post-processing run (`None`: the raw answers; `Joint` falls back to `Family`).
    pub used: Option<Post>,
    /// Iterations of the joint fit or rounds of the local projection (0 otherwise).
    pub iterations: usize,
}

/// The answers of a collection whose groups received `raw.sizes` reports: the plan is taken
/// with n = Σ n_j and restricted to the groups that have reports ([`CalmPlan::restricted`]),
/// then answered raw (`post` = `None`, [`answer_raw`]) or post-processed ([`postprocess_with`],
/// [`answer`]).
pub fn estimate(plan: &CalmPlan, raw: &CalmRaw, post: Option<Post>) -> Answers {
    let n: usize = raw.sizes.iter().sum();
    if n == 0 {
        return Answers { marginals: vec![None; plan.queries.len()], used: None, iterations: 0 };
    }
    let keep: Vec<usize> = (0..plan.m()).filter(|&j| raw.sizes[j] > 0).collect();
    let plan = plan.restricted(&keep, n);
    let raw = CalmRaw {
        marginals: keep.iter().map(|&j| raw.marginals[j].clone()).collect(),
        sizes: keep.iter().map(|&j| raw.sizes[j]).collect(),
    };
    let (answers, used, iterations) = match post {
        None => (answer_raw(&plan, &raw), None, 0),
        Some(how) => {
            let p = postprocess_with(&plan, &raw, how);
            (answer(&plan, &p.marginals, &raw.sizes), Some(p.used), p.iterations)
        }
    };
    let estimable = |qi: usize| {
        !plan.cover[qi].is_empty()
            || (!plan.own_cover && plan.queries[qi].iter().all(|a| plan.sets.iter().any(|s| s.contains(a))))
    };
    let marginals = answers.into_iter().enumerate().map(|(qi, a)| estimable(qi).then_some(a)).collect();
    Answers { marginals, used, iterations }
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
                None => MarginalEstimate {
                    attrs: q.clone(),
                    cells: reconstruct(plan, post, qi),
                    predicted_sse: None,
                    std_errors: None,
                },
                Some(&j) => {
                    let cells = project(&post[j], &plan.sets[j], &plan.cards, q);
                    let cards: Vec<usize> = q.iter().map(|&a| plan.cards[a]).collect();
                    let energies = joint::component_energies(&cells, &cards);
                    let predicted_sse = model.query_sse(q, Some(&energies));
                    MarginalEstimate { attrs: q.clone(), cells, predicted_sse, std_errors: None }
                }
            }
        })
        .collect()
}
