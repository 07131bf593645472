//! `harmony load`: the ingest load generator. Pre-builds batches of randomized Adult records
//! (distinct report ids), then posts them over `--concurrency` connections and reports
//! throughput and per-batch latency (p50/p99). Without `--server` it starts an embedded server
//! (SQLite in a temporary directory) in the same process.

use super::quantile;
use crate::data::{self, SchemaFile};
use crate::simulate_tasks::{Task, TaskArgs};
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
    /// An existing server (else an embedded one with SQLite in a temporary directory).
    #[arg(long)]
    pub server: Option<String>,
    /// Analyst token of `--server`.
    #[arg(long, env = "HARMONY_ANALYST_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Seed of the synthetic devices.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
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

/// Runs `harmony load`.
pub fn run(mut a: LoadArgs) -> Result<()> {
    let dir = std::env::temp_dir().join(format!("harmony-load-{}", std::process::id()));
    let token = a.token.clone().unwrap_or_else(|| "load-token".into());
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
    let client = Client::new(&url).with_token(&token);
    if a.task.task == Task::Train {
        bail!(
            "--task train: `harmony load` measures report ingest; model rounds post one gradient per device (see `harmony submit`)"
        );
    }
    if a.means.strategy.is_none() {
        a.means.strategy = Some(vec!["sample-k".into()]);
    }
    let file = SchemaFile::load(&data::bundled("examples/adult.toml"))?;
    let (schema, task) = crate::specs::single(&a.task, &a.means, &file, a.epsilon)?;
    let created = client.create_collection(&CreateCollection { schema, epsilon: a.epsilon, task })?;
    let config = &created.config;
    let pop = super::submit::population(config, &data::bundled("data/adult.csv"))?;
    let inputs = pop.inputs();
    let task = harmony_tasks::build(config)?;
    let batch = a.batch.clamp(1, harmony_protocol::MAX_BATCH);
    let nb = a.reports.div_ceil(batch);
    let t_prep = Instant::now();
    let bodies: Vec<Vec<u8>> = (0..nb)
        .into_par_iter()
        .map(|b| {
            let rows = b * batch..((b + 1) * batch).min(a.reports);
            let mut items = Vec::with_capacity(rows.len());
            let mut buf = Vec::new();
            for i in rows {
                let mut rng = harmony_tasks::simulate::device_rng(a.seed, i as u64);
                task.randomize(&inputs[i % inputs.len()], &mut rng, &mut buf)?;
                items.push(ReportItem { id: format!("{:016x}{:08x}", a.seed, i), report: to_hex(&buf) });
            }
            let body =
                ReportBatch { collection: created.id.clone(), config_version: config.config_version, reports: items };
            Ok(serde_json::to_vec(&body)?)
        })
        .collect::<Result<_>>()?;
    let bytes: usize = bodies.iter().map(Vec::len).sum();
    eprintln!("prepared {} batches ({:.1} MB) in {:.1} s", nb, bytes as f64 / 1e6, t_prep.elapsed().as_secs_f64());
    let next = AtomicUsize::new(0);
    let lat = Mutex::new(Vec::with_capacity(nb));
    let accepted = std::sync::atomic::AtomicU64::new(0);
    let t0 = Instant::now();
    std::thread::scope(|s| -> Result<()> {
        let hs: Vec<_> = (0..a.concurrency.max(1))
            .map(|_| {
                s.spawn(|| -> Result<()> {
                    loop {
                        let b = next.fetch_add(1, Ordering::Relaxed);
                        if b >= nb {
                            return Ok(());
                        }
                        let t = Instant::now();
                        let ack = client.submit_raw(&created.id, &bodies[b])?;
                        lat.lock().expect("lock").push(t.elapsed().as_secs_f64());
                        accepted.fetch_add(ack.accepted, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().map_err(|_| anyhow!("a load thread panicked"))??;
        }
        Ok(())
    })?;
    let secs = t0.elapsed().as_secs_f64();
    let mut lat = lat.into_inner().expect("lock");
    lat.sort_by(f64::total_cmp);
    let est = client.estimates(&created.id, &Query::default())?;
    if est.reports != a.reports as u64 {
        bail!("the server counts {} reports, sent {}", est.reports, a.reports);
    }
    let rate = a.reports as f64 / secs;
    let (p50, p99) = (1e3 * quantile(&lat, 0.5), 1e3 * quantile(&lat, 0.99));
    if a.json {
        println!(
            "{}",
            serde_json::json!({"task": config.task.kind().name(), "report_bytes": bytes as f64 / a.reports as f64 / 2.0,
                "reports": a.reports, "batch": batch, "concurrency": a.concurrency, "seconds": secs,
                "reports_per_second": rate, "batch_p50_ms": p50, "batch_p99_ms": p99,
                "accepted": accepted.load(Ordering::Relaxed)})
        );
    } else {
        println!(
            "{} reports in {} batches of {} over {} connections: {:.2} s, {:.0} reports/s; batch latency p50 {:.1} ms, p99 {:.1} ms",
            a.reports, nb, batch, a.concurrency, secs, rate, p50, p99
        );
    }
    drop(embedded);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
