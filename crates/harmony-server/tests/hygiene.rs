//! Conformance and hygiene of the API: methods a route does not take are 405 (not 415), a token
//! body must be an object, text with control, line-separator or bidirectional control
//! characters is refused naming its field, and the SQLite files are private.

mod common;
use common::{TestServer, raw};
use serde_json::{Value, json};

const TOKEN: &str = "hygiene-token";

fn start(tag: &str) -> TestServer {
    TestServer::start(tag, |store| harmony_server::spawn(store, TOKEN, "127.0.0.1:0", 2).unwrap())
}

fn field(body: &str) -> String {
    let v: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"));
    v["error"]["field"].as_str().unwrap_or_default().to_string()
}

fn create(s: &TestServer, body: &Value) -> (u16, String) {
    raw(s.addr(), "POST", "/v1/collections", body.to_string().as_bytes(), Some(TOKEN))
}

fn frequency(categories: &[&str]) -> Value {
    json!({"schema": [{"kind": "categorical", "name": "c", "categories": categories}], "epsilon": 2,
           "task": {"kind": "frequency", "attribute": "c"}})
}

/// POST (with a JSON body) to a GET-only route answers 405 with `Allow`, as any other method
/// the route does not take; it used to be refused 415 by the Content-Type check first.
#[test]
fn post_to_get_only_routes_is_405() {
    let s = start("hyg405");
    let (status, body) = create(&s, &frequency(&["a", "b"]));
    assert_eq!(status, 201, "{body}");
    let id = serde_json::from_str::<Value>(&body).unwrap()["id"].as_str().unwrap().to_string();
    for path in ["/healthz", "/readyz", "/metrics", "/openapi.json"]
        .into_iter()
        .map(String::from)
        .chain(["config", "days", "estimates", "model", "query"].map(|p| format!("/v1/collections/{id}/{p}")))
    {
        let (status, head, body) = common::request(s.addr(), "POST", &path, b"{}", Some(TOKEN));
        assert_eq!((status, field(&body).as_str()), (405, "method"), "POST {path}: {body}");
        assert!(head.contains("allow: get"), "POST {path}: {head}");
    }
}

/// POST with no Content-Type and no body (schemathesis's undeclared-method probe) to a
/// GET-only route is a 405 too: it used to be refused 415 by the Content-Type check, which ran
/// on every routed path; a route that takes POST still answers 415.
#[test]
fn post_without_a_content_type_to_get_only_routes_is_405() {
    use std::io::{Read, Write};
    let s = start("hyg405bare");
    let bare = |path: &str| {
        let mut c = std::net::TcpStream::connect(s.addr()).unwrap();
        let head =
            format!("POST {path} HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {TOKEN}\r\nconnection: close\r\n\r\n");
        c.write_all(head.as_bytes()).unwrap();
        let mut out = String::new();
        let _ = c.read_to_string(&mut out);
        let status: u16 = out.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
        (status, out.to_ascii_lowercase())
    };
    for path in ["/healthz", "/readyz", "/metrics", "/v1/collections/abc/config", "/v1/collections/abc/tokens/t1"] {
        let (status, text) = bare(path);
        assert_eq!(status, 405, "POST {path}: {text}");
        assert!(text.contains("allow: "), "POST {path}: {text}");
    }
    let (status, text) = bare("/v1/collections/abc/reports");
    assert_eq!(status, 415, "a POST route still needs JSON: {text}");
}

/// `[]` is not a token-create body (serde took a sequence for a struct whose fields all have
/// defaults, and minted a token).
#[test]
fn array_is_refused_as_a_token_body() {
    let s = start("hygarray");
    let (status, body) = create(&s, &frequency(&["a", "b"]));
    assert_eq!(status, 201, "{body}");
    let id = serde_json::from_str::<Value>(&body).unwrap()["id"].as_str().unwrap().to_string();
    let (status, body) = raw(s.addr(), "POST", &format!("/v1/collections/{id}/tokens"), b"[]", Some(TOKEN));
    assert_eq!((status, field(&body).as_str()), (400, "body"), "{body}");
    let (status, body) = raw(s.addr(), "POST", &format!("/v1/collections/{id}/tokens"), b"{}", Some(TOKEN));
    assert_eq!(status, 201, "{body}");
}

/// A label with U+2028 (it broke the dashboard's charts), a bidirectional override, and a
/// heavy-hitters candidate with terminal escapes (they reached the admin's terminal) are
/// refused with a 400 naming the field.
#[test]
fn control_and_bidi_text_is_refused_naming_the_field() {
    let s = start("hygtext");
    let cases = [
        (frequency(&["plain", "x\u{2028}y"]), "schema[0].categories[1]"),
        (frequency(&["a\u{202E}b", "c"]), "schema[0].categories[0]"),
        (
            json!({"epsilon": 2, "task": {"kind": "heavy-hitters", "top": 3,
                   "candidates": ["ok", "\u{1b}[2J\u{1b}[31mFAKE\u{1b}[0m"]}}),
            "task.candidates[1]",
        ),
    ];
    for (body, expected) in cases {
        let (status, answer) = create(&s, &body);
        assert_eq!((status, field(&answer).as_str()), (400, expected), "{answer}");
        assert!(answer.contains("U+"), "the message names the character: {answer}");
    }
    let (status, body) = create(&s, &frequency(&["état", "<=50K"]));
    assert_eq!(status, 201, "ordinary labels still pass: {body}");
}

/// The database file and its WAL are created readable by their owner only.
#[cfg(unix)]
#[test]
fn sqlite_files_are_created_0600() {
    use harmony_server::Store;
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("harmony-hyg-mode-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("h.db");
    let store = harmony_server::SqliteStore::open(&path).unwrap();
    let key = store.create_collection("c1", "{}").unwrap();
    store.insert_reports(key, vec![("r1".into(), vec![1])]).unwrap();
    for file in ["h.db", "h.db-wal"] {
        let mode = std::fs::metadata(dir.join(file)).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{file}: {mode:o}");
    }
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}
