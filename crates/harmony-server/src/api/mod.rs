//! The HTTP endpoints, by resource.

pub mod collections;
pub mod queries;
pub mod reports;
pub mod rounds;
pub mod tokens;
pub mod windows;

use crate::error::ApiError;
use axum::body::Bytes;

/// Largest request body (bytes).
pub const MAX_BODY: usize = 32 << 20;

/// A request body, or why it was refused (over [`MAX_BODY`], unreadable).
pub type Body = Result<Bytes, axum::extract::rejection::BytesRejection>;

/// The body's bytes; a refused body becomes the usual JSON error: 413 for one over
/// [`MAX_BODY`], 408 for one that did not arrive within the body timeout or too slowly, 503 for
/// one over the body budget or a request over the in-flight cap ([`crate::Limits`]).
pub fn body_bytes(body: Body) -> Result<Bytes, ApiError> {
    use crate::intake::Refused;
    use axum::http::StatusCode;
    body.map_err(|r| {
        if let Some(why) = crate::intake::refused(&r) {
            let status = match why {
                Refused::TooSlow { .. } => StatusCode::REQUEST_TIMEOUT,
                Refused::Budget { .. } | Refused::InFlight => StatusCode::SERVICE_UNAVAILABLE,
            };
            let field = if matches!(why, Refused::InFlight) { "server" } else { "body" };
            return ApiError::new(status, field, why.to_string());
        }
        if timed_out(&r) {
            let msg = "the request body did not arrive within the body timeout";
            return ApiError::new(axum::http::StatusCode::REQUEST_TIMEOUT, "body", msg);
        }
        ApiError::new(r.status(), "body", format!("{} (the limit is {MAX_BODY} bytes)", r.body_text()))
    })
}

/// The body of `req`, read only now — after the caller checked its headers (a token), so a
/// refused request's body is never received; errors as [`body_bytes`].
pub async fn read_body(req: axum::extract::Request) -> Result<Bytes, ApiError> {
    use axum::extract::FromRequest;
    body_bytes(Bytes::from_request(req, &()).await)
}

/// Whether a body error comes from tower-http's body deadline.
fn timed_out(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(e);
    while let Some(err) = cur {
        if err.is::<tower_http::timeout::TimeoutError>() {
            return true;
        }
        cur = err.source();
    }
    false
}

/// Runs blocking work (parsing, validation, storage, estimation) off the async workers; it runs
/// to completion even if the client goes away, so what it commits is also applied in memory. A
/// panic in it is a 500 JSON for this request only (locks it held are recovered by their users).
pub async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    match tokio::task::spawn_blocking(f).await {
        Ok(r) => r,
        Err(e) if e.is_panic() => Err(ApiError::internal("a panic in a blocking task")),
        Err(_) => Err(ApiError::stopped()),
    }
}
