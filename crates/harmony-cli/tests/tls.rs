//! Fast tier, loopback only: `harmony serve --tls-cert/--tls-key`, and
//! `harmony collection create`, `submit` and `query` over https with `--ca-cert` give the same
//! estimates as over plain http (same simulated devices); without the CA the client fails with
//! the plain message; a wrong key file is named before the server starts.

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Stdio};

mod common;
use common::{BIN, Server, fails, free_port, harmony, root, wait_for_port};
#[path = "../../harmony-server/tests/common/certs.rs"]
mod certs;
use certs::certificates;

/// `harmony serve` on a fresh SQLite file with `extra` options; `https` picks the URL scheme.
fn serve(db: &Path, extra: &[&str], https: bool) -> Server {
    let port = free_port();
    let child = Command::new(BIN)
        .args(["serve", "--db", &format!("sqlite://{}", db.display()), "--listen", &format!("127.0.0.1:{port}")])
        .args(["--analyst-token", "tok", "--log-level", "warn"])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_port(port);
    Server { child, url: format!("{}://127.0.0.1:{port}", if https { "https" } else { "http" }) }
}

/// Creates a collection, submits Adult's devices (seeded) and returns the estimates' JSON
/// without the collection id.
fn round_trip(url: &str, ca: &[&str]) -> Value {
    let schema = root().join("examples/adult.toml");
    let data = root().join("data/adult.csv");
    let (schema, data) = (schema.to_str().unwrap(), data.to_str().unwrap());
    let create = [&["collection", "create", "--server", url, "--token", "tok", "--schema", schema][..], ca];
    let id = harmony(&[&create.concat()[..], &["--epsilon", "1", "--strategy", "harmony"]].concat());
    let id = id.trim();
    let submit = ["submit", "--server", url, "--collection", id, "--data", data, "--simulate-devices", "--seed", "17"];
    harmony(&[&submit[..], ca].concat());
    let query = ["query", "--server", url, "--token", "tok", "--collection", id, "--format", "json"];
    let mut doc: Value = serde_json::from_str(&harmony(&[&query[..], ca].concat())).unwrap();
    let text = doc.to_string().replace(id, "ID");
    doc = serde_json::from_str(&text).unwrap();
    doc
}

#[test]
fn https_with_the_ca_gives_the_estimates_of_http() {
    let dir = std::env::temp_dir().join(format!("harmony-cli-tls-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (ca, cert, key) = certificates(&dir);
    let (ca, cert, key) = (ca.to_str().unwrap(), cert.to_str().unwrap(), key.to_str().unwrap());
    let plain = serve(&dir.join("plain.sqlite"), &[], false);
    let tls = serve(&dir.join("tls.sqlite"), &["--tls-cert", cert, "--tls-key", key], true);
    let over_http = round_trip(&plain.url, &[]);
    let over_https = round_trip(&tls.url, &["--ca-cert", ca]);
    assert!(over_http["attributes"].is_array() && over_http["reports"].as_u64() > Some(0), "{over_http}");
    assert_eq!(over_http, over_https);
    // Without the CA: the plain message, naming the host.
    let err = fails(&["collection", "list", "--server", &tls.url, "--token", "tok"]);
    let host = tls.url.trim_start_matches("https://");
    assert!(err.contains(&format!("server {host}: certificate not trusted: pass --ca-cert")), "{err}");
    // HARMONY_CA_CERT does what --ca-cert does.
    let out = Command::new(BIN)
        .args(["collection", "list", "--server", &tls.url, "--token", "tok", "--format", "json"])
        .env("HARMONY_CA_CERT", ca)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    drop((plain, tls));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn serve_names_a_wrong_tls_file_and_needs_both_flags() {
    let dir = std::env::temp_dir().join(format!("harmony-cli-tls-files-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (_, cert, _) = certificates(&dir);
    let cert = cert.to_str().unwrap();
    let db = format!("sqlite://{}", dir.join("db.sqlite").display());
    let serve = ["serve", "--db", &db, "--listen", "127.0.0.1:0", "--analyst-token", "tok"];
    let err = fails(&[&serve[..], &["--tls-cert", cert, "--tls-key", cert]].concat());
    assert!(err.contains(&format!("--tls-key {cert}: no private key in it")), "{err}");
    let err = fails(&[&serve[..], &["--tls-cert", cert]].concat());
    assert!(err.contains("--tls-key"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn tokens_never_reach_the_logs() {
    let dir = std::env::temp_dir().join(format!("harmony-cli-tls-logs-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let admin = "Adm-5b0e2c94-never-logged";
    let port = free_port();
    let log = std::fs::File::create(dir.join("stderr")).unwrap();
    let child = Command::new(BIN)
        .args(["serve", "--db", &format!("sqlite://{}", dir.join("db.sqlite").display())])
        .args(["--listen", &format!("127.0.0.1:{port}"), "--admin-token", admin, "--log-level", "debug"])
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    wait_for_port(port);
    let server = Server { child, url: format!("http://127.0.0.1:{port}") };
    let schema = root().join("examples/adult.toml");
    let (url, schema) = (server.url.as_str(), schema.to_str().unwrap());
    let id =
        harmony(&["collection", "create", "--server", url, "--token", admin, "--schema", schema, "--epsilon", "1"]);
    let id = id.trim();
    let minted = harmony(&["collection", "token", "create", "--server", url, "--token", admin, "--collection", id]);
    let minted = minted.trim().to_string();
    assert!(minted.len() >= 16, "{minted}");
    harmony(&["query", "--server", url, "--token", &minted, "--collection", id, "--format", "json"]);
    fails(&["query", "--server", url, "--token", &format!("{minted}x"), "--collection", id]);
    drop(server);
    let stderr = std::fs::read_to_string(dir.join("stderr")).unwrap();
    assert!(stderr.contains("analyst token created"), "{stderr}");
    for secret in [admin, minted.as_str()] {
        assert!(!stderr.contains(secret), "a token is in the server's log: {stderr}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
