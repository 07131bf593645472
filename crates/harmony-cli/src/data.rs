//! Reading CSV data against a schema, schema files (TOML) and schema inference.

use anyhow::{Context, Result, anyhow, bail};
use harmony_core::schema::{Attribute, Schema, Value};
use serde::{Deserialize, Serialize};
use std::io::Read;
use std::path::{Path, PathBuf};

/// What to do with a CSV value the schema does not accept.
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

/// A schema file: attributes plus collection defaults.
#[derive(Debug, Clone, Serialize, Deserialize)]
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
    /// Bins of numeric attributes, by name, for analyses over ordered or joint domains (ranges,
    /// quantiles, marginals): `[bins]` then `age = 16`; equal-width bins over [min, max].
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub bins: std::collections::BTreeMap<String, usize>,
    /// The attributes, in order.
    pub attributes: Vec<Attribute>,
}

impl SchemaFile {
    /// Reads and validates a TOML schema file.
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading schema {}", path.display()))?;
        let file: SchemaFile = toml::from_str(&text).with_context(|| format!("parsing schema {}", path.display()))?;
        file.schema().with_context(|| format!("schema {}", path.display()))?;
        Ok(file)
    }
    /// The validated core schema.
    pub fn schema(&self) -> Result<Schema> {
        Ok(Schema::new(self.attributes.clone())?)
    }
}

/// The directory holding the bundled `data/` and `examples/`: the current directory if it has
/// them, else the repository this binary was built from.
pub fn bundled(rel: &str) -> PathBuf {
    let here = PathBuf::from(rel);
    if here.exists() {
        return here;
    }
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).join(rel)
}

/// A CSV table held as text.
pub struct Table {
    /// Column names.
    pub header: Vec<String>,
    /// Rows (each as long as the header; checked).
    pub rows: Vec<Vec<String>>,
}

/// Opens a data file for reading: `-` = standard input, a name ending in `.xz` is decompressed,
/// anything else is read through a 1 MiB buffer.
pub fn open_data(path: &Path) -> Result<Box<dyn Read>> {
    Ok(if path == Path::new("-") {
        Box::new(std::io::stdin())
    } else if path.extension().is_some_and(|e| e == "xz") {
        let file = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
        let mut raw = Vec::new();
        lzma_rs::xz_decompress(&mut std::io::BufReader::new(file), &mut raw)
            .map_err(|e| anyhow!("{}: not a valid xz file ({e})", path.display()))?;
        Box::new(std::io::Cursor::new(raw))
    } else {
        Box::new(std::io::BufReader::with_capacity(
            1 << 20,
            std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?,
        ))
    })
}

/// Reads a CSV file (`-` = standard input; a name ending in `.xz` is decompressed). A ragged row
/// is an error naming it.
pub fn read_csv(path: &Path) -> Result<Table> {
    let reader = open_data(path)?;
    let mut rdr = csv::ReaderBuilder::new().has_headers(true).flexible(true).from_reader(reader);
    let header: Vec<String> =
        rdr.headers().context("reading the CSV header")?.iter().map(|s| s.trim().to_string()).collect();
    let mut rows = Vec::new();
    for (i, rec) in rdr.records().enumerate() {
        let rec = rec.with_context(|| format!("{}: reading row {}", path.display(), i + 2))?;
        if rec.len() != header.len() {
            bail!(
                "{}: row {} has {} fields, expected {} (the header's column count)",
                path.display(),
                i + 2,
                rec.len(),
                header.len()
            );
        }
        rows.push(rec.iter().map(|s| s.trim().to_string()).collect());
    }
    if rows.is_empty() {
        bail!("{}: no data rows", path.display());
    }
    Ok(Table { header, rows })
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

/// Encodes a table against a schema. Missing categorical values (empty fields) are the label
/// `?` when the schema lists it. Errors name the row (1-based, header = row 1), the column,
/// the value and what was expected.
pub fn encode(table: &Table, schema: &Schema, policy: InvalidPolicy) -> Result<Encoded> {
    let cols: Vec<usize> = schema
        .attributes()
        .iter()
        .map(|a| {
            table.header.iter().position(|h| h == a.name()).ok_or_else(|| {
                anyhow!("the data has no column \"{}\" (columns: {})", a.name(), table.header.join(", "))
            })
        })
        .collect::<Result<_>>()?;
    let d = schema.len();
    let mut values = Vec::with_capacity(table.rows.len() * d);
    let (mut skipped, mut clamped) = (0, 0);
    'rows: for (i, row) in table.rows.iter().enumerate() {
        let start = values.len();
        for (j, &c) in cols.iter().enumerate() {
            let attr = &schema.attributes()[j];
            let raw = row[c].as_str();
            let raw = if raw.is_empty() && !attr.is_numeric() { "?" } else { raw };
            match schema.encode(j, raw) {
                Ok(v) => values.push(v),
                Err(e) => {
                    if policy == InvalidPolicy::Clamp
                        && let (Some(r), Ok(x)) = (attr.range(), raw.parse::<f64>())
                        && x.is_finite()
                    {
                        values.push(Value::Unit(r.to_unit_clamped(x)));
                        clamped += 1;
                        continue;
                    }
                    if policy == InvalidPolicy::Error {
                        bail!("row {}, column \"{}\": {e}", i + 2, attr.name());
                    }
                    values.truncate(start);
                    skipped += 1;
                    continue 'rows;
                }
            }
        }
    }
    let n = values.len() / d;
    if n == 0 {
        bail!("no usable rows: all {} rows were skipped by the schema's invalid-value policy", table.rows.len());
    }
    Ok(Encoded { values, n, skipped, clamped })
}

/// Infers a schema from a table: a column is numeric when every non-empty value parses as a
/// finite number (bounds = the data's min and max), otherwise categorical (sorted labels, `?`
/// for empty fields). Columns with more than `max_categories` labels are left out (warned).
pub fn infer(table: &Table, max_categories: usize, skip: &[String]) -> (SchemaFile, Vec<String>) {
    let mut attributes = Vec::new();
    let mut warnings = Vec::new();
    for (c, name) in table.header.iter().enumerate() {
        if skip.contains(name) {
            continue;
        }
        let col = table.rows.iter().map(|r| r[c].as_str());
        let nums: Option<Vec<f64>> =
            col.clone().filter(|v| !v.is_empty()).map(|v| v.parse::<f64>().ok().filter(|x| x.is_finite())).collect();
        let has_blank = col.clone().any(|v| v.is_empty());
        match nums {
            Some(xs) if !xs.is_empty() && !has_blank => {
                let min = xs.iter().cloned().fold(f64::INFINITY, f64::min);
                let max = xs.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                if min < max {
                    attributes.push(Attribute::Numeric { name: name.clone(), min, max });
                } else {
                    warnings.push(format!("column \"{name}\" is constant ({min}); left out"));
                }
            }
            _ => {
                let mut labels: Vec<String> =
                    col.map(|v| if v.is_empty() { "?".to_string() } else { v.to_string() }).collect();
                labels.sort();
                labels.dedup();
                if labels.len() > max_categories {
                    warnings.push(format!(
                        "column \"{name}\" has {} labels (> --max-categories {max_categories}); left out",
                        labels.len()
                    ));
                } else if labels.len() < 2 {
                    warnings.push(format!("column \"{name}\" has a single label; left out"));
                } else {
                    attributes.push(Attribute::Categorical { name: name.clone(), categories: labels });
                }
            }
        }
    }
    warnings.push(
        "numeric bounds and category lists were learned from the raw data: they are not private. \
         In a real collection, take them from public knowledge."
            .to_string(),
    );
    let file = SchemaFile {
        bins: Default::default(),
        epsilon: None,
        strategies: None,
        numeric_mechanism: None,
        categorical_mechanism: None,
        invalid: InvalidPolicy::Error,
        attributes,
    };
    (file, warnings)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(rows: &[&[&str]]) -> Table {
        Table {
            header: vec!["age".into(), "sex".into()],
            rows: rows.iter().map(|r| r.iter().map(|s| s.to_string()).collect()).collect(),
        }
    }

    #[test]
    fn errors_name_row_column_value_and_expectation() {
        let t = table(&[&["20", "F"], &["30", "M"], &["200", "M"]]);
        let (file, _) = infer(&table(&[&["20", "F"], &["30", "M"]]), 10, &[]);
        let schema = file.schema().unwrap();
        let e = encode(&t, &schema, InvalidPolicy::Error).err().unwrap().to_string();
        assert!(e.contains("row 4") && e.contains("\"age\"") && e.contains("200") && e.contains("[20, 30]"), "{e}");
        let ok = encode(&t, &schema, InvalidPolicy::Skip).unwrap();
        assert_eq!((ok.n, ok.skipped), (2, 1));
        let cl = encode(&t, &schema, InvalidPolicy::Clamp).unwrap();
        assert_eq!((cl.n, cl.clamped), (3, 1));
        let bad = table(&[&["x", "F"]]);
        let e = encode(&bad, &schema, InvalidPolicy::Error).err().unwrap().to_string();
        assert!(e.contains("row 2") && e.contains("\"x\""), "{e}");
        let unk = table(&[&["25", "F"], &["25", "Q"]]);
        let e = encode(&unk, &schema, InvalidPolicy::Clamp).map(|e| (e.n, e.skipped)).unwrap();
        assert_eq!(e, (1, 1));
        let none = encode(&table(&[&["25", "Q"]]), &schema, InvalidPolicy::Clamp).err().unwrap().to_string();
        assert!(none.contains("no usable rows"), "{none}");
    }

    #[test]
    fn infer_kinds_and_missing() {
        let t = table(&[&["20", "F"], &["30", ""], &["25", "M"]]);
        let (file, warnings) = infer(&t, 10, &[]);
        assert!(file.attributes[0].is_numeric());
        assert_eq!(file.attributes[1].cardinality(), 3); // "?", "F", "M"
        assert!(warnings.last().unwrap().contains("not private"));
        let (few, w) = infer(&t, 2, &[]);
        assert_eq!(few.attributes.len(), 1);
        assert!(w[0].contains("max-categories"));
    }
}
