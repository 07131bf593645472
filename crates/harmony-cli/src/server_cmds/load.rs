//! `harmony load`: the ingest load generator. Pre-builds batches of randomized Adult records
//! (distinct report ids), then posts them over `--concurrency` connections and reports
//! throughput and per-batch latency (p50/p99). Without `--server` it starts an embedded server
//! (SQLite in a temporary directory) in the same process.

use super::{create_request, quantile};
use crate::data;
use anyhow::{Result, anyhow, bail};
use clap::Args;
use harmony_client::Client;
use harmony_client::protocol::{ReportBatch, ReportItem, to_hex};
use harmony_core::sampling::{fast_rng, stream_seed};
use harmony_core::strategy::RecordReport;
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
}

/// Runs `harmony load`.
pub fn run(a: LoadArgs) -> Result<()> {
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
    let created = client.create_collection(&create_request(&data::bundled("examples/adult.toml"), 2.0, "sample-k")?)?;
    let mech = harmony_client::mechanism(&created.config)?;
    let table = data::read_csv(&data::bundled("data/adult.csv"))?;
    let enc = data::encode(&table, mech.schema(), data::InvalidPolicy::Error)?;
    let d = mech.schema().len();
    let batch = a.batch.clamp(1, harmony_client::protocol::MAX_BATCH);
    let nb = a.reports.div_ceil(batch);
    let t_prep = Instant::now();
    let bodies: Vec<Vec<u8>> = (0..nb)
        .into_par_iter()
        .map(|b| {
            let mut rng = fast_rng(stream_seed(a.seed, b as u64));
            let (mut report, mut scratch, mut buf) = (RecordReport::default(), Vec::new(), Vec::new());
            let rows = b * batch..((b + 1) * batch).min(a.reports);
            let mut items = Vec::with_capacity(rows.len());
            for i in rows {
                let r = i % enc.n;
                mech.randomize_into(&enc.values[r * d..(r + 1) * d], &mut rng, &mut report, &mut scratch)?;
                buf.clear();
                harmony_core::wire::encode_into(&report, &mut buf);
                items.push(ReportItem { id: format!("{:016x}{:08x}", a.seed, i), report: to_hex(&buf) });
            }
            let body = ReportBatch { collection: created.id.clone(), config_version: 1, reports: items };
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
    let est = client.estimates(&created.id)?;
    if est.reports != a.reports as u64 {
        bail!("the server counts {} reports, sent {}", est.reports, a.reports);
    }
    let rate = a.reports as f64 / secs;
    let (p50, p99) = (1e3 * quantile(&lat, 0.5), 1e3 * quantile(&lat, 0.99));
    if a.json {
        println!(
            "{}",
            serde_json::json!({"reports": a.reports, "batch": batch, "concurrency": a.concurrency, "seconds": secs,
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
