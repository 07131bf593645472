//! The change test between two windows of one collection: every estimate of the two documents
//! that has a standard error, its difference `b − a`, the difference's standard error
//! `√(se_a² + se_b²)`, `z = (b − a)/se`, the two-sided normal p-value, and which differences
//! are significant under the Holm–Bonferroni rule at family-wise level 5% over all of them.
//!
//! The standard error treats the two estimates as independent: the windows are disjoint, so
//! they hold disjoint reports, each randomized with its own fresh randomness. When the same
//! devices report in both windows (a recurring collection) and their values persist, the two
//! estimates are positively correlated and this standard error overstates the difference's:
//! the test is then conservative. Overlapping windows share reports and are refused.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The family-wise error rate of the Holm–Bonferroni rule.
pub const FAMILY_ALPHA: f64 = 0.05;

/// The rule, as stated in every comparison.
pub const RULE: &str = "Holm–Bonferroni over every difference of the document at family-wise level 0.05: \
    sorted by p-value, the i-th smallest (from 0) of m is significant while p ≤ 0.05/(m − i)";

/// What the standard error assumes.
pub const INDEPENDENCE: &str = "The windows are disjoint, so their reports are disjoint and independently \
    randomized; the standard error assumes independent device sets. Devices that reported in both windows \
    with persisting values make the estimates positively correlated: the standard error then overstates \
    the difference's and the test is conservative. The standard errors are the estimates' own: the \
    randomization's noise around the values of the devices that reported, so a change in which devices \
    report is a change.";

/// One estimate's change between the windows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Difference {
    /// Where the estimate is in the estimate document (`result.` omitted), e.g.
    /// `categories[red].frequency`.
    pub path: String,
    /// The estimate in window A.
    pub a: f64,
    /// The estimate in window B.
    pub b: f64,
    /// `b − a`.
    pub difference: f64,
    /// `√(se_a² + se_b²)`.
    pub std_error: f64,
    /// `difference / std_error`.
    pub z: f64,
    /// Two-sided normal p-value of `z`.
    pub p: f64,
    /// Significant under the Holm–Bonferroni rule ([`RULE`]).
    pub significant: bool,
}

/// An `Est`-shaped object's estimate and standard error, when both are finite numbers.
fn est(v: &Value) -> Option<(f64, f64)> {
    let e = v.get("estimate")?.as_f64()?;
    let se = v.get("std_error")?.as_f64()?;
    (e.is_finite() && se.is_finite() && se > 0.0).then_some((e, se))
}

/// The name of an array element in a path: its `label`, `attribute` or `q`, else its index.
fn element_name(v: &Value, i: usize) -> String {
    for key in ["label", "attribute", "q"] {
        match v.get(key) {
            Some(Value::String(s)) => return s.clone(),
            Some(Value::Number(n)) => return format!("{key}={n}"),
            _ => {}
        }
    }
    i.to_string()
}

/// Every estimate with a standard error in a document's `result`, by path.
fn collect(v: &Value, path: &str, out: &mut Vec<(String, f64, f64)>) {
    if let Some((e, se)) = est(v) {
        out.push((path.to_string(), e, se));
        return;
    }
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let p = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
                collect(x, &p, out);
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                collect(x, &format!("{path}[{}]", element_name(x, i)), out);
            }
        }
        _ => {}
    }
}

/// The two-sided normal p-value of `z`.
pub fn p_value(z: f64) -> f64 {
    (2.0 * harmony_analytics::linear::calibrate::normal_cdf(-z.abs())).min(1.0)
}

/// Marks the significant ones of `ps` under Holm–Bonferroni at level `alpha`.
pub fn holm(ps: &[f64], alpha: f64) -> Vec<bool> {
    let mut order: Vec<usize> = (0..ps.len()).collect();
    order.sort_by(|&i, &j| ps[i].total_cmp(&ps[j]));
    let m = ps.len();
    let mut out = vec![false; m];
    for (rank, &i) in order.iter().enumerate() {
        if ps[i] > alpha / (m - rank) as f64 {
            break;
        }
        out[i] = true;
    }
    out
}

/// The differences `b − a` of every estimate with a standard error in both documents' results
/// (JSON of [`harmony_protocol::EstimateDocument::result`]), matched by path.
pub fn differences(a: &Value, b: &Value) -> Vec<Difference> {
    let (mut ea, mut eb) = (Vec::new(), Vec::new());
    collect(a, "", &mut ea);
    collect(b, "", &mut eb);
    let bs: std::collections::HashMap<&str, (f64, f64)> = eb.iter().map(|(p, e, s)| (p.as_str(), (*e, *s))).collect();
    let mut out: Vec<Difference> = ea
        .iter()
        .filter_map(|(path, xa, sa)| {
            let (xb, sb) = *bs.get(path.as_str())?;
            let se = (sa * sa + sb * sb).sqrt();
            let z = (xb - xa) / se;
            Some(Difference {
                path: path.clone(),
                a: *xa,
                b: xb,
                difference: xb - xa,
                std_error: se,
                z,
                p: p_value(z),
                significant: false,
            })
        })
        .collect();
    let ps: Vec<f64> = out.iter().map(|d| d.p).collect();
    for (d, s) in out.iter_mut().zip(holm(&ps, FAMILY_ALPHA)) {
        d.significant = s;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn p_values_and_holm() {
        assert!((p_value(1.959_964) - 0.05).abs() < 1e-6);
        assert!((p_value(0.0) - 1.0).abs() < 1e-6);
        assert!((p_value(-3.0) - 0.002_699_8).abs() < 1e-6);
        // m = 3: 0.01 ≤ 0.05/3, 0.02 ≤ 0.05/2, 0.04 ≤ 0.05/1: all; 0.03 as the second stops it.
        assert_eq!(holm(&[0.04, 0.01, 0.02], 0.05), vec![true, true, true]);
        assert_eq!(holm(&[0.01, 0.03, 0.04], 0.05), vec![true, false, false]);
        assert_eq!(holm(&[0.02, 0.5], 0.05), vec![true, false]);
    }

    #[test]
    fn differences_match_estimates_by_path() {
        let doc = |x: f64, se: f64| {
            serde_json::json!({"frequency": {"categories": [
                {"label": "red", "frequency": {"estimate": x, "std_error": se, "ci95": [0, 1]}},
                {"label": "blue", "frequency": {"estimate": 0.5, "std_error": null}}
            ]}})
        };
        let d = differences(&doc(0.2, 0.03), &doc(0.3, 0.04));
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].path, "frequency.categories[red].frequency");
        assert!((d[0].difference - 0.1).abs() < 1e-12 && (d[0].std_error - 0.05).abs() < 1e-12);
        assert!((d[0].z - 2.0).abs() < 1e-9 && d[0].significant);
    }
}
