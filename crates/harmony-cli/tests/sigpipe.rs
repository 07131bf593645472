//! A peer that closes its connection early must never stop `harmony serve`.
//!
//! Before the fix, `main` restored SIGPIPE's default action for every subcommand; hyper writes
//! responses with `writev` (no `MSG_NOSIGNAL`), so 50 pipelined requests followed by a close
//! killed the server with exit 141 and no log line (7 of 7 tries).
//! This test repeats that and the other triggers found (a reset right after a POST), then checks that the server still answers.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn wait_listening(port: u16) {
    let t = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(t.elapsed() < Duration::from_secs(60), "server did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn healthz(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else { return false };
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    if s.write_all(b"GET /healthz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n").is_err() {
        return false;
    }
    let mut out = String::new();
    s.read_to_string(&mut out).is_ok() && out.starts_with("HTTP/1.1 200")
}

/// Creates a collection whose config is over 1 MB (1,000 categorical attributes with long
/// labels); its id.
fn large_config(port: u16) -> String {
    let label = |a: usize, l: usize| format!("{a}-{l}-{}", "x".repeat(240));
    let schema: Vec<String> = (0..1000)
        .map(|a| {
            let labels: Vec<String> = (0..4).map(|l| format!("\"{}\"", label(a, l))).collect();
            format!(r#"{{"kind": "categorical", "name": "a{a}", "categories": [{}]}}"#, labels.join(","))
        })
        .collect();
    let body = format!(r#"{{"schema": [{}], "epsilon": 1, "task": {{"kind": "means"}}}}"#, schema.join(","));
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let head = format!(
        "POST /v1/collections HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nAuthorization: Bearer tok\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    assert!(out.starts_with("HTTP/1.1 201"), "{}", &out[..out.len().min(300)]);
    let v: serde_json::Value = serde_json::from_str(out.split_once("\r\n\r\n").unwrap().1).unwrap();
    v["id"].as_str().unwrap().to_string()
}

/// 1,000 early closes, a third each of the three ways that killed the server:
/// 50 pipelined requests then a close, a POST then a reset, a 1 MB config asked for then a close.
#[test]
fn early_closes_do_not_kill_the_server() {
    let dir = std::env::temp_dir().join(format!("harmony-sigpipe-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut server = Command::new(env!("CARGO_BIN_EXE_harmony"))
        .args(["serve", "--db", &format!("sqlite://{}", dir.join("db.sqlite").display())])
        .args(["--listen", &format!("127.0.0.1:{port}"), "--analyst-token", "tok"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_listening(port);
    let config = large_config(port);
    let pipelined = b"GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n".repeat(50);
    let post = b"POST /v1/collections/x/reports HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\n{}";
    let get_config = format!("GET /v1/collections/{config}/config HTTP/1.1\r\nHost: a\r\n\r\n");
    for i in 0..1000 {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        match i % 3 {
            // 50 pipelined requests, then close before reading a byte.
            0 => drop(s.write_all(&pipelined)),
            // A POST, then close once the answer has arrived unread (0–20 ms): closing a socket
            // with unread data sends a reset.
            1 => {
                let _ = s.write_all(post);
                std::thread::sleep(Duration::from_millis((i % 21) as u64));
            }
            // A large config (over 1 MB) asked for, and the connection closed at once.
            _ => drop(s.write_all(get_config.as_bytes())),
        }
        drop(s);
        if let Ok(Some(status)) = server.try_wait() {
            panic!("harmony serve died after {} early closes: {status}", i + 1);
        }
    }
    std::thread::sleep(Duration::from_millis(200));
    let alive = server.try_wait().unwrap().is_none();
    let answered = alive && healthz(port);
    let _ = server.kill();
    let _ = server.wait();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(alive, "harmony serve exited after early closes");
    assert!(answered, "harmony serve stopped answering /healthz after early closes");
}
