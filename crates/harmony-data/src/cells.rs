//! One column of one batch as the encoder and the inference see it, whatever the format: text
//! (CSV fields, Arrow strings), dictionary-encoded text, numbers, booleans, or dates/timestamps
//! as numbers in a [`Unit`]. A missing cell stays visible as missing: a null, a NaN, or a text
//! that is a missing token — never an empty string standing for it.

use crate::error::{Error, Result};
use crate::temporal::{DAY, Unit};
use arrow_array::cast::AsArray;
use arrow_array::types::*;
use arrow_array::{Array, ArrowPrimitiveType, LargeStringArray, PrimitiveArray, StringArray, StringViewArray};
use arrow_schema::{DataType, TimeUnit};

/// Text cells (trimmed on access).
pub enum Text<'a> {
    /// Field `col` of parsed CSV records.
    Csv(&'a [csv::StringRecord], usize),
    /// Column `col` of rows held as strings (the legacy [`Table`](crate::Table)).
    Rows(&'a [Vec<String>], usize),
    /// Arrow `Utf8`.
    Utf8(&'a StringArray),
    /// Arrow `LargeUtf8`.
    Large(&'a LargeStringArray),
    /// Arrow `Utf8View`.
    View(&'a StringViewArray),
}

impl<'a> Text<'a> {
    /// Cell `i`, trimmed; `None` for a null.
    #[inline]
    pub fn get(&self, i: usize) -> Option<&'a str> {
        match self {
            Text::Csv(rows, c) => Some(rows[i].get(*c).unwrap_or("")),
            Text::Rows(rows, c) => Some(rows[i][*c].as_str()),
            Text::Utf8(a) => a.is_valid(i).then(|| a.value(i).trim()),
            Text::Large(a) => a.is_valid(i).then(|| a.value(i).trim()),
            Text::View(a) => a.is_valid(i).then(|| a.value(i).trim()),
        }
    }
    /// Number of cells.
    pub fn len(&self) -> usize {
        match self {
            Text::Csv(rows, _) => rows.len(),
            Text::Rows(rows, _) => rows.len(),
            Text::Utf8(a) => a.len(),
            Text::Large(a) => a.len(),
            Text::View(a) => a.len(),
        }
    }
    /// Whether there are no cells.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A batch column, typed.
pub enum Cells<'a> {
    /// Text: parsed as numbers, dates or labels as the attribute needs.
    Text(Text<'a>),
    /// Dictionary-encoded text: cell `i` is `values[keys[i]]`, null where `array` is.
    Dict {
        /// The dictionary array (for its nulls).
        array: &'a dyn Array,
        /// Each cell's index into `values`.
        keys: Vec<usize>,
        /// The dictionary.
        values: Text<'a>,
    },
    /// Numbers; NaN for a null (a NaN in a float column is missing too).
    Number {
        /// The values.
        values: Vec<f64>,
        /// Whether the Arrow type is an integer type.
        integer: bool,
    },
    /// Booleans: 0 false, 1 true, 2 null.
    Bool(Vec<u8>),
    /// Dates or timestamps in `unit` since the epoch; NaN for a null.
    Time {
        /// The values.
        values: Vec<f64>,
        /// Days for dates, seconds for timestamps.
        unit: Unit,
    },
}

impl Cells<'_> {
    /// Number of cells.
    pub fn len(&self) -> usize {
        match self {
            Cells::Text(t) => t.len(),
            Cells::Dict { keys, .. } => keys.len(),
            Cells::Number { values, .. } | Cells::Time { values, .. } => values.len(),
            Cells::Bool(v) => v.len(),
        }
    }
    /// Whether there are no cells.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn floats<T: ArrowPrimitiveType>(a: &PrimitiveArray<T>, f: impl Fn(T::Native) -> f64) -> Vec<f64> {
    match a.nulls() {
        None => a.values().iter().map(|&v| f(v)).collect(),
        Some(n) => a.values().iter().zip(n.iter()).map(|(&v, ok)| if ok { f(v) } else { f64::NAN }).collect(),
    }
}

fn number<T: ArrowPrimitiveType>(a: &dyn Array, integer: bool, f: impl Fn(T::Native) -> f64) -> Cells<'static> {
    Cells::Number { values: floats(a.as_primitive::<T>(), f), integer }
}

fn time<T: ArrowPrimitiveType>(a: &dyn Array, unit: Unit, f: impl Fn(T::Native) -> f64) -> Cells<'static> {
    Cells::Time { values: floats(a.as_primitive::<T>(), f), unit }
}

/// The types [`arrow_cells`] reads, for error messages.
pub const SUPPORTED: &str = "strings (Utf8, LargeUtf8, Utf8View, dictionary-encoded), booleans, integers, \
     floats, decimals, dates and timestamps";

/// Views an Arrow column; `name` is used in the error for an unsupported type.
pub fn arrow_cells<'a>(a: &'a dyn Array, name: &str) -> Result<Cells<'a>> {
    let ts = |unit: &TimeUnit| match unit {
        TimeUnit::Second => 1.0,
        TimeUnit::Millisecond => 1e-3,
        TimeUnit::Microsecond => 1e-6,
        TimeUnit::Nanosecond => 1e-9,
    };
    Ok(match a.data_type() {
        DataType::Utf8 => Cells::Text(Text::Utf8(a.as_string::<i32>())),
        DataType::LargeUtf8 => Cells::Text(Text::Large(a.as_string::<i64>())),
        DataType::Utf8View => Cells::Text(Text::View(a.as_string_view())),
        DataType::Dictionary(_, value_type) => {
            let dict = a.as_any_dictionary();
            let values = match arrow_cells(dict.values().as_ref(), name) {
                Ok(Cells::Text(t)) => t,
                _ => {
                    return Err(unsupported(
                        name,
                        &DataType::Dictionary(Box::new(DataType::Int32), value_type.clone()),
                    ));
                }
            };
            Cells::Dict { array: a, keys: dict.normalized_keys(), values }
        }
        DataType::Boolean => {
            let b = a.as_boolean();
            Cells::Bool((0..b.len()).map(|i| if b.is_valid(i) { b.value(i) as u8 } else { 2 }).collect())
        }
        DataType::Null => Cells::Number { values: vec![f64::NAN; a.len()], integer: false },
        DataType::Int8 => number::<Int8Type>(a, true, |v| v as f64),
        DataType::Int16 => number::<Int16Type>(a, true, |v| v as f64),
        DataType::Int32 => number::<Int32Type>(a, true, |v| v as f64),
        DataType::Int64 => number::<Int64Type>(a, true, |v| v as f64),
        DataType::UInt8 => number::<UInt8Type>(a, true, |v| v as f64),
        DataType::UInt16 => number::<UInt16Type>(a, true, |v| v as f64),
        DataType::UInt32 => number::<UInt32Type>(a, true, |v| v as f64),
        DataType::UInt64 => number::<UInt64Type>(a, true, |v| v as f64),
        DataType::Float16 => number::<Float16Type>(a, false, |v| v.to_f64()),
        DataType::Float32 => number::<Float32Type>(a, false, |v| v as f64),
        DataType::Float64 => number::<Float64Type>(a, false, |v| v),
        DataType::Decimal128(_, s) => {
            let scale = 10f64.powi(-(*s as i32));
            number::<Decimal128Type>(a, false, move |v| v as f64 * scale)
        }
        DataType::Date32 => time::<Date32Type>(a, Unit::Days, |v| v as f64),
        DataType::Date64 => time::<Date64Type>(a, Unit::Days, |v| v as f64 / (DAY * 1e3)),
        DataType::Timestamp(u, _) => {
            let k = ts(u);
            match u {
                TimeUnit::Second => time::<TimestampSecondType>(a, Unit::Seconds, move |v| v as f64 * k),
                TimeUnit::Millisecond => time::<TimestampMillisecondType>(a, Unit::Seconds, move |v| v as f64 * k),
                TimeUnit::Microsecond => time::<TimestampMicrosecondType>(a, Unit::Seconds, move |v| v as f64 * k),
                TimeUnit::Nanosecond => time::<TimestampNanosecondType>(a, Unit::Seconds, move |v| v as f64 * k),
            }
        }
        other => return Err(unsupported(name, other)),
    })
}

fn unsupported(name: &str, t: &DataType) -> Error {
    Error::data(format!("column \"{name}\" has Arrow type {t}, which Harmony cannot read (supported: {SUPPORTED})"))
}
