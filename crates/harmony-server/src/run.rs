//! Opening the store and running the HTTP server (a background thread for tests and `harmony
//! demo`, the current thread for `harmony serve`).

use crate::error::{ServerError, redact};
use crate::state::AppState;
use crate::store::{SqliteStore, Store};
use std::sync::Arc;

/// Opens the store a URL names: `sqlite://PATH` (or a bare path) or `postgres://…`.
pub fn open_store(url: &str) -> Result<Arc<dyn Store>, ServerError> {
    let err = |source| ServerError::Store { url: redact(url), source };
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        return Ok(Arc::new(crate::pg::PgStore::open(url).map_err(err)?));
    }
    let path = url.strip_prefix("sqlite://").unwrap_or(url);
    Ok(Arc::new(SqliteStore::open(std::path::Path::new(path)).map_err(err)?))
}

/// A running server (for tests, `harmony demo` and `harmony serve`).
pub struct Running {
    /// The bound address.
    pub addr: std::net::SocketAddr,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Running {
    /// `http://ADDR`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
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
    let state = AppState::new(store, token)?;
    let app = crate::router_with(state, extend);
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
    let thread = std::thread::Builder::new()
        .name("harmony-server".into())
        .spawn(move || {
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(std_listener).expect("tokio listener");
                let _ = axum::serve(listener, app)
                    .with_graceful_shutdown(async move {
                        let _ = rx.await;
                    })
                    .await;
            });
        })
        .map_err(ServerError::Runtime)?;
    Ok(Running { addr, shutdown: Some(tx), thread: Some(thread) })
}

/// Serves on the current thread until Ctrl-C (SIGINT).
pub fn serve_forever(store: Arc<dyn Store>, token: &str, listen: &str) -> Result<(), ServerError> {
    let state = AppState::new(store, token)?;
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(ServerError::Runtime)?;
    let listen_err = |source| ServerError::Listen { addr: listen.to_string(), source };
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(listen).await.map_err(listen_err)?;
        let addr = listener.local_addr().map_err(listen_err)?;
        eprintln!("harmony server listening on http://{addr}");
        tracing::info!(%addr, "listening");
        axum::serve(listener, crate::router(state))
            .with_graceful_shutdown(async {
                let _ = tokio::signal::ctrl_c().await;
            })
            .await
            .map_err(ServerError::Runtime)
    })
}
