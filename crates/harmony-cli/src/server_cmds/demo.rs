//! `harmony demo`: a server with embedded SQLite on loopback, a collection for Adult, its
//! 48,842 rows submitted as devices, and the estimates printed beside the truth.

use super::{create_request, print_estimates, submit_rows};
use crate::data;
use crate::output::Format;
use anyhow::{Result, anyhow};
use clap::Args;
use harmony_client::Client;
use harmony_client::protocol::{AttributeResult, Estimates, to_hex};
use harmony_core::sampling::secure_rng;
use harmony_core::schema::{Attribute, Schema, Value};
use std::path::PathBuf;

/// `harmony demo`.
#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Privacy budget per record.
    #[arg(long, default_value_t = 2.0, allow_negative_numbers = true)]
    pub epsilon: f64,
    /// split | harmony | sample-k.
    #[arg(long, default_value = "sample-k")]
    pub strategy: String,
    /// Concurrent connections.
    #[arg(long, default_value_t = 4)]
    pub concurrency: usize,
    /// Seed the simulated devices (also checks the server's estimates against the in-process
    /// aggregation of the same reports).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Where to keep the SQLite database (default: a fresh temporary directory).
    #[arg(long)]
    pub db: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

/// Per attribute: the true mean (original units) or the true category frequencies.
pub fn truth(schema: &Schema, values: &[Value]) -> Vec<Vec<f64>> {
    let d = schema.len();
    let n = (values.len() / d) as f64;
    schema
        .attributes()
        .iter()
        .enumerate()
        .map(|(j, a)| match a {
            Attribute::Numeric { min, max, .. } => {
                let s: f64 = values.chunks(d).map(|r| if let Value::Unit(t) = r[j] { t } else { 0.0 }).sum();
                vec![0.5 * (max - min) * s / n + 0.5 * (max + min)]
            }
            Attribute::Categorical { categories, .. } => {
                let mut c = vec![0.0; categories.len()];
                for r in values.chunks(d) {
                    if let Value::Category(v) = r[j] {
                        c[v as usize] += 1.0 / n;
                    }
                }
                c
            }
        })
        .collect()
}

/// Fraction of (attribute, category) cells whose 95% CI covers the truth.
pub fn coverage(est: &Estimates, truth: &[Vec<f64>]) -> (usize, usize) {
    let (mut covered, mut cells) = (0, 0);
    for (a, t) in est.attributes.iter().zip(truth) {
        match a {
            AttributeResult::Numeric { ci95, .. } => {
                cells += 1;
                covered += usize::from(ci95[0] <= t[0] && t[0] <= ci95[1]);
            }
            AttributeResult::Categorical { categories, .. } => {
                for (c, &tv) in categories.iter().zip(t) {
                    cells += 1;
                    covered += usize::from(c.ci95[0] <= tv && tv <= c.ci95[1]);
                }
            }
        }
    }
    (covered, cells)
}

/// Runs `harmony demo`.
pub fn run(a: DemoArgs) -> Result<()> {
    let dir = std::env::temp_dir().join(format!("harmony-demo-{}", std::process::id()));
    let db = match &a.db {
        Some(p) => p.clone(),
        None => {
            std::fs::create_dir_all(&dir)?;
            dir.join("harmony.db")
        }
    };
    let mut b = [0u8; 16];
    rand::Rng::fill_bytes(&mut secure_rng(), &mut b);
    let token = to_hex(&b);
    let store = harmony_server::open_store(&db.display().to_string()).map_err(|e| anyhow!(e))?;
    let server = harmony_server::spawn(store, &token, "127.0.0.1:0", 2).map_err(|e| anyhow!(e))?;
    eprintln!("server on {} (SQLite {})", server.url(), db.display());
    let client = Client::new(&server.url()).with_token(&token);
    let schema_path = data::bundled("examples/adult.toml");
    let created = client.create_collection(&create_request(&schema_path, a.epsilon, &a.strategy)?)?;
    eprintln!("collection {} ({} at ε = {})", created.id, a.strategy, a.epsilon);
    let table = data::read_csv(&data::bundled("data/adult.csv"))?;
    let schema = created.config.schema.clone();
    let enc = data::encode(&table, &schema, data::InvalidPolicy::Error)?;
    let mut st = submit_rows(&Client::new(&server.url()), &created.config, &enc.values, a.concurrency, 1000, a.seed)?;
    st.latencies.sort_by(f64::total_cmp);
    eprintln!(
        "{} devices submitted in {:.2} s ({:.0} reports/s over HTTP, randomizing included); batch p50 {:.1} ms, p99 {:.1} ms",
        enc.n,
        st.seconds,
        enc.n as f64 / st.seconds,
        1e3 * super::quantile(&st.latencies, 0.5),
        1e3 * super::quantile(&st.latencies, 0.99)
    );
    let est = client.estimates(&created.id)?;
    let truth = truth(&schema, &enc.values);
    let (covered, cells) = coverage(&est, &truth);
    if let Some(seed) = a.seed {
        let mech = harmony_client::mechanism(&created.config)?;
        let agg = super::in_process(&mech, &enc.values, seed)?;
        let local = Estimates::from_core(
            &created.id,
            harmony_core::aggregate::Aggregator::count(&agg),
            mech.options(),
            &schema,
            &agg.estimates(),
        );
        let same = super::max_difference(&local, &est);
        eprintln!("in-process aggregation of the same reports: largest difference {same:.1e}");
    }
    match a.format {
        Format::Json => println!(
            "{}",
            serde_json::to_string_pretty(
                &serde_json::json!({"estimates": est, "truth": truth, "ci_covered": covered, "ci_cells": cells})
            )?
        ),
        Format::Table => {
            print_estimates(&est, Some(&truth));
            println!("95% CIs covering the truth: {covered}/{cells}");
        }
    }
    server.stop();
    if a.db.is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(())
}
