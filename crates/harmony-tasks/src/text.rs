//! Estimate documents as text tables, every task's: what `harmony query` prints, and `harmony
//! simulate` beside the truth; the truth itself, and how many cells the CIs cover. (JSON output
//! is the document itself.)

use crate::Input;
use crate::linear::LinearTask;
use crate::marginals::MarginalsTask;
use crate::range::RangeTask;
use harmony_analytics::range::cumulative;
use harmony_core::schema::{Attribute, Schema, Value};
use harmony_core::{Error, Result};
use harmony_protocol::estimates::TrainEstimate;
use harmony_protocol::estimates::{
    AttributeResult, CategoryResult, Est, EstimateDocument, HeavyHittersEstimate, LinearEstimate, MarginalResult,
    MarginalsEstimate, Range2dEstimate, RangeEstimate, TaskEstimate,
};
use harmony_protocol::{CollectionConfig, TaskSpec};
use std::fmt::Write as _;

/// `writeln!` into a `String`, which cannot fail.
macro_rules! wln {
    ($out:expr, $($arg:tt)*) => {
        let _ = writeln!($out, $($arg)*);
    };
}

/// The true values a document estimates, from the data (simulations, `query --data`).
#[derive(Debug, Clone, serde::Serialize)]
#[serde(untagged)]
pub enum Truth {
    /// Per attribute: the mean (units) or the category frequencies.
    Means(Vec<Vec<f64>>),
    /// One attribute's frequencies.
    Frequency(Vec<f64>),
    /// Heavy hitters: by code (hex, as in the document), the items on it and their share.
    Items(std::collections::BTreeMap<String, (String, f64)>),
    /// Marginals: by attributes, the true cells (row-major, the last attribute fastest).
    Marginals(Vec<(Vec<String>, Vec<f64>)>),
    /// `range`: the true fraction of devices in each bin.
    Range {
        /// One per bin.
        bins: Vec<f64>,
    },
    /// `range2d`: the true share of devices in each finest cell.
    Grid {
        /// Cell (x bin i, y bin j) at `j · bins + i`.
        cells: Vec<f64>,
    },
    /// `linear-queries`: the true answers A·p.
    Linear {
        /// One per query.
        answers: Vec<f64>,
    },
}

/// The true fraction of devices in each of a range task's bins.
pub fn range_bins(task: &RangeTask, inputs: &[Input<'_>]) -> Result<Vec<f64>> {
    let bins = inputs.iter().map(|i| task.bin(i)).collect::<Result<Vec<_>, _>>()?;
    Ok(harmony_analytics::range::true_freqs(&bins, task.bins()))
}

/// The devices' distribution over a linear-queries task's domain.
pub fn linear_distribution(task: &LinearTask, inputs: &[Input<'_>]) -> Result<Vec<f64>> {
    let values = inputs.iter().map(|i| task.index(i)).collect::<Result<Vec<_>, _>>()?;
    harmony_analytics::linear::distribution(&values, task.domain().size())
}

/// Per attribute: the true mean (original units; of the present values when the attribute
/// reports missing values) or the true category frequencies.
pub fn record_truth(schema: &Schema, values: &[Value]) -> Vec<Vec<f64>> {
    let d = schema.len();
    let n = (values.len() / d).max(1) as f64;
    schema
        .attributes()
        .iter()
        .enumerate()
        .map(|(j, a)| match a {
            Attribute::Numeric { min, max, .. } => {
                let present = |r: &[Value]| schema.presence_of(j).is_none_or(|p| r[p] == Value::Category(0));
                let (s, k) = values
                    .chunks(d)
                    .filter(|r| present(r))
                    .fold((0.0, 0.0), |(s, k), r| (s + if let Value::Unit(t) = r[j] { t } else { 0.0 }, k + 1.0));
                vec![0.5 * (max - min) * s / f64::max(k, 1.0) + 0.5 * (max + min)]
            }
            Attribute::Categorical { categories, .. } => {
                let mut c = vec![0.0; categories.len()];
                for r in values.chunks(d) {
                    if let Value::Category(v) = r[j] {
                        c[v as usize] += 1.0 / n;
                    }
                }
                c
            }
        })
        .collect()
}

/// The true cells of marginal `m` over the rows `values` (row-major, `d` values a row), in the
/// document's cell order (row-major, the last attribute fastest).
pub fn true_cells(task: &MarginalsTask, values: &[Value], d: usize, m: &MarginalResult) -> Result<Vec<f64>> {
    let names = task.spec().attributes.clone().unwrap_or_default();
    let pos: Vec<usize> = m
        .attributes
        .iter()
        .map(|a| {
            names.iter().position(|n| n == a).ok_or_else(|| Error::input("marginal attribute", a, "one of the task's"))
        })
        .collect::<Result<_>>()?;
    let cards: Vec<usize> = m.labels.iter().map(Vec::len).collect();
    let mut cells = vec![0.0; cards.iter().product()];
    let rows = values.chunks_exact(d);
    let w = 1.0 / rows.len().max(1) as f64;
    for row in rows {
        let codes = task.codes(row)?;
        let cell = pos.iter().zip(&cards).fold(0usize, |acc, (&p, &c)| acc * c + codes[p] as usize);
        cells[cell] += w;
    }
    Ok(cells)
}

/// The truth of a document's task on the rows devices hold (`values`, row-major; `inputs`, the
/// same rows as task inputs): every task that reads a record. `None` for heavy hitters (their
/// truth is the items of a column) and training (a model has none).
pub fn truth_of_rows(
    config: &CollectionConfig,
    doc: &EstimateDocument,
    values: &[Value],
    inputs: &[Input<'_>],
) -> Result<Option<Truth>> {
    let schema = config.schema()?;
    Ok(match (&config.task, &doc.result) {
        (TaskSpec::Means(_), _) => Some(Truth::Means(record_truth(schema, values))),
        (TaskSpec::Frequency(f), _) => {
            let j = schema
                .attributes()
                .iter()
                .position(|a| a.name() == f.attribute)
                .ok_or_else(|| Error::input("attribute", &f.attribute, "an attribute of the schema"))?;
            Some(Truth::Frequency(record_truth(schema, values).swap_remove(j)))
        }
        (TaskSpec::Range(_), _) => {
            let task = RangeTask::new(config.clone())?;
            Some(Truth::Range { bins: range_bins(&task, inputs)? })
        }
        (TaskSpec::Range2d(_), _) => Some(crate::range2d::Range2dTask::new(config.clone())?.truth(inputs)?),
        (TaskSpec::LinearQueries(_), _) => {
            let task = LinearTask::new(config.clone())?;
            let p = linear_distribution(&task, inputs)?;
            Some(Truth::Linear { answers: task.workload().apply(&p) })
        }
        (TaskSpec::Marginals(_), TaskEstimate::Marginals(m)) => {
            let task = MarginalsTask::new(config.clone())?;
            let cells = m
                .marginals
                .iter()
                .map(|r| Ok((r.attributes.clone(), true_cells(&task, values, schema.len(), r)?)))
                .collect::<Result<_>>()?;
            Some(Truth::Marginals(cells))
        }
        _ => None,
    })
}

fn ci(e: &Est, digits: usize) -> String {
    e.shown_ci().map(|[a, b]| format!("[{a:.digits$}, {b:.digits$}]")).unwrap_or_else(|| "-".into())
}

fn num(x: Option<f64>, digits: usize) -> String {
    x.map(|v| format!("{v:.digits$}")).unwrap_or_else(|| "-".into())
}

/// The rows of an estimates table, printed together: the label column as wide as the longest
/// label (labels are never cut, so no two rows look alike), the truth column only when some row
/// has a truth.
#[derive(Default)]
struct Rows {
    rows: Vec<(String, [String; 3], Option<String>)>,
}

impl Rows {
    fn row(&mut self, label: String, e: &Est, truth: Option<f64>, digits: usize) {
        let cells = [num(e.shown(), digits), num(e.std_error, digits), ci(e, digits.min(4))];
        self.rows.push((label, cells, truth.map(|t| format!("{t:.digits$}"))));
        // Where the in-domain value differs from the raw one: the raw (unbiased) estimate and
        // its interval on the next line (not where the two print alike, as after a projection
        // that moved a value by 1e-16).
        if e.in_domain.is_some() {
            let raw = Est { in_domain: None, ..*e };
            let cells = [num(raw.estimate, digits), String::new(), ci(&raw, digits.min(4))];
            let shown = &self.rows.last().expect("just pushed").1;
            if cells[0] != shown[0] || cells[2] != shown[2] {
                self.rows.push(("  (raw, unbiased)".into(), cells, None));
            }
        }
    }

    /// The header and the rows as text; empties the table.
    fn text(&mut self) -> String {
        let w = self.rows.iter().map(|r| r.0.chars().count()).max().unwrap_or(0).max(34);
        let truth = self.rows.iter().any(|r| r.2.is_some());
        let line = |label: &str, [e, se, ci]: [&str; 3], t: Option<&str>| match truth {
            true => format!("{label:<w$} {e:>12} {se:>10} {ci:>25} {:>12}\n", t.unwrap_or("")),
            false => format!("{label:<w$} {e:>12} {se:>10} {ci:>25}\n"),
        };
        let mut out = line("estimate of", ["estimate", "std err", "95% CI"], Some("truth"));
        for (label, [e, se, ci], t) in std::mem::take(&mut self.rows) {
            out.push_str(&line(&label, [&e, &se, &ci], t.as_deref()));
        }
        out
    }

    /// Appends the header and the rows to `out`, and empties the table.
    fn write(&mut self, out: &mut String) {
        out.push_str(&self.text());
    }
}

/// The document's note on in-domain values and its precision warnings.
fn write_notes(out: &mut String, doc: &EstimateDocument) {
    let (note, warnings) = doc.result.notes();
    if let Some(n) = note {
        wln!(out, "note: {n}");
    }
    for w in warnings {
        wln!(out, "warning: {}", w.message);
    }
}

/// The frequencies among present values (an attribute with `missing = "report"`): the truth
/// is each label's share over the share not missing (the last category).
fn present_rows(rows: &mut Rows, name: &str, present: Option<&[CategoryResult]>, truth: Option<&[f64]>) {
    let Some(present) = present else { return };
    let kept = truth.and_then(|t| t.last()).map(|m| 1.0 - m);
    for (v, c) in present.iter().enumerate() {
        let t = truth.zip(kept).map(|(t, k)| t[v] / k);
        rows.row(format!("{name}={} | present", c.label), &c.frequency, t, 4);
    }
}

/// A document as a table, with the truth beside it when given, then its notes and warnings.
pub fn table(doc: &EstimateDocument, truth: Option<&Truth>) -> String {
    let mut out = String::new();
    let out = &mut out;
    let head = format!("collection {}: {} reports at ε = {}", doc.collection, doc.reports, doc.epsilon);
    match (&doc.result, truth) {
        (TaskEstimate::Means(m), t) => {
            wln!(out, "{head}, means ({})", m.strategy);
            let t = match t {
                Some(Truth::Means(t)) => Some(t),
                _ => None,
            };
            let mut rows = Rows::default();
            for (j, a) in m.attributes.iter().enumerate() {
                match a {
                    AttributeResult::Numeric { name, mean, missing, .. } => {
                        let what = if missing.is_some() { "mean of present" } else { "mean" };
                        rows.row(format!("{name} ({what})"), mean, t.map(|t| t[j][0]), 4)
                    }
                    AttributeResult::Categorical { name, categories, present, .. } => {
                        for (v, c) in categories.iter().enumerate() {
                            rows.row(format!("{name}={}", c.label), &c.frequency, t.map(|t| t[j][v]), 4);
                        }
                        present_rows(&mut rows, name, present.as_deref(), t.map(|t| t[j].as_slice()));
                    }
                }
            }
            rows.write(out);
        }
        (TaskEstimate::Frequency(f), t) => {
            wln!(out, "{head}, frequencies of {} ({})", f.attribute, f.mechanism);
            let t = match t {
                Some(Truth::Frequency(t)) => Some(t),
                _ => None,
            };
            let mut rows = Rows::default();
            for (v, c) in f.categories.iter().enumerate() {
                rows.row(format!("{}={}", f.attribute, c.label), &c.frequency, t.map(|t| t[v]), 4);
            }
            present_rows(&mut rows, &f.attribute, f.present.as_deref(), t.map(|t| t.as_slice()));
            rows.write(out);
        }
        (TaskEstimate::Range(r), t) => write_range(out, &head, r, t),
        (TaskEstimate::Range2d(r), t) => write_range2d(out, &head, r, t),
        (TaskEstimate::LinearQueries(l), t) => write_linear(out, &head, l, t),
        (TaskEstimate::HeavyHitters(h), t) => write_heavy(out, &head, h, t),
        (TaskEstimate::Marginals(m), t) => write_marginals(out, &head, m, t),
        (TaskEstimate::Train(tr), _) => write_model(out, doc, tr),
    }
    write_notes(out, doc);
    std::mem::take(out)
}

/// A training collection's document: the round, the gradients received and the model.
fn write_model(out: &mut String, doc: &EstimateDocument, t: &TrainEstimate) {
    let m = &t.state;
    wln!(
        out,
        "collection {}: round {}{}, {} of {} gradients in the round, {} in all, ε = {}",
        doc.collection,
        m.round,
        if m.done { " (training done)" } else { "" },
        m.received,
        m.batch_size,
        doc.reports,
        doc.epsilon
    );
    wln!(out, "{:<40} {:>12}", "feature", "coefficient");
    for (f, w) in t.features.iter().zip(&m.model) {
        let f: String = f.chars().take(40).collect();
        wln!(out, "{f:<40} {w:>12.6}");
    }
}

/// The cumulative true bin fractions of a range document (when the truth has its bins).
fn range_cum(r: &RangeEstimate, truth: Option<&Truth>) -> Option<Vec<f64>> {
    match truth {
        Some(Truth::Range { bins }) if bins.len() == r.bins => Some(cumulative(bins)),
        _ => None,
    }
}

/// A range document: the ranges asked, the CDF (at most 17 of its points; all in JSON), the
/// quantiles.
fn write_range(out: &mut String, head: &str, r: &RangeEstimate, truth: Option<&Truth>) {
    let [lo, hi] = r.bounds;
    wln!(out, "{head}, ranges of {} ({}, {} bins over [{lo}, {hi}])", r.attribute, r.method, r.bins);
    wln!(out, "reports per level: {:?}", r.level_reports);
    let cum = range_cum(r, truth);
    let mut rows = Rows::default();
    for x in &r.ranges {
        let t = cum.as_ref().map(|c| c[x.bins[1]] - c[x.bins[0]]);
        rows.row(format!("share in [{}, {})", x.range[0], x.range[1]), &x.share, t, 4);
    }
    let step = r.cdf.len().div_ceil(16).max(1);
    let last = r.cdf.len().saturating_sub(1);
    for (_, p) in r.cdf.iter().enumerate().filter(|(i, _)| i % step == 0 || *i == last) {
        rows.row(format!("P[{} < {}]", r.attribute, fmt_units(p.x)), &p.value, cum.as_ref().map(|c| c[p.bin]), 4);
    }
    rows.write(out);
    let true_bin = if cum.is_some() { "true bin" } else { "" };
    wln!(out, "{:<34} {:>24} {:>28} {true_bin:>12}", "quantile", "bin (units)", "95% interval (units)");
    let truth_bins = match truth {
        Some(Truth::Range { bins }) if bins.len() == r.bins => Some(bins),
        _ => None,
    };
    for q in &r.quantiles {
        let span =
            |x: Option<[f64; 2]>| x.map_or("-".to_string(), |[a, b]| format!("[{}, {})", fmt_units(a), fmt_units(b)));
        let t = truth_bins.map(|f| harmony_analytics::range::true_quantile(f, q.q).to_string()).unwrap_or_default();
        let bin = q.bin.map_or("-".to_string(), |b| b.to_string());
        wln!(out, "{:<34} {:>24} {:>28} {t:>12}", format!("q = {} (bin {bin})", q.q), span(q.value), span(q.interval));
    }
}

/// A `range2d` document: the rectangles asked, then the 12 cells of largest estimated share (the
/// whole heatmap is in JSON).
fn write_range2d(out: &mut String, head: &str, r: &Range2dEstimate, truth: Option<&Truth>) {
    let ([x0, x1], [y0, y1]) = (r.x_bounds, r.y_bounds);
    wln!(out, "{head}, rectangles of {} × {} ({} bins per axis over [{x0}, {x1}] × [{y0}, {y1}])", r.x, r.y, r.bins);
    wln!(out, "reports per level: {:?}", r.level_reports);
    let cells = match truth {
        Some(Truth::Grid { cells }) if cells.len() == r.bins * r.bins => Some(cells.as_slice()),
        _ => None,
    };
    let mut rows = Rows::default();
    for x in &r.rects {
        let [a, b, c, d] = x.rect;
        let t = cells.map(|cells| crate::range2d::true_rect(cells, r.bins, x.bins));
        rows.row(format!("share in [{a}, {b}) × [{c}, {d})"), &x.share, t, 4);
    }
    let mut top: Vec<(usize, &Est)> = r.heatmap.iter().flatten().enumerate().collect();
    top.sort_by(|a, b| b.1.value().total_cmp(&a.1.value()));
    for (i, e) in top.into_iter().take(12) {
        rows.row(format!("cell (x bin {}, y bin {})", i % r.bins, i / r.bins), e, cells.map(|c| c[i]), 4);
    }
    rows.write(out);
}

fn fmt_units(x: f64) -> String {
    let r = (x * 1e4).round() / 1e4;
    if r == r.trunc() { format!("{r:.0}") } else { format!("{r}") }
}

/// A linear-queries document: each query's unbiased answer, then its projection.
fn write_linear(out: &mut String, head: &str, l: &LinearEstimate, truth: Option<&Truth>) {
    let sigma = l.sigma.map(|s| format!(", σ = {s:.4}")).unwrap_or_default();
    wln!(out, "{head}, linear queries ({}, J = {}{sigma})", l.mechanism, l.domain_size);
    if let (Some(min), Some(max)) = (l.group_reports.iter().min(), l.group_reports.iter().max()) {
        wln!(out, "reports per query group: {min} to {max}");
    }
    let t = match truth {
        Some(Truth::Linear { answers }) if answers.len() == l.queries.len() => Some(answers),
        _ => None,
    };
    let mut rows = Rows::default();
    for (i, q) in l.queries.iter().enumerate() {
        rows.row(q.name.clone(), &q.answer, t.map(|t| t[i]), 4);
        if let Some(p) = q.projected {
            rows.row(format!("{} (projected)", q.name), &Est::point(p), t.map(|t| t[i]), 4);
        }
    }
    rows.write(out);
    if let Some(b) = l.projection_bound {
        wln!(out, "projected answers: within {b:.3e} (L2, certified) of the exact projection");
    }
}

fn write_heavy(out: &mut String, head: &str, h: &HeavyHittersEstimate, truth: Option<&Truth>) {
    wln!(
        out,
        "{head}, top {} heavy hitters ({}, {}-bit codes, sets padded to {})",
        h.items.len(),
        h.method,
        h.bits,
        h.pad_length
    );
    let levels: Vec<String> =
        h.levels.iter().map(|l| format!("{} bits: {} reports", l.prefix_bits, l.reports)).collect();
    wln!(out, "levels: {}", levels.join(", "));
    let t = match truth {
        Some(Truth::Items(t)) => Some(t),
        _ => None,
    };
    let mut rows = Rows::default();
    for it in &h.items {
        let named = t.and_then(|t| t.get(&it.code));
        let label = match (&it.item, named) {
            (Some(name), _) => name.clone(),
            (None, Some((name, _))) => name.clone(),
            (None, None) => format!("code {}", it.code),
        };
        rows.row(label, &it.frequency, t.map(|_| named.map_or(0.0, |n| n.1)), 4);
    }
    rows.write(out);
}

fn write_marginals(out: &mut String, head: &str, m: &MarginalsEstimate, truth: Option<&Truth>) {
    wln!(
        out,
        "{head}, {} marginals ({}, post-processing {}), {} device groups",
        m.marginals.len(),
        m.method,
        m.post,
        m.group_reports.len()
    );
    let w = m.marginals.iter().map(|r| r.attributes.join(" × ").chars().count()).max().unwrap_or(0).max(40);
    wln!(out, "{:<w$} {:>7} {:>13} {:>13} {:>13}", "marginal", "cells", "predicted SSE", "max std err", "SSE vs truth");
    let t = match truth {
        Some(Truth::Marginals(t)) => Some(t),
        _ => None,
    };
    for r in &m.marginals {
        let name = r.attributes.join(" × ");
        let max_se =
            r.cells.iter().filter_map(|c| c.std_error).fold(None, |a: Option<f64>, s| Some(a.map_or(s, |a| a.max(s))));
        let answered = r.cells.iter().all(|c| c.estimate.is_some());
        let sse = t
            .and_then(|t| t.iter().find(|(a, _)| *a == r.attributes))
            .filter(|_| answered)
            .map(|(_, cells)| r.cells.iter().zip(cells).map(|(c, x)| (c.value() - x).powi(2)).sum::<f64>());
        let sci = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.3e}"));
        wln!(out, "{name:<w$} {:>7} {:>13} {:>13} {:>13}", r.cells.len(), sci(r.predicted_sse), sci(max_se), sci(sse));
    }
}

/// How many (estimate, truth) cells the document's 95% CIs cover: (covered, cells).
pub fn coverage(doc: &EstimateDocument, truth: &Truth) -> (usize, usize) {
    let cells: Vec<(&Est, f64)> = match (&doc.result, truth) {
        (TaskEstimate::Means(m), Truth::Means(t)) => m
            .attributes
            .iter()
            .zip(t)
            .flat_map(|(a, t)| match a {
                AttributeResult::Numeric { mean, .. } => vec![(mean, t[0])],
                AttributeResult::Categorical { categories, .. } => {
                    categories.iter().zip(t).map(|(c, &v)| (&c.frequency, v)).collect()
                }
            })
            .collect(),
        (TaskEstimate::Frequency(f), Truth::Frequency(t)) => {
            f.categories.iter().zip(t).map(|(c, &v)| (&c.frequency, v)).collect()
        }
        (TaskEstimate::Range(r), t @ Truth::Range { .. }) => match range_cum(r, Some(t)) {
            Some(c) => r
                .cdf
                .iter()
                .map(|p| (&p.value, c[p.bin]))
                .chain(r.ranges.iter().map(|x| (&x.share, c[x.bins[1]] - c[x.bins[0]])))
                .collect(),
            None => Vec::new(),
        },
        (TaskEstimate::Range2d(r), Truth::Grid { cells }) => crate::range2d::truth_pairs(r, cells),
        (TaskEstimate::LinearQueries(l), Truth::Linear { answers }) => {
            l.queries.iter().zip(answers).map(|(q, &v)| (&q.answer, v)).collect()
        }
        _ => Vec::new(),
    };
    let covered = cells.iter().filter(|(e, t)| e.ci95.is_some_and(|[a, b]| a <= *t && *t <= b)).count();
    (covered, cells.len())
}

/// The largest difference between two documents' numbers (estimates, standard errors, CIs),
/// or infinity when their shapes or report counts differ: 0 when the same reports were
/// aggregated, whatever the order.
pub fn max_difference(a: &EstimateDocument, b: &EstimateDocument) -> f64 {
    if a.reports != b.reports {
        return f64::INFINITY;
    }
    let (x, y) = (serde_json::to_value(&a.result), serde_json::to_value(&b.result));
    match (x, y) {
        (Ok(x), Ok(y)) => json_difference(&x, &y),
        _ => f64::INFINITY,
    }
}

fn json_difference(a: &serde_json::Value, b: &serde_json::Value) -> f64 {
    use serde_json::Value as J;
    match (a, b) {
        (J::Number(x), J::Number(y)) => (x.as_f64().unwrap_or(f64::NAN) - y.as_f64().unwrap_or(f64::NAN)).abs(),
        (J::Array(x), J::Array(y)) if x.len() == y.len() => {
            x.iter().zip(y).map(|(p, q)| json_difference(p, q)).fold(0.0, f64::max)
        }
        (J::Object(x), J::Object(y)) if x.len() == y.len() => {
            x.iter().map(|(k, v)| y.get(k).map_or(f64::INFINITY, |w| json_difference(v, w))).fold(0.0, f64::max)
        }
        (x, y) if x == y => 0.0,
        _ => f64::INFINITY,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Labels longer than the usual column are printed whole (a "| present" row stays apart
    /// from its label's row), and a table without truth has no truth column.
    #[test]
    fn labels_are_never_cut_and_an_absent_truth_has_no_column() {
        let e = Est::new(0.0866, 0.01);
        let long = "occrecode=Construction/Extraction";
        let mut rows = Rows::default();
        rows.row(long.into(), &e, None, 4);
        rows.row(format!("{long} | present"), &e, None, 4);
        let text = rows.text();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[2].starts_with(&format!("{long} | present ")), "{text}");
        assert_ne!(lines[1].split("  ").next(), lines[2].split("  ").next(), "{text}");
        assert!(!lines[0].contains("truth") && lines.iter().all(|l| l.len() == lines[0].len()), "{text}");
        rows.row("x".into(), &e, Some(0.5), 4);
        let text = rows.text();
        assert!(text.lines().next().unwrap().ends_with("truth") && text.contains("0.5000"), "{text}");
    }

    /// The raw (unbiased) line follows an in-domain value only where the two print differently.
    #[test]
    fn the_raw_line_shows_only_where_it_differs() {
        use harmony_protocol::estimates::InDomain;
        let moved = |by: f64| {
            let raw = Est::new(0.3, 0.01);
            Est { in_domain: Some(InDomain { estimate: 0.3 + by, ci95: raw.ci95 }), ..raw }
        };
        let mut rows = Rows::default();
        rows.row("a".into(), &moved(1e-16), None, 4);
        assert!(!rows.text().contains("raw, unbiased"));
        rows.row("a".into(), &moved(-0.3), None, 4);
        assert!(rows.text().contains("raw, unbiased"));
    }
}
