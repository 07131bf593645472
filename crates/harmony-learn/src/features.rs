//! Features and targets from a schema.
//!
//! * A constant column 1 comes first (the intercept).
//! * A numeric attribute is one column: its value mapped to [-1, 1] (the schema's public range).
//! * A categorical attribute with k labels is k − 1 columns (the first label is the reference and
//!   has no column): label c ≥ 1 sets column c to 1 and the others to 0 ([`Encoding::ZeroOne`],
//!   Wang et al.) or to −1 ([`Encoding::PlusMinus`], Harmony).
//!
//! The target is left out of the features. Linear regression needs a numeric target (on its
//! [-1, 1] scale); logistic regression and SVM need a binary one, y ∈ {−1, +1}: a two-label
//! categorical column (the second label, or `positive`, is +1), any categorical column with a
//! `positive` label (one against the rest), or a numeric column with a [`Threshold`] (y = +1
//! above it, as the papers do with "above the mean").

use harmony_core::error::{Error, Result};
use harmony_core::schema::{Attribute, Schema, Value};

/// The learning task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Task {
    /// Least squares on a numeric target.
    Linear,
    /// Logistic regression on a binary target.
    Logistic,
    /// Linear SVM (hinge loss) on a binary target.
    Svm,
}

impl Task {
    /// Names used by the CLI and JSON.
    pub const NAMES: &'static [&'static str] = &["linear", "logistic", "svm"];
    /// Parses a task name.
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "linear" => Ok(Task::Linear),
            "logistic" => Ok(Task::Logistic),
            "svm" => Ok(Task::Svm),
            _ => Err(Error::param("task", name, "one of linear, logistic, svm")),
        }
    }
    /// The task's name.
    pub fn name(self) -> &'static str {
        match self {
            Task::Linear => "linear",
            Task::Logistic => "logistic",
            Task::Svm => "svm",
        }
    }
    /// Whether the target is a class (±1).
    pub fn is_classification(self) -> bool {
        self != Task::Linear
    }
}

/// How a categorical attribute's k − 1 columns encode a label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Encoding {
    /// 1 for the label's column, 0 elsewhere (Wang et al.).
    #[default]
    ZeroOne,
    /// 1 for the label's column, −1 elsewhere (Harmony).
    PlusMinus,
}

impl Encoding {
    /// Names used by the CLI.
    pub const NAMES: &'static [&'static str] = &["zero-one", "plus-minus"];
    /// Parses an encoding name.
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "zero-one" => Ok(Encoding::ZeroOne),
            "plus-minus" => Ok(Encoding::PlusMinus),
            _ => Err(Error::param("encoding", name, "one of zero-one, plus-minus")),
        }
    }
    /// The value of a column that is not the label's.
    fn off(self) -> f64 {
        match self {
            Encoding::ZeroOne => 0.0,
            Encoding::PlusMinus => -1.0,
        }
    }
}

/// The cut of a numeric target for classification: y = +1 when the value is above it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Threshold {
    /// A value in the attribute's units.
    Value(f64),
    /// The mean of the column over all rows (the papers' "above the mean").
    Mean,
}

/// What the target is and how it is read.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TargetSpec {
    /// The target column's name.
    pub column: String,
    /// The label that is +1 (categorical targets).
    pub positive: Option<String>,
    /// The cut of a numeric target (classification).
    pub threshold: Option<Threshold>,
}

/// One feature column.
#[derive(Debug, Clone, PartialEq)]
pub enum Column {
    /// The constant 1.
    Bias,
    /// A numeric attribute (schema index).
    Numeric(usize),
    /// Category `label` (≥ 1) of a categorical attribute (schema index).
    OneHot(usize, u32),
}

/// Maps records of a schema to feature vectors and targets.
#[derive(Debug, Clone, PartialEq)]
pub struct FeatureMap {
    task: Task,
    encoding: Encoding,
    columns: Vec<Column>,
    names: Vec<String>,
    /// Schema index of the target.
    target: usize,
    /// Classification: the positive label (categorical target).
    positive: Option<u32>,
    /// Classification of a numeric target: the cut on the [-1, 1] scale (resolved when `Mean`).
    threshold: Option<Threshold>,
    /// max ‖x‖₁ over all feature vectors.
    max_l1: f64,
}

/// A numeric design matrix (row-major, n × d) with targets: one row per user.
#[derive(Debug, Clone, PartialEq)]
pub struct Dataset {
    /// Features, `d` per row, every value in [-1, 1] (a ±1/√r random projection may leave it;
    /// [`crate::projection`]).
    pub x: Vec<f64>,
    /// Targets: in [-1, 1] (linear) or ±1 (classification).
    pub y: Vec<f64>,
    /// Number of feature columns.
    pub d: usize,
}

impl Dataset {
    /// Validates the shape (x has n·d values, all in [-1, 1]; y has n values, finite).
    pub fn new(x: Vec<f64>, y: Vec<f64>, d: usize) -> Result<Self> {
        if d == 0 || x.len() != y.len() * d {
            return Err(Error::param("x", format!("{} values", x.len()), format!("n·d = {}·{d} values", y.len())));
        }
        if let Some(i) = x.iter().position(|v| !(-1.0..=1.0).contains(v)) {
            return Err(Error::input(format!("feature {} of row {}", i % d, i / d), x[i], "a number in [-1, 1]"));
        }
        if let Some(i) = y.iter().position(|v| !v.is_finite()) {
            return Err(Error::input(format!("target of row {i}"), y[i], "a finite number"));
        }
        Ok(Dataset { x, y, d })
    }
    /// Number of rows (users).
    pub fn len(&self) -> usize {
        self.y.len()
    }
    /// Whether there are no rows.
    pub fn is_empty(&self) -> bool {
        self.y.is_empty()
    }
    /// Row i's features.
    #[inline]
    pub fn row(&self, i: usize) -> &[f64] {
        &self.x[i * self.d..(i + 1) * self.d]
    }
}

impl FeatureMap {
    /// The features of `schema` (every attribute but the target) and the target of `task`.
    ///
    /// Errors name the option and the valid values: an unknown target column lists the columns;
    /// a categorical target for linear regression, a non-binary target for classification without
    /// `positive` or `threshold`, an unknown `positive` label, or a threshold on a categorical
    /// column are rejected. `values` (row-major, `schema.len()` per row) is only read to resolve
    /// [`Threshold::Mean`].
    pub fn new(schema: &Schema, task: Task, encoding: Encoding, spec: &TargetSpec, values: &[Value]) -> Result<Self> {
        let names: Vec<&str> = schema.attributes().iter().map(|a| a.name()).collect();
        let target = schema
            .position(&spec.column)
            .ok_or_else(|| Error::param("target", &spec.column, format!("one of the columns {}", names.join(", "))))?;
        let attr = &schema.attributes()[target];
        let (mut positive, mut threshold) = (None, None);
        match (task, attr) {
            (Task::Linear, Attribute::Categorical { categories, .. }) => {
                return Err(Error::param(
                    "target",
                    &spec.column,
                    format!(
                        "a numeric column for --task linear (\"{}\" is categorical with {} labels); numeric columns: {}",
                        spec.column,
                        categories.len(),
                        numeric_names(schema, target)
                    ),
                ));
            }
            (Task::Linear, Attribute::Numeric { .. }) => {
                if spec.positive.is_some() || spec.threshold.is_some() {
                    return Err(Error::param(
                        "positive/threshold",
                        &spec.column,
                        "neither for --task linear (the numeric target is used as it is)",
                    ));
                }
            }
            (_, Attribute::Categorical { categories, .. }) => positive = Some(positive_label(task, spec, categories)?),
            (_, Attribute::Numeric { .. }) => threshold = Some(numeric_threshold(schema, target, task, spec, values)?),
        }
        let (columns, col_names, max_l1) = feature_columns(schema, target, encoding);
        Ok(FeatureMap { task, encoding, columns, names: col_names, target, positive, threshold, max_l1 })
    }

    /// Number of feature columns d (intercept included).
    pub fn dimension(&self) -> usize {
        self.columns.len()
    }
    /// The columns, in order.
    pub fn columns(&self) -> &[Column] {
        &self.columns
    }
    /// Column names (`age`, `workclass=Private`, ...).
    pub fn names(&self) -> &[String] {
        &self.names
    }
    /// The task.
    pub fn task(&self) -> Task {
        self.task
    }
    /// The encoding of categorical columns.
    pub fn encoding(&self) -> Encoding {
        self.encoding
    }
    /// The schema index of the target.
    pub fn target_index(&self) -> usize {
        self.target
    }
    /// The largest ‖x‖₁ of any feature vector: 1 + #numeric + #categorical (zero-one) or
    /// 1 + #numeric + Σ(k − 1) (plus-minus). Random projection scales by it (see
    /// [`crate::projection`]).
    pub fn max_l1(&self) -> f64 {
        self.max_l1
    }
    /// The lengths of consecutive column blocks of which at most one column is non-zero: the
    /// intercept, each numeric attribute and (zero-one encoding) each categorical attribute's
    /// k − 1 columns. With the plus-minus encoding every column is its own block.
    pub fn block_lengths(&self) -> Vec<usize> {
        if self.encoding == Encoding::PlusMinus {
            return vec![1; self.columns.len()];
        }
        let mut out: Vec<usize> = Vec::new();
        let mut last = None;
        for c in &self.columns {
            match *c {
                Column::OneHot(j, _) if last == Some(j) => *out.last_mut().expect("open block") += 1,
                Column::OneHot(j, _) => {
                    out.push(1);
                    last = Some(j);
                }
                _ => {
                    out.push(1);
                    last = None;
                }
            }
        }
        out
    }
    /// Classification of a numeric target: the cut on the [-1, 1] scale.
    pub fn threshold_unit(&self) -> Option<f64> {
        match self.threshold {
            Some(Threshold::Value(v)) => Some(v),
            _ => None,
        }
    }

    /// Writes the features of one record (`schema.len()` values) to `out` (length d).
    pub fn encode_row(&self, row: &[Value], out: &mut [f64]) {
        let off = self.encoding.off();
        for (o, c) in out.iter_mut().zip(&self.columns) {
            *o = match *c {
                Column::Bias => 1.0,
                Column::Numeric(j) => match row[j] {
                    Value::Unit(t) => t,
                    Value::Category(_) => 0.0,
                },
                Column::OneHot(j, label) => match row[j] {
                    Value::Category(v) if v == label => 1.0,
                    _ => off,
                },
            };
        }
    }

    /// The target of one record: [-1, 1] (linear) or ±1.
    pub fn target(&self, row: &[Value]) -> f64 {
        match (row[self.target], self.positive, self.threshold) {
            (Value::Unit(t), None, None) => t,
            (Value::Unit(t), _, Some(Threshold::Value(cut))) => {
                if t > cut {
                    1.0
                } else {
                    -1.0
                }
            }
            (Value::Category(v), Some(p), _) => {
                if v == p {
                    1.0
                } else {
                    -1.0
                }
            }
            _ => 0.0,
        }
    }

    /// Encodes every record (`values` row-major, `schema_len` per row) into a [`Dataset`].
    pub fn dataset(&self, values: &[Value], schema_len: usize) -> Result<Dataset> {
        let n = values.len() / schema_len;
        let d = self.dimension();
        let mut x = vec![0.0; n * d];
        let mut y = Vec::with_capacity(n);
        for (row, out) in values.chunks_exact(schema_len).zip(x.chunks_exact_mut(d)) {
            self.encode_row(row, out);
            y.push(self.target(row));
        }
        Dataset::new(x, y, d)
    }
}
/// The positive class of a categorical target: `spec.positive`, or label 1 of a binary column.
fn positive_label(task: Task, spec: &TargetSpec, categories: &[String]) -> Result<u32> {
    if spec.threshold.is_some() {
        return Err(Error::param(
            "threshold",
            &spec.column,
            "no threshold for a categorical target (use --positive LABEL)",
        ));
    }
    let label = match (&spec.positive, categories.len()) {
        (Some(p), _) => categories.iter().position(|c| c == p).ok_or_else(|| {
            Error::param("positive", p, format!("one of the labels of {}: {}", spec.column, categories.join(", ")))
        })?,
        (None, 2) => 1,
        (None, k) => {
            return Err(Error::param(
                "target",
                &spec.column,
                format!(
                    "a binary target for --task {}: \"{}\" has {k} labels; pick the positive class with --positive LABEL (one of {})",
                    task.name(),
                    spec.column,
                    categories.join(", ")
                ),
            ));
        }
    };
    Ok(label as u32)
}

/// The threshold (on the unit scale) of a numeric target for classification: `spec.threshold`,
/// or the mean of the target's present values in `values` ([`Threshold::Mean`]).
fn numeric_threshold(
    schema: &Schema,
    target: usize,
    task: Task,
    spec: &TargetSpec,
    values: &[Value],
) -> Result<Threshold> {
    let attr = &schema.attributes()[target];
    let (min, max) = match attr {
        Attribute::Numeric { min, max, .. } => (*min, *max),
        Attribute::Categorical { .. } => unreachable!("numeric_threshold of a categorical target"),
    };
    if spec.positive.is_some() {
        return Err(Error::param("positive", &spec.column, "no label for a numeric target (use --threshold)"));
    }
    let range = attr.range().expect("numeric");
    match spec.threshold {
        None => Err(Error::param(
            "target",
            &spec.column,
            format!(
                "a binary target for --task {}: \"{}\" is numeric; give --threshold VALUE (in [{min}, {max}]) or --threshold mean",
                task.name(),
                spec.column
            ),
        )),
        Some(Threshold::Value(v)) => {
            if !(v.is_finite() && min <= v && v < max) {
                return Err(Error::param("threshold", v, format!("a number in [{min}, {max}) for {}", spec.column)));
            }
            Ok(Threshold::Value(range.to_unit_clamped(v)))
        }
        Some(Threshold::Mean) => {
            let (mut s, mut n) = (0.0, 0usize);
            for row in values.chunks_exact(schema.len()) {
                if let Value::Unit(t) = row[target] {
                    s += t;
                    n += 1;
                }
            }
            Ok(Threshold::Value(if n == 0 { 0.0 } else { s / n as f64 }))
        }
    }
}

/// The feature columns of every attribute but `target` (the intercept first), their names and
/// the largest L1 norm of a feature vector under `encoding`.
fn feature_columns(schema: &Schema, target: usize, encoding: Encoding) -> (Vec<Column>, Vec<String>, f64) {
    let mut columns = vec![Column::Bias];
    let mut names = vec!["(intercept)".to_string()];
    let mut max_l1 = 1.0;
    for (j, a) in schema.attributes().iter().enumerate() {
        if j == target {
            continue;
        }
        match a {
            Attribute::Numeric { name, .. } => {
                columns.push(Column::Numeric(j));
                names.push(name.clone());
                max_l1 += 1.0;
            }
            Attribute::Categorical { name, categories } => {
                for (c, label) in categories.iter().enumerate().skip(1) {
                    columns.push(Column::OneHot(j, c as u32));
                    names.push(format!("{name}={label}"));
                }
                max_l1 += match encoding {
                    Encoding::ZeroOne => 1.0,
                    Encoding::PlusMinus => (categories.len() - 1) as f64,
                };
            }
        }
    }
    (columns, names, max_l1)
}

fn numeric_names(schema: &Schema, except: usize) -> String {
    let v: Vec<&str> = schema
        .attributes()
        .iter()
        .enumerate()
        .filter(|(j, a)| *j != except && a.is_numeric())
        .map(|(_, a)| a.name())
        .collect();
    if v.is_empty() { "(none)".to_string() } else { v.join(", ") }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> Schema {
        Schema::new(vec![
            Attribute::Numeric { name: "age".into(), min: 0.0, max: 100.0 },
            Attribute::Categorical { name: "color".into(), categories: vec!["r".into(), "g".into(), "b".into()] },
            Attribute::Categorical { name: "income".into(), categories: vec!["low".into(), "high".into()] },
        ])
        .unwrap()
    }

    fn rows() -> Vec<Value> {
        vec![
            Value::Unit(-0.5),
            Value::Category(2),
            Value::Category(1),
            Value::Unit(0.5),
            Value::Category(0),
            Value::Category(0),
        ]
    }

    fn spec(col: &str) -> TargetSpec {
        TargetSpec { column: col.into(), ..Default::default() }
    }

    #[test]
    fn encodings_and_targets() {
        let s = schema();
        let f = FeatureMap::new(&s, Task::Logistic, Encoding::ZeroOne, &spec("income"), &rows()).unwrap();
        assert_eq!(f.dimension(), 4);
        assert_eq!(f.names(), &["(intercept)", "age", "color=g", "color=b"]);
        let ds = f.dataset(&rows(), 3).unwrap();
        assert_eq!(ds.x, vec![1.0, -0.5, 0.0, 1.0, 1.0, 0.5, 0.0, 0.0]);
        assert_eq!(ds.y, vec![1.0, -1.0]);
        assert_eq!(f.max_l1(), 3.0);
        assert_eq!(f.block_lengths(), vec![1, 1, 2]);
        let pm = FeatureMap::new(&s, Task::Svm, Encoding::PlusMinus, &spec("income"), &rows()).unwrap();
        let ds = pm.dataset(&rows(), 3).unwrap();
        assert_eq!(ds.x, vec![1.0, -0.5, -1.0, 1.0, 1.0, 0.5, -1.0, -1.0]);
        assert_eq!(pm.max_l1(), 4.0);
        assert_eq!(pm.block_lengths(), vec![1, 1, 1, 1]);
        // Numeric target with a threshold; linear regression.
        let mut sp = spec("age");
        sp.threshold = Some(Threshold::Mean);
        let f = FeatureMap::new(&s, Task::Logistic, Encoding::ZeroOne, &sp, &rows()).unwrap();
        assert_eq!(f.dataset(&rows(), 3).unwrap().y, vec![-1.0, 1.0]);
        let f = FeatureMap::new(&s, Task::Linear, Encoding::ZeroOne, &spec("age"), &rows()).unwrap();
        assert_eq!(f.dataset(&rows(), 3).unwrap().y, vec![-0.5, 0.5]);
        assert_eq!(f.dimension(), 4); // intercept, color (2), income (1); no age
        // One against the rest.
        let mut sp = spec("color");
        sp.positive = Some("b".into());
        let f = FeatureMap::new(&s, Task::Logistic, Encoding::ZeroOne, &sp, &rows()).unwrap();
        assert_eq!(f.dataset(&rows(), 3).unwrap().y, vec![1.0, -1.0]);
    }

    #[test]
    fn errors_name_the_option_and_valid_values() {
        let s = schema();
        let e = FeatureMap::new(&s, Task::Logistic, Encoding::ZeroOne, &spec("salary"), &[]).unwrap_err().to_string();
        assert!(e.contains("target") && e.contains("\"salary\"") && e.contains("age, color, income"), "{e}");
        let e = FeatureMap::new(&s, Task::Logistic, Encoding::ZeroOne, &spec("color"), &[]).unwrap_err().to_string();
        assert!(e.contains("3 labels") && e.contains("--positive") && e.contains("r, g, b"), "{e}");
        let e = FeatureMap::new(&s, Task::Svm, Encoding::ZeroOne, &spec("age"), &[]).unwrap_err().to_string();
        assert!(e.contains("--threshold") && e.contains("[0, 100]"), "{e}");
        let e = FeatureMap::new(&s, Task::Linear, Encoding::ZeroOne, &spec("income"), &[]).unwrap_err().to_string();
        assert!(e.contains("numeric columns: age"), "{e}");
        let mut sp = spec("income");
        sp.positive = Some("mid".into());
        let e = FeatureMap::new(&s, Task::Logistic, Encoding::ZeroOne, &sp, &[]).unwrap_err().to_string();
        assert!(e.contains("positive") && e.contains("low, high"), "{e}");
        let mut sp = spec("age");
        sp.threshold = Some(Threshold::Value(200.0));
        let e = FeatureMap::new(&s, Task::Logistic, Encoding::ZeroOne, &sp, &[]).unwrap_err().to_string();
        assert!(e.contains("threshold is 200.0"), "{e}");
        assert!(Task::parse("ridge").unwrap_err().to_string().contains("linear, logistic, svm"));
        assert!(Encoding::parse("x").unwrap_err().to_string().contains("zero-one, plus-minus"));
    }
}
