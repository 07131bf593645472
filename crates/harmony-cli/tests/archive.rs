//! `harmony serve --archive DIR`: the reports a server stores are appended to Parquet segments in
//! `harmony export`'s layout. Segments close after `--archive-segment-reports` and at a graceful
//! stop; a restarted server adds parts after the existing
//! ones; `harmony aggregate` of the archive gives `harmony query`'s document.

mod common;

use common::{BIN, adult_rows, free_port, harmony, root, wait_for_port};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("harmony-archive-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A server child, killed on drop unless [`stop`] stopped it (a failed assertion leaves no server).
struct Served(Option<Child>);

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// `harmony serve --archive ARCHIVE --archive-segment-reports 500` on `db`.
fn serve(db: &str, archive: &Path) -> (Served, String) {
    let port = free_port();
    let child = Command::new(BIN)
        .args(["serve", "--db", db, "--listen", &format!("127.0.0.1:{port}"), "--analyst-token", "tok"])
        .args(["--log-level", "warn", "--archive", &archive.display().to_string(), "--archive-segment-reports", "500"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_port(port);
    (Served(Some(child)), format!("http://127.0.0.1:{port}"))
}

/// SIGTERM, then waits (up to 60 s) for a clean exit.
fn stop(mut served: Served) {
    let mut child = served.0.take().expect("running");
    let pid = child.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let t = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "harmony serve exited with {status}");
            return;
        }
        if t.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("harmony serve did not stop within 60 s of SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn submit(server: &str, id: &str, data: &str, seed: &str) {
    harmony(&["submit", "--server", server, "--collection", id, "--data", data, "--simulate-devices", "--seed", seed]);
}

fn query(server: &str, id: &str) -> Value {
    let q = harmony(&["query", "--server", server, "--token", "tok", "--collection", id, "--format", "json"]);
    serde_json::from_str(&q).unwrap()
}

fn parts(col: &Path) -> (Vec<PathBuf>, usize) {
    let files = harmony_data::reports::part_files(col).unwrap();
    let mut tmp = 0;
    for day in std::fs::read_dir(col).unwrap() {
        let day = day.unwrap().path();
        if day.is_dir() {
            tmp += std::fs::read_dir(&day)
                .unwrap()
                .filter(|f| f.as_ref().unwrap().path().to_string_lossy().ends_with(".tmp"))
                .count();
        }
    }
    (files, tmp)
}

fn aggregate(archive: &Path, id: &str) -> Value {
    let a = archive.display().to_string();
    let out = harmony(&["aggregate", "--engine", "local", "--reports", &a, "--collection", id, "--format", "json"]);
    serde_json::from_str(&out).unwrap()
}

#[test]
fn a_served_archive_aggregates_to_the_served_estimates() {
    let dir = temp("served");
    let db = format!("sqlite://{}", dir.join("db.sqlite").display());
    let archive = dir.join("archive");
    let schema = root().join("examples/adult.toml").display().to_string();
    let (child, url) = serve(&db, &archive);
    let create = ["collection", "create", "--server", &url, "--token", "tok", "--schema", &schema];
    let id = harmony(&[&create[..], &["--epsilon", "1", "--task", "frequency", "--column", "education"]].concat());
    let id = id.trim().to_string();
    let data = adult_rows(&dir, 0, 1200);
    submit(&url, &id, &data, "1");
    let served = query(&url, &id);
    assert_eq!(served["reports"], 1200);
    let col = archive.join(format!("collection={id}"));
    let (closed, open) = parts(&col);
    assert_eq!((closed.len(), open), (2, 1), "500 + 500 closed, 200 in the open segment: {closed:?}");
    stop(child);
    let (closed, open) = parts(&col);
    assert_eq!((closed.len(), open), (3, 0), "a graceful stop closes the open segment");
    assert_eq!(aggregate(&archive, &id), served, "the archive aggregates to the served document");
    let spec: Value = serde_json::from_str(&std::fs::read_to_string(col.join("spec.json")).unwrap()).unwrap();
    assert_eq!(spec["id"], Value::String(id.clone()));

    // A restarted server adds parts after the existing ones.
    let (child, url) = serve(&db, &archive);
    submit(&url, &id, &adult_rows(&dir, 1200, 300), "2");
    let served = query(&url, &id);
    assert_eq!(served["reports"], 1500);
    stop(child);
    let (after, open) = parts(&col);
    assert_eq!((after.len(), open), (4, 0));
    assert!(closed.iter().all(|f| after.contains(f)), "an existing part was replaced");
    assert_eq!(aggregate(&archive, &id), served);
    let _ = std::fs::remove_dir_all(&dir);
}
