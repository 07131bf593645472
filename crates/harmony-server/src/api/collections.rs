//! `POST /v1/collections` (analyst), `GET …/config` (public), `GET …/estimates` (analyst).

use super::{Body, blocking, body_bytes};
use crate::error::{ApiError, parse_json};
use crate::state::{AppState, Collection};
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use harmony_protocol::estimates::{EstimateDocument, Query, TaskEstimate, TrainEstimate};
use harmony_protocol::{CreateCollection, Created, to_hex};
use rand::Rng;
use std::sync::Arc;

/// Cached estimate documents per collection (by query string).
const CACHED: usize = 8;

/// `POST /v1/collections`: resolves the request (every choice written out), stores the config and
/// serves it — all on a blocking thread that finishes even if the client goes away, so a stored
/// collection is always served.
pub async fn create(State(st): State<AppState>, headers: HeaderMap, body: Body) -> Result<Response, ApiError> {
    st.check_token(&headers)?;
    let body = body_bytes(body)?;
    let st2 = st.clone();
    let created = blocking(move || {
        let req: CreateCollection = parse_json(&body)?;
        let id = {
            let mut b = [0u8; 12];
            harmony_core::sampling::secure_rng().fill_bytes(&mut b);
            to_hex(&b)
        };
        let config = harmony_tasks::resolve(&req, &id).map_err(|e| ApiError::from_core("", e))?;
        if config.task.kind().has_rounds() && !st2.inner.store.supports_training() {
            let msg = "model rounds (\"train\") are not implemented by this store";
            return Err(ApiError::new(StatusCode::NOT_IMPLEMENTED, "task", msg));
        }
        let col = Collection::new(0, config.clone()).map_err(|e| ApiError::bad("task", e))?;
        let text = serde_json::to_string(&config).expect("JSON of a config");
        let key = st2.inner.store.create_collection(&id, &text).map_err(ApiError::store)?;
        st2.insert(id.clone(), Collection { key, ..col });
        Ok(Created { id, config })
    })
    .await?;
    let c = &created.config;
    tracing::info!(collection = %created.id, task = c.task.kind().name(), epsilon = c.epsilon, "collection created");
    Ok((StatusCode::CREATED, axum::Json(created)).into_response())
}

/// `GET /v1/collections/{id}/config`.
pub async fn config(State(st): State<AppState>, Path(id): Path<String>) -> Result<Response, ApiError> {
    let c = st.collection(&id)?;
    Ok(axum::Json(c.config.clone()).into_response())
}

/// `GET /v1/collections/{id}/estimates[?ranges=…&quantiles=…]`: the task's estimate document.
/// Computed from a snapshot of the accumulator off the async workers; the last few documents
/// are cached by query and reused while no report arrived.
pub async fn estimates(
    State(st): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    st.check_token(&headers)?;
    let c = st.collection(&id)?;
    let raw = raw.unwrap_or_default();
    let query = Query::parse(&raw).map_err(|(field, message)| ApiError::bad(field, message))?;
    let doc = blocking(move || estimate(&c, &raw, &query)).await?;
    Ok(axum::Json(doc.as_ref()).into_response())
}

fn estimate(c: &Collection, raw: &str, query: &Query) -> Result<Arc<EstimateDocument>, ApiError> {
    if let Some(t) = &c.train {
        let state = t.model();
        let reports = t.task.received_total(&state);
        let result = TaskEstimate::Train(TrainEstimate { features: t.task.features().to_vec(), state });
        return Ok(Arc::new(EstimateDocument {
            collection: c.config.id.clone(),
            reports,
            epsilon: c.config.epsilon,
            result,
        }));
    }
    let snapshot = c.agg().clone_box();
    let n = snapshot.count();
    {
        let cache = c.cache.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, _, doc)) = cache.iter().find(|(q, count, _)| q == raw && *count == n) {
            return Ok(doc.clone());
        }
    }
    let result = c.task.estimate(snapshot.as_ref(), query).map_err(|e| ApiError::from_core("query: ", e))?;
    let doc =
        Arc::new(EstimateDocument { collection: c.config.id.clone(), reports: n, epsilon: c.config.epsilon, result });
    let mut cache = c.cache.lock().unwrap_or_else(|p| p.into_inner());
    cache.retain(|(q, count, _)| q != raw && *count == n);
    cache.truncate(CACHED - 1);
    cache.insert(0, (raw.to_string(), n, doc.clone()));
    Ok(doc)
}
