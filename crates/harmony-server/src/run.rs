//! Opening the store and running the HTTP server (a background thread for tests and `harmony
//! demo`, the current thread for `harmony serve`).

use crate::error::{ServerError, redact};
use crate::guard::Limits;
use crate::state::AppState;
use crate::store::{SqliteStore, Store};
use std::sync::Arc;
use std::time::Duration;
use tokio_rustls::rustls::ServerConfig;

/// Opens the store a URL names: `sqlite://PATH` (or a bare path) or `postgres://…`.
pub fn open_store(url: &str) -> Result<Arc<dyn Store>, ServerError> {
    open_store_with(url, None)
}

/// [`open_store`] trusting the extra CA certificates of `db_ca` (PEM) for PostgreSQL's
/// `sslmode=prefer|require` (`--db-ca-cert`).
pub fn open_store_with(url: &str, db_ca: Option<&std::path::Path>) -> Result<Arc<dyn Store>, ServerError> {
    let err = |source| ServerError::Store { url: redact(url), source };
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        return Ok(Arc::new(crate::pg::PgStore::open_with(url, db_ca).map_err(err)?));
    }
    let path = url.strip_prefix("sqlite://").unwrap_or(url);
    Ok(Arc::new(SqliteStore::open(std::path::Path::new(path)).map_err(err)?))
}

/// A running server (for tests, `harmony demo` and `harmony serve`).
pub struct Running {
    /// The bound address.
    pub addr: std::net::SocketAddr,
    /// Whether it speaks HTTPS.
    tls: bool,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Running {
    /// `http://ADDR`, or `https://ADDR` with TLS.
    pub fn url(&self) -> String {
        format!("{}://{}", if self.tls { "https" } else { "http" }, self.addr)
    }
    /// Stops the server gracefully and waits for it.
    pub fn stop(mut self) {
        self.stop_inner();
    }
    fn stop_inner(&mut self) {
        if let Some(s) = self.shutdown.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop_inner();
    }
}

/// Starts a server on its own tokio runtime in a background thread.
pub fn spawn(store: Arc<dyn Store>, token: &str, listen: &str, workers: usize) -> Result<Running, ServerError> {
    spawn_with(store, token, listen, workers, |r| r)
}

/// [`spawn`] with extra routes ([`crate::router_with`]).
pub fn spawn_with(
    store: Arc<dyn Store>,
    token: &str,
    listen: &str,
    workers: usize,
    extend: impl FnOnce(axum::Router<AppState>) -> axum::Router<AppState>,
) -> Result<Running, ServerError> {
    spawn_limits(store, token, listen, workers, &Limits::default(), extend)
}

/// [`spawn_with`] with explicit timeouts and caps.
pub fn spawn_limits(
    store: Arc<dyn Store>,
    token: &str,
    listen: &str,
    workers: usize,
    limits: &Limits,
    extend: impl FnOnce(axum::Router<AppState>) -> axum::Router<AppState>,
) -> Result<Running, ServerError> {
    spawn_state(AppState::new(store, token)?, listen, workers, limits, extend)
}

/// [`spawn_limits`] with a state built by the caller (e.g. [`AppState::with_tokens`]).
pub fn spawn_state(
    state: AppState,
    listen: &str,
    workers: usize,
    limits: &Limits,
    extend: impl FnOnce(axum::Router<AppState>) -> axum::Router<AppState>,
) -> Result<Running, ServerError> {
    spawn_tls(state, listen, workers, limits, None, extend)
}

/// [`spawn_state`] speaking HTTPS with `tls` ([`crate::tls::server_config`]), if given.
pub fn spawn_tls(
    state: AppState,
    listen: &str,
    workers: usize,
    limits: &Limits,
    tls: Option<Arc<ServerConfig>>,
    extend: impl FnOnce(axum::Router<AppState>) -> axum::Router<AppState>,
) -> Result<Running, ServerError> {
    let app = crate::router_with_limits(state, limits, extend);
    let listen_err = |source| ServerError::Listen { addr: listen.to_string(), source };
    let std_listener = std::net::TcpListener::bind(listen).map_err(listen_err)?;
    std_listener.set_nonblocking(true).map_err(listen_err)?;
    let addr = std_listener.local_addr().map_err(listen_err)?;
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers.max(1))
        .enable_all()
        .build()
        .map_err(ServerError::Runtime)?;
    let limits = limits.clone();
    let https = tls.is_some();
    let thread = std::thread::Builder::new()
        .name("harmony-server".into())
        .spawn(move || {
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(std_listener).expect("tokio listener");
                let stop = async move {
                    let _ = rx.await;
                };
                let _ = serve(listener, app, &limits, tls, stop).await;
            });
        })
        .map_err(ServerError::Runtime)?;
    Ok(Running { addr, tls: https, shutdown: Some(tx), thread: Some(thread) })
}

/// Serves on the current thread until SIGINT or SIGTERM, then drains ([`serve`]).
pub fn serve_forever(store: Arc<dyn Store>, token: &str, listen: &str) -> Result<(), ServerError> {
    serve_forever_with(store, token, listen, &Limits::default())
}

/// [`serve_forever`] with explicit timeouts and caps.
pub fn serve_forever_with(
    store: Arc<dyn Store>,
    token: &str,
    listen: &str,
    limits: &Limits,
) -> Result<(), ServerError> {
    serve_state_forever(AppState::new(store, token)?, listen, limits)
}

/// [`serve_forever_with`] with a state built by the caller (e.g. [`AppState::with_tokens`]).
pub fn serve_state_forever(state: AppState, listen: &str, limits: &Limits) -> Result<(), ServerError> {
    serve_state_forever_tls(state, listen, limits, None)
}

/// [`serve_state_forever`] speaking HTTPS with `tls` ([`crate::tls::server_config`]), if given.
pub fn serve_state_forever_tls(
    state: AppState,
    listen: &str,
    limits: &Limits,
    tls: Option<Arc<ServerConfig>>,
) -> Result<(), ServerError> {
    serve_state_forever_extended(state, listen, limits, tls, |r| r)
}

/// [`serve_state_forever_tls`] with extra routes ([`crate::router_with`]'s `extend`: `harmony
/// serve` adds the analyst dashboard's static files).
pub fn serve_state_forever_extended(
    state: AppState,
    listen: &str,
    limits: &Limits,
    tls: Option<Arc<ServerConfig>>,
    extend: impl FnOnce(axum::Router<AppState>) -> axum::Router<AppState>,
) -> Result<(), ServerError> {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(ServerError::Runtime)?;
    let listen_err = |source| ServerError::Listen { addr: listen.to_string(), source };
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(listen).await.map_err(listen_err)?;
        let addr = listener.local_addr().map_err(listen_err)?;
        let scheme = if tls.is_some() { "https" } else { "http" };
        eprintln!("harmony server listening on {scheme}://{addr}");
        tracing::info!(%addr, scheme, "listening");
        let app = crate::router_with_limits(state, limits, extend);
        serve(listener, app, limits, tls, shutdown_signal()).await.map_err(ServerError::Runtime)
    })
}

/// SIGINT (Ctrl-C) or SIGTERM.
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = match signal(SignalKind::terminate()) {
            Ok(s) => s,
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
                return;
            }
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT: draining"),
            _ = term.recv() => tracing::info!("SIGTERM: draining"),
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// The accept loop: HTTP/1.1 connections with hyper's header-read timeout (also the idle
/// timeout of a kept-alive connection) and a write-progress timeout (a client that does not
/// read its answers is disconnected), at most `max_connections` open and
/// `max_connections_per_peer` from one address (more are answered 503 and closed), each with a
/// kernel send buffer of `send_buffer` bytes (bounding what unread answers pin). With `tls` each accepted stream is wrapped in TLS first, under the same cap;
/// a handshake not finished within the header timeout (or failing: plain HTTP to the TLS port)
/// closes the connection. When `stop` completes, the listener closes, idle connections close and in-flight requests are answered (for at most `drain_timeout`): every
/// acknowledged report is committed.
pub async fn serve(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    limits: &Limits,
    tls: Option<Arc<ServerConfig>>,
    stop: impl std::future::Future<Output = ()>,
) -> std::io::Result<()> {
    use crate::conn::WriteProgress;
    use hyper_util::rt::{TokioIo, TokioTimer};
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let conns = Arc::new(tokio::sync::Semaphore::new(limits.max_connections.max(1)));
    let peers = crate::conn::Peers::new(limits.max_connections_per_peer);
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new()).header_read_timeout(limits.header_timeout).keep_alive(true);
    let tls = tls.map(tokio_rustls::TlsAcceptor::from);
    if limits.send_buffer > 0 {
        // Accepted sockets inherit the listener's buffer size (and its lock against autotuning).
        if let Err(e) = socket2::SockRef::from(&listener).set_send_buffer_size(limits.send_buffer) {
            tracing::warn!(error = %e, bytes = limits.send_buffer, "cannot set the connections' send buffer");
        }
    }
    tokio::pin!(stop);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // EMFILE and the like: back off instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut stop => break,
        };
        let Some(peer_slot) = peers.admit(peer.ip()) else {
            tokio::spawn(refuse(stream, "too many open connections from your address; retry later"));
            continue;
        };
        let Ok(permit) = conns.clone().try_acquire_owned() else {
            tokio::spawn(refuse(stream, "too many open connections; retry later"));
            continue;
        };
        let permit = (permit, peer_slot);
        let _ = stream.set_nodelay(true);
        let stream = WriteProgress::new(stream, limits.write_timeout);
        let service = hyper_util::service::TowerToHyperService::new(app.clone());
        let Some(acceptor) = tls.clone() else {
            let conn = http.serve_connection(TokioIo::new(stream), service);
            let watched = graceful.watch(conn);
            tokio::spawn(async move {
                let _ = watched.await;
                drop(permit);
            });
            continue;
        };
        let (http, watcher, timeout) = (http.clone(), graceful.watcher(), limits.header_timeout);
        tokio::spawn(async move {
            let stream = match tokio::time::timeout(timeout, acceptor.accept(stream)).await {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => return tracing::debug!(peer = %peer, error = %e, "TLS handshake failed"),
                Err(_) => return tracing::debug!(peer = %peer, "TLS handshake timed out"),
            };
            let _ = watcher.watch(http.serve_connection(TokioIo::new(stream), service)).await;
            drop(permit);
        });
    }
    drop(listener);
    tracing::info!(connections = graceful.count(), "draining");
    if tokio::time::timeout(limits.drain_timeout, graceful.shutdown()).await.is_err() {
        tracing::warn!("drain timed out; closing the remaining connections");
    }
    Ok(())
}

/// Answers a connection over a cap with a 503 (`message`) and closes it.
async fn refuse(mut stream: tokio::net::TcpStream, message: &str) {
    use tokio::io::AsyncWriteExt;
    let body = serde_json::json!({"error": {"field": "server", "message": message}}).to_string();
    let head = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: {}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        crate::guard::RETRY_AFTER_SECONDS,
        body.len()
    );
    let write = async {
        stream.write_all(head.as_bytes()).await?;
        stream.write_all(body.as_bytes()).await?;
        stream.shutdown().await
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), write).await;
}
