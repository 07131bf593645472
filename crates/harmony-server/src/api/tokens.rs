//! Per-collection analyst tokens (admin token): `POST`/`GET /v1/collections/{id}/tokens`,
//! `DELETE …/tokens/{token_id}`; and `GET /v1/collections` (admin: every collection; an
//! analyst token: its own); device keys of training collections that take enrolled devices
//! only: `POST`/`GET …/enrollments`, `DELETE …/enrollments/{device_id}`. See [`crate::tokens`].

use super::{blocking, read_body};
use crate::error::{ApiError, parse_object};
use crate::state::AppState;
use crate::tokens::{Access, MAX_ENROLL, check_label};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use harmony_protocol::{CollectionSummary, EnrollRequest, Enrolled, TokenCreated, TokenInfo, TokenRequest};

/// `POST /v1/collections/{id}/tokens`: a new analyst token of the collection, shown once.
#[utoipa::path(post, path = "/v1/collections/{id}/tokens", operation_id = "createToken", tag = "tokens",
    security(("analyst" = [])),
    params(("id" = String, Path, description = "The collection id")),
    request_body(content = harmony_protocol::TokenRequest, content_type = "application/json"),
    responses(
        (status = 201, description = "The token (shown this once; the server keeps its SHA-256)", body = harmony_protocol::TokenCreated),
        (status = 400, description = "A label outside `[A-Za-z0-9 _.@-]{0,64}` or a body that does not parse", body = harmony_protocol::ErrorBody),
        (status = 401, description = "Missing, unknown or revoked token", body = harmony_protocol::ErrorBody),
        (status = 403, description = "Not the admin token", body = harmony_protocol::ErrorBody),
        (status = 404, description = "No such collection", body = harmony_protocol::ErrorBody),
        (status = 415, description = "Content-Type is not application/json", body = harmony_protocol::ErrorBody),
        (status = 503, description = "Storage unavailable: retry", body = harmony_protocol::ErrorBody)
    ))]
pub async fn create(
    State(st): State<AppState>,
    Path(id): Path<String>,
    req: axum::extract::Request,
) -> Result<Response, ApiError> {
    st.check_token(req.headers())?;
    st.collection(&id)?;
    let body = read_body(req).await?;
    let st2 = st.clone();
    let created: TokenCreated = blocking(move || {
        let req: TokenRequest = parse_object(&body)?;
        check_label(&req.label)?;
        st2.inner.tokens.mint(st2.inner.store.as_ref(), &id, &req.label).map_err(ApiError::store)
    })
    .await?;
    tracing::info!(collection = %created.collection, token_id = %created.token_id, "analyst token created");
    Ok((StatusCode::CREATED, axum::Json(created)).into_response())
}

/// `GET /v1/collections/{id}/tokens`: the collection's analyst tokens (never the tokens).
#[utoipa::path(get, path = "/v1/collections/{id}/tokens", operation_id = "listTokens", tag = "tokens",
    security(("analyst" = [])),
    params(("id" = String, Path, description = "The collection id")),
    responses(
        (status = 200, description = "The tokens, oldest first", body = Vec<harmony_protocol::TokenInfo>),
        (status = 401, description = "Missing, unknown or revoked token", body = harmony_protocol::ErrorBody),
        (status = 403, description = "Not the admin token", body = harmony_protocol::ErrorBody),
        (status = 404, description = "No such collection", body = harmony_protocol::ErrorBody)
    ))]
pub async fn list(
    State(st): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    st.check_token(&headers)?;
    st.collection(&id)?;
    let tokens: Vec<TokenInfo> = st.inner.tokens.list(&id);
    Ok(axum::Json(tokens).into_response())
}

/// `DELETE /v1/collections/{id}/tokens/{token_id}`: revokes a token; refused from then on.
#[utoipa::path(delete, path = "/v1/collections/{id}/tokens/{token_id}", operation_id = "revokeToken", tag = "tokens",
    security(("analyst" = [])),
    params(
        ("id" = String, Path, description = "The collection id"),
        ("token_id" = String, Path, description = "The token's id")
    ),
    responses(
        (status = 204, description = "Revoked (also when it already was)"),
        (status = 401, description = "Missing, unknown or revoked token", body = harmony_protocol::ErrorBody),
        (status = 403, description = "Not the admin token", body = harmony_protocol::ErrorBody),
        (status = 404, description = "No such collection or token", body = harmony_protocol::ErrorBody),
        (status = 503, description = "Storage unavailable: retry", body = harmony_protocol::ErrorBody)
    ))]
pub async fn revoke(
    State(st): State<AppState>,
    headers: HeaderMap,
    Path((id, token_id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    st.check_token(&headers)?;
    st.collection(&id)?;
    let st2 = st.clone();
    let (id2, tid) = (id.clone(), token_id.clone());
    let found =
        blocking(move || st2.inner.tokens.revoke(st2.inner.store.as_ref(), &id2, &tid).map_err(ApiError::store))
            .await?;
    if !found {
        let msg = format!("collection {id:?} has no token {token_id:?}");
        return Err(ApiError::new(StatusCode::NOT_FOUND, "token_id", msg));
    }
    tracing::info!(collection = %id, token_id = %token_id, "analyst token revoked");
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `GET /v1/collections`: the collections this token reads, by id.
#[utoipa::path(get, path = "/v1/collections", operation_id = "listCollections", tag = "collections",
    security(("analyst" = [])),
    responses(
        (status = 200, description = "Every collection (admin token) or the token's own", body = Vec<harmony_protocol::CollectionSummary>),
        (status = 401, description = "Missing, unknown or revoked token", body = harmony_protocol::ErrorBody),
        (status = 403, description = "The metrics token", body = harmony_protocol::ErrorBody)
    ))]
pub async fn collections(State(st): State<AppState>, headers: HeaderMap) -> Result<Response, ApiError> {
    let ids = match st.inner.tokens.access(&headers)? {
        Access::Admin => st.ids(),
        Access::Collection(id) => vec![id],
        Access::Metrics => {
            return Err(ApiError::new(StatusCode::FORBIDDEN, "authorization", "the metrics token reads /metrics only"));
        }
    };
    let list: Vec<CollectionSummary> = ids
        .into_iter()
        .filter_map(|id| {
            let c = st.collection(&id).ok()?;
            Some(CollectionSummary {
                task: c.config.task.kind().name().to_string(),
                epsilon: c.config.epsilon,
                reports: c.count(),
                name: c.meta.name.clone(),
                description: c.meta.description.clone(),
                created: c.meta.created.clone(),
                id,
            })
        })
        .collect();
    Ok(axum::Json(list).into_response())
}

/// Whether collection `c` takes enrolled devices only (a `train` or `adaptive-rounds` spec with
/// `enrollment`).
pub fn takes_enrollment(c: &crate::state::Collection) -> bool {
    c.config.task.enrollment()
}

/// The enrolled device a round post comes from: `None` for a collection open to any device id;
/// otherwise the key's device (401/403 before the body is read), which must be the post's.
pub fn enrolled_device(
    st: &AppState,
    c: &crate::state::Collection,
    headers: &HeaderMap,
) -> Result<Option<String>, ApiError> {
    match takes_enrollment(c) {
        true => Ok(Some(st.inner.tokens.device(headers, &c.config.id)?)),
        false => Ok(None),
    }
}

/// Refuses (403 naming `device_id`) a post whose device id is not its key's.
pub fn check_device(enrolled: Option<&str>, device_id: &str) -> Result<(), ApiError> {
    match enrolled {
        Some(device) if device != device_id => {
            let msg = format!("this device key is enrolled as {device:?}, the post says {device_id:?}");
            Err(ApiError::new(StatusCode::FORBIDDEN, "device_id", msg))
        }
        _ => Ok(()),
    }
}

/// `POST /v1/collections/{id}/enrollments`: device keys of a training collection created with
/// enrollment (the default of train and adaptive-rounds), shown once.
#[utoipa::path(post, path = "/v1/collections/{id}/enrollments", operation_id = "enrollDevices", tag = "tokens",
    security(("analyst" = [])),
    params(("id" = String, Path, description = "The collection id")),
    request_body(content = harmony_protocol::EnrollRequest, content_type = "application/json"),
    responses(
        (status = 201, description = "The devices and their keys (shown this once; the server keeps their SHA-256)", body = harmony_protocol::Enrolled),
        (status = 400, description = "A count outside 1..=10000, a bad label, or a body that does not parse", body = harmony_protocol::ErrorBody),
        (status = 401, description = "Missing, unknown or revoked token", body = harmony_protocol::ErrorBody),
        (status = 403, description = "Not the admin token", body = harmony_protocol::ErrorBody),
        (status = 404, description = "No such collection", body = harmony_protocol::ErrorBody),
        (status = 409, description = "The collection does not take enrolled devices", body = harmony_protocol::ErrorBody),
        (status = 415, description = "Content-Type is not application/json", body = harmony_protocol::ErrorBody),
        (status = 503, description = "Storage unavailable: retry", body = harmony_protocol::ErrorBody)
    ))]
pub async fn enroll(
    State(st): State<AppState>,
    Path(id): Path<String>,
    req: axum::extract::Request,
) -> Result<Response, ApiError> {
    st.check_token(req.headers())?;
    if !takes_enrollment(&*st.collection(&id)?) {
        let msg = format!(
            "collection {id:?} does not take enrolled devices (its rounds are open: created with \"enrollment\": false, or not a train or adaptive-rounds task)"
        );
        return Err(ApiError::new(StatusCode::CONFLICT, "collection", msg));
    }
    let body = read_body(req).await?;
    let st2 = st.clone();
    let id2 = id.clone();
    let devices = blocking(move || {
        let req: EnrollRequest = parse_object(&body)?;
        check_label(&req.label)?;
        if !(1..=MAX_ENROLL).contains(&req.count) {
            return Err(ApiError::bad("count", format!("count is {}, expected 1 to {MAX_ENROLL}", req.count)));
        }
        st2.inner.tokens.enroll(st2.inner.store.as_ref(), &id2, req.count, &req.label).map_err(ApiError::store)
    })
    .await?;
    tracing::info!(collection = %id, devices = devices.len(), "devices enrolled");
    Ok((StatusCode::CREATED, axum::Json(Enrolled { collection: id, devices })).into_response())
}

/// `GET /v1/collections/{id}/enrollments`: the enrolled devices (never their keys).
#[utoipa::path(get, path = "/v1/collections/{id}/enrollments", operation_id = "listEnrollments", tag = "tokens",
    security(("analyst" = [])),
    params(("id" = String, Path, description = "The collection id")),
    responses(
        (status = 200, description = "The devices (`token_id` is the device id), oldest first", body = Vec<harmony_protocol::TokenInfo>),
        (status = 401, description = "Missing, unknown or revoked token", body = harmony_protocol::ErrorBody),
        (status = 403, description = "Not the admin token", body = harmony_protocol::ErrorBody),
        (status = 404, description = "No such collection", body = harmony_protocol::ErrorBody)
    ))]
pub async fn enrollments(
    State(st): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    st.check_token(&headers)?;
    st.collection(&id)?;
    Ok(axum::Json(st.inner.tokens.devices(&id)).into_response())
}

/// `DELETE /v1/collections/{id}/enrollments/{device_id}`: revokes a device's key.
#[utoipa::path(delete, path = "/v1/collections/{id}/enrollments/{device_id}", operation_id = "revokeDevice", tag = "tokens",
    security(("analyst" = [])),
    params(
        ("id" = String, Path, description = "The collection id"),
        ("device_id" = String, Path, description = "The enrolled device's id")
    ),
    responses(
        (status = 204, description = "Revoked (also when it already was)"),
        (status = 401, description = "Missing, unknown or revoked token", body = harmony_protocol::ErrorBody),
        (status = 403, description = "Not the admin token", body = harmony_protocol::ErrorBody),
        (status = 404, description = "No such collection or device", body = harmony_protocol::ErrorBody),
        (status = 503, description = "Storage unavailable: retry", body = harmony_protocol::ErrorBody)
    ))]
pub async fn revoke_device(
    State(st): State<AppState>,
    headers: HeaderMap,
    Path((id, device_id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    st.check_token(&headers)?;
    st.collection(&id)?;
    let found = device_id.starts_with(crate::tokens::DEVICE_ID_PREFIX) && {
        let (st2, id2, dev) = (st.clone(), id.clone(), device_id.clone());
        blocking(move || st2.inner.tokens.revoke(st2.inner.store.as_ref(), &id2, &dev).map_err(ApiError::store)).await?
    };
    if !found {
        let msg = format!("collection {id:?} has no enrolled device {device_id:?}");
        return Err(ApiError::new(StatusCode::NOT_FOUND, "device_id", msg));
    }
    tracing::info!(collection = %id, device_id = %device_id, "device key revoked");
    Ok(StatusCode::NO_CONTENT.into_response())
}
