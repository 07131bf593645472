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
    config.task.read_columns()
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
            let mut sim = SimulatedDevices::reproducible(s);
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

/// How devices are sent: connections, devices per batch, the seed of simulated devices (else
/// the OS CSPRNG) and the device policy.
pub struct Sending<'a> {
    /// Concurrent connections.
    pub concurrency: usize,
    /// Devices per batch.
    pub batch: usize,
    /// The seed of `--simulate-devices`.
    pub seed: Option<u64>,
    /// The devices' policy (the config is refused if it refuses it).
    pub policy: &'a Policy,
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
    let sending = Sending { concurrency, batch, seed, policy };
    submit_rows(client, config, population, &sending, 0..population.len(), None, "submitting")
}

/// Devices `rows` of `population` (device i keeps its index: a simulated device's report id)
/// sent as [`submit`] sends, every batch received at `at` (`None`: when it arrives).
fn submit_rows(
    client: &Client,
    config: &CollectionConfig,
    population: &Population,
    s: &Sending,
    rows: std::ops::Range<usize>,
    at: Option<&str>,
    label: &str,
) -> Result<SubmitStats> {
    let task = DeviceTask::with_policy(config.clone(), s.policy.clone())?;
    let batch = s.batch.clamp(1, MAX_BATCH);
    let batches = rows.len().div_ceil(batch);
    let next = AtomicUsize::new(0);
    let stats = Mutex::new(SubmitStats::default());
    let pb = progress(rows.len() as u64, label, Format::Table);
    let t0 = Instant::now();
    std::thread::scope(|scope| -> Result<()> {
        let worker = || -> Result<()> {
            loop {
                let b = next.fetch_add(1, Ordering::Relaxed);
                if b >= batches {
                    return Ok(());
                }
                let part = rows.start + b * batch..(rows.start + (b + 1) * batch).min(rows.end);
                let len = part.len() as u64;
                let items = items(&task, population, part, s.seed)?;
                let t = Instant::now();
                let ack = client.submit_at(config, items, at)?;
                let mut st = stats.lock().unwrap_or_else(|p| p.into_inner());
                st.accepted += ack.accepted;
                st.duplicates += ack.duplicates;
                st.latencies.push(t.elapsed().as_secs_f64());
                pb.inc(len);
            }
        };
        let handles: Vec<_> = (0..s.concurrency.max(1)).map(|_| scope.spawn(worker)).collect();
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

/// A share of the devices and the instant its batches are received at (`harmony submit --days`
/// or `--received-at`).
#[derive(Debug, Clone, PartialEq)]
pub struct Dated {
    /// The period as printed (`2026-11-28`, `2026-11-28T13:00`).
    pub label: String,
    /// The instant sent in `Harmony-Received-At`.
    pub at: String,
    /// The devices (rows) of the share.
    pub rows: std::ops::Range<usize>,
}

/// A day after any report: a Monday, so on a boundary of every period (the series probe).
const PROBE: &str = "2999-12-30";

/// When the devices of `harmony submit` are received: `--received-at WHEN` (every device) or
/// `--days N` (N consecutive periods of the collection ending at the one holding `end`).
#[derive(Debug, Clone, PartialEq)]
pub enum Dating {
    /// Every batch received at this instant (as given: the server parses it).
    Once(String),
    /// N periods of the collection's length.
    Periods {
        /// How many.
        n: usize,
        /// The collection's period.
        period: harmony_server::buckets::Period,
        /// An instant in the last one.
        end: i64,
    },
}

impl Dating {
    /// The shares of `devices` devices: the devices split evenly in order over the periods.
    pub fn parts(&self, devices: usize) -> Vec<Dated> {
        match self {
            Dating::Once(at) => vec![Dated { label: at.clone(), at: at.clone(), rows: 0..devices }],
            Dating::Periods { n, period, end } => periods(devices, *n, *period, *end),
        }
    }
}

/// The [`Dating`] of `--days N` (ending at the period holding `--until`, else now) or of
/// `--received-at WHEN`; `None` without either. The collection's period is its series' (the
/// admin token reads it); collections in rounds are refused.
pub fn dating(
    client: &Client,
    config: &CollectionConfig,
    days: Option<u32>,
    until: Option<&str>,
    received_at: Option<&str>,
) -> Result<Option<Dating>> {
    use harmony_server::buckets::parse_instant;
    let flag = if days.is_some() { "--days" } else { "--received-at" };
    if days.is_none() && received_at.is_none() {
        return Ok(None);
    }
    if config.task.kind().has_rounds() || config.task.answers_in_rounds() {
        anyhow::bail!("{flag}: collection {} runs in rounds: it has no time buckets to date reports into", config.id);
    }
    let Some(n) = days else { return Ok(received_at.map(|w| Dating::Once(w.to_string()))) };
    let body = client
        .window_json(&config.id, "series", &[("from", PROBE)], &harmony_protocol::estimates::Query::default())
        .with_context(|| format!("--days: the period of collection {}", config.id))?;
    let name = serde_json::from_slice::<serde_json::Value>(&body)?["period"].as_str().unwrap_or_default().to_string();
    let period = harmony_server::buckets::parse_period("period", &name)
        .map_err(|e| anyhow!("--days: the server's {}", e.message))?;
    let end = match until {
        Some(u) => parse_instant("--until", u).map_err(|e| anyhow!("{}", e.message))?,
        None => harmony_server::store::unix_now(),
    };
    Ok(Some(Dating::Periods { n: n as usize, period, end }))
}

/// `n` consecutive periods ending at the one holding instant `end`, `devices` split evenly over
/// them in order.
pub fn periods(devices: usize, n: usize, period: harmony_server::buckets::Period, end: i64) -> Vec<Dated> {
    use harmony_server::buckets::{Period, iso};
    let last = period.start(end);
    (0..n)
        .map(|k| {
            let start = last - (n - 1 - k) as i64 * period.seconds();
            let at = iso(start);
            let label = if period == Period::Hour { at[..16].to_string() } else { at[..10].to_string() };
            Dated { label, at, rows: k * devices / n..(k + 1) * devices / n }
        })
        .collect()
}

/// Sends each share of `parts` received at its instant, one share after the other; prints each
/// share's count as it goes and a summary per share.
pub fn submit_dated(
    client: &Client,
    config: &CollectionConfig,
    population: &Population,
    s: &Sending,
    parts: &[Dated],
) -> Result<()> {
    let mut lines = Vec::with_capacity(parts.len());
    let (mut accepted, mut duplicates, t0) = (0, 0, Instant::now());
    for (k, p) in parts.iter().enumerate() {
        let label = format!("{} ({} of {}): {} devices", p.label, k + 1, parts.len(), p.rows.len());
        let st = submit_rows(client, config, population, s, p.rows.clone(), Some(&p.at), &label)?;
        lines.push(format!(
            "  {}: {} devices, {} stored, {} already stored",
            p.label,
            p.rows.len(),
            st.accepted,
            st.duplicates
        ));
        (accepted, duplicates) = (accepted + st.accepted, duplicates + st.duplicates);
    }
    eprintln!(
        "submitted {} devices over {} periods received {} to {}: {accepted} stored, {duplicates} already stored; {:.2} s",
        population.len(),
        parts.len(),
        parts.first().map_or("", |p| p.label.as_str()),
        parts.last().map_or("", |p| p.label.as_str()),
        t0.elapsed().as_secs_f64()
    );
    eprintln!("{}", lines.join("\n"));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_split_the_devices_into_consecutive_periods_ending_at_until() {
        use harmony_server::buckets::{Period, parse_instant};
        let end = parse_instant("t", "2026-11-29T10:30:00Z").unwrap();
        for (devices, n) in [(1000usize, 14usize), (10, 3), (5, 7)] {
            let p = periods(devices, n, Period::Day, end);
            assert_eq!(p.len(), n);
            assert_eq!((p[0].rows.start, p[n - 1].rows.end), (0, devices));
            assert!(p.windows(2).all(|w| w[0].rows.end == w[1].rows.start));
            assert_eq!(p[n - 1].at, "2026-11-29T00:00:00Z");
            assert!(p.iter().all(|d| d.rows.len() == devices / n || d.rows.len() == devices / n + 1));
        }
        let p = periods(1000, 14, Period::Day, end);
        assert_eq!((p[0].label.as_str(), p[0].at.as_str()), ("2026-11-16", "2026-11-16T00:00:00Z"));
        assert_eq!(p[7].label, "2026-11-23");
        // 2026-11-29 is a Sunday: its week began on Monday 2026-11-23.
        let w = periods(10, 2, Period::Week, end);
        assert_eq!((w[0].label.as_str(), w[1].label.as_str()), ("2026-11-16", "2026-11-23"));
        let h = periods(10, 2, Period::Hour, end);
        assert_eq!((h[0].label.as_str(), h[1].at.as_str()), ("2026-11-29T09:00", "2026-11-29T10:00:00Z"));
    }
}
