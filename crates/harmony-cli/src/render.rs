//! Estimate documents as tables: what `harmony query` prints, and `harmony simulate` beside the
//! truth. JSON output is the document itself.

use harmony_core::schema::{Attribute, Schema, Value};
use harmony_protocol::estimates::{AttributeResult, Est, EstimateDocument, TaskEstimate};

/// The true values a document estimates, from the data (simulations, `query --data`).
#[derive(Debug, Clone, serde::Serialize)]
#[serde(untagged)]
pub enum Truth {
    /// Per attribute: the mean (units) or the category frequencies.
    Means(Vec<Vec<f64>>),
    /// One attribute's frequencies.
    Frequency(Vec<f64>),
}

/// Per attribute: the true mean (original units) or the true category frequencies.
pub fn record_truth(schema: &Schema, values: &[Value]) -> Vec<Vec<f64>> {
    let d = schema.len();
    let n = (values.len() / d).max(1) as f64;
    schema
        .attributes()
        .iter()
        .enumerate()
        .map(|(j, a)| match a {
            Attribute::Numeric { min, max, .. } => {
                let s: f64 = values.chunks(d).map(|r| if let Value::Unit(t) = r[j] { t } else { 0.0 }).sum();
                vec![0.5 * (max - min) * s / n + 0.5 * (max + min)]
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

fn ci(e: &Est, digits: usize) -> String {
    e.ci95.map(|[a, b]| format!("[{a:.digits$}, {b:.digits$}]")).unwrap_or_else(|| "-".into())
}

fn num(x: Option<f64>, digits: usize) -> String {
    x.map(|v| format!("{v:.digits$}")).unwrap_or_else(|| "-".into())
}

fn row(label: &str, e: &Est, truth: Option<f64>, digits: usize) {
    let label: String = label.chars().take(34).collect();
    let t = truth.map(|t| format!("{t:.digits$}")).unwrap_or_default();
    println!(
        "{label:<34} {:>12} {:>10} {:>25} {t:>12}",
        num(e.estimate, digits),
        num(e.std_error, digits),
        ci(e, digits.min(4))
    );
}

fn header() {
    println!("{:<34} {:>12} {:>10} {:>25} {:>12}", "estimate of", "estimate", "std err", "95% CI", "truth");
}

/// Prints a document as a table, with the truth beside it when given.
pub fn print(doc: &EstimateDocument, truth: Option<&Truth>) {
    let head = format!("collection {}: {} reports at ε = {}", doc.collection, doc.reports, doc.epsilon);
    match (&doc.result, truth) {
        (TaskEstimate::Means(m), t) => {
            println!("{head}, means ({})", m.strategy);
            header();
            let t = match t {
                Some(Truth::Means(t)) => Some(t),
                _ => None,
            };
            for (j, a) in m.attributes.iter().enumerate() {
                match a {
                    AttributeResult::Numeric { name, mean, .. } => {
                        row(&format!("{name} (mean)"), mean, t.map(|t| t[j][0]), 4)
                    }
                    AttributeResult::Categorical { name, categories } => {
                        for (v, c) in categories.iter().enumerate() {
                            row(&format!("{name}={}", c.label), &c.frequency, t.map(|t| t[j][v]), 4);
                        }
                    }
                }
            }
        }
        (TaskEstimate::Frequency(f), t) => {
            println!("{head}, frequencies of {} ({})", f.attribute, f.mechanism);
            header();
            let t = match t {
                Some(Truth::Frequency(t)) => Some(t),
                _ => None,
            };
            for (v, c) in f.categories.iter().enumerate() {
                row(&format!("{}={}", f.attribute, c.label), &c.frequency, t.map(|t| t[v]), 4);
            }
        }
        (TaskEstimate::Train(tr), _) => crate::server_cmds::rounds::print_model_doc(doc, tr),
        (other, _) => println!("{head}\n{}", serde_json::to_string_pretty(other).unwrap_or_default()),
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
