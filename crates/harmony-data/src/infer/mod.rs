//! Schema inference a statistician can accept, and that says what it chose and why.
//!
//! Per column, over every row (batch by batch, bounded memory):
//! * **missing cells** — empty, a missing token (`NA`, `N/A`, `NaN`, `null`, `None`, `?` by
//!   default), a null, a NaN — are set aside before deciding the kind;
//! * **numeric** when every other cell is a number: non-integers, or integers with more than
//!   `few_integers` (12) distinct values. A few distinct integers are numeric when they have no
//!   gaps (a count or an ordered score: 0–6, 1–5) and categorical codes when they do
//!   (1, 2, 5, 9); a note says which and how to switch;
//! * **dates and timestamps** (ISO 8601 text, Arrow dates/timestamps) are numeric, in days or
//!   seconds since 1970-01-01, with the unit in the schema's `[units]`;
//! * **categorical** otherwise (booleans included); left out above `max_categories` labels;
//! * **bounds** are rounded outward (1-2-5 steps, calendar boundaries for dates), and a loud
//!   warning says that bounds and labels learned from the data are not private.
//!
//! A column with missing cells gets `missing = "report"` (with a note): devices report
//! missingness privately (the category "(missing)", or a presence attribute for a number), and
//! the estimates give the share missing and the present values' mean or frequencies.

mod bounds;
mod stats;

use crate::error::{Error, Result};
use crate::reader::{Batches, DataReader};
use crate::schema_file::{MissingTokens, SchemaFile};
use crate::table::{Table, TableBatches};
use crate::temporal::{self, Unit};
use harmony_core::schema::{Attribute, Declared, MISSING_LABEL, Missing};
use stats::{Stats, Typed};
use std::path::Path;

pub use bounds::outward as nice_bounds;

/// Options of the inference.
#[derive(Debug, Clone)]
pub struct InferOptions {
    /// Categorical columns with more labels are left out.
    pub max_categories: usize,
    /// Columns to leave out.
    pub skip: Vec<String>,
    /// Texts that mean "missing".
    pub missing: MissingTokens,
    /// Integer columns with at most this many distinct values get the gaps rule.
    pub few_integers: usize,
}

impl Default for InferOptions {
    fn default() -> Self {
        InferOptions { max_categories: 100, skip: Vec::new(), missing: MissingTokens::default(), few_integers: 12 }
    }
}

/// An inferred schema and why.
#[derive(Debug, Clone)]
pub struct Inference {
    /// The schema file.
    pub file: SchemaFile,
    /// One note per column (kind, bounds, missing cells) and per renamed column.
    pub notes: Vec<String>,
    /// What needs attention: columns left out or renamed, choices to check, skipped rows.
    pub warnings: Vec<String>,
    /// Rows read.
    pub rows: usize,
}

/// The warning printed with every inferred schema.
pub const NOT_PRIVATE: &str = "numeric bounds and category lists were learned from the raw data: they are NOT private \
     (rounding them outward hides the exact extremes, not who is in the data). In a real collection, take them \
     from public knowledge.";

/// Infers a schema from a file (any format; `-` = standard input).
pub fn infer_path(path: &Path, options: &InferOptions) -> Result<Inference> {
    let mut reader = DataReader::open(path)?;
    let renames = reader.notes().to_vec();
    let mut inf = infer_batches(&mut reader, options)?;
    inf.notes.splice(0..0, renames.iter().cloned());
    inf.warnings.splice(0..0, renames);
    Ok(inf)
}

/// Infers a schema from batches.
pub fn infer_batches(source: &mut dyn Batches, options: &InferOptions) -> Result<Inference> {
    let header = source.header().to_vec();
    let name = source.name().to_string();
    let mut stats: Vec<Option<Stats>> = vec![None; header.len()];
    let mut unsupported: Vec<Option<String>> = vec![None; header.len()];
    let mut rows = 0;
    while let Some(batch) = source.next_batch()? {
        rows += batch.len();
        for (c, slot) in stats.iter_mut().enumerate() {
            if options.skip.contains(&header[c]) || unsupported[c].is_some() {
                continue;
            }
            let cells = match batch.cells(c) {
                Ok(cells) => cells,
                Err(e) => {
                    unsupported[c] = Some(e.to_string());
                    continue;
                }
            };
            let s = slot.get_or_insert_with(|| Stats::new(typed(&cells), options.few_integers, options.max_categories));
            s.add(&cells, &options.missing);
        }
    }
    if rows == 0 {
        return Err(Error::data(format!("{name}: no data rows")));
    }
    let mut out = Inference { file: SchemaFile::default(), notes: Vec::new(), warnings: Vec::new(), rows };
    for (c, col) in header.iter().enumerate() {
        if options.skip.contains(col) {
            continue;
        }
        if let Some(why) = &unsupported[c] {
            out.warn(format!("{why}: left out"));
            continue;
        }
        if let Some(s) = &stats[c] {
            decide(col, s, options, &mut out);
        }
    }
    if out.file.attributes.is_empty() {
        return Err(Error::data(format!(
            "{name}: no column could be inferred as an attribute:\n  {}",
            out.warnings.join("\n  ")
        )));
    }
    if options.missing != MissingTokens::default() {
        out.file.missing_tokens = Some(options.missing.tokens().to_vec());
    }
    out.warnings.push(NOT_PRIVATE.to_string());
    Ok(out)
}

fn typed(cells: &crate::cells::Cells) -> Typed {
    use crate::cells::Cells;
    match cells {
        Cells::Text(_) | Cells::Dict { .. } => Typed::Text,
        Cells::Number { .. } => Typed::Number,
        Cells::Bool(_) => Typed::Bool,
        Cells::Time { unit, .. } => Typed::Time(*unit),
    }
}

impl Inference {
    fn note(&mut self, column: &str, text: String) {
        self.notes.push(format!("column \"{column}\": {text}"));
    }
    fn warn(&mut self, text: String) {
        self.notes.push(text.clone());
        self.warnings.push(text);
    }
}

/// "12 missing (0.4%: \"\" 10, NA 2)".
fn missing_summary(s: &Stats) -> String {
    let total: usize = s.missing.values().sum();
    let parts: Vec<String> =
        s.missing.iter().map(|(k, v)| format!("{} {v}", if k.is_empty() { "empty" } else { k })).collect();
    format!("{total} missing ({:.1}%: {})", 100.0 * total as f64 / s.rows as f64, parts.join(", "))
}

/// Chooses the kind of one column and records why.
fn decide(col: &str, s: &Stats, options: &InferOptions, out: &mut Inference) {
    let present = s.present();
    let missing = s.rows - present;
    if present == 0 {
        return out.warn(format!("column \"{col}\": all {} cells are missing: left out", s.rows));
    }
    let temporal = s.dates + s.datetimes == present && s.typed == Typed::Text;
    let kind = if let Typed::Time(u) = s.typed {
        Some(u)
    } else if temporal {
        Some(if s.datetimes == 0 { Unit::Days } else { Unit::Seconds })
    } else {
        None
    };
    if let Some(unit) = kind {
        return decide_time(col, s, unit, out);
    }
    if s.typed == Typed::Bool || s.numbers < present {
        return decide_categorical(col, s, options, out);
    }
    if s.distinct.len() == 1 {
        return out.warn(format!("column \"{col}\": constant ({}): left out", s.min));
    }
    let few = s.integer && s.distinct.len() <= options.few_integers;
    let contiguous = few && s.max - s.min + 1.0 == s.distinct.len() as f64;
    let why = if !s.integer {
        "numbers → numeric".to_string()
    } else if !few {
        format!("integers, more than {} distinct values → numeric", options.few_integers)
    } else if contiguous {
        let text = format!(
            "{} distinct integers {}–{} without gaps: read as a count or an ordered score → numeric \
             (if they are codes of unordered categories, make it categorical)",
            s.distinct.len(),
            s.min,
            s.max
        );
        out.warnings.push(format!("column \"{col}\": {text}"));
        text
    } else {
        return decide_codes(col, s, out);
    };
    let (lo, hi, step) = bounds::outward(s.min, s.max, s.integer);
    if !(2.0 * (hi - lo)).is_finite() {
        let big = s.min.abs().max(s.max.abs());
        return out.warn(format!(
            "column \"{col}\": numbers up to {big:e} in magnitude: too wide a range for a numeric attribute \
             (2·(max − min) must be finite): left out"
        ));
    }
    push(out, Attribute::Numeric { name: col.to_string(), min: lo, max: hi }, missing > 0);
    out.note(
        col,
        format!("{why}; bounds [{lo}, {hi}] (data [{}, {}] rounded outward to multiples of {step})", s.min, s.max),
    );
    if missing > 0 {
        report_missing(col, s, out);
    }
}

/// Adds an attribute, with `missing = "report"` when the column has missing cells.
fn push(out: &mut Inference, attribute: Attribute, has_missing: bool) {
    let missing = if has_missing { Missing::Report } else { Missing::Error };
    out.file.attributes.push(Declared { attribute, missing });
}

/// A numeric column with missing cells: `missing = "report"` (a presence attribute).
fn report_missing(col: &str, s: &Stats, out: &mut Inference) {
    out.note(
        col,
        format!(
            "{} → missing = \"report\": devices report missingness privately (presence attribute \"{col}:missing\"); \
             estimates give the share missing and the present values' mean",
            missing_summary(s)
        ),
    );
}

fn decide_time(col: &str, s: &Stats, unit: Unit, out: &mut Inference) {
    let (min, max) = (unit.convert(s.tmin, Unit::Seconds), unit.convert(s.tmax, Unit::Seconds));
    let show = |x: f64| temporal::format_datetime(Unit::Seconds.convert(x, unit));
    if min == max {
        return out.warn(format!("column \"{col}\": constant ({}): left out", show(min)));
    }
    let (lo, hi, how) = temporal::outward(min, max, unit);
    push(out, Attribute::Numeric { name: col.to_string(), min: lo, max: hi }, s.present() < s.rows);
    out.file.units.insert(col.to_string(), unit);
    let what = if unit == Unit::Days { "dates" } else { "timestamps" };
    out.note(
        col,
        format!(
            "{what} → numeric in {} ([units]); bounds [{lo}, {hi}] = {} … {} ({how} around the data's {} … {})",
            unit.describe(),
            show(lo),
            show(hi),
            show(min),
            show(max)
        ),
    );
    if s.present() < s.rows {
        report_missing(col, s, out);
    }
}

/// Few distinct integers with gaps: categorical codes.
fn decide_codes(col: &str, s: &Stats, out: &mut Inference) {
    let mut labels: Vec<String> = if s.typed == Typed::Text && !s.overflow {
        s.labels.keys().cloned().collect()
    } else {
        s.distinct.iter().map(|x| format!("{}", *x as i64)).collect()
    };
    labels.sort_by(|a, b| a.parse::<f64>().unwrap_or(f64::NAN).total_cmp(&b.parse::<f64>().unwrap_or(f64::NAN)));
    let shown: Vec<String> = s.distinct.iter().map(|x| x.to_string()).collect();
    let text = format!(
        "{} distinct integers with gaps ({}): read as codes → categorical (if they measure a quantity, make it numeric)",
        s.distinct.len(),
        shown.join(", ")
    );
    out.warnings.push(format!("column \"{col}\": {text}"));
    push_categorical(col, s, labels, text, out);
}

fn decide_categorical(col: &str, s: &Stats, options: &InferOptions, out: &mut Inference) {
    let present = s.present();
    if s.numbers > 0 && s.numbers * 10 >= present * 9 {
        out.warn(format!(
            "column \"{col}\": {:.1}% of its non-missing cells are numbers, but {} are not (e.g. {}): if those mean \
             \"missing\", list them in --missing-tokens and it becomes numeric",
            100.0 * s.numbers as f64 / present as f64,
            s.other + s.dates + s.datetimes,
            s.other_examples.iter().map(|e| format!("\"{e}\"")).collect::<Vec<_>>().join(", ")
        ));
    }
    if s.overflow {
        return out.warn(format!(
            "column \"{col}\": more than {} labels (--max-categories): left out",
            options.max_categories
        ));
    }
    let mut labels: Vec<String> = s.labels.keys().cloned().collect();
    labels.sort();
    let why = if s.typed == Typed::Bool { "booleans → categorical" } else { "text → categorical" };
    push_categorical(col, s, labels, why.to_string(), out);
}

/// Adds a categorical attribute (`missing = "report"` for missing cells: category
/// "(missing)") unless it has a single label.
fn push_categorical(col: &str, s: &Stats, labels: Vec<String>, why: String, out: &mut Inference) {
    let missing = s.rows - s.present();
    let mut why = format!("{why}, {} labels", labels.len());
    if missing > 0 {
        why.push_str(&format!("; {} → missing = \"report\" (category \"{MISSING_LABEL}\")", missing_summary(s)));
    }
    if labels.len() + usize::from(missing > 0) < 2 {
        return out.warn(format!("column \"{col}\": a single label (\"{}\"): left out", labels[0]));
    }
    push(out, Attribute::Categorical { name: col.to_string(), categories: labels }, missing > 0);
    out.note(col, why);
}

/// The legacy inference over a [`Table`]: default options but `max_categories` and `skip`.
/// Returns the schema and the warnings (the last says that learned bounds are not private).
pub fn infer(table: &Table, max_categories: usize, skip: &[String]) -> (SchemaFile, Vec<String>) {
    let options = InferOptions { max_categories, skip: skip.to_vec(), ..Default::default() };
    match infer_batches(&mut TableBatches::new(table), &options) {
        Ok(inf) => (inf.file, inf.warnings),
        Err(e) => (SchemaFile::default(), vec![e.to_string(), NOT_PRIVATE.to_string()]),
    }
}
