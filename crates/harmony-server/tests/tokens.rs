//! Tokens on loopback (issue 17 item 5): the admin token creates collections and mints
//! per-collection analyst tokens; an analyst token reads its own collection only; a revoked
//! token is refused at once and after a restart; the store keeps hashes, never tokens;
//! `/metrics` needs the metrics or the admin token; a refused request's body is never read.

use harmony_client::{Client, ClientError, RetryPolicy};
use harmony_core::schema::{Attribute, Schema};
use harmony_protocol::CreateCollection;
use harmony_protocol::estimates::Query;
use harmony_protocol::spec::{FrequencySpec, TaskSpec};
use harmony_server::{AppState, Limits, SqliteStore, Store};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

const ADMIN: &str = "admin-secret-1";
const METRICS: &str = "metrics-secret-2";

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("harmony-tokens-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn start(dir: &Path) -> harmony_server::Running {
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.join("db.sqlite")).unwrap());
    let state = AppState::with_tokens(store, ADMIN, Some(METRICS)).unwrap();
    harmony_server::spawn_state(state, "127.0.0.1:0", 2, &Limits::default(), |r| r).unwrap()
}

fn client(url: &str, token: &str) -> Client {
    Client::new(url).with_token(token).with_retry(RetryPolicy { attempts: 1, ..Default::default() })
}

fn create(c: &Client) -> Result<String, ClientError> {
    let schema =
        Schema::new(vec![Attribute::Categorical { name: "c".into(), categories: vec!["a".into(), "b".into()] }]);
    let task = TaskSpec::Frequency(FrequencySpec { attribute: "c".into(), mechanism: None });
    Ok(c.create_collection(&CreateCollection { schema: Some(schema.unwrap()), epsilon: 1.0, task })?.id)
}

fn status(r: Result<impl Sized, ClientError>) -> u16 {
    match r {
        Err(ClientError::Rejected { status, .. }) => status,
        Err(e) => panic!("{e}"),
        Ok(_) => 200,
    }
}

fn get(url: &str, token: Option<&str>) -> u16 {
    let mut r = ureq::get(url).config().http_status_as_error(false).build();
    if let Some(t) = token {
        r = r.header("authorization", &format!("Bearer {t}"));
    }
    r.call().unwrap().status().as_u16()
}

#[test]
fn tokens_are_scoped_hashed_and_revocable() {
    let dir = tmp("scoped");
    let server = start(&dir);
    let url = server.url();
    let admin = client(&url, ADMIN);
    let (a, b) = (create(&admin).unwrap(), create(&admin).unwrap());
    let ta = admin.create_token(&a, "dashboard ana").unwrap();
    assert!(ta.token.starts_with("hct_") && ta.token.len() == 68, "{}", ta.token);
    let reader = client(&url, &ta.token);
    // Its own collection: yes; the other, creating, minting, metrics: no.
    assert_eq!(reader.estimates(&a, &Query::default()).unwrap().reports, 0);
    assert_eq!(status(reader.estimates(&b, &Query::default())), 403);
    assert_eq!(status(create(&reader)), 403);
    assert_eq!(status(reader.create_token(&a, "")), 403);
    assert_eq!(get(&format!("{url}/metrics"), Some(&ta.token)), 403);
    let mine: Vec<String> = reader.collections().unwrap().into_iter().map(|c| c.id).collect();
    assert_eq!(mine, vec![a.clone()]);
    assert_eq!(admin.collections().unwrap().len(), 2);
    // Metrics: its token or the admin's; nothing else.
    assert_eq!(get(&format!("{url}/metrics"), None), 401);
    assert_eq!(get(&format!("{url}/metrics"), Some(METRICS)), 200);
    assert_eq!(get(&format!("{url}/metrics"), Some(ADMIN)), 200);
    assert_eq!(status(client(&url, METRICS).estimates(&a, &Query::default())), 403);
    // Bad labels, unknown collections and tokens.
    assert_eq!(status(admin.create_token(&a, "<b>")), 400);
    assert_eq!(status(admin.create_token("nope", "")), 404);
    assert_eq!(status(admin.revoke_token(&a, "0000000000000000")), 404);
    assert_eq!(status(admin.revoke_token(&b, &ta.token_id)), 404);
    // Rotation: a second token, then the first revoked: refused at once, listed as revoked.
    let ta2 = admin.create_token(&a, "rotated").unwrap();
    admin.revoke_token(&a, &ta.token_id).unwrap();
    assert_eq!(status(reader.estimates(&a, &Query::default())), 401);
    assert!(client(&url, &ta2.token).estimates(&a, &Query::default()).is_ok());
    let mut listed: Vec<(String, bool)> =
        admin.tokens(&a).unwrap().into_iter().map(|t| (t.token_id, t.revoked)).collect();
    listed.sort();
    let mut want = vec![(ta.token_id.clone(), true), (ta2.token_id.clone(), false)];
    want.sort();
    assert_eq!(listed, want);
    // After a restart: the same grants, loaded from the store.
    server.stop();
    let server = start(&dir);
    let url = server.url();
    assert_eq!(status(client(&url, &ta.token).estimates(&a, &Query::default())), 401);
    assert!(client(&url, &ta2.token).estimates(&a, &Query::default()).is_ok());
    assert_eq!(status(client(&url, &ta2.token).estimates(&b, &Query::default())), 403);
    server.stop();
    // The database holds hashes, never a token.
    let mut bytes = Vec::new();
    for f in std::fs::read_dir(&dir).unwrap() {
        bytes.extend(std::fs::read(f.unwrap().path()).unwrap());
    }
    for t in [&ta.token, &ta2.token] {
        assert!(!bytes.windows(t.len()).any(|w| w == t.as_bytes()), "a token is stored in the clear");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A POST with a wrong token is answered 401 before its body arrives: the client sends the
/// headers of a 1 MiB body and nothing else, and still gets its answer.
#[test]
fn refused_before_the_body_is_read() {
    let dir = tmp("early");
    let server = start(&dir);
    let addr = server.url().trim_start_matches("http://").to_string();
    for (token, want) in [("wrong", "401"), (METRICS, "403")] {
        let mut s = std::net::TcpStream::connect(&addr).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
        let head = format!(
            "POST /v1/collections HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: 1048576\r\n\r\n"
        );
        s.write_all(head.as_bytes()).unwrap();
        let mut buf = [0u8; 256];
        let n = s.read(&mut buf).unwrap();
        let text = String::from_utf8_lossy(&buf[..n]);
        assert!(text.starts_with(&format!("HTTP/1.1 {want}")), "{text}");
    }
    server.stop();
    let _ = std::fs::remove_dir_all(&dir);
}
