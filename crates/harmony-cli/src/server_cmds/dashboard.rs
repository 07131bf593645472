//! The analyst dashboard and the device playground (docs/DASHBOARD.md), served by `harmony serve` under
//! `/dashboard/`: static files embedded in the binary (`web/dashboard/`, the vendored Vega-Lite
//! in `web/dashboard/vendor/`, the browser SDK `web/sdk/harmony.js` + `web/sdk/pkg/`), so
//! `cargo run` needs no Node and nothing is fetched at run time. The pages call the API of the
//! same origin with the analyst's bearer token (docs/DASHBOARD.md).

use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use harmony_server::{ApiError, AppState};

macro_rules! web {
    ($path:literal) => {
        include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../web/", $path))
    };
}

/// (path under `/dashboard/`, file under `web/`).
const ASSETS: &[(&str, &[u8])] = &[
    ("index.html", web!("dashboard/index.html")),
    ("playground.html", web!("dashboard/playground.html")),
    ("style.css", web!("dashboard/style.css")),
    ("js/api.js", web!("dashboard/js/api.js")),
    ("js/app.js", web!("dashboard/js/app.js")),
    ("js/format.js", web!("dashboard/js/format.js")),
    ("js/figure.js", web!("dashboard/js/figure.js")),
    ("js/summary.js", web!("dashboard/js/summary.js")),
    ("js/download.js", web!("dashboard/js/download.js")),
    ("js/playground.js", web!("dashboard/js/playground.js")),
    ("js/records.js", web!("dashboard/js/records.js")),
    ("js/trend.js", web!("dashboard/js/trend.js")),
    ("js/changes.js", web!("dashboard/js/changes.js")),
    ("js/charts/index.js", web!("dashboard/js/charts/index.js")),
    ("js/charts/means.js", web!("dashboard/js/charts/means.js")),
    ("js/charts/frequency.js", web!("dashboard/js/charts/frequency.js")),
    ("js/charts/range.js", web!("dashboard/js/charts/range.js")),
    ("js/charts/range2d.js", web!("dashboard/js/charts/range2d.js")),
    ("js/charts/heavy.js", web!("dashboard/js/charts/heavy.js")),
    ("js/charts/marginals.js", web!("dashboard/js/charts/marginals.js")),
    ("js/charts/linear.js", web!("dashboard/js/charts/linear.js")),
    ("js/charts/train.js", web!("dashboard/js/charts/train.js")),
    ("js/charts/count.js", web!("dashboard/js/charts/count.js")),
    ("js/views/signin.js", web!("dashboard/js/views/signin.js")),
    ("js/views/list.js", web!("dashboard/js/views/list.js")),
    ("js/views/collection.js", web!("dashboard/js/views/collection.js")),
    ("js/views/create.js", web!("dashboard/js/views/create.js")),
    ("vendor/vega.min.js", web!("dashboard/vendor/vega.min.js")),
    ("vendor/vega-lite.min.js", web!("dashboard/vendor/vega-lite.min.js")),
    ("vendor/vega-embed.min.js", web!("dashboard/vendor/vega-embed.min.js")),
    ("vendor/LICENSE-vega", web!("dashboard/vendor/LICENSE-vega")),
    ("vendor/LICENSE-vega-lite", web!("dashboard/vendor/LICENSE-vega-lite")),
    ("vendor/LICENSE-vega-embed", web!("dashboard/vendor/LICENSE-vega-embed")),
    ("sdk/harmony.js", web!("sdk/harmony.js")),
    ("sdk/pkg/harmony_wasm.js", web!("sdk/pkg/harmony_wasm.js")),
    ("sdk/pkg/harmony_wasm_bg.wasm", web!("sdk/pkg/harmony_wasm_bg.wasm")),
];

/// Same-origin only; Vega compiles its expressions with `Function` (`'unsafe-eval'`) and
/// vega-embed adds a style element; the SDK instantiates WebAssembly.
const CSP: &str = "default-src 'self'; script-src 'self' 'unsafe-eval' 'wasm-unsafe-eval'; \
    style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; connect-src 'self'; \
    object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'";

/// The `extend` hook of [`harmony_server::router_with`]: `GET /dashboard/…`, and `GET /`
/// redirected to the dashboard (the address `harmony serve` prints opens on it).
pub fn routes(r: axum::Router<AppState>) -> axum::Router<AppState> {
    r.route("/", get(|| async { Redirect::temporary("/dashboard/") }))
        .route("/dashboard", get(|| async { Redirect::permanent("/dashboard/") }))
        .route("/dashboard/", get(|| async { asset("index.html") }))
        .route("/dashboard/{*path}", get(|Path(path): Path<String>| async move { asset(&path) }))
}

/// The embedded file at `path`, or the JSON 404.
pub fn asset(path: &str) -> Response {
    let Some((name, body)) = ASSETS.iter().find(|(p, _)| *p == path) else {
        return ApiError::new(StatusCode::NOT_FOUND, "path", format!("no dashboard file {path:?}")).into_response();
    };
    let mut res = body.into_response();
    let h = res.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type(name)));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    res
}

/// The dashboard's URL on a server listening on `listen` (`HOST:PORT`): a wildcard host is
/// reached on loopback; `None` for port 0 (the port is chosen when binding).
pub fn url(listen: &str, tls: bool) -> Option<String> {
    let (host, port) = listen.rsplit_once(':')?;
    if port == "0" {
        return None;
    }
    let host = match host {
        "0.0.0.0" | "" => "127.0.0.1",
        "[::]" => "[::1]",
        h => h,
    };
    Some(format!("{}://{host}:{port}/dashboard/", if tls { "https" } else { "http" }))
}

fn content_type(name: &str) -> &'static str {
    match name.rsplit_once('.').map(|(_, e)| e) {
        Some("html") => "text/html; charset=utf-8",
        Some("js") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("wasm") => "application/wasm",
        _ => "text/plain; charset=utf-8",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_asset_is_served_with_its_type_and_unknown_paths_are_404() {
        for (name, body) in ASSETS {
            assert!(!body.is_empty(), "{name} is empty");
            let res = asset(name);
            assert_eq!(res.status(), StatusCode::OK, "{name}");
            assert!(res.headers().contains_key(header::CONTENT_SECURITY_POLICY));
        }
        assert_eq!(asset("sdk/pkg/harmony_wasm_bg.wasm").headers()[header::CONTENT_TYPE], "application/wasm");
        assert_eq!(asset("../Cargo.toml").status(), StatusCode::NOT_FOUND);
        assert_eq!(asset("js/nope.js").status(), StatusCode::NOT_FOUND);
    }

    #[test]
    fn dashboard_url_of_a_listen_address() {
        assert_eq!(url("127.0.0.1:8080", false).as_deref(), Some("http://127.0.0.1:8080/dashboard/"));
        assert_eq!(url("0.0.0.0:443", true).as_deref(), Some("https://127.0.0.1:443/dashboard/"));
        assert_eq!(url("[::]:8080", false).as_deref(), Some("http://[::1]:8080/dashboard/"));
        assert_eq!(url("127.0.0.1:0", false), None);
    }
}
