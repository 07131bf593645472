//! `POST /v1/collections` (analyst), `GET …/config` (public), `GET …/estimates` and `GET …/days`
//! (analyst).

use super::{blocking, read_body};
use crate::buckets::Period;
use crate::error::{ApiError, parse_json};
use crate::state::{AppState, Cached, Collection};
use crate::store::StoreError;
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use harmony_protocol::estimates::{EstimateDocument, Query};
use harmony_protocol::{Created, NewCollection, to_hex};
use rand::Rng;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// Cached estimate documents per collection (by query string).
const CACHED: usize = 8;

/// `POST /v1/collections`: resolves the request (every choice written out), stores the config and
/// serves it — all on a blocking thread that finishes even if the client goes away, so a stored
/// collection is always served. Under an `Idempotency-Key` the id is derived from the key, so a
/// retry returns the collection its first attempt stored (201 again) instead of a second one.
#[utoipa::path(post, path = "/v1/collections", operation_id = "createCollection", tag = "collections",
    security(("analyst" = [])),
    params(
        ("Idempotency-Key" = Option<String>, Header, description = "Optional, 1 to 64 of [A-Za-z0-9_-]: every retry of a create under one key names the same collection, so a create whose answer was lost is retried safely"),
        ("period" = Option<String>, Query, description = "The bucket period of continuous collection: `hour`, `day` (the default) or `week` (ISO weeks, from Monday 00:00 UTC); windows and series are whole buckets"),
        ("recurring" = Option<bool>, Query, description = "`true`: the collection recurs, asking each device for one report per period (the config's `recurring` names it; each period's report is charged to the device's budget, which must have one); default `false`: one report per device")
    ),
    request_body(content = harmony_protocol::NewCollection, content_type = "application/json"),
    responses(
        (status = 201, description = "Created: the id and the published config", body = harmony_protocol::Created,
            links(
                ("config" = (operation_id = "getConfig", parameters(("id" = "$response.body#/id")))),
                ("reports" = (operation_id = "postReports", parameters(("id" = "$response.body#/id")))),
                ("estimates" = (operation_id = "getEstimates", parameters(("id" = "$response.body#/id"))))
            )),
        (status = 400, description = "Invalid schema, epsilon or task, an unknown field, a name outside the documented character set or a cost over its limit (the field names it)", body = harmony_protocol::ErrorBody),
        (status = 401, description = "Missing, unknown or revoked token", body = harmony_protocol::ErrorBody),
        (status = 403, description = "Not the admin token", body = harmony_protocol::ErrorBody),
        (status = 409, description = "The Idempotency-Key already created a collection with another spec", body = harmony_protocol::ErrorBody),
        (status = 413, description = "Body over the size limit", body = harmony_protocol::ErrorBody),
        (status = 415, description = "Content-Type is not application/json", body = harmony_protocol::ErrorBody),
        (status = 501, description = "The store does not implement this task (model rounds)", body = harmony_protocol::ErrorBody),
        (status = 503, description = "Storage unavailable: retry", body = harmony_protocol::ErrorBody)
    ))]
pub async fn create(State(st): State<AppState>, req: axum::extract::Request) -> Result<Response, ApiError> {
    st.check_token(req.headers())?;
    let idempotency = idempotency_key(req.headers())?;
    let (period, recurring) = create_period(req.uri().query().unwrap_or(""))?;
    let body = read_body(req).await?;
    let st2 = st.clone();
    let created = blocking(move || {
        let (req, label) = parse_json::<NewCollection>(&body)?.split();
        // The typed parse succeeded, so the JSON does too; it finds unknown attribute fields.
        let raw: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
        crate::limits::check_request(&raw, &req)?;
        label.check().map_err(|(field, msg)| ApiError::bad(field, msg))?;
        let meta = crate::state::CollectionMeta::now(label);
        let id = match &idempotency {
            Some(k) => id_of_key(k),
            None => {
                let mut b = [0u8; 12];
                harmony_core::sampling::secure_rng().fill_bytes(&mut b);
                to_hex(&b)
            }
        };
        let (mut config, task) = harmony_tasks::create(&req, &id).map_err(|e| ApiError::from_core("", e))?;
        let rounds = config.task.kind().has_rounds() || crate::queries::is_adaptive(&config);
        if recurring && rounds {
            let msg =
                "a collection of rounds (\"train\", \"adaptive-rounds\") cannot recur: each device contributes once";
            return Err(ApiError::bad("recurring", msg));
        }
        config.recurring = recurring.then_some(period);
        if rounds && !st2.inner.store.supports_training() {
            let msg = "rounds (\"train\", \"adaptive-rounds\") are not implemented by this store";
            return Err(ApiError::new(StatusCode::NOT_IMPLEMENTED, "task", msg));
        }
        let mut col = Collection::with_task(0, config.clone(), task).map_err(|e| ApiError::bad("task", e))?;
        let text = serde_json::to_string(&config).expect("JSON of a config");
        let meta_text = serde_json::to_string(&meta).expect("JSON of a meta");
        let store = &st2.inner.store;
        let stored = if store.supports_buckets() {
            col = col.with_period(period);
            store.create_collection_with_period(&id, &text, &meta_text, period.seconds())
        } else {
            store.create_collection_meta(&id, &text, &meta_text)
        };
        match stored {
            Ok(key) => st2.insert(id.clone(), Collection { key, meta, ..col }),
            // A retry under the same Idempotency-Key: the stored collection, if it is this spec.
            Err(StoreError::Exists(_)) if idempotency.is_some() => match st2.adopt(&id).map_err(ApiError::store)? {
                Some(stored) if stored == config => {}
                _ => {
                    let msg = "this Idempotency-Key already created a collection with another spec";
                    return Err(ApiError::new(StatusCode::CONFLICT, "idempotency-key", msg));
                }
            },
            // The connection died during the commit: the collection may be stored. Serve it as
            // soon as the store says so; a retry under the same key returns it.
            Err(e @ StoreError::Db(_)) => {
                st2.adopt_later(id);
                return Err(ApiError::store(e));
            }
            Err(e) => return Err(ApiError::store(e)),
        }
        Ok(Created { id, config })
    })
    .await?;
    let c = &created.config;
    tracing::info!(collection = %created.id, task = c.task.kind().name(), epsilon = c.epsilon, "collection created");
    Ok((StatusCode::CREATED, axum::Json(created)).into_response())
}

/// The bucket period of a create, `?period=hour|day|week` (a day when absent), and whether the
/// collection recurs (`?recurring=true`: one report per device and period).
fn create_period(query: &str) -> Result<(Period, bool), ApiError> {
    let (mut period, mut recurring) = (Period::Day, false);
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("period", v)) => period = crate::buckets::parse_period("period", v)?,
            Some(("recurring", v)) => {
                recurring = match v {
                    "true" => true,
                    "false" => false,
                    _ => return Err(ApiError::bad("recurring", format!("recurring is {v:?}, expected true or false"))),
                }
            }
            _ => {
                let key = pair.split('=').next().unwrap_or(pair);
                return Err(ApiError::bad(
                    key,
                    format!("unknown query parameter {key:?}, expected period or recurring"),
                ));
            }
        }
    }
    Ok((period, recurring))
}

/// The optional `Idempotency-Key` header of a create: 1 to 64 of `[A-Za-z0-9_-]`.
fn idempotency_key(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    let Some(v) = headers.get("idempotency-key") else { return Ok(None) };
    match v.to_str() {
        Ok(k) if harmony_protocol::valid_report_id(k) => Ok(Some(k.to_string())),
        _ => Err(ApiError::bad("idempotency-key", "expected 1 to 64 characters [A-Za-z0-9_-]")),
    }
}

/// The collection id a create under Idempotency-Key `key` gets: 96 bits of SHA-256, so every
/// retry of one create names the same collection (and a different key another one).
fn id_of_key(key: &str) -> String {
    use sha2::{Digest, Sha256};
    let h = Sha256::digest(format!("harmony collection\0{key}").as_bytes());
    to_hex(&h[..12])
}

/// `GET /v1/collections/{id}/config`.
#[utoipa::path(get, path = "/v1/collections/{id}/config", operation_id = "getConfig", tag = "collections",
    params(("id" = String, Path, description = "The collection id")),
    responses(
        (status = 200, description = "Everything a device needs to randomize", body = harmony_protocol::CollectionConfig),
        (status = 404, description = "No such collection", body = harmony_protocol::ErrorBody),
        (status = 503, description = "The collection is quarantined (the message says why)", body = harmony_protocol::ErrorBody)
    ))]
pub async fn config(State(st): State<AppState>, Path(id): Path<String>) -> Result<Response, ApiError> {
    let c = st.collection(&id)?;
    Ok(axum::Json(c.config.clone()).into_response())
}

/// `GET /v1/collections/{id}/estimates[?ranges=…&quantiles=…]`: the task's estimate document.
///
/// Computed from a snapshot of the accumulator, off the async workers. The last documents are
/// kept per query: reused while no report arrived; for a task whose estimate is expensive
/// ([`harmony_tasks::Task::refresh_seconds`] > 0: heavy hitters' level search, CALM's fit) the
/// last document is served while a recomputation runs in the background, at most once per that
/// many seconds, so a query never waits for one but the first.
#[utoipa::path(get, path = "/v1/collections/{id}/estimates", operation_id = "getEstimates", tag = "collections",
    security(("analyst" = [])),
    params(
        ("id" = String, Path, description = "The collection id"),
        ("ranges" = Option<String>, Query, description = "`range`: ranges LO:HI in the attribute's units, comma-separated"),
        ("quantiles" = Option<String>, Query, description = "`range`: quantile levels in (0, 1), comma-separated (default 0.1,0.5,0.9)"),
        ("from" = Option<String>, Query, description = "A window's first instant (inclusive): an ISO date `YYYY-MM-DD` or a UTC timestamp `YYYY-MM-DDTHH:MM[:SS]Z` on a boundary of the collection's period; with `to`, or alone (open end)"),
        ("to" = Option<String>, Query, description = "The first instant after the window (exclusive), as `from`")
    ),
    responses(
        (status = 200, description = "The task's estimate document: every number with its standard error and 95% CI (null when there is none); with `from`/`to`, of the reports received in that window (a merge of bucket states)", body = harmony_protocol::EstimateDocument),
        (status = 400, description = "A bad query parameter", body = harmony_protocol::ErrorBody),
        (status = 401, description = "Missing, unknown or revoked token", body = harmony_protocol::ErrorBody),
        (status = 403, description = "A token of another collection, or the metrics token", body = harmony_protocol::ErrorBody),
        (status = 404, description = "No such collection", body = harmony_protocol::ErrorBody),
        (status = 501, description = "`from`/`to` on a collection without time windows (model or query rounds)", body = harmony_protocol::ErrorBody),
        (status = 503, description = "The collection is quarantined, or its accumulator must be rebuilt after a store failure and the store is unreachable: retry", body = harmony_protocol::ErrorBody)
    ))]
pub async fn estimates(
    State(st): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    st.check_reader(&headers, &id)?;
    let c = st.collection(&id)?;
    let raw = raw.unwrap_or_default();
    let (window, rest) = super::windows::split_params(&raw, &["from", "to"])?;
    let query = Query::parse(&rest).map_err(|(field, message)| ApiError::bad(field, message))?;
    if !window.is_empty() {
        let (from, to) = (window.get("from").map(|s| s.to_string()), window.get("to").map(|s| s.to_string()));
        let doc =
            blocking(move || super::windows::estimates_in(&st, &c, from.as_deref(), to.as_deref(), &query)).await?;
        return Ok(axum::Json(doc).into_response());
    }
    let store = st.inner.store.clone();
    let doc = blocking(move || {
        c.settle(store.as_ref(), true)?;
        estimate(&c, &raw, &query)
    })
    .await?;
    Ok(([(axum::http::header::CONTENT_TYPE, "application/json")], doc).into_response())
}

/// One UTC day's stored reports (`GET /v1/collections/{id}/days`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct DayCount {
    /// The UTC day the reports' batches were received, `YYYY-MM-DD`; `null` for reports stored
    /// before the store kept days.
    pub day: Option<String>,
    /// Reports stored that day.
    pub reports: u64,
}

/// `GET /v1/collections/{id}/days`: the stored reports per UTC day received (the dashboard's
/// per-day counts), counted by the store (SQLite: 10^6 reports in one `GROUP BY`).
#[utoipa::path(get, path = "/v1/collections/{id}/days", operation_id = "getDays", tag = "collections",
    security(("analyst" = [])),
    params(("id" = String, Path, description = "The collection id")),
    responses(
        (status = 200, description = "Stored reports per UTC day received, days ascending (none for a training collection: its gradients are counted per round)", body = Vec<DayCount>),
        (status = 401, description = "Missing, unknown or revoked token", body = harmony_protocol::ErrorBody),
        (status = 403, description = "A token of another collection, or the metrics token", body = harmony_protocol::ErrorBody),
        (status = 404, description = "No such collection", body = harmony_protocol::ErrorBody),
        (status = 503, description = "The collection is quarantined, or storage is unavailable: retry", body = harmony_protocol::ErrorBody)
    ))]
pub async fn days(
    State(st): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    st.check_reader(&headers, &id)?;
    let c = st.collection(&id)?;
    let store = st.inner.store.clone();
    let counts = blocking(move || store.day_counts(c.key).map_err(ApiError::store)).await?;
    let body: Vec<DayCount> =
        counts.into_iter().map(|(day, reports)| DayCount { day: day.map(civil_day), reports }).collect();
    Ok(axum::Json(body).into_response())
}

/// Days since 1970-01-01 as `YYYY-MM-DD` (proleptic Gregorian; H. Hinnant's `civil_from_days`).
pub fn civil_day(days: i32) -> String {
    let z = i64::from(days) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

fn train_document(c: &Collection, t: &crate::rounds::Training) -> EstimateDocument {
    let state = t.model();
    let reports = t.task.received_total(&state);
    let result = t.task.document(state);
    EstimateDocument { collection: c.config.id.clone(), reports, epsilon: c.config.epsilon, result }
}

/// A document as the JSON body of a response.
fn to_body(doc: &EstimateDocument) -> Result<Bytes, ApiError> {
    match serde_json::to_vec(doc) {
        Ok(json) => Ok(Bytes::from(json)),
        Err(e) => {
            tracing::error!(error = %e, "serializing an estimate document");
            let msg = "the estimate document did not serialize; the request was not completed";
            Err(ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "server", msg))
        }
    }
}

/// Computes a document from a fresh snapshot and caches it (serialized).
fn compute(c: &Collection, raw: &str, query: &Query) -> Result<Bytes, ApiError> {
    let snapshot = c.agg().clone_box();
    let n = snapshot.count();
    let result = c.task.estimate(snapshot.as_ref(), query).map_err(|e| ApiError::from_core("query: ", e))?;
    let doc =
        to_body(&EstimateDocument { collection: c.config.id.clone(), reports: n, epsilon: c.config.epsilon, result })?;
    let mut cache = c.cache.lock().unwrap_or_else(|p| p.into_inner());
    cache.retain(|k| k.query != raw);
    cache.truncate(CACHED - 1);
    cache.insert(0, Cached { query: raw.to_string(), count: n, at: Instant::now(), doc: doc.clone() });
    Ok(doc)
}

fn estimate(c: &Arc<Collection>, raw: &str, query: &Query) -> Result<Bytes, ApiError> {
    if let Some(t) = &c.train {
        return to_body(&train_document(c, t));
    }
    if c.adaptive {
        // Not cached: a posted query changes the document without a new answer, and it costs
        // O(queries).
        let snapshot = c.agg().clone_box();
        let result = c.task.estimate(snapshot.as_ref(), query).map_err(|e| ApiError::from_core("query: ", e))?;
        let (collection, epsilon) = (c.config.id.clone(), c.config.epsilon);
        return to_body(&EstimateDocument { collection, reports: snapshot.count(), epsilon, result });
    }
    let n = c.agg().count();
    let refresh = c.task.refresh_seconds();
    let cached = {
        let cache = c.cache.lock().unwrap_or_else(|p| p.into_inner());
        cache.iter().find(|k| k.query == raw).map(|k| (k.count, k.at, k.doc.clone()))
    };
    match cached {
        Some((count, _, doc)) if count == n => Ok(doc),
        Some((_, at, doc)) if refresh > 0.0 => {
            if at.elapsed().as_secs_f64() >= refresh && !c.refreshing.swap(true, Ordering::AcqRel) {
                let (c, raw, query) = (c.clone(), raw.to_string(), query.clone());
                std::thread::spawn(move || {
                    if let Err(e) = compute(&c, &raw, &query) {
                        tracing::warn!(collection = %c.config.id, field = %e.field, "background estimate failed");
                    }
                    c.refreshing.store(false, Ordering::Release);
                });
            }
            Ok(doc)
        }
        _ => compute(c, raw, query),
    }
}

#[cfg(test)]
mod day_tests {
    #[test]
    fn civil_days() {
        assert_eq!(super::civil_day(0), "1970-01-01");
        assert_eq!(super::civil_day(-1), "1969-12-31");
        assert_eq!(super::civil_day(11_016), "2000-02-29");
        assert_eq!(super::civil_day(20_419), "2025-11-27");
    }
}
