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
//! * `GET /v1/collections/{id}/model`, `POST …/gradients`: model rounds ([`api::rounds`],
//!   [`rounds`]).
//! * `GET /openapi.json`, `GET /metrics` (Prometheus text), `GET /healthz`.
//!
//! Logs (tracing) carry collection ids, counts and latencies, never report contents.
#![warn(missing_docs)]

pub mod api;
pub mod error;
pub mod metrics;
pub mod openapi;
pub mod pg;
pub mod rounds;
pub mod run;
pub mod state;
pub mod store;

use axum::Router;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub use api::MAX_BODY;
pub use error::{ApiError, ServerError};
pub use run::{Running, open_store, serve_forever, spawn, spawn_with};
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
    responses((status = 200, description = "Prometheus text format 0.0.4", content_type = "text/plain", body = String)))]
async fn metrics(State(st): State<AppState>) -> Response {
    let text = st.inner.metrics.render(st.count());
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

/// `GET /healthz`: the process is up.
#[utoipa::path(get, path = "/healthz", operation_id = "getHealth", tag = "server",
    responses((status = 200, description = "`ok`", content_type = "text/plain", body = String)))]
async fn healthz() -> &'static str {
    "ok"
}

/// Every endpoint with its OpenAPI annotation: the router and the document come from this one
/// list, so they cannot disagree.
pub fn api_router() -> OpenApiRouter<AppState> {
    use api::{collections, reports, rounds};
    OpenApiRouter::with_openapi(openapi::ApiDoc::openapi())
        .routes(routes!(collections::create))
        .routes(routes!(collections::config))
        .routes(routes!(reports::post))
        .routes(routes!(collections::estimates))
        .routes(routes!(rounds::model))
        .routes(routes!(rounds::post_gradient))
        .routes(routes!(openapi_json))
        .routes(routes!(metrics))
        .routes(routes!(healthz))
}

/// The router with every endpoint and every layer.
pub fn router(state: AppState) -> Router {
    router_with(state, |r| r)
}

/// The router with `extend`'s routes added before the layers (body limit, panics → 500 JSON,
/// JSON 404/405): other crates (a dashboard's static assets) and tests add routes here.
pub fn router_with(state: AppState, extend: impl FnOnce(Router<AppState>) -> Router<AppState>) -> Router {
    let (router, _) = api_router().split_for_parts();
    extend(router)
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(panic_response))
        .with_state(state)
}

/// A panicking handler (an async one; blocking work is caught in [`api::blocking`]): 500 JSON.
fn panic_response(_: Box<dyn std::any::Any + Send + 'static>) -> Response {
    ApiError::internal("a panic in a handler").into_response()
}
