//! The server's one error type: a status and `{"error": {"field", "message"}}`.

use crate::store::StoreError;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use harmony_protocol::{ErrorBody, ErrorDetail};

/// An HTTP error: a status, the field it is about and a message naming the value and what was
/// expected.
#[derive(Debug)]
pub struct ApiError {
    /// The status.
    pub status: StatusCode,
    /// The offending field.
    pub field: String,
    /// What was wrong.
    pub message: String,
}

impl ApiError {
    /// An error of any status.
    pub fn new(status: StatusCode, field: impl Into<String>, message: impl Into<String>) -> Self {
        ApiError { status, field: field.into(), message: message.into() }
    }
    /// A 400.
    pub fn bad(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, field, message)
    }
    /// A 404 for a collection id.
    pub fn no_collection(id: &str) -> Self {
        Self::new(StatusCode::NOT_FOUND, "collection", format!("no collection {id:?}"))
    }
    /// A 400 from a harmony-core error, its field prefixed by `prefix`.
    pub fn from_core(prefix: &str, e: harmony_core::Error) -> Self {
        let field = match &e {
            harmony_core::Error::InvalidReport { field, .. }
            | harmony_core::Error::InvalidInput { name: field, .. } => {
                format!("{prefix}{field}")
            }
            harmony_core::Error::InvalidParameter { name, .. } => format!("{prefix}{name}"),
            harmony_core::Error::Incompatible(_) => prefix.trim_end_matches(": ").to_string(),
        };
        Self::bad(field, e.to_string())
    }
    /// A store failure: 501 for what the store does not implement, else 503 (retry).
    pub fn store(e: StoreError) -> Self {
        if let StoreError::Unsupported(what) = e {
            return Self::new(
                StatusCode::NOT_IMPLEMENTED,
                "store",
                format!("{what} are not implemented by this store"),
            );
        }
        tracing::error!(error = %e, "store failure");
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "store", "storage unavailable; retry the request")
    }
    /// A blocking task that did not finish (the runtime is shutting down).
    pub fn stopped() -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "server", "the server is shutting down; retry the request")
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody { error: ErrorDetail { field: self.field, message: self.message } };
        (self.status, axum::Json(body)).into_response()
    }
}

/// Parses a JSON body; a 400 names `body (JSON syntax)` or `body (schema)`.
pub fn parse_json<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|e| {
        let field = if e.is_data() { "body (schema)" } else { "body (JSON syntax)" };
        ApiError::bad(field, format!("the request body does not parse: {e}"))
    })
}
