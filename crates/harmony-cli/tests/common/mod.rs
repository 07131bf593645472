//! Helpers shared by the CLI's integration tests: the `harmony` binary and a `harmony serve`
//! child on a free loopback port.
#![allow(dead_code)] // each test file uses a part

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_harmony");

/// The repository root (the bundled data and schemas are relative to it).
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs `harmony ARGS` in the repository root.
pub fn run(args: &[&str]) -> Output {
    Command::new(BIN).args(args).current_dir(root()).output().expect("run harmony")
}

/// Runs `harmony ARGS`, asserts success and returns its stdout.
pub fn harmony(args: &[&str]) -> String {
    let out = run(args);
    assert!(
        out.status.success(),
        "harmony {}: {}\n{}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

/// Runs `harmony ARGS`, asserts failure and returns its stderr.
pub fn fails(args: &[&str]) -> String {
    let out = run(args);
    assert!(!out.status.success(), "harmony {} succeeded", args.join(" "));
    String::from_utf8(out.stderr).expect("utf-8")
}

/// Waits (up to 60 s) until something listens on the loopback port.
pub fn wait_for_port(port: u16) {
    let t = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(t.elapsed() < Duration::from_secs(60), "server did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A free loopback port.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// `harmony serve` (analyst token `tok`), killed on drop.
pub struct Server {
    pub child: Child,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
}

impl Server {
    /// Whether the process is still running (it never exited or restarted).
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `harmony serve --db DB` (a store URL) on a free loopback port.
pub fn serve(db: &str) -> Server {
    serve_with(db, &[])
}

/// [`serve`] with more options.
pub fn serve_with(db: &str, extra: &[&str]) -> Server {
    let port = free_port();
    let child = Command::new(BIN)
        .args(["serve", "--db", db, "--listen", &format!("127.0.0.1:{port}"), "--analyst-token", "tok"])
        .args(["--log-level", "warn"])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_port(port);
    Server { child, url: format!("http://127.0.0.1:{port}") }
}

/// Starts `harmony serve` on a fresh SQLite file in `dir`.
pub fn serve_sqlite(dir: &std::path::Path) -> Server {
    serve(&format!("sqlite://{}", dir.join("db.sqlite").display()))
}

/// The first `n` rows of Adult (from row `skip`) as a CSV file in `dir`; returns its path.
pub fn adult_rows(dir: &std::path::Path, skip: usize, n: usize) -> String {
    let text = std::fs::read_to_string(root().join("data/adult.csv")).unwrap();
    let mut lines = text.lines();
    let mut out = format!("{}\n", lines.next().unwrap());
    for l in lines.skip(skip).take(n) {
        out.push_str(l);
        out.push('\n');
    }
    let path = dir.join(format!("adult-{skip}-{n}.csv"));
    std::fs::write(&path, out).unwrap();
    path.display().to_string()
}
