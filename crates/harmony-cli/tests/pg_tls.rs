//! Fast tier, loopback only: PostgreSQL over TLS by URL parameter, and no
//! password in any error or log line. A throwaway cluster (initdb'd here with
//! /usr/lib/postgresql/*/bin; skipped with a message when PostgreSQL is not installed) runs with
//! `ssl = on`, an rcgen certificate for 127.0.0.1/localhost signed by a test CA, and a pg_hba
//! that accepts TCP connections over TLS only (`hostssl`, SCRAM password). Checked:
//! `sslmode=require` with `--db-ca-cert` (or the URL's `sslrootcert`) connects; without the CA
//! the certificate is refused with the plain message; `sslmode=disable` is refused by the
//! cluster; a wrong password and an unreachable server give errors, and `harmony serve` stderr,
//! without the password.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
#[path = "../../harmony-server/tests/common/certs.rs"]
mod certs;
use certs::certificates;

mod common;

const PASSWORD: &str = "Pw-9f3c1e7a-never-logged";

/// A throwaway TLS cluster; stopped (immediate) and removed on drop.
struct Cluster {
    bin: PathBuf,
    dir: PathBuf,
    port: u16,
}

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

impl Cluster {
    /// `None` (with a message) when PostgreSQL is not installed or does not start.
    fn start() -> Option<(Cluster, PathBuf)> {
        let bin = std::fs::read_dir("/usr/lib/postgresql")
            .ok()?
            .filter_map(|e| Some(e.ok()?.path().join("bin")))
            .filter(|b| b.join("initdb").exists())
            .max();
        let Some(bin) = bin else {
            eprintln!("PostgreSQL is not installed: test skipped");
            return None;
        };
        let dir = std::env::temp_dir().join(format!("harmony-pg-tls-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).ok()?;
        let (ca, cert, key) = certificates(&dir);
        let d = dir.display().to_string();
        let _ = Command::new("chown").args(["-R", "postgres", &d]).status();
        let _ = Command::new("chmod").args(["600", &key.display().to_string()]).status();
        let c = Cluster { bin, dir, port: common::free_port() };
        let (b, p) = (c.bin.display(), c.port);
        let hba = format!("{d}/hba.conf");
        std::fs::write(&hba, "local all all trust\nhostssl all all 127.0.0.1/32 scram-sha-256\n").ok()?;
        let _ = Command::new("chown").args(["postgres", &hba]).status();
        let opts = format!(
            "-p {p} -k {d} -c listen_addresses=127.0.0.1 -c ssl=on -c ssl_cert_file={} -c ssl_key_file={} -c hba_file={hba}",
            cert.display(),
            key.display()
        );
        let started = sh(&format!("{b}/initdb -D {d}/data -A trust -U postgres"))
            && sh(&format!("{b}/pg_ctl -D {d}/data -o '{opts}' -l {d}/log -w start"))
            && sh(&format!("{b}/psql -h {d} -p {p} -U postgres -qc \"ALTER USER postgres PASSWORD '{PASSWORD}'\""));
        if !started {
            eprintln!("PostgreSQL TLS cluster did not start in {d}: test skipped");
            return None;
        }
        Some((c, ca))
    }

    fn url(&self, password: &str, params: &str) -> String {
        format!("postgres://postgres:{password}@127.0.0.1:{}/postgres?{params}", self.port)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let d = self.dir.display();
        sh(&format!("{}/pg_ctl -D {d}/data -m immediate -w stop", self.bin.display()));
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The error of opening `url` (with the extra CA `ca`), checked to hide the password.
fn open_error(url: &str, ca: Option<&Path>) -> String {
    let e = match harmony_server::open_store_with(url, ca) {
        Ok(_) => panic!("{} opened", harmony_server::error::redact(url)),
        Err(e) => e.to_string(),
    };
    assert!(!e.contains(PASSWORD), "the password is in the error: {e}");
    e
}

#[test]
fn postgres_over_tls_is_verified_and_passwords_stay_secret() {
    let Some((pg, ca)) = Cluster::start() else { return };
    let good = pg.url(PASSWORD, "sslmode=require");
    let store = harmony_server::open_store_with(&good, Some(&ca)).unwrap();
    store.create_collection("over-tls", "{}").unwrap();
    drop(store);
    // The CA by URL parameter; `prefer` uses TLS too (the cluster takes nothing else).
    let by_param = pg.url(PASSWORD, &format!("sslmode=prefer&sslrootcert={}", ca.display()));
    drop(harmony_server::open_store_with(&by_param, None).unwrap());
    // Without the CA: refused, with the plain message.
    let e = open_error(&good, None);
    assert!(e.contains("certificate not trusted (pass --db-ca-cert)"), "{e}");
    // Plain: the cluster accepts TLS connections only.
    let e = open_error(&pg.url(PASSWORD, "sslmode=disable"), Some(&ca));
    assert!(e.contains("no pg_hba.conf entry") || e.contains("SSL off"), "{e}");
    // A wrong password over TLS, and an unreachable server: no password in the error.
    let e = open_error(&pg.url(&format!("{PASSWORD}x"), "sslmode=require"), Some(&ca));
    assert!(e.contains("password authentication failed"), "{e}");
    let closed = format!("postgres://postgres:{PASSWORD}@127.0.0.1:{}/postgres", common::free_port());
    let e = open_error(&closed, None);
    assert!(e.contains("postgres:***@127.0.0.1"), "{e}");
    // `harmony serve` with a wrong password: stderr (logs and the error) without the password.
    let wrong = pg.url(&format!("{PASSWORD}x"), "sslmode=require");
    let ca_s = ca.display().to_string();
    let out = common::run(&[
        "serve",
        "--db",
        &wrong,
        "--db-ca-cert",
        &ca_s,
        "--listen",
        "127.0.0.1:0",
        "--log-level",
        "debug",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("password authentication failed"), "{stderr}");
    assert!(!stderr.contains(PASSWORD), "the password is on stderr: {stderr}");
}
