//! Adaptive query rounds: `GET …/query` and `POST …/answers` (devices), `POST …/queries` (the
//! analyst's next query). The round rule: [`harmony_tasks::linear_rounds`].

use super::{blocking, read_body};
use crate::error::{ApiError, parse_json};
use crate::state::{AppState, Collection};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use harmony_protocol::{AnswerPost, from_hex_into, valid_report_id};
use std::sync::Arc;

/// The collection, or 404 when it does not run adaptive query rounds.
fn adaptive(st: &AppState, id: &str) -> Result<Arc<Collection>, ApiError> {
    let c = st.collection(id)?;
    if !c.adaptive {
        let msg = format!("collection {id:?} has no linear-queries task with mechanism \"adaptive-rounds\"");
        return Err(ApiError::new(StatusCode::NOT_FOUND, "collection", msg));
    }
    Ok(c)
}

/// `GET /v1/collections/{id}/query`.
#[utoipa::path(get, path = "/v1/collections/{id}/query", operation_id = "getQueryRound", tag = "rounds",
    params(("id" = String, Path, description = "The collection id")),
    responses(
        (status = 200, description = "The current round: its query, r_t, answers received, whether it is open", body = harmony_protocol::QueryRound),
        (status = 404, description = "No such collection, or it does not run adaptive query rounds", body = harmony_protocol::ErrorBody),
        (status = 503, description = "The collection is quarantined, or its rounds must be reloaded while the store does not answer", body = harmony_protocol::ErrorBody)
    ))]
pub async fn current(State(st): State<AppState>, Path(id): Path<String>) -> Result<Response, ApiError> {
    let c = adaptive(&st, &id)?;
    let store = st.inner.store.clone();
    let out = blocking(move || crate::queries::current(store.as_ref(), &c)).await?;
    Ok(axum::Json(out).into_response())
}

/// Checks an answer's device id and hex; returns the report's bytes.
fn decode(post: &AnswerPost) -> Result<Vec<u8>, ApiError> {
    if !valid_report_id(&post.device_id) {
        let msg = format!("device id of {} bytes, expected 1 to 64 characters [A-Za-z0-9_-]", post.device_id.len());
        return Err(ApiError::bad("device_id", msg));
    }
    if post.report.len() > 64 {
        return Err(ApiError::bad("report", format!("{} hex characters, expected at most 64", post.report.len())));
    }
    let mut buf = Vec::new();
    if from_hex_into(&post.report, &mut buf).is_none() {
        return Err(ApiError::bad("report", "not hex: expected an even number of [0-9a-f]"));
    }
    Ok(buf)
}

/// `POST /v1/collections/{id}/answers`: one device's answer to the open round.
#[utoipa::path(post, path = "/v1/collections/{id}/answers", operation_id = "postAnswer", tag = "rounds",
    params(("id" = String, Path, description = "The collection id")),
    request_body(content = harmony_protocol::AnswerPost, content_type = "application/json"),
    responses(
        (status = 200, description = "Stored and counted in the round", body = harmony_protocol::AnswerAck),
        (status = 400, description = "A bad device id or report", body = harmony_protocol::ErrorBody),
        (status = 401, description = "A collection of enrolled devices: the device key is missing, unknown or revoked", body = harmony_protocol::ErrorBody),
        (status = 403, description = "A collection of enrolled devices: another collection's key, or a device id that is not the key's", body = harmony_protocol::ErrorBody),
        (status = 404, description = "No such collection, or it does not run adaptive query rounds", body = harmony_protocol::ErrorBody),
        (status = 409, description = "Not the open round (`round`: another round, or the round is full), or a device's second answer (`device_id`)", body = harmony_protocol::ErrorBody),
        (status = 413, description = "Body over the size limit", body = harmony_protocol::ErrorBody),
        (status = 415, description = "Content-Type is not application/json", body = harmony_protocol::ErrorBody),
        (status = 503, description = "Storage unavailable or the collection quarantined: retry", body = harmony_protocol::ErrorBody)
    ))]
pub async fn post_answer(
    State(st): State<AppState>,
    Path(id): Path<String>,
    req: axum::extract::Request,
) -> Result<Response, ApiError> {
    let c = adaptive(&st, &id)?;
    // A collection of enrolled devices: the key is checked before the body is read.
    let enrolled = super::tokens::enrolled_device(&st, &c, req.headers())?;
    let body = read_body(req).await?;
    let store = st.inner.store.clone();
    let result = blocking(move || {
        let post: AnswerPost = parse_json(&body)?;
        super::tokens::check_device(enrolled.as_deref(), &post.device_id)?;
        let bytes = decode(&post)?;
        crate::queries::answer(store.as_ref(), &c, &post, &bytes)
    })
    .await;
    match &result {
        Ok(ack) => tracing::debug!(collection = %id, round = ack.round, full = ack.full, "answer stored"),
        Err(e) => tracing::info!(collection = %id, status = e.status.as_u16(), field = %e.field, "answer rejected"),
    }
    result.map(|ack| axum::Json(ack).into_response())
}

/// `POST /v1/collections/{id}/queries`: the analyst's next query (one query object), which opens
/// the next round once every round is full.
#[utoipa::path(post, path = "/v1/collections/{id}/queries", operation_id = "postQuery", tag = "rounds",
    security(("analyst" = [])),
    params(("id" = String, Path, description = "The collection id")),
    request_body(content = Object, content_type = "application/json",
        description = "One query over the collection's domain: `{\"range\": [a, b]}`, `{\"in\": [labels]}`, `{\"weights\": [...]}` or `{\"and\": [...]}`, with optional `name` and `attribute`"),
    responses(
        (status = 200, description = "The round the query opened", body = harmony_protocol::QueryRound),
        (status = 400, description = "A query that does not parse over the domain (`query`)", body = harmony_protocol::ErrorBody),
        (status = 401, description = "Missing, unknown or revoked token", body = harmony_protocol::ErrorBody),
        (status = 403, description = "A token of another collection, or the metrics token", body = harmony_protocol::ErrorBody),
        (status = 404, description = "No such collection, or it does not run adaptive query rounds", body = harmony_protocol::ErrorBody),
        (status = 409, description = "A round is still open (`round`: the message gives its answers and the batch size), or another query was posted meanwhile", body = harmony_protocol::ErrorBody),
        (status = 415, description = "Content-Type is not application/json", body = harmony_protocol::ErrorBody),
        (status = 503, description = "Storage unavailable or the collection quarantined: retry", body = harmony_protocol::ErrorBody)
    ))]
pub async fn post_query(
    State(st): State<AppState>,
    Path(id): Path<String>,
    req: axum::extract::Request,
) -> Result<Response, ApiError> {
    st.check_reader(req.headers(), &id)?;
    let c = adaptive(&st, &id)?;
    let body = read_body(req).await?;
    let store = st.inner.store.clone();
    let state = blocking(move || {
        let query: serde_json::Value = parse_json(&body)?;
        crate::limits::check_text(&query, "query")?;
        crate::queries::post_query(store.as_ref(), &c, &query)
    })
    .await?;
    Ok(axum::Json(state).into_response())
}
