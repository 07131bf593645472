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
    /// A store failure: 501 for what the store does not implement, else 503 with
    /// `Retry-After` (retry).
    pub fn store(e: StoreError) -> Self {
        if let StoreError::Unsupported(what) = e {
            return Self::new(
                StatusCode::NOT_IMPLEMENTED,
                "store",
                format!("{what} are not implemented by this store"),
            );
        }
        let msg = match e {
            StoreError::Unavailable(_) => {
                tracing::warn!(error = %e, "store unreachable");
                "storage unreachable (reconnecting); nothing was stored: retry the request"
            }
            _ => {
                tracing::error!(error = %e, "store failure");
                "storage unavailable; retry the request"
            }
        };
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "store", msg)
    }
    /// A 500 for a request whose handler panicked: the panic is logged, the process and every
    /// other request go on.
    pub fn internal(what: &str) -> Self {
        tracing::error!(what, "handler panicked");
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "server",
            format!("internal error ({what}); the request was not completed"),
        )
    }
    /// A blocking task that did not finish (the runtime is shutting down).
    pub fn stopped() -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "server", "the server is shutting down; retry the request")
    }
}

impl IntoResponse for ApiError {
    /// A 503 carries `Retry-After`.
    fn into_response(self) -> Response {
        let retry = self.status == StatusCode::SERVICE_UNAVAILABLE;
        let body = ErrorBody { error: ErrorDetail { field: self.field, message: self.message } };
        let mut r = (self.status, axum::Json(body)).into_response();
        if retry {
            r.headers_mut().insert(axum::http::header::RETRY_AFTER, crate::guard::RETRY_AFTER_SECONDS.into());
        }
        r
    }
}

/// Parses a JSON body; a 400 names the path of the field that does not fit (`task.bins`,
/// `reports[3].id`; `task` for an unknown task kind or an unknown option of a task), or
/// `body (JSON syntax)`.
///
/// A body that parses takes the plain serde_json path (the ingest hot path); only a failed
/// parse is repeated with path tracking, to name the field.
pub fn parse_json<'de, T: serde::Deserialize<'de>>(body: &'de [u8]) -> Result<T, ApiError> {
    match serde_json::from_slice(body) {
        Ok(parsed) => Ok(parsed),
        Err(_) => Err(parse_error::<T>(body)),
    }
}

/// [`parse_json`] of a body that must be a JSON object: a struct whose fields all have
/// defaults would otherwise also accept an array (`[]`).
pub fn parse_object<'de, T: serde::Deserialize<'de>>(body: &'de [u8]) -> Result<T, ApiError> {
    match body.trim_ascii_start().first() {
        Some(b'{') => parse_json(body),
        first => {
            let got = first.map_or("an empty body".to_string(), |b| format!("a body starting with {:?}", *b as char));
            Err(ApiError::bad("body", format!("{got}, expected a JSON object")))
        }
    }
}

/// The 400 of a body that does not parse as a `T`, naming the path of the field at fault.
fn parse_error<'de, T: serde::Deserialize<'de>>(body: &'de [u8]) -> ApiError {
    let syntax =
        |e: serde_json::Error| ApiError::bad("body (JSON syntax)", format!("the request body does not parse: {e}"));
    let mut de = serde_json::Deserializer::from_slice(body);
    match serde_path_to_error::deserialize::<_, T>(&mut de) {
        Err(e) => {
            let path = e.path().to_string();
            let inner = e.into_inner();
            if !inner.is_data() {
                return syntax(inner);
            }
            let mut field = if path.is_empty() || path == "." { "body".to_string() } else { path };
            // An unknown field is named in the path: `task.bogus`, `reports[0].extra`.
            let text = inner.to_string();
            if let Some(rest) = text.strip_prefix("unknown field `")
                && let Some((name, _)) = rest.split_once('`')
            {
                if field == "body" {
                    field = name.to_string();
                } else if !field.ends_with(&format!(".{name}")) && field != name {
                    field = format!("{field}.{name}");
                }
            }
            ApiError::bad(field, format!("the request body does not parse: {text}"))
        }
        Ok(_) => match de.end() {
            Err(e) => syntax(e),
            Ok(()) => ApiError::bad("body", "the request body does not parse"),
        },
    }
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The store did not open (the URL is shown without its password).
    #[error("--db {url}: {source}")]
    Store {
        /// The store URL, redacted.
        url: String,
        /// Why.
        source: StoreError,
    },
    /// The store did not list its collections.
    #[error("loading the collections: {0}")]
    Load(StoreError),
    /// The address could not be bound.
    #[error("--listen {addr}: {source}")]
    Listen {
        /// The address.
        addr: String,
        /// Why.
        source: std::io::Error,
    },
    /// A TLS file of `--tls-cert`/`--tls-key` (or the TLS setup) is wrong.
    #[error("--{flag} {path}: {message}")]
    Tls {
        /// The option (`tls-cert`, `tls-key`).
        flag: String,
        /// The file.
        path: String,
        /// What was wrong.
        message: String,
    },
    /// The async runtime or its thread did not start, or serving failed.
    #[error("server runtime: {0}")]
    Runtime(std::io::Error),
}

/// A store URL with its password (if any) replaced by `***`: `postgres://user:***@host/db`,
/// and the value of a `password=` query parameter too. The userinfo ends at the last `@` before
/// the query, so a password with an unencoded `@` is hidden whole.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_string() };
    let (before, query) = match rest.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (rest, None),
    };
    let mut out = match before.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{scheme}://{user}:***@{host}"),
            None => format!("{scheme}://{before}"),
        },
        None => format!("{scheme}://{before}"),
    };
    if let Some(q) = query {
        let params: Vec<String> = q
            .split('&')
            .map(|kv| match kv.split_once('=') {
                Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
                _ => kv.to_string(),
            })
            .collect();
        out = format!("{out}?{}", params.join("&"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_lose_their_passwords() {
        assert_eq!(redact("postgres://bob:s3cret@db:5432/h"), "postgres://bob:***@db:5432/h");
        assert_eq!(redact("postgres://bob@db/h"), "postgres://bob@db/h");
        assert_eq!(redact("sqlite:///tmp/a.db"), "sqlite:///tmp/a.db");
        assert_eq!(redact("postgres://bob:p@ss@db/h?sslmode=require"), "postgres://bob:***@db/h?sslmode=require");
        assert_eq!(
            redact("postgres://db/h?user=bob&password=s3cret&sslmode=require"),
            "postgres://db/h?user=bob&password=***&sslmode=require"
        );
    }
}
