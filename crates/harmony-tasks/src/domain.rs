//! Estimates inside their domain, and warnings for imprecise ones: the post-processing every
//! task's estimate document gets (see [`harmony_protocol::estimates`]' module docs).
//!
//! The raw estimates are never changed; each number whose raw value or interval leaves its
//! domain gets an `in_domain` value beside it:
//!
//! * frequencies (a categorical attribute, the frequency task): the Euclidean projection onto
//!   the probability simplex ([`project_simplex`]). The truth lies on the simplex, a convex set,
//!   so the projection is never farther from it than the raw vector: its squared error is at most
//!   the raw one's in every run, not only on average (Norm-Sub has no such guarantee when the
//!   positive estimates sum to less than 1). The present-value frequencies get their own
//!   projection; the missing share takes the projected "(missing)" frequency.
//! * means: clamped to the attribute's [min, max] (the unit-scale mean to [−1, 1]);
//! * the CDF: the isotonic regression of the points (pool-adjacent-violators), clamped to
//!   [0, 1] (the projection onto the non-decreasing sequences in [0, 1]); ranges' shares and
//!   heavy hitters' shares clamped to [0, 1];
//! * marginals whose cells can be negative (`raw`, `gls`, `direct`, `fourier`): made consistent
//!   and non-negative together by [`make_consistent`] (the CALM post-processing); the others are
//!   already;
//! * linear queries: the `projected` answer where there is one, else the answer clamped to the
//!   range of the query's weights (the answers' possible values).
//!
//! Every in-domain interval is the raw one clamped to the domain and widened to contain the
//! in-domain point. Warnings follow [`PrecisionWarning::check`].

use harmony_analytics::marginals::consistency::make_consistent;
use harmony_core::postprocess::project_simplex;
use harmony_core::schema::{Attribute, Schema};
use harmony_protocol::estimates::{
    AttributeResult, CategoryResult, Est, FrequencyEstimate, HeavyHittersEstimate, InDomain, LinearEstimate,
    MarginalsEstimate, MeansEstimate, PrecisionWarning, RangeEstimate,
};

/// Sets `e`'s in-domain value to `value` (already in [lo, hi]) with the raw interval clamped to
/// [lo, hi] and widened to contain it; only when either differs from the raw one. Returns
/// whether it did.
fn place(e: &mut Est, value: f64, lo: f64, hi: f64) -> bool {
    let Some(raw) = e.estimate else { return false };
    let ci = e.ci95.map(|[a, b]| [a.clamp(lo, hi).min(value), b.clamp(lo, hi).max(value)]);
    if raw == value && ci == e.ci95 {
        e.in_domain = None;
        return false;
    }
    e.in_domain = Some(InDomain { estimate: value, ci95: ci });
    true
}

/// [`place`] with the raw estimate clamped to [lo, hi].
pub(crate) fn clamp(e: &mut Est, lo: f64, hi: f64) -> bool {
    match e.estimate {
        Some(x) => place(e, x.clamp(lo, hi), lo, hi),
        None => false,
    }
}

/// Frequencies projected onto the simplex (when every one has an estimate). Returns whether any
/// in-domain value was set.
fn simplex(cats: &mut [CategoryResult]) -> bool {
    let raw: Option<Vec<f64>> = cats.iter().map(|c| c.frequency.estimate).collect();
    let Some(raw) = raw.filter(|r| !r.is_empty()) else { return false };
    let p = project_simplex(&raw);
    let mut changed = false;
    for (c, x) in cats.iter_mut().zip(p) {
        changed |= place(&mut c.frequency, x, 0.0, 1.0);
    }
    changed
}

/// The largest standard error among `ests` (NaN when none has one).
pub(crate) fn max_se<'a>(ests: impl IntoIterator<Item = &'a Est>) -> f64 {
    ests.into_iter().filter_map(|e| e.std_error).fold(f64::NAN, f64::max)
}

const SIMPLEX_NOTE: &str = "frequencies projected onto the probability simplex";

/// The note naming the steps that changed something (`None` when nothing did).
pub(crate) fn note(steps: &[(bool, &str)]) -> Option<String> {
    let used: Vec<&str> = steps.iter().filter(|(c, _)| *c).map(|(_, s)| *s).collect();
    (!used.is_empty())
        .then(|| format!("in-domain values: {}; the raw unbiased estimates are in `estimate`", used.join("; ")))
}

/// A categorical attribute's frequencies, present-value frequencies and missing share.
fn categorical(
    cats: &mut [CategoryResult],
    present: Option<&mut Vec<CategoryResult>>,
    missing: Option<&mut Est>,
) -> bool {
    let mut changed = simplex(cats);
    if let Some(p) = present {
        changed |= simplex(p);
    }
    if let (Some(m), Some(last)) = (missing, cats.last()) {
        match last.frequency.in_domain {
            Some(d) => changed |= place(m, d.estimate, 0.0, 1.0),
            None => changed |= clamp(m, 0.0, 1.0),
        }
    }
    changed
}

/// The means task: numeric means clamped, frequencies projected; a warning per attribute.
pub fn means(doc: &mut MeansEstimate, schema: &Schema, reports: u64) {
    let (mut clamped, mut projected) = (false, false);
    for (a, r) in schema.attributes().iter().zip(doc.attributes.iter_mut()) {
        match (a, r) {
            (Attribute::Numeric { min, max, .. }, AttributeResult::Numeric { name, mean, unit, missing }) => {
                clamped |= clamp(mean, *min, *max) | clamp(unit, -1.0, 1.0);
                if let Some(m) = missing {
                    clamped |= clamp(m, 0.0, 1.0);
                }
                doc.warnings.extend(PrecisionWarning::check(name, mean.se(), max - min, reports));
            }
            (_, AttributeResult::Categorical { name, categories, missing, present }) => {
                projected |= categorical(categories, present.as_mut(), missing.as_mut());
                let se = max_se(categories.iter().map(|c| &c.frequency));
                doc.warnings.extend(PrecisionWarning::check(name, se, 1.0, reports));
            }
            _ => {}
        }
    }
    doc.in_domain_note = note(&[(clamped, "means and their CIs clamped to [min, max]"), (projected, SIMPLEX_NOTE)]);
}

/// The frequency task: the frequencies projected onto the simplex.
pub fn frequency(doc: &mut FrequencyEstimate, reports: u64) {
    let changed = categorical(&mut doc.categories, doc.present.as_mut(), doc.missing.as_mut());
    doc.in_domain_note = note(&[(changed, SIMPLEX_NOTE)]);
    let se = max_se(doc.categories.iter().map(|c| &c.frequency));
    doc.warnings.extend(PrecisionWarning::check(&doc.attribute, se, 1.0, reports));
}

/// The isotonic (non-decreasing) least-squares fit of `y` by pool-adjacent-violators.
pub fn isotonic(y: &[f64]) -> Vec<f64> {
    // Blocks of (mean, size).
    let mut blocks: Vec<(f64, usize)> = Vec::with_capacity(y.len());
    for &v in y {
        blocks.push((v, 1));
        while blocks.len() > 1 && blocks[blocks.len() - 2].0 > blocks[blocks.len() - 1].0 {
            let (m2, n2) = blocks.pop().expect("two blocks");
            let (m1, n1) = blocks.pop().expect("two blocks");
            let n = n1 + n2;
            blocks.push(((m1 * n1 as f64 + m2 * n2 as f64) / n as f64, n));
        }
    }
    blocks.into_iter().flat_map(|(m, n)| std::iter::repeat_n(m, n)).collect()
}

/// The range task: the CDF made monotone in [0, 1], the ranges' shares clamped to [0, 1]. The
/// quantiles are bins, inside the column's range by construction.
pub fn range(doc: &mut RangeEstimate, reports: u64) {
    let raw: Option<Vec<f64>> = doc.cdf.iter().map(|p| p.value.estimate).collect();
    let mut monotone = false;
    if let Some(raw) = raw {
        for (p, x) in doc.cdf.iter_mut().zip(isotonic(&raw)) {
            monotone |= place(&mut p.value, x.clamp(0.0, 1.0), 0.0, 1.0);
        }
    }
    let mut clamped = false;
    for r in &mut doc.ranges {
        clamped |= clamp(&mut r.share, 0.0, 1.0);
    }
    doc.in_domain_note = note(&[
        (monotone, "the CDF made non-decreasing (isotonic regression) and clamped to [0, 1]"),
        (clamped, "ranges' shares clamped to [0, 1]"),
    ]);
    let se = max_se(doc.cdf.iter().map(|p| &p.value).chain(doc.ranges.iter().map(|r| &r.share)));
    doc.warnings.extend(PrecisionWarning::check(&doc.attribute, se, 1.0, reports));
}

/// The heavy-hitters task: each share clamped to [0, 1].
pub fn heavy(doc: &mut HeavyHittersEstimate, reports: u64) {
    let mut clamped = false;
    for h in &mut doc.items {
        clamped |= clamp(&mut h.frequency, 0.0, 1.0);
    }
    doc.in_domain_note = note(&[(clamped, "shares clamped to [0, 1]")]);
    let se = max_se(doc.items.iter().map(|h| &h.frequency));
    doc.warnings.extend(PrecisionWarning::check("heavy hitters", se, 1.0, reports));
}

/// The marginals' attribute sets (indices into the union of their attributes, in order of
/// appearance) and every attribute's cardinality.
fn marginal_sets(doc: &MarginalsEstimate) -> (Vec<Vec<usize>>, Vec<usize>) {
    let mut names: Vec<&str> = Vec::new();
    let mut cards = Vec::new();
    let sets = doc
        .marginals
        .iter()
        .map(|m| {
            m.attributes
                .iter()
                .zip(&m.labels)
                .map(|(a, l)| match names.iter().position(|n| n == a) {
                    Some(i) => i,
                    None => {
                        names.push(a);
                        cards.push(l.len());
                        names.len() - 1
                    }
                })
                .collect()
        })
        .collect();
    (sets, cards)
}

/// The marginals task: cells that can be negative made consistent and non-negative together.
pub fn marginals(doc: &mut MarginalsEstimate, reports: u64) {
    let cells: Option<Vec<Vec<f64>>> =
        doc.marginals.iter().map(|m| m.cells.iter().map(|c| c.estimate).collect()).collect();
    let negative = cells.as_ref().is_some_and(|c| c.iter().flatten().any(|&x| x < 0.0));
    let mut changed = false;
    if let (Some(mut fitted), true) = (cells, negative) {
        let (sets, cards) = marginal_sets(doc);
        let var: Vec<f64> = doc
            .marginals
            .iter()
            .map(|m| {
                let v = m.predicted_sse.unwrap_or(f64::NAN) / m.cells.len() as f64;
                if v.is_finite() && v > 0.0 { v } else { 1.0 }
            })
            .collect();
        make_consistent(&sets, &cards, &mut fitted, &var, 10, 1e-12);
        for (m, f) in doc.marginals.iter_mut().zip(fitted) {
            for (c, x) in m.cells.iter_mut().zip(f) {
                changed |= place(c, x.clamp(0.0, 1.0), 0.0, 1.0);
            }
        }
    }
    let mut clamped = false;
    for c in doc.marginals.iter_mut().flat_map(|m| m.cells.iter_mut()).filter(|c| c.in_domain.is_none()) {
        clamped |= clamp(c, 0.0, 1.0);
    }
    doc.in_domain_note = note(&[
        (changed, "cells made consistent and non-negative (norm-sub alternating with consistency)"),
        (clamped, "intervals clamped to [0, 1]"),
    ]);
    for m in &doc.marginals {
        let se = max_se(&m.cells);
        doc.warnings.extend(PrecisionWarning::check(&m.attributes.join(" × "), se, 1.0, reports));
    }
}

/// The linear-queries task: each answer in the range of its query's weights, `bounds[t]`
/// ([min, max] of row t).
pub fn linear(doc: &mut LinearEstimate, bounds: &[[f64; 2]], reports: u64) {
    let mut changed = false;
    for (q, &[lo, hi]) in doc.queries.iter_mut().zip(bounds) {
        changed |= match q.projected {
            Some(p) => place(&mut q.answer, p.clamp(lo, hi), lo, hi),
            None => clamp(&mut q.answer, lo, hi),
        };
        doc.warnings.extend(PrecisionWarning::check(&q.name, q.answer.se(), hi - lo, reports));
    }
    doc.in_domain_note =
        note(&[(changed, "answers within their weights' range (the projected answer where there is one)")]);
}
