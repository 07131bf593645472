//! `harmony export` (a collection's stored reports → Parquet, partitioned by received day, with
//! its config beside them) and `harmony aggregate --engine local|datafusion` (those files → the
//! estimate document `harmony query` prints). Layout and columns: docs/EXPORT.md and
//! [`harmony_data::reports`].

use crate::output::Format;
use crate::render;
use anyhow::{Context, Result, anyhow, bail};
use clap::{Args, ValueEnum};
use harmony_data::reports::{ReportsWriter, for_each_row, part_files_within};
use harmony_protocol::CollectionConfig;
use harmony_protocol::estimates::EstimateDocument;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The file holding the collection's config beside its parts.
pub const SPEC_FILE: &str = "spec.json";

/// Export formats.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExportFormat {
    /// Parquet parts partitioned by collection and day.
    Parquet,
}

/// `harmony export`.
#[derive(Args, Debug)]
pub struct ExportArgs {
    /// Storage: `sqlite://PATH` or `postgres://user@host:port/db` (as `harmony serve --db`).
    #[arg(long)]
    pub db: String,
    /// PostgreSQL with `sslmode=prefer|require`: also trust these CA certificates (PEM), as
    /// `harmony serve --db-ca-cert` (else `HARMONY_DB_CA_CERT`).
    #[arg(long, env = "HARMONY_DB_CA_CERT")]
    pub db_ca_cert: Option<PathBuf>,
    /// Collection id.
    #[arg(long)]
    pub collection: String,
    /// Output format.
    #[arg(long, value_enum, default_value_t = ExportFormat::Parquet)]
    pub format: ExportFormat,
    /// Output directory: the reports go to `OUT/collection=ID/` (which must hold no export yet).
    #[arg(long)]
    pub out: PathBuf,
}

/// Aggregation engines.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    /// In this process, through the task registry (the server's aggregators).
    Local,
    /// Apache DataFusion (the `harmony_estimate` aggregate over every part; needs a harmony built
    /// with `--features datafusion`).
    Datafusion,
}

/// `harmony aggregate`.
#[derive(Args, Debug)]
pub struct AggregateArgs {
    /// The engine.
    #[arg(long, value_enum, default_value_t = Engine::Local)]
    pub engine: Engine,
    /// An export directory (`harmony export --out`), or one collection's directory in it.
    #[arg(long)]
    pub reports: PathBuf,
    /// Which collection of `--reports` (needed when it holds several).
    #[arg(long)]
    pub collection: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Range collections: ranges [LO, HI) in the attribute's units, `LO:HI` comma-separated.
    #[arg(long, value_delimiter = ',', allow_negative_numbers = true)]
    pub ranges: Option<Vec<String>>,
    /// Range collections: quantile levels (default 0.1,0.5,0.9).
    #[arg(long, value_delimiter = ',', allow_negative_numbers = true)]
    pub quantiles: Option<Vec<f64>>,
    /// `--engine datafusion`: partitions (threads) to aggregate on (default: the cores).
    #[arg(long)]
    pub partitions: Option<usize>,
    /// Only the reports received from this UTC date on (YYYY-MM-DD; the day partitions): the
    /// window `harmony query --from` answers.
    #[arg(long)]
    pub from: Option<String>,
    /// Only the reports received before this UTC date (YYYY-MM-DD, excluded).
    #[arg(long)]
    pub to: Option<String>,
}

/// The days (since 1970-01-01) of `--from`/`--to`: whole UTC dates, as the export's partitions.
fn window_days(a: &AggregateArgs) -> Result<(Option<i32>, Option<i32>)> {
    let day = |flag: &str, raw: &Option<String>| -> Result<Option<i32>> {
        let Some(raw) = raw else { return Ok(None) };
        let t = harmony_server::buckets::parse_instant(flag, raw).map_err(|e| anyhow!("{}", e.message))?;
        if t.rem_euclid(86_400) != 0 {
            bail!("{flag} is {raw:?}: the export is partitioned by UTC day, expected a date YYYY-MM-DD");
        }
        Ok(Some(t.div_euclid(86_400) as i32))
    };
    Ok((day("--from", &a.from)?, day("--to", &a.to)?))
}

/// Refuses a training collection: its gradients are rounds, not reports.
fn check_reports_task(config: &CollectionConfig, what: &str) -> Result<()> {
    if config.task.kind().has_rounds() {
        bail!(
            "collection {} is a training collection (task \"{}\"): {what} supports report collections (means, frequency, marginals, range, heavy-hitters, linear-queries), not model rounds",
            config.id,
            config.task.kind().name()
        );
    }
    Ok(())
}

/// Runs `harmony export`.
pub fn export(a: ExportArgs) -> Result<()> {
    let ExportFormat::Parquet = a.format;
    if !(a.db.starts_with("postgres://") || a.db.starts_with("postgresql://")) {
        let path = a.db.strip_prefix("sqlite://").unwrap_or(&a.db);
        if !Path::new(path).is_file() {
            bail!("--db {}: no such database file", a.db);
        }
    }
    let store = harmony_server::open_store_with(&a.db, a.db_ca_cert.as_deref()).map_err(|e| anyhow!(e))?;
    let stored = store.collections().map_err(|e| anyhow!("--db: {e}"))?;
    let Some(c) = stored.iter().find(|c| c.id == a.collection) else {
        bail!("--collection {}: no such collection in --db ({} collections stored)", a.collection, stored.len());
    };
    let config = CollectionConfig::from_json(&c.config)
        .map_err(|e| anyhow!("collection {}: the stored config does not load: {e}", c.id))?;
    check_reports_task(&config, "export")?;
    let dir = a.out.join(format!("collection={}", c.id));
    let t = Instant::now();
    let mut writer = ReportsWriter::create(&dir)?;
    let spec = dir.join(SPEC_FILE);
    std::fs::write(&spec, &c.config).with_context(|| format!("{}", spec.display()))?;
    let mut failed = None;
    store
        .for_each_stored(c.key, &mut |r| match writer.push(r.id, r.day, r.body) {
            Ok(()) => ControlFlow::Continue(()),
            Err(e) => {
                failed = Some(e);
                ControlFlow::Break(())
            }
        })
        .map_err(|e| anyhow!("--db: reading the reports of {}: {e}", c.id))?;
    if let Some(e) = failed {
        return Err(e.into());
    }
    let written = writer.finish()?;
    let secs = t.elapsed().as_secs_f64();
    eprintln!(
        "exported {} reports of collection {} into {} part files under {} in {secs:.2} s ({:.0} reports/s)",
        written.rows,
        c.id,
        written.files.len(),
        dir.display(),
        written.rows as f64 / secs.max(1e-9)
    );
    Ok(())
}

/// The collection directory `--reports` names (itself, or `collection=ID` inside it).
fn collection_dir(reports: &Path, collection: Option<&str>) -> Result<PathBuf> {
    if reports.join(SPEC_FILE).is_file() {
        return Ok(reports.to_path_buf());
    }
    if let Some(id) = collection {
        let d = reports.join(format!("collection={id}"));
        if !d.join(SPEC_FILE).is_file() {
            bail!("--reports {}: no collection={id}/{SPEC_FILE} (not an export of collection {id})", reports.display());
        }
        return Ok(d);
    }
    let mut found = Vec::new();
    for e in std::fs::read_dir(reports).with_context(|| format!("--reports {}", reports.display()))? {
        let p = e?.path();
        if p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("collection=")) && p.join(SPEC_FILE).is_file()
        {
            found.push(p);
        }
    }
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => bail!("--reports {}: no {SPEC_FILE} and no collection=ID/{SPEC_FILE} in it", reports.display()),
        n => bail!("--reports {} holds {n} collections: choose one with --collection ID", reports.display()),
    }
}

/// The estimate document of an exported collection: every part read batch by batch, every report
/// validated and added as the server does.
pub fn aggregate_local(
    dir: &Path,
    query: &harmony_protocol::estimates::Query,
    (from, to): (Option<i32>, Option<i32>),
) -> Result<(EstimateDocument, usize)> {
    let spec = dir.join(SPEC_FILE);
    let text = std::fs::read_to_string(&spec).with_context(|| format!("{}", spec.display()))?;
    let config = CollectionConfig::from_json(&text).map_err(|e| anyhow!("{}: {e}", spec.display()))?;
    check_reports_task(&config, "aggregate")?;
    let task = harmony_tasks::build(&config).map_err(|e| anyhow!("{}: {e}", spec.display()))?;
    let mut agg = task.aggregator();
    let files = part_files_within(dir, from, to)?;
    for f in &files {
        for_each_row(f, &mut |r| {
            task.validate(r.body).map_err(|e| format!("invalid report: {e}"))?;
            agg.add(r.body).map_err(|e| format!("invalid report: {e}"))
        })?;
    }
    let doc = harmony_tasks::document(task.as_ref(), agg.as_ref(), query).map_err(|e| anyhow!("query: {e}"))?;
    Ok((doc, files.len()))
}

/// The estimate document of an exported collection aggregated by Apache DataFusion
/// (`harmony_dist::estimate_dir`: `harmony_estimate` over every part, partial states merged).
#[cfg(feature = "datafusion")]
fn aggregate_datafusion(
    dir: &Path,
    query: &harmony_protocol::estimates::Query,
    partitions: Option<usize>,
    days: (Option<i32>, Option<i32>),
) -> Result<(EstimateDocument, usize)> {
    let spec = dir.join(SPEC_FILE);
    let text = std::fs::read_to_string(&spec).with_context(|| format!("{}", spec.display()))?;
    let config = CollectionConfig::from_json(&text).map_err(|e| anyhow!("{}: {e}", spec.display()))?;
    check_reports_task(&config, "aggregate")?;
    let partitions = partitions.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    harmony_dist::estimate_window_blocking(dir, query, partitions, days)
        .map_err(|e| anyhow!("--engine datafusion: {e}"))
}

#[cfg(not(feature = "datafusion"))]
fn aggregate_datafusion(
    _: &Path,
    _: &harmony_protocol::estimates::Query,
    _: Option<usize>,
    _: (Option<i32>, Option<i32>),
) -> Result<(EstimateDocument, usize)> {
    bail!(
        "--engine datafusion: this harmony was built without DataFusion; build it with `cargo build --release -p harmony-cli --features datafusion` (docs/SCALE.md), or use --engine local"
    )
}

/// Runs `harmony aggregate`.
pub fn aggregate(a: AggregateArgs) -> Result<()> {
    let dir = collection_dir(&a.reports, a.collection.as_deref())?;
    let query = crate::specs::range_query(a.ranges.as_deref(), a.quantiles.as_deref(), None)?;
    let days = window_days(&a)?;
    let t = Instant::now();
    let (doc, files) = match a.engine {
        Engine::Local => aggregate_local(&dir, &query, days)?,
        Engine::Datafusion => aggregate_datafusion(&dir, &query, a.partitions, days)?,
    };
    let secs = t.elapsed().as_secs_f64();
    eprintln!(
        "aggregated {} reports from {files} part files in {secs:.2} s ({:.0} reports/s)",
        doc.reports,
        doc.reports as f64 / secs.max(1e-9)
    );
    match a.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&doc)?),
        Format::Table => render::print(&doc, None),
    }
    Ok(())
}
