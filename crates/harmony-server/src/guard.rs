//! Limits every request passes through: the caps on in-flight requests
//! and in-flight body bytes (503 with `Retry-After`), the JSON Content-Type of bodies (415),
//! the body and whole-request timeouts, and the JSON error format for every error the router
//! or a layer produces (404, 405, bad paths, timeouts).

use crate::error::ApiError;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;

/// Timeouts and caps of a server; [`Default`] holds the documented defaults (docs/SERVER.md).
#[derive(Debug, Clone)]
pub struct Limits {
    /// A request's headers must arrive within this (also the idle time of a kept-alive
    /// connection): slowloris headers are closed.
    pub header_timeout: Duration,
    /// A request's body must arrive within this (a hard deadline, not per byte).
    pub body_timeout: Duration,
    /// A request must be answered within this (503; work already started still finishes).
    pub request_timeout: Duration,
    /// Most open connections; more are answered 503 and closed.
    pub max_connections: usize,
    /// Most requests being served at once; more are answered 503.
    pub max_in_flight: usize,
    /// Most request-body bytes being received or held at once (by `Content-Length`, a body
    /// without one counts as the 32 MiB limit); more are answered 503.
    pub max_body_bytes_in_flight: usize,
    /// How long a drain (SIGTERM, SIGINT, [`crate::Running::stop`]) waits for in-flight requests.
    pub drain_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            request_timeout: Duration::from_secs(60),
            max_connections: 1024,
            max_in_flight: 256,
            max_body_bytes_in_flight: 256 << 20,
            drain_timeout: Duration::from_secs(30),
        }
    }
}

/// Seconds a client is told to wait after a 503 from a cap.
pub const RETRY_AFTER_SECONDS: u32 = 1;

/// The semaphores behind the caps.
#[derive(Clone)]
pub struct Caps {
    requests: Arc<Semaphore>,
    /// Body budget in KiB permits (a semaphore counts in u32).
    body_kib: Arc<Semaphore>,
    body_kib_max: usize,
}

impl Caps {
    /// The caps of `limits`.
    pub fn new(limits: &Limits) -> Self {
        let body_kib_max = limits.max_body_bytes_in_flight.div_ceil(1024).max(1);
        Caps {
            requests: Arc::new(Semaphore::new(limits.max_in_flight.max(1))),
            body_kib: Arc::new(Semaphore::new(body_kib_max)),
            body_kib_max,
        }
    }
}

/// A 503 with `Retry-After`, in the JSON error format.
pub fn overloaded(field: &str, message: String) -> Response {
    let mut r = ApiError::new(StatusCode::SERVICE_UNAVAILABLE, field, message).into_response();
    r.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECONDS));
    r
}

/// The bytes a request's body may take: its `Content-Length`, else (chunked) the body limit.
fn body_claim(req: &Request) -> usize {
    if matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS | Method::DELETE) {
        return 0;
    }
    let declared = req.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
    declared.unwrap_or(crate::MAX_BODY).min(crate::MAX_BODY)
}

/// The in-flight caps: a permit per request and one per KiB of its body, held until the answer
/// (`/healthz` is exempt: the process is up even when it is saturated).
pub async fn caps(State(caps): State<Caps>, req: Request, next: Next) -> Response {
    // Liveness answers even when the server is saturated.
    if req.uri().path() == "/healthz" {
        return next.run(req).await;
    }
    let Ok(_request) = caps.requests.clone().try_acquire_owned() else {
        return overloaded("server", "too many requests in flight; retry later".into());
    };
    let kib = body_claim(&req).div_ceil(1024).min(caps.body_kib_max) as u32;
    let _body = if kib > 0 {
        match caps.body_kib.clone().try_acquire_many_owned(kib) {
            Ok(p) => Some(p),
            Err(_) => {
                let msg = format!("too many request-body bytes in flight (a body of {kib} KiB); retry later");
                return overloaded("body", msg);
            }
        }
    } else {
        None
    };
    next.run(req).await
}

/// Whether a Content-Type is JSON (`application/json`, any parameters, any case).
fn is_json(v: Option<&HeaderValue>) -> bool {
    let Some(v) = v.and_then(|v| v.to_str().ok()) else { return false };
    v.split(';').next().is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"))
}

/// A POST to an endpoint must say its body is JSON: 415 otherwise, before the body is read
/// (a web page cannot post to the API with a "simple" CORS request then).
pub async fn json_bodies(req: Request, next: Next) -> Response {
    let routed = req.extensions().get::<MatchedPath>().is_some();
    if routed && req.method() == Method::POST && !is_json(req.headers().get(header::CONTENT_TYPE)) {
        let got = req.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("none");
        let msg = format!("Content-Type is {got:?}, expected application/json");
        return ApiError::new(StatusCode::UNSUPPORTED_MEDIA_TYPE, "content-type", msg).into_response();
    }
    next.run(req).await
}

/// Every error answer in the JSON error format: a response of status ≥ 400 that is not JSON
/// (the router's 404 and 405, a bad path's 400, a timeout's 408 or 503) is rewritten, keeping
/// its status and headers (`Allow`, `Retry-After`).
pub async fn json_errors(req: Request, next: Next) -> Response {
    let res = next.run(req).await;
    let status = res.status();
    if status.as_u16() < 400 || is_json(res.headers().get(header::CONTENT_TYPE)) {
        return res;
    }
    let (mut parts, body) = res.into_parts();
    let text = axum::body::to_bytes(body, 64 << 10).await.unwrap_or_default();
    let text = String::from_utf8_lossy(&text).trim().to_string();
    let field = match status {
        StatusCode::METHOD_NOT_ALLOWED => "method",
        StatusCode::NOT_FOUND | StatusCode::BAD_REQUEST | StatusCode::URI_TOO_LONG => "path",
        StatusCode::PAYLOAD_TOO_LARGE | StatusCode::REQUEST_TIMEOUT => "body",
        StatusCode::UNSUPPORTED_MEDIA_TYPE => "content-type",
        _ => "server",
    };
    let message = match (status, text.is_empty()) {
        (StatusCode::NOT_FOUND, true) => "no such endpoint".to_string(),
        (StatusCode::METHOD_NOT_ALLOWED, true) => {
            let allow = parts.headers.get(header::ALLOW).and_then(|v| v.to_str().ok()).unwrap_or("");
            format!("method not allowed here; allowed: {allow}")
        }
        (StatusCode::SERVICE_UNAVAILABLE, true) | (StatusCode::REQUEST_TIMEOUT, true) => {
            "the request took too long; retry later".to_string()
        }
        (_, true) => status.canonical_reason().unwrap_or("error").to_string(),
        (_, false) => text,
    };
    parts.headers.remove(header::CONTENT_TYPE);
    parts.headers.remove(header::CONTENT_LENGTH);
    if status == StatusCode::SERVICE_UNAVAILABLE && !parts.headers.contains_key(header::RETRY_AFTER) {
        parts.headers.insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECONDS));
    }
    let mut out = ApiError::new(status, field, message).into_response();
    for (k, v) in parts.headers.iter() {
        out.headers_mut().insert(k.clone(), v.clone());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_content_types() {
        let v = |s: &'static str| Some(HeaderValue::from_static(s));
        assert!(is_json(v("application/json").as_ref()));
        assert!(is_json(v("Application/JSON; charset=utf-8").as_ref()));
        assert!(!is_json(v("text/plain").as_ref()));
        assert!(!is_json(v("application/jsonx").as_ref()));
        assert!(!is_json(None));
    }
}
