//! Timeouts and caps against slow and idle clients (slowloris headers, stalled and idle declared
//! bodies, slow readers), fast tier — loopback only, short timeouts so each test takes a few
//! seconds. The defaults are in `harmony_server::Limits`
//! and docs/SERVER.md.

use axum::routing::get;
use harmony_server::Limits;
use serde_json::Value;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

const TOKEN: &str = "limits-token";

mod common;
use common::TestServer as Server;

/// A server with `limits` and a `/test/sleep` route (a slow handler).
fn start(name: &str, limits: Limits) -> Server {
    Server::start(&format!("limits-{name}"), |store| {
        let extend = |r: axum::Router<_>| r.route("/test/sleep", get(sleep));
        harmony_server::spawn_limits(store, TOKEN, "127.0.0.1:0", 2, &limits, extend).unwrap()
    })
}

async fn sleep() -> &'static str {
    tokio::time::sleep(Duration::from_secs(3)).await;
    "slept"
}

fn short(f: impl FnOnce(&mut Limits)) -> Limits {
    let mut l = Limits {
        header_timeout: Duration::from_secs(1),
        body_timeout: Duration::from_secs(1),
        request_timeout: Duration::from_secs(5),
        drain_timeout: Duration::from_secs(5),
        ..Limits::default()
    };
    f(&mut l);
    l
}

/// A whole request on a fresh connection: (status, lower-case head, body).
fn request(addr: SocketAddr, method: &str, path: &str, body: &str) -> (u16, String, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\nauthorization: Bearer {TOKEN}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body.as_bytes()).unwrap();
    read_answer(&mut s)
}

fn read_answer(s: &mut TcpStream) -> (u16, String, String) {
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    (status, head.to_ascii_lowercase(), body.to_string())
}

fn field(body: &str) -> String {
    let v: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body:?}"));
    v["error"]["field"].as_str().unwrap_or_else(|| panic!("not the error format: {body}")).to_string()
}

/// Whether the server closed `s` (EOF or reset, after any answer) within `wait`.
fn closed_within(s: &mut TcpStream, wait: Duration) -> bool {
    s.set_read_timeout(Some(wait)).unwrap();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => return false,
            Err(_) => return true,
        }
    }
}

/// A collection and a valid 100-report batch body for it (seeded simulated devices).
fn collection_and_batch(addr: SocketAddr) -> (String, Vec<String>) {
    collection_and_batches(addr, 60)
}

/// A means collection and `count` batches of 100 fresh reports for it.
fn collection_and_batches(addr: SocketAddr, count: u64) -> (String, Vec<String>) {
    use harmony_client::{DeviceTask, Input, SimulatedDevices};
    use harmony_core::schema::Value as Record;
    let create = r#"{"schema": [{"kind": "numeric", "name": "age", "min": 0, "max": 100}], "epsilon": 2,
        "task": {"kind": "means", "strategy": "split"}}"#;
    let (status, _, body) = request(addr, "POST", "/v1/collections", create);
    assert_eq!(status, 201, "{body}");
    let created: harmony_protocol::Created = serde_json::from_str(&body).unwrap();
    let task = DeviceTask::new(created.config).unwrap();
    let mut devices = SimulatedDevices::new(7);
    let batches = (0..count)
        .map(|b| {
            let items: Vec<String> = (0..100)
                .map(|i| {
                    let it = devices.item(&task, b * 100 + i, &Input::Record(&[Record::Unit(0.2)])).unwrap();
                    format!(r#"{{"id": "{}", "report": "{}"}}"#, it.id, it.report)
                })
                .collect();
            format!(r#"{{"collection": "{}", "config_version": 3, "reports": [{}]}}"#, created.id, items.join(","))
        })
        .collect();
    (created.id, batches)
}

/// The 99th percentile (nearest rank) of the latencies of posting `batches`, in seconds.
fn p99(addr: SocketAddr, id: &str, batches: &[String]) -> f64 {
    let mut t: Vec<f64> = batches
        .iter()
        .map(|b| {
            let t0 = Instant::now();
            let (status, _, body) = request(addr, "POST", &format!("/v1/collections/{id}/reports"), b);
            assert_eq!(status, 200, "{body}");
            t0.elapsed().as_secs_f64()
        })
        .collect();
    p99_of(&mut t)
}

/// The 99th percentile (nearest rank) of `t`.
fn p99_of(t: &mut [f64]) -> f64 {
    t.sort_by(f64::total_cmp);
    t[((t.len() as f64 * 0.99).ceil() as usize).clamp(1, t.len()) - 1]
}

/// One slow client: connects, sends a request line and then a header line every 200 ms until
/// the server closes the connection, and reconnects, until `until`. Returns the lifetime of
/// each connection the server closed, and how many it had to give up on (open longer than
/// `give_up`).
fn slow_client(addr: SocketAddr, until: Instant, give_up: Duration) -> (Vec<Duration>, usize) {
    let (mut lifetimes, mut stuck) = (Vec::new(), 0);
    let mut buf = [0u8; 1024];
    loop {
        let Ok(mut c) = TcpStream::connect(addr) else { return (lifetimes, stuck) };
        let t0 = Instant::now();
        let _ = c.write_all(b"POST /x HTTP/1.1\r\nHost: a\r\n");
        c.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
        let closed = loop {
            if t0.elapsed() > give_up {
                break false;
            }
            if c.write_all(b"a: b\r\n").is_err() {
                break true;
            }
            match c.read(&mut buf) {
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                _ => break true,
            }
        };
        match closed {
            true => lifetimes.push(t0.elapsed()),
            false => stuck += 1,
        }
        if Instant::now() >= until || !closed {
            return (lifetimes, stuck);
        }
    }
}

/// Posts fresh batches from `batches[*next..]` back to back until at least 30 were posted and
/// `until` has passed (cycling to `batches[from..]` again, as duplicates, only if the server takes
/// more than 100 batches a second); the latency of each, in seconds.
fn batches_until(addr: SocketAddr, id: &str, batches: &[String], next: &mut usize, until: Instant) -> Vec<f64> {
    let (from, mut latencies) = (*next, Vec::new());
    while latencies.len() < 30 || Instant::now() < until {
        latencies.push(p99(addr, id, std::slice::from_ref(&batches[*next])));
        *next = if *next + 1 < batches.len() { *next + 1 } else { from };
    }
    latencies
}

/// #24 (slowloris headers: 300/300 were still open at 45 s): `n` slow clients ([`slow_client`])
/// keep trickling header lines for `attack` (each reconnecting as soon as it is closed). Every
/// slow connection must be closed within `header_timeout` + 2 s, and the normal 100-report
/// batches posted back to back meanwhile keep a p99 within 2× the p99 of batches posted back to
/// back for as long, up to 20 s (at least 30), before the attack (baseline floored at 20 ms so that
/// scheduling noise on a shared 2-core machine is not a failure; a server the slow connections
/// stall takes seconds).
fn slowloris(name: &str, n: usize, header_timeout: Duration, attack: Duration) {
    let s = start(name, short(|l| l.header_timeout = header_timeout));
    let addr = s.addr();
    let (id, batches) = collection_and_batches(addr, 60 + 200 * attack.as_secs());
    let half = batches.len() / 2;
    let mut next = 0;
    let baseline = attack.min(Duration::from_secs(20));
    let base = p99_of(&mut batches_until(addr, &id, &batches[..half], &mut next, Instant::now() + baseline));
    let give_up = header_timeout + Duration::from_secs(2);
    let t0 = Instant::now();
    let until = t0 + attack;
    let slow: Vec<_> = (0..n).map(|_| std::thread::spawn(move || slow_client(addr, until, give_up))).collect();
    std::thread::sleep(Duration::from_millis(100));
    let mut latencies = batches_until(addr, &id, &batches[half..], &mut 0, until);
    let attacked = p99_of(&mut latencies);
    let results: Vec<(Vec<Duration>, usize)> = slow.into_iter().map(|t| t.join().unwrap()).collect();
    let stuck: usize = results.iter().map(|r| r.1).sum();
    let closed: usize = results.iter().map(|r| r.0.len()).sum();
    let latest = results.iter().flat_map(|r| r.0.iter()).max().copied().unwrap_or_default();
    eprintln!(
        "{n} slow clients for {:.0} s: {closed} slow connections closed, the longest after {latest:?}; \
         {} normal batches, p99 {:.1} ms (baseline {:.1} ms)",
        t0.elapsed().as_secs_f64(),
        latencies.len(),
        attacked * 1e3,
        base * 1e3
    );
    assert_eq!(stuck, 0, "{stuck} slow connections still open after {give_up:?}");
    assert!(closed >= n, "every slow client was closed at least once ({closed} closes)");
    assert!(attacked <= 2.0 * base.max(0.020), "p99 {attacked} s under attack vs {base} s before");
}

/// Fast tier: 40 slow connections, 1 s header timeout (~3 s).
#[test]
fn slow_headers_are_closed_and_normal_batches_keep_their_p99() {
    slowloris("slowloris", 40, Duration::from_secs(1), Duration::ZERO);
}

/// Heavy tier (the acceptance line): 300 slow clients for 60 s against the default 10 s header
/// timeout, each reconnecting when closed (~6 connections each), normal batches back to back
/// throughout.
#[test]
#[ignore]
fn heavy_300_slow_clients_for_60_s_are_closed_by_the_default_timeout() {
    slowloris("slowloris300", 300, Limits::default().header_timeout, Duration::from_secs(60));
}

/// #25 (a 32 MiB Content-Length with 1 byte every 5 s stayed open 40 s): the body deadline
/// answers 408 (JSON, field `body`) and the connection closes.
#[test]
fn stalled_bodies_get_408_and_are_closed() {
    let s = start("body", short(|_| {}));
    let (id, _) = collection_and_batch(s.addr());
    let mut c = TcpStream::connect(s.addr()).unwrap();
    let t0 = Instant::now();
    let head = format!(
        "POST /v1/collections/{id}/reports HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 1000000\r\n\r\n{{"
    );
    c.write_all(head.as_bytes()).unwrap();
    c.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    while t0.elapsed() < Duration::from_secs(4) {
        let _ = c.write_all(b" ");
        match c.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => break,
        }
    }
    let elapsed = t0.elapsed();
    let text = String::from_utf8_lossy(&out).into_owned();
    assert!(text.starts_with("HTTP/1.1 408"), "after {elapsed:?}: {text:?}");
    assert_eq!(field(text.split_once("\r\n\r\n").unwrap().1), "body");
    assert!(closed_within(&mut c, Duration::from_secs(2)), "still open after the 408");
    assert!(elapsed < Duration::from_secs(3), "closed after {elapsed:?}");
}

/// Bodies in flight are capped by the bytes actually received: with a 1 MiB budget, two
/// connections that sent 512 KiB each and stalled hold all of it, so the next body is answered
/// 503 with `Retry-After` (field `body`) at its first bytes; once the stalled ones are dropped
/// (408 after the grace) the budget is free again.
#[test]
fn bodies_over_the_in_flight_byte_budget_get_503() {
    let s = start(
        "bytes",
        short(|l| {
            l.max_body_bytes_in_flight = 1 << 20;
            l.body_timeout = Duration::from_secs(30);
            l.body_grace = Duration::from_secs(2);
        }),
    );
    let addr = s.addr();
    let mut stalled = idle_bodies(addr, 2, 32 << 20);
    for c in &mut stalled {
        c.write_all(&vec![b' '; 512 << 10]).unwrap();
    }
    std::thread::sleep(Duration::from_millis(300));
    let (status, head, body) = request(addr, "POST", "/v1/collections/x/reports", "{}");
    assert_eq!((status, field(&body).as_str()), (503, "body"), "{body}");
    assert!(head.contains("retry-after: 1"), "{head}");
    for c in &mut stalled {
        let (status, _, body) = read_answer(c);
        assert_eq!((status, field(&body).as_str()), (408, "body"), "a stalled body after the grace: {body}");
    }
    let (status, _, body) = request(addr, "POST", "/v1/collections/x/reports", "{}");
    assert_eq!((status, field(&body).as_str()), (404, "collection"), "the budget is free again: {body}");
}

/// Connections over `max_connections` are answered 503 (JSON, `Retry-After`) and closed; the
/// server keeps answering once they go.
#[test]
fn connections_over_the_cap_get_503() {
    let s = start(
        "conns",
        short(|l| {
            l.max_connections = 8;
            l.header_timeout = Duration::from_secs(5);
        }),
    );
    let idle: Vec<TcpStream> = (0..8).map(|_| TcpStream::connect(s.addr()).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(200));
    let (status, head, body) = request(s.addr(), "GET", "/healthz", "");
    assert_eq!((status, field(&body).as_str()), (503, "server"), "{head}");
    assert!(head.contains("retry-after: 1"), "{head}");
    drop(idle);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(request(s.addr(), "GET", "/healthz", "").0, 200);
}

/// Requests over `max_in_flight` are answered 503 with `Retry-After` (`/healthz` is exempt),
/// and a request over the whole-request timeout is a 503 in the JSON format.
#[test]
fn requests_over_the_in_flight_cap_or_the_timeout_get_503() {
    let s = start(
        "inflight",
        short(|l| {
            l.max_in_flight = 2;
            l.request_timeout = Duration::from_secs(1);
        }),
    );
    let addr = s.addr();
    let sleepers: Vec<_> =
        (0..2).map(|_| std::thread::spawn(move || request(addr, "GET", "/test/sleep", ""))).collect();
    std::thread::sleep(Duration::from_millis(300));
    let (status, head, body) = request(addr, "GET", "/openapi.json", "");
    assert_eq!((status, field(&body).as_str()), (503, "server"), "{body}");
    assert!(head.contains("retry-after: 1"), "{head}");
    assert_eq!(request(addr, "GET", "/healthz", "").0, 200, "liveness is exempt");
    for t in sleepers {
        let (status, head, body) = t.join().unwrap();
        assert_eq!((status, field(&body).as_str()), (503, "server"), "{body}");
        assert!(head.contains("retry-after"), "{head}");
    }
    assert_eq!(request(addr, "GET", "/openapi.json", "").0, 200);
}

/// This process's resident set, in MiB (Linux).
fn rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0.0);
    kb / 1024.0
}

/// 300 connections each declare a 32 MiB body and send 32 MiB − 100 bytes, one after the
/// other, then stall: with the default 256 MiB budget, counted as bytes arrive, 8 are taken
/// whole and every later one is refused (503, or its connection closed under the writer) at its
/// first bytes. The process's RSS (server and this client, one process) grows by at most
/// 768 MiB (the documented bound: 3× the budget) while they stall, and the stalled ones are
/// dropped after the grace.
#[test]
fn three_hundred_stalled_32mib_bodies_keep_rss_bounded() {
    let s = start(
        "rss",
        short(|l| {
            l.body_timeout = Duration::from_secs(30);
            l.body_grace = Duration::from_secs(5);
        }),
    );
    let addr = s.addr();
    let len = (32 << 20) - 100;
    let before = rss_mib();
    let chunk = vec![b' '; 1 << 20];
    let (mut admitted, mut refused) = (Vec::new(), 0);
    let t0 = Instant::now();
    for mut c in idle_bodies(addr, 300, 32 << 20) {
        let mut sent = 0;
        while sent < len {
            let n = chunk.len().min(len - sent);
            if c.write_all(&chunk[..n]).is_err() {
                break;
            }
            sent += n;
        }
        c.set_read_timeout(Some(Duration::from_millis(if sent < len { 2000 } else { 50 }))).unwrap();
        let mut buf = [0u8; 1024];
        match c.read(&mut buf) {
            Ok(n) if n > 0 => {
                assert!(buf.starts_with(b"HTTP/1.1 503"), "{}", String::from_utf8_lossy(&buf[..n]));
                refused += 1;
            }
            Err(e) if !matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => refused += 1,
            Ok(_) => refused += 1,
            Err(_) => admitted.push(c),
        }
    }
    let held = rss_mib() - before;
    eprintln!(
        "admitted {}, refused {refused} in {:?}; RSS +{held:.0} MiB while stalled (before {before:.0} MiB)",
        admitted.len(),
        t0.elapsed()
    );
    assert_eq!((admitted.len(), refused), (8, 292), "admitted / refused");
    assert!(held < 768.0, "RSS grew by {held} MiB");
    for c in &mut admitted {
        assert!(closed_within(c, Duration::from_secs(10)), "a stalled body outlived the grace");
    }
}

/// Opens `n` connections that each send the head of a report POST declaring `declared` body
/// bytes, and then nothing.
fn idle_bodies(addr: SocketAddr, n: usize, declared: usize) -> Vec<TcpStream> {
    let head = format!(
        "POST /v1/collections/x/reports HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {declared}\r\n\r\n"
    );
    (0..n)
        .map(|_| {
            let mut c = TcpStream::connect(addr).unwrap();
            c.write_all(head.as_bytes()).unwrap();
            c
        })
        .collect()
}

/// Eight connections declaring 32 MiB bodies and sending nothing (with the default 256 MiB
/// budget they reserved all of it, and 69 of 70 honest uploads were answered 503): honest
/// 100-report batches posted meanwhile are all stored.
#[test]
fn idle_declared_bodies_do_not_starve_ingest() {
    let s = start("idle32", short(|l| l.body_timeout = Duration::from_secs(30)));
    let addr = s.addr();
    let (id, batches) = collection_and_batches(addr, 20);
    let _idle = idle_bodies(addr, 8, 32 << 20);
    std::thread::sleep(Duration::from_millis(300));
    for b in &batches {
        let (status, _, body) = request(addr, "POST", &format!("/v1/collections/{id}/reports"), b);
        assert_eq!(status, 200, "an honest batch while 8 idle 32 MiB bodies are open: {body}");
    }
}

/// 256 connections declaring a 100-byte body and sending nothing (they held every in-flight
/// permit: every request but `/healthz` was answered 503, `/readyz` included): honest batches,
/// config reads and readiness are answered meanwhile.
#[test]
fn idle_declared_small_bodies_do_not_starve_the_api_or_readiness() {
    let s = start("idle256", short(|l| l.body_timeout = Duration::from_secs(30)));
    let addr = s.addr();
    let (id, batches) = collection_and_batches(addr, 5);
    let _idle = idle_bodies(addr, 256, 100);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(request(addr, "GET", "/readyz", "").0, 200, "readiness");
    let (status, _, body) = request(addr, "GET", &format!("/v1/collections/{id}/config"), "");
    assert_eq!(status, 200, "config: {body}");
    for b in &batches {
        let (status, _, body) = request(addr, "POST", &format!("/v1/collections/{id}/reports"), b);
        assert_eq!(status, 200, "an honest batch while 256 idle bodies are open: {body}");
    }
    assert_eq!(request(addr, "GET", "/readyz", "").0, 200, "readiness");
}

/// A declared body that does not arrive within the grace is answered 408 and closed (long
/// before the body timeout); one trickling below the minimum rate too.
#[test]
fn idle_and_trickling_bodies_are_dropped_after_the_grace() {
    let s = start(
        "grace",
        short(|l| {
            l.body_timeout = Duration::from_secs(30);
            l.body_grace = Duration::from_secs(1);
            l.min_body_rate = 4096;
        }),
    );
    let addr = s.addr();
    let t0 = Instant::now();
    let mut idle = idle_bodies(addr, 4, 32 << 20);
    let mut trickle = idle_bodies(addr, 1, 1 << 20).pop().unwrap();
    trickle.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    // 100 bytes every 300 ms: a gap below the grace, a rate far below 4 KiB/s.
    while t0.elapsed() < Duration::from_secs(6) {
        let _ = trickle.write_all(&[b' '; 100]);
        match trickle.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => break,
        }
    }
    let text = String::from_utf8_lossy(&out).into_owned();
    assert!(text.starts_with("HTTP/1.1 408"), "the trickling body after {:?}: {text:?}", t0.elapsed());
    assert!(t0.elapsed() < Duration::from_secs(5), "the trickling body lasted {:?}", t0.elapsed());
    for c in &mut idle {
        let (status, _, body) = read_answer(c);
        assert_eq!((status, field(&body).as_str()), (408, "body"), "{body}");
    }
    assert!(t0.elapsed() < Duration::from_secs(8), "the idle bodies lasted {:?}", t0.elapsed());
}

/// 8 MiB of zeros (a large answer for slow readers).
async fn big() -> axum::body::Bytes {
    static BIG: std::sync::LazyLock<axum::body::Bytes> =
        std::sync::LazyLock::new(|| axum::body::Bytes::from(vec![0u8; 8 << 20]));
    BIG.clone()
}

/// Clients that pipeline requests for large answers and never read them (they held their
/// connections for ever: with `--max-connections 64`, 64 of them refused every new connection)
/// are disconnected by the write-progress timeout, and new connections are served again.
#[test]
fn slow_readers_are_disconnected() {
    let limits = short(|l| {
        l.max_connections = 16;
        l.write_timeout = Duration::from_secs(1);
    });
    let s = Server::start("limits-slowread", |store| {
        let extend = |r: axum::Router<_>| r.route("/test/big", get(big));
        harmony_server::spawn_limits(store, TOKEN, "127.0.0.1:0", 2, &limits, extend).unwrap()
    });
    let addr = s.addr();
    let readers: Vec<TcpStream> = (0..16)
        .map(|_| {
            let mut c = TcpStream::connect(addr).unwrap();
            for _ in 0..4 {
                c.write_all(b"GET /test/big HTTP/1.1\r\nhost: x\r\n\r\n").unwrap();
            }
            c
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let (status, _, _) = request(addr, "GET", "/healthz", "");
    assert_eq!(status, 503, "16 slow readers hold the 16 connections");
    std::thread::sleep(Duration::from_secs(3));
    let (status, _, body) = request(addr, "GET", "/healthz", "");
    assert_eq!(status, 200, "the slow readers were disconnected: {body}");
    drop(readers);
}

/// Connections over `max_connections_per_peer` from one address are answered 503 (JSON,
/// naming the address cap) while the global cap has room.
#[test]
fn connections_over_the_per_peer_cap_get_503() {
    let s = start(
        "peers",
        short(|l| {
            l.max_connections_per_peer = 4;
            l.header_timeout = Duration::from_secs(5);
        }),
    );
    let idle: Vec<TcpStream> = (0..4).map(|_| TcpStream::connect(s.addr()).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(200));
    let (status, _, body) = request(s.addr(), "GET", "/healthz", "");
    assert_eq!((status, field(&body).as_str()), (503, "server"), "{body}");
    assert!(body.contains("your address"), "{body}");
    drop(idle);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(request(s.addr(), "GET", "/healthz", "").0, 200);
}
