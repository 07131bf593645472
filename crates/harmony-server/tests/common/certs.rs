//! Test certificates for the TLS tests of harmony-server and harmony-cli (the CLI's tests
//! include this file with `#[path]`): a CA and a certificate for localhost/127.0.0.1 signed by
//! it, written as PEM files.

use std::path::{Path, PathBuf};

/// A CA and a certificate for localhost/127.0.0.1 signed by it, as PEM files in `dir`:
/// (ca.pem, cert.pem, key.pem).
pub fn certificates(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
    let cert = leaf.signed_by(&key, &Issuer::new(ca_params, ca_key)).unwrap();
    let paths = (dir.join("ca.pem"), dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&paths.0, ca.pem()).unwrap();
    std::fs::write(&paths.1, cert.pem()).unwrap();
    std::fs::write(&paths.2, key.serialize_pem()).unwrap();
    paths
}
