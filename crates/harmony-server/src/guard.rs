//! Limits every request passes through: the caps on in-flight requests and on body bytes
//! received and held (503 with `Retry-After`; bodies are metered as they arrive, [`crate::intake`]), the JSON Content-Type of bodies (415),
//! the body and whole-request timeouts, and the JSON error format for every error the router
//! or a layer produces (404, 405, bad paths, timeouts).

use crate::error::ApiError;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;

use crate::intake::{Metered, Pacing, Slot};

/// Timeouts and caps of a server; [`Default`] holds the documented defaults (docs/SERVER.md).
#[derive(Debug, Clone)]
pub struct Limits {
    /// A request's headers must arrive within this (also the idle time of a kept-alive
    /// connection): slowloris headers are closed.
    pub header_timeout: Duration,
    /// A request's body must arrive within this (a hard deadline, not per byte).
    pub body_timeout: Duration,
    /// A body must keep arriving: at most this long between two of its frames (and from its
    /// headers to its first frame), and the minimum rate applies after this long.
    pub body_grace: Duration,
    /// Bytes per second a body must average once its grace has passed (0: no minimum); a
    /// slower body is answered 408 and its connection closed.
    pub min_body_rate: u64,
    /// A response write that makes no progress for this long (a client that does not read its
    /// answers) closes the connection.
    pub write_timeout: Duration,
    /// Each connection's kernel send buffer, in bytes (`SO_SNDBUF`, set on the listener and
    /// inherited by every accepted connection; Linux doubles it for its bookkeeping; 0: the
    /// kernel's autotuning, up to `net.ipv4.tcp_wmem`'s 4 MiB). Clients that never read their
    /// answers pin at most this much kernel memory each until the write-progress timeout closes
    /// them: about `max_connections` × 2 × this in all (256 MiB at the defaults), where
    /// autotuned buffers let 512 slow readers pin 1.6 GiB.
    pub send_buffer: usize,
    /// A request must be answered within this (503; work already started still finishes).
    pub request_timeout: Duration,
    /// Most open connections; more are answered 503 and closed.
    pub max_connections: usize,
    /// Most open connections from one IP address (0: only `max_connections`); more are
    /// answered 503 and closed. Behind a reverse proxy every client has the proxy's address:
    /// raise it to `max_connections` there.
    pub max_connections_per_peer: usize,
    /// Most requests being served at once, counted from when a request's body has arrived (a
    /// request still uploading is not in flight); more are answered 503. `/healthz` is exempt
    /// and `/readyz` has its own small pool ([`PROBES`]).
    pub max_in_flight: usize,
    /// Most request-body bytes received and held at once, counted as they arrive (a declared
    /// `Content-Length` reserves nothing); a body that would go over is answered 503.
    pub max_body_bytes_in_flight: usize,
    /// How long a drain (SIGTERM, SIGINT, [`crate::Running::stop`]) waits for in-flight requests.
    pub drain_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            body_grace: Duration::from_secs(5),
            min_body_rate: 16 << 10,
            write_timeout: Duration::from_secs(10),
            send_buffer: 128 << 10,
            request_timeout: Duration::from_secs(60),
            max_connections: 1024,
            max_connections_per_peer: 512,
            max_in_flight: 256,
            max_body_bytes_in_flight: 256 << 20,
            drain_timeout: Duration::from_secs(30),
        }
    }
}

/// Seconds a client is told to wait after a 503 from a cap.
pub const RETRY_AFTER_SECONDS: u32 = 1;

/// Readiness probes answered at once, besides `max_in_flight` (a saturated API still answers
/// its load balancer's probes).
pub const PROBES: usize = 8;

/// The semaphores behind the caps.
#[derive(Clone)]
pub struct Caps {
    pacing: Pacing,
    probes: Arc<Semaphore>,
}

impl Caps {
    /// The caps of `limits`.
    pub fn new(limits: &Limits) -> Self {
        let body_kib_max = limits.max_body_bytes_in_flight.div_ceil(1024).clamp(1, Semaphore::MAX_PERMITS);
        Caps {
            pacing: Pacing {
                requests: Arc::new(Semaphore::new(limits.max_in_flight.max(1))),
                body_kib: Arc::new(Semaphore::new(body_kib_max)),
                grace: limits.body_grace,
                min_rate: limits.min_body_rate,
            },
            probes: Arc::new(Semaphore::new(PROBES)),
        }
    }
}

/// A 503 with `Retry-After`, in the JSON error format.
pub fn overloaded(field: &str, message: String) -> Response {
    let mut r = ApiError::new(StatusCode::SERVICE_UNAVAILABLE, field, message).into_response();
    r.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECONDS));
    r
}

/// Whether a request's method carries a body the handler reads (its in-flight permit is taken
/// when that body has arrived).
fn has_body(req: &Request) -> bool {
    matches!(*req.method(), Method::POST | Method::PUT | Method::PATCH)
}

/// The in-flight caps. A request with a body takes body budget per received frame and its
/// in-flight permit once the body has arrived ([`Metered`]); any other request takes its permit
/// now. Permits are held until the answer. `/healthz` is exempt (the process is up even when
/// saturated) and `/readyz` draws from its own pool of [`PROBES`].
pub async fn caps(State(caps): State<Caps>, req: Request, next: Next) -> Response {
    match req.uri().path() {
        "/healthz" => return next.run(req).await,
        "/readyz" => {
            let Ok(_probe) = caps.probes.clone().try_acquire_owned() else {
                return overloaded("server", "too many readiness probes in flight; retry later".into());
            };
            return next.run(req).await;
        }
        _ => {}
    }
    let slot = Slot::default();
    let req = if has_body(&req) {
        let (pacing, held) = (caps.pacing.clone(), slot.clone());
        req.map(move |b| axum::body::Body::new(Metered::new(b, pacing, held)))
    } else {
        let Ok(p) = caps.pacing.requests.clone().try_acquire_owned() else {
            return overloaded("server", "too many requests in flight; retry later".into());
        };
        slot.lock().unwrap_or_else(|e| e.into_inner()).set_request(p);
        req
    };
    let res = next.run(req).await;
    drop(slot);
    res
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

/// [`json_bodies`] on the matched paths in `posted` (the API's paths that take POST): other
/// methods and paths are left to the router (405 with `Allow`, or the route's own answer).
pub async fn json_posts(State(posted): State<Arc<HashSet<String>>>, req: Request, next: Next) -> Response {
    match req.extensions().get::<MatchedPath>() {
        Some(p) if posted.contains(p.as_str()) => json_bodies(req, next).await,
        _ => next.run(req).await,
    }
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
