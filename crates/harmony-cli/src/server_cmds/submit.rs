//! `harmony submit` for tasks without rounds: rows as devices, each randomizing its own input
//! through the client SDK ([`DeviceTask`]) — with the OS CSPRNG, or as the simulated devices of
//! a seed — in batches over concurrent connections.

use crate::data;
use crate::output::{Format, progress};
use crate::population::Population;
use anyhow::{Context, Result, anyhow};
use harmony_client::{Client, DeviceTask, Policy, SimulatedDevices};
use harmony_protocol::{CollectionConfig, MAX_BATCH, ReportItem};
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

/// What a submission did.
#[derive(Debug, Default, Clone)]
pub struct SubmitStats {
    /// Reports stored by the server.
    pub accepted: u64,
    /// Reports the server had already stored (retries).
    pub duplicates: u64,
    /// Seconds per batch (submission round trip).
    pub latencies: Vec<f64>,
    /// Wall time.
    pub seconds: f64,
}

/// The devices of a table (CSV, .csv.xz, Parquet or Arrow IPC) for a collection: its rows
/// encoded by the collection's schema.
pub fn population(config: &CollectionConfig, path: &Path) -> Result<Population> {
    population_with(config, path, None)
}

/// The devices of a file for a collection: a heavy-hitters collection's item sets from `items`
/// (a column of the CSV `path`, or `path` as a transactions file), else the CSV's rows encoded
/// by the collection's schema (only the columns its task reads; a bad cell is an error).
pub fn population_with(
    config: &CollectionConfig,
    path: &Path,
    items: Option<&crate::items::Source>,
) -> Result<Population> {
    let options = read_options(config, None, data::InvalidPolicy::Error)?;
    Ok(read_devices(config, path, items, &options)?.0)
}

/// The devices of a file (see [`population_with`]) read with `options`, and the rows skipped.
pub fn read_devices(
    config: &CollectionConfig,
    path: &Path,
    items: Option<&crate::items::Source>,
    options: &harmony_data::EncodeOptions,
) -> Result<(Population, usize)> {
    if config.task.kind().takes_items() {
        let source = items.ok_or_else(|| {
            anyhow!("collection {} is heavy-hitters: give --column COL ('*': every attribute as attribute=value) or --transactions", config.id)
        })?;
        let star = config.schema.as_ref().map(|s| s.attributes().iter().map(|a| a.name().to_string()).collect());
        return Ok((crate::items::read(source, path, star)?.population(), 0));
    }
    let schema = config.schema()?;
    let enc = data::encode_file_with(path, schema, options)
        .with_context(|| format!("encoding {} against collection {}'s schema", path.display(), config.id))?;
    Ok((Population::records(schema, enc.values), enc.skipped))
}

/// The columns a collection's devices read: one attribute's for frequency and range, the
/// domain's for linear queries and marginals that name it; `None` (every attribute) otherwise.
pub fn read_columns(config: &CollectionConfig) -> Option<Vec<String>> {
    use harmony_protocol::TaskSpec;
    match &config.task {
        TaskSpec::Frequency(f) => Some(vec![f.attribute.clone()]),
        TaskSpec::Range(r) => Some(vec![r.attribute.clone()]),
        TaskSpec::LinearQueries(l) => Some(l.attributes.clone()),
        TaskSpec::Marginals(m) => m.attributes.clone(),
        _ => None,
    }
}

/// How to read a file for a collection: only the columns its task reads, with `invalid` for a
/// bad row, and a schema file's missing tokens and date units (refused unless it declares the
/// collection's attributes).
pub fn read_options(
    config: &CollectionConfig,
    file: Option<&data::SchemaFile>,
    invalid: data::InvalidPolicy,
) -> Result<harmony_data::EncodeOptions> {
    let mut options = match file {
        Some(f) => {
            if config.schema.is_some() && config.schema.as_ref() != Some(&f.schema()?) {
                anyhow::bail!("--schema does not declare collection {}'s attributes (as they were created)", config.id);
            }
            f.encode_options()
        }
        None => harmony_data::EncodeOptions::default(),
    };
    options.invalid = invalid;
    options.only = read_columns(config);
    Ok(options)
}

/// The warning `collection create` prints when ε exceeds the default device policy's cap (every
/// device with the default policy would refuse the collection).
pub fn epsilon_warning(epsilon: f64) -> Option<String> {
    let cap = harmony_client::policy::DEFAULT_MAX_EPSILON;
    (epsilon > cap).then(|| {
        format!(
            "epsilon {epsilon} exceeds the default device policy's max_epsilon {cap}: devices with the default policy will refuse this collection (`harmony submit --max-epsilon {epsilon}` or a policy file allows it)"
        )
    })
}

/// The batch items of devices `rows` (device i: the simulated device i of `seed`, or a real
/// device with the OS CSPRNG).
fn items(
    task: &DeviceTask,
    population: &Population,
    rows: std::ops::Range<usize>,
    seed: Option<u64>,
) -> Result<Vec<ReportItem>> {
    let inputs = population.inputs();
    let mut out = Vec::with_capacity(rows.len());
    match seed {
        Some(s) => {
            let mut sim = SimulatedDevices::new(s);
            for i in rows {
                out.push(sim.item(task, i as u64, &inputs[i])?);
            }
        }
        None => {
            // One OS-seeded ChaCha20 per batch: each device's draws come from the CSPRNG.
            let mut rng = harmony_core::sampling::secure_rng();
            let mut ids = harmony_core::sampling::secure_rng();
            for i in rows {
                out.push(
                    task.item(&inputs[i], &mut rng, &mut ids).with_context(|| format!("device {i} (row {})", i + 2))?,
                );
            }
        }
    }
    Ok(out)
}

/// Every device of `population` randomizes its input (under the device `policy`: the config is
/// refused if the policy refuses it) and the reports go to the server in batches over
/// `concurrency` connections.
pub fn submit(
    client: &Client,
    config: &CollectionConfig,
    population: &Population,
    concurrency: usize,
    batch: usize,
    seed: Option<u64>,
    policy: &Policy,
) -> Result<SubmitStats> {
    let task = DeviceTask::with_policy(config.clone(), policy.clone())?;
    let n = population.len();
    let batch = batch.clamp(1, MAX_BATCH);
    let batches = n.div_ceil(batch);
    let next = AtomicUsize::new(0);
    let stats = Mutex::new(SubmitStats::default());
    let pb = progress(n as u64, "submitting", Format::Table);
    let t0 = Instant::now();
    std::thread::scope(|s| -> Result<()> {
        let worker = || -> Result<()> {
            loop {
                let b = next.fetch_add(1, Ordering::Relaxed);
                if b >= batches {
                    return Ok(());
                }
                let rows = b * batch..((b + 1) * batch).min(n);
                let len = rows.len() as u64;
                let items = items(&task, population, rows, seed)?;
                let t = Instant::now();
                let ack = client.submit(config, items)?;
                let mut st = stats.lock().unwrap_or_else(|p| p.into_inner());
                st.accepted += ack.accepted;
                st.duplicates += ack.duplicates;
                st.latencies.push(t.elapsed().as_secs_f64());
                pb.inc(len);
            }
        };
        let handles: Vec<_> = (0..concurrency.max(1)).map(|_| s.spawn(worker)).collect();
        for h in handles {
            h.join().map_err(|_| anyhow!("a submitting thread panicked"))??;
        }
        Ok(())
    })?;
    pb.finish_and_clear();
    let mut st = stats.into_inner().unwrap_or_else(|p| p.into_inner());
    st.seconds = t0.elapsed().as_secs_f64();
    Ok(st)
}
