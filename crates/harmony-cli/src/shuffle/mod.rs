//! `harmony shuffle`: a relay between devices and a collection server for the shuffle model
//! (docs/SHUFFLE.md).
//!
//! Devices post the server's own `POST /v1/collections/{id}/reports` to the relay. It checks
//! every report against the collection's config (fetched from the upstream once and served
//! unchanged to every device while reports of the collection are buffered, [`configs`]), keeps
//! only each report's bytes (re-encoded as lowercase hex) under a fresh random id, buffers them
//! durably (fsynced before the device is acknowledged), and once at least `--min-batch` are
//! buffered for a collection takes all of them as one round, permutes them uniformly
//! (Fisher–Yates with a ChaCha20 CSPRNG seeded from the OS) and forwards them upstream in
//! batches, deleting each batch only after the upstream acknowledged it ([`forward`]). Device
//! ids, tokens, addresses and arrival times are never forwarded. Devices read
//! `GET /v1/collections/{id}/config` from the relay, so they need only its address (they check
//! the config against their own policy as they would the server's). The relay runs behind the
//! server's own accept loop and limits (timeouts, caps, JSON-only bodies, drain on SIGTERM).

mod buffer;
mod configs;
mod forward;

use anyhow::{Context, Result, bail};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use buffer::{Buffer, Item, Offer};
use clap::Args;
use configs::{Configs, Pinned};
use harmony_client::{Client, RetryPolicy};
use harmony_core::sampling::secure_rng;
use harmony_protocol::{BatchAck, MAX_BATCH, MAX_REPORT_BYTES, ReportBatch, ReportItem};
use harmony_protocol::{from_hex_into, to_hex, valid_report_id};
use harmony_server::ApiError;
use harmony_server::tokens::TokenHash;
use rand::RngExt;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// Options of `harmony shuffle`.
#[derive(Args, Debug)]
pub struct ShuffleArgs {
    /// Address devices post to.
    #[arg(long, default_value = "127.0.0.1:8081")]
    pub listen: String,
    /// The collection server's base URL (`http://host:port`).
    #[arg(long)]
    pub upstream: String,
    /// The relay's bearer token for the upstream (else `HARMONY_UPSTREAM_TOKEN`; none: the
    /// upstream's report endpoint is open).
    #[arg(long, env = "HARMONY_UPSTREAM_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// A bearer token devices must present to the relay (else `HARMONY_RELAY_TOKEN`; none: open).
    /// It is checked here and never forwarded.
    #[arg(long, env = "HARMONY_RELAY_TOKEN", hide_env_values = true)]
    pub device_token: Option<String>,
    /// Reports of one collection to buffer before a round is shuffled and forwarded (the n of
    /// `harmony plan --shuffle`: every round has at least this many).
    #[arg(long)]
    pub min_batch: u64,
    /// Directory of the durable buffer (`buffer.sqlite`).
    #[arg(long)]
    pub buffer: PathBuf,
    /// Most buffered report MiB (hex); devices get 503 beyond it until a round is forwarded.
    #[arg(long, default_value_t = 1024)]
    pub max_buffer_mib: u64,
    /// Seconds a collection's config, fetched once, is served before it is fetched again (only
    /// once nothing of the collection is buffered: a round's devices all read one config).
    #[arg(long, default_value_t = 600)]
    pub config_ttl_secs: u64,
    /// Seconds a collection's reports may wait below --min-batch before they are dropped
    /// (never forwarded in a smaller round; a full buffer cannot stay full).
    #[arg(long, default_value_t = 86_400)]
    pub group_ttl_secs: u64,
    /// Seconds a device id is remembered after its report (a retry within it is counted once;
    /// after it, the id is forgotten and a resend would be counted again).
    #[arg(long, default_value_t = 86_400)]
    pub seen_ttl_secs: u64,
    /// Most device ids remembered (the oldest are forgotten first beyond it): the `seen` table
    /// stays bounded however many ids are posted within --seen-ttl-secs.
    #[arg(long, default_value_t = 1_000_000)]
    pub max_seen: u64,
    /// Forward everything buffered now, whatever its size, then exit (ends a collection: the
    /// last round may be smaller than --min-batch, and so less amplified).
    #[arg(long)]
    pub flush: bool,
}

/// Reports and hex bytes buffered, in total and per collection.
#[derive(Default)]
pub(crate) struct Sizes {
    reports: u64,
    bytes: u64,
    per: HashMap<String, u64>,
}

/// State shared by the HTTP handlers and the forwarder.
pub(crate) struct Relay {
    buffer: Mutex<Buffer>,
    size: Mutex<Sizes>,
    wake: Condvar,
    max_bytes: u64,
    group_ttl: Duration,
    /// How long, and how many, device ids are remembered.
    seen_ttl: Duration,
    max_seen: u64,
    /// SHA-256 of the devices' token (compared in constant time).
    device_token: Option<TokenHash>,
    configs: Arc<Configs>,
}

impl Relay {
    /// Accounts for reports that left the buffer.
    fn release(&self, collection: &str, reports: u64, bytes: u64) {
        let mut size = self.size.lock().expect("size lock");
        size.reports = size.reports.saturating_sub(reports);
        size.bytes = size.bytes.saturating_sub(bytes);
        if let Some(n) = size.per.get_mut(collection) {
            *n = n.saturating_sub(reports);
            if *n == 0 {
                size.per.remove(collection);
            }
        }
    }

    /// Whether reports of `collection` are buffered.
    fn buffered(&self, collection: &str) -> bool {
        self.size.lock().expect("size lock").per.contains_key(collection)
    }

    /// Drops groups that waited below `min_batch` for longer than the group TTL, and forgets
    /// device ids older than the seen TTL or beyond the most remembered.
    fn expire(&self, min_batch: u64) -> Result<()> {
        let now = unix_now();
        let before = |ttl: Duration| now.saturating_sub(ttl.as_secs().min(i64::MAX as u64) as i64);
        let mut buffer = self.buffer.lock().expect("buffer lock");
        buffer.forget_seen(before(self.seen_ttl), self.max_seen)?;
        let dropped = buffer.expire(before(self.group_ttl), min_batch)?;
        drop(buffer);
        for (c, n, bytes) in dropped {
            eprintln!(
                "harmony shuffle: dropped {n} reports of collection {c}: fewer than --min-batch after --group-ttl-secs"
            );
            self.release(&c, n, bytes);
        }
        Ok(())
    }

    /// The devices' bearer token, if one is required.
    fn check_device(&self, headers: &HeaderMap) -> Result<(), ApiError> {
        let Some(want) = &self.device_token else { return Ok(()) };
        let got =
            headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "));
        let h = harmony_server::tokens::hash(got.unwrap_or(""));
        let same = want.iter().zip(&h).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0;
        if got.is_none() || !same {
            return Err(ApiError::new(StatusCode::UNAUTHORIZED, "authorization", "missing or wrong relay token"));
        }
        Ok(())
    }
}

fn unix_now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

/// Runs `harmony shuffle`.
pub fn run(args: ShuffleArgs) -> Result<()> {
    if args.min_batch == 0 {
        bail!("--min-batch is 0, expected an integer >= 1");
    }
    let buffer = Buffer::open(&args.buffer)?;
    let mut sizes = Sizes::default();
    for (c, (n, b)) in buffer.counts()? {
        (sizes.reports, sizes.bytes) = (sizes.reports + n, sizes.bytes + b);
        sizes.per.insert(c, n);
    }
    let base = Client::new(&args.upstream);
    let base = match &args.token {
        Some(t) => base.with_token(t),
        None => base,
    };
    let upstream = base.clone().with_retry(RetryPolicy {
        attempts: 6,
        base: Duration::from_millis(50),
        max: Duration::from_secs(2),
    });
    let configs = Configs::new(
        base.with_retry(RetryPolicy { attempts: 1, ..Default::default() }),
        Duration::from_secs(args.config_ttl_secs),
    );
    for (c, json) in buffer.pinned()? {
        if let Err(e) = configs.restore(&c, &json) {
            eprintln!("harmony shuffle: the stored config of collection {c} is unusable ({e}); fetching it again");
        }
    }
    let relay = Arc::new(Relay {
        buffer: Mutex::new(buffer),
        size: Mutex::new(sizes),
        wake: Condvar::new(),
        max_bytes: args.max_buffer_mib << 20,
        group_ttl: Duration::from_secs(args.group_ttl_secs),
        seen_ttl: Duration::from_secs(args.seen_ttl_secs),
        max_seen: args.max_seen,
        device_token: args.device_token.as_deref().map(harmony_server::tokens::hash),
        configs,
    });
    if args.flush {
        return flush(&relay, &upstream);
    }
    eprintln!(
        "harmony shuffle: {} reports buffered from a previous run",
        relay.size.lock().expect("size lock").reports
    );
    let (r2, min) = (relay.clone(), args.min_batch);
    std::thread::spawn(move || forward::forward_loop(&r2, &upstream, min));
    serve(relay, &args.listen)
}

/// `--flush`: forwards every collection's reports; a collection that fails is reported and
/// the others are still forwarded (exit 2 when any failed).
fn flush(relay: &Relay, upstream: &Client) -> Result<()> {
    let (mut n, mut failed) = (0, Vec::<(String, anyhow::Error)>::new());
    loop {
        let names: HashSet<String> = failed.iter().map(|(c, _)| c.clone()).collect();
        let (k, f) = forward::forward_ready(relay, upstream, 1, &|c| names.contains(c));
        n += k;
        if k == 0 && f.is_empty() {
            break;
        }
        failed.extend(f);
    }
    eprintln!("harmony shuffle: flushed {n} reports upstream");
    for (c, e) in &failed {
        eprintln!("harmony shuffle: collection {c} was not flushed: {e:#}");
    }
    if !failed.is_empty() {
        bail!("{} collections were not flushed (each named above); the others were", failed.len());
    }
    Ok(())
}

/// Serves devices behind the server's own limits and accept loop until SIGINT or SIGTERM,
/// then drains (in-flight requests are answered; every acknowledged report is committed).
fn serve(relay: Arc<Relay>, listen: &str) -> Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let served = rt.block_on(async move {
        let limits = harmony_server::Limits::default();
        let app = axum::Router::new()
            .route("/v1/collections/{id}/reports", axum::routing::post(post_reports))
            .route("/v1/collections/{id}/config", axum::routing::get(get_config))
            .with_state(relay);
        let app = harmony_server::with_limits(app, &limits);
        let listener = tokio::net::TcpListener::bind(listen).await.with_context(|| format!("--listen {listen}"))?;
        eprintln!("harmony shuffle: listening on {}", listener.local_addr()?);
        let stop = harmony_server::run::shutdown_signal();
        harmony_server::run::serve(listener, app, &limits, None, stop).await.context("serving")?;
        eprintln!("harmony shuffle: stopped (every acknowledged report is in the buffer)");
        Ok(())
    });
    // A config fetch still waiting on a slow upstream does not hold the exit.
    rt.shutdown_timeout(Duration::from_secs(1));
    served
}

/// An error answer; a 503 says when to retry.
fn respond(e: ApiError) -> Response {
    let busy = e.status == StatusCode::SERVICE_UNAVAILABLE;
    let mut r = e.into_response();
    if busy {
        r.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(harmony_server::guard::RETRY_AFTER_SECONDS));
    }
    r
}

/// A path's collection id: only the server's id charset ever reaches an upstream URL.
fn check_id(id: &str) -> Result<(), ApiError> {
    if valid_report_id(id) {
        return Ok(());
    }
    Err(ApiError::bad(
        "collection",
        format!("a collection id of {} bytes, expected 1 to 64 of [A-Za-z0-9_-]", id.len()),
    ))
}

/// The pinned config of the path's collection.
async fn pinned(relay: &Relay, id: &str) -> Result<Arc<Pinned>, ApiError> {
    check_id(id)?;
    relay.configs.get(id, relay.buffered(id)).await
}

async fn post_reports(
    State(relay): State<Arc<Relay>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    if let Err(e) = relay.check_device(&headers) {
        return respond(e);
    }
    let config = match pinned(&relay, &id).await {
        Ok(c) => c,
        Err(e) => return respond(e),
    };
    if let Some(why) = &config.refuse_reports {
        return respond(ApiError::new(StatusCode::CONFLICT, "collection", why.clone()));
    }
    let r2 = relay.clone();
    match tokio::task::spawn_blocking(move || accept(&r2, &config, &body)).await {
        Ok(Ok(ack)) => {
            relay.wake.notify_all();
            axum::Json(ack).into_response()
        }
        Ok(Err(e)) => respond(e),
        Err(e) => respond(ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "relay", format!("{e}"))),
    }
}

/// `GET /v1/collections/{id}/config`: the collection's pinned config (fetched from the
/// upstream once; the upstream's refusal, e.g. 404 for an unknown collection; 502 when it
/// cannot be reached; 503 while it is being fetched or slow).
async fn get_config(State(relay): State<Arc<Relay>>, Path(id): Path<String>) -> Response {
    match pinned(&relay, &id).await {
        Ok(c) => ([(header::CONTENT_TYPE, "application/json")], c.json.clone()).into_response(),
        Err(e) => respond(e),
    }
}

/// Decodes a device batch against the pinned config: (device id, lowercase hex, fresh relay
/// id) per report, all or nothing (a report the collection's task refuses is a 400 naming it).
fn decode(config: &Pinned, body: &[u8]) -> Result<Vec<Item>, ApiError> {
    let batch: ReportBatch = harmony_server::error::parse_json(body)?;
    let c = &config.config;
    if batch.collection != c.id {
        let msg = format!("the batch is for collection {:?}, posted to {:?}", batch.collection, c.id);
        return Err(ApiError::bad("collection", msg));
    }
    if batch.config_version != c.config_version {
        let msg = format!("config_version is {}, expected {}", batch.config_version, c.config_version);
        return Err(ApiError::bad("config_version", msg));
    }
    let n = batch.reports.len();
    if n == 0 || n > MAX_BATCH {
        return Err(ApiError::bad("reports", format!("{n} reports, expected 1 to {MAX_BATCH}")));
    }
    let (mut items, mut ids) = (Vec::with_capacity(n), HashSet::with_capacity(n));
    let (mut rng, mut bytes) = (secure_rng(), Vec::new());
    for (i, ReportItem { id, report }) in batch.reports.into_iter().enumerate() {
        if !valid_report_id(&id) {
            let msg = format!("report id of {} bytes, expected 1 to 64 characters [A-Za-z0-9_-]", id.len());
            return Err(ApiError::bad(format!("reports[{i}].id"), msg));
        }
        bytes.clear();
        if report.len() > 2 * MAX_REPORT_BYTES || from_hex_into(&report, &mut bytes).is_none() || bytes.is_empty() {
            let msg = format!("expected 1 to {MAX_REPORT_BYTES} bytes of hex");
            return Err(ApiError::bad(format!("reports[{i}].report"), msg));
        }
        config.task.validate(&bytes).map_err(|e| ApiError::from_core(&format!("reports[{i}].report: "), e))?;
        if !ids.insert(id.clone()) {
            return Err(ApiError::bad(format!("reports[{i}].id"), format!("id {id:?} twice in one batch")));
        }
        // Re-encoded: a device's choice of hex case cannot mark its report.
        items.push((id, to_hex(&bytes), to_hex(&rng.random::<[u8; 16]>())));
    }
    Ok(items)
}

/// Checks a device batch, keeps only its report bytes, and buffers them durably.
fn accept(relay: &Relay, config: &Pinned, body: &[u8]) -> Result<BatchAck, ApiError> {
    let items = decode(config, body)?;
    let hex_total: u64 = items.iter().map(|it| it.1.len() as u64).sum();
    if relay.size.lock().expect("size lock").bytes + hex_total > relay.max_bytes {
        let msg = format!("the relay's buffer is full ({} MiB): retry later", relay.max_bytes >> 20);
        return Err(ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "buffer", msg));
    }
    let c = &config.config;
    let internal = |e: anyhow::Error| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "buffer", format!("{e:#}"));
    let offers = relay
        .buffer
        .lock()
        .expect("buffer lock")
        .insert(&c.id, c.config_version, &config.json, unix_now(), &items)
        .map_err(internal)?
        .map_err(|held| {
            let msg =
                format!("the relay holds reports of config_version {held} for this collection: fetch the config again");
            ApiError::new(StatusCode::CONFLICT, "config_version", msg)
        })?;
    let mut ack = BatchAck { accepted: 0, duplicates: 0 };
    let mut size = relay.size.lock().expect("size lock");
    for (o, it) in offers.iter().zip(&items) {
        if *o == Offer::New {
            ack.accepted += 1;
            size.bytes += it.1.len() as u64;
        } else {
            ack.duplicates += 1;
        }
    }
    size.reports += ack.accepted;
    if ack.accepted > 0 {
        *size.per.entry(c.id.clone()).or_default() += ack.accepted;
    }
    Ok(ack)
}

/// Fisher–Yates: every permutation equally likely given a uniform `random_range`.
pub(crate) fn shuffle<T>(items: &mut [T], rng: &mut impl rand::Rng) {
    for i in (1..items.len()).rev() {
        let j = rng.random_range(0..=i);
        items.swap(i, j);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fisher–Yates puts each of 4 items in each position 1/4 of the time: a chi-square over
    /// the 16 (item, position) cells of 40,000 shuffles, 9 degrees of freedom (each row and
    /// column sums to the count), below 33.7 (its 1e-4 quantile... z ≈ 4.42 equivalent rate 1e-5:
    /// the 1 − 1e-5 quantile of χ²₉ is 37.3).
    /// The device token: only the exact bearer token passes (not a prefix, an extension, another
    /// scheme or nothing); the comparison is of SHA-256 digests, whose time does not depend on
    /// where they differ.
    #[test]
    fn device_token_is_exact() {
        let dir = std::env::temp_dir().join(format!("harmony-relay-unit-{}", std::process::id()));
        let r = Relay {
            buffer: Mutex::new(Buffer::open(&dir).unwrap()),
            size: Mutex::default(),
            wake: Condvar::new(),
            max_bytes: 0,
            group_ttl: Duration::ZERO,
            seen_ttl: Duration::ZERO,
            max_seen: 0,
            device_token: Some(harmony_server::tokens::hash("secret-token")),
            configs: Configs::new(Client::new("http://127.0.0.1:9"), Duration::ZERO),
        };
        let _ = std::fs::remove_dir_all(&dir);
        let with = |v: &str| {
            let mut h = HeaderMap::new();
            h.insert(header::AUTHORIZATION, HeaderValue::from_str(v).unwrap());
            h
        };
        assert!(r.check_device(&with("Bearer secret-token")).is_ok());
        for bad in ["Bearer secret-toke", "Bearer secret-token2", "Basic secret-token", "Bearer ", "secret-token"] {
            assert_eq!(r.check_device(&with(bad)).unwrap_err().status, StatusCode::UNAUTHORIZED, "{bad}");
        }
        assert!(r.check_device(&HeaderMap::new()).is_err());
    }

    #[test]
    fn fisher_yates_is_uniform_over_positions() {
        let mut rng = harmony_core::sampling::fast_rng(7);
        let trials = 40_000;
        let mut counts = [[0u64; 4]; 4];
        for _ in 0..trials {
            let mut v = [0usize, 1, 2, 3];
            shuffle(&mut v, &mut rng);
            for (pos, &item) in v.iter().enumerate() {
                counts[item][pos] += 1;
            }
        }
        let e = trials as f64 / 4.0;
        let chi2: f64 = counts.iter().flatten().map(|&c| (c as f64 - e).powi(2) / e).sum();
        assert!(chi2 < 37.3, "chi-square {chi2} over 37.3 (rate 1e-5 at 9 degrees of freedom)");
    }
}
