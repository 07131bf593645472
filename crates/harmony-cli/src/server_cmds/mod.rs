//! Server commands: `serve`, `collection create`, `submit`, `query`, `demo`, `load` (the
//! ingest load generator), `export` and `aggregate`. Every task goes through the same three steps: the spec built from
//! the same options as `harmony simulate --task X` ([`crate::specs`]), devices randomizing
//! through the client SDK ([`submit`]), and the task's estimate document ([`crate::render`]).

pub mod answers;
pub mod archive;
pub mod dashboard;
pub mod demo;
pub mod export;
pub mod failover;
pub mod guide;
pub mod load;
mod printable;
pub mod rounds;
pub mod sent;
pub mod submit;
mod token_policy;
pub mod tokens;
pub mod windows;

use crate::data::SchemaFile;
use crate::output::Format;
use crate::render::{self, Truth};
use crate::simulate_tasks::TaskArgs;
use crate::specs::MeansArgs;
use anyhow::{Context, Result, anyhow, bail};
use clap::{Args, Subcommand};
use harmony_analytics::heavy::ItemCodec;
use harmony_client::budget::{self, Clock};
use harmony_client::policy::delta_of;
use harmony_client::{Client, FileLedger, Policy, SystemClock};
use harmony_protocol::estimates::{EstimateDocument, Query};
use harmony_protocol::spec::{HeavyHittersSpec, ItemEncoding};
use harmony_protocol::{CollectionConfig, CreateCollection, Created, to_hex};
use std::path::{Path, PathBuf};

/// `harmony serve`.
#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Storage: `sqlite://PATH` (embedded) or `postgres://user@host:port/db`.
    #[arg(long, default_value = "sqlite://harmony.db")]
    pub db: String,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: String,
    /// The admin token: creates collections, mints and revokes per-collection analyst tokens,
    /// reads everything (else `HARMONY_ADMIN_TOKEN`, else `HARMONY_ANALYST_TOKEN`; the old
    /// spelling `--analyst-token` still works).
    #[arg(long = "admin-token", alias = "analyst-token", env = "HARMONY_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<String>,
    /// A token that reads `/metrics` only (else `HARMONY_METRICS_TOKEN`; the admin token also
    /// reads it).
    #[arg(long, env = "HARMONY_METRICS_TOKEN", hide_env_values = true)]
    pub metrics_token: Option<String>,
    /// Log level on stderr: error, warn, info or debug (debug logs every batch).
    #[arg(long, default_value = "info")]
    pub log_level: String,
    /// Seconds a request's headers may take (also the idle time of a kept-alive connection).
    #[arg(long, default_value_t = 10.0)]
    pub header_timeout: f64,
    /// Seconds a request's body may take (a deadline; 408 after it).
    #[arg(long, default_value_t = 30.0)]
    pub body_timeout: f64,
    /// Seconds a request may take in all (503 after it; started work still finishes).
    #[arg(long, default_value_t = 60.0)]
    pub request_timeout: f64,
    /// Most open connections (more are answered 503 and closed).
    #[arg(long, default_value_t = 1024)]
    pub max_connections: usize,
    /// Most requests served at once (more are answered 503 with Retry-After).
    #[arg(long, default_value_t = 256)]
    pub max_in_flight: usize,
    /// Most request-body MiB received or held at once (more are answered 503 with Retry-After).
    #[arg(long, default_value_t = 256)]
    pub max_body_mib_in_flight: usize,
    /// Seconds SIGTERM/SIGINT waits for in-flight requests before exiting.
    #[arg(long, default_value_t = 30.0)]
    pub drain_timeout: f64,
    /// Also append every newly stored report to Parquet segments under DIR, in `harmony export`'s
    /// layout (`DIR/collection=ID/day=…/part-N.parquet`, spec.json): an append-only archive that
    /// DataFusion, Spark and `harmony aggregate` read (docs/EXPORT.md).
    #[arg(long, value_name = "DIR")]
    pub archive: Option<PathBuf>,
    /// Also serve the user guide under /docs/: DIR is the guide `mdbook build book` built
    /// (`book/book`).
    #[arg(long, value_name = "DIR")]
    pub guide: Option<PathBuf>,
    /// `--archive`: close a collection's segment after this many reports.
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub archive_segment_reports: u64,
    /// `--archive`: close a collection's segment this many seconds after it opened (checked as
    /// reports arrive; every open segment closes when the server stops).
    #[arg(long, default_value_t = 300.0)]
    pub archive_segment_seconds: f64,
    /// Serve HTTPS: the certificate chain (PEM, leaf first); needs `--tls-key`.
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// Serve HTTPS: the private key (PEM: PKCS#8, PKCS#1 or SEC1) of `--tls-cert`.
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// PostgreSQL with `sslmode=prefer|require`: also trust these CA certificates (PEM) besides
    /// the system's (else `HARMONY_DB_CA_CERT`; the URL's `sslrootcert=PATH` also works).
    #[arg(long, env = "HARMONY_DB_CA_CERT")]
    pub db_ca_cert: Option<PathBuf>,
    /// Demos and tests: a report batch that carries the admin token may set its received day
    /// with a `Harmony-Received-At` header (`harmony submit --days`); off by default.
    #[arg(long, conflicts_with = "archive")]
    pub accept_backdated: bool,
}

impl ServeArgs {
    /// The server's timeouts and caps; errors name the option.
    pub fn limits(&self) -> Result<harmony_server::Limits> {
        let secs = |name: &str, v: f64| -> Result<std::time::Duration> {
            if !(v.is_finite() && v > 0.0 && v <= 86_400.0) {
                bail!("--{name} is {v}, expected seconds in (0, 86400]");
            }
            Ok(std::time::Duration::from_secs_f64(v))
        };
        let count = |name: &str, v: usize| -> Result<usize> {
            if v == 0 || v > 1 << 20 {
                bail!("--{name} is {v}, expected an integer in 1..=1048576");
            }
            Ok(v)
        };
        Ok(harmony_server::Limits {
            header_timeout: secs("header-timeout", self.header_timeout)?,
            body_timeout: secs("body-timeout", self.body_timeout)?,
            request_timeout: secs("request-timeout", self.request_timeout)?,
            max_connections: count("max-connections", self.max_connections)?,
            max_in_flight: count("max-in-flight", self.max_in_flight)?,
            max_body_bytes_in_flight: count("max-body-mib-in-flight", self.max_body_mib_in_flight)? << 20,
            drain_timeout: secs("drain-timeout", self.drain_timeout)?,
            ..harmony_server::Limits::default()
        })
    }
}

/// `--ca-cert` of every command that talks to a server.
#[derive(Args, Debug, Clone, Default)]
pub struct CaCert {
    /// An `https://` server's CA certificate (PEM), trusted besides the system's roots (else
    /// `HARMONY_CA_CERT`).
    #[arg(long = "ca-cert", env = "HARMONY_CA_CERT")]
    pub path: Option<PathBuf>,
}

impl CaCert {
    /// A client for `server` trusting this CA.
    pub fn client(&self, server: &str) -> Result<Client> {
        let client = Client::new(server);
        Ok(match &self.path {
            Some(p) => client.with_ca_cert(p).context("--ca-cert")?,
            None => client,
        })
    }
}

/// `--token` of every command that talks to a server: the admin token, or a collection's
/// analyst token where one is enough.
#[derive(Args, Debug, Clone, Default)]
pub struct Token {
    /// The admin token, or a collection's analyst token where one is enough (else
    /// `HARMONY_ADMIN_TOKEN`, the variable `harmony serve` reads, else `HARMONY_ANALYST_TOKEN`).
    #[arg(long = "token", value_name = "TOKEN")]
    value: Option<String>,
}

impl Token {
    /// The environment variables read when `--token` is absent, in order.
    pub const ENV: [&str; 2] = ["HARMONY_ADMIN_TOKEN", "HARMONY_ANALYST_TOKEN"];

    /// `--token`, else the first of [`Token::ENV`] that is set and not empty; `None` when none is.
    pub fn get(&self) -> Option<String> {
        self.value.clone().or_else(|| Self::ENV.iter().find_map(|v| std::env::var(v).ok().filter(|t| !t.is_empty())))
    }

    /// [`Token::get`], or an error naming where a token is read from.
    pub fn required(&self) -> Result<String> {
        self.get().ok_or_else(|| {
            anyhow::anyhow!(
                "no token: pass --token, or set HARMONY_ADMIN_TOKEN (the admin token `harmony serve` was \
                 given) or HARMONY_ANALYST_TOKEN (a collection's analyst token)"
            )
        })
    }
}

impl From<&str> for Token {
    fn from(t: &str) -> Self {
        Token { value: Some(t.to_string()) }
    }
}

/// `harmony collection …`.
// Parsed once per process: the size difference between variants costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
pub enum CollectionCommand {
    /// Create a collection; prints its id on stdout.
    Create(CreateArgs),
    /// List the collections a token reads (the admin token: all), with their report counts.
    List(tokens::ListArgs),
    /// Per-collection analyst tokens (admin token): create, list, revoke.
    #[command(subcommand)]
    Token(tokens::TokenCommand),
    /// `adaptive-rounds` linear queries: open the next round with its query (admin token or
    /// the collection's analyst token); prints the round.
    Ask(answers::AskArgs),
}

/// `harmony collection create`: the options of `harmony simulate --task X`, one value each.
#[derive(Args, Debug)]
pub struct CreateArgs {
    /// Server URL, e.g. http://127.0.0.1:8080.
    #[arg(long)]
    pub server: String,
    #[command(flatten)]
    pub ca: CaCert,
    #[command(flatten)]
    pub token: Token,
    /// Schema file (TOML, as `harmony simulate --schema`); not needed by `--task heavy-hitters`
    /// (its items are strings; with a schema, `submit --column '*'` reads its attributes).
    #[arg(long)]
    pub schema: Option<PathBuf>,
    /// Privacy budget of one device's report (a record, or a gradient with --task train).
    #[arg(long, allow_negative_numbers = true)]
    pub epsilon: f64,
    /// A short name the collection list and the dashboard show (1 to 128 characters).
    #[arg(long)]
    pub name: Option<String>,
    /// A longer description (up to 2,000 characters).
    #[arg(long)]
    pub description: Option<String>,
    /// The bucket period of continuous collection (the server's default: day): the finest
    /// window `harmony query --from/--to/--series/--compare` can ask for (docs/CONTINUOUS.md).
    #[arg(long, value_parser = ["hour", "day", "week"])]
    pub period: Option<String>,
    /// Ask each device for one report per period (`--period`, default day), each charged to the
    /// device's budget: devices whose policy has no budget refuse it (docs/CONTINUOUS.md).
    #[arg(long)]
    pub recurring: bool,
    /// The record strategy and mechanisms (`--task means`, `--task frequency`).
    #[command(flatten)]
    pub means: MeansArgs,
    /// The task and its options.
    #[command(flatten)]
    pub task: TaskArgs,
}

/// `harmony submit`.
#[derive(Args, Debug, Default)]
pub struct SubmitArgs {
    /// Server URL.
    #[arg(long)]
    pub server: String,
    #[command(flatten)]
    pub ca: CaCert,
    /// Collection id.
    #[arg(long)]
    pub collection: String,
    /// Data (CSV, .csv.xz, Parquet or Arrow IPC): one device per row.
    #[arg(long)]
    pub data: PathBuf,
    /// Concurrent connections (a training collection's rounds are sequential).
    #[arg(long, default_value_t = 4)]
    pub concurrency: usize,
    /// Devices per HTTP batch.
    #[arg(long, default_value_t = 1000)]
    pub batch: usize,
    /// Experiments on loopback only: device i randomizes as `harmony simulate --seed S`'s
    /// device i and sends the same report id each run (a repeat is stored once); else the OS
    /// CSPRNG, as a real device does.
    #[arg(long, requires = "seed")]
    pub simulate_devices: bool,
    /// The seed of `--simulate-devices` (and only with it).
    #[arg(long, requires = "simulate_devices")]
    pub seed: Option<u64>,
    /// Heavy hitters: the column holding each device's item (`*`: its `attribute=value` items).
    #[arg(long, conflicts_with = "transactions")]
    pub column: Option<String>,
    /// Enrolled devices' keys (`harmony collection token enroll --out`): row i posts as key i.
    #[arg(long)]
    pub device_keys: Option<PathBuf>,
    /// Heavy hitters: `--data` holds one device's set of items per line.
    #[arg(long)]
    pub transactions: bool,
    /// Heavy hitters: the item separator of a transactions file (default ',').
    #[arg(long)]
    pub separator: Option<char>,
    /// The largest ε a collection may ask of a device (default 10); more is refused.
    #[arg(long, help_heading = "Device policy (checked before any randomization)")]
    pub max_epsilon: Option<f64>,
    /// At most ε E over any DAYS days across collections (`E/DAYS`), charged to --budget-ledger.
    #[arg(long, help_heading = "Device policy (checked before any randomization)")]
    pub budget: Option<String>,
    /// A policy file (TOML; docs/THREAT-MODEL.md); default: ε ≤ 10, pure ε-LDP, no budget.
    #[arg(long, help_heading = "Device policy (checked before any randomization)")]
    pub policy: Option<PathBuf>,
    /// The budget ledger; beside it, harmony-submitted.json records the files already sent.
    #[arg(
        long,
        default_value = "harmony-budget.json",
        help_heading = "Device policy (checked before any randomization)"
    )]
    pub budget_ledger: PathBuf,
    /// A row with a cell the schema refuses: stop (error) or leave it out (default: --schema's).
    #[arg(long, value_parser = ["error", "skip"])]
    pub invalid: Option<String>,
    /// The collection's schema file, for its `invalid`, `missing_tokens` and `[units]`.
    #[arg(long)]
    pub schema: Option<PathBuf>,
    /// Send a file again to a collection it was already submitted to (its rows report twice).
    #[arg(long)]
    pub force: bool,
    /// Demos, tests (`serve --accept-backdated`, admin --token): the devices over N periods to now.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1000), conflicts_with = "received_at")]
    pub days: Option<u32>,
    /// --days: the last period is the one holding DATE.
    #[arg(long, value_name = "DATE", requires = "days")]
    pub until: Option<String>,
    /// As --days: all received at WHEN (a date, a UTC timestamp, Unix seconds).
    #[arg(long, value_name = "WHEN")]
    pub received_at: Option<String>,
    #[command(flatten)]
    pub token: Token,
}

/// `harmony query`.
#[derive(Args, Debug)]
pub struct QueryArgs {
    /// Server URL.
    #[arg(long)]
    pub server: String,
    #[command(flatten)]
    pub ca: CaCert,
    #[command(flatten)]
    pub token: Token,
    /// Collection id.
    #[arg(long)]
    pub collection: String,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// The devices' data (CSV, .csv.xz, Parquet or Arrow IPC): the truth printed beside the
    /// estimates (a training collection: the model scored on it).
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// Training collection: the target column of `--data` (must be the collection's target,
    /// which is the default).
    #[arg(long)]
    pub target: Option<String>,
    /// Range collections: ranges [LO, HI) in the attribute's units, `LO:HI` comma-separated.
    #[arg(long, value_delimiter = ',', allow_negative_numbers = true)]
    pub ranges: Option<Vec<String>>,
    /// Range collections: quantile levels (default 0.1,0.5,0.9).
    #[arg(long, value_delimiter = ',', allow_negative_numbers = true)]
    pub quantiles: Option<Vec<f64>>,
    /// Range2d collections: rectangles [X1, X2) × [Y1, Y2) in the attributes' units,
    /// `X1:X2:Y1:Y2` comma-separated.
    #[arg(long, value_delimiter = ',', allow_negative_numbers = true)]
    pub rects: Option<Vec<String>>,
    /// Heavy-hitters collections: the column of `--data` holding the devices' items (`*`: every
    /// attribute as `attribute=value`), for the true frequencies.
    #[arg(long)]
    pub column: Option<String>,
    /// Continuous collection: a time window, a series or a comparison.
    #[command(flatten)]
    pub window: windows::WindowArgs,
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
    let limits = args.limits()?;
    tracing_subscriber::fmt().with_max_level(level).with_writer(std::io::stderr).with_ansi(false).init();
    let given = args.admin_token.or_else(|| std::env::var("HARMONY_ANALYST_TOKEN").ok());
    let token = match given {
        Some(t) if !t.is_empty() => t,
        _ => {
            let t = random_token();
            eprintln!("note: no --admin-token or HARMONY_ADMIN_TOKEN; generated admin token: {t}");
            t
        }
    };
    let metrics = args.metrics_token.filter(|t| !t.is_empty());
    if metrics.as_deref() == Some(token.as_str()) {
        bail!("--metrics-token is the admin token: give /metrics its own token, or none (the admin token reads it)");
    }
    token_policy::check(&args.listen, &token, metrics.as_deref())?;
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(harmony_server::tls::server_config(cert, key).map_err(|e| anyhow!(e))?),
        _ => None,
    };
    let mut store = harmony_server::open_store_with(&args.db, args.db_ca_cert.as_deref()).map_err(|e| anyhow!(e))?;
    if let Some(dir) = args.archive.clone() {
        if !(args.archive_segment_seconds.is_finite() && args.archive_segment_seconds > 0.0) {
            bail!("--archive-segment-seconds is {}, expected a number of seconds > 0", args.archive_segment_seconds);
        }
        let age = std::time::Duration::from_secs_f64(args.archive_segment_seconds);
        let rolling = archive::Rolling { reports: args.archive_segment_reports, age };
        store = std::sync::Arc::new(archive::ArchivingStore::new(store, dir, rolling));
    }
    let guide = args.guide.as_deref().map(guide::check).transpose()?;
    let state = harmony_server::AppState::with_tokens(store, &token, metrics.as_deref()).map_err(|e| anyhow!(e))?;
    if let Some(url) = dashboard::url(&args.listen, tls.is_some()) {
        eprintln!("dashboard: {url} (sign in with the admin token)");
        if guide.is_some() {
            eprintln!("user guide: {}", url.replace("/dashboard/", "/docs/"));
        }
    }
    if args.accept_backdated {
        eprintln!(
            "note: --accept-backdated: batches with the admin token may set their received day (demos and tests)"
        );
    }
    let backdated = args.accept_backdated;
    let routes = move |r| {
        let r = match guide {
            Some(dir) => guide::routes(dashboard::routes(r), dir),
            None => dashboard::routes(r),
        };
        if backdated { harmony_server::api::reports::accept_backdated(r) } else { r }
    };
    harmony_server::serve_state_forever_extended(state, &args.listen, &limits, tls, routes).map_err(|e| anyhow!(e))
}

/// 128 bits from the OS CSPRNG, hex.
pub fn random_token() -> String {
    let mut b = [0u8; 16];
    rand::Rng::fill_bytes(&mut harmony_core::sampling::secure_rng(), &mut b);
    to_hex(&b)
}

/// Runs `harmony collection …`.
pub fn collection(cmd: CollectionCommand) -> Result<()> {
    match cmd {
        CollectionCommand::Create(a) => {
            let created = create(&a)?;
            println!("{}", created.id);
            Ok(())
        }
        CollectionCommand::List(a) => tokens::list_collections(&a),
        CollectionCommand::Token(c) => tokens::run(c),
        CollectionCommand::Ask(a) => answers::ask(&a),
    }
}

/// Creates the collection `a` describes (the spec `harmony simulate` builds from the same options).
pub fn create(a: &CreateArgs) -> Result<Created> {
    let file = a.schema.as_deref().map(SchemaFile::load).transpose()?;
    let (schema, task) = crate::specs::single(&a.task, &a.means, file.as_ref(), a.epsilon)?;
    if let Some(w) = submit::epsilon_warning(a.epsilon) {
        eprintln!("warning: {w}");
    }
    let req = CreateCollection { schema, epsilon: a.epsilon, task };
    let req = harmony_protocol::NewCollection::new(req, a.name.clone(), a.description.clone());
    let client = a.ca.client(&a.server)?.with_token(&a.token.required()?);
    client.create_recurring(&req, a.period.as_deref(), a.recurring).map_err(rounds::option_error)
}

/// Whether a server URL's host is loopback (`localhost`, 127.0.0.0/8, `::1`).
pub fn is_loopback(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let authority = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => authority.split(':').next().unwrap_or(""),
    };
    host.eq_ignore_ascii_case("localhost") || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Quantile of sorted seconds.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

/// Runs `harmony submit`: every row is a device randomizing through the client SDK.
pub fn submit(a: SubmitArgs) -> Result<()> {
    if a.simulate_devices && !is_loopback(&a.server) {
        bail!(
            "--simulate-devices is for experiments on a loopback server (127.0.0.1, ::1, localhost), not {}: real devices randomize with the OS CSPRNG",
            a.server
        );
    }
    let policy = policy_of(a.policy.as_deref(), a.max_epsilon, a.budget.as_deref())?;
    let mut client = a.ca.client(&a.server)?;
    if a.days.is_some() || a.received_at.is_some() {
        client = client.with_token(&a.token.required()?);
    }
    let config = client.config(&a.collection)?;
    let dating = submit::dating(&client, &config, a.days, a.until.as_deref(), a.received_at.as_deref())?;
    // The policy's checks of the config and of the mechanisms its task runs, before any charge.
    harmony_client::DeviceTask::with_policy(config.clone(), policy.clone())?;
    if config.task.enrollment() && a.device_keys.is_none() {
        bail!(
            "collection {id} takes enrolled devices only: mint their keys with `harmony collection token enroll --collection {id} --count N --out keys.csv` and pass --device-keys keys.csv (a collection created with --no-enrollment is open to any device id)",
            id = a.collection
        );
    }
    if let Some(b) = &policy.budget {
        // The devices of this file spend the collection's ε once: charged (keyed by the id
        // asked for, which `Client::config` verified) before any of them randomizes.
        // A run re-randomizes every row (new report ids): a second run to a collection would
        // make each device report twice, so it is refused.
        // One update of the ledger file, under its lock: two runs never both pass the check.
        let mut ledger = FileLedger::open(&a.budget_ledger)?;
        let cost = budget::Cost { epsilon: config.epsilon, delta: delta_of(&config).unwrap_or(0.0) };
        budget::charge(&mut ledger, Some(b), &a.collection, cost, SystemClock.now())
            .map_err(|e| match e {
                harmony_client::ClientError::Policy { rule, .. } if rule == "ledger" => anyhow::anyhow!(
                    "the devices of --budget-ledger {} already reported to collection {}: a second run would randomize every row again",
                    a.budget_ledger.display(),
                    a.collection
                ),
                e => e.into(),
            })
            .with_context(|| format!("--budget-ledger {}", a.budget_ledger.display()))?;
    }
    let record = match a.simulate_devices || config.task.answers_in_rounds() {
        // Simulated devices resend the same report ids: the server stores them once. A run of
        // adaptive rounds answers the open round with the file's next devices, so the file is
        // meant to be sent once per round.
        true => None,
        false => sent::digest(&a.data)?.map(|sha| (sent::path_beside(&a.budget_ledger), sha)),
    };
    if let Some((path, sha)) = &record {
        sent::check(&sent::Record::open(path)?, path, &a.collection, sha, a.force)?;
    }
    let seed = a.simulate_devices.then_some(a.seed).flatten();
    let items = match (&a.column, a.transactions) {
        (Some(c), _) => Some(crate::items::Source::Column(c.clone())),
        (None, true) => Some(crate::items::Source::Transactions(a.data.clone(), a.separator.unwrap_or(','))),
        (None, false) => None,
    };
    let (population, skipped) = read_submission(&a, &config, items.as_ref())?;
    let result = match &dating {
        Some(d) => {
            let sending = submit::Sending { concurrency: a.concurrency, batch: a.batch, seed, policy: &policy };
            submit::submit_dated(&client, &config, &population, &sending, &d.parts(population.len()))
        }
        None => send_devices(&a, &client, &config, &population, seed, &policy, skipped),
    };
    if let (Ok(()), Some((path, sha))) = (&result, record) {
        let entry = sent::Sent {
            collection: a.collection.clone(),
            sha256: sha,
            file: a.data.display().to_string(),
            devices: population.len(),
            at: sent::now_iso(),
        };
        sent::Record::open(&path)?.add(&path, entry)?;
    }
    result
}

/// The devices of `--data` for `config`, read with `--invalid` (else `--schema`'s policy), and
/// the rows skipped (a note on stderr when any).
fn read_submission(
    a: &SubmitArgs,
    config: &CollectionConfig,
    items: Option<&crate::items::Source>,
) -> Result<(crate::population::Population, usize)> {
    let file = a.schema.as_deref().map(SchemaFile::load).transpose()?;
    let invalid = match a.invalid.as_deref() {
        Some("skip") => crate::data::InvalidPolicy::Skip,
        Some(_) => crate::data::InvalidPolicy::Error,
        None => file.as_ref().map_or(crate::data::InvalidPolicy::Error, |f| f.invalid),
    };
    let options = submit::read_options(config, file.as_ref(), invalid)?;
    let (population, skipped) = submit::read_devices(config, &a.data, items, &options)?;
    if skipped > 0 {
        eprintln!("note: {skipped} rows of {} skipped (a cell the schema refuses; --invalid skip)", a.data.display());
    }
    Ok((population, skipped))
}

/// Sends every device's report: by rounds, answers or batches as the collection's task asks.
fn send_devices(
    a: &SubmitArgs,
    client: &Client,
    config: &CollectionConfig,
    population: &crate::population::Population,
    seed: Option<u64>,
    policy: &Policy,
    skipped: usize,
) -> Result<()> {
    if config.task.answers_in_rounds() {
        let keys = a.device_keys.as_deref().map(rounds::read_device_keys).transpose()?;
        return answers::submit(client, config, population, seed, policy, keys.as_deref());
    }
    if config.task.kind().has_rounds() {
        let keys = a.device_keys.as_deref().map(rounds::read_device_keys).transpose()?;
        return rounds::submit(client, config, population, seed, policy, keys.as_deref());
    }
    let mut st = submit::submit(client, config, population, a.concurrency, a.batch, seed, policy)?;
    st.latencies.sort_by(f64::total_cmp);
    let n = population.len();
    eprintln!(
        "submitted {n} devices: {} stored, {} already stored, {skipped} rows skipped; {:.2} s ({:.0} reports/s); batch latency p50 {:.1} ms, p99 {:.1} ms",
        st.accepted,
        st.duplicates,
        st.seconds,
        n as f64 / st.seconds,
        1e3 * quantile(&st.latencies, 0.5),
        1e3 * quantile(&st.latencies, 0.99)
    );
    Ok(())
}

/// The devices' policy: `file` (TOML, else the default policy), then `--max-epsilon` and
/// `--budget` over it.
pub fn policy_of(file: Option<&Path>, max_epsilon: Option<f64>, budget: Option<&str>) -> Result<Policy> {
    let mut policy = match file {
        Some(p) => {
            let text = std::fs::read_to_string(p).with_context(|| format!("--policy {}", p.display()))?;
            toml::from_str::<Policy>(&text).with_context(|| format!("--policy {}", p.display()))?
        }
        None => Policy::default(),
    };
    if let Some(e) = max_epsilon {
        policy.max_epsilon = e;
    }
    if let Some(b) = budget {
        policy.budget = Some(b.parse().context("--budget")?);
    }
    policy.check_self()?;
    Ok(policy)
}

/// The query of `--ranges`, `--quantiles` and `--rects`.
fn query_of(a: &QueryArgs) -> Result<Query> {
    crate::specs::range_query(a.ranges.as_deref(), a.quantiles.as_deref(), a.rects.as_deref())
}

/// The truth of a document's task on the devices' data (heavy hitters: the items of `column`).
pub fn truth(
    config: &CollectionConfig,
    path: &Path,
    column: Option<&str>,
    doc: &EstimateDocument,
) -> Result<Option<Truth>> {
    if let Ok(h) = <&HeavyHittersSpec>::try_from(&config.task) {
        let Some(c) = column else { return Ok(None) };
        let source = crate::items::Source::Column(c.to_string());
        let star = config.schema.as_ref().map(|s| s.attributes().iter().map(|a| a.name().to_string()).collect());
        let sets = crate::items::read(&source, path, star)?;
        let bits = h.bits.unwrap_or(harmony_tasks::heavy::DEFAULT_BITS);
        let codec = match h.items {
            ItemEncoding::Hash => ItemCodec::hashed(bits)?,
            ItemEncoding::Id => ItemCodec::ids(bits)?,
        };
        let k = h.top.unwrap_or(harmony_tasks::heavy::DEFAULT_TOP).min(sets.names.len());
        return Ok(Some(crate::simulate_tasks::heavy::true_top(&sets, &codec, k)?.1));
    }
    // The truth of the rows devices could send: a row with a bad cell in a column the task
    // reads is left out, as `submit --invalid skip` leaves it out.
    let options = submit::read_options(config, None, crate::data::InvalidPolicy::Skip)?;
    let population = submit::read_devices(config, path, None, &options)?.0;
    Ok(harmony_tasks::text::truth_of_rows(config, doc, population.values(), &population.inputs())?)
}

/// Runs `harmony query`: the collection's estimate document (with the truth of `--data`).
pub fn query(a: QueryArgs) -> Result<()> {
    let client = a.ca.client(&a.server)?.with_token(&a.token.required()?);
    let config = client.config(&a.collection)?;
    if config.task.kind().has_rounds() {
        return rounds::query(&a, &config);
    }
    if a.target.is_some() {
        anyhow::bail!("invalid option: --target scores a training collection's model; {} has none", a.collection);
    }
    if a.window.any() {
        return windows::query(&client, &a, &query_of(&a)?);
    }
    let doc = client.estimates(&a.collection, &query_of(&a)?)?;
    let truth = match &a.data {
        Some(p) => truth(&config, p, a.column.as_deref(), &doc)?,
        None => None,
    };
    match a.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&doc)?),
        Format::Table => render::print(&printable::doc(&doc), truth.as_ref()),
    }
    Ok(())
}
