//! Encoding a table for the randomizers: each attribute's column becomes [-1, 1] values or
//! category indices, batch by batch, straight into one vector per attribute.
//!
//! A cell the schema does not accept follows the [`InvalidPolicy`]: an error naming the row,
//! column, value and what was expected; or the row is skipped; or a number outside [min, max]
//! is clamped. A missing cell (empty, a missing token, a null, a NaN) is one such cell for a
//! numeric attribute, and the category `?` for a categorical one that lists it.

use crate::cells::Cells;
use crate::error::{Error, Result};
use crate::reader::{Batch, Batches, position};
use crate::schema_file::{InvalidPolicy, MissingTokens};
use crate::temporal::{self, Unit};
use harmony_core::params::Range;
use harmony_core::schema::{Attribute, ColumnValues, Missing, Role, Schema, Value};
use std::collections::{BTreeMap, HashMap};

/// How to read cells: the bad-value policy, the missing tokens, units of date attributes.
#[derive(Debug, Clone, Default)]
pub struct EncodeOptions {
    /// What to do with a cell the schema does not accept.
    pub invalid: InvalidPolicy,
    /// Texts that mean "missing".
    pub missing: MissingTokens,
    /// Units of numeric attributes read from dates or timestamps, by name.
    pub units: BTreeMap<String, Unit>,
    /// The only columns read, by name (`None`: every attribute's). Any other attribute is
    /// neither read nor checked (the file need not have it): it holds 0 on [-1, 1] or
    /// category 0, for a task that never reads it (one attribute's frequencies or ranges).
    pub only: Option<Vec<String>>,
}

impl EncodeOptions {
    /// The default options with this policy.
    pub fn with_policy(invalid: InvalidPolicy) -> Self {
        EncodeOptions { invalid, ..Default::default() }
    }
}

/// A table encoded by attribute: the input of `RecordColumns::from_columns`.
#[derive(Debug, Clone, PartialEq)]
pub struct Columns {
    /// One column per schema attribute, in order.
    pub columns: Vec<ColumnValues>,
    /// Number of rows kept.
    pub n: usize,
    /// Rows skipped by the policy.
    pub skipped: usize,
    /// Numbers clamped by the policy.
    pub clamped: usize,
}

/// Records encoded for the randomizers, row-major (`n × d`), plus what was skipped or clamped.
pub struct Encoded {
    /// Values, `d` per row.
    pub values: Vec<Value>,
    /// Number of rows kept.
    pub n: usize,
    /// Rows skipped by the policy.
    pub skipped: usize,
    /// Numbers clamped by the policy.
    pub clamped: usize,
}

impl Columns {
    /// The rows, row-major (`n × d` values).
    pub fn to_rows(&self) -> Encoded {
        let mut values = Vec::with_capacity(self.n * self.columns.len());
        for i in 0..self.n {
            values.extend(self.columns.iter().map(|c| c.get(i)));
        }
        Encoded { values, n: self.n, skipped: self.skipped, clamped: self.clamped }
    }
    /// Bytes held by the columns (8 per numeric value, 4 per category).
    pub fn heap_bytes(&self) -> usize {
        self.columns.iter().map(|c| c.len() * if matches!(c, ColumnValues::Unit(_)) { 8 } else { 4 }).sum()
    }
}

/// Why a cell was not accepted.
#[derive(Debug, Clone, PartialEq)]
enum Problem {
    /// A missing cell: its text (a token), or `None` for a null/NaN.
    Missing(Option<String>),
    /// Text that is not a number (or date, for an attribute with a unit).
    NotNumber(String),
    /// A number outside [min, max].
    OutOfRange(f64),
    /// A label the attribute does not list.
    Unknown(String),
}

/// How one attribute reads its column.
struct AttrEncoder<'s> {
    attr: &'s Attribute,
    col: usize,
    kind: Kind,
    on_missing: OnMissing,
    /// A column not read (see [`EncodeOptions::only`]): every row holds the placeholder.
    unread: bool,
}

/// What a missing cell becomes (the attribute's missing policy, see `harmony_core::schema`).
#[derive(Clone, Copy)]
enum OnMissing {
    /// A problem (policy `error`): the file's invalid policy decides.
    Problem,
    /// This value (`report` or `impute`).
    Value(Value),
    /// This encoder is a presence attribute: category 1 for a missing cell, 0 otherwise (a
    /// bad present value is its value attribute's problem; see `AttrEncoder::presence`).
    Presence,
}

enum Kind {
    Numeric { range: Range, unit: Option<Unit> },
    Categorical { labels: HashMap<String, u32>, missing: Option<u32> },
}

/// One attribute's cells of one batch: values (0 where a problem is) and the problems.
enum Out {
    Unit(Vec<f64>),
    Category(Vec<u32>),
}

impl<'s> AttrEncoder<'s> {
    /// The encoder of the schema's attribute `j` (reading the value attribute's column for a
    /// presence attribute).
    fn new(schema: &'s Schema, j: usize, col: usize, unit: Option<Unit>) -> Result<Self> {
        let (attr, read) = match schema.role(j) {
            Role::Value(_) => (&schema.attributes()[j], &schema.attributes()[j]),
            Role::Presence(b) => (&schema.attributes()[j], &schema.attributes()[b]),
        };
        let on_missing = match (schema.role(j), schema.missing(j)) {
            (Role::Presence(_), _) => OnMissing::Presence,
            (_, Missing::Error) => OnMissing::Problem,
            _ => OnMissing::Value(schema.encode_missing(j).map_err(|e| Error::Schema(e.to_string()))?),
        };
        let kind = match read {
            Attribute::Numeric { min, max, .. } => Kind::Numeric { range: Range { min: *min, max: *max }, unit },
            Attribute::Categorical { categories, .. } => {
                let labels: HashMap<String, u32> =
                    categories.iter().enumerate().map(|(i, c)| (c.clone(), i as u32)).collect();
                let missing = if matches!(on_missing, OnMissing::Problem) { labels.get("?").copied() } else { None };
                Kind::Categorical { labels, missing }
            }
        };
        Ok(AttrEncoder { attr, col, kind, on_missing, unread: false })
    }

    /// An attribute whose column is not read: 0 on [-1, 1] or category 0 in every row.
    fn placeholder(&self, n: usize) -> Out {
        match self.attr {
            Attribute::Numeric { .. } => Out::Unit(vec![0.0; n]),
            Attribute::Categorical { .. } => Out::Category(vec![0; n]),
        }
    }

    /// Applies the missing policy to a cell's result.
    fn resolve(&self, r: Result<Value, Problem>) -> Result<Value, Problem> {
        match (self.on_missing, r) {
            (OnMissing::Value(v), Err(Problem::Missing(_))) => Ok(v),
            (_, r) => r,
        }
    }

    /// A number in the attribute's units: in range, or a problem.
    fn number(&self, x: f64) -> Result<f64, Problem> {
        let Kind::Numeric { range, .. } = &self.kind else { unreachable!("numeric attribute") };
        if x.is_nan() {
            Err(Problem::Missing(None))
        } else if (range.min..=range.max).contains(&x) {
            Ok(range.to_unit_clamped(x))
        } else {
            Err(Problem::OutOfRange(x))
        }
    }

    /// A label (text of any cell type): its category, `?` for a missing one, or a problem.
    fn label(&self, s: Option<&str>, missing: &MissingTokens) -> Result<u32, Problem> {
        let Kind::Categorical { labels, missing: m } = &self.kind else { unreachable!("categorical attribute") };
        match s {
            Some(s) => match labels.get(s) {
                Some(&c) => Ok(c),
                None if missing.is_missing(s) => m.ok_or(Problem::Missing(Some(s.to_string()))),
                None => Err(Problem::Unknown(s.to_string())),
            },
            None => m.ok_or(Problem::Missing(None)),
        }
    }

    /// A text cell.
    fn text(&self, s: Option<&str>, missing: &MissingTokens) -> Result<Value, Problem> {
        match &self.kind {
            Kind::Categorical { .. } => self.label(s, missing).map(Value::Category),
            Kind::Numeric { unit, .. } => {
                let s = s.ok_or(Problem::Missing(None))?;
                if missing.is_missing(s) {
                    return Err(Problem::Missing(Some(s.to_string())));
                }
                let x = match (s.parse::<f64>(), unit) {
                    (Ok(x), _) if x.is_finite() => x,
                    (_, Some(u)) => {
                        temporal::parse(s).map(|t| t.value(*u)).ok_or_else(|| Problem::NotNumber(s.into()))?
                    }
                    _ => return Err(Problem::NotNumber(s.to_string())),
                };
                self.number(x).map(Value::Unit)
            }
        }
    }

    /// A presence attribute's column: 1 where the cell is missing, else 0. Only missingness
    /// is read (the value attribute parses the cell and reports its problems).
    fn presence(cells: &Cells, missing: &MissingTokens) -> Vec<u32> {
        let text = |s: Option<&str>| u32::from(s.is_none_or(|s| missing.is_missing(s)));
        match cells {
            Cells::Text(t) => (0..t.len()).map(|i| text(t.get(i))).collect(),
            Cells::Dict { array, keys, values } => {
                let per_value: Vec<u32> = (0..values.len()).map(|k| text(values.get(k))).collect();
                keys.iter().enumerate().map(|(i, &k)| if array.is_null(i) { 1 } else { per_value[k] }).collect()
            }
            Cells::Number { values, .. } | Cells::Time { values, .. } => {
                values.iter().map(|x| u32::from(x.is_nan())).collect()
            }
            Cells::Bool(values) => values.iter().map(|&b| u32::from(b == 2)).collect(),
        }
    }

    /// Encodes a batch column into `out`, listing problems as (row, problem).
    fn column(&self, cells: &Cells, missing: &MissingTokens, problems: &mut Vec<(usize, Problem)>) -> Result<Out> {
        if let OnMissing::Presence = self.on_missing {
            return Ok(Out::Category(Self::presence(cells, missing)));
        }
        let n = cells.len();
        let mut out = match self.attr {
            Attribute::Numeric { .. } => Out::Unit(Vec::with_capacity(n)),
            Attribute::Categorical { .. } => Out::Category(Vec::with_capacity(n)),
        };
        let mut push = |i: usize, r: Result<Value, Problem>| match (&mut out, self.resolve(r)) {
            (Out::Unit(v), Ok(Value::Unit(t))) => v.push(t),
            (Out::Category(v), Ok(Value::Category(c))) => v.push(c),
            (Out::Unit(v), r) => {
                v.push(0.0);
                if let Err(p) = r {
                    problems.push((i, p));
                }
            }
            (Out::Category(v), r) => {
                v.push(0);
                if let Err(p) = r {
                    problems.push((i, p));
                }
            }
        };
        match cells {
            Cells::Text(t) => (0..n).for_each(|i| push(i, self.text(t.get(i), missing))),
            Cells::Dict { array, keys, values } => {
                let per_value: Vec<Result<Value, Problem>> =
                    (0..values.len()).map(|k| self.text(values.get(k), missing)).collect();
                let null = self.text(None, missing);
                (0..n).for_each(|i| push(i, if array.is_null(i) { null.clone() } else { per_value[keys[i]].clone() }));
            }
            Cells::Number { values, integer } => {
                (0..n).for_each(|i| push(i, self.typed_number(values[i], *integer, missing)))
            }
            Cells::Bool(values) => (0..n).for_each(|i| push(i, self.boolean(values[i], missing))),
            Cells::Time { values, unit } => {
                let Kind::Numeric { unit: Some(want), .. } = self.kind else { return Err(self.time_error(*unit)) };
                (0..n).for_each(|i| push(i, self.number(want.convert(values[i], *unit)).map(Value::Unit)));
            }
        }
        Ok(out)
    }

    fn typed_number(&self, x: f64, integer: bool, missing: &MissingTokens) -> Result<Value, Problem> {
        match &self.kind {
            Kind::Numeric { .. } => self.number(x).map(Value::Unit),
            Kind::Categorical { .. } if x.is_nan() => self.label(None, missing).map(Value::Category),
            Kind::Categorical { .. } => {
                let text = if integer || x.fract() == 0.0 { format!("{}", x as i64) } else { format!("{x}") };
                self.label(Some(&text), missing).map(Value::Category)
            }
        }
    }

    fn boolean(&self, b: u8, missing: &MissingTokens) -> Result<Value, Problem> {
        match (&self.kind, b) {
            (Kind::Numeric { .. }, 2) => Err(Problem::Missing(None)),
            (Kind::Numeric { .. }, b) => self.number(b as f64).map(Value::Unit),
            (Kind::Categorical { .. }, 2) => self.label(None, missing).map(Value::Category),
            (Kind::Categorical { .. }, b) => {
                self.label(Some(if b == 1 { "true" } else { "false" }), missing).map(Value::Category)
            }
        }
    }

    fn time_error(&self, unit: Unit) -> Error {
        let name = self.attr.name();
        Error::data(match self.kind {
            Kind::Numeric { .. } => format!(
                "column \"{name}\" holds {} but the schema gives no unit for it: add `[units]` with `{name} = \"days\"` or `\"seconds\"` (bounds in that unit)",
                if unit == Unit::Days { "dates" } else { "timestamps" }
            ),
            Kind::Categorical { .. } => {
                format!(
                    "column \"{name}\" holds dates or timestamps, which cannot be a categorical attribute: make it numeric with a unit"
                )
            }
        })
    }

    /// The message for a problem, naming the value and what was expected.
    fn describe(&self, p: &Problem) -> String {
        let expected = match (&self.kind, self.attr) {
            (Kind::Numeric { unit: Some(u), range }, _) => {
                format!("a number or an ISO 8601 date in [{}, {}] ({})", range.min, range.max, u.describe())
            }
            (Kind::Numeric { range, .. }, _) => format!("a number in [{}, {}]", range.min, range.max),
            (_, Attribute::Categorical { categories, .. }) => format!("one of {}", preview(categories)),
            _ => unreachable!(),
        };
        let name = self.attr.name();
        match p {
            Problem::Missing(token) => {
                let what = token.as_ref().map_or("a null".to_string(), |t| {
                    if t.is_empty() { "an empty cell".into() } else { format!("\"{t}\"") }
                });
                let hint = if self.attr.is_numeric() {
                    " (missing = \"report\" on the attribute reports missingness privately; missing = { impute = v } imputes)"
                } else {
                    " (missing = \"report\" on the attribute counts missing values as a category)"
                };
                format!(
                    "{name} is missing ({what}), expected {expected}{hint}; with invalid = \"skip\" such rows are skipped"
                )
            }
            Problem::NotNumber(s) | Problem::Unknown(s) => format!("{name} is \"{s}\", expected {expected}"),
            Problem::OutOfRange(x) => format!("{name} is {x}, expected {expected}"),
        }
    }
}

fn preview(labels: &[String]) -> String {
    let shown: Vec<String> = labels.iter().take(8).map(|l| format!("\"{l}\"")).collect();
    if labels.len() > 8 { format!("{}, … ({} labels)", shown.join(", "), labels.len()) } else { shown.join(", ") }
}

/// Encodes every batch of `source` against `schema`, by attribute.
pub fn encode_batches(source: &mut dyn Batches, schema: &Schema, options: &EncodeOptions) -> Result<Columns> {
    let hint = source.rows_hint().unwrap_or(0);
    let mut all = empty_columns(schema, hint);
    let totals = encode_each(source, schema, options, &mut |part: Columns| {
        for (src, dst) in part.columns.into_iter().zip(&mut all.columns) {
            match (src, dst) {
                (ColumnValues::Unit(v), ColumnValues::Unit(d)) => d.extend_from_slice(&v),
                (ColumnValues::Category(v), ColumnValues::Category(d)) => d.extend_from_slice(&v),
                _ => unreachable!("column kinds follow the attributes"),
            }
        }
    })?;
    Ok(Columns { columns: all.columns, ..totals })
}

/// Encodes every batch of `source` against `schema`, row-major (`n × d` values, what a task's
/// `Input::Record` borrows): each batch is encoded by attribute and then interleaved, so no
/// more than one batch is ever held by attribute or as text.
pub fn encode_rows(source: &mut dyn Batches, schema: &Schema, options: &EncodeOptions) -> Result<Encoded> {
    let mut values = Vec::with_capacity(source.rows_hint().unwrap_or(0) * schema.len());
    let totals = encode_each(source, schema, options, &mut |part: Columns| {
        for i in 0..part.n {
            values.extend(part.columns.iter().map(|c| c.get(i)));
        }
    })?;
    Ok(Encoded { values, n: totals.n, skipped: totals.skipped, clamped: totals.clamped })
}

/// One empty vector per attribute.
fn empty_columns(schema: &Schema, capacity: usize) -> Columns {
    let columns = schema
        .attributes()
        .iter()
        .map(|a| match a {
            Attribute::Numeric { .. } => ColumnValues::Unit(Vec::with_capacity(capacity)),
            Attribute::Categorical { .. } => ColumnValues::Category(Vec::with_capacity(capacity)),
        })
        .collect();
    Columns { columns, n: 0, skipped: 0, clamped: 0 }
}

/// Encodes each batch into columns handed to `sink`; returns the totals (no columns).
fn encode_each(
    source: &mut dyn Batches,
    schema: &Schema,
    options: &EncodeOptions,
    sink: &mut dyn FnMut(Columns),
) -> Result<Columns> {
    let name = source.name().to_string();
    let encoders: Vec<AttrEncoder> = (0..schema.len())
        .map(|j| {
            let column = match schema.role(j) {
                Role::Value(i) => schema.declared()[i].attribute.name(),
                Role::Presence(b) => schema.attributes()[b].name(),
            };
            let unread = options.only.as_ref().is_some_and(|only| !only.iter().any(|c| c == column));
            let col = if unread { 0 } else { position(source.header(), &name, column)? };
            Ok(AttrEncoder { unread, ..AttrEncoder::new(schema, j, col, options.units.get(column).copied())? })
        })
        .collect::<Result<_>>()?;
    source.select(&encoders.iter().filter(|e| !e.unread).map(|e| e.col).collect::<Vec<_>>());
    let mut totals = Columns { columns: Vec::new(), n: 0, skipped: 0, clamped: 0 };
    let mut rows = 0;
    while let Some(batch) = source.next_batch()? {
        rows += batch.len();
        let mut part = empty_columns(schema, batch.len());
        encode_batch(&batch, &encoders, options, &mut part).map_err(|e| match e {
            Error::Data(m) => Error::Data(format!("{name}: {m}")),
            e => e,
        })?;
        (totals.n, totals.skipped, totals.clamped) =
            (totals.n + part.n, totals.skipped + part.skipped, totals.clamped + part.clamped);
        sink(part);
    }
    if rows == 0 {
        return Err(Error::data(format!("{name}: no data rows")));
    }
    if totals.n == 0 {
        return Err(Error::data(format!(
            "{name}: no usable rows: all {rows} rows were skipped by the schema's invalid-value policy"
        )));
    }
    Ok(totals)
}

/// Encodes one batch and appends the rows the policy keeps.
fn encode_batch(batch: &Batch, encoders: &[AttrEncoder], options: &EncodeOptions, out: &mut Columns) -> Result<()> {
    let mut problems: Vec<Vec<(usize, Problem)>> = Vec::with_capacity(encoders.len());
    let mut cols = Vec::with_capacity(encoders.len());
    for e in encoders {
        let mut p = Vec::new();
        cols.push(match e.unread {
            true => e.placeholder(batch.len()),
            false => e.column(&batch.cells(e.col)?, &options.missing, &mut p)?,
        });
        problems.push(p);
    }
    let mut keep = vec![true; batch.len()];
    let mut clamped = vec![false; batch.len()];
    if options.invalid == InvalidPolicy::Error {
        // The first bad cell in row order (then attribute order).
        if let Some((j, (i, p))) = problems
            .iter()
            .enumerate()
            .filter_map(|(j, ps)| ps.first().map(|x| (j, x)))
            .min_by_key(|(j, (i, _))| (*i, *j))
        {
            let e = &encoders[j];
            return Err(Error::data(format!(
                "{}, column \"{}\": {}",
                batch.row_name(*i),
                e.attr.name(),
                e.describe(p)
            )));
        }
    }
    for (j, ps) in problems.iter().enumerate() {
        for (i, p) in ps {
            match (p, &mut cols[j], &encoders[j].kind) {
                (Problem::OutOfRange(x), Out::Unit(v), Kind::Numeric { range, .. })
                    if options.invalid == InvalidPolicy::Clamp =>
                {
                    v[*i] = range.to_unit_clamped(*x);
                    clamped[*i] = true;
                }
                _ => keep[*i] = false,
            }
        }
    }
    let kept = keep.iter().filter(|&&k| k).count();
    out.n += kept;
    out.skipped += batch.len() - kept;
    out.clamped += clamped.iter().zip(&keep).filter(|&(&c, &k)| c && k).count();
    for (col, dst) in cols.into_iter().zip(&mut out.columns) {
        match (col, dst) {
            (Out::Unit(v), ColumnValues::Unit(d)) => extend_kept(d, v, &keep, kept),
            (Out::Category(v), ColumnValues::Category(d)) => extend_kept(d, v, &keep, kept),
            _ => unreachable!("column kinds follow the attributes"),
        }
    }
    Ok(())
}

fn extend_kept<T: Copy>(dst: &mut Vec<T>, src: Vec<T>, keep: &[bool], kept: usize) {
    if kept == src.len() {
        dst.extend_from_slice(&src);
    } else {
        dst.extend(src.iter().zip(keep).filter(|(_, k)| **k).map(|(v, _)| *v));
    }
}

/// Row-major values to columns (e.g. a synthetic population).
pub fn columns_from_rows(schema: &Schema, values: &[Value]) -> Columns {
    let d = schema.len();
    let n = values.len() / d.max(1);
    let columns = schema
        .attributes()
        .iter()
        .enumerate()
        .map(|(j, a)| {
            let cells = values.iter().skip(j).step_by(d);
            if a.is_numeric() {
                ColumnValues::Unit(cells.map(|v| if let Value::Unit(t) = v { *t } else { f64::NAN }).collect())
            } else {
                ColumnValues::Category(cells.map(|v| if let Value::Category(c) = v { *c } else { u32::MAX }).collect())
            }
        })
        .collect();
    Columns { columns, n, skipped: 0, clamped: 0 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DataReader;

    /// A blank in a column the task does not read neither refuses the file nor skips the row;
    /// the file need not even have that column.
    #[test]
    fn only_the_named_columns_are_read_and_checked() {
        let schema = Schema::new(vec![
            Attribute::Numeric { name: "age".into(), min: 0.0, max: 100.0 },
            Attribute::Numeric { name: "prestg10".into(), min: 0.0, max: 100.0 },
            Attribute::Categorical { name: "sex".into(), categories: vec!["F".into(), "M".into()] },
        ])
        .unwrap();
        let csv = b"age,prestg10\n30,40\n50,\n70,60\n".to_vec();
        let all = EncodeOptions::default();
        let e = encode_rows(&mut DataReader::from_bytes("t.csv", csv.clone()).unwrap(), &schema, &all).err().unwrap();
        assert!(e.to_string().contains("\"sex\""), "{e}");
        let only = EncodeOptions { only: Some(vec!["age".into()]), ..Default::default() };
        let enc = encode_rows(&mut DataReader::from_bytes("t.csv", csv).unwrap(), &schema, &only).unwrap();
        assert_eq!((enc.n, enc.skipped), (3, 0));
        let ages: Vec<f64> =
            enc.values.chunks(3).map(|r| if let Value::Unit(t) = r[0] { t } else { f64::NAN }).collect();
        assert!(ages.iter().zip([-0.4, 0.0, 0.4]).all(|(a, b)| (a - b).abs() < 1e-12), "{ages:?}");
        assert!(enc.values.chunks(3).all(|r| r[1] == Value::Unit(0.0) && r[2] == Value::Category(0)));
        // The column read is still checked.
        let bad = b"age,prestg10\n30,40\n,1\n".to_vec();
        let e = encode_rows(&mut DataReader::from_bytes("t.csv", bad).unwrap(), &schema, &only).err().unwrap();
        assert!(e.to_string().contains("row 3, column \"age\""), "{e}");
    }
}
