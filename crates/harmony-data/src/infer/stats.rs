//! What the inference learns about a column, batch by batch, in bounded memory: counts of
//! missing cells (by token), of numbers, dates and other texts; the numbers' range, whether
//! they are all integers, up to a few distinct values; up to `max_categories + 1` labels.

use crate::cells::{Cells, Text};
use crate::schema_file::MissingTokens;
use crate::temporal::{self, Temporal, Unit};
use std::collections::{BTreeMap, HashMap};

/// The column's Arrow kind (text for CSV).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Typed {
    /// Text (CSV, Arrow strings, dictionaries).
    Text,
    /// An integer or float type.
    Number,
    /// Booleans.
    Bool,
    /// Dates (days) or timestamps (seconds).
    Time(Unit),
}

/// Statistics of one column.
#[derive(Debug, Clone)]
pub struct Stats {
    pub typed: Typed,
    pub rows: usize,
    /// Missing cells by what they were (`""`, a token, `null`).
    pub missing: BTreeMap<String, usize>,
    /// Cells that are numbers (typed, or text parsing as a finite number).
    pub numbers: usize,
    /// Text cells that are ISO 8601 dates / datetimes.
    pub dates: usize,
    pub datetimes: usize,
    /// Text cells that are none of the above, and a few of them.
    pub other: usize,
    pub other_examples: Vec<String>,
    pub integer: bool,
    pub min: f64,
    pub max: f64,
    /// Temporal range, in seconds.
    pub tmin: f64,
    pub tmax: f64,
    /// Distinct numbers, sorted, while there are at most `few + 1`.
    pub distinct: Vec<f64>,
    few: usize,
    /// Distinct labels (text as read), while there are at most `max_labels`.
    pub labels: HashMap<String, usize>,
    pub overflow: bool,
    max_labels: usize,
}

impl Stats {
    pub fn new(typed: Typed, few: usize, max_categories: usize) -> Self {
        Stats {
            typed,
            rows: 0,
            missing: BTreeMap::new(),
            numbers: 0,
            dates: 0,
            datetimes: 0,
            other: 0,
            other_examples: Vec::new(),
            integer: true,
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
            tmin: f64::INFINITY,
            tmax: f64::NEG_INFINITY,
            distinct: Vec::new(),
            few,
            labels: HashMap::new(),
            overflow: false,
            max_labels: max_categories + 1,
        }
    }

    /// Cells that are not missing.
    pub fn present(&self) -> usize {
        self.rows - self.missing.values().sum::<usize>()
    }

    fn miss(&mut self, what: &str) {
        *self.missing.entry(what.to_string()).or_default() += 1;
    }

    fn number(&mut self, x: f64) {
        // -0 is 0 (one label, one code); integers are the exactly representable ones.
        let x = x + 0.0;
        self.numbers += 1;
        self.integer &= x.fract() == 0.0 && x.abs() <= 9_007_199_254_740_992.0;
        self.min = self.min.min(x);
        self.max = self.max.max(x);
        if self.distinct.len() <= self.few
            && let Err(k) = self.distinct.binary_search_by(|v| v.total_cmp(&x))
        {
            self.distinct.insert(k, x);
        }
    }

    fn time(&mut self, seconds: f64) {
        self.tmin = self.tmin.min(seconds);
        self.tmax = self.tmax.max(seconds);
    }

    fn label(&mut self, s: &str) {
        if self.overflow {
            return;
        }
        if let Some(c) = self.labels.get_mut(s) {
            *c += 1;
        } else if self.labels.len() < self.max_labels {
            self.labels.insert(s.to_string(), 1);
        } else {
            self.overflow = true;
        }
    }

    fn text(&mut self, s: Option<&str>, missing: &MissingTokens) {
        let Some(s) = s else { return self.miss("null") };
        if missing.is_missing(s) {
            return self.miss(s);
        }
        self.label(s);
        match s.parse::<f64>() {
            Ok(x) if x.is_finite() => self.number(x),
            _ => match temporal::parse(s) {
                Some(t @ Temporal::Date(_)) => {
                    self.dates += 1;
                    self.time(t.value(Unit::Seconds));
                }
                Some(t @ Temporal::DateTime(_)) => {
                    self.datetimes += 1;
                    self.time(t.value(Unit::Seconds));
                }
                None => {
                    self.other += 1;
                    if self.other_examples.len() < 3 && !self.other_examples.iter().any(|e| e == s) {
                        self.other_examples.push(s.to_string());
                    }
                }
            },
        }
    }

    /// Adds a batch column.
    pub fn add(&mut self, cells: &Cells, missing: &MissingTokens) {
        self.rows += cells.len();
        match cells {
            Cells::Text(t) => (0..t.len()).for_each(|i| self.text(t.get(i), missing)),
            Cells::Dict { array, keys, values } => self.dict(*array, keys, values, missing),
            Cells::Number { values, .. } => {
                values.iter().for_each(|&x| if x.is_nan() { self.miss("null") } else { self.number(x) })
            }
            Cells::Bool(v) => v.iter().for_each(|&b| match b {
                2 => self.miss("null"),
                b => self.label(if b == 1 { "true" } else { "false" }),
            }),
            Cells::Time { values, unit } => values
                .iter()
                .for_each(|&x| if x.is_nan() { self.miss("null") } else { self.time(Unit::Seconds.convert(x, *unit)) }),
        }
    }

    /// A dictionary column: each distinct value's statistics, weighted by its count.
    fn dict(&mut self, array: &dyn arrow_array::Array, keys: &[usize], values: &Text, missing: &MissingTokens) {
        let mut counts = vec![0usize; values.len()];
        for (i, &k) in keys.iter().enumerate() {
            if array.is_null(i) {
                self.miss("null");
            } else {
                counts[k] += 1;
            }
        }
        for (k, &count) in counts.iter().enumerate().filter(|(_, c)| **c > 0) {
            let mut one = Stats::new(Typed::Text, self.few, self.max_labels - 1);
            one.text(values.get(k), missing);
            for _ in 0..count {
                self.merge_one(&one);
            }
        }
    }

    /// Adds a one-cell statistic (a dictionary value, once per occurrence).
    fn merge_one(&mut self, one: &Stats) {
        for what in one.missing.keys() {
            self.miss(what);
        }
        if one.numbers > 0 {
            self.number(one.min);
        }
        self.dates += one.dates;
        self.datetimes += one.datetimes;
        if one.dates + one.datetimes > 0 {
            self.time(one.tmin);
        }
        self.other += one.other;
        for e in &one.other_examples {
            if self.other_examples.len() < 3 && !self.other_examples.contains(e) {
                self.other_examples.push(e.clone());
            }
        }
        for l in one.labels.keys() {
            self.label(l);
        }
    }
}
