//! `harmony demo [--task X]`: a server with embedded SQLite on loopback, a collection of task X
//! on Adult, its 48,842 rows submitted as devices through the client SDK, and the estimates
//! printed beside the truth (with `--seed`, also beside `harmony simulate`'s estimates of the
//! same simulated devices, which must be identical).

use super::submit::{population, submit};
use crate::data::{self, SchemaFile};
use crate::output::Format;
use crate::render;
use crate::simulate_tasks::TaskArgs;
use crate::specs::MeansArgs;
use anyhow::{Result, anyhow};
use clap::Args;
use harmony_client::{Client, Policy};
use harmony_protocol::CreateCollection;
use harmony_protocol::estimates::{EstimateDocument, Query};
use std::path::PathBuf;

/// `harmony demo`.
#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Privacy budget of one device's report.
    #[arg(long, default_value_t = 2.0, allow_negative_numbers = true)]
    pub epsilon: f64,
    /// The record strategy (default sample-k) and mechanisms.
    #[command(flatten)]
    pub means: MeansArgs,
    /// The task (default means) and its options; `frequency` defaults to --column education,
    /// `train` to a logistic model of income planned for every row.
    #[command(flatten)]
    pub task: TaskArgs,
    /// Concurrent connections.
    #[arg(long, default_value_t = 4)]
    pub concurrency: usize,
    /// Simulated devices of this seed (also compares the server's estimates with `harmony
    /// simulate`'s of the same devices); without it, devices use the OS CSPRNG.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Where to keep the SQLite database (default: a fresh temporary directory).
    #[arg(long)]
    pub db: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

/// The demo's defaults for the task's required options.
fn defaults(a: &mut DemoArgs) {
    if a.means.strategy.is_none() {
        a.means.strategy = Some(vec!["sample-k".into()]);
    }
    if let Some(defaults) = a.task.task.cli().demo {
        defaults(&mut a.task);
    }
}

/// Runs `harmony demo`.
pub fn run(mut a: DemoArgs) -> Result<()> {
    defaults(&mut a);
    let dir = std::env::temp_dir().join(format!("harmony-demo-{}", std::process::id()));
    let db = match &a.db {
        Some(p) => p.clone(),
        None => {
            std::fs::create_dir_all(&dir)?;
            dir.join("harmony.db")
        }
    };
    let token = super::random_token();
    let store = harmony_server::open_store(&db.display().to_string()).map_err(|e| anyhow!(e))?;
    let server = harmony_server::spawn(store, &token, "127.0.0.1:0", 2).map_err(|e| anyhow!(e))?;
    eprintln!("server on {} (SQLite {})", server.url(), db.display());
    let client = Client::new(&server.url()).with_token(&token);
    let file = SchemaFile::load(&data::bundled("examples/adult.toml"))?;
    let (schema, task) = crate::specs::single(&a.task, &a.means, Some(&file), a.epsilon)?;
    let created = client.create_collection(&CreateCollection { schema, epsilon: a.epsilon, task })?;
    let config = created.config;
    eprintln!("collection {} (task {} at ε = {})", created.id, config.task.kind(), a.epsilon);
    let csv = data::bundled("data/adult.csv");
    let pop = population(&config, &csv)?;
    let devices = Client::new(&server.url());
    if config.task.kind().has_rounds() {
        super::rounds::submit(&devices, &config, &pop, a.seed, &Policy::default(), None)?;
    } else {
        let mut st = submit(&devices, &config, &pop, a.concurrency, 1000, a.seed, &Policy::default())?;
        st.latencies.sort_by(f64::total_cmp);
        eprintln!(
            "{} devices submitted in {:.2} s ({:.0} reports/s over HTTP, randomizing included); batch p50 {:.1} ms, p99 {:.1} ms",
            pop.len(),
            st.seconds,
            pop.len() as f64 / st.seconds,
            1e3 * super::quantile(&st.latencies, 0.5),
            1e3 * super::quantile(&st.latencies, 0.99)
        );
    }
    let est = client.estimates(&created.id, &Query::default())?;
    let truth = super::truth(&config, &csv, None, &est)?;
    let (covered, cells) = truth.as_ref().map(|t| render::coverage(&est, t)).unwrap_or((0, 0));
    if let Some(seed) = a.seed {
        let task = harmony_tasks::build(&config)?;
        let agg = harmony_tasks::simulate::run(task.as_ref(), &pop.inputs(), seed)?;
        let result = task.estimate(agg.as_ref(), &Query::default())?;
        let local =
            EstimateDocument { collection: created.id.clone(), reports: agg.count(), epsilon: config.epsilon, result };
        let same = render::max_difference(&local, &est);
        eprintln!("harmony simulate with the same seed (the same devices, in process): largest difference {same:.1e}");
    }
    match a.format {
        Format::Json => println!(
            "{}",
            serde_json::to_string_pretty(
                &serde_json::json!({"estimates": est, "truth": truth, "ci_covered": covered, "ci_cells": cells})
            )?
        ),
        Format::Table => {
            render::print(&est, truth.as_ref());
            if cells > 0 {
                println!("95% CIs covering the truth: {covered}/{cells}");
            }
        }
    }
    server.stop();
    if a.db.is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(())
}
