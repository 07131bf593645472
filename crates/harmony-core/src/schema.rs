//! Schemas: the ordered attributes of a record, each numeric (with its public range) or
//! categorical (with its ordered labels). Numeric values are mapped to [-1, 1] on the client.

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

/// A record's value for one attribute, already encoded for the randomizer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value {
    /// A numeric value mapped to [-1, 1].
    Unit(f64),
    /// A category index.
    Category(u32),
}

/// An ordered list of attributes with a name index.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "Vec<Attribute>", into = "Vec<Attribute>")]
pub struct Schema {
    attributes: Vec<Attribute>,
    #[serde(skip)]
    index: HashMap<String, usize>,
    #[serde(skip)]
    labels: Vec<HashMap<String, u32>>,
}

impl Schema {
    /// Validates the attributes: at least one, unique non-empty names, min < max (finite),
    /// at least two distinct categories.
    pub fn new(attributes: Vec<Attribute>) -> Result<Self> {
        if attributes.is_empty() {
            return Err(Error::param("attributes", 0, "at least one attribute"));
        }
        let mut index = HashMap::new();
        let mut labels = Vec::with_capacity(attributes.len());
        for (i, a) in attributes.iter().enumerate() {
            if a.name().is_empty() {
                return Err(Error::param("attribute name", format!("attribute {i}: \"\""), "a non-empty name"));
            }
            if index.insert(a.name().to_string(), i).is_some() {
                return Err(Error::param("attribute name", a.name(), "unique names"));
            }
            let mut map = HashMap::new();
            match a {
                Attribute::Numeric { name, min, max } => {
                    Range::new(*min, *max).map_err(|_| {
                        Error::param("attribute range", format!("{name}: [{min}, {max}]"), "finite min < max")
                    })?;
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
                            return Err(Error::param(
                                "categories",
                                format!("{name}: \"{c}\" twice"),
                                "distinct labels",
                            ));
                        }
                    }
                }
            }
            labels.push(map);
        }
        Ok(Schema { attributes, index, labels })
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

impl TryFrom<Vec<Attribute>> for Schema {
    type Error = Error;
    fn try_from(v: Vec<Attribute>) -> Result<Self> {
        Schema::new(v)
    }
}

impl From<Schema> for Vec<Attribute> {
    fn from(s: Schema) -> Self {
        s.attributes
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
