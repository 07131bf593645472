//! # harmony-dist
//!
//! Harmony on Apache DataFusion. Every task's aggregator is a mergeable monoid, so it is a
//! user-defined aggregate ([`udaf`]): DataFusion adds each partition's reports into its own
//! aggregator, ships the partial states ([`harmony_tasks::state`]) and merges them. From SQL:
//!
//! ```sql
//! SELECT harmony_estimate(body, '<spec.json>') FROM reports;                  -- the estimate document
//! SELECT day, harmony_state(body, '<spec.json>') AS s FROM reports GROUP BY day; -- daily partials
//! SELECT harmony_merge(s, '<spec.json>', 'quantiles=0.5') FROM daily;           -- merged later
//! ```
//!
//! and from the DataFrame API ([`estimate_dir`], which `harmony aggregate --engine datafusion`
//! runs over the Parquet reports `harmony export` writes). The estimate document is the one
//! `harmony query` prints; equality with the in-process aggregation is tested for every task
//! (tests/equality.rs). Layout of the reports: docs/EXPORT.md; capacity: docs/SCALE.md.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod dictionary;
mod tally;
pub mod udaf;

use datafusion::arrow::array::{Array, AsArray};
use datafusion::arrow::datatypes::DataType;
use datafusion::execution::config::SessionConfig;
use datafusion::prelude::{ParquetReadOptions, SessionContext, col};
use harmony_protocol::estimates::{EstimateDocument, Query};
use std::path::{Path, PathBuf};
pub use udaf::{HarmonyUdaf, Kind};

/// The file holding the collection's config beside its parts (as `harmony export` writes it).
pub const SPEC_FILE: &str = "spec.json";

/// What can go wrong.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// DataFusion (planning or execution; Harmony's own errors name the aggregate).
    #[error("{0}")]
    DataFusion(#[from] datafusion::error::DataFusionError),
    /// Reading the export.
    #[error("{0}")]
    Data(#[from] harmony_data::Error),
    /// A file.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Anything else, said in full.
    #[error("{0}")]
    Other(String),
}

/// Results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Registers `harmony_estimate`, `harmony_state` and `harmony_merge` with `ctx`.
pub fn register(ctx: &SessionContext) {
    for kind in [Kind::Estimate, Kind::State, Kind::Merge] {
        ctx.register_udaf(HarmonyUdaf::udaf(kind));
    }
}

/// A session with the Harmony aggregates registered, running on `partitions` partitions (the
/// number of cores it uses).
pub fn context(partitions: usize) -> SessionContext {
    let config = SessionConfig::new().with_target_partitions(partitions.max(1));
    let ctx = SessionContext::new_with_config(config);
    register(&ctx);
    ctx
}

/// The spec (`spec.json`) of an exported collection's directory.
pub fn read_spec(dir: &Path) -> Result<String> {
    let path = dir.join(SPEC_FILE);
    std::fs::read_to_string(&path).map_err(|source| Error::Io { path, source })
}

/// The estimate document of an exported collection (`dir` holds `spec.json` and `day=*/part-*.parquet`)
/// aggregated by DataFusion on `ctx`; also the number of part files read.
pub async fn estimate_dir(ctx: &SessionContext, dir: &Path, query: &Query) -> Result<(EstimateDocument, usize)> {
    let spec = read_spec(dir)?;
    let files: Vec<String> =
        harmony_data::reports::part_files(dir)?.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    if files.is_empty() {
        return Err(Error::Other(format!("{}: no day=*/part-*.parquet files", dir.display())));
    }
    estimate_files(ctx, &spec, files, query).await
}

/// [`estimate_dir`] over the day partitions in `[from, to)` only (days since 1970-01-01; an
/// open side when `None`): the window the server answers for `?from=&to=` on a daily
/// collection. A window without a partition is the document of no reports.
pub async fn estimate_window(
    ctx: &SessionContext,
    dir: &Path,
    query: &Query,
    (from, to): (Option<i32>, Option<i32>),
) -> Result<(EstimateDocument, usize)> {
    let spec = read_spec(dir)?;
    let files: Vec<String> = harmony_data::reports::part_files_within(dir, from, to)?
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if files.is_empty() {
        let config = harmony_protocol::CollectionConfig::from_json(&spec).map_err(Error::Other)?;
        let task = harmony_tasks::build(&config).map_err(|e| Error::Other(e.to_string()))?;
        let doc = harmony_tasks::document(task.as_ref(), task.aggregator().as_ref(), query)
            .map_err(|e| Error::Other(format!("query: {e}")))?;
        return Ok((doc, 0));
    }
    estimate_files(ctx, &spec, files, query).await
}

/// The estimate document of the Parquet reports `files` of the collection `spec`.
async fn estimate_files(
    ctx: &SessionContext,
    spec: &str,
    files: Vec<String>,
    query: &Query,
) -> Result<(EstimateDocument, usize)> {
    let n = files.len();
    let df = ctx.read_parquet(files, ParquetReadOptions::default()).await?;
    let call = HarmonyUdaf::bound(Kind::Estimate, spec, &query.to_query_string()).call(vec![col("body")]);
    let batches = df.aggregate(vec![], vec![call.alias("estimate")])?.collect().await?;
    let column = batches.first().filter(|b| b.num_rows() == 1).map(|b| b.column(0).clone());
    let column = column.ok_or_else(|| Error::Other("harmony_estimate returned no row".into()))?;
    let text = match column.data_type() {
        DataType::Utf8 => column.as_string::<i32>().value(0).to_string(),
        DataType::Utf8View => column.as_string_view().value(0).to_string(),
        t => return Err(Error::Other(format!("harmony_estimate returned {t}, expected utf8"))),
    };
    let doc = serde_json::from_str(&text).map_err(|e| Error::Other(format!("harmony_estimate's document: {e}")))?;
    Ok((doc, n))
}

/// [`estimate_dir`] on a fresh session of `partitions` partitions, from synchronous code.
pub fn estimate_dir_blocking(dir: &Path, query: &Query, partitions: usize) -> Result<(EstimateDocument, usize)> {
    estimate_window_blocking(dir, query, partitions, (None, None))
}

/// [`estimate_window`] on a fresh session of `partitions` partitions, from synchronous code.
pub fn estimate_window_blocking(
    dir: &Path,
    query: &Query,
    partitions: usize,
    days: (Option<i32>, Option<i32>),
) -> Result<(EstimateDocument, usize)> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(partitions.max(1))
        .enable_all()
        .build()
        .map_err(|source| Error::Io { path: PathBuf::from("<tokio runtime>"), source })?;
    let ctx = context(partitions);
    match days {
        (None, None) => rt.block_on(estimate_dir(&ctx, dir, query)),
        days => rt.block_on(estimate_window(&ctx, dir, query, days)),
    }
}
