//! `GET …/model` and `POST …/gradients` of training collections.

use super::{blocking, read_body};
use crate::error::{ApiError, parse_json};
use crate::state::{AppState, Collection};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use harmony_protocol::{GradientPost, MAX_REPORT_BYTES, from_hex_into, valid_report_id};
use std::sync::Arc;

fn training(c: &Collection, id: &str) -> Result<(), ApiError> {
    match &c.train {
        Some(_) => Ok(()),
        None => {
            Err(ApiError::new(StatusCode::NOT_FOUND, "collection", format!("collection {id:?} has no \"train\" task")))
        }
    }
}

/// `GET /v1/collections/{id}/model`.
#[utoipa::path(get, path = "/v1/collections/{id}/model", operation_id = "getModel", tag = "rounds",
    params(("id" = String, Path, description = "The collection id")),
    responses(
        (status = 200, description = "The current round and model", body = harmony_protocol::ModelState),
        (status = 404, description = "No such collection, or it has no train task", body = harmony_protocol::ErrorBody),
        (status = 503, description = "The collection is quarantined, or its round must be reloaded while the store does not answer", body = harmony_protocol::ErrorBody)
    ))]
pub async fn model(State(st): State<AppState>, Path(id): Path<String>) -> Result<Response, ApiError> {
    let c = st.collection(&id)?;
    training(&c, &id)?;
    let t = c.train.as_ref().expect("checked by `training`");
    let out = if t.is_stale() {
        let store = st.inner.store.clone();
        blocking(move || c.train.as_ref().expect("checked").model_settled(store.as_ref(), c.key)).await?
    } else {
        t.model()
    };
    Ok(axum::Json(out).into_response())
}

/// Checks a gradient post's id and report and decodes it.
fn decode(c: &Collection, post: &GradientPost) -> Result<(harmony_tasks::train::GradientReport, Vec<u8>), ApiError> {
    if !valid_report_id(&post.device_id) {
        let msg = format!("device id of {} bytes, expected 1 to 64 characters [A-Za-z0-9_-]", post.device_id.len());
        return Err(ApiError::bad("device_id", msg));
    }
    if post.report.len() > 2 * MAX_REPORT_BYTES {
        let msg = format!("{} hex characters, expected at most {}", post.report.len(), 2 * MAX_REPORT_BYTES);
        return Err(ApiError::bad("report", msg));
    }
    let mut buf = Vec::new();
    if from_hex_into(&post.report, &mut buf).is_none() {
        return Err(ApiError::bad("report", "not hex: expected an even number of [0-9a-f]"));
    }
    let t = c.train.as_ref().expect("checked by `training`");
    let report = t.task.decode(&buf).map_err(|e| ApiError::from_core("report: ", e))?;
    Ok((report, buf))
}

/// `POST /v1/collections/{id}/gradients`: one device's gradient for the current round.
#[utoipa::path(post, path = "/v1/collections/{id}/gradients", operation_id = "postGradient", tag = "rounds",
    params(("id" = String, Path, description = "The collection id")),
    request_body(content = harmony_protocol::GradientPost, content_type = "application/json"),
    responses(
        (status = 200, description = "Stored and counted in the round", body = harmony_protocol::GradientAck),
        (status = 400, description = "A bad device id or report", body = harmony_protocol::ErrorBody),
        (status = 401, description = "A collection of enrolled devices: the device key is missing, unknown or revoked", body = harmony_protocol::ErrorBody),
        (status = 403, description = "A collection of enrolled devices: another collection's key, or a device id that is not the key's", body = harmony_protocol::ErrorBody),
        (status = 404, description = "No such collection, or it has no train task", body = harmony_protocol::ErrorBody),
        (status = 409, description = "Not the current round, a device's second gradient, or training is done", body = harmony_protocol::ErrorBody),
        (status = 413, description = "Body over the size limit", body = harmony_protocol::ErrorBody),
        (status = 415, description = "Content-Type is not application/json", body = harmony_protocol::ErrorBody),
        (status = 503, description = "Storage unavailable or the collection quarantined: retry", body = harmony_protocol::ErrorBody)
    ))]
pub async fn post_gradient(
    State(st): State<AppState>,
    Path(id): Path<String>,
    req: axum::extract::Request,
) -> Result<Response, ApiError> {
    let c: Arc<Collection> = st.collection(&id)?;
    training(&c, &id)?;
    // A collection of enrolled devices: the key is checked before the body is read.
    let enrolled = super::tokens::enrolled_device(&st, &c, req.headers())?;
    let body = read_body(req).await?;
    let store = st.inner.store.clone();
    let result = blocking(move || {
        let post: GradientPost = parse_json(&body)?;
        super::tokens::check_device(enrolled.as_deref(), &post.device_id)?;
        let (report, bytes) = decode(&c, &post)?;
        let t = c.train.as_ref().expect("checked by `training`");
        t.post(store.as_ref(), c.key, &post, &report, &bytes)
    })
    .await;
    match &result {
        Ok(ack) => tracing::debug!(collection = %id, round = ack.round, advanced = ack.advanced, "gradient stored"),
        Err(e) => tracing::info!(collection = %id, status = e.status.as_u16(), field = %e.field, "gradient rejected"),
    }
    result.map(|ack| axum::Json(ack).into_response())
}
