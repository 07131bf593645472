//! `harmony load`: the ingest load generator. Pre-builds batches of randomized Adult records
//! (distinct report ids), then posts them over `--concurrency` connections and reports
//! throughput and per-batch latency (p50/p99). Without `--server` it starts an embedded server
//! (SQLite in a temporary directory) in the same process.

use super::failover::Replicas;
use super::quantile;
use crate::data::{self, SchemaFile};
use crate::simulate_tasks::TaskArgs;
use crate::specs::MeansArgs;
use anyhow::{Result, anyhow, bail};
use clap::Args;
use harmony_client::Client;
use harmony_protocol::estimates::Query;
use harmony_protocol::{CreateCollection, ReportBatch, ReportItem, to_hex};
use rayon::prelude::*;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

/// `harmony load`.
#[derive(Args, Debug)]
pub struct LoadArgs {
    /// Reports to send.
    #[arg(long, default_value_t = 1_000_000)]
    pub reports: usize,
    /// Reports per batch.
    #[arg(long, default_value_t = 5000)]
    pub batch: usize,
    /// Concurrent connections.
    #[arg(long, default_value_t = 4)]
    pub concurrency: usize,
    /// An existing server, or replicas on one database separated by commas (each batch goes to
    /// the next in turn and, if that one does not answer, to the others); else an embedded
    /// server with SQLite in a temporary directory.
    #[arg(long)]
    pub server: Option<String>,
    #[command(flatten)]
    pub ca: super::CaCert,
    #[command(flatten)]
    pub token: super::Token,
    /// Seed of the synthetic devices.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
    /// After the ingest, time this many `GET …/estimates` (p50/p99 of the analyst's view).
    #[arg(long, default_value_t = 20)]
    pub estimate_queries: usize,
    /// ε of the collection.
    #[arg(long, default_value_t = 2.0, allow_negative_numbers = true)]
    pub epsilon: f64,
    /// The record strategy (default sample-k) and mechanisms.
    #[command(flatten)]
    pub means: MeansArgs,
    /// The task (default means) and its options, on Adult's rows (as `harmony demo`).
    #[command(flatten)]
    pub task: TaskArgs,
}

/// Pre-built request bodies of one collection.
struct Prepared {
    id: String,
    task: &'static str,
    bodies: Vec<Vec<u8>>,
    /// Mean encoded report size (bytes, before hex).
    report_bytes: f64,
}

/// Creates the collection and pre-builds `a.reports` reports of simulated devices (Adult's rows
/// in turn) in batches with distinct ids.
fn prepare(a: &mut LoadArgs, client: &Client) -> Result<Prepared> {
    let name = a.task.task.name();
    if harmony_protocol::TaskKind::from_name(name).is_some_and(|k| k.has_rounds()) {
        bail!(
            "--task {name}: `harmony load` measures report ingest; model rounds post one gradient per device (see `harmony submit`)"
        );
    }
    if a.means.strategy.is_none() {
        a.means.strategy = Some(vec!["sample-k".into()]);
    }
    let file = SchemaFile::load(&data::bundled("examples/adult.toml"))?;
    let (schema, task) = crate::specs::single(&a.task, &a.means, Some(&file), a.epsilon)?;
    let created = client.create_collection(&CreateCollection { schema, epsilon: a.epsilon, task })?;
    let config = &created.config;
    // Heavy hitters: each device's item is its value of `--column`.
    let items = a.task.column.clone().map(crate::items::Source::Column);
    let pop = super::submit::population_with(config, &data::bundled("data/adult.csv"), items.as_ref())?;
    let inputs = pop.inputs();
    let task = harmony_tasks::build(config)?;
    let batch = a.batch.clamp(1, harmony_protocol::MAX_BATCH);
    let (seed, reports) = (a.seed, a.reports);
    let encoded = AtomicUsize::new(0);
    let bodies: Vec<Vec<u8>> = (0..reports.div_ceil(batch))
        .into_par_iter()
        .map(|b| {
            let rows = b * batch..((b + 1) * batch).min(reports);
            let mut items = Vec::with_capacity(rows.len());
            let mut buf = Vec::new();
            for i in rows {
                let mut rng = harmony_tasks::simulate::device_rng(seed, i as u64);
                task.randomize(&inputs[i % inputs.len()], &mut rng, &mut buf)?;
                encoded.fetch_add(buf.len(), Ordering::Relaxed);
                items.push(ReportItem { id: format!("{seed:016x}{i:08x}"), report: to_hex(&buf) });
            }
            let body =
                ReportBatch { collection: created.id.clone(), config_version: config.config_version, reports: items };
            Ok(serde_json::to_vec(&body)?)
        })
        .collect::<Result<_>>()?;
    let report_bytes = encoded.into_inner() as f64 / reports.max(1) as f64;
    Ok(Prepared { id: created.id.clone(), task: config.task.kind().name(), bodies, report_bytes })
}

/// Posts every body over `concurrency` connections: (seconds, sorted latencies, accepted).
fn send(servers: &Replicas, p: &Prepared, concurrency: usize) -> Result<(f64, Vec<f64>, u64)> {
    let next = AtomicUsize::new(0);
    let lat = Mutex::new(Vec::with_capacity(p.bodies.len()));
    let accepted = std::sync::atomic::AtomicU64::new(0);
    let t0 = Instant::now();
    std::thread::scope(|s| -> Result<()> {
        let worker = || -> Result<()> {
            loop {
                let b = next.fetch_add(1, Ordering::Relaxed);
                if b >= p.bodies.len() {
                    return Ok(());
                }
                let t = Instant::now();
                let ack = servers.call(b, |c| c.submit_raw(&p.id, &p.bodies[b]))?;
                lat.lock().unwrap_or_else(|e| e.into_inner()).push(t.elapsed().as_secs_f64());
                accepted.fetch_add(ack.accepted, Ordering::Relaxed);
            }
        };
        let hs: Vec<_> = (0..concurrency.max(1)).map(|_| s.spawn(worker)).collect();
        for h in hs {
            h.join().map_err(|_| anyhow!("a load thread panicked"))??;
        }
        Ok(())
    })?;
    let secs = t0.elapsed().as_secs_f64();
    let mut lat = lat.into_inner().unwrap_or_else(|e| e.into_inner());
    lat.sort_by(f64::total_cmp);
    Ok((secs, lat, accepted.into_inner()))
}

/// Times `GET …/estimates` after the ingest: the first (it computes the document), then `n`
/// more (served from the server's per-collection cache while no report arrives): (first, p50,
/// p99) in ms (p50/p99 NaN when n = 0). Each is the request until its last byte is received,
/// the server's latency; the client's parse of the document is not in it (a 14 MB document
/// takes longer to parse than to serve).
fn time_estimates(servers: &Replicas, id: &str, n: usize) -> Result<(f64, f64, f64)> {
    let t = Instant::now();
    servers.call(0, |c| c.estimates_json(id, &Query::default()))?;
    let first = 1e3 * t.elapsed().as_secs_f64();
    let mut lat = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        servers.call(0, |c| c.estimates_json(id, &Query::default()))?;
        lat.push(t.elapsed().as_secs_f64());
    }
    lat.sort_by(f64::total_cmp);
    Ok((first, 1e3 * quantile(&lat, 0.5), 1e3 * quantile(&lat, 0.99)))
}

/// Waits (up to 10 s each) until every server that answers counts `reports` reports: replicas
/// converge within their poll's staleness bound. Returns how many answered; an error when one
/// counts otherwise after the wait, or when none answers.
fn converge(servers: &Replicas, id: &str, reports: u64) -> Result<usize> {
    let mut answered = 0;
    for (url, c) in servers.each() {
        let t = Instant::now();
        loop {
            match c.estimates(id, &Query::default()) {
                Ok(est) if est.reports == reports => {
                    answered += 1;
                    break;
                }
                Ok(est) if t.elapsed().as_secs() >= 10 => {
                    bail!("the server {url} counts {} reports, sent {reports}", est.reports)
                }
                Ok(_) => std::thread::sleep(std::time::Duration::from_millis(50)),
                Err(e) if servers.len() > 1 => {
                    eprintln!("{url} does not answer ({e}): not counted");
                    break;
                }
                Err(e) => return Err(e.into()),
            }
        }
    }
    if answered == 0 {
        bail!("no server answered for its count of reports");
    }
    Ok(answered)
}

/// Runs `harmony load`.
pub fn run(mut a: LoadArgs) -> Result<()> {
    let dir = std::env::temp_dir().join(format!("harmony-load-{}", std::process::id()));
    let token = a.token.get().unwrap_or_else(|| "load-token".into());
    let embedded = match &a.server {
        Some(_) => None,
        None => {
            std::fs::create_dir_all(&dir)?;
            let store =
                harmony_server::open_store(&dir.join("load.db").display().to_string()).map_err(|e| anyhow!(e))?;
            Some(harmony_server::spawn(store, &token, "127.0.0.1:0", 2).map_err(|e| anyhow!(e))?)
        }
    };
    let url = a.server.clone().unwrap_or_else(|| embedded.as_ref().map(|s| s.url()).unwrap_or_default());
    let servers = Replicas::new(&url, |u| Ok(a.ca.client(u)?.with_token(&token)))?;
    let t_prep = Instant::now();
    let p = prepare(&mut a, servers.first())?;
    let bytes: usize = p.bodies.iter().map(Vec::len).sum();
    let nb = p.bodies.len();
    eprintln!("prepared {nb} batches ({:.1} MB) in {:.1} s", bytes as f64 / 1e6, t_prep.elapsed().as_secs_f64());
    let (secs, lat, accepted) = send(&servers, &p, a.concurrency)?;
    let (first, e50, e99) = time_estimates(&servers, &p.id, a.estimate_queries)?;
    let agreed = converge(&servers, &p.id, a.reports as u64)?;
    let rate = a.reports as f64 / secs;
    let (p50, p99) = (1e3 * quantile(&lat, 0.5), 1e3 * quantile(&lat, 0.99));
    let batch = a.batch.clamp(1, harmony_protocol::MAX_BATCH);
    if a.json {
        println!(
            "{}",
            serde_json::json!({"task": p.task, "report_bytes": p.report_bytes, "reports": a.reports, "batch": batch,
                "concurrency": a.concurrency, "seconds": secs, "reports_per_second": rate, "batch_p50_ms": p50,
                "batch_p99_ms": p99, "accepted": accepted, "estimate_queries": a.estimate_queries,
                "estimate_first_ms": first, "estimate_p50_ms": e50, "estimate_p99_ms": e99,
                "servers": servers.len(), "servers_agreeing": agreed, "failovers": servers.failovers()})
        );
    } else {
        println!(
            "{} reports of task {} ({:.1} bytes each) in {nb} batches of {batch} over {} connections: {secs:.2} s, {rate:.0} reports/s; batch latency p50 {p50:.1} ms, p99 {p99:.1} ms",
            a.reports, p.task, p.report_bytes, a.concurrency
        );
        println!(
            "GET estimates at {} reports, {} queries: p50 {e50:.1} ms, p99 {e99:.1} ms",
            a.reports, a.estimate_queries
        );
        if servers.len() > 1 {
            println!(
                "{agreed} of {} servers count every report; {} requests moved on to another server; {} reports acknowledged as already stored",
                servers.len(),
                servers.failovers(),
                a.reports as u64 - accepted
            );
        }
    }
    drop(embedded);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
