//! The schema file (TOML): the attributes plus how to read them (bad-value policy, missing
//! tokens, units of date columns) and collection defaults.
//!
//! ```toml
//! invalid = "skip"                       # error (default) | skip | clamp
//! missing_tokens = ["", "NA", "?"]       # default: see DEFAULT_MISSING_TOKENS
//! [bins]
//! age = 16
//! [units]
//! signup = "days"                        # days since 1970-01-01 (or "seconds")
//! [[attributes]]
//! name = "age"
//! kind = "numeric"
//! min = 0
//! max = 100
//! ```
//!
//! Per-attribute settings are tables keyed by attribute name (`[bins]`, `[units]`), so a
//! per-attribute missing-value policy can join them as `[missing]` without changing the
//! attribute list the server and the devices already exchange.

use crate::error::{Error, Result};
use crate::temporal::Unit;
use harmony_core::schema::{Declared, Schema};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// What to do with a cell the schema does not accept (a missing cell included, until
/// attributes get a missing-value policy).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InvalidPolicy {
    /// Stop with an error naming row, column, value and what was expected.
    #[default]
    Error,
    /// Skip the row (the count is printed).
    Skip,
    /// Clamp numbers into [min, max]; other bad values skip the row (counts printed).
    Clamp,
}

/// Cell texts read as "missing" unless a schema or `--missing-tokens` says otherwise. Matched
/// after trimming, ignoring ASCII case; an empty cell is always missing.
pub const DEFAULT_MISSING_TOKENS: [&str; 7] = ["", "NA", "N/A", "NaN", "null", "None", "?"];

/// The texts that mean "no value" in a text column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingTokens {
    tokens: Vec<String>,
    longest: usize,
}

impl MissingTokens {
    /// The given tokens (matched ignoring ASCII case) plus the empty cell.
    pub fn new<S: AsRef<str>>(tokens: &[S]) -> Self {
        let tokens: Vec<String> =
            tokens.iter().map(|t| t.as_ref().trim().to_string()).filter(|t| !t.is_empty()).collect();
        let longest = tokens.iter().map(String::len).max().unwrap_or(0);
        MissingTokens { tokens, longest }
    }
    /// Whether a (trimmed) cell text is missing.
    pub fn is_missing(&self, s: &str) -> bool {
        s.is_empty() || (s.len() <= self.longest && self.tokens.iter().any(|t| t.eq_ignore_ascii_case(s)))
    }
    /// The tokens, without the empty cell.
    pub fn tokens(&self) -> &[String] {
        &self.tokens
    }
}

impl Default for MissingTokens {
    fn default() -> Self {
        MissingTokens::new(&DEFAULT_MISSING_TOKENS)
    }
}

/// A schema file: attributes plus how to read them and collection defaults.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SchemaFile {
    /// Default privacy budgets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epsilon: Option<Vec<f64>>,
    /// Default strategies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategies: Option<Vec<String>>,
    /// Default numeric mechanism (per strategy defaults otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numeric_mechanism: Option<String>,
    /// Default categorical mechanism.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub categorical_mechanism: Option<String>,
    /// Bad-value policy.
    #[serde(default)]
    pub invalid: InvalidPolicy,
    /// Cell texts that mean "missing" (default [`DEFAULT_MISSING_TOKENS`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missing_tokens: Option<Vec<String>>,
    /// Bins of numeric attributes, by name, for analyses over ordered or joint domains (ranges,
    /// quantiles, marginals): `[bins]` then `age = 16`; equal-width bins over [min, max].
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub bins: BTreeMap<String, usize>,
    /// Units of numeric attributes read from dates or timestamps, by name: `[units]` then
    /// `signup = "days"` (days since 1970-01-01) or `"seconds"` (since 1970-01-01T00:00:00Z).
    /// Their bounds are in that unit; ISO 8601 text and Arrow dates/timestamps are converted.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub units: BTreeMap<String, Unit>,
    /// The attributes, in order, each with its missing-value policy (`missing = "report"`,
    /// `missing = { impute = 40 }`, default `"error"`).
    pub attributes: Vec<Declared>,
}

impl SchemaFile {
    /// Reads and validates a TOML schema file.
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| Error::Io { path: format!("reading schema {}", path.display()), source })?;
        Self::from_toml(&text).map_err(|e| Error::Schema(format!("schema {}: {e}", path.display())))
    }
    /// Parses and validates a TOML schema: a key no level knows (a typo'd `mising` inside an
    /// attribute included) is an error naming it.
    pub fn from_toml(text: &str) -> Result<Self> {
        let file: SchemaFile = toml::from_str(text).map_err(|e| Error::Schema(format!("parsing: {e}")))?;
        check_attribute_keys(text)?;
        file.validate()?;
        Ok(file)
    }
    /// The validated core schema.
    pub fn schema(&self) -> Result<Schema> {
        Schema::with_missing(self.attributes.clone()).map_err(|e| Error::Schema(e.to_string()))
    }
    /// Checks the attributes, that `[units]` names numeric attributes and `[bins]` attributes.
    pub fn validate(&self) -> Result<()> {
        let schema = self.schema()?;
        if let Some(name) = self.bins.keys().find(|n| schema.position(n).is_none()) {
            let names: Vec<&str> = self.attributes.iter().map(|a| a.name()).collect();
            return Err(Error::Schema(format!(
                "[bins] names \"{name}\", expected one of the attributes: {}",
                names.join(", ")
            )));
        }
        for name in self.units.keys() {
            match schema.position(name).map(|j| &schema.attributes()[j]) {
                Some(a) if a.is_numeric() => {}
                Some(_) => {
                    return Err(Error::Schema(format!(
                        "[units] names \"{name}\", a categorical attribute; expected a numeric one"
                    )));
                }
                None => return Err(Error::Schema(format!("[units] names \"{name}\", expected one of the attributes"))),
            }
        }
        Ok(())
    }
    /// The missing tokens in force.
    pub fn missing(&self) -> MissingTokens {
        self.missing_tokens.as_deref().map(MissingTokens::new).unwrap_or_default()
    }
    /// How to encode data against this file.
    pub fn encode_options(&self) -> crate::encode::EncodeOptions {
        crate::encode::EncodeOptions {
            invalid: self.invalid,
            missing: self.missing(),
            units: self.units.clone(),
            only: None,
        }
    }
}

/// The keys an attribute entry takes, by kind (serde cannot refuse unknown keys beside a
/// flattened, internally tagged attribute, so they are checked on the TOML itself).
const NUMERIC_KEYS: [&str; 5] = ["name", "kind", "min", "max", "missing"];
const CATEGORICAL_KEYS: [&str; 4] = ["name", "kind", "categories", "missing"];

/// Refuses a key an `[[attributes]]` entry does not take, naming the key and the attribute.
fn check_attribute_keys(text: &str) -> Result<()> {
    let table: toml::Table = toml::from_str(text).map_err(|e| Error::Schema(format!("parsing: {e}")))?;
    let Some(toml::Value::Array(attributes)) = table.get("attributes") else { return Ok(()) };
    for (i, entry) in attributes.iter().enumerate() {
        let Some(entry) = entry.as_table() else { continue };
        let name = entry.get("name").and_then(toml::Value::as_str);
        let allowed: &[&str] = match entry.get("kind").and_then(toml::Value::as_str) {
            Some("numeric") => &NUMERIC_KEYS,
            Some("categorical") => &CATEGORICAL_KEYS,
            _ => continue,
        };
        if let Some(key) = entry.keys().find(|k| !allowed.contains(&k.as_str())) {
            let which = name.map_or(format!("number {}", i + 1), |n| format!("\"{n}\""));
            return Err(Error::Schema(format!(
                "attribute {which} has an unknown key \"{key}\", expected one of: {}",
                allowed.join(", ")
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_tokens_ignore_case_and_always_include_empty() {
        let m = MissingTokens::default();
        for s in ["", "NA", "na", "N/A", "nan", "NULL", "None", "?"] {
            assert!(m.is_missing(s), "{s}");
        }
        for s in ["0", "Nan1", "NAN ", "none of them", "-"] {
            assert!(!m.is_missing(s), "{s}");
        }
        let only = MissingTokens::new(&["-"]);
        assert!(only.is_missing("-") && only.is_missing("") && !only.is_missing("NA"));
    }

    #[test]
    fn unknown_keys_are_refused_inside_attributes() {
        let text = "[[attributes]]\nname = \"age\"\nkind = \"numeric\"\nmin = 0\nmax = 1\nmissing = \"report\"\n";
        SchemaFile::from_toml(text).unwrap();
        let e = SchemaFile::from_toml(&text.replace("missing =", "mising =")).unwrap_err().to_string();
        assert!(
            e.contains("attribute \"age\"") && e.contains("unknown key \"mising\"") && e.contains("missing"),
            "{e}"
        );
        let cat = "[[attributes]]\nname = \"sex\"\nkind = \"categorical\"\ncategories = [\"F\", \"M\"]\nmin = 0\n";
        let e = SchemaFile::from_toml(cat).unwrap_err().to_string();
        assert!(e.contains("attribute \"sex\"") && e.contains("unknown key \"min\""), "{e}");
        let e = SchemaFile::from_toml(&format!("[bins]\nagee = 4\n{text}")).unwrap_err().to_string();
        assert!(e.contains("[bins] names \"agee\""), "{e}");
        let e = SchemaFile::from_toml(&format!("invalidd = \"skip\"\n{text}")).unwrap_err().to_string();
        assert!(e.contains("invalidd"), "{e}");
    }

    #[test]
    fn units_must_name_numeric_attributes() {
        let text = "[units]\nd = \"days\"\n[[attributes]]\nname = \"d\"\nkind = \"numeric\"\nmin = 0\nmax = 1\n";
        let f: SchemaFile = toml::from_str(text).unwrap();
        assert_eq!(f.units["d"], Unit::Days);
        f.validate().unwrap();
        let bad: SchemaFile = toml::from_str(&text.replace("d = \"days\"", "e = \"days\"")).unwrap();
        assert!(bad.validate().unwrap_err().to_string().contains("[units] names \"e\""));
        let e = toml::from_str::<SchemaFile>(&text.replace("\"days\"", "\"weeks\"")).unwrap_err().to_string();
        assert!(e.contains("weeks"), "{e}");
        let round = toml::to_string(&f).unwrap();
        assert!(round.contains("[units]") && round.contains("d = \"days\""), "{round}");
    }
}
