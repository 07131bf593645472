//! `schema_csv`: the CLI's data path (`harmony simulate --data`, `harmony infer`) on untrusted
//! bytes. Input: `[flags, toml…, NUL, data…]`. The TOML is parsed as a `SchemaFile` and
//! validated; the data (CSV, TSV or .csv.xz, chosen by `flags`; the Parquet and Arrow readers
//! are the arrow crates' own and left out) is read, its schema inferred, and it is encoded
//! against the given schema under every invalid-value policy and against the inferred one.
//! Invariants: no panic; an inferred schema loads; every encoded value is in its domain (a
//! numeric one finite on [-1, 1], a category below its attribute's count).

use harmony_core::schema::{Attribute, Schema, Value};
use harmony_data::{DataReader, InferOptions, InvalidPolicy, SchemaFile, encode_rows, infer_batches};

/// Every encoded value is in its attribute's domain.
fn check_encoded(schema: &Schema, values: &[Value]) {
    let attrs = schema.attributes();
    for (i, v) in values.iter().enumerate() {
        match (&attrs[i % attrs.len()], v) {
            (Attribute::Categorical { categories, .. }, Value::Category(c)) => {
                assert!((*c as usize) < categories.len(), "category {c} of {}", categories.len())
            }
            (Attribute::Numeric { name, .. }, Value::Unit(u)) => {
                assert!(u.is_finite() && (-1.0..=1.0).contains(u), "{name}: encoded {u}")
            }
            (a, v) => panic!("{v:?} for attribute {a:?}"),
        }
    }
}

fn reader(name: &str, data: &[u8]) -> Option<DataReader> {
    DataReader::from_bytes(name, data.to_vec()).ok()
}

fn encode_all(name: &str, data: &[u8], file: &SchemaFile) {
    let Ok(schema) = file.schema() else { return };
    for invalid in [InvalidPolicy::Error, InvalidPolicy::Skip, InvalidPolicy::Clamp] {
        let Some(mut r) = reader(name, data) else { return };
        let options = harmony_data::EncodeOptions { invalid, ..file.encode_options() };
        if let Ok(enc) = encode_rows(&mut r, &schema, &options) {
            assert_eq!(enc.values.len(), enc.n * schema.len());
            check_encoded(&schema, &enc.values);
        }
    }
}

/// The fuzz target's body.
pub fn run(data: &[u8]) {
    let [flags, rest @ ..] = data else { return };
    let (toml_bytes, csv) = match rest.iter().position(|&b| b == 0) {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (&[][..], rest),
    };
    if csv.starts_with(b"PAR1") || csv.starts_with(b"ARROW1") {
        return;
    }
    let name = ["data.csv", "data.tsv", "data.csv.xz", "data.txt"][*flags as usize % 4];
    if let Some(file) = std::str::from_utf8(toml_bytes).ok().and_then(|t| toml::from_str::<SchemaFile>(t).ok())
        && file.validate().is_ok()
    {
        encode_all(name, csv, &file);
    }
    let Some(mut r) = reader(name, csv) else { return };
    let options = InferOptions { max_categories: 1 + (*flags as usize >> 2) % 16, ..InferOptions::default() };
    if let Ok(inf) = infer_batches(&mut r, &options) {
        if let Err(e) = inf.file.validate() {
            panic!("an inferred schema does not load: {e}");
        }
        if let Ok(text) = toml::to_string(&inf.file) {
            let back: SchemaFile =
                toml::from_str(&text).unwrap_or_else(|e| panic!("inferred TOML reparses: {e}\n{text}"));
            assert!(back.validate().is_ok(), "the inferred schema file, reloaded, validates:\n{text}");
        }
        encode_all(name, csv, &inf.file);
    }
}
