//! `POST /v1/collections/{id}/reports`: a batch of encoded reports with device-chosen ids.
//!
//! Every report is decoded and validated before anything is stored; one bad report rejects the
//! batch with a 4xx naming it. The batch is acknowledged after its transaction commits; a
//! retried id with the same bytes is stored and counted once; an id already stored with other
//! bytes is a 409 and nothing of its batch is stored. Parsing, validation, the commit and the accumulator
//! update run on one blocking thread that finishes even if the client goes away: the live
//! accumulator is always exactly the committed reports.
//!
//! A server started with `harmony serve --accept-backdated` ([`accept_backdated`]) also takes a
//! batch's received instant from its `Harmony-Received-At` header when the request carries the
//! admin token: demos and tests of continuous collection fill past days that way. Without the
//! flag the header is a 400, and without the admin token a 401 or 403: a device never moves its
//! reports to another day.

use super::{Body, blocking, body_bytes};
use crate::error::{ApiError, parse_json};
use crate::state::{AppState, Collection};
use crate::store::StoreError;
use axum::Extension;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use harmony_protocol::{BatchAck, MAX_BATCH, MAX_REPORT_BYTES, from_hex_into, valid_report_id};
use serde::Deserialize;
use std::borrow::Cow;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// [`harmony_protocol::ReportBatch`] as the server reads it: the same JSON, with ids and hex
/// borrowed from the body (no allocation per report until a row is built for the store).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BatchIn<'a> {
    #[serde(borrow)]
    collection: Cow<'a, str>,
    config_version: u32,
    #[serde(borrow)]
    reports: Vec<ItemIn<'a>>,
}

/// [`harmony_protocol::ReportItem`], borrowed.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ItemIn<'a> {
    #[serde(borrow)]
    id: Cow<'a, str>,
    #[serde(borrow)]
    report: Cow<'a, str>,
}

/// The header that dates a batch on a server that accepts backdated batches.
pub const RECEIVED_AT: &str = "Harmony-Received-At";

/// Marks a router whose report batches may carry [`RECEIVED_AT`] ([`accept_backdated`]).
#[derive(Debug, Clone, Copy)]
pub struct AcceptBackdated;

/// `router` honouring [`RECEIVED_AT`] on report batches that carry the admin token (`harmony
/// serve --accept-backdated`: demos and tests of continuous collection). Apply it after every
/// route is added: a layer covers the routes present when it is applied.
pub fn accept_backdated(router: axum::Router<AppState>) -> axum::Router<AppState> {
    router.layer(Extension(AcceptBackdated))
}

/// The instant (Unix seconds) a batch's [`RECEIVED_AT`] header names, `None` without the header:
/// a 400 when the server does not accept backdated batches or the value is not an instant up to
/// now, a 401 or 403 without the admin token.
fn received_at(st: &AppState, headers: &HeaderMap, accepted: bool) -> Result<Option<i64>, ApiError> {
    let Some(raw) = headers.get(RECEIVED_AT) else { return Ok(None) };
    if !accepted {
        let msg = format!(
            "this server does not accept backdated batches: {RECEIVED_AT} is honoured only by a server started with \
             --accept-backdated (demos and tests), with the admin token; expected a batch without it"
        );
        return Err(ApiError::bad(RECEIVED_AT, msg));
    }
    st.check_token(headers).map_err(|e| {
        ApiError::new(
            e.status,
            RECEIVED_AT,
            format!("{RECEIVED_AT} is honoured with the admin token only: {}", e.message),
        )
    })?;
    if !st.inner.store.supports_buckets() {
        let msg = format!(
            "this server's store keeps no received instant per batch (e.g. `harmony serve --archive`): a batch with \
             {RECEIVED_AT} would be dated now; expected a batch without it"
        );
        return Err(ApiError::bad(RECEIVED_AT, msg));
    }
    let expected = "expected an ISO date YYYY-MM-DD, a UTC timestamp YYYY-MM-DDTHH:MM[:SS]Z or Unix seconds";
    let text =
        raw.to_str().map_err(|_| ApiError::bad(RECEIVED_AT, format!("{RECEIVED_AT} is not text: {expected}")))?;
    let t = match text.parse::<i64>() {
        Ok(secs) => secs,
        Err(_) => crate::buckets::parse_instant(RECEIVED_AT, text.trim())?,
    };
    let now = st.now();
    if !(0..=now).contains(&t) {
        let msg = format!(
            "{RECEIVED_AT} is {text:?} ({}), expected an instant from 1970-01-01 up to now ({})",
            crate::buckets::iso(t),
            crate::buckets::iso(now)
        );
        return Err(ApiError::bad(RECEIVED_AT, msg));
    }
    Ok(Some(t))
}

/// `POST /v1/collections/{id}/reports`.
#[utoipa::path(post, path = "/v1/collections/{id}/reports", operation_id = "postReports", tag = "reports",
    params(
        ("id" = String, Path, description = "The collection id"),
        ("Harmony-Received-At" = Option<String>, Header, description = "Demos and tests only: the batch's received instant (an ISO date, a UTC timestamp or Unix seconds, up to now) instead of the server's clock: its bucket and stored received day. Honoured by a server started with `--accept-backdated` and with the admin token only (else 400, 401 or 403)")
    ),
    request_body(content = harmony_protocol::ReportBatch, content_type = "application/json"),
    responses(
        (status = 200, description = "Stored durably (retried ids count as duplicates)", body = harmony_protocol::BatchAck),
        (status = 400, description = "A bad envelope or report (the field names it), or a `Harmony-Received-At` the server does not accept; nothing stored", body = harmony_protocol::ErrorBody),
        (status = 401, description = "`Harmony-Received-At` without the admin token", body = harmony_protocol::ErrorBody),
        (status = 403, description = "`Harmony-Received-At` with another token than the admin token", body = harmony_protocol::ErrorBody),
        (status = 404, description = "No such collection", body = harmony_protocol::ErrorBody),
        (status = 409, description = "A report id already stored with other bytes (the field names it; nothing of the batch stored), or the collection trains a model: post gradients", body = harmony_protocol::ErrorBody),
        (status = 413, description = "Body over the size limit, or more than 10,000 reports", body = harmony_protocol::ErrorBody),
        (status = 415, description = "Content-Type is not application/json", body = harmony_protocol::ErrorBody),
        (status = 503, description = "Storage unavailable or the collection quarantined: retry", body = harmony_protocol::ErrorBody)
    ))]
pub async fn post(
    State(st): State<AppState>,
    Path(id): Path<String>,
    backdated: Option<Extension<AcceptBackdated>>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let t0 = Instant::now();
    let at = received_at(&st, &headers, backdated.is_some());
    let result = match (at, body_bytes(body), st.collection(&id)) {
        (Ok(at), Ok(body), Ok(c)) => {
            if let Some(t) = at {
                tracing::info!(collection = %id, received_at = %crate::buckets::iso(t), "a backdated batch (admin token)");
            }
            let st2 = st.clone();
            blocking(move || ingest(&st2, &c, &body, at)).await
        }
        (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => Err(e),
    };
    let m = &st.inner.metrics;
    match &result {
        Ok(ack) => {
            m.batches.fetch_add(1, Ordering::Relaxed);
            m.accepted.fetch_add(ack.accepted, Ordering::Relaxed);
            m.duplicates.fetch_add(ack.duplicates, Ordering::Relaxed);
            m.commit_micros.fetch_add(t0.elapsed().as_micros() as u64, Ordering::Relaxed);
            tracing::debug!(collection = %id, accepted = ack.accepted, duplicates = ack.duplicates, micros = t0.elapsed().as_micros() as u64, "batch stored");
        }
        Err(e) => {
            m.rejected_batches.fetch_add(1, Ordering::Relaxed);
            // The field names the problem; report contents are never logged.
            tracing::info!(collection = %id, status = e.status.as_u16(), field = %e.field, "batch rejected");
        }
    }
    result.map(|ack| axum::Json(ack).into_response())
}

/// Checks the batch's envelope against the collection.
fn check_envelope(c: &Collection, batch: &BatchIn) -> Result<(), ApiError> {
    let id = &c.config.id;
    if batch.collection != *id {
        let msg = format!("the batch is for collection {:?}, posted to {id:?}", batch.collection);
        return Err(ApiError::bad("collection", msg));
    }
    if batch.config_version != c.config.config_version {
        let msg = format!("config_version is {}, expected {}", batch.config_version, c.config.config_version);
        return Err(ApiError::bad("config_version", msg));
    }
    let n = batch.reports.len();
    if n == 0 || n > MAX_BATCH {
        let status = if n == 0 { StatusCode::BAD_REQUEST } else { StatusCode::PAYLOAD_TOO_LARGE };
        return Err(ApiError::new(status, "reports", format!("{n} reports, expected 1 to {MAX_BATCH}")));
    }
    Ok(())
}

/// Decodes and validates every report of a batch: `(id, bytes)` rows, all or nothing.
fn decode_batch(c: &Collection, batch: &BatchIn) -> Result<Vec<(String, Vec<u8>)>, ApiError> {
    let mut rows = Vec::with_capacity(batch.reports.len());
    let mut seen = std::collections::HashSet::with_capacity(batch.reports.len());
    for (i, item) in batch.reports.iter().enumerate() {
        let id: &str = &item.id;
        if !valid_report_id(id) {
            let msg = format!("report id of {} bytes, expected 1 to 64 characters [A-Za-z0-9_-]", id.len());
            return Err(ApiError::bad(format!("reports[{i}].id"), msg));
        }
        if item.report.len() > 2 * MAX_REPORT_BYTES {
            let msg = format!("{} hex characters, expected at most {}", item.report.len(), 2 * MAX_REPORT_BYTES);
            return Err(ApiError::bad(format!("reports[{i}].report"), msg));
        }
        let mut buf = Vec::with_capacity(item.report.len() / 2);
        if from_hex_into(&item.report, &mut buf).is_none() {
            let msg = "not hex: expected an even number of [0-9a-f]";
            return Err(ApiError::bad(format!("reports[{i}].report"), msg));
        }
        c.task.validate(&buf).map_err(|e| ApiError::from_core(&format!("reports[{i}].report: "), e))?;
        if !seen.insert(id) {
            return Err(ApiError::bad(format!("reports[{i}].id"), format!("id {id:?} twice in one batch")));
        }
        rows.push((id.to_owned(), buf));
    }
    Ok(rows)
}

/// Parses, validates, commits and aggregates one batch (blocking), received `at` (else now).
fn ingest(st: &AppState, c: &std::sync::Arc<Collection>, body: &[u8], at: Option<i64>) -> Result<BatchAck, ApiError> {
    if c.train.is_some() {
        let id = &c.config.id;
        let msg = format!("collection {id:?} trains a model: post gradients to /v1/collections/{id}/gradients");
        return Err(ApiError::new(StatusCode::CONFLICT, "collection", msg));
    }
    if c.adaptive {
        let id = &c.config.id;
        let msg = format!("collection {id:?} asks queries in rounds: post answers to /v1/collections/{id}/answers");
        return Err(ApiError::new(StatusCode::CONFLICT, "collection", msg));
    }
    let batch: BatchIn = parse_json(body)?;
    check_envelope(c, &batch)?;
    let rows = std::sync::Arc::new(decode_batch(c, &batch)?);
    let now = at.unwrap_or_else(|| st.now());
    let bucket = c.buckets().map(|b| b.period.start(now));
    // The state of the batch's reports, stored with them ([`crate::buckets`]).
    let (delta, stored) = match bucket {
        Some(b) => {
            let (agg, d) = crate::buckets::delta(c, b, rows.clone())?;
            (Some(agg), Some(d))
        }
        None => (None, None),
    };
    c.settle(st.inner.store.as_ref(), false)?;
    let _committing = c.committing();
    let flags = st.inner.store.insert_reports_at(c.key, now, rows.clone(), stored).map_err(|e| match e {
        StoreError::Conflict { index, id } => {
            let msg = format!("report id {id:?} is already stored with other bytes; nothing of this batch was stored");
            ApiError::new(StatusCode::CONFLICT, format!("reports[{index}].id"), msg)
        }
        e => {
            // The batch may have committed: rebuild the accumulator before its next use (a
            // retry then counts these ids as duplicates, and the rebuild counts them once).
            if matches!(e, StoreError::Db(_)) {
                c.stale.store(true, std::sync::atomic::Ordering::Release);
            }
            ApiError::store(e)
        }
    })?;
    let accepted = flags.iter().filter(|f| **f).count() as u64;
    let mut agg = c.agg();
    let delta = match delta {
        // The usual case: every report new, their accumulator made already.
        Some(d) if accepted == flags.len() as u64 => d,
        _ => {
            let mut d = c.task.aggregator();
            for ((_, b), new) in rows.iter().zip(&flags) {
                if *new {
                    // Validated above: `add` decodes what `validate` accepted.
                    d.add(b).map_err(|e| ApiError::from_core("reports: ", e))?;
                }
            }
            d
        }
    };
    agg.merge(delta.as_ref()).map_err(|e| ApiError::from_core("reports: ", e))?;
    if let (Some(b), Some(mut buckets)) = (bucket, c.buckets()) {
        buckets.add(c.task.as_ref(), b, delta.as_ref()).map_err(|e| ApiError::from_core("reports: ", e))?;
    }
    Ok(BatchAck { accepted, duplicates: flags.len() as u64 - accepted })
}
