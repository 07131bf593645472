//! Draining: SIGTERM once killed `harmony serve` at once (exit 143,
//! in-flight requests dropped). Now SIGTERM and SIGINT drain: the listener closes, in-flight
//! requests are answered, the process exits 0, and every acknowledged report is stored.

use harmony_client::{Client, DeviceTask, Input, RetryPolicy, SimulatedDevices};
use harmony_core::schema::Value as Record;
use harmony_protocol::{CreateCollection, ReportItem};
use harmony_server::Store;
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const TOKEN: &str = "drain-token";

fn wait_listening(port: u16) {
    let t = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(t.elapsed() < Duration::from_secs(60), "server did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Batches of fresh reports: `threads` lists of `batches` batches of `size`.
fn batches(task: &DeviceTask, threads: u64, batches: u64, size: u64) -> Vec<Vec<Vec<ReportItem>>> {
    let mut devices = SimulatedDevices::new(29);
    (0..threads)
        .map(|t| {
            (0..batches)
                .map(|b| {
                    (0..size)
                        .map(|i| {
                            let device = (t * batches + b) * size + i;
                            let x = [Record::Unit((device % 200) as f64 / 100.0 - 1.0)];
                            devices.item(task, device, &Input::Record(&x)).unwrap()
                        })
                        .collect()
                })
                .collect()
        })
        .collect()
}

/// Runs `harmony serve` under load, sends `signal`; returns (exit code, acknowledged reports,
/// acknowledgements that arrived after the signal, stored reports).
fn load_then_signal(signal: &str) -> (Option<i32>, u64, u64, u64) {
    let dir = std::env::temp_dir().join(format!("harmony-drain-{}-{signal}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let db = dir.join("db.sqlite");
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut server = Command::new(env!("CARGO_BIN_EXE_harmony"))
        .args(["serve", "--db", &format!("sqlite://{}", db.display())])
        .args(["--listen", &format!("127.0.0.1:{port}"), "--analyst-token", TOKEN])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_listening(port);
    let url = format!("http://127.0.0.1:{port}");
    let client = Client::new(&url).with_token(TOKEN).with_retry(RetryPolicy { attempts: 1, ..Default::default() });
    let req: CreateCollection = serde_json::from_str(
        r#"{"schema": [{"kind": "numeric", "name": "x", "min": 0, "max": 1}], "epsilon": 2,
            "task": {"kind": "means", "strategy": "split"}}"#,
    )
    .unwrap();
    let created = client.create_collection(&req).unwrap();
    let config = created.config;
    let work = batches(&DeviceTask::new(config.clone()).unwrap(), 4, 150, 100);

    let signalled: Arc<Mutex<Option<Instant>>> = Arc::new(Mutex::new(None));
    let done = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = work
        .into_iter()
        .map(|mine| {
            let (client, config, signalled, done) = (client.clone(), config.clone(), signalled.clone(), done.clone());
            std::thread::spawn(move || {
                let (mut acked, mut after) = (0u64, 0u64);
                for batch in mine {
                    if done.load(Ordering::Relaxed) {
                        break;
                    }
                    match client.submit(&config, batch) {
                        Ok(ack) => {
                            acked += ack.accepted;
                            if signalled.lock().unwrap().is_some_and(|t| t.elapsed() > Duration::ZERO) {
                                after += 1;
                            }
                        }
                        Err(_) => break,
                    }
                }
                (acked, after)
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(800));
    *signalled.lock().unwrap() = Some(Instant::now());
    let kill = Command::new("kill").args([&format!("-{signal}"), &server.id().to_string()]).status().unwrap();
    assert!(kill.success());
    let t = Instant::now();
    let status = loop {
        if let Some(s) = server.try_wait().unwrap() {
            break s;
        }
        assert!(t.elapsed() < Duration::from_secs(40), "the server did not exit after SIG{signal}");
        std::thread::sleep(Duration::from_millis(20));
    };
    done.store(true, Ordering::Relaxed);
    let (mut acked, mut after) = (0, 0);
    for th in threads {
        let (a, f) = th.join().unwrap();
        acked += a;
        after += f;
    }
    let store = harmony_server::SqliteStore::open(&db).unwrap();
    let key = store.collections().unwrap()[0].key;
    let stored = store.count_reports(key).unwrap();
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
    (status.code(), acked, after, stored)
}

#[test]
fn sigterm_and_sigint_drain_and_exit_0_with_every_acknowledged_report_stored() {
    for signal in ["TERM", "INT"] {
        let (code, acked, after, stored) = load_then_signal(signal);
        eprintln!(
            "SIG{signal}: exit {code:?}, {acked} reports acknowledged ({after} batches after the signal), {stored} stored"
        );
        assert_eq!(code, Some(0), "SIG{signal}: exit status");
        assert!(acked > 0, "SIG{signal}: no load ran");
        assert_eq!(stored, acked, "SIG{signal}: stored = acknowledged");
    }
}

#[test]
fn serve_options_out_of_range_are_named() {
    for (opt, value) in [("--header-timeout", "0"), ("--max-connections", "0"), ("--body-timeout", "nan")] {
        let out = Command::new(env!("CARGO_BIN_EXE_harmony"))
            .args(["serve", "--db", "sqlite:///nonexistent/dir/db.sqlite", opt, value])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(&format!("{opt} is")), "{opt} {value}: {err}");
    }
}
