//! The server's state: every collection's task and live accumulator, rebuilt from the store on
//! start. A collection whose stored config or reports do not load is quarantined (served as
//! 503 naming the reason), never the whole server.

use crate::buckets::{Buckets, Period};
use crate::error::ApiError;
use crate::metrics::Metrics;
use crate::rounds::Training;
use crate::store::{Store, StoredCollection};
use axum::http::{HeaderMap, StatusCode};
use harmony_protocol::CollectionConfig;
use harmony_tasks::{Task, TaskAggregator};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard};
use std::time::Instant;

/// What an analyst sees of a collection beside its config: the name and description given at
/// create and its creation time (stored as JSON beside the config; devices never see it).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CollectionMeta {
    /// The name given at create.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The description given at create.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// When it was created (ISO 8601, UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created: Option<String>,
}

impl CollectionMeta {
    /// The meta of a collection created now with `label`.
    pub fn now(label: harmony_protocol::CollectionLabel) -> Self {
        let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let created = Some(harmony_data::temporal::format_datetime(secs as f64));
        CollectionMeta { name: label.name, description: label.description, created }
    }
}

/// One collection in memory.
pub struct Collection {
    /// The store's key.
    pub key: i64,
    /// Its name, description and creation time (empty for one stored before they were kept).
    pub meta: CollectionMeta,
    /// The published config.
    pub config: CollectionConfig,
    /// The task built from it (validates reports, estimates).
    pub task: Box<dyn Task>,
    /// The live accumulator: exactly the committed reports.
    pub agg: Mutex<Box<dyn TaskAggregator>>,
    /// Model rounds (`train`).
    pub train: Option<Training>,
    /// Adaptive query rounds (`linear-queries`, `adaptive-rounds`): the accumulator is the
    /// rounds ([`crate::queries`]).
    pub adaptive: bool,
    /// The last estimate documents (see [`crate::api::collections`]).
    pub cache: Mutex<Vec<Cached>>,
    /// Whether a background recomputation is running.
    pub refreshing: AtomicBool,
    /// Held shared by a batch from its commit to its accumulator update; exclusively by a
    /// rebuild and by the estimates' barrier ([`Collection::settle`]).
    pub commit: RwLock<()>,
    /// A batch failed with its commit outcome unknown (the store connection died): the
    /// accumulator may lack committed reports; rebuilt from the store before its next use.
    pub stale: AtomicBool,
    /// The bucket states ([`crate::buckets`]): `None` for rounds (no state to save) and on a
    /// store that keeps none. Updated with the live accumulator, under its lock.
    pub buckets: Option<Mutex<Buckets>>,
}

/// An estimate document computed for a query at a report count.
pub struct Cached {
    /// The raw query string.
    pub query: String,
    /// Reports it was computed from.
    pub count: u64,
    /// When.
    pub at: Instant,
    /// The document, serialized (a cached GET is a copy, however large the document: CALM's
    /// 3-way marginals over Adult are 14 MB of JSON).
    pub doc: axum::body::Bytes,
}

impl Collection {
    /// Builds a collection from its config (no reports yet).
    pub fn new(key: i64, config: CollectionConfig) -> Result<Self, String> {
        let task = harmony_tasks::build(&config).map_err(|e| e.to_string())?;
        Self::with_task(key, config, task)
    }

    /// A collection of `config` serving `task`, the task that config describes (as
    /// `harmony_tasks::create` returns them).
    pub fn with_task(key: i64, config: CollectionConfig, task: Box<dyn Task>) -> Result<Self, String> {
        let train = match config.task.kind().has_rounds() {
            true => Some(Training::new(&config).map_err(|e| e.to_string())?),
            false => None,
        };
        let agg = Mutex::new(task.aggregator());
        let adaptive = crate::queries::is_adaptive(&config);
        Ok(Collection {
            key,
            meta: CollectionMeta::default(),
            config,
            task,
            agg,
            train,
            adaptive,
            cache: Mutex::new(Vec::new()),
            refreshing: AtomicBool::new(false),
            commit: RwLock::new(()),
            stale: AtomicBool::new(false),
            buckets: None,
        })
    }

    /// Whether the collection's reports merge as saved states (everything but rounds).
    pub fn bucketable(&self) -> bool {
        self.train.is_none() && !self.adaptive && self.task.mergeable()
    }

    /// The collection with (empty) buckets of `period`, if it can have buckets.
    pub fn with_period(mut self, period: Period) -> Self {
        if self.bucketable() {
            self.buckets = Some(Mutex::new(Buckets::new(period)));
        }
        self
    }

    /// The bucket states, locked (`None` without buckets).
    pub fn buckets(&self) -> Option<MutexGuard<'_, Buckets>> {
        self.buckets.as_ref().map(|b| b.lock().unwrap_or_else(|p| p.into_inner()))
    }
    /// Reports aggregated so far (a training collection: gradients received in every round).
    pub fn count(&self) -> u64 {
        match &self.train {
            Some(t) => t.task.received_total(&t.model()),
            None => self.agg().count(),
        }
    }

    /// The accumulator, locked (a poisoned lock is recovered: the accumulator is only mutated
    /// by `add` of validated reports, which does not panic).
    pub fn agg(&self) -> MutexGuard<'_, Box<dyn TaskAggregator>> {
        self.agg.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Shared while a batch is committed and added to the accumulator.
    pub fn committing(&self) -> RwLockReadGuard<'_, ()> {
        self.commit.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Makes the accumulator exactly the committed reports before it is read or updated: if a
    /// batch's commit outcome is unknown ([`Collection::stale`]), rebuilds it from the store
    /// (503 while the store is down); with `barrier` (before an estimate) also waits for the
    /// batches being committed to reach it, so it holds every batch committed so far.
    pub fn settle(&self, store: &dyn Store, barrier: bool) -> Result<(), ApiError> {
        if self.adaptive {
            // Answers are applied under the rounds' lock, which a reload takes too.
            return crate::queries::settle(store, self);
        }
        let stale = || self.train.is_none() && self.stale.load(Ordering::Acquire);
        if !barrier && !stale() {
            return Ok(());
        }
        let _exclusive = self.commit.write().unwrap_or_else(|p| p.into_inner());
        if !stale() {
            return Ok(());
        }
        let t = Instant::now();
        let (agg, bad) = if self.buckets.is_some() {
            let loaded = crate::buckets::load(store, self.task.as_ref(), self.key)
                .map_err(|e| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "store", e))?;
            let (b, agg) = loaded.ok_or_else(|| ApiError::internal("a store that stopped keeping buckets"))?;
            *self.buckets().expect("bucketed") = b;
            (agg, 0)
        } else {
            replay(store, self).map_err(ApiError::store)?
        };
        if bad > 0 {
            let msg = format!("{bad} stored reports do not decode");
            return Err(ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "store", msg));
        }
        let n = agg.count();
        *self.agg() = agg;
        self.cache.lock().unwrap_or_else(|p| p.into_inner()).clear();
        self.stale.store(false, Ordering::Release);
        tracing::info!(collection = %self.config.id, reports = n, seconds = t.elapsed().as_secs_f64(), "rebuilt accumulator after a store failure");
        Ok(())
    }
}

/// A fresh accumulator with every stored report of `col`, and how many did not decode (adaptive
/// query rounds: the stored rounds, [`crate::queries::replay`]).
fn replay(store: &dyn Store, col: &Collection) -> Result<(Box<dyn TaskAggregator>, u64), crate::store::StoreError> {
    if col.adaptive {
        return crate::queries::replay(store, col).map(|a| (a, 0)).map_err(crate::store::StoreError::Db);
    }
    let (mut agg, mut bad) = (col.task.aggregator(), 0u64);
    store.for_each_report(col.key, &mut |b| match col.task.validate(b) {
        Ok(()) if agg.add(b).is_ok() => {}
        _ => bad += 1,
    })?;
    Ok((agg, bad))
}

/// A collection that did not load.
pub struct Quarantined {
    /// Why.
    pub reason: String,
}

/// Shared server state.
#[derive(Clone)]
pub struct AppState {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub store: Arc<dyn Store>,
    pub tokens: crate::tokens::Tokens,
    pub collections: RwLock<HashMap<String, Arc<Collection>>>,
    pub quarantined: RwLock<HashMap<String, Quarantined>>,
    pub metrics: Metrics,
    /// Seconds added to the system clock when a batch's bucket is chosen (0 but in tests and
    /// simulations of days: [`AppState::shift_clock`]).
    pub clock_shift: std::sync::atomic::AtomicI64,
    /// On a store shared with other servers: the poll of their changes ([`crate::replicas`]).
    pub replica: Option<crate::replicas::Status>,
}

/// Loads one stored collection and replays its reports (or its round) into the accumulator.
fn load(store: &dyn Store, c: &StoredCollection) -> Result<Collection, String> {
    let config = CollectionConfig::from_json(&c.config)?;
    let mut col = Collection::new(c.key, config)?;
    // A meta that does not parse is shown as none: it never keeps the collection from loading.
    col.meta = c.meta.as_deref().and_then(|m| serde_json::from_str(m).ok()).unwrap_or_default();
    if let Some(t) = &col.train {
        t.load(store, c.key)?;
        return Ok(col);
    }
    let t = Instant::now();
    if col.bucketable()
        && let Some((buckets, agg)) = crate::buckets::load(store, col.task.as_ref(), c.key)?
    {
        let (n, k) = (agg.count(), buckets.states.len());
        *col.agg() = agg;
        col.buckets = Some(Mutex::new(buckets));
        tracing::info!(collection = %c.id, reports = n, buckets = k, seconds = t.elapsed().as_secs_f64(), "merged the stored bucket states");
        return Ok(col);
    }
    let (agg, bad) = replay(store, &col).map_err(|e| e.to_string())?;
    *col.agg() = agg;
    if bad > 0 {
        return Err(format!("{bad} stored reports do not decode"));
    }
    let n = col.agg().count();
    tracing::info!(collection = %c.id, reports = n, seconds = t.elapsed().as_secs_f64(), "rebuilt accumulator");
    Ok(col)
}

impl AppState {
    /// Loads every collection from `store` and rebuilds its accumulator from the stored reports;
    /// a collection that fails to load is quarantined and logged.
    pub fn new(store: Arc<dyn Store>, token: &str) -> Result<Self, crate::error::ServerError> {
        Self::with_tokens(store, token, None)
    }

    /// [`AppState::new`] with the admin token and an optional metrics token ([`crate::tokens`]);
    /// the analyst tokens are loaded from the store.
    pub fn with_tokens(
        store: Arc<dyn Store>,
        admin: &str,
        metrics: Option<&str>,
    ) -> Result<Self, crate::error::ServerError> {
        let stored = store.tokens().map_err(crate::error::ServerError::Load)?;
        let tokens = crate::tokens::Tokens::new(admin, metrics, stored);
        let (mut map, mut quarantined) = (HashMap::new(), HashMap::new());
        for c in store.collections().map_err(crate::error::ServerError::Load)? {
            match load(store.as_ref(), &c) {
                Ok(col) => {
                    map.insert(c.id.clone(), Arc::new(col));
                }
                Err(reason) => {
                    tracing::error!(collection = %c.id, %reason, "collection quarantined");
                    quarantined.insert(c.id.clone(), Quarantined { reason });
                }
            }
        }
        let replica = store.shared().then(crate::replicas::Status::now);
        let inner = Arc::new(Inner {
            store,
            tokens,
            collections: RwLock::new(map),
            quarantined: RwLock::new(quarantined),
            metrics: Metrics::default(),
            clock_shift: std::sync::atomic::AtomicI64::new(0),
            replica,
        });
        if inner.replica.is_some() {
            crate::replicas::spawn(Arc::downgrade(&inner));
        }
        Ok(AppState { inner })
    }

    /// Whether collection `id` is served or quarantined here.
    pub fn serves(&self, id: &str) -> bool {
        self.inner.collections.read().unwrap_or_else(|p| p.into_inner()).contains_key(id)
            || self.inner.quarantined.read().unwrap_or_else(|p| p.into_inner()).contains_key(id)
    }

    /// Serves a collection another server stored (a replica's poll, [`crate::replicas`]), or
    /// quarantines it when it does not load.
    pub fn adopt_stored(&self, stored: &StoredCollection) {
        match load(self.inner.store.as_ref(), stored) {
            Ok(col) => {
                let mut map = self.inner.collections.write().unwrap_or_else(|p| p.into_inner());
                if !map.contains_key(&stored.id) {
                    tracing::info!(collection = %stored.id, "serving a collection another server created");
                    map.insert(stored.id.clone(), Arc::new(col));
                }
            }
            Err(reason) => {
                tracing::error!(collection = %stored.id, %reason, "collection quarantined");
                let mut q = self.inner.quarantined.write().unwrap_or_else(|p| p.into_inner());
                q.insert(stored.id.clone(), Quarantined { reason });
            }
        }
    }

    /// A collection by id: 404 when unknown, 503 naming the reason when quarantined.
    pub fn collection(&self, id: &str) -> Result<Arc<Collection>, ApiError> {
        if let Some(c) = self.inner.collections.read().unwrap_or_else(|p| p.into_inner()).get(id) {
            return Ok(c.clone());
        }
        if let Some(q) = self.inner.quarantined.read().unwrap_or_else(|p| p.into_inner()).get(id) {
            return Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "collection",
                format!("collection {id:?} is quarantined: {}", q.reason),
            ));
        }
        Err(ApiError::no_collection(id))
    }

    /// Adds a new collection.
    pub fn insert(&self, id: String, c: Collection) {
        self.inner.collections.write().unwrap_or_else(|p| p.into_inner()).insert(id, Arc::new(c));
    }

    /// Serves the stored collection `id` if it is not served yet (a create whose answer was
    /// lost): loads it as at start. Returns its config, or `None` when the store has no such id.
    pub fn adopt(&self, id: &str) -> Result<Option<CollectionConfig>, crate::store::StoreError> {
        // Served already (the usual retry): no store read.
        if let Some(c) = self.inner.collections.read().unwrap_or_else(|p| p.into_inner()).get(id) {
            return Ok(Some(c.config.clone()));
        }
        let Some(stored) = self.inner.store.collections()?.into_iter().find(|c| c.id == id) else {
            return Ok(None);
        };
        let col = load(self.inner.store.as_ref(), &stored).map_err(crate::store::StoreError::Db)?;
        let config = col.config.clone();
        let mut map = self.inner.collections.write().unwrap_or_else(|p| p.into_inner());
        if !map.contains_key(id) {
            tracing::info!(collection = %id, "serving a collection whose creation's outcome was unknown");
            map.insert(id.to_string(), Arc::new(col));
        }
        Ok(Some(config))
    }

    /// A create of `id` failed with its commit outcome unknown: a background thread asks the
    /// store (backoff 100 ms doubling to 5 s, for up to ~3 minutes) until it answers, then serves
    /// the collection if it was stored, so a stored collection never stays unserved until a
    /// restart.
    pub fn adopt_later(&self, id: String) {
        let st = self.clone();
        std::thread::spawn(move || {
            let mut wait = std::time::Duration::from_millis(100);
            for _ in 0..40 {
                std::thread::sleep(wait);
                match st.adopt(&id) {
                    Ok(_) => return,
                    Err(_) => wait = (wait * 2).min(std::time::Duration::from_secs(5)),
                }
            }
            tracing::error!(collection = %id, "gave up asking the store whether a collection was created");
        });
    }

    /// Now (Unix seconds) as the server dates batches: the system clock plus the shift.
    pub fn now(&self) -> i64 {
        crate::store::unix_now() + self.inner.clock_shift.load(Ordering::Relaxed)
    }

    /// Dates the batches received from now on `secs` later than the system clock (negative:
    /// earlier). For tests and simulations of days of collection; a server never shifts itself.
    pub fn shift_clock(&self, secs: i64) {
        self.inner.clock_shift.store(secs, Ordering::Relaxed);
    }

    /// Number of quarantined collections.
    pub fn quarantined_count(&self) -> u64 {
        self.inner.quarantined.read().unwrap_or_else(|p| p.into_inner()).len() as u64
    }

    /// Number of collections served.
    pub fn count(&self) -> u64 {
        self.inner.collections.read().unwrap_or_else(|p| p.into_inner()).len() as u64
    }

    /// The collections served, by id.
    pub fn ids(&self) -> Vec<String> {
        let mut ids: Vec<String> =
            self.inner.collections.read().unwrap_or_else(|p| p.into_inner()).keys().cloned().collect();
        ids.sort();
        ids
    }

    /// 401 unless the request carries the admin token (403 for another valid token).
    pub fn check_token(&self, headers: &HeaderMap) -> Result<(), ApiError> {
        self.inner.tokens.admin(headers)
    }

    /// The admin token or an analyst token of collection `id`.
    pub fn check_reader(&self, headers: &HeaderMap, id: &str) -> Result<crate::tokens::Access, ApiError> {
        self.inner.tokens.reader(headers, id)
    }
}
