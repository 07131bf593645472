//! Tables written for tests and benchmarks: a [`Table`] as Parquet or Arrow IPC with typed
//! columns, and a seeded synthetic population of any size.

use crate::error::{Error, Result};
use crate::schema_file::SchemaFile;
use crate::table::Table;
use crate::temporal::{Unit, days_from_civil};
use arrow_array::builder::{BooleanBuilder, Float64Builder, Int64Builder, StringDictionaryBuilder};
use arrow_array::types::Int32Type;
use arrow_array::{ArrayRef, Date32Array, RecordBatch, StringArray};
use arrow_schema::ArrowError;
use harmony_core::sampling::{fast_rng, uniform_below, uniform01};
use harmony_core::schema::Attribute;
use parquet::arrow::ArrowWriter;
pub use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use std::path::Path;
use std::sync::Arc;

fn arrow_err(path: &Path) -> impl Fn(ArrowError) -> Error + '_ {
    move |e| Error::data(format!("{}: writing Arrow: {e}", path.display()))
}

/// `table` as one record batch: the schema's numeric attributes as `Int64` when every value is
/// an integer, else `Float64`; categorical ones as dictionary strings when `dictionary`, else
/// `Utf8`; other columns as `Utf8`. Empty or missing-token cells become nulls.
pub fn table_batch(table: &Table, file: &SchemaFile, dictionary: bool) -> Result<RecordBatch> {
    let missing = file.missing();
    let mut fields = Vec::new();
    for (c, name) in table.header.iter().enumerate() {
        let cells: Vec<Option<&str>> =
            table.rows.iter().map(|r| Some(r[c].as_str()).filter(|s| !missing.is_missing(s))).collect();
        let attr = file.attributes.iter().map(|d| &d.attribute).find(|a| a.name() == name);
        let array: ArrayRef = match attr {
            Some(Attribute::Numeric { .. }) => {
                let nums: Vec<Option<f64>> = cells.iter().map(|s| s.and_then(|s| s.parse().ok())).collect();
                if nums.iter().flatten().all(|x| x.fract() == 0.0) {
                    Arc::new(nums.iter().map(|x| x.map(|x| x as i64)).collect::<arrow_array::Int64Array>())
                } else {
                    Arc::new(nums.into_iter().collect::<arrow_array::Float64Array>())
                }
            }
            Some(Attribute::Categorical { .. }) if dictionary => {
                Arc::new(cells.into_iter().collect::<arrow_array::DictionaryArray<Int32Type>>())
            }
            _ => Arc::new(StringArray::from(cells)),
        };
        fields.push((name.clone(), array));
    }
    RecordBatch::try_from_iter(fields).map_err(|e| Error::data(format!("building a record batch: {e}")))
}

/// Writes batches as Parquet (at most `row_group` rows per row group).
pub fn write_parquet(
    path: &Path,
    batches: impl IntoIterator<Item = RecordBatch>,
    compression: Compression,
    row_group: usize,
) -> Result<()> {
    let mut batches = batches.into_iter().peekable();
    let schema = batches.peek().ok_or_else(|| Error::data("write_parquet: no batches"))?.schema();
    let file = std::fs::File::create(path).map_err(|source| Error::Io { path: path.display().to_string(), source })?;
    let props =
        WriterProperties::builder().set_compression(compression).set_max_row_group_row_count(Some(row_group)).build();
    let bad = |e: parquet::errors::ParquetError| Error::data(format!("{}: writing Parquet: {e}", path.display()));
    let mut w = ArrowWriter::try_new(file, schema, Some(props)).map_err(bad)?;
    for b in batches {
        w.write(&b).map_err(bad)?;
    }
    w.close().map_err(bad)?;
    Ok(())
}

/// Writes batches as an Arrow IPC file (`stream = false`) or stream.
pub fn write_ipc(path: &Path, batches: &[RecordBatch], stream: bool) -> Result<()> {
    let schema = batches.first().ok_or_else(|| Error::data("write_ipc: no batches"))?.schema();
    let file = std::fs::File::create(path).map_err(|source| Error::Io { path: path.display().to_string(), source })?;
    if stream {
        let mut w = arrow_ipc::writer::StreamWriter::try_new(file, &schema).map_err(arrow_err(path))?;
        batches.iter().try_for_each(|b| w.write(b)).map_err(arrow_err(path))?;
        w.finish().map_err(arrow_err(path))
    } else {
        let mut w = arrow_ipc::writer::FileWriter::try_new(file, &schema).map_err(arrow_err(path))?;
        batches.iter().try_for_each(|b| w.write(b)).map_err(arrow_err(path))?;
        w.finish().map_err(arrow_err(path))
    }
}

/// The schema of [`synthetic`]'s population.
pub fn synthetic_schema() -> SchemaFile {
    let toml = format!(
        "[units]\nsignup = \"days\"\n\
         [[attributes]]\nname = \"age\"\nkind = \"numeric\"\nmin = 0\nmax = 100\n\
         [[attributes]]\nname = \"income\"\nkind = \"numeric\"\nmin = 0\nmax = 1000000\n\
         [[attributes]]\nname = \"signup\"\nkind = \"numeric\"\nmin = {}\nmax = {}\n\
         [[attributes]]\nname = \"region\"\nkind = \"categorical\"\ncategories = [\"?\", {}]\n\
         [[attributes]]\nname = \"active\"\nkind = \"categorical\"\ncategories = [\"false\", \"true\"]\n",
        days_from_civil(2015, 1, 1),
        days_from_civil(2025, 1, 1),
        (0..8).map(|r| format!("\"region-{r}\"")).collect::<Vec<_>>().join(", ")
    );
    let file: SchemaFile = toml::from_str(&toml).expect("a valid schema");
    debug_assert_eq!(file.units.get("signup"), Some(&Unit::Days));
    file
}

/// A seeded population of `rows` users in batches of `batch` rows, five columns:
/// `age` Int64 (18–90), `income` Float64 (log-uniform 1e3–1e6), `signup` Date32 (2015–2024),
/// `region` dictionary strings (8 labels, 2% null), `active` Boolean. Schema:
/// [`synthetic_schema`].
pub fn synthetic(rows: usize, batch: usize, seed: u64) -> impl Iterator<Item = RecordBatch> {
    let mut rng = fast_rng(seed);
    let (d0, d1) = (days_from_civil(2015, 1, 1), days_from_civil(2025, 1, 1));
    (0..rows.div_ceil(batch)).map(move |b| {
        let m = batch.min(rows - b * batch);
        let (mut age, mut income, mut active) = (Int64Builder::new(), Float64Builder::new(), BooleanBuilder::new());
        let mut region = StringDictionaryBuilder::<Int32Type>::new();
        let mut signup = Vec::with_capacity(m);
        for _ in 0..m {
            age.append_value(18 + uniform_below(&mut rng, 73) as i64);
            income.append_value((1e3f64.ln() + uniform01(&mut rng) * (1e6f64 / 1e3).ln()).exp().min(1e6));
            signup.push((d0 + uniform_below(&mut rng, (d1 - d0) as u64) as i64) as i32);
            if uniform01(&mut rng) < 0.02 {
                region.append_null();
            } else {
                region.append_value(format!("region-{}", uniform_below(&mut rng, 8)));
            }
            active.append_value(uniform01(&mut rng) < 0.3);
        }
        let columns: Vec<(&str, ArrayRef)> = vec![
            ("age", Arc::new(age.finish())),
            ("income", Arc::new(income.finish())),
            ("signup", Arc::new(Date32Array::from(signup))),
            ("region", Arc::new(region.finish())),
            ("active", Arc::new(active.finish())),
        ];
        RecordBatch::try_from_iter(columns).expect("columns of equal length")
    })
}

/// Adult's CSV (`data/adult.csv` of the repository, as text) with each data cell replaced, with
/// probability `p`, by one of the default missing tokens (empty, `NA`, `N/A`, `NaN`, `null`,
/// `None`, `?`), seeded: the blanked tables of the missing-value tests.
pub fn blanked_csv(csv: &str, p: f64, seed: u64) -> String {
    const TOKENS: [&str; 7] = ["", "NA", "N/A", "NaN", "null", "None", "?"];
    let mut rng = fast_rng(seed);
    let mut out = String::with_capacity(csv.len());
    for (i, line) in csv.lines().enumerate() {
        let cells: Vec<&str> = line
            .split(',')
            .map(|c| if i > 0 && uniform01(&mut rng) < p { TOKENS[uniform_below(&mut rng, 7) as usize] } else { c })
            .collect();
        out.push_str(&cells.join(","));
        out.push('\n');
    }
    out
}
