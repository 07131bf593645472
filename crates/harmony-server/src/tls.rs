//! TLS (docs/SERVER.md, "TLS"): the HTTPS listener's configuration from PEM files, and the
//! verifying connector of PostgreSQL's `sslmode` (rustls, ring provider).

use crate::error::ServerError;
use std::future::Future;
use std::io;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

/// The ring provider (one provider for the whole process: no process-wide default is installed).
fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The listener's TLS: the certificate chain of `--tls-cert` and the key of `--tls-key` (PEM),
/// TLS 1.2 and 1.3, ALPN `http/1.1`. Errors name the flag, the path and what was wrong.
pub fn server_config(cert: &Path, key: &Path) -> Result<Arc<rustls::ServerConfig>, ServerError> {
    let err = |flag: &str, path: &Path, message: String| ServerError::Tls {
        flag: flag.to_string(),
        path: path.display().to_string(),
        message,
    };
    let chain = read_certs(cert).map_err(|m| err("tls-cert", cert, m))?;
    let bytes = std::fs::read(key).map_err(|e| err("tls-key", key, format!("cannot read it: {e}")))?;
    let key_der = PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| {
        err("tls-key", key, format!("no private key in it (expected a PEM PKCS#8, PKCS#1 or SEC1 key): {e}"))
    })?;
    let config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| err("tls-cert", cert, e.to_string()))?
        .with_no_client_auth();
    let mut config = config.with_single_cert(chain, key_der).map_err(|e| {
        err("tls-key", key, format!("does not match the certificate of --tls-cert {} ({e})", cert.display()))
    })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Every certificate of a PEM file (at least one), or what was wrong.
pub fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read it: {e}"))?;
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("not a PEM certificate file: {e}"))?;
    if certs.is_empty() {
        return Err("no certificate in it (expected PEM `BEGIN CERTIFICATE` blocks)".into());
    }
    Ok(certs)
}

/// The roots a PostgreSQL certificate is verified against: the system's, plus `extra` (a PEM
/// file of CA certificates: `--db-ca-cert`, `HARMONY_DB_CA_CERT` or the URL's `sslrootcert`).
pub fn pg_roots(extra: &[&Path]) -> Result<rustls::RootCertStore, String> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
    for path in extra {
        let certs = read_certs(path).map_err(|m| format!("CA certificate {}: {m}", path.display()))?;
        let (_, bad) = roots.add_parsable_certificates(certs);
        if bad > 0 {
            return Err(format!(
                "CA certificate {}: {bad} certificate(s) are not valid CA certificates",
                path.display()
            ));
        }
    }
    Ok(roots)
}

/// PostgreSQL's TLS connector: the chain is verified against [`pg_roots`] and the certificate
/// must name the host of the URL (as libpq's `verify-full`) whenever TLS is used.
#[derive(Clone)]
pub struct PgTls(tokio_rustls::TlsConnector);

impl PgTls {
    /// A connector trusting `roots`.
    pub fn new(roots: rustls::RootCertStore) -> Result<Self, String> {
        let config = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(PgTls(tokio_rustls::TlsConnector::from(Arc::new(config))))
    }
}

impl postgres::tls::MakeTlsConnect<postgres::Socket> for PgTls {
    type Stream = PgTlsStream;
    type TlsConnect = PgTlsConnect;
    type Error = io::Error;

    fn make_tls_connect(&mut self, host: &str) -> io::Result<PgTlsConnect> {
        let name = ServerName::try_from(host.to_string())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("host {host:?}: {e}")))?;
        Ok(PgTlsConnect { connector: self.0.clone(), name, host: host.to_string() })
    }
}

/// One connection's handshake.
pub struct PgTlsConnect {
    connector: tokio_rustls::TlsConnector,
    name: ServerName<'static>,
    host: String,
}

type Handshake = Pin<Box<dyn Future<Output = io::Result<PgTlsStream>> + Send>>;

impl postgres::tls::TlsConnect<postgres::Socket> for PgTlsConnect {
    type Stream = PgTlsStream;
    type Error = io::Error;
    type Future = Handshake;

    fn connect(self, stream: postgres::Socket) -> Handshake {
        let host = self.host;
        Box::pin(async move {
            let tls = self.connector.connect(self.name, stream).await.map_err(|e| {
                let trust = matches!(
                    e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()),
                    Some(rustls::Error::InvalidCertificate(_))
                );
                let hint = if trust { ": certificate not trusted (pass --db-ca-cert)" } else { "" };
                io::Error::new(e.kind(), format!("TLS with {host}{hint}: {e}"))
            })?;
            Ok(PgTlsStream(tls))
        })
    }
}

/// A TLS session with PostgreSQL (no channel binding: SCRAM without `-PLUS`).
pub struct PgTlsStream(tokio_rustls::client::TlsStream<postgres::Socket>);

impl postgres::tls::TlsStream for PgTlsStream {
    fn channel_binding(&self) -> postgres::tls::ChannelBinding {
        postgres::tls::ChannelBinding::none()
    }
}

impl AsyncRead for PgTlsStream {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for PgTlsStream {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}
