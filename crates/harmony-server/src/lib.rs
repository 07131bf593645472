//! The Harmony collection server (axum + tokio). Every analysis is a collection: the task
//! registry (harmony-tasks) builds each collection's task from its published config, and the
//! server stores, validates and aggregates its reports whatever the task.
//!
//! * `POST /v1/collections` (analyst): schema, ε and one task → a new immutable collection
//!   ([`api::collections`]).
//! * `GET /v1/collections/{id}/config` (public): everything a device needs to randomize.
//! * `POST /v1/collections/{id}/reports` (public): a batch of encoded reports with
//!   device-chosen ids ([`api::reports`]).
//! * `GET /v1/collections/{id}/estimates` (analyst): the task's estimate document, from
//!   accumulators updated per batch (no rescan), rebuilt from the stored reports on start.
//! * `GET /v1/collections/{id}/estimates?from=&to=`, `GET …/series`, `GET …/compare` (analyst):
//!   windows, one document per period and the change between two windows, all merges of
//!   bucket states ([`buckets`], [`api::windows`]).
//! * `GET /v1/collections/{id}/model`, `POST …/gradients`: model rounds ([`api::rounds`],
//!   [`rounds`]).
//! * `POST`/`GET /v1/collections/{id}/tokens`, `DELETE …/tokens/{token_id}` (admin),
//!   `GET /v1/collections`: per-collection analyst tokens ([`tokens`], [`api::tokens`]).
//! * `POST`/`GET /v1/collections/{id}/enrollments`, `DELETE …/enrollments/{device_id}` (admin):
//!   device keys of training collections that take enrolled devices only.
//! * `GET /openapi.json`, `GET /metrics` (Prometheus text; the metrics or admin token), `GET /healthz` (the process is up),
//!   `GET /readyz` (the state is loaded and the store answers).
//!
//! Logs (tracing) carry collection ids, counts and latencies, never report contents.
#![warn(missing_docs)]

pub mod api;
pub mod buckets;
pub mod compare;
pub mod conn;
pub mod error;
pub mod guard;
pub mod intake;
pub mod limits;
pub mod metrics;
pub mod openapi;
pub mod pg;
mod pg_copy;
pub mod queries;
pub mod replicas;
pub mod rounds;
pub mod run;
mod sqlite_wal;
pub mod state;
pub mod store;
pub mod tls;
pub mod tokens;

use axum::Router;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub use api::MAX_BODY;
pub use error::{ApiError, ServerError};
pub use guard::Limits;
pub use run::{
    Running, open_store, open_store_with, serve_forever, serve_forever_with, serve_state_forever,
    serve_state_forever_extended, serve_state_forever_tls, spawn, spawn_limits, spawn_state, spawn_tls, spawn_with,
};
pub use state::AppState;
pub use store::{SqliteStore, Store, StoreError};

/// `GET /openapi.json`: this server's OpenAPI 3.1 document ([`openapi`]).
#[utoipa::path(get, path = "/openapi.json", operation_id = "getOpenApi", tag = "server",
    responses((status = 200, description = "The OpenAPI 3.1 document", content_type = "application/json", body = Object)))]
async fn openapi_json() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], openapi::json()).into_response()
}

/// `GET /metrics`: Prometheus counters (batches, reports, duplicates, collections).
#[utoipa::path(get, path = "/metrics", operation_id = "getMetrics", tag = "server",
    security(("analyst" = [])),
    responses(
        (status = 200, description = "Prometheus text format 0.0.4", content_type = "text/plain", body = String),
        (status = 401, description = "Missing, unknown or revoked token", body = harmony_protocol::ErrorBody),
        (status = 403, description = "Neither the metrics nor the admin token", body = harmony_protocol::ErrorBody)
    ))]
async fn metrics(State(st): State<AppState>, headers: axum::http::HeaderMap) -> Result<Response, ApiError> {
    st.inner.tokens.metrics(&headers)?;
    let text = st.inner.metrics.render(st.count());
    Ok(([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response())
}

/// `GET /healthz`: the process is up.
#[utoipa::path(get, path = "/healthz", operation_id = "getHealth", tag = "server",
    responses((status = 200, description = "`ok`", content_type = "text/plain", body = String)))]
async fn healthz() -> &'static str {
    "ok"
}

/// `GET /readyz`: ready to serve — the collections are loaded (the server answers only once
/// they are), the store answers and, on a store shared with other servers, this one has merged
/// their changes within [`replicas::STALE`]; 503 naming the reason otherwise.
#[utoipa::path(get, path = "/readyz", operation_id = "getReady", tag = "server",
    responses(
        (status = 200, description = "Ready: `{\"status\": \"ready\", \"collections\": N, \"quarantined\": M}`, with `\"behind_ms\"` (since the last merge of the other servers' changes) on a store shared with other servers", content_type = "application/json", body = Object),
        (status = 503, description = "Not ready: the store does not answer, or a replica is behind (the message says why)", body = harmony_protocol::ErrorBody)
    ))]
async fn readyz(State(st): State<AppState>) -> Result<Response, ApiError> {
    use axum::http::StatusCode;
    let store = st.inner.store.clone();
    api::blocking(move || {
        store.ping().map_err(|e| {
            tracing::warn!(error = %e, "readiness: the store does not answer");
            ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "store", format!("the store does not answer: {e}"))
        })
    })
    .await?;
    let mut body =
        serde_json::json!({"status": "ready", "collections": st.count(), "quarantined": st.quarantined_count()});
    if let Some(r) = &st.inner.replica {
        let behind = r.behind_ms();
        if r.behind() {
            let msg = format!(
                "this replica is behind: its last merge of the other servers' changes was {behind} ms ago (bound {} ms)",
                replicas::STALE.as_millis()
            );
            return Err(ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "replica", msg));
        }
        body["behind_ms"] = behind.into();
    }
    Ok(axum::Json(body).into_response())
}

/// Every endpoint with its OpenAPI annotation: the router and the document come from this one
/// list, so they cannot disagree.
pub fn api_router() -> OpenApiRouter<AppState> {
    use api::{collections, reports, rounds, tokens};
    OpenApiRouter::with_openapi(openapi::ApiDoc::openapi())
        .routes(routes!(collections::create, tokens::collections))
        .routes(routes!(tokens::create, tokens::list))
        .routes(routes!(tokens::revoke))
        .routes(routes!(tokens::enroll, tokens::enrollments))
        .routes(routes!(tokens::revoke_device))
        .routes(routes!(collections::config))
        .routes(routes!(reports::post))
        .routes(routes!(collections::estimates))
        .routes(routes!(collections::days))
        .routes(routes!(api::windows::series))
        .routes(routes!(api::windows::compare))
        .routes(routes!(rounds::model))
        .routes(routes!(rounds::post_gradient))
        .routes(routes!(api::queries::current))
        .routes(routes!(api::queries::post_answer))
        .routes(routes!(api::queries::post_query))
        .routes(routes!(openapi_json))
        .routes(routes!(metrics))
        .routes(routes!(healthz))
        .routes(routes!(readyz))
}

/// The router with every endpoint and every layer.
pub fn router(state: AppState) -> Router {
    router_with(state, |r| r)
}

/// The router with `extend`'s routes added before the layers (body limit, panics → 500 JSON,
/// JSON 404/405): other crates (a dashboard's static assets) and tests add routes here.
pub fn router_with(state: AppState, extend: impl FnOnce(Router<AppState>) -> Router<AppState>) -> Router {
    router_with_limits(state, &Limits::default(), extend)
}

/// [`router_with`] with explicit timeouts and caps ([`Limits`]; the header timeout and the
/// connection cap are the accept loop's, [`run`]).
pub fn router_with_limits(
    state: AppState,
    limits: &Limits,
    extend: impl FnOnce(Router<AppState>) -> Router<AppState>,
) -> Router {
    let (router, doc) = api_router().split_for_parts();
    // The Content-Type check runs on the paths that take POST only: a POST to a GET-only path
    // is a 405 whatever its Content-Type.
    let posted: std::collections::HashSet<String> =
        doc.paths.paths.iter().filter(|(_, item)| item.post.is_some()).map(|(path, _)| path.clone()).collect();
    let check = axum::middleware::from_fn_with_state(std::sync::Arc::new(posted), guard::json_posts);
    let routed = extend(router.route_layer(check)).fallback(not_found);
    limit_layers(routed.with_state(state), limits)
}

/// The layers of [`router_with_limits`] (body limit, JSON bodies, panics → 500, body and
/// request timeouts, in-flight caps, JSON errors) around a router whose state is applied: the
/// shuffle relay (`harmony shuffle`) serves its own routes behind them and [`run::serve`].
pub fn with_limits(router: Router, limits: &Limits) -> Router {
    limit_layers(router.layer(axum::middleware::from_fn(guard::json_bodies)), limits)
}

/// Every layer but the Content-Type check, which [`router_with_limits`] puts on routed methods
/// and [`with_limits`] on every request.
fn limit_layers(router: Router, limits: &Limits) -> Router {
    use axum::middleware::{from_fn, from_fn_with_state};
    use tower_http::timeout::{RequestBodyDeadlineLayer, TimeoutLayer};
    router
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(panic_response))
        .layer(RequestBodyDeadlineLayer::new(limits.body_timeout))
        .layer(TimeoutLayer::with_status_code(axum::http::StatusCode::SERVICE_UNAVAILABLE, limits.request_timeout))
        .layer(from_fn_with_state(guard::Caps::new(limits), guard::caps))
        .layer(from_fn(guard::json_errors))
}

/// An unknown route: 404 in the JSON error format.
async fn not_found(uri: axum::http::Uri) -> ApiError {
    ApiError::new(axum::http::StatusCode::NOT_FOUND, "path", format!("no endpoint {:?}", uri.path()))
}

/// A panicking handler (an async one; blocking work is caught in [`api::blocking`]): 500 JSON.
fn panic_response(_: Box<dyn std::any::Any + Send + 'static>) -> Response {
    ApiError::internal("a panic in a handler").into_response()
}
