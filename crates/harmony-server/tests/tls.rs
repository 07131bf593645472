//! The HTTPS listener (fast tier, loopback only). A test CA (rcgen) signs a
//! certificate for `localhost` and 127.0.0.1; the server runs the ordinary accept loop with TLS.
//! Checked: a client trusting the CA talks to it; one that does not fails at once with the plain
//! message; plain HTTP to the TLS port is closed and the server goes on; a handshake that never
//! finishes is closed by the header timeout; wrong `--tls-cert`/`--tls-key` files are named.

use harmony_client::{Client, ClientError, RetryPolicy};
use harmony_server::{AppState, Limits, SqliteStore};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
#[path = "common/certs.rs"]
mod certs;
use certs::certificates;

/// A fresh directory with the certificates and an HTTPS server (header timeout 1 s).
struct Fixture {
    dir: PathBuf,
    ca: PathBuf,
    server: Option<harmony_server::Running>,
}

impl Fixture {
    fn start(tag: &str) -> Fixture {
        let dir = std::env::temp_dir().join(format!("harmony-tls-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let (ca, cert, key) = certificates(&dir);
        let tls = harmony_server::tls::server_config(&cert, &key).unwrap();
        let store = Arc::new(SqliteStore::open(&dir.join("db.sqlite")).unwrap());
        let limits = Limits { header_timeout: Duration::from_secs(1), ..Limits::default() };
        let state = AppState::new(store, "tok").unwrap();
        let server = harmony_server::spawn_tls(state, "127.0.0.1:0", 2, &limits, Some(tls), |r| r).unwrap();
        Fixture { dir, ca, server: Some(server) }
    }
    fn running(&self) -> &harmony_server::Running {
        self.server.as_ref().unwrap()
    }
    /// A client trusting the test CA.
    fn client(&self) -> Client {
        Client::new(&self.running().url()).with_ca_cert(&self.ca).unwrap().with_token("tok")
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        if let Some(s) = self.server.take() {
            s.stop();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn https_with_the_ca_works_and_without_it_fails_plainly() {
    let f = Fixture::start("trust");
    assert!(f.running().url().starts_with("https://127.0.0.1:"));
    assert!(f.client().collections().unwrap().is_empty());
    let localhost = f.running().url().replace("127.0.0.1", "localhost");
    let by_name = Client::new(&localhost).with_ca_cert(&f.ca).unwrap().with_token("tok");
    assert!(by_name.collections().unwrap().is_empty());
    // Without the CA: no retries (8 attempts with backoff would take seconds), a plain message.
    let t = Instant::now();
    let err = Client::new(&f.running().url()).with_token("tok").collections().unwrap_err();
    assert!(t.elapsed() < Duration::from_secs(2), "an untrusted certificate is not retried");
    let text = err.to_string();
    assert!(matches!(err, ClientError::Tls { .. }), "{text}");
    assert!(text.contains(&format!("server {}", f.running().addr)), "{text}");
    assert!(text.contains("certificate not trusted: pass --ca-cert"), "{text}");
}

#[test]
fn plain_http_to_the_tls_port_is_closed_and_the_server_goes_on() {
    let f = Fixture::start("plain");
    for _ in 0..20 {
        let mut s = TcpStream::connect(f.running().addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let _ = s.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n");
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        assert!(!String::from_utf8_lossy(&out).contains("HTTP/1.1 200"), "plain HTTP must not be served");
    }
    // A plain-HTTP client fails; the HTTPS one still works.
    let plain = Client::new(&f.running().url().replace("https", "http"))
        .with_retry(RetryPolicy { attempts: 1, ..RetryPolicy::default() });
    assert!(plain.collections().is_err());
    assert!(f.client().collections().unwrap().is_empty());
}

#[test]
fn a_stalled_handshake_is_closed_by_the_header_timeout() {
    let f = Fixture::start("stall");
    // Silent connections, and one that sends the first bytes of a ClientHello and stops.
    let mut conns: Vec<TcpStream> = (0..20).map(|_| TcpStream::connect(f.running().addr).unwrap()).collect();
    conns[0].write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01]).unwrap();
    let t = Instant::now();
    for mut s in conns {
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut buf = [0u8; 64];
        // Closed: EOF (0) or a reset — not the 10 s read timeout.
        match s.read(&mut buf) {
            Ok(n) => assert!(n == 0 || t.elapsed() < Duration::from_secs(5), "read {n} bytes"),
            Err(e) => assert!(
                !matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut),
                "the stalled handshake was not closed: {e}"
            ),
        }
    }
    let waited = t.elapsed();
    assert!(waited >= Duration::from_millis(900) && waited < Duration::from_secs(5), "closed after {waited:?}");
    assert!(f.client().collections().unwrap().is_empty());
}

#[test]
fn wrong_tls_files_are_named() {
    let dir = std::env::temp_dir().join(format!("harmony-tls-files-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (ca, cert, key) = certificates(&dir);
    let err = |c: &Path, k: &Path| harmony_server::tls::server_config(c, k).unwrap_err().to_string();
    let missing = dir.join("missing.pem");
    let e = err(&missing, &key);
    assert!(e.starts_with(&format!("--tls-cert {}: cannot read it", missing.display())), "{e}");
    let e = err(&key, &key);
    assert!(e.starts_with(&format!("--tls-cert {}: no certificate in it", key.display())), "{e}");
    let e = err(&cert, &cert);
    assert!(e.starts_with(&format!("--tls-key {}: no private key in it", cert.display())), "{e}");
    let other = dir.join("other.pem");
    std::fs::write(&other, rcgen::KeyPair::generate().unwrap().serialize_pem()).unwrap();
    let e = err(&cert, &other);
    assert!(e.starts_with(&format!("--tls-key {}: does not match the certificate", other.display())), "{e}");
    let e = err(&ca, &key);
    assert!(e.starts_with(&format!("--tls-key {}: does not match the certificate", key.display())), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}
