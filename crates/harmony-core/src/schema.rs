//! Schemas: the ordered attributes of a record, each numeric (with its public range) or
//! categorical (with its ordered labels). Numeric values are mapped to [-1, 1] on the client.
//!
//! # Missing values
//! Each attribute has a [`Missing`] policy, sent to devices with the schema (`"missing"` beside
//! the attribute's other fields; absent means `error`):
//!
//! * `error`: a missing value is invalid (the device refuses the record; a file's
//!   `invalid` policy decides whether the row is skipped);
//! * `{"impute": v}`: the device reports `v` in its place (a number in [min, max] or a label);
//! * `report`: missingness is reported privately, as data. A categorical attribute gains the
//!   category [`MISSING_LABEL`] (last); a numeric one gains a **presence attribute**
//!   `"<name>:missing"` (categorical, labels `present`, `missing`) right after it, and a missing
//!   value is reported as the range's midpoint (0 on [-1, 1]). The estimators then give the
//!   share missing and, by a ratio, the mean or frequencies of the present values.
//!
//! [`Schema::attributes`] lists the attributes the randomizers see (the added category and
//! presence attributes included); [`Schema::declared`] the ones the schema was built from.

use crate::error::{Error, Result};
use crate::params::Range;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// One attribute of a schema.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Attribute {
    /// A number in `[min, max]` (public bounds).
    Numeric {
        /// Column name.
        name: String,
        /// Lower bound.
        min: f64,
        /// Upper bound.
        max: f64,
    },
    /// One of an ordered list of labels.
    Categorical {
        /// Column name.
        name: String,
        /// The labels, in order; a value's index is its category.
        categories: Vec<String>,
    },
}

impl Attribute {
    /// The attribute's name.
    pub fn name(&self) -> &str {
        match self {
            Attribute::Numeric { name, .. } | Attribute::Categorical { name, .. } => name,
        }
    }
    /// Whether the attribute is numeric.
    pub fn is_numeric(&self) -> bool {
        matches!(self, Attribute::Numeric { .. })
    }
    /// Number of categories (1 for numeric attributes).
    pub fn cardinality(&self) -> usize {
        match self {
            Attribute::Numeric { .. } => 1,
            Attribute::Categorical { categories, .. } => categories.len(),
        }
    }
    /// The numeric range (None for categorical attributes).
    pub fn range(&self) -> Option<Range> {
        match self {
            Attribute::Numeric { min, max, .. } => Some(Range { min: *min, max: *max }),
            Attribute::Categorical { .. } => None,
        }
    }
}

/// The category label a categorical attribute with `missing = "report"` gains (its last).
pub const MISSING_LABEL: &str = "(missing)";
/// The suffix of a numeric attribute's presence attribute (`"age:missing"`).
pub const PRESENCE_SUFFIX: &str = ":missing";
/// The presence attribute's labels: index 1 is "missing".
pub const PRESENCE_LABELS: [&str; 2] = ["present", "missing"];

/// What a device does with a missing value of an attribute (see the module docs).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Missing {
    /// A missing value is invalid.
    #[default]
    Error,
    /// Missingness is reported privately (an added category, or a presence attribute).
    Report,
    /// The device reports this value instead.
    Impute(Imputed),
}

impl Missing {
    /// Whether this is the default (`error`).
    pub fn is_error(&self) -> bool {
        matches!(self, Missing::Error)
    }
    /// The policy's name.
    pub fn name(&self) -> &'static str {
        match self {
            Missing::Error => "error",
            Missing::Report => "report",
            Missing::Impute(_) => "impute",
        }
    }
}

/// The value a device imputes: a number (numeric attribute) or a label (categorical).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Imputed {
    /// A number in the attribute's [min, max].
    Number(f64),
    /// One of the attribute's labels.
    Label(String),
}

impl std::fmt::Display for Imputed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Imputed::Number(x) => write!(f, "{x}"),
            Imputed::Label(l) => write!(f, "\"{l}\""),
        }
    }
}

/// One declared attribute with its missing-value policy: how a schema travels (JSON or TOML,
/// `"missing"` beside the attribute's fields, omitted when `error`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Declared {
    /// The attribute.
    #[serde(flatten)]
    pub attribute: Attribute,
    /// Its missing-value policy.
    #[serde(default, skip_serializing_if = "Missing::is_error")]
    pub missing: Missing,
}

/// A declared attribute reads as its attribute (name, kind, range, labels).
impl std::ops::Deref for Declared {
    type Target = Attribute;
    fn deref(&self) -> &Attribute {
        &self.attribute
    }
}

impl From<Attribute> for Declared {
    fn from(attribute: Attribute) -> Self {
        Declared { attribute, missing: Missing::Error }
    }
}

/// What a randomizer attribute stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The declared attribute of this index (in [`Schema::declared`]).
    Value(usize),
    /// The presence attribute of the numeric attribute at this index (of
    /// [`Schema::attributes`]) with `missing = "report"`: category 1 when its value is missing.
    Presence(usize),
}

/// A record's value for one attribute, already encoded for the randomizer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value {
    /// A numeric value mapped to [-1, 1].
    Unit(f64),
    /// A category index.
    Category(u32),
}

/// One attribute's encoded values for many records: the columnar form of [`Value`] (a data set
/// read column by column never holds a [`Value`] per cell).
#[derive(Debug, Clone, PartialEq)]
pub enum ColumnValues {
    /// Numeric values mapped to [-1, 1].
    Unit(Vec<f64>),
    /// Category indices.
    Category(Vec<u32>),
}

impl ColumnValues {
    /// Number of records.
    pub fn len(&self) -> usize {
        match self {
            ColumnValues::Unit(v) => v.len(),
            ColumnValues::Category(v) => v.len(),
        }
    }
    /// Whether there are no records.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Record `i`'s value.
    pub fn get(&self, i: usize) -> Value {
        match self {
            ColumnValues::Unit(v) => Value::Unit(v[i]),
            ColumnValues::Category(v) => Value::Category(v[i]),
        }
    }
}

/// An ordered list of attributes with a name index.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "Vec<Declared>", into = "Vec<Declared>")]
pub struct Schema {
    attributes: Vec<Attribute>,
    #[serde(skip)]
    declared: Vec<Declared>,
    #[serde(skip)]
    roles: Vec<Role>,
    #[serde(skip)]
    index: HashMap<String, usize>,
    #[serde(skip)]
    labels: Vec<HashMap<String, u32>>,
}

impl Schema {
    /// Validates the attributes: at least one, unique non-empty names, min < max (finite),
    /// at least two distinct categories. Every attribute's missing policy is `error`.
    pub fn new(attributes: Vec<Attribute>) -> Result<Self> {
        Schema::with_missing(attributes.into_iter().map(Declared::from).collect())
    }

    /// Validates declared attributes with their missing policies (see the module docs): as
    /// [`Schema::new`], plus an imputed value of the attribute's kind and in its range or
    /// labels, and no clash with an added label or presence attribute.
    pub fn with_missing(declared: Vec<Declared>) -> Result<Self> {
        if declared.is_empty() {
            return Err(Error::param("attributes", 0, "at least one attribute"));
        }
        let mut attributes = Vec::with_capacity(declared.len());
        let mut roles = Vec::with_capacity(declared.len());
        for (i, d) in declared.iter().enumerate() {
            check_missing(d)?;
            let mut a = d.attribute.clone();
            let report = d.missing == Missing::Report;
            if let (true, Attribute::Categorical { categories, .. }) = (report, &mut a) {
                categories.push(MISSING_LABEL.to_string());
            }
            attributes.push(a);
            roles.push(Role::Value(i));
            if report && d.attribute.is_numeric() {
                roles.push(Role::Presence(attributes.len() - 1));
                attributes.push(Attribute::Categorical {
                    name: format!("{}{PRESENCE_SUFFIX}", d.attribute.name()),
                    categories: PRESENCE_LABELS.iter().map(|l| l.to_string()).collect(),
                });
            }
        }
        let mut index = HashMap::new();
        let mut labels = Vec::with_capacity(attributes.len());
        for (i, a) in attributes.iter().enumerate() {
            if a.name().is_empty() {
                return Err(Error::param("attribute name", format!("attribute {i}: \"\""), "a non-empty name"));
            }
            if index.insert(a.name().to_string(), i).is_some() {
                return Err(Error::param(
                    "attribute name",
                    a.name(),
                    "unique names (a numeric attribute with missing = \"report\" adds \"<name>:missing\")",
                ));
            }
            labels.push(check_attribute(a)?);
        }
        Ok(Schema { attributes, declared, roles, index, labels })
    }

    /// The declared attributes with their missing policies (what the schema was built from).
    pub fn declared(&self) -> &[Declared] {
        &self.declared
    }
    /// What randomizer attribute `j` stands for.
    pub fn role(&self, j: usize) -> Role {
        self.roles[j]
    }
    /// The missing policy of randomizer attribute `j` (`error` for a presence attribute).
    pub fn missing(&self, j: usize) -> &Missing {
        match self.roles[j] {
            Role::Value(i) => &self.declared[i].missing,
            Role::Presence(_) => &Missing::Error,
        }
    }
    /// The presence attribute of numeric attribute `j`, if it reports missingness.
    pub fn presence_of(&self, j: usize) -> Option<usize> {
        self.roles.get(j + 1).and_then(|r| (*r == Role::Presence(j)).then_some(j + 1))
    }
    /// The category index of [`MISSING_LABEL`] in categorical attribute `j` with
    /// `missing = "report"`.
    pub fn missing_category(&self, j: usize) -> Option<u32> {
        match (&self.attributes[j], self.missing(j)) {
            (Attribute::Categorical { categories, .. }, Missing::Report) => Some(categories.len() as u32 - 1),
            _ => None,
        }
    }
    /// Whether any attribute reports missingness.
    pub fn reports_missing(&self) -> bool {
        self.declared.iter().any(|d| d.missing == Missing::Report)
    }

    /// The value randomizer attribute `j` takes when the declared attribute's value is
    /// missing (`report`: the added category, the midpoint 0, or "missing" for a presence
    /// attribute; `impute`: the imputed value encoded). An error naming the attribute under
    /// `error`.
    pub fn encode_missing(&self, j: usize) -> Result<Value> {
        match (self.roles[j], self.missing(j), &self.attributes[j]) {
            (Role::Presence(_), _, _) => Ok(Value::Category(1)),
            (_, Missing::Report, Attribute::Numeric { .. }) => Ok(Value::Unit(0.0)),
            (_, Missing::Report, Attribute::Categorical { categories, .. }) => {
                Ok(Value::Category(categories.len() as u32 - 1))
            }
            (_, Missing::Impute(Imputed::Number(x)), _) => self.encode(j, &x.to_string()),
            (_, Missing::Impute(Imputed::Label(l)), _) => self.encode(j, l),
            (_, Missing::Error, a) => Err(Error::input(
                a.name(),
                "missing",
                "a value (the attribute's missing policy is \"error\"; \"report\" or {\"impute\": v} accept missing values)",
            )),
        }
    }

    /// Encodes one declared-attribute cell into randomizer attribute `j`: `None` is missing
    /// ([`Schema::encode_missing`]); a presence attribute is "present" (0) for a value.
    pub fn encode_cell(&self, j: usize, raw: Option<&str>) -> Result<Value> {
        match (raw, self.roles[j]) {
            (None, _) => self.encode_missing(j),
            (Some(_), Role::Presence(_)) => Ok(Value::Category(0)),
            (Some(raw), Role::Value(_)) => self.encode(j, raw),
        }
    }

    /// The attributes in order.
    pub fn attributes(&self) -> &[Attribute] {
        &self.attributes
    }
    /// Checks a record encoded by [`Schema::encode`]: one value per attribute, each of its
    /// attribute's kind and range (numeric on [-1, 1], a category index below the label count).
    /// The error names the first bad attribute, its value and what was expected.
    pub fn check_record(&self, record: &[Value]) -> Result<()> {
        if record.len() != self.len() {
            return Err(Error::input("record", format!("{} values", record.len()), format!("{} values", self.len())));
        }
        for (a, v) in self.attributes.iter().zip(record) {
            match (a, *v) {
                (Attribute::Numeric { .. }, Value::Unit(t)) if (-1.0..=1.0).contains(&t) => {}
                (Attribute::Categorical { categories, .. }, Value::Category(c)) if (c as usize) < categories.len() => {}
                (Attribute::Numeric { .. }, v) => {
                    return Err(Error::input(a.name(), v, "a numeric value mapped to [-1, 1]"));
                }
                (Attribute::Categorical { categories, .. }, v) => {
                    return Err(Error::input(a.name(), v, format!("a category index in [0, {})", categories.len())));
                }
            }
        }
        Ok(())
    }
    /// Checks records held by attribute (one column per attribute, in order): the count, each
    /// column's kind and length, every value as [`Schema::check_record`] does. The error names
    /// the column, or the first bad row and its attribute (`row 7: age`).
    pub fn check_columns(&self, columns: &[ColumnValues]) -> Result<()> {
        if columns.len() != self.len() {
            return Err(Error::input(
                "columns",
                format!("{} columns", columns.len()),
                format!("one per attribute of the schema ({})", self.len()),
            ));
        }
        let n = columns.first().map_or(0, ColumnValues::len);
        for (a, col) in self.attributes.iter().zip(columns) {
            let name = a.name();
            if col.len() != n {
                return Err(Error::input(
                    format!("column {name}"),
                    format!("{} values", col.len()),
                    format!("{n} values"),
                ));
            }
            match (a, col) {
                (Attribute::Numeric { .. }, ColumnValues::Unit(v)) => {
                    if let Some(i) = v.iter().position(|t| !(-1.0..=1.0).contains(t)) {
                        return Err(Error::input(format!("row {i}: {name}"), v[i], "a value in [-1, 1]"));
                    }
                }
                (Attribute::Categorical { categories, .. }, ColumnValues::Category(v)) => {
                    let card = categories.len() as u32;
                    if let Some(i) = v.iter().position(|&c| c >= card) {
                        return Err(Error::input(format!("row {i}: {name}"), v[i], format!("a category below {card}")));
                    }
                }
                (a, col) => {
                    let (got, want) =
                        if a.is_numeric() { ("categorical", "numeric") } else { ("numeric", "categorical") };
                    return Err(Error::input(format!("column {name}"), format!("{got} ({} values)", col.len()), want));
                }
            }
        }
        Ok(())
    }
    /// Number of attributes.
    pub fn len(&self) -> usize {
        self.attributes.len()
    }
    /// Whether there are no attributes (never for a valid schema).
    pub fn is_empty(&self) -> bool {
        self.attributes.is_empty()
    }
    /// Index of the attribute called `name`.
    pub fn position(&self, name: &str) -> Option<usize> {
        self.index.get(name).copied()
    }
    /// Number of numeric attributes.
    pub fn numeric_count(&self) -> usize {
        self.attributes.iter().filter(|a| a.is_numeric()).count()
    }
    /// Encodes a raw text value of attribute `j`: a number (checked against [min, max]) or a
    /// label (checked against the categories). The error names the attribute, the value and
    /// what was expected.
    pub fn encode(&self, j: usize, raw: &str) -> Result<Value> {
        match &self.attributes[j] {
            Attribute::Numeric { name, min, max } => {
                let x: f64 = raw
                    .trim()
                    .parse()
                    .map_err(|_| Error::input(name.as_str(), raw, format!("a number in [{min}, {max}]")))?;
                Range { min: *min, max: *max }.to_unit(name, x).map(Value::Unit)
            }
            Attribute::Categorical { name, categories } => match self.labels[j].get(raw) {
                Some(&c) => Ok(Value::Category(c)),
                None => Err(Error::input(name.as_str(), raw, format!("one of {}", preview(categories)))),
            },
        }
    }
}

fn preview(labels: &[String]) -> String {
    let shown: Vec<String> = labels.iter().take(8).map(|l| format!("\"{l}\"")).collect();
    if labels.len() > 8 { format!("{}, … ({} labels)", shown.join(", "), labels.len()) } else { shown.join(", ") }
}

/// Checks one attribute (range or labels); its label index.
fn check_attribute(a: &Attribute) -> Result<HashMap<String, u32>> {
    let mut map = HashMap::new();
    match a {
        Attribute::Numeric { name, min, max } => {
            Range::new(*min, *max)
                .map_err(|_| Error::param("attribute range", format!("{name}: [{min}, {max}]"), "finite min < max"))?;
        }
        Attribute::Categorical { name, categories } => {
            if categories.len() < 2 {
                return Err(Error::param(
                    "categories",
                    format!("{name}: {} categories", categories.len()),
                    "at least 2 categories",
                ));
            }
            for (j, c) in categories.iter().enumerate() {
                if map.insert(c.clone(), j as u32).is_some() {
                    let why = if c == MISSING_LABEL { " (missing = \"report\" adds it)" } else { "" };
                    return Err(Error::param("categories", format!("{name}: \"{c}\" twice{why}"), "distinct labels"));
                }
            }
        }
    }
    Ok(map)
}

/// Checks an imputed value against its attribute.
fn check_missing(d: &Declared) -> Result<()> {
    let Missing::Impute(v) = &d.missing else { return Ok(()) };
    let ok = match (&d.attribute, v) {
        (Attribute::Numeric { min, max, .. }, Imputed::Number(x)) => (*min..=*max).contains(x),
        (Attribute::Categorical { categories, .. }, Imputed::Label(l)) => categories.contains(l),
        _ => false,
    };
    if ok {
        return Ok(());
    }
    let expected = match &d.attribute {
        Attribute::Numeric { min, max, .. } => format!("a number in [{min}, {max}]"),
        Attribute::Categorical { categories, .. } => format!("one of {}", preview(categories)),
    };
    Err(Error::param("missing.impute", format!("{}: {v}", d.attribute.name()), expected))
}

impl TryFrom<Vec<Declared>> for Schema {
    type Error = Error;
    fn try_from(v: Vec<Declared>) -> Result<Self> {
        Schema::with_missing(v)
    }
}

impl From<Schema> for Vec<Declared> {
    fn from(s: Schema) -> Self {
        s.declared
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> Schema {
        Schema::new(vec![
            Attribute::Numeric { name: "age".into(), min: 17.0, max: 90.0 },
            Attribute::Categorical { name: "sex".into(), categories: vec!["Female".into(), "Male".into()] },
        ])
        .unwrap()
    }

    #[test]
    fn encodes_and_names_bad_values() {
        let s = schema();
        assert_eq!(s.encode(0, "17").unwrap(), Value::Unit(-1.0));
        assert_eq!(s.encode(1, "Male").unwrap(), Value::Category(1));
        let e = s.encode(0, "91").unwrap_err().to_string();
        assert!(e.contains("age is 91") && e.contains("[17, 90]"), "{e}");
        let e = s.encode(0, "old").unwrap_err().to_string();
        assert!(e.contains("age is \"old\"") && e.contains("a number"), "{e}");
        let e = s.encode(1, "X").unwrap_err().to_string();
        assert!(e.contains("sex is \"X\"") && e.contains("\"Female\", \"Male\""), "{e}");
    }

    #[test]
    fn missing_policies_lay_out_the_randomizer_attributes_and_travel_with_the_schema() {
        let json = r#"[{"kind":"numeric","name":"age","min":0,"max":100,"missing":"report"},
            {"kind":"categorical","name":"sex","categories":["f","m"],"missing":"report"},
            {"kind":"numeric","name":"h","min":0,"max":99,"missing":{"impute":40}},
            {"kind":"categorical","name":"w","categories":["a","b"]}]"#;
        let s: Schema = serde_json::from_str(json).unwrap();
        let names: Vec<&str> = s.attributes().iter().map(|a| a.name()).collect();
        assert_eq!(names, ["age", "age:missing", "sex", "h", "w"]);
        assert_eq!(s.attributes()[2].cardinality(), 3);
        assert_eq!((s.role(1), s.presence_of(0), s.presence_of(3)), (Role::Presence(0), Some(1), None));
        assert_eq!(s.missing_category(2), Some(2));
        assert_eq!(s.encode_cell(0, None).unwrap(), Value::Unit(0.0));
        assert_eq!(s.encode_cell(1, None).unwrap(), Value::Category(1));
        assert_eq!(s.encode_cell(1, Some("7")).unwrap(), Value::Category(0));
        assert_eq!(s.encode_cell(2, None).unwrap(), Value::Category(2));
        assert_eq!(s.encode_cell(3, None).unwrap(), s.encode(3, "40").unwrap());
        let e = s.encode_cell(4, None).unwrap_err().to_string();
        assert!(e.contains("w is \"missing\"") && e.contains("\"error\""), "{e}");
        // Round trip: the declared attributes, "missing" omitted where it is "error".
        let back = serde_json::to_string(&s).unwrap();
        assert!(!back.contains("age:missing") && !back.contains("(missing)") && back.matches("missing").count() == 3);
        assert_eq!(serde_json::from_str::<Schema>(&back).unwrap(), s);
        // A schema without policies serializes as before.
        assert_eq!(
            serde_json::to_value(schema()).unwrap()[0],
            serde_json::json!({"kind":"numeric","name":"age","min":17.0,"max":90.0})
        );
        // Bad imputed values and clashes name the attribute.
        let bad = r#"[{"kind":"numeric","name":"a","min":0,"max":1,"missing":{"impute":2}}]"#;
        let e = serde_json::from_str::<Schema>(bad).unwrap_err().to_string();
        assert!(e.contains("a: 2") && e.contains("[0, 1]"), "{e}");
        let clash = r#"[{"kind":"numeric","name":"a","min":0,"max":1,"missing":"report"},
            {"kind":"numeric","name":"a:missing","min":0,"max":1}]"#;
        assert!(serde_json::from_str::<Schema>(clash).unwrap_err().to_string().contains("unique"));
    }

    #[test]
    fn rejects_bad_schemas() {
        assert!(Schema::new(vec![]).is_err());
        let dup = vec![
            Attribute::Numeric { name: "a".into(), min: 0.0, max: 1.0 },
            Attribute::Numeric { name: "a".into(), min: 0.0, max: 1.0 },
        ];
        assert!(Schema::new(dup).unwrap_err().to_string().contains("unique"));
        let bad = vec![Attribute::Numeric { name: "a".into(), min: 1.0, max: 1.0 }];
        assert!(Schema::new(bad).unwrap_err().to_string().contains("a: [1, 1]"));
        let one = vec![Attribute::Categorical { name: "c".into(), categories: vec!["x".into()] }];
        assert!(Schema::new(one).unwrap_err().to_string().contains("at least 2"));
    }
}
