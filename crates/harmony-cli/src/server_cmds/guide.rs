//! `harmony serve --guide DIR`: the user guide built by `mdbook build book` (DIR is `book/book`),
//! served under `/docs/` from disk. Only files inside DIR are served: a path with `..`, a
//! backslash or a NUL, or one that resolves outside DIR through a link, is a 404.

use axum::extract::Path as UrlPath;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use harmony_server::{ApiError, AppState};
use std::path::{Path, PathBuf};

/// Checks that `dir` is a built guide (it holds `index.html`), naming what to run otherwise.
pub fn check(dir: &Path) -> anyhow::Result<PathBuf> {
    let dir = dir.canonicalize().map_err(|e| anyhow::anyhow!("--guide {}: {e}", dir.display()))?;
    if !dir.join("index.html").is_file() {
        anyhow::bail!(
            "--guide {}: no index.html: build the guide first (`mdbook build book`, then --guide book/book)",
            dir.display()
        );
    }
    Ok(dir)
}

/// Adds `GET /docs/…` to the server's routes.
pub fn routes(r: axum::Router<AppState>, dir: PathBuf) -> axum::Router<AppState> {
    let root = dir.clone();
    r.route("/docs", get(|| async { Redirect::permanent("/docs/") }))
        .route(
            "/docs/",
            get(move || {
                let d = root.clone();
                async move { file(&d, "") }
            }),
        )
        .route(
            "/docs/{*path}",
            get(move |UrlPath(path): UrlPath<String>| {
                let d = dir.clone();
                async move { file(&d, &path) }
            }),
        )
}

/// The file of the guide at `path` (a directory: its index.html), or the JSON 404.
pub fn file(dir: &Path, path: &str) -> Response {
    let not_found = || ApiError::new(StatusCode::NOT_FOUND, "path", format!("no guide page {path:?}")).into_response();
    let Some(found) = resolve(dir, path) else { return not_found() };
    let Ok(body) = std::fs::read(&found) else { return not_found() };
    let mut res = body.into_response();
    let h = res.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type(&found)));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    res
}

/// `dir/path` (a directory: its index.html) when it is a file inside `dir` (canonical).
fn resolve(dir: &Path, path: &str) -> Option<PathBuf> {
    if path.split('/').any(|part| part == "..") || path.contains(['\\', '\0']) {
        return None;
    }
    let mut p = dir.join(path.trim_start_matches('/'));
    if p.is_dir() {
        p = p.join("index.html");
    }
    let p = p.canonicalize().ok()?;
    (p.starts_with(dir) && p.is_file()).then_some(p)
}

fn content_type(path: &Path) -> &'static str {
    match path.extension().and_then(|e| e.to_str()) {
        Some("html") => "text/html; charset=utf-8",
        Some("js") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("json") => "application/json",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("woff2") => "font/woff2",
        Some("woff") => "font/woff",
        Some("ttf") => "font/ttf",
        Some("ico") => "image/x-icon",
        _ => "text/plain; charset=utf-8",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serves_the_guide_and_nothing_outside_it() {
        let tmp = std::env::temp_dir().join(format!("harmony-guide-{}", std::process::id()));
        let dir = tmp.join("book");
        std::fs::create_dir_all(dir.join("tasks")).unwrap();
        std::fs::write(dir.join("index.html"), "<h1>guide</h1>").unwrap();
        std::fs::write(dir.join("tasks/index.html"), "tasks").unwrap();
        std::fs::write(dir.join("book.js"), "js").unwrap();
        std::fs::write(tmp.join("secret.txt"), "secret").unwrap();
        let dir = check(&dir).unwrap();
        assert_eq!(file(&dir, "").status(), StatusCode::OK);
        assert_eq!(file(&dir, "tasks/").status(), StatusCode::OK);
        assert_eq!(file(&dir, "book.js").headers()[header::CONTENT_TYPE], "text/javascript; charset=utf-8");
        for bad in ["../secret.txt", "tasks/../../secret.txt", "nope.html", "..\\secret.txt"] {
            assert_eq!(file(&dir, bad).status(), StatusCode::NOT_FOUND, "{bad}");
        }
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(tmp.join("secret.txt"), dir.join("link.txt")).unwrap();
            assert_eq!(file(&dir, "link.txt").status(), StatusCode::NOT_FOUND);
        }
        let e = check(&tmp).unwrap_err().to_string();
        assert!(e.contains("mdbook build book"), "{e}");
        std::fs::remove_dir_all(&tmp).unwrap();
    }
}
