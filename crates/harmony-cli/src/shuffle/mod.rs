//! `harmony shuffle`: a relay between devices and a collection server for the shuffle model
//! (docs/SHUFFLE.md).
//!
//! Devices post the server's own `POST /v1/collections/{id}/reports` to the relay. It keeps
//! only each report's bytes (re-encoded as lowercase hex) under a fresh random id, buffers them
//! durably (fsynced before the device is acknowledged), and once at least `--min-batch` are
//! buffered for a collection takes all of them as one round, permutes them uniformly (Fisher–Yates
//! with a ChaCha20 CSPRNG seeded from the OS) and forwards them upstream in batches, deleting each
//! batch only after the upstream acknowledged it. Device ids, tokens, addresses and arrival
//! times are never forwarded. `GET /v1/collections/{id}/config` is passed through from the
//! upstream, so devices need only the relay's address (they check the config against their own
//! policy as they would the server's).

mod buffer;

use anyhow::{Context, Result, bail};
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use buffer::{Buffer, Offer, Row};
use clap::Args;
use harmony_client::{Client, ClientError, RetryPolicy};
use harmony_core::sampling::secure_rng;
use harmony_protocol::{BatchAck, ErrorBody, ErrorDetail, MAX_BATCH, MAX_REPORT_BYTES, ReportBatch, ReportItem};
use harmony_protocol::{from_hex_into, to_hex, valid_report_id};
use rand::RngExt;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// Largest device request body (the server's own limit).
const MAX_BODY: usize = 32 << 20;
/// Largest forwarded body: batches are cut at this many hex bytes or `MAX_BATCH` reports.
const MAX_FORWARD_BYTES: usize = 16 << 20;

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
    /// Forward everything buffered now, whatever its size, then exit (ends a collection: the
    /// last round may be smaller than --min-batch, and so less amplified).
    #[arg(long)]
    pub flush: bool,
}

/// State shared by the HTTP handlers and the forwarder.
struct Relay {
    buffer: Mutex<Buffer>,
    /// (reports, hex bytes) buffered.
    size: Mutex<(u64, u64)>,
    wake: Condvar,
    max_bytes: u64,
    device_token: Option<String>,
    /// The collection server (configs are fetched from it; rounds are forwarded to it).
    upstream: Client,
}

/// Runs `harmony shuffle`.
pub fn run(args: ShuffleArgs) -> Result<()> {
    if args.min_batch == 0 {
        bail!("--min-batch is 0, expected an integer >= 1");
    }
    let buffer = Buffer::open(&args.buffer)?;
    let totals = buffer.totals()?;
    let mut upstream = Client::new(&args.upstream).with_retry(RetryPolicy {
        attempts: 6,
        base: Duration::from_millis(50),
        max: Duration::from_secs(2),
    });
    if let Some(t) = &args.token {
        upstream = upstream.with_token(t);
    }
    let relay = Arc::new(Relay {
        buffer: Mutex::new(buffer),
        size: Mutex::new(totals),
        wake: Condvar::new(),
        max_bytes: args.max_buffer_mib << 20,
        device_token: args.device_token.clone(),
        upstream: upstream.clone(),
    });
    if args.flush {
        // A round in progress is forwarded first, then the reports that arrived after it.
        let mut n = 0;
        loop {
            match forward_ready(&relay, &upstream, 1)? {
                0 => break,
                k => n += k,
            }
        }
        eprintln!("harmony shuffle: flushed {n} reports upstream");
        return Ok(());
    }
    eprintln!("harmony shuffle: {} reports buffered from a previous run", totals.0);
    let (r2, min) = (relay.clone(), args.min_batch);
    std::thread::spawn(move || forward_loop(&r2, &upstream, min));
    serve(relay, &args.listen)
}

fn serve(relay: Arc<Relay>, listen: &str) -> Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(async move {
        let app = axum::Router::new()
            .route("/v1/collections/{id}/reports", axum::routing::post(post_reports))
            .route("/v1/collections/{id}/config", axum::routing::get(get_config))
            .layer(DefaultBodyLimit::max(MAX_BODY))
            .with_state(relay);
        let listener = tokio::net::TcpListener::bind(listen).await.with_context(|| format!("--listen {listen}"))?;
        eprintln!("harmony shuffle: listening on {}", listener.local_addr()?);
        axum::serve(listener, app).await.context("serving")
    })
}

/// A 4xx/5xx with the server's error body.
fn error(status: StatusCode, field: &str, message: String) -> Response {
    (status, axum::Json(ErrorBody { error: ErrorDetail { field: field.into(), message } })).into_response()
}

/// [`error`], boxed (a rejection from [`accept`]).
fn reject(status: StatusCode, field: &str, message: String) -> Box<Response> {
    Box::new(error(status, field, message))
}

async fn post_reports(
    State(relay): State<Arc<Relay>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    if let Some(want) = &relay.device_token {
        let got = headers.get("authorization").and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "));
        if got != Some(want.as_str()) {
            return error(StatusCode::UNAUTHORIZED, "authorization", "missing or wrong relay token".into());
        }
    }
    let r2 = relay.clone();
    match tokio::task::spawn_blocking(move || accept(&r2, &id, &body)).await {
        Ok(Ok(ack)) => {
            relay.wake.notify_all();
            axum::Json(ack).into_response()
        }
        Ok(Err(resp)) => *resp,
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, "relay", format!("{e}")),
    }
}

/// `GET /v1/collections/{id}/config`, from the upstream: its config, or its rejection (404 for
/// an unknown collection) with the upstream's field and message; 502 when it cannot be reached.
async fn get_config(State(relay): State<Arc<Relay>>, Path(id): Path<String>) -> Response {
    match tokio::task::spawn_blocking(move || relay.upstream.config(&id)).await {
        Ok(Ok(config)) => axum::Json(config).into_response(),
        Ok(Err(ClientError::Rejected { status, field, message })) => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
            error(status, &field, message)
        }
        Ok(Err(e)) => error(StatusCode::BAD_GATEWAY, "upstream", format!("the collection server: {e}")),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, "relay", format!("{e}")),
    }
}

/// Validates a device batch, keeps only its report bytes, and buffers them durably.
fn accept(relay: &Relay, path_id: &str, body: &[u8]) -> std::result::Result<BatchAck, Box<Response>> {
    let bad = |field: String, msg: String| reject(StatusCode::BAD_REQUEST, &field, msg);
    let batch: ReportBatch =
        serde_json::from_slice(body).map_err(|e| bad("body".into(), format!("not a report batch: {e}")))?;
    if batch.collection != path_id {
        let msg = format!("the batch is for collection {:?}, posted to {path_id:?}", batch.collection);
        return Err(bad("collection".into(), msg));
    }
    let n = batch.reports.len();
    if n == 0 || n > MAX_BATCH {
        return Err(bad("reports".into(), format!("{n} reports, expected 1 to {MAX_BATCH}")));
    }
    let mut items = Vec::with_capacity(n);
    let mut rng = secure_rng();
    let mut bytes = Vec::new();
    let mut hex_total = 0u64;
    for (i, ReportItem { id, report }) in batch.reports.into_iter().enumerate() {
        if !valid_report_id(&id) {
            return Err(bad(format!("reports[{i}].id"), format!("{id:?} is not 1 to 64 of [A-Za-z0-9_-]")));
        }
        bytes.clear();
        if from_hex_into(&report, &mut bytes).is_none() || bytes.is_empty() || bytes.len() > MAX_REPORT_BYTES {
            let msg = format!("expected 1 to {MAX_REPORT_BYTES} bytes of hex");
            return Err(bad(format!("reports[{i}].report"), msg));
        }
        // Re-encoded: a device's choice of hex case cannot mark its report.
        let hex = to_hex(&bytes);
        hex_total += hex.len() as u64;
        let relay_id = to_hex(&rng.random::<[u8; 16]>());
        let hash = fnv1a(hex.as_bytes()) as i64;
        items.push((id, hex, hash, relay_id));
    }
    {
        let size = relay.size.lock().expect("size lock");
        if size.1 + hex_total > relay.max_bytes {
            let msg = format!("the relay's buffer is full ({} MiB): retry later", relay.max_bytes >> 20);
            return Err(reject(StatusCode::SERVICE_UNAVAILABLE, "buffer", msg));
        }
    }
    let internal = |e: anyhow::Error| reject(StatusCode::SERVICE_UNAVAILABLE, "buffer", format!("{e:#}"));
    let offers = relay
        .buffer
        .lock()
        .expect("buffer lock")
        .insert(&batch.collection, batch.config_version, &items)
        .map_err(internal)?
        .map_err(|(i, msg)| reject(StatusCode::CONFLICT, &format!("reports[{i}].id"), msg))?;
    let mut ack = BatchAck { accepted: 0, duplicates: 0 };
    let mut size = relay.size.lock().expect("size lock");
    for (o, it) in offers.iter().zip(&items) {
        if *o == Offer::New {
            ack.accepted += 1;
            size.0 += 1;
            size.1 += it.1.len() as u64;
        } else {
            ack.duplicates += 1;
        }
    }
    Ok(ack)
}

/// FNV-1a (64 bits): a stable hash of a report, stored to tell a device's retry (same bytes)
/// from a reused id (other bytes).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// Forwards rounds as they become ready, for ever (woken by each buffered batch).
fn forward_loop(relay: &Relay, upstream: &Client, min_batch: u64) {
    loop {
        match forward_ready(relay, upstream, min_batch) {
            Ok(0) => {}
            Ok(n) => eprintln!("harmony shuffle: forwarded a round of {n} reports"),
            Err(e) => {
                eprintln!("harmony shuffle: forwarding failed, retrying: {e:#}");
                std::thread::sleep(Duration::from_secs(1));
            }
        }
        let size = relay.size.lock().expect("size lock");
        let _ = relay.wake.wait_timeout(size, Duration::from_millis(500)).expect("size lock");
    }
}

/// Forwards every group with a round in progress or at least `min_batch` new reports; returns
/// the reports forwarded.
fn forward_ready(relay: &Relay, upstream: &Client, min_batch: u64) -> Result<u64> {
    let groups = relay.buffer.lock().expect("buffer lock").groups()?;
    let mut total = 0;
    for (collection, version, fresh, in_progress) in groups {
        if !in_progress && fresh < min_batch {
            continue;
        }
        let mut rows = relay.buffer.lock().expect("buffer lock").take_round(&collection, version)?;
        shuffle(&mut rows, &mut secure_rng());
        total += forward_round(relay, upstream, &collection, version, &rows)?;
    }
    Ok(total)
}

/// Fisher–Yates: every permutation equally likely given a uniform `random_range`.
pub(crate) fn shuffle<T>(items: &mut [T], rng: &mut impl rand::Rng) {
    for i in (1..items.len()).rev() {
        let j = rng.random_range(0..=i);
        items.swap(i, j);
    }
}

/// Posts a shuffled round in order, batch by batch, deleting each batch once acknowledged.
fn forward_round(relay: &Relay, upstream: &Client, collection: &str, version: u32, rows: &[Row]) -> Result<u64> {
    let mut start = 0;
    while start < rows.len() {
        let (mut end, mut bytes) = (start, 0);
        while end < rows.len() && end - start < MAX_BATCH && bytes + rows[end].report.len() + 64 <= MAX_FORWARD_BYTES {
            bytes += rows[end].report.len() + 64;
            end += 1;
        }
        let chunk = &rows[start..end];
        let reports = chunk.iter().map(|r| ReportItem { id: r.id.clone(), report: r.report.clone() }).collect();
        let batch = ReportBatch { collection: collection.to_string(), config_version: version, reports };
        let body = serde_json::to_vec(&batch).expect("JSON of a batch");
        let seqs: Vec<i64> = chunk.iter().map(|r| r.seq).collect();
        let freed = match upstream.submit_raw(collection, &body) {
            Ok(_) => relay.buffer.lock().expect("buffer lock").remove(&seqs, None)?,
            Err(ClientError::Rejected { status, field, message }) => {
                let why = format!("{status}: {field}: {message}");
                eprintln!(
                    "harmony shuffle: upstream rejected {} reports of {collection} ({why}); kept in `rejected`",
                    seqs.len()
                );
                relay.buffer.lock().expect("buffer lock").remove(&seqs, Some(&why))?
            }
            Err(e) => return Err(e).context(format!("forwarding to collection {collection}")),
        };
        let mut size = relay.size.lock().expect("size lock");
        size.0 = size.0.saturating_sub(seqs.len() as u64);
        size.1 = size.1.saturating_sub(freed);
        start = end;
    }
    Ok(rows.len() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fisher–Yates puts each of 4 items in each position 1/4 of the time: a chi-square over
    /// the 16 (item, position) cells of 40,000 shuffles, 9 degrees of freedom (each row and
    /// column sums to the count), below 33.7 (its 1e-4 quantile... z ≈ 4.42 equivalent rate 1e-5:
    /// the 1 − 1e-5 quantile of χ²₉ is 37.3).
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
