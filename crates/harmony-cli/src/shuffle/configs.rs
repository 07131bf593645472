//! The relay's collection configs: fetched from the upstream once per collection and kept
//! ("pinned") while any report of the collection is buffered, so every device of a round reads
//! the same config and every report of the round is checked against it. A pinned config is
//! fetched again only once it is older than `--config-ttl-secs` and nothing of its collection
//! is buffered. Refusals (an unknown collection's 404) are kept for [`REFUSAL_TTL`].
//!
//! A device request never waits on the upstream for long: at most [`MAX_FETCHES`] fetches run
//! at once (each on its own blocking thread, one attempt), a second request for a config
//! being fetched is answered 503 at once, and the request that started a fetch waits
//! [`FETCH_WAIT`] for it before answering 503 (the fetch still fills the cache).

use harmony_client::{Client, ClientError};
use harmony_protocol::CollectionConfig;
use harmony_server::ApiError;
use harmony_tasks::Task;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Most config fetches running at once.
pub const MAX_FETCHES: usize = 16;
/// How long the request that starts a fetch waits for it.
pub const FETCH_WAIT: Duration = Duration::from_secs(5);
/// How long the upstream's refusal of a collection (e.g. 404) is answered without asking again.
pub const REFUSAL_TTL: Duration = Duration::from_secs(60);
/// How long a failure to reach the upstream is answered without asking again.
const UNREACHABLE_TTL: Duration = Duration::from_secs(2);
/// Most collections known at once (pinned, refused or being fetched); refusals are dropped
/// first when it is reached.
pub const MAX_ENTRIES: usize = 10_000;

/// A collection's config as the relay serves it and checks reports against.
pub struct Pinned {
    pub config: CollectionConfig,
    /// Its JSON (stored with the buffered reports, served to devices).
    pub json: String,
    pub task: Box<dyn Task>,
    /// Why its reports cannot be relayed (a collection of model or query rounds).
    pub refuse_reports: Option<String>,
    fetched: Instant,
}

impl Pinned {
    /// Builds a pinned config from the upstream's config of collection `id`.
    pub fn new(id: &str, config: CollectionConfig) -> Result<Pinned, String> {
        if config.id != id {
            return Err(format!("the config is for collection {:?}, asked for {id:?}", config.id));
        }
        let task = harmony_tasks::build(&config).map_err(|e| format!("the config builds no task: {e}"))?;
        let rounds = config.task.kind().has_rounds() || harmony_server::queries::is_adaptive(&config);
        let refuse_reports = rounds
            .then(|| format!("collection {id:?} runs rounds (model or queries): the relay forwards reports only"));
        let json = serde_json::to_string(&config).expect("JSON of a config");
        Ok(Pinned { config, json, task, refuse_reports, fetched: Instant::now() })
    }
}

enum Slot {
    Fetching,
    Pinned(Arc<Pinned>),
    Refused(ApiError, Instant),
}

/// The cache.
pub struct Configs {
    upstream: Client,
    ttl: Duration,
    slots: Mutex<HashMap<String, Slot>>,
    fetches: Arc<tokio::sync::Semaphore>,
}

/// The same error again (a cached refusal answers every request).
fn copy(e: &ApiError) -> ApiError {
    ApiError::new(e.status, e.field.clone(), e.message.clone())
}

fn busy(message: &str) -> ApiError {
    ApiError::new(axum::http::StatusCode::SERVICE_UNAVAILABLE, "upstream", message)
}

impl Configs {
    /// A cache fetching from `upstream` (one attempt per fetch), refreshing after `ttl`.
    pub fn new(upstream: Client, ttl: Duration) -> Arc<Configs> {
        Arc::new(Configs {
            upstream,
            ttl,
            slots: Mutex::default(),
            fetches: Arc::new(tokio::sync::Semaphore::new(MAX_FETCHES)),
        })
    }

    /// Pins a config read back from the buffer (a restart with reports buffered).
    pub fn restore(&self, id: &str, json: &str) -> Result<(), String> {
        let config = serde_json::from_str(json).map_err(|e| format!("not a config: {e}"))?;
        let p = Pinned::new(id, config)?;
        self.slots.lock().expect("configs lock").insert(id.to_string(), Slot::Pinned(Arc::new(p)));
        Ok(())
    }

    /// Collection `id`'s config (`buffered`: whether reports of it are buffered, which keeps
    /// a pinned config however old): pinned, or fetched now.
    pub async fn get(self: &Arc<Self>, id: &str, buffered: bool) -> Result<Arc<Pinned>, ApiError> {
        let rx = {
            let mut slots = self.slots.lock().expect("configs lock");
            match slots.get(id) {
                Some(Slot::Pinned(p)) if buffered || p.fetched.elapsed() < self.ttl => return Ok(p.clone()),
                Some(Slot::Refused(e, until)) if Instant::now() < *until => return Err(copy(e)),
                Some(Slot::Fetching) => return Err(busy("the collection's config is being fetched; retry")),
                _ => {}
            }
            let Ok(permit) = self.fetches.clone().try_acquire_owned() else {
                return Err(busy("too many config fetches from the collection server; retry"));
            };
            make_room(&mut slots)?;
            slots.insert(id.to_string(), Slot::Fetching);
            let (tx, rx) = tokio::sync::oneshot::channel();
            let (me, id) = (self.clone(), id.to_string());
            tokio::task::spawn_blocking(move || {
                let got = me.fetch(&id);
                drop(permit);
                let _ = tx.send(me.install(&id, got));
            });
            rx
        };
        match tokio::time::timeout(FETCH_WAIT, rx).await {
            Ok(Ok(got)) => got,
            _ => Err(busy("the collection server is slow to answer; retry")),
        }
    }

    /// Asks the upstream (blocking, one attempt).
    fn fetch(&self, id: &str) -> Result<Arc<Pinned>, (ApiError, Duration)> {
        let bad_gateway = |m: String| ApiError::new(axum::http::StatusCode::BAD_GATEWAY, "upstream", m);
        match self.upstream.config(id) {
            Ok(config) => Pinned::new(id, config)
                .map(Arc::new)
                .map_err(|e| (bad_gateway(format!("the collection server's config: {e}")), UNREACHABLE_TTL)),
            Err(ClientError::Rejected { status, field, message }) => {
                // The upstream's own refusal (404 for an unknown collection), kept a while.
                let status = axum::http::StatusCode::from_u16(status).unwrap_or(axum::http::StatusCode::BAD_GATEWAY);
                let status = if status.is_client_error() { status } else { axum::http::StatusCode::BAD_GATEWAY };
                Err((ApiError::new(status, field, message), REFUSAL_TTL))
            }
            Err(e) => Err((bad_gateway(format!("the collection server: {e}")), UNREACHABLE_TTL)),
        }
    }

    fn install(&self, id: &str, got: Result<Arc<Pinned>, (ApiError, Duration)>) -> Result<Arc<Pinned>, ApiError> {
        let slot = match &got {
            Ok(p) => Slot::Pinned(p.clone()),
            Err((e, ttl)) => Slot::Refused(copy(e), Instant::now() + *ttl),
        };
        self.slots.lock().expect("configs lock").insert(id.to_string(), slot);
        got.map_err(|(e, _)| e)
    }
}

/// Keeps the map under [`MAX_ENTRIES`]: drops expired refusals, then every refusal; 503 if the
/// collections pinned or being fetched fill it.
fn make_room(slots: &mut HashMap<String, Slot>) -> Result<(), ApiError> {
    if slots.len() < MAX_ENTRIES {
        return Ok(());
    }
    let now = Instant::now();
    slots.retain(|_, s| !matches!(s, Slot::Refused(_, until) if *until <= now));
    if slots.len() >= MAX_ENTRIES {
        slots.retain(|_, s| !matches!(s, Slot::Refused(..)));
    }
    if slots.len() >= MAX_ENTRIES {
        return Err(busy("too many collections known to the relay; retry"));
    }
    Ok(())
}
