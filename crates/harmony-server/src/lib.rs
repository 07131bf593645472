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
pub mod pg;
pub mod rounds;
pub mod run;
pub mod state;
pub mod store;

use axum::Router;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

pub use api::MAX_BODY;
pub use error::{ApiError, ServerError};
pub use run::{Running, open_store, serve_forever, spawn};
pub use state::AppState;
pub use store::{SqliteStore, Store, StoreError};

/// The OpenAPI 3.1 document.
pub const OPENAPI: &str = include_str!("../../../docs/openapi.json");

async fn openapi() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], OPENAPI).into_response()
}

async fn metrics(State(st): State<AppState>) -> Response {
    let text = st.inner.metrics.render(st.count());
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

/// The router with every endpoint.
pub fn router(state: AppState) -> Router {
    use api::{collections, reports, rounds};
    Router::new()
        .route("/v1/collections", post(collections::create))
        .route("/v1/collections/{id}/config", get(collections::config))
        .route("/v1/collections/{id}/reports", post(reports::post))
        .route("/v1/collections/{id}/estimates", get(collections::estimates))
        .route("/v1/collections/{id}/model", get(rounds::model))
        .route("/v1/collections/{id}/gradients", post(rounds::post_gradient))
        .route("/openapi.json", get(openapi))
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok" }))
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(state)
}
