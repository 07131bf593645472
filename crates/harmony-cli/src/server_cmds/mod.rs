//! Server commands: `serve`, `collection create`, `submit`, `query`, `demo` and `load` (the
//! ingest load generator).

pub mod demo;
pub mod load;
pub mod rounds;

use crate::data;
use crate::output::Format;
use anyhow::{Context, Result, anyhow};
use clap::{Args, Subcommand};
use harmony_client::protocol::{AttributeResult, CollectionConfig, CreateCollection, Estimates, ReportItem, to_hex};
use harmony_client::{Client, report_id};
use harmony_core::aggregate::Aggregator;
use harmony_core::sampling::{fast_rng, secure_rng, stream_seed};
use harmony_core::schema::Value;
use harmony_core::strategy::{RecordAggregator, RecordMechanism, RecordReport};
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

/// `harmony serve`.
#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Storage: `sqlite://PATH` (embedded) or `postgres://user@host:port/db`.
    #[arg(long, default_value = "sqlite://harmony.db")]
    pub db: String,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: String,
    /// Bearer token of the analyst endpoints (else `HARMONY_ANALYST_TOKEN`).
    #[arg(long, env = "HARMONY_ANALYST_TOKEN", hide_env_values = true)]
    pub analyst_token: Option<String>,
    /// Log level on stderr: error, warn, info or debug (debug logs every batch).
    #[arg(long, default_value = "info")]
    pub log_level: String,
}

/// `harmony collection …`.
#[derive(Subcommand, Debug)]
pub enum CollectionCommand {
    /// Create a collection; prints its id on stdout.
    Create(CreateArgs),
}

/// `harmony collection create`.
#[derive(Args, Debug)]
pub struct CreateArgs {
    /// Server URL, e.g. http://127.0.0.1:8080.
    #[arg(long)]
    pub server: String,
    /// Analyst token (else `HARMONY_ANALYST_TOKEN`).
    #[arg(long, env = "HARMONY_ANALYST_TOKEN", hide_env_values = true)]
    pub token: String,
    /// Schema file (TOML, as `harmony simulate --schema`).
    #[arg(long)]
    pub schema: PathBuf,
    /// Privacy budget per record (`--task train`: per device, spent on its one gradient).
    #[arg(long, allow_negative_numbers = true)]
    pub epsilon: f64,
    /// split | harmony | sample-k (`--task means`).
    #[arg(long, default_value = "harmony")]
    pub strategy: String,
    /// means (record reports, estimates) or train (model rounds: one randomized gradient per
    /// device; see the training options).
    #[arg(long, default_value = "means")]
    pub task: String,
    /// Training options (`--task train`).
    #[command(flatten)]
    pub train: rounds::TrainOptions,
}

/// `harmony submit`.
#[derive(Args, Debug)]
pub struct SubmitArgs {
    /// Server URL.
    #[arg(long)]
    pub server: String,
    /// Collection id.
    #[arg(long)]
    pub collection: String,
    /// Data (CSV, .csv.xz, Parquet or Arrow IPC): one simulated device per row.
    #[arg(long)]
    pub data: PathBuf,
    /// Concurrent connections (record collections; a training collection's rounds are
    /// sequential).
    #[arg(long, default_value_t = 4)]
    pub concurrency: usize,
    /// Devices per HTTP batch (record collections).
    #[arg(long, default_value_t = 1000)]
    pub batch: usize,
    /// Seed the simulated devices' RNGs (device i draws from stream i) for reproducible runs;
    /// without it every device uses an OS-seeded ChaCha20. A training collection refuses a
    /// repeated run's devices (same seed, same device ids).
    #[arg(long)]
    pub seed: Option<u64>,
}

/// `harmony query`.
#[derive(Args, Debug)]
pub struct QueryArgs {
    /// Server URL.
    #[arg(long)]
    pub server: String,
    /// Analyst token (else `HARMONY_ANALYST_TOKEN`).
    #[arg(long, env = "HARMONY_ANALYST_TOKEN", hide_env_values = true)]
    pub token: String,
    /// Collection id.
    #[arg(long)]
    pub collection: String,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Training collection: also score the model on this table (CSV, Parquet, Arrow; misclassification rate or MSE).
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// Training collection: the target column of `--data` (must be the collection's target,
    /// which is the default).
    #[arg(long)]
    pub target: Option<String>,
}

/// Runs `harmony serve`.
pub fn serve(args: ServeArgs) -> Result<()> {
    use tracing_subscriber::filter::LevelFilter;
    let level = match args.log_level.as_str() {
        "error" => LevelFilter::ERROR,
        "warn" => LevelFilter::WARN,
        "info" => LevelFilter::INFO,
        "debug" => LevelFilter::DEBUG,
        other => anyhow::bail!("--log-level is \"{other}\", expected error, warn, info or debug"),
    };
    tracing_subscriber::fmt().with_max_level(level).with_writer(std::io::stderr).with_ansi(false).init();
    let token = match args.analyst_token {
        Some(t) if !t.is_empty() => t,
        _ => {
            let mut b = [0u8; 16];
            rand::Rng::fill_bytes(&mut secure_rng(), &mut b);
            let t = to_hex(&b);
            eprintln!("note: no --analyst-token or HARMONY_ANALYST_TOKEN; generated analyst token: {t}");
            t
        }
    };
    let store = harmony_server::open_store(&args.db).map_err(|e| anyhow!("--db {e}"))?;
    harmony_server::serve_forever(store, &token, &args.listen).map_err(|e| anyhow!(e))
}

/// Reads a schema file into a collection request.
pub fn create_request(schema: &std::path::Path, epsilon: f64, strategy: &str) -> Result<CreateCollection> {
    let file = data::SchemaFile::load(schema)?;
    Ok(CreateCollection {
        schema: file.schema()?,
        epsilon,
        strategy: strategy.to_string(),
        numeric_mechanism: None,
        categorical_mechanism: None,
        tasks: vec!["means".into()],
        train: None,
    })
}

/// Runs `harmony collection create`.
pub fn collection(cmd: CollectionCommand) -> Result<()> {
    match cmd {
        CollectionCommand::Create(a) => {
            let created = create(&a)?;
            println!("{}", created.id);
            Ok(())
        }
    }
}

/// Creates the collection `a` describes: `--task means` (the schema's record reports) or
/// `--task train` (model rounds; [`rounds::train_request`]).
pub fn create(a: &CreateArgs) -> Result<harmony_client::protocol::Created> {
    let client = Client::new(&a.server).with_token(&a.token);
    match a.task.as_str() {
        "means" => {
            a.train.check_unused()?;
            let req = create_request(&a.schema, a.epsilon, &a.strategy)?;
            Ok(client.create_collection(&req)?)
        }
        "train" => {
            let req = rounds::train_request(&a.schema, a.epsilon, &a.strategy, &a.train)?;
            client.create_collection(&req).map_err(rounds::option_error)
        }
        other => anyhow::bail!("invalid option: --task is \"{other}\", expected means or train"),
    }
}

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

/// Devices `values.chunks(d)` randomize their own rows (device i: stream i of `seed`, or an
/// OS-seeded ChaCha20 without a seed) and submit in batches over `concurrency` connections.
pub fn submit_rows(
    client: &Client,
    config: &CollectionConfig,
    values: &[Value],
    concurrency: usize,
    batch: usize,
    seed: Option<u64>,
) -> Result<SubmitStats> {
    let mech = harmony_client::mechanism(config)?;
    let d = mech.schema().len();
    let n = values.len() / d;
    let batch = batch.clamp(1, harmony_client::protocol::MAX_BATCH);
    let batches = n.div_ceil(batch);
    let next = AtomicUsize::new(0);
    let stats = Mutex::new(SubmitStats::default());
    let pb = crate::output::progress(n as u64, "submitting", Format::Table);
    let t0 = Instant::now();
    std::thread::scope(|s| -> Result<()> {
        let mut handles = Vec::new();
        for _ in 0..concurrency.max(1) {
            handles.push(s.spawn(|| -> Result<()> {
                let (mut report, mut scratch, mut buf) = (RecordReport::default(), Vec::new(), Vec::new());
                loop {
                    let b = next.fetch_add(1, Ordering::Relaxed);
                    if b >= batches {
                        return Ok(());
                    }
                    let rows = b * batch..((b + 1) * batch).min(n);
                    let mut items = Vec::with_capacity(rows.len());
                    for i in rows.clone() {
                        let row = &values[i * d..(i + 1) * d];
                        let item = match seed {
                            Some(seed) => {
                                let mut rng = fast_rng(stream_seed(seed, i as u64));
                                device_item(&mech, row, &mut rng, &mut report, &mut scratch, &mut buf)?
                            }
                            None => {
                                let mut rng = secure_rng();
                                device_item(&mech, row, &mut rng, &mut report, &mut scratch, &mut buf)?
                            }
                        };
                        items.push(item);
                    }
                    let t = Instant::now();
                    let ack = client.submit(config, items)?;
                    let dt = t.elapsed().as_secs_f64();
                    let mut st = stats.lock().expect("stats lock");
                    st.accepted += ack.accepted;
                    st.duplicates += ack.duplicates;
                    st.latencies.push(dt);
                    pb.inc(rows.len() as u64);
                }
            }));
        }
        for h in handles {
            h.join().map_err(|_| anyhow!("a submitting thread panicked"))??;
        }
        Ok(())
    })?;
    pb.finish_and_clear();
    let mut st = stats.into_inner().expect("stats lock");
    st.seconds = t0.elapsed().as_secs_f64();
    Ok(st)
}

/// One device: randomize its row, then draw its report id, from its own RNG.
fn device_item<R: rand::Rng + ?Sized>(
    mech: &RecordMechanism,
    row: &[Value],
    rng: &mut R,
    report: &mut RecordReport,
    scratch: &mut Vec<usize>,
    buf: &mut Vec<u8>,
) -> Result<ReportItem> {
    mech.randomize_into(row, rng, report, scratch)?;
    let id = report_id(rng);
    buf.clear();
    harmony_core::wire::encode_into(report, buf);
    Ok(ReportItem { id, report: to_hex(buf) })
}

/// The in-process aggregation of exactly the reports `submit_rows(.., Some(seed))` sends.
pub fn in_process(mech: &RecordMechanism, values: &[Value], seed: u64) -> Result<RecordAggregator> {
    let d = mech.schema().len();
    let mut agg = mech.aggregator();
    let (mut report, mut scratch) = (RecordReport::default(), Vec::new());
    for (i, row) in values.chunks(d).enumerate() {
        let mut rng = fast_rng(stream_seed(seed, i as u64));
        mech.randomize_into(row, &mut rng, &mut report, &mut scratch)?;
        agg.add(&report)?;
    }
    Ok(agg)
}

/// Quantile of sorted seconds.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

/// Runs `harmony submit`.
pub fn submit(a: SubmitArgs) -> Result<()> {
    let client = Client::new(&a.server);
    let config = client.config(&a.collection)?;
    if config.train.is_some() {
        return rounds::submit(&client, &config, &a.data, a.seed);
    }
    let schema = config.schema.clone();
    let table = data::read_csv(&a.data)?;
    let enc = data::encode(&table, &schema, data::InvalidPolicy::Error)
        .with_context(|| format!("encoding {} against collection {}'s schema", a.data.display(), a.collection))?;
    let mut st = submit_rows(&client, &config, &enc.values, a.concurrency, a.batch, a.seed)?;
    st.latencies.sort_by(f64::total_cmp);
    eprintln!(
        "submitted {} devices: {} stored, {} already stored; {:.2} s ({:.0} reports/s); batch latency p50 {:.1} ms, p99 {:.1} ms",
        enc.n,
        st.accepted,
        st.duplicates,
        st.seconds,
        enc.n as f64 / st.seconds,
        1e3 * quantile(&st.latencies, 0.5),
        1e3 * quantile(&st.latencies, 0.99)
    );
    Ok(())
}

/// Runs `harmony query`.
pub fn query(a: QueryArgs) -> Result<()> {
    let config = Client::new(&a.server).config(&a.collection)?;
    if config.train.is_some() {
        return rounds::query(&a, &config);
    }
    if a.data.is_some() || a.target.is_some() {
        anyhow::bail!(
            "invalid option: --data and --target score a training collection's model; {} has no training task",
            a.collection
        );
    }
    let est = Client::new(&a.server).with_token(&a.token).estimates(&a.collection)?;
    match a.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&est)?),
        Format::Table => print_estimates(&est, None),
    }
    Ok(())
}

/// Prints estimates as a table, with the truth beside them when given (one value per numeric
/// attribute, one per category).
pub fn print_estimates(est: &Estimates, truth: Option<&[Vec<f64>]>) {
    println!("collection {}: {} reports, {} at ε = {}", est.collection, est.reports, est.strategy, est.epsilon);
    println!("{:<34} {:>12} {:>10} {:>25} {:>12}", "attribute", "estimate", "std err", "95% CI", "truth");
    for (j, a) in est.attributes.iter().enumerate() {
        match a {
            AttributeResult::Numeric { name, estimate, std_error, ci95, .. } => {
                let t = truth.map(|t| format!("{:.4}", t[j][0])).unwrap_or_default();
                println!(
                    "{:<34} {:>12.4} {:>10.4} {:>25} {:>12}",
                    format!("{name} (mean)"),
                    estimate,
                    std_error,
                    format!("[{:.3}, {:.3}]", ci95[0], ci95[1]),
                    t
                );
            }
            AttributeResult::Categorical { name, categories } => {
                for (v, c) in categories.iter().enumerate() {
                    let t = truth.map(|t| format!("{:.4}", t[j][v])).unwrap_or_default();
                    let label: String = format!("{name}={}", c.label).chars().take(34).collect();
                    println!(
                        "{:<34} {:>12.4} {:>10.4} {:>25} {:>12}",
                        label,
                        c.estimate,
                        c.std_error,
                        format!("[{:.4}, {:.4}]", c.ci95[0], c.ci95[1]),
                        t
                    );
                }
            }
        }
    }
}

/// Largest absolute difference between two estimate sets (values and standard errors; the
/// report counts must agree, else infinity).
pub fn max_difference(a: &Estimates, b: &Estimates) -> f64 {
    if a.reports != b.reports || a.attributes.len() != b.attributes.len() {
        return f64::INFINITY;
    }
    let mut m: f64 = 0.0;
    for (x, y) in a.attributes.iter().zip(&b.attributes) {
        match (x, y) {
            (
                AttributeResult::Numeric { estimate: e1, std_error: s1, .. },
                AttributeResult::Numeric { estimate: e2, std_error: s2, .. },
            ) => m = m.max((e1 - e2).abs()).max((s1 - s2).abs()),
            (
                AttributeResult::Categorical { categories: c1, .. },
                AttributeResult::Categorical { categories: c2, .. },
            ) => {
                for (p, q) in c1.iter().zip(c2) {
                    m = m.max((p.estimate - q.estimate).abs()).max((p.std_error - q.std_error).abs());
                }
            }
            _ => return f64::INFINITY,
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    /// End to end on loopback: Adult through `harmony submit` (seeded devices) gives the
    /// estimates of the in-process aggregation of the same reports, and 95% CIs that cover the
    /// truth at the nominal rate.
    #[test]
    fn adult_submit_matches_in_process_and_covers_truth() {
        let dir = std::env::temp_dir().join(format!("harmony-cli-e2e-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let store = harmony_server::open_store(&format!("sqlite://{}", dir.join("e2e.db").display())).unwrap();
        let server = harmony_server::spawn(store, "tok", "127.0.0.1:0", 2).unwrap();
        let analyst = Client::new(&server.url()).with_token("tok");
        let data_path = data::bundled("data/adult.csv");
        let table = data::read_csv(&data_path).unwrap();
        for (strategy, concurrency) in [("sample-k", 1), ("harmony", 4)] {
            let req = create_request(&data::bundled("examples/adult.toml"), 2.0, strategy).unwrap();
            let created = analyst.create_collection(&req).unwrap();
            submit(SubmitArgs {
                server: server.url(),
                collection: created.id.clone(),
                data: data_path.clone(),
                concurrency,
                batch: 1000,
                seed: Some(11),
            })
            .unwrap();
            let est = analyst.estimates(&created.id).unwrap();
            let enc = data::encode(&table, &created.config.schema, data::InvalidPolicy::Error).unwrap();
            assert_eq!(est.reports, 48_842);
            let mech = harmony_client::mechanism(&created.config).unwrap();
            let agg = in_process(&mech, &enc.values, 11).unwrap();
            let local = Estimates::from_core(&created.id, agg.count(), mech.options(), mech.schema(), &agg.estimates());
            // Through the same JSON text as the server's answer (serde_json's float parsing is
            // not always correctly rounded, so compare like with like).
            let local: Estimates = serde_json::from_str(&serde_json::to_string(&local).unwrap()).unwrap();
            let diff = max_difference(&local, &est);
            // Bit-identical whatever the order: the aggregators keep exact integer sums, so
            // concurrent batches (another arrival order) change nothing.
            assert_eq!(diff, 0.0, "{strategy}, concurrency {concurrency}");
            let truth = demo::truth(mech.schema(), &enc.values);
            let (covered, cells) = demo::coverage(&est, &truth);
            // 110 cells at 95%: mean 104.5, sd 2.3; fewer than 97 is > 3 sd below.
            assert!(covered as f64 >= 0.88 * cells as f64, "{strategy}: {covered}/{cells} CIs cover the truth");
        }
        server.stop();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
