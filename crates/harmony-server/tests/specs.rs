//! Specs validated whole, and every error in the JSON error format. Each test is a request
//! that the server once answered unsafely (a crash, a hang or an unbounded allocation).

use harmony_client::{DeviceTask, Input, SimulatedDevices};
use harmony_core::schema::Value as Record;
use harmony_protocol::{Created, ReportItem};
use serde_json::Value;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::time::Instant;

const TOKEN: &str = "specs-token";

mod common;
use common::TestServer as Server;

impl Server {
    fn start_specs(name: &str) -> Server {
        Server::start(&format!("specs-{name}"), |store| harmony_server::spawn(store, TOKEN, "127.0.0.1:0", 2).unwrap())
    }
}

/// An answer: status, headers (lower-case names) and body.
struct Answer {
    status: u16,
    headers: String,
    body: String,
}

impl Answer {
    /// The `error.field` of a JSON error body (panics if the body is not the JSON error format).
    fn field(&self) -> String {
        let v: Value = serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", self.body));
        v["error"]["field"].as_str().unwrap_or_else(|| panic!("not the error format: {}", self.body)).to_string()
    }
}

/// One raw HTTP/1.1 request with the given Content-Type (None: no header).
fn send(addr: SocketAddr, method: &str, path: &str, body: &[u8], content_type: Option<&str>) -> Answer {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    let ct = content_type.map(|c| format!("content-type: {c}\r\n")).unwrap_or_default();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nhost: x\r\n{ct}content-length: {}\r\nauthorization: Bearer {TOKEN}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    let _ = s.write_all(body);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let (headers, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    Answer { status, headers: headers.to_ascii_lowercase(), body: body.to_string() }
}

fn json(addr: SocketAddr, method: &str, path: &str, body: &str) -> Answer {
    send(addr, method, path, body.as_bytes(), Some("application/json"))
}

fn create(addr: SocketAddr, body: &str) -> Answer {
    json(addr, "POST", "/v1/collections", body)
}

const SCHEMA: &str = r#"[{"kind": "numeric", "name": "age", "min": 0, "max": 100},
    {"kind": "categorical", "name": "c", "categories": ["a", "b", "d"]}]"#;

fn with_schema(schema: &str, task: &str) -> String {
    format!(r#"{{"schema": {schema}, "epsilon": 2, "task": {task}}}"#)
}

/// n categorical attributes of `labels` labels each, as schema JSON.
fn wide_schema(n: usize, labels: usize) -> String {
    let cats: Vec<String> = (0..labels).map(|j| format!("\"l{j}\"")).collect();
    let cats = cats.join(",");
    let attrs: Vec<String> =
        (0..n).map(|i| format!(r#"{{"kind": "categorical", "name": "a{i}", "categories": [{cats}]}}"#)).collect();
    format!("[{}]", attrs.join(","))
}

/// #10c: unknown fields inside an attribute were dropped silently (201); now a 400 naming the
/// field, as they already were in the task spec and the envelope (named too now).
#[test]
fn unknown_fields_are_refused_naming_the_field() {
    let s = Server::start_specs("unknown");
    let task = r#"{"kind": "means"}"#;
    let schema = r#"[{"kind": "numeric", "name": "age", "min": 0, "max": 100, "bogus": 1, "nested": {"a": 2}}]"#;
    let a = create(s.addr(), &with_schema(schema, task));
    assert_eq!((a.status, a.field().as_str()), (400, "schema[0].bogus"), "{}", a.body);
    let schema = r#"[{"kind": "numeric", "name": "age", "min": 0, "max": 100},
        {"kind": "categorical", "name": "c", "categories": ["a", "b"], "labels": ["x"]}]"#;
    let a = create(s.addr(), &with_schema(schema, task));
    assert_eq!((a.status, a.field().as_str()), (400, "schema[1].labels"), "{}", a.body);
    let a = create(s.addr(), &with_schema(SCHEMA, r#"{"kind": "means", "strategy": "split", "bogus": 1}"#));
    assert_eq!((a.status, a.field().as_str()), (400, "task.bogus"), "{}", a.body);
    let a = create(s.addr(), &format!(r#"{{"schema": {SCHEMA}, "epsilon": 2, "task": {task}, "extra": 1}}"#));
    assert_eq!((a.status, a.field().as_str()), (400, "extra"), "{}", a.body);
    let a = create(s.addr(), &with_schema(SCHEMA, task));
    assert_eq!(a.status, 201, "{}", a.body);
}

/// #10c: a name `x\u0000\u0007\r\n<script>` was stored and served back; names are now letters,
/// digits, spaces and `_-.:/()#`, and labels have no control characters (`<=50K` stays valid).
#[test]
fn names_with_control_or_markup_characters_are_refused() {
    let s = Server::start_specs("names");
    let task = r#"{"kind": "means"}"#;
    for name in [r#"x\u0000\u0007\r\n<script>"#, "<b>age</b>", "a\\\"b", " age", "tab\\there"] {
        let schema = format!(r#"[{{"kind": "numeric", "name": "{name}", "min": 0, "max": 1}}]"#);
        let a = create(s.addr(), &with_schema(&schema, task));
        assert_eq!((a.status, a.field().as_str()), (400, "schema[0].name"), "{name}: {}", a.body);
    }
    let schema = r#"[{"kind": "categorical", "name": "income", "categories": ["<=50K", "a\u0007"]}]"#;
    let a = create(s.addr(), &with_schema(schema, task));
    assert_eq!((a.status, a.field().as_str()), (400, "schema[0].categories[1]"), "{}", a.body);
    let schema = r#"[{"kind": "categorical", "name": "income (USD)", "categories": ["<=50K", ">50K"]}]"#;
    let a = create(s.addr(), &with_schema(schema, task));
    assert_eq!(a.status, 201, "{}", a.body);
}

/// #12: sample-k creation is quadratic in the attributes (8,000 took ~6 s on the workers); now
/// refused at once naming `schema` and the limit of 1,000 attributes.
#[test]
fn sample_k_with_8000_attributes_is_refused_at_once() {
    let s = Server::start_specs("samplek");
    let t = Instant::now();
    let a = create(s.addr(), &with_schema(&wide_schema(8000, 2), r#"{"kind": "means", "strategy": "sample-k"}"#));
    let seconds = t.elapsed().as_secs_f64();
    assert_eq!((a.status, a.field().as_str()), (400, "schema"), "{}", a.body);
    assert!(a.body.contains("8000 attributes") && a.body.contains("1000"), "{}", a.body);
    assert!(seconds < 2.0, "refused after {seconds} s");
}

/// #13: Bassily–Smith kept 128 MiB per 16k-label attribute (3 attributes: +400 MB); now labels
/// per attribute (4,096), labels in all (16,384) and its matrices (32 MiB) are capped.
#[test]
fn bassily_smith_with_16k_labels_is_refused() {
    let s = Server::start_specs("bassily");
    let task = r#"{"kind": "means", "strategy": "split", "categorical_mechanism": "bassily-smith"}"#;
    let a = create(s.addr(), &with_schema(&wide_schema(3, 16_384), task));
    assert_eq!((a.status, a.field().as_str()), (400, "schema[0].categories"), "{}", a.body);
    assert!(a.body.contains("4096"), "{}", a.body);
    let a = create(s.addr(), &with_schema(&wide_schema(5, 4096), r#"{"kind": "means", "strategy": "split"}"#));
    assert_eq!((a.status, a.field().as_str()), (400, "schema"), "{}", a.body);
    assert!(a.body.contains("16384"), "{}", a.body);
    let a = create(s.addr(), &with_schema(&wide_schema(2, 4096), task));
    assert_eq!((a.status, a.field().as_str()), (400, "task.categorical_mechanism"), "{}", a.body);
    assert!(a.body.contains("32 MiB"), "{}", a.body);
}

/// A linear-queries domain (the attributes' cross-product) over 2^20 cells is refused before
/// its workload is built.
#[test]
fn linear_queries_domain_over_the_limit_is_refused() {
    let s = Server::start_specs("domain");
    let task = r#"{"kind": "linear-queries", "attributes": ["a0", "a1", "a2"], "workload": "identity"}"#;
    let a = create(s.addr(), &with_schema(&wide_schema(3, 200), task));
    assert_eq!((a.status, a.field().as_str()), (400, "task.attributes"), "{}", a.body);
    assert!(a.body.contains("8000000 cells") && a.body.contains("1048576"), "{}", a.body);
}

/// #11: bounds ±1e308 were accepted, then every estimate was null and devices failed with
/// "Unit(NaN)"; bounds are now within ±1e15.
#[test]
fn bounds_beyond_1e15_are_refused() {
    let s = Server::start_specs("bounds");
    let schema = r#"[{"kind": "numeric", "name": "x", "min": -1e308, "max": 1e308}]"#;
    let a = create(s.addr(), &with_schema(schema, r#"{"kind": "means"}"#));
    assert_eq!((a.status, a.field().as_str()), (400, "schema[0].min"), "{}", a.body);
}

/// A collection of the means task and one device's report item for `record` (seeded).
fn collection_and_device(addr: SocketAddr) -> (String, DeviceTask) {
    let a = create(addr, &with_schema(SCHEMA, r#"{"kind": "means", "strategy": "split"}"#));
    assert_eq!(a.status, 201, "{}", a.body);
    let created: Created = serde_json::from_str(&a.body).unwrap();
    (created.id.clone(), DeviceTask::new(created.config).unwrap())
}

fn item(task: &DeviceTask, seed: u64, age: f64) -> ReportItem {
    let record = [Record::Unit(age), Record::Category(1)];
    SimulatedDevices::new(seed).item(task, 0, &Input::Record(&record)).unwrap()
}

fn batch(id: &str, items: &[&ReportItem]) -> String {
    let items: Vec<String> =
        items.iter().map(|i| format!(r#"{{"id": "{}", "report": "{}"}}"#, i.id, i.report)).collect();
    format!(r#"{{"collection": "{id}", "config_version": 3, "reports": [{}]}}"#, items.join(","))
}

fn stored(addr: SocketAddr, id: &str) -> u64 {
    let a = json(addr, "GET", &format!("/v1/collections/{id}/estimates"), "");
    assert_eq!(a.status, 200, "{}", a.body);
    serde_json::from_str::<Value>(&a.body).unwrap()["reports"].as_u64().unwrap()
}

/// #15: the same report id with other bytes was counted as a duplicate (200); now a 409 naming
/// the id, and nothing of its batch is stored. The same id with the same bytes stays an
/// idempotent duplicate.
#[test]
fn repeated_report_id_with_other_bytes_is_409() {
    let s = Server::start_specs("conflict");
    let (id, task) = collection_and_device(s.addr());
    let path = format!("/v1/collections/{id}/reports");
    let first = item(&task, 1, 0.5);
    let a = json(s.addr(), "POST", &path, &batch(&id, &[&first]));
    assert_eq!(a.status, 200, "{}", a.body);
    let a = json(s.addr(), "POST", &path, &batch(&id, &[&first]));
    assert_eq!((a.status, a.body.contains("\"duplicates\":1")), (200, true), "{}", a.body);
    // The same id, other bytes (another device's randomness or value), behind a new report.
    let other = (2..100)
        .map(|seed| ReportItem { id: first.id.clone(), ..item(&task, seed, -0.5) })
        .find(|i| i.report != first.report)
        .expect("another report");
    let fresh = item(&task, 200, 0.1);
    let fresh = ReportItem { id: "fresh-1".into(), ..fresh };
    let a = json(s.addr(), "POST", &path, &batch(&id, &[&fresh, &other]));
    assert_eq!((a.status, a.field().as_str()), (409, "reports[1].id"), "{}", a.body);
    assert_eq!(stored(s.addr(), &id), 1, "nothing of the conflicting batch is stored");
    let a = json(s.addr(), "POST", &path, &batch(&id, &[&fresh]));
    assert_eq!((a.status, a.body.contains("\"accepted\":1")), (200, true), "{}", a.body);
    assert_eq!(stored(s.addr(), &id), 2);
}

/// #20: any Content-Type was accepted (a web page could post through browsers with a "simple"
/// request); bodies must now be `application/json` (415 otherwise, nothing stored).
#[test]
fn wrong_content_type_is_415() {
    let s = Server::start_specs("ctype");
    let (id, task) = collection_and_device(s.addr());
    let path = format!("/v1/collections/{id}/reports");
    let body = batch(&id, &[&item(&task, 1, 0.5)]);
    for ct in [Some("text/plain"), Some("application/x-www-form-urlencoded"), Some("multipart/form-data"), None] {
        let a = send(s.addr(), "POST", &path, body.as_bytes(), ct);
        assert_eq!((a.status, a.field().as_str()), (415, "content-type"), "{ct:?}: {}", a.body);
    }
    let a = send(s.addr(), "POST", "/v1/collections", SCHEMA.as_bytes(), Some("text/plain"));
    assert_eq!((a.status, a.field().as_str()), (415, "content-type"), "{}", a.body);
    assert_eq!(stored(s.addr(), &id), 0);
    let a = send(s.addr(), "POST", &path, body.as_bytes(), Some("application/json; charset=utf-8"));
    assert_eq!(a.status, 200, "{}", a.body);
}

/// #22: a bad path (`%FF`) was a text/plain 400, unknown routes and methods empty 404/405; every
/// error is now in the JSON error format (405 keeps its `Allow` header).
#[test]
fn bad_paths_unknown_routes_and_methods_answer_json_errors() {
    let s = Server::start_specs("paths");
    let a = json(s.addr(), "GET", "/v1/collections/%FF/config", "");
    assert_eq!((a.status, a.field().as_str()), (400, "path"), "{}", a.body);
    let a = json(s.addr(), "GET", "/nope", "");
    assert_eq!((a.status, a.field().as_str()), (404, "path"), "{}", a.body);
    let a = json(s.addr(), "GET", "/v1/collections/abc/config/", "");
    assert_eq!((a.status, a.field().as_str()), (404, "path"), "{}", a.body);
    let a = json(s.addr(), "POST", "/nope", "{}");
    assert_eq!((a.status, a.field().as_str()), (404, "path"), "{}", a.body);
    for method in ["PUT", "DELETE", "PATCH"] {
        let a = json(s.addr(), method, "/v1/collections", "{}");
        assert_eq!((a.status, a.field().as_str()), (405, "method"), "{method}: {}", a.body);
        assert!(a.headers.contains("allow: post"), "{}", a.headers);
    }
    let a = json(s.addr(), "GET", "/v1/collections/abc/config", "");
    assert_eq!((a.status, a.field().as_str()), (404, "collection"), "{}", a.body);
}
