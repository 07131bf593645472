//! The server's acceptance load run under attack (heavy tier, `#[ignore]`; loopback only):
//! an honest `harmony submit` of 100,000 rows, back to back for a phase, first alone (the
//! baseline) and then under each of three attacks from 127.0.0.2 (a loopback alias, so the
//! attackers have their own per-address cap and the honest 127.0.0.1 keeps its own):
//! (a) 8 connections declaring 32 MiB bodies and sending nothing, (b) 256 connections declaring
//! a 100-byte body and sending nothing, (c) 1,000 slow readers (pipelined requests for the
//! 521 KB `vega.min.js`, a 4 KiB receive buffer, never read). Every attacker reconnects as soon
//! as the server closes it (or, for a slow reader, after 12 s), so each attack lasts the whole
//! phase. Throughout, `/readyz` is polled every 250 ms and the server's RSS sampled.
//! Each phase runs on a fresh server over an empty store: a submit's p99 grows with the rows the
//! store already holds (93 → 183 ms over the baseline's first 900,000), so the k-th submit of
//! every phase meets the same store. Each submit's p99 batch latency is one trial; pass: every
//! submit stores all its rows, the median trial of each attack phase's first k submits is at
//! most 2× the median of the baseline's first k (k the shorter phase's count) (floored at 50 ms: scheduling noise on a shared 2-core machine; a single
//! submit's p99 is near its slowest batch, and one stall of the machine once put one of seven at
//! 3.8× while its neighbours stayed at 1.1×), `/readyz` answers 200 to every poll, and the server's RSS stays under
//! [`RSS_BOUND_MIB`]. The kernel's TCP memory is printed (machine-wide, so not asserted): with
//! autotuned send buffers the slow readers pinned 1.6 GiB of it, with `Limits::send_buffer`
//! about 130 MiB. `HARMONY_ATTACK_SECS` sets a phase's length (default 60: ≈ 4.5 min in all).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

mod common;
use common::{harmony, root, serve_sqlite};

/// The server's RSS must stay under this: the attackers hold no body bytes (the 256 MiB body
/// budget counts bytes received, and they send none), so only connection state grows (measured:
/// 25 MiB at rest, 35 MiB peak under 1,000 slow readers).
const RSS_BOUND_MIB: f64 = 256.0;

/// One attack: what each connection sends, how many, and how long one is held at most.
#[derive(Clone, Copy)]
struct Attack {
    name: &'static str,
    connections: usize,
    /// Declared body size of an idle POST, or 0 for a slow reader.
    declared: usize,
}

const ATTACKS: [Attack; 3] = [
    Attack { name: "(a) 8 idle 32 MiB bodies", connections: 8, declared: 32 << 20 },
    Attack { name: "(b) 256 idle 100-byte bodies", connections: 256, declared: 100 },
    Attack { name: "(c) 1,000 slow readers", connections: 1000, declared: 0 },
];

/// What one attacking connection sends.
fn attack_head(a: Attack) -> Vec<u8> {
    match a.declared {
        0 => b"GET /dashboard/vendor/vega.min.js HTTP/1.1\r\nhost: a\r\n\r\n".repeat(8),
        n => format!(
            "POST /v1/collections/x/reports HTTP/1.1\r\nhost: a\r\ncontent-type: application/json\r\ncontent-length: {n}\r\n\r\n"
        )
        .into_bytes(),
    }
}

/// One attacker: connects from 127.0.0.2, sends its head, holds the connection until the
/// server closes it (a slow reader never reads; it lets go after 12 s) and reconnects, until
/// `stop`. Counts the connections it opened.
async fn attacker(addr: SocketAddr, a: Attack, stop: Arc<AtomicBool>, opened: Arc<AtomicU64>) {
    let head = attack_head(a);
    let tick = Duration::from_millis(200);
    while !stop.load(Ordering::Relaxed) {
        let sock = tokio::net::TcpSocket::new_v4().unwrap();
        sock.bind("127.0.0.2:0".parse().unwrap()).unwrap();
        if a.declared == 0 {
            sock.set_recv_buffer_size(4096).unwrap();
        }
        let Ok(Ok(mut s)) = tokio::time::timeout(Duration::from_secs(2), sock.connect(addr)).await else {
            tokio::time::sleep(tick).await;
            continue;
        };
        opened.fetch_add(1, Ordering::Relaxed);
        if s.write_all(&head).await.is_err() {
            continue;
        }
        let t0 = Instant::now();
        let mut buf = [0u8; 4096];
        while !stop.load(Ordering::Relaxed) && t0.elapsed() < Duration::from_secs(12) {
            if a.declared == 0 {
                tokio::time::sleep(tick).await;
                continue;
            }
            if let Ok(Ok(0) | Err(_)) = tokio::time::timeout(tick, s.read(&mut buf)).await {
                break;
            }
        }
    }
}

/// Samples of one phase.
#[derive(Default)]
struct Samples {
    readyz_polls: u64,
    readyz_failures: Vec<String>,
    readyz_worst_ms: f64,
    rss_peak_mib: f64,
    fds_peak: usize,
    tcp_mem_peak_pages: u64,
}

/// A resident-set or fd figure of process `pid`.
fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0.0);
    kb / 1024.0
}

/// The kernel's TCP memory in pages (machine-wide: other processes' sockets count too).
fn tcp_mem_pages() -> u64 {
    let s = std::fs::read_to_string("/proc/net/sockstat").unwrap_or_default();
    let tcp = s.lines().find(|l| l.starts_with("TCP:")).unwrap_or("");
    let mut words = tcp.split_whitespace();
    words.find(|w| *w == "mem").and_then(|_| words.next()).and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// `GET /readyz` from 127.0.0.1 on a fresh connection: the status line, or the error.
fn readyz(port: u16) -> Result<(), String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| format!("connect: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    s.write_all(b"GET /readyz HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n").map_err(|e| format!("write: {e}"))?;
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out);
    let line = text.lines().next().unwrap_or("(no answer within 2 s)");
    if line.starts_with("HTTP/1.1 200") { Ok(()) } else { Err(line.to_string()) }
}

/// Polls readiness, the server's RSS and fds, and the kernel's TCP memory every 250 ms until
/// `stop`.
fn sample(port: u16, pid: u32, stop: &AtomicBool) -> Samples {
    let mut s = Samples::default();
    while !stop.load(Ordering::Relaxed) {
        let t = Instant::now();
        if let Err(e) = readyz(port) {
            s.readyz_failures.push(e);
        }
        s.readyz_polls += 1;
        s.readyz_worst_ms = s.readyz_worst_ms.max(t.elapsed().as_secs_f64() * 1e3);
        s.rss_peak_mib = s.rss_peak_mib.max(rss_mib(pid));
        let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).map(|d| d.count()).unwrap_or(0);
        s.fds_peak = s.fds_peak.max(fds);
        s.tcp_mem_peak_pages = s.tcp_mem_peak_pages.max(tcp_mem_pages());
        std::thread::sleep(Duration::from_millis(250).saturating_sub(t.elapsed()));
    }
    s
}

/// One `harmony submit` of the 100,000-row file: its p99 batch latency in ms (asserting every
/// row was stored).
fn submit(url: &str, id: &str, data: &str, ledger: &str) -> f64 {
    let args = ["submit", "--server", url, "--collection", id, "--data", data, "--budget-ledger", ledger, "--force"];
    let out = common::run(&args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "harmony submit: {}\n{err}", out.status);
    assert!(err.contains("submitted 100000 devices: 100000 stored"), "{err}");
    let p99 = err.split("p99 ").nth(1).and_then(|r| r.split(" ms").next()).and_then(|v| v.parse().ok());
    p99.unwrap_or_else(|| panic!("no p99 in {err}"))
}

/// One phase: `attack` (none for the baseline) for `secs`, honest submits back to back
/// meanwhile (at least one); the p99 of each submit and the samples.
fn phase(
    server: &common::Server,
    id: &str,
    data: &str,
    ledger: &str,
    attack: Option<Attack>,
    secs: u64,
) -> (Vec<f64>, Samples, u64) {
    let port: u16 = server.url.rsplit(':').next().unwrap().parse().unwrap();
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let pid = server.child.id();
    let stop = Arc::new(AtomicBool::new(false));
    let opened = Arc::new(AtomicU64::new(0));
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let attackers: Vec<_> = attack
        .into_iter()
        .flat_map(|a| (0..a.connections).map(move |_| a))
        .map(|a| rt.spawn(attacker(addr, a, stop.clone(), opened.clone())))
        .collect();
    std::thread::sleep(Duration::from_secs(if attack.is_some() { 2 } else { 0 }));
    let sampling = Arc::new(AtomicBool::new(false));
    let sampler = {
        let sampling = sampling.clone();
        std::thread::spawn(move || sample(port, pid, &sampling))
    };
    let t0 = Instant::now();
    let mut p99s = Vec::new();
    while p99s.is_empty() || t0.elapsed() < Duration::from_secs(secs) {
        p99s.push(submit(&server.url, id, data, ledger));
    }
    sampling.store(true, Ordering::Relaxed);
    stop.store(true, Ordering::Relaxed);
    let samples = sampler.join().unwrap();
    rt.block_on(async {
        for a in attackers {
            let _ = a.await;
        }
    });
    (p99s, samples, opened.load(Ordering::Relaxed))
}

/// A 100,000-row CSV: Adult's rows, repeated.
fn hundred_thousand_rows(dir: &Path) -> String {
    let text = std::fs::read_to_string(root().join("data/adult.csv")).unwrap();
    let mut lines = text.lines();
    let mut out = format!("{}\n", lines.next().unwrap());
    let rows: Vec<&str> = lines.collect();
    for l in rows.iter().cycle().take(100_000) {
        out.push_str(l);
        out.push('\n');
    }
    let path = dir.join("rows-100000.csv");
    std::fs::write(&path, out).unwrap();
    path.display().to_string()
}

fn worst(v: &[f64]) -> f64 {
    v.iter().copied().fold(0.0, f64::max)
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 }
}

/// A fresh server over its own SQLite file in `dir/name` and a frequency collection on it.
fn fresh(dir: &Path, name: &str) -> (common::Server, String) {
    let sub = dir.join(name);
    std::fs::create_dir_all(&sub).unwrap();
    let server = serve_sqlite(&sub);
    let schema = root().join("examples/adult.toml").display().to_string();
    let create = ["collection", "create", "--server", &server.url, "--token", "tok", "--schema", &schema];
    let id = harmony(&[&create[..], &["--epsilon", "1", "--task", "frequency", "--column", "education"]].concat());
    (server, id.trim().to_string())
}

#[test]
#[ignore]
fn honest_submit_keeps_its_p99_and_readiness_under_idle_bodies_and_slow_readers() {
    let secs: u64 = std::env::var("HARMONY_ATTACK_SECS").ok().and_then(|v| v.parse().ok()).unwrap_or(60);
    let dir = std::env::temp_dir().join(format!("harmony-attack-load-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let data = hundred_thousand_rows(&dir);
    let ledger = dir.join("ledger.json").display().to_string();
    let (server, id) = fresh(&dir, "baseline");
    let (base, base_samples, _) = phase(&server, &id, &data, &ledger, None, secs);
    drop(server);
    let mut report = vec![format!(
        "baseline: {} submits, p99 {:?} ms (median {:.1}); RSS peak {:.0} MiB",
        base.len(),
        base,
        median(&base),
        base_samples.rss_peak_mib
    )];
    let mut failures = Vec::new();
    for (i, a) in ATTACKS.into_iter().enumerate() {
        let (server, id) = fresh(&dir, &format!("attack-{i}"));
        let (p99s, s, opened) = phase(&server, &id, &data, &ledger, Some(a), secs);
        drop(server);
        // The k-th submits of both phases met stores of the same size: compare the first k.
        let k = p99s.len().min(base.len());
        let (ours, theirs) = (median(&p99s[..k]), median(&base[..k]).max(50.0));
        let line = format!(
            "{}: {} submits, p99 {p99s:?} ms (median of the first {k} {ours:.1} vs the baseline's {theirs:.1}: {:.2}×; worst {:.1}); {opened} attacking connections opened; \
             /readyz {}/{} 200, slowest {:.0} ms; server RSS peak {:.0} MiB, fds peak {}; kernel TCP memory peak {:.0} MiB",
            a.name,
            p99s.len(),
            ours / theirs,
            worst(&p99s),
            s.readyz_polls - s.readyz_failures.len() as u64,
            s.readyz_polls,
            s.readyz_worst_ms,
            s.rss_peak_mib,
            s.fds_peak,
            s.tcp_mem_peak_pages as f64 * 4096.0 / (1 << 20) as f64,
        );
        eprintln!("{line}");
        if ours > 2.0 * theirs {
            failures.push(format!("{}: median p99 {ours:.1} ms > 2 × {theirs:.1} ms", a.name));
        }
        if !s.readyz_failures.is_empty() {
            failures.push(format!("{}: /readyz failed {:?}", a.name, s.readyz_failures));
        }
        if s.rss_peak_mib > RSS_BOUND_MIB {
            failures.push(format!("{}: RSS {} MiB > {RSS_BOUND_MIB}", a.name, s.rss_peak_mib));
        }
        report.push(line);
    }
    eprintln!("{}", report.join("\n"));
    let _ = std::fs::remove_dir_all(&dir);
    assert!(failures.is_empty(), "{failures:#?}");
}
