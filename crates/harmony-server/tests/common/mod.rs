//! Helpers shared by the server's integration tests.
#![allow(dead_code)] // each test file uses a part

pub mod flaky;

use std::io::{Read, Write};

/// One raw HTTP/1.1 request on a fresh connection (bypasses every client-side check): (status,
/// body). `auth` is a bearer token.
pub fn raw(addr: std::net::SocketAddr, method: &str, path: &str, body: &[u8], auth: Option<&str>) -> (u16, String) {
    let (status, _, body) = request(addr, method, path, body, auth);
    (status, body)
}

/// [`raw`] with the response's head (status line and headers, lower-cased): (status, head, body).
pub fn request(
    addr: std::net::SocketAddr,
    method: &str,
    path: &str,
    body: &[u8],
    auth: Option<&str>,
) -> (u16, String, String) {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    let auth = auth.map(|t| format!("authorization: Bearer {t}\r\n")).unwrap_or_default();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n{auth}connection: close\r\n\r\n",
        body.len()
    )
    .unwrap();
    let _ = s.write_all(body);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((text.as_str(), ""));
    (status, head.to_ascii_lowercase(), body.to_string())
}

/// A server on a free loopback port over SQLite in a fresh temporary directory; stopped and
/// its directory removed on drop.
pub struct TestServer {
    dir: std::path::PathBuf,
    running: Option<harmony_server::Running>,
}
impl TestServer {
    /// `spawn` starts the server on the store (e.g. `harmony_server::spawn` or `spawn_limits`).
    pub fn start(
        tag: &str,
        spawn: impl FnOnce(std::sync::Arc<dyn harmony_server::Store>) -> harmony_server::Running,
    ) -> TestServer {
        let dir = std::env::temp_dir().join(format!("harmony-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let store = std::sync::Arc::new(harmony_server::SqliteStore::open(&dir.join("db.sqlite")).unwrap());
        TestServer { running: Some(spawn(store)), dir }
    }
    pub fn addr(&self) -> std::net::SocketAddr {
        self.running.as_ref().unwrap().addr
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(r) = self.running.take() {
            r.stop();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
