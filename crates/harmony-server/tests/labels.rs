//! A collection's optional name and description: set at create, validated like other text,
//! listed with the creation time and report count, kept across a restart, and a database
//! created before they were kept still opens.

use harmony_client::{Client, RetryPolicy};
use harmony_core::schema::{Attribute, Schema};
use harmony_protocol::spec::{FrequencySpec, TaskSpec};
use harmony_protocol::{CreateCollection, NewCollection};
use harmony_server::{SqliteStore, Store};
use std::path::{Path, PathBuf};
use std::sync::Arc;

mod common;

const TOKEN: &str = "test-token";

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("harmony-labels-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn start(dir: &Path) -> harmony_server::Running {
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.join("db.sqlite")).unwrap());
    harmony_server::spawn(store, TOKEN, "127.0.0.1:0", 2).unwrap()
}

fn client(url: &str) -> Client {
    Client::new(url).with_retry(RetryPolicy { attempts: 1, ..Default::default() }).with_token(TOKEN)
}

fn request() -> CreateCollection {
    let schema = Schema::new(vec![Attribute::Categorical {
        name: "color".into(),
        categories: vec!["red".into(), "green".into()],
    }])
    .unwrap();
    let task = TaskSpec::Frequency(FrequencySpec { attribute: "color".into(), mechanism: None });
    CreateCollection { schema: Some(schema), epsilon: 1.0, task }
}

fn named(name: Option<&str>, description: Option<&str>) -> NewCollection {
    NewCollection::new(request(), name.map(String::from), description.map(String::from))
}

/// Whether `s` is `YYYY-MM-DDTHH:MM:SSZ`.
fn is_iso(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 20 && b[4] == b'-' && b[10] == b'T' && b[19] == b'Z' && s.starts_with("20")
}

#[test]
fn collections_list_their_name_description_and_creation_time_across_restarts() {
    let dir = tmp("list");
    let server = start(&dir);
    let c = client(&server.url());
    let name = "Adult incomes, ε = 1 — \"pilot\" <b>x</b>";
    let a = c.create_named(&named(Some(name), Some("first wave; Adult 2026 (a \\ b)"))).unwrap().id;
    let b = c.create_collection(&request()).unwrap().id;
    let check = |c: &Client| {
        let list = c.collections().unwrap();
        let sa = list.iter().find(|s| s.id == a).unwrap();
        assert_eq!(sa.name.as_deref(), Some(name));
        assert_eq!(sa.description.as_deref(), Some("first wave; Adult 2026 (a \\ b)"));
        assert!(sa.created.as_deref().is_some_and(is_iso), "{:?}", sa.created);
        assert_eq!(sa.reports, 0);
        let sb = list.iter().find(|s| s.id == b).unwrap();
        assert_eq!((sb.name.as_deref(), sb.description.as_deref()), (None, None));
        assert!(sb.created.as_deref().is_some_and(is_iso));
    };
    check(&c);
    server.stop();
    let server = start(&dir);
    check(&client(&server.url()));
    server.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn collection_names_with_control_characters_or_over_the_length_cap_are_refused_naming_the_field() {
    let dir = tmp("refused");
    let server = start(&dir);
    let long_name = "n".repeat(129);
    let long_text = "d".repeat(2001);
    let cases: [(Option<&str>, Option<&str>, &str); 6] = [
        (Some("a\u{1b}[2Jb"), None, "name"),
        (Some("x\u{202E}y"), None, "name"),
        (Some(""), None, "name"),
        (Some(&long_name), None, "name"),
        (None, Some("ok\u{2028}"), "description"),
        (None, Some(&long_text), "description"),
    ];
    for (name, description, field) in cases {
        let body = serde_json::to_vec(&named(name, description)).unwrap();
        let (status, text) = common::raw(server.addr, "POST", "/v1/collections", &body, Some(TOKEN));
        assert_eq!(status, 400, "{name:?} {description:?}: {text}");
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["error"]["field"], field, "{text}");
    }
    // At the caps: accepted.
    let ok = named(Some(&"n".repeat(128)), Some(&"d".repeat(2000)));
    client(&server.url()).create_named(&ok).unwrap();
    // A misspelled key is still an unknown field.
    let body = br#"{"nmae": "x", "epsilon": 1, "task": {"kind": "heavy-hitters"}}"#;
    let (status, text) = common::raw(server.addr, "POST", "/v1/collections", body, Some(TOKEN));
    assert_eq!(status, 400, "{text}");
    server.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

/// A database whose `collections` table has no `meta` column (created before it existed): it
/// opens, its collections list with no name or creation time, and new ones keep theirs.
#[test]
fn a_database_from_before_collection_names_opens_and_gains_them() {
    let dir = tmp("old");
    let server = start(&dir);
    let old = client(&server.url()).create_collection(&request()).unwrap().id;
    server.stop();
    {
        let db = rusqlite::Connection::open(dir.join("db.sqlite")).unwrap();
        db.execute_batch("ALTER TABLE collections DROP COLUMN meta").unwrap();
    }
    let server = start(&dir);
    let c = client(&server.url());
    let new = c.create_named(&named(Some("after"), None)).unwrap().id;
    let list = c.collections().unwrap();
    let so = list.iter().find(|s| s.id == old).unwrap();
    assert_eq!((so.name.as_deref(), so.created.as_deref()), (None, None));
    assert_eq!(list.iter().find(|s| s.id == new).unwrap().name.as_deref(), Some("after"));
    server.stop();
    let _ = std::fs::remove_dir_all(&dir);
}
