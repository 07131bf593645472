//! Heavy tier: PostgreSQL restarted under load. `harmony serve` runs on a
//! throwaway PostgreSQL cluster (initdb'd here with /usr/lib/postgresql/*/bin, on a free loopback
//! port; skipped with a message when PostgreSQL is not installed). Four clients post batches
//! with retries; PostgreSQL is stopped (`pg_ctl -m fast stop`) for 3 s in the middle. During the
//! outage `/readyz` and a write answer 503 with `Retry-After` and `/healthz` 200; afterwards the
//! clients finish, every acknowledged report id is stored, `estimates.reports` equals the stored
//! count, and the server process is the one started at the beginning.

use harmony_client::{Client, DeviceTask, Input, RetryPolicy, SimulatedDevices};
use harmony_core::schema::{Attribute, Schema, Value};
use harmony_protocol::estimates::Query;
use harmony_protocol::spec::{MeansSpec, TaskSpec};
use harmony_protocol::{CreateCollection, ReportBatch, ReportItem};
use std::collections::HashSet;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

mod common;

const BATCHES: usize = 300;
const PER_BATCH: usize = 100;

/// A throwaway cluster; stopped (immediate) and removed on drop.
struct Cluster {
    bin: PathBuf,
    dir: PathBuf,
    port: u16,
}

impl Cluster {
    /// Runs a shell command as the `postgres` user when we are root (initdb refuses root).
    fn sh(cmd: &str) -> bool {
        let root = Command::new("id").arg("-u").output().map(|o| o.stdout.starts_with(b"0")).unwrap_or(false);
        let mut c = if root {
            let mut c = Command::new("su");
            c.args(["postgres", "-c", cmd]);
            c
        } else {
            let mut c = Command::new("sh");
            c.args(["-c", cmd]);
            c
        };
        c.stdout(Stdio::null()).stderr(Stdio::null()).status().map(|s| s.success()).unwrap_or(false)
    }

    fn pg_ctl(&self, args: &str) -> bool {
        let (bin, dir, port) = (self.bin.display(), self.dir.display(), self.port);
        Self::sh(&format!(
            "{bin}/pg_ctl -D {dir}/data -o '-p {port} -k {dir} -c listen_addresses=127.0.0.1' -l {dir}/log -w {args}"
        ))
    }

    /// `None` (with a message) when PostgreSQL is not installed or does not start.
    fn start() -> Option<Cluster> {
        let bin = std::fs::read_dir("/usr/lib/postgresql")
            .ok()?
            .filter_map(|e| Some(e.ok()?.path().join("bin")))
            .filter(|b| b.join("initdb").exists())
            .max()?;
        let dir = std::env::temp_dir().join(format!("harmony-pg-restart-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).ok()?;
        let _ = Command::new("chown").args(["postgres", &dir.display().to_string()]).status();
        let c = Cluster { bin, dir, port: common::free_port() };
        let init = format!("{}/initdb -D {}/data -A trust -U postgres", c.bin.display(), c.dir.display());
        if !Self::sh(&init) || !c.pg_ctl("start") {
            eprintln!("PostgreSQL cluster did not start in {}: test skipped", c.dir.display());
            return None;
        }
        Some(c)
    }

    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// The stored report ids (psql).
    fn stored_ids(&self) -> Vec<String> {
        let out = Command::new(self.bin.join("psql"))
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-U", "postgres", "-d", "postgres", "-At"])
            .args(["-c", "SELECT report_id FROM harmony_reports"])
            .output()
            .unwrap();
        assert!(out.status.success(), "psql: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap().lines().map(str::to_string).collect()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.pg_ctl("-m immediate stop");
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// One raw request: (status, lower-cased head).
fn request(url: &str, method: &str, path: &str, body: &[u8]) -> (u16, String) {
    let mut s = std::net::TcpStream::connect(url.trim_start_matches("http://")).unwrap();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out).to_ascii_lowercase();
    (text.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0), text)
}

fn bodies(created: &harmony_protocol::Created) -> Vec<Vec<u8>> {
    let task = DeviceTask::new(created.config.clone()).unwrap();
    let mut devices = SimulatedDevices::new(5);
    (0..BATCHES)
        .map(|b| {
            let reports = (b * PER_BATCH..(b + 1) * PER_BATCH)
                .map(|i| {
                    let row = [Value::Unit((i % 100) as f64 / 50.0 - 0.99)];
                    let item = devices.item(&task, i as u64, &Input::Record(&row)).unwrap();
                    ReportItem { id: format!("r{i}"), ..item }
                })
                .collect();
            let batch =
                ReportBatch { collection: created.id.clone(), config_version: created.config.config_version, reports };
            serde_json::to_vec(&batch).unwrap()
        })
        .collect()
}

#[test]
#[ignore]
fn postgres_restart_under_load_recovers_and_loses_nothing() {
    let t0 = Instant::now();
    let Some(pg) = Cluster::start() else { return };
    let mut server = common::serve(&pg.url());
    let url = server.url.clone();
    let schema = Schema::new(vec![Attribute::Numeric { name: "x".into(), min: 0.0, max: 1.0 }]).unwrap();
    let req = CreateCollection { schema: Some(schema), epsilon: 1.0, task: TaskSpec::Means(MeansSpec::default()) };
    let created = Client::new(&url).with_token("tok").create_collection(&req).unwrap();
    let bodies = bodies(&created);
    let retry = RetryPolicy { attempts: 400, base: Duration::from_millis(10), max: Duration::from_millis(200) };
    let (next, acked) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let acked_ids = Mutex::new(HashSet::new());
    let during = std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                let c = Client::new(&url).with_retry(retry);
                loop {
                    let b = next.fetch_add(1, Ordering::SeqCst);
                    if b >= BATCHES {
                        return;
                    }
                    let ack = c.submit_raw(&created.id, &bodies[b]).expect("retries finish");
                    assert_eq!(ack.accepted + ack.duplicates, PER_BATCH as u64);
                    acked_ids.lock().unwrap().extend((b * PER_BATCH..(b + 1) * PER_BATCH).map(|i| format!("r{i}")));
                    acked.fetch_add(1, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(30));
                }
            });
        }
        while acked.load(Ordering::SeqCst) < BATCHES / 3 {
            std::thread::sleep(Duration::from_millis(2));
        }
        assert!(pg.pg_ctl("-m fast stop"), "pg_ctl stop");
        let stopped = Instant::now();
        let mut during = (0, 0, 0); // /readyz 503s, write 503s with Retry-After, /healthz 200s
        while stopped.elapsed() < Duration::from_secs(3) {
            let (status, head) = request(&url, "GET", "/readyz", b"");
            during.0 += usize::from(status == 503 && head.contains("\"field\":\"store\""));
            let (status, head) = request(&url, "POST", &format!("/v1/collections/{}/reports", created.id), &bodies[0]);
            assert!(status == 503 || status == 200, "a write during the outage: {head}");
            during.1 += usize::from(status == 503 && head.contains("\r\nretry-after: "));
            during.2 += usize::from(request(&url, "GET", "/healthz", b"").0 == 200);
            std::thread::sleep(Duration::from_millis(100));
        }
        assert!(acked.load(Ordering::SeqCst) < BATCHES, "the load ended before the restart");
        assert!(pg.pg_ctl("start"), "pg_ctl start");
        during
    });
    eprintln!(
        "during the 3 s outage: {} /readyz 503, {} writes 503 + Retry-After, {} /healthz 200",
        during.0, during.1, during.2
    );
    assert!(during.0 >= 10 && during.1 >= 10 && during.2 >= 10, "{during:?}");
    let t = Instant::now();
    while request(&url, "GET", "/readyz", b"").0 != 200 {
        assert!(t.elapsed() < Duration::from_secs(15), "/readyz did not recover");
        std::thread::sleep(Duration::from_millis(50));
    }
    let stored: HashSet<String> = pg.stored_ids().into_iter().collect();
    let acked_ids = acked_ids.lock().unwrap();
    assert_eq!(acked_ids.len(), BATCHES * PER_BATCH);
    assert!(acked_ids.iter().all(|id| stored.contains(id)), "an acknowledged report is not stored");
    let est = Client::new(&url).with_token("tok").estimates(&created.id, &Query::default()).unwrap();
    assert_eq!(est.reports, stored.len() as u64, "estimates.reports == stored count");
    assert_eq!(stored.len(), BATCHES * PER_BATCH);
    assert!(server.running(), "the server exited");
    eprintln!("{} reports stored and counted; {:.1} s in all", stored.len(), t0.elapsed().as_secs_f64());
    drop(server);
}
