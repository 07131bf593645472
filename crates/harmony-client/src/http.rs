//! The blocking HTTP transport (native targets): retries with exponential backoff and full
//! jitter on transport errors, 5xx and 429; a 4xx fails at once with the server's field and
//! message. A URL without `http://` or `https://` fails before any attempt. A refused connection
//! to a server this client never reached is retried for [`STARTUP_GRACE`] only (a server started
//! a moment before may still be binding its port), then fails asking whether `harmony serve`
//! runs there; once the server has answered, a refused connection is a restart and is retried.

use crate::{ClientError, Result};
use harmony_protocol::estimates::{EstimateDocument, Query};
use harmony_protocol::{
    BatchAck, CollectionConfig, CollectionSummary, CreateCollection, Created, EnrollRequest, Enrolled, ErrorBody,
    GradientAck, GradientPost, ModelState, ReportBatch, ReportItem, TokenCreated, TokenInfo, TokenRequest,
};
use rand::{Rng, RngExt};
use serde::Deserialize;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How long a refused connection to a server this client never reached is retried before the
/// client says that nothing listens there: long enough for a server started just before to bind
/// its port, short enough that a wrong address fails within a second.
pub const STARTUP_GRACE: Duration = Duration::from_millis(600);

/// Retry schedule: exponential backoff with full jitter.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    /// Attempts in total (≥ 1).
    pub attempts: u32,
    /// First backoff.
    pub base: Duration,
    /// Largest backoff.
    pub max: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy { attempts: 8, base: Duration::from_millis(50), max: Duration::from_secs(5) }
    }
}

/// A blocking HTTP client for one server.
#[derive(Debug, Clone)]
pub struct Client {
    base: String,
    token: Option<String>,
    agent: ureq::Agent,
    retry: RetryPolicy,
    /// Whether the server has answered a request of this client (or a clone of it).
    reached: Arc<AtomicBool>,
}

/// An extra root certificate (none without the `tls` feature).
#[cfg(feature = "tls")]
type Cert = ureq::tls::Certificate<'static>;
#[cfg(not(feature = "tls"))]
type Cert = std::convert::Infallible;

/// The agent: a 60 s deadline per request, statuses as responses; with the `tls` feature,
/// `https://` trusts the system's roots plus `extra` (Mozilla's bundled roots if the system has
/// none).
fn agent(extra: &[Cert]) -> ureq::Agent {
    let builder =
        ureq::Agent::config_builder().http_status_as_error(false).timeout_global(Some(Duration::from_secs(60)));
    #[cfg(feature = "tls")]
    let builder = {
        use ureq::tls::{RootCerts, TlsConfig};
        let roots = match (system_roots(), extra) {
            ([], []) => RootCerts::WebPki,
            (system, extra) => RootCerts::new_with_certs(&[system, extra].concat()),
        };
        builder.tls_config(TlsConfig::builder().root_certs(roots).build())
    };
    #[cfg(not(feature = "tls"))]
    let _ = extra;
    builder.build().into()
}

/// The system's root certificates, read once.
#[cfg(feature = "tls")]
fn system_roots() -> &'static [ureq::tls::Certificate<'static>] {
    static ROOTS: std::sync::OnceLock<Vec<ureq::tls::Certificate<'static>>> = std::sync::OnceLock::new();
    ROOTS.get_or_init(|| {
        let found = rustls_native_certs::load_native_certs().certs;
        found.iter().map(|c| ureq::tls::Certificate::from_der(c.as_ref()).to_owned()).collect()
    })
}

/// Whether a transport error is a server certificate the roots do not trust.
#[cfg(feature = "tls")]
fn untrusted(e: &ureq::Error) -> bool {
    let rustls_error = match e {
        ureq::Error::Rustls(r) => Some(r),
        ureq::Error::Io(io) => io.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()),
        _ => None,
    };
    matches!(rustls_error, Some(rustls::Error::InvalidCertificate(_)))
}

#[cfg(not(feature = "tls"))]
fn untrusted(_: &ureq::Error) -> bool {
    false
}

/// The host (and port) of a URL.
fn host_of(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    rest.split(['/', '?', '#']).next().unwrap_or(rest)
}

/// Why one attempt failed: an untrusted certificate is final (retrying will not help); a refused
/// connection is final before the server was ever reached.
enum SendError {
    Untrusted(String),
    Refused(String),
    Transport(String),
}

/// Whether a transport error says nothing listens at the address (connection refused, or a host
/// that does not resolve).
fn refused(e: &ureq::Error) -> bool {
    match e {
        ureq::Error::Io(io) => io.kind() == std::io::ErrorKind::ConnectionRefused,
        ureq::Error::ConnectionFailed | ureq::Error::HostNotFound => true,
        _ => false,
    }
}

/// A transport error's text without the `io: ` prefix ureq puts before an OS error.
fn transport_text(e: &ureq::Error) -> String {
    match e {
        ureq::Error::Io(io) => io.to_string(),
        e => e.to_string(),
    }
}

/// Whether `url` starts with `http://` or `https://` (ignoring ASCII case).
fn has_scheme(url: &str) -> bool {
    let lower = url.get(..8).unwrap_or(url).to_ascii_lowercase();
    lower.starts_with("http://") || lower.starts_with("https://")
}

impl Client {
    /// A client for `base` (e.g. `http://127.0.0.1:8080`; `https://` with the `tls` feature).
    pub fn new(base: &str) -> Self {
        Client {
            base: base.trim_end_matches('/').to_string(),
            token: None,
            agent: agent(&[]),
            retry: RetryPolicy::default(),
            reached: Arc::new(AtomicBool::new(false)),
        }
    }
    /// Also trusts the CA certificates of the PEM file `path` for `https://` (a server with a
    /// private CA: `--ca-cert`, `HARMONY_CA_CERT`). Errors name the file and what was wrong.
    #[cfg(feature = "tls")]
    pub fn with_ca_cert(mut self, path: &std::path::Path) -> Result<Self> {
        let err = |message: String| ClientError::Tls { context: format!("CA certificate {}", path.display()), message };
        let pem = std::fs::read(path).map_err(|e| err(format!("cannot read it: {e}")))?;
        let mut certs = Vec::new();
        for item in ureq::tls::parse_pem(&pem) {
            if let ureq::tls::PemItem::Certificate(c) = item.map_err(|e| err(format!("not a PEM file: {e}")))? {
                certs.push(c);
            }
        }
        if certs.is_empty() {
            return Err(err("no certificate in it (expected PEM `BEGIN CERTIFICATE` blocks)".into()));
        }
        self.agent = agent(&certs);
        Ok(self)
    }
    /// Sets the analyst bearer token.
    pub fn with_token(mut self, token: &str) -> Self {
        self.token = Some(token.to_string());
        self
    }
    /// Sets the retry policy.
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }
    /// The base URL.
    pub fn base(&self) -> &str {
        &self.base
    }

    fn send(
        &self,
        method: &str,
        url: &str,
        body: Option<&[u8]>,
        extra: Option<(&str, &str)>,
    ) -> std::result::Result<(u16, Vec<u8>), SendError> {
        let resp = match (method, body) {
            ("GET", _) => {
                let mut r = self.agent.get(url);
                if let Some(t) = &self.token {
                    r = r.header("authorization", &format!("Bearer {t}"));
                }
                r.call()
            }
            ("DELETE", _) => {
                let mut r = self.agent.delete(url);
                if let Some(t) = &self.token {
                    r = r.header("authorization", &format!("Bearer {t}"));
                }
                r.call()
            }
            (_, b) => {
                let mut r = self.agent.post(url).content_type("application/json");
                if let Some(t) = &self.token {
                    r = r.header("authorization", &format!("Bearer {t}"));
                }
                if let Some((name, value)) = extra {
                    r = r.header(name, value);
                }
                r.send(b.unwrap_or(&[]))
            }
        };
        let mut resp = resp.map_err(|e| {
            if untrusted(&e) {
                SendError::Untrusted(e.to_string())
            } else if refused(&e) {
                SendError::Refused(transport_text(&e))
            } else {
                SendError::Transport(transport_text(&e))
            }
        })?;
        self.reached.store(true, Ordering::Relaxed);
        let status = resp.status().as_u16();
        let bytes = resp
            .body_mut()
            .with_config()
            .limit(64 << 20)
            .read_to_vec()
            .map_err(|e| SendError::Transport(e.to_string()))?;
        Ok((status, bytes))
    }

    /// Sends a request with retries on transport errors, 5xx and 429; 4xx fail at once.
    fn request(&self, method: &str, path: &str, body: Option<&[u8]>) -> Result<Vec<u8>> {
        self.request_with(method, path, body, None)
    }

    /// [`Client::request`] with one more header on every attempt (a POST's).
    fn request_with(
        &self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
        extra: Option<(&str, &str)>,
    ) -> Result<Vec<u8>> {
        if !has_scheme(&self.base) {
            return Err(ClientError::BadUrl { url: self.base.clone() });
        }
        let url = format!("{}{}", self.base, path);
        let attempts = self.retry.attempts.max(1);
        let mut last = String::new();
        // Jitter only: not privacy-relevant, but no reason to seed it predictably.
        let mut rng = harmony_core::sampling::secure_rng();
        for attempt in 0..attempts {
            if attempt > 0 {
                let cap = self.retry.base.saturating_mul(1 << attempt.min(16)).min(self.retry.max);
                std::thread::sleep(cap.mul_f64(rng.random::<f64>()));
            }
            let (status, bytes) = match self.send_or_wait(method, &url, body, extra) {
                Ok(r) => r,
                Err(SendError::Refused(e)) if !self.reached.load(Ordering::Relaxed) => {
                    return Err(ClientError::Unreachable { url: self.base.clone(), message: e });
                }
                Err(SendError::Refused(e) | SendError::Transport(e)) => {
                    last = e;
                    continue;
                }
                Err(SendError::Untrusted(e)) => {
                    return Err(ClientError::Tls {
                        context: format!("server {}", host_of(&self.base)),
                        message: format!(
                            "certificate not trusted: pass --ca-cert (or HARMONY_CA_CERT) with its CA ({e})"
                        ),
                    });
                }
            };
            if (200..300).contains(&status) {
                return Ok(bytes);
            }
            if status == 429 || status >= 500 {
                last = format!("HTTP {status}: {}", String::from_utf8_lossy(&bytes));
                continue;
            }
            let (field, message) = match serde_json::from_slice::<ErrorBody>(&bytes) {
                Ok(b) => (b.error.field, b.error.message),
                Err(_) => ("body".to_string(), String::from_utf8_lossy(&bytes).into_owned()),
            };
            return Err(ClientError::Rejected { status, field, message });
        }
        Err(ClientError::Unavailable { url, attempts, last })
    }

    /// [`Client::send`], retrying a refused connection every 50 ms for [`STARTUP_GRACE`] while
    /// this client has never reached the server.
    fn send_or_wait(
        &self,
        method: &str,
        url: &str,
        body: Option<&[u8]>,
        extra: Option<(&str, &str)>,
    ) -> std::result::Result<(u16, Vec<u8>), SendError> {
        let start = Instant::now();
        loop {
            match self.send(method, url, body, extra) {
                Err(SendError::Refused(_))
                    if !self.reached.load(Ordering::Relaxed) && start.elapsed() < STARTUP_GRACE =>
                {
                    std::thread::sleep(Duration::from_millis(50));
                }
                r => return r,
            }
        }
    }

    fn parse<T: for<'de> Deserialize<'de>>(&self, path: &str, bytes: &[u8]) -> Result<T> {
        serde_json::from_slice(bytes)
            .map_err(|e| ClientError::Protocol { url: format!("{}{}", self.base, path), message: e.to_string() })
    }

    /// Creates a collection (analyst token required); returns its id and config.
    pub fn create_collection(&self, req: &CreateCollection) -> Result<Created> {
        self.create_body(serde_json::to_vec(req).expect("JSON of a request"), "")
    }

    /// [`Client::create_collection`] with the collection's optional name and description.
    pub fn create_named(&self, req: &harmony_protocol::NewCollection) -> Result<Created> {
        self.create_body(serde_json::to_vec(req).expect("JSON of a request"), "")
    }

    /// [`Client::create_named`] with the bucket period of continuous collection (`hour`, `day`
    /// or `week`; the server's default, a day, when `None`): `POST /v1/collections?period=`.
    pub fn create_with_period(&self, req: &harmony_protocol::NewCollection, period: Option<&str>) -> Result<Created> {
        self.create_recurring(req, period, false)
    }

    /// [`Client::create_with_period`] of a collection that asks each device for one report per
    /// period when `recurring` (`?recurring=true`; the config's `recurring` names the period).
    pub fn create_recurring(
        &self,
        req: &harmony_protocol::NewCollection,
        period: Option<&str>,
        recurring: bool,
    ) -> Result<Created> {
        let mut params: Vec<String> = period.map(|p| format!("period={p}")).into_iter().collect();
        if recurring {
            params.push("recurring=true".into());
        }
        self.create_body(serde_json::to_vec(req).expect("JSON of a request"), &params.join("&"))
    }

    fn create_body(&self, body: Vec<u8>, query: &str) -> Result<Created> {
        // One key for every attempt: a retry after a lost answer gets the collection the first
        // attempt stored, never a second one.
        let mut key = [0u8; 16];
        harmony_core::sampling::secure_rng().fill_bytes(&mut key);
        let key = harmony_protocol::to_hex(&key);
        let path = match query {
            "" => "/v1/collections".to_string(),
            q => format!("/v1/collections?{q}"),
        };
        let bytes = self.request_with("POST", &path, Some(&body), Some(("idempotency-key", &key)))?;
        self.parse(&path, &bytes)
    }
    /// Fetches a collection's public client configuration; a config for another collection than
    /// the one asked for is refused (a device's ledger is keyed by the id it asked for).
    pub fn config(&self, collection: &str) -> Result<CollectionConfig> {
        let path = format!("/v1/collections/{collection}/config");
        let bytes = self.request("GET", &path, None)?;
        let config: CollectionConfig = self.parse(&path, &bytes)?;
        if config.id != collection {
            return Err(ClientError::Protocol {
                url: format!("{}{path}", self.base),
                message: format!("the config is for collection {:?}, asked for {collection:?}", config.id),
            });
        }
        Ok(config)
    }
    /// Submits a batch of encoded reports (retried with backoff; idempotent by report id).
    pub fn submit(&self, config: &CollectionConfig, reports: Vec<ReportItem>) -> Result<BatchAck> {
        self.submit_at(config, reports, None)
    }
    /// Submits an already serialized body (for tests and load generators).
    pub fn submit_raw(&self, collection: &str, body: &[u8]) -> Result<BatchAck> {
        self.submit_raw_at(collection, body, None)
    }
    /// [`Client::submit`] received at instant `at` (an ISO date, a UTC timestamp or Unix
    /// seconds) instead of now: the `Harmony-Received-At` header, which only a server started
    /// with `--accept-backdated` honours, and only with the admin token (demos and tests).
    pub fn submit_at(&self, config: &CollectionConfig, reports: Vec<ReportItem>, at: Option<&str>) -> Result<BatchAck> {
        let batch = ReportBatch { collection: config.id.clone(), config_version: config.config_version, reports };
        let body = serde_json::to_vec(&batch).expect("JSON of a batch");
        self.submit_raw_at(&config.id, &body, at)
    }
    /// [`Client::submit_raw`] received at `at` ([`Client::submit_at`]).
    pub fn submit_raw_at(&self, collection: &str, body: &[u8], at: Option<&str>) -> Result<BatchAck> {
        let path = format!("/v1/collections/{collection}/reports");
        let bytes = self.request_with("POST", &path, Some(body), at.map(|t| ("Harmony-Received-At", t)))?;
        self.parse(&path, &bytes)
    }
    /// The current model round of a training collection.
    pub fn model(&self, collection: &str) -> Result<ModelState> {
        let path = format!("/v1/collections/{collection}/model");
        let bytes = self.request("GET", &path, None)?;
        self.parse(&path, &bytes)
    }
    /// Posts one randomized gradient.
    pub fn post_gradient(&self, collection: &str, post: &GradientPost) -> Result<GradientAck> {
        let path = format!("/v1/collections/{collection}/gradients");
        let body = serde_json::to_vec(post).expect("JSON of a gradient");
        let bytes = self.request("POST", &path, Some(&body))?;
        self.parse(&path, &bytes)
    }
    /// The current round of an `adaptive-rounds` linear-queries collection.
    pub fn query_round(&self, collection: &str) -> Result<harmony_protocol::QueryRound> {
        let path = format!("/v1/collections/{collection}/query");
        let bytes = self.request("GET", &path, None)?;
        self.parse(&path, &bytes)
    }
    /// Posts one device's answer to the current round.
    pub fn post_answer(
        &self,
        collection: &str,
        post: &harmony_protocol::AnswerPost,
    ) -> Result<harmony_protocol::AnswerAck> {
        let path = format!("/v1/collections/{collection}/answers");
        let body = serde_json::to_vec(post).expect("JSON of an answer");
        let bytes = self.request("POST", &path, Some(&body))?;
        self.parse(&path, &bytes)
    }
    /// Posts the analyst's next query (analyst token required): it opens the next round once
    /// every round is full (409 `round` before).
    pub fn post_query(&self, collection: &str, query: &serde_json::Value) -> Result<harmony_protocol::QueryRound> {
        let path = format!("/v1/collections/{collection}/queries");
        let body = serde_json::to_vec(query).expect("JSON of a query");
        let bytes = self.request("POST", &path, Some(&body))?;
        self.parse(&path, &bytes)
    }
    /// Current estimates (analyst token required), with `query`'s ranges and quantiles.
    pub fn estimates(&self, collection: &str, query: &Query) -> Result<EstimateDocument> {
        let (path, bytes) = self.estimates_at(collection, query)?;
        self.parse(&path, &bytes)
    }
    /// [`Client::estimates`] as the server sent it: the JSON document's bytes, not parsed.
    pub fn estimates_json(&self, collection: &str, query: &Query) -> Result<Vec<u8>> {
        Ok(self.estimates_at(collection, query)?.1)
    }
    fn estimates_at(&self, collection: &str, query: &Query) -> Result<(String, Vec<u8>)> {
        let q = query.to_query_string();
        let path = if q.is_empty() {
            format!("/v1/collections/{collection}/estimates")
        } else {
            format!("/v1/collections/{collection}/estimates?{q}")
        };
        let bytes = self.request("GET", &path, None)?;
        Ok((path, bytes))
    }
    /// A continuous-collection read (analyst token required): `endpoint` is `estimates`,
    /// `series` or `compare`, `params` its window parameters (`from`, `to`, `period`, `a_from`,
    /// …; percent-encoding is not needed for ISO instants), with `query`'s ranges and quantiles.
    /// The JSON as the server sent it.
    pub fn window_json(
        &self,
        collection: &str,
        endpoint: &str,
        params: &[(&str, &str)],
        query: &Query,
    ) -> Result<Vec<u8>> {
        let mut parts: Vec<String> = params.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let q = query.to_query_string();
        if !q.is_empty() {
            parts.push(q);
        }
        let path = format!("/v1/collections/{collection}/{endpoint}?{}", parts.join("&"));
        self.request("GET", &path, None)
    }
    /// Every collection the token reads (the admin token: all).
    pub fn collections(&self) -> Result<Vec<CollectionSummary>> {
        let bytes = self.request("GET", "/v1/collections", None)?;
        self.parse("/v1/collections", &bytes)
    }
    /// Mints an analyst token of `collection` (admin token required); the token is shown once.
    pub fn create_token(&self, collection: &str, label: &str) -> Result<TokenCreated> {
        let path = format!("/v1/collections/{collection}/tokens");
        let body = serde_json::to_vec(&TokenRequest { label: label.to_string() }).expect("JSON of a token request");
        let bytes = self.request("POST", &path, Some(&body))?;
        self.parse(&path, &bytes)
    }
    /// The analyst tokens of `collection` (admin token required), never the tokens themselves.
    pub fn tokens(&self, collection: &str) -> Result<Vec<TokenInfo>> {
        let path = format!("/v1/collections/{collection}/tokens");
        let bytes = self.request("GET", &path, None)?;
        self.parse(&path, &bytes)
    }
    /// Revokes an analyst token (admin token required).
    pub fn revoke_token(&self, collection: &str, token_id: &str) -> Result<()> {
        self.request("DELETE", &format!("/v1/collections/{collection}/tokens/{token_id}"), None)?;
        Ok(())
    }
    /// Mints `count` device keys of a training collection that takes enrolled devices only
    /// (admin token required); the keys are shown this once.
    pub fn enroll(&self, collection: &str, count: u32, label: &str) -> Result<Enrolled> {
        let path = format!("/v1/collections/{collection}/enrollments");
        let body = serde_json::to_vec(&EnrollRequest { count, label: label.to_string() }).expect("JSON of a request");
        let bytes = self.request("POST", &path, Some(&body))?;
        self.parse(&path, &bytes)
    }
    /// The enrolled devices of `collection` (admin token required), never their keys.
    pub fn enrollments(&self, collection: &str) -> Result<Vec<TokenInfo>> {
        let path = format!("/v1/collections/{collection}/enrollments");
        let bytes = self.request("GET", &path, None)?;
        self.parse(&path, &bytes)
    }
    /// Revokes an enrolled device's key (admin token required).
    pub fn revoke_device(&self, collection: &str, device_id: &str) -> Result<()> {
        self.request("DELETE", &format!("/v1/collections/{collection}/enrollments/{device_id}"), None)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A loopback URL where nothing listens (a port just released).
    fn closed_port_url() -> String {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        format!("http://127.0.0.1:{port}")
    }

    #[test]
    fn refused_first_connection_fails_at_once_asking_for_harmony_serve() {
        let url = closed_port_url();
        let t = Instant::now();
        let e = Client::new(&url).collections().unwrap_err();
        assert!(t.elapsed() < Duration::from_secs(1), "took {:?}", t.elapsed());
        let text = e.to_string();
        assert!(matches!(e, ClientError::Unreachable { .. }), "{text}");
        assert!(text.contains(&format!("is `harmony serve` running at {url}?")), "{text}");
        assert!(!text.contains("io: "), "{text}");
        assert_eq!(text.matches("os error").count(), 1, "the OS error once: {text}");
    }

    #[test]
    fn a_server_binding_its_port_just_after_the_first_attempt_is_reached() {
        let url = closed_port_url();
        let addr = url.trim_start_matches("http://").to_string();
        let server = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            let listener = std::net::TcpListener::bind(&addr).unwrap();
            let (mut conn, _) = listener.accept().unwrap();
            let mut buf = [0u8; 4096];
            let _ = std::io::Read::read(&mut conn, &mut buf);
            let body = "[]";
            let answer = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            std::io::Write::write_all(&mut conn, answer.as_bytes()).unwrap();
        });
        let started = Instant::now();
        let got = Client::new(&url).request("GET", "/v1/collections", None);
        assert_eq!(got.unwrap(), b"[]", "reached after {:?}", started.elapsed());
        server.join().unwrap();
    }

    #[test]
    fn url_without_scheme_fails_at_once() {
        let t = Instant::now();
        let e = Client::new("127.0.0.1:8080").collections().unwrap_err().to_string();
        assert!(t.elapsed() < Duration::from_secs(1), "took {:?}", t.elapsed());
        assert!(e.contains("must start with http:// or https://") && e.contains("127.0.0.1:8080"), "{e}");
        assert!(has_scheme("HTTPS://x") && has_scheme("http://x") && !has_scheme("ftp://x") && !has_scheme("http:/"));
    }

    /// A server that answered before and now refuses (restarting) is retried.
    #[test]
    fn refused_connection_of_a_reached_server_is_retried() {
        let retry = RetryPolicy { attempts: 3, base: Duration::from_millis(1), max: Duration::from_millis(2) };
        let client = Client::new(&closed_port_url()).with_retry(retry);
        client.reached.store(true, Ordering::Relaxed);
        match client.collections().unwrap_err() {
            ClientError::Unavailable { attempts, last, .. } => {
                assert_eq!(attempts, 3);
                assert!(last.contains("refused"), "{last}");
            }
            e => panic!("expected retries, got {e}"),
        }
    }
}
