//! Storage behind one trait. [`SqliteStore`] is the embedded default: WAL journal,
//! `synchronous=FULL`, and one writer thread that group-commits every batch waiting in its queue
//! in a single transaction (one fsync for many batches); a batch is acknowledged only after its
//! transaction commits.

use std::ops::ControlFlow;
use std::path::Path;
use std::sync::Mutex;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};

/// Storage errors.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database failed (for a write: whether it committed is unknown).
    #[error("database: {0}")]
    Db(String),
    /// The database cannot be reached (not connected, reconnecting with backoff): nothing was
    /// attempted, so nothing was written.
    #[error("unavailable: {0}")]
    Unavailable(String),
    /// The writer thread is gone.
    #[error("the store's writer thread stopped")]
    Closed,
    /// A collection id that already exists.
    #[error("collection {0} already exists")]
    Exists(String),
    /// The store does not implement this (a custom [`Store`] without model rounds).
    #[error("not supported by this store: {0}")]
    Unsupported(&'static str),
    /// A report id already stored with other bytes (`index` in the batch): nothing of the
    /// batch was written.
    #[error("report {index} ({id:?}) is already stored with other bytes")]
    Conflict {
        /// Its position in the batch.
        index: usize,
        /// The report id.
        id: String,
    },
    /// The stored round is not the one a gradient was computed for: another server sharing the
    /// database advanced it (nothing was written; reload the round from the store).
    #[error("the stored round moved on: {0}")]
    RoundMoved(String),
}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        StoreError::Db(e.to_string())
    }
}

/// Store result.
pub type StoreResult<T> = Result<T, StoreError>;

/// A stored collection: internal key, public id, config JSON.
#[derive(Debug, Clone)]
pub struct StoredCollection {
    /// Internal key.
    pub key: i64,
    /// Public id.
    pub id: String,
    /// The config document (JSON).
    pub config: String,
    /// The analyst's label and creation time (JSON of [`crate::state::CollectionMeta`]);
    /// `None` for a collection stored before they were kept.
    pub meta: Option<String>,
}

/// A per-collection analyst token as stored: its SHA-256, never the token ([`crate::tokens`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredToken {
    /// Public id (16 hex digits).
    pub token_id: String,
    /// The collection it reads (public id).
    pub collection: String,
    /// SHA-256 of the token (32 bytes).
    pub hash: Vec<u8>,
    /// Its label.
    pub label: String,
    /// Unix seconds when it was made.
    pub created: u64,
    /// Whether it was revoked.
    pub revoked: bool,
}

/// One stored report as read back ([`Store::for_each_stored`]).
#[derive(Debug, Clone, Copy)]
pub struct StoredReport<'a> {
    /// The device-chosen report id.
    pub id: &'a str,
    /// The UTC day the server received its batch, in days since 1970-01-01 (Arrow's `date32`);
    /// `None` for a report stored before the store kept days.
    pub day: Option<i32>,
    /// The encoded report, exactly as the server validated and stored it.
    pub body: &'a [u8],
}

/// Today's UTC day in days since 1970-01-01: the `day` stored with a batch received now.
pub fn utc_day_now() -> i32 {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    (secs / 86_400) as i32
}

/// The saved accumulator state of a batch's new reports ([`crate::buckets`]), stored in the
/// batch's transaction.
pub struct BucketDelta {
    /// The start (Unix seconds) of the bucket the batch was received in.
    pub bucket: i64,
    /// The state of every report of the batch (stored when all are new).
    pub state: Vec<u8>,
    /// The state of the new reports only, given the flags of [`Store::insert_reports`]
    /// (called inside the transaction when some were stored already).
    pub redo: Redo,
}

/// One stored bucket state as a replica reads it ([`Store::bucket_states_after`]).
pub struct SharedState<'a> {
    /// Its row's sequence number.
    pub seq: i64,
    /// The number of the transaction that stored it.
    pub xid: i64,
    /// Whether this server stored it.
    pub own: bool,
    /// Its bucket's start (Unix seconds).
    pub bucket: i64,
    /// The saved accumulator state.
    pub state: &'a [u8],
}

/// A batch's reports, `(report id, encoded report)`, shared by the request (which aggregates
/// them) and the store's writer (which stores them): never copied.
pub type Reports = std::sync::Arc<Vec<(String, Vec<u8>)>>;

/// [`BucketDelta::redo`]: the state of a batch's new reports given their flags.
pub type Redo = Box<dyn FnOnce(&[bool]) -> StoreResult<Vec<u8>> + Send>;

impl BucketDelta {
    /// The state to store with a batch whose reports' flags are `flags` (`None`: none is new).
    pub(crate) fn resolve(self, flags: &[bool]) -> StoreResult<Option<Vec<u8>>> {
        if flags.iter().all(|f| *f) {
            Ok(Some(self.state))
        } else if flags.iter().any(|f| *f) {
            (self.redo)(flags).map(Some)
        } else {
            Ok(None)
        }
    }
}

/// Durable storage of collections and reports. Methods block; the server calls them from
/// blocking threads.
pub trait Store: Send + Sync + 'static {
    /// Stores a new collection; returns its internal key.
    fn create_collection(&self, id: &str, config: &str) -> StoreResult<i64>;
    /// [`Store::create_collection`] with its `meta` (JSON of [`crate::state::CollectionMeta`]:
    /// name, description, creation time). A store without the column keeps the collection only.
    fn create_collection_meta(&self, id: &str, config: &str, meta: &str) -> StoreResult<i64> {
        let _ = meta;
        self.create_collection(id, config)
    }
    /// Every collection.
    fn collections(&self) -> StoreResult<Vec<StoredCollection>>;
    /// Stores reports `(report id, encoded report)` of one collection durably, all or nothing;
    /// returns for each whether it was new (`false`: the id was already stored with the same
    /// bytes, nothing written). An id stored with other bytes is [`StoreError::Conflict`].
    fn insert_reports(&self, key: i64, reports: Vec<(String, Vec<u8>)>) -> StoreResult<Vec<bool>>;
    /// Calls `f` on every stored report of a collection (id, received day, bytes), in no
    /// particular order, streaming (never all in memory); stops early when `f` breaks.
    fn for_each_stored(&self, key: i64, f: &mut dyn FnMut(StoredReport<'_>) -> ControlFlow<()>) -> StoreResult<()>;
    /// Calls `f` on every stored report's bytes (the replay of [`crate::state`]).
    fn for_each_report(&self, key: i64, f: &mut dyn FnMut(&[u8])) -> StoreResult<()> {
        self.for_each_stored(key, &mut |r| {
            f(r.body);
            ControlFlow::Continue(())
        })
    }
    /// Number of stored reports of a collection.
    fn count_reports(&self, key: i64) -> StoreResult<u64>;
    /// Stored reports of a collection per UTC day received (`None`: stored before days were
    /// kept), days ascending (`GET …/days`, the dashboard's per-day counts). This default scans
    /// every report; SQLite and PostgreSQL count in the database.
    fn day_counts(&self, key: i64) -> StoreResult<Vec<(Option<i32>, u64)>> {
        let mut days = std::collections::BTreeMap::new();
        self.for_each_stored(key, &mut |r| {
            *days.entry(r.day).or_insert(0u64) += 1;
            ControlFlow::Continue(())
        })?;
        Ok(days.into_iter().collect())
    }
    /// Whether the store answers (a trivial query on each connection): `/readyz`.
    fn ping(&self) -> StoreResult<()> {
        Ok(())
    }

    /// Whether the store keeps bucket states ([`crate::buckets`]); without them a collection
    /// has only its live accumulator (no windows), rebuilt from its reports on start.
    fn supports_buckets(&self) -> bool {
        false
    }
    /// Stores a new collection with its `meta` ([`Store::create_collection_meta`]) and its bucket
    /// period (seconds), in one transaction; returns its internal key.
    fn create_collection_with_period(&self, id: &str, config: &str, meta: &str, _period: i64) -> StoreResult<i64> {
        self.create_collection_meta(id, config, meta)
    }
    /// A collection's bucket period in seconds; `None` for a collection stored before the store
    /// kept buckets (its buckets are made once, [`Store::adopt_buckets`]).
    fn period(&self, _key: i64) -> StoreResult<Option<i64>> {
        Ok(None)
    }
    /// [`Store::insert_reports`] received at `received` (Unix seconds; its UTC day is stored with
    /// each report), with the state of the batch's new reports stored in the same transaction.
    fn insert_reports_at(
        &self,
        key: i64,
        _received: i64,
        reports: Reports,
        delta: Option<BucketDelta>,
    ) -> StoreResult<Vec<bool>> {
        match delta {
            Some(_) => Err(StoreError::Unsupported("bucket states")),
            None => self.insert_reports(key, std::sync::Arc::unwrap_or_clone(reports)),
        }
    }
    /// Calls `f` on every stored state of a collection's batches: (bucket start, state).
    fn for_each_bucket_state(&self, _key: i64, _f: &mut dyn FnMut(i64, &[u8])) -> StoreResult<()> {
        Err(StoreError::Unsupported("bucket states"))
    }
    /// Whether other servers may write to this store at the same time (replicas on one
    /// PostgreSQL database): each then merges the others' bucket states ([`crate::replicas`]).
    fn shared(&self) -> bool {
        false
    }
    /// A shared store's visible bucket states of collection `key` whose transaction is numbered
    /// `since` or later (every one when `None`), then the horizon: the oldest transaction number
    /// still running when they were read, so every state committed later is numbered at least
    /// that.
    fn bucket_states_after(
        &self,
        _key: i64,
        _since: Option<i64>,
        _f: &mut dyn FnMut(SharedState<'_>),
    ) -> StoreResult<i64> {
        Err(StoreError::Unsupported("replicas"))
    }
    /// Stores the bucket states `(bucket start, state)` and the period of a collection stored
    /// before buckets were kept, in one transaction, unless its period is stored already
    /// (another server did it first: `false`, nothing written).
    fn adopt_buckets(&self, _key: i64, _period: i64, _states: Vec<(i64, Vec<u8>)>) -> StoreResult<bool> {
        Err(StoreError::Unsupported("bucket states"))
    }

    /// Stores a new analyst token (its hash).
    fn insert_token(&self, _token: &StoredToken) -> StoreResult<()> {
        Err(StoreError::Unsupported("analyst tokens"))
    }
    /// Stores new tokens (device keys), all or none.
    fn insert_tokens(&self, tokens: &[StoredToken]) -> StoreResult<()> {
        tokens.iter().try_for_each(|t| self.insert_token(t))
    }
    /// Marks a token revoked; whether it exists.
    fn revoke_token(&self, _token_id: &str) -> StoreResult<bool> {
        Err(StoreError::Unsupported("analyst tokens"))
    }
    /// Every stored analyst token, revoked ones included.
    fn tokens(&self) -> StoreResult<Vec<StoredToken>> {
        Ok(Vec::new())
    }

    /// Whether the store implements model rounds (the gradient methods below).
    fn supports_training(&self) -> bool {
        false
    }
    /// Stores one device's gradient of `round` (its `seq`-th of the round) and, when it
    /// completes the batch, the model `advance = (next round, state)`, in one transaction (the
    /// state is the parameters w, followed with the `noise` schedule by the sum of the
    /// tail-averaged iterates: 2d numbers).
    /// Returns `false` (nothing written) when the device already has a gradient stored. A store
    /// that several servers may share also checks that `round` is the stored round and `seq` the
    /// number of its stored gradients, and otherwise writes nothing and returns
    /// [`StoreError::RoundMoved`].
    fn insert_gradient(
        &self,
        _key: i64,
        _device_id: &str,
        _round: u64,
        _seq: u64,
        _body: &[u8],
        _advance: Option<(u64, &[f64])>,
    ) -> StoreResult<bool> {
        Err(StoreError::Unsupported("model rounds"))
    }
    /// Whether a device has a gradient stored in a collection.
    fn has_gradient(&self, _key: i64, _device_id: &str) -> StoreResult<bool> {
        Err(StoreError::Unsupported("model rounds"))
    }
    /// The stored model `(round, state)` of a collection, if a round was completed.
    fn model(&self, _key: i64) -> StoreResult<Option<(u64, Vec<f64>)>> {
        Err(StoreError::Unsupported("model rounds"))
    }
    /// Calls `f` on the gradients of `round` in arrival order.
    fn for_each_gradient(&self, _key: i64, _round: u64, _f: &mut dyn FnMut(&[u8])) -> StoreResult<()> {
        Err(StoreError::Unsupported("model rounds"))
    }

    // Adaptive query rounds (`linear-queries`, `adaptive-rounds`) reuse the round tables: a
    // device's answer is a "gradient" of its round (one per device per collection), the model
    // row holds the current round (empty parameters), and each posted query is a row of its own.

    /// Stores the query that opens `round` (JSON text) and makes `round` the stored round, in
    /// one transaction. The round before it must be the stored round and hold `filled` answers
    /// (the batch size); otherwise nothing is written and the result is
    /// [`StoreError::RoundMoved`] (another server posted a query or the answers differ).
    fn insert_query(&self, _key: i64, _round: u64, _query: &str, _filled: u64) -> StoreResult<()> {
        Err(StoreError::Unsupported("adaptive query rounds"))
    }
    /// The posted queries `(round, JSON text)` of a collection, by round.
    fn queries(&self, _key: i64) -> StoreResult<Vec<(u64, String)>> {
        Err(StoreError::Unsupported("adaptive query rounds"))
    }
}

pub(crate) fn params_to_blob(w: &[f64]) -> Vec<u8> {
    w.iter().flat_map(|x| x.to_le_bytes()).collect()
}

pub(crate) fn blob_to_params(b: &[u8]) -> Vec<f64> {
    b.chunks_exact(8).map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes"))).collect()
}

struct Job {
    key: i64,
    /// The UTC day the batch was received ([`utc_day_now`]).
    day: i32,
    /// Shared with the caller, which frees them on its own thread after the commit.
    reports: Reports,
    /// The state of its new reports, stored with them.
    delta: Mutex<Option<BucketDelta>>,
    reply: SyncSender<StoreResult<Vec<bool>>>,
}

/// The UTC day (days since 1970-01-01) of Unix second `t`.
pub fn utc_day(t: i64) -> i32 {
    t.div_euclid(86_400) as i32
}

/// Now, in Unix seconds.
pub fn unix_now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

/// SQLite storage (see the module docs).
pub struct SqliteStore {
    jobs: Mutex<Option<SyncSender<Job>>>,
    /// Short reads and writes: tokens, collections, model and query rounds, readiness.
    read: Mutex<rusqlite::Connection>,
    /// Scans and counts over a collection's reports (days, replay, export): a slow one never
    /// queues readiness, tokens or gradient commits behind it.
    analytics: Mutex<rusqlite::Connection>,
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SqliteStore")
    }
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS collections (
    key INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    config TEXT NOT NULL,
    meta TEXT
);
CREATE TABLE IF NOT EXISTS reports (
    collection INTEGER NOT NULL,
    report_id TEXT NOT NULL,
    body BLOB NOT NULL,
    day INTEGER,
    PRIMARY KEY (collection, report_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS gradients (
    collection INTEGER NOT NULL,
    device_id TEXT NOT NULL,
    round INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    body BLOB NOT NULL,
    PRIMARY KEY (collection, device_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS gradients_round ON gradients (collection, round, seq);
CREATE TABLE IF NOT EXISTS models (
    collection INTEGER PRIMARY KEY,
    round INTEGER NOT NULL,
    params BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS queries (
    collection INTEGER NOT NULL,
    round INTEGER NOT NULL,
    query TEXT NOT NULL,
    PRIMARY KEY (collection, round)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS periods (
    collection INTEGER PRIMARY KEY,
    seconds INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS bucket_states (
    seq INTEGER PRIMARY KEY,
    collection INTEGER NOT NULL,
    bucket INTEGER NOT NULL,
    state BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS bucket_states_collection ON bucket_states (collection, bucket);
CREATE TABLE IF NOT EXISTS tokens (
    token_id TEXT PRIMARY KEY,
    collection TEXT NOT NULL,
    hash BLOB NOT NULL UNIQUE,
    label TEXT NOT NULL,
    created INTEGER NOT NULL,
    revoked INTEGER NOT NULL DEFAULT 0
);
";

/// Adds the columns a database created before them lacks: `reports.day` (the UTC day a report's
/// batch was received; old rows keep NULL, exported under `day=unknown`) and `collections.meta`
/// (name, description, creation time; old collections keep NULL).
fn migrate(conn: &rusqlite::Connection) -> StoreResult<()> {
    add_column(conn, "reports", "day", "INTEGER")?;
    add_column(conn, "collections", "meta", "TEXT")
}

/// Adds column `column` of type `ty` to `table` unless it is there.
fn add_column(conn: &rusqlite::Connection, table: &str, column: &str, ty: &str) -> StoreResult<()> {
    let sql = format!("SELECT COUNT(*) FROM pragma_table_info('{table}') WHERE name = '{column}'");
    if conn.query_row(&sql, [], |r| r.get::<_, i64>(0))? > 0 {
        return Ok(());
    }
    match conn.execute_batch(&format!("ALTER TABLE {table} ADD COLUMN {column} {ty}")) {
        // Another process opening the same database added it first.
        Err(e) if e.to_string().contains("duplicate column name") => Ok(()),
        r => Ok(r?),
    }
}

/// Creates the database file readable by its owner only (mode 0600 on Unix; SQLite gives its
/// `-wal` and `-shm` files the database's mode), if it does not exist yet.
fn create_private(path: &Path) -> StoreResult<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    match options.open(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(StoreError::Db(format!("creating {}: {e}", path.display()))),
    }
}

fn open(path: &Path) -> StoreResult<rusqlite::Connection> {
    let conn = rusqlite::Connection::open(path)?;
    conn.busy_timeout(std::time::Duration::from_secs(30))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    Ok(conn)
}

/// The columns of [`StoredReport`], for an export.
const ALL_COLUMNS: &str = "report_id, day, body";
/// Only the bytes (the replay: ids and days would only cost reading them), in the same shape.
const BODY_ONLY: &str = "'', NULL, body";

/// Most reports one group commit takes from the queue before committing.
pub(crate) const GROUP_LIMIT: usize = 200_000;

/// A writer's group commit: the first job and those queued behind it, up to [`GROUP_LIMIT`]
/// reports (`len` counts a job's reports). Both stores' writers take their groups this way.
pub(crate) fn gather<J>(jobs: &Receiver<J>, first: J, len: impl Fn(&J) -> usize) -> Vec<J> {
    let mut n = len(&first);
    let mut group = vec![first];
    while n < GROUP_LIMIT {
        match jobs.try_recv() {
            Ok(j) => {
                n += len(&j);
                group.push(j);
            }
            Err(_) => break,
        }
    }
    group
}

fn writer_loop(mut conn: rusqlite::Connection, jobs: Receiver<Job>, checkpoints: crate::sqlite_wal::Checkpointer) {
    while let Ok(first) = jobs.recv() {
        let group = gather(&jobs, first, |j| j.reports.len());
        match commit_group(&mut conn, &group) {
            Ok(results) => {
                checkpoints.poke();
                for (Job { reports, reply, .. }, r) in group.into_iter().zip(results) {
                    // Its last holder is now the caller: the rows are not freed on this thread.
                    drop(reports);
                    let _ = reply.send(r);
                }
            }
            Err(e) => {
                let msg = e.to_string();
                for job in group {
                    let _ = job.reply.send(Err(StoreError::Db(msg.clone())));
                }
            }
        }
    }
}

/// Commits a group of batches in one transaction; each batch in its own savepoint, rolled back
/// alone when one of its ids is already stored with other bytes.
fn commit_group(conn: &mut rusqlite::Connection, group: &[Job]) -> StoreResult<Vec<StoreResult<Vec<bool>>>> {
    let tx = conn.transaction()?;
    let mut out = Vec::with_capacity(group.len());
    for job in group {
        tx.execute_batch("SAVEPOINT batch")?;
        let result = insert_batch(&tx, job);
        if matches!(result, Err(StoreError::Conflict { .. })) {
            tx.execute_batch("ROLLBACK TO batch")?;
        }
        tx.execute_batch("RELEASE batch")?;
        out.push(match result {
            Err(StoreError::Db(e)) => return Err(StoreError::Db(e)),
            r => r,
        });
    }
    tx.commit()?;
    Ok(out)
}

/// Inserts one batch; a repeated id is compared byte for byte with the stored report. The rows
/// go in id order (the ids are random: in order, neighbouring inserts land on the same B-tree
/// pages); a conflict names the batch's first such id, as in arrival order.
fn insert_batch(tx: &rusqlite::Transaction<'_>, job: &Job) -> StoreResult<Vec<bool>> {
    let mut insert =
        tx.prepare_cached("INSERT OR IGNORE INTO reports (collection, report_id, body, day) VALUES (?1, ?2, ?3, ?4)")?;
    let mut order: Vec<usize> = (0..job.reports.len()).collect();
    order.sort_unstable_by(|&a, &b| job.reports[a].0.cmp(&job.reports[b].0));
    let mut flags = vec![false; job.reports.len()];
    let mut conflict: Option<usize> = None;
    for index in order {
        let (rid, body) = &job.reports[index];
        let new = insert.execute(rusqlite::params![job.key, rid, body, job.day])? == 1;
        if !new {
            let mut stored = tx.prepare_cached("SELECT body FROM reports WHERE collection = ?1 AND report_id = ?2")?;
            let same: bool = stored.query_row(rusqlite::params![job.key, rid], |r| {
                Ok(r.get_ref(0)?.as_blob().map(|b| b == body.as_slice()).unwrap_or(false))
            })?;
            if !same {
                conflict = Some(conflict.map_or(index, |c| c.min(index)));
            }
        }
        flags[index] = new;
    }
    if let Some(index) = conflict {
        return Err(StoreError::Conflict { index, id: job.reports[index].0.clone() });
    }
    let delta = job.delta.lock().map_err(|_| StoreError::Closed)?.take();
    if let Some(d) = delta {
        let bucket = d.bucket;
        if let Some(state) = d.resolve(&flags)? {
            tx.prepare_cached("INSERT INTO bucket_states (collection, bucket, state) VALUES (?1, ?2, ?3)")?
                .execute(rusqlite::params![job.key, bucket, state])?;
        }
    }
    Ok(flags)
}

impl SqliteStore {
    /// Opens (or creates) the database at `path`.
    pub fn open(path: &Path) -> StoreResult<Self> {
        create_private(path)?;
        let write = open(path)?;
        write.execute_batch(SCHEMA)?;
        migrate(&write)?;
        write.pragma_update(None, "wal_autocheckpoint", crate::sqlite_wal::WAL_LIMIT_PAGES)?;
        let checkpoints = crate::sqlite_wal::Checkpointer::start(open(path)?, path)?;
        let read = open(path)?;
        let analytics = open(path)?;
        let (tx, rx) = sync_channel::<Job>(1024);
        let handle = std::thread::Builder::new()
            .name("harmony-sqlite-writer".into())
            .spawn(move || writer_loop(write, rx, checkpoints))
            .map_err(|e| StoreError::Db(e.to_string()))?;
        Ok(SqliteStore {
            jobs: Mutex::new(Some(tx)),
            read: Mutex::new(read),
            analytics: Mutex::new(analytics),
            writer: Mutex::new(Some(handle)),
        })
    }

    /// The one read path of reports: `columns` is [`ALL_COLUMNS`] (export) or [`BODY_ONLY`] (the
    /// replay at start, which reads no ids).
    fn scan(&self, key: i64, columns: &str, f: &mut dyn FnMut(StoredReport<'_>) -> ControlFlow<()>) -> StoreResult<()> {
        let conn = self.analytics.lock().map_err(|_| StoreError::Closed)?;
        let mut stmt = conn.prepare(&format!("SELECT {columns} FROM reports WHERE collection = ?1"))?;
        let mut rows = stmt.query([key])?;
        let bad = |e: rusqlite::types::FromSqlError| StoreError::Db(e.to_string());
        while let Some(row) = rows.next()? {
            let id = row.get_ref(0)?.as_str().map_err(bad)?;
            let day = row.get_ref(1)?.as_i64_or_null().map_err(bad)?.map(|d| d as i32);
            let body = row.get_ref(2)?.as_blob().map_err(bad)?;
            if f(StoredReport { id, day, body }).is_break() {
                break;
            }
        }
        Ok(())
    }

    fn sender(&self) -> StoreResult<SyncSender<Job>> {
        self.jobs.lock().map_err(|_| StoreError::Closed)?.clone().ok_or(StoreError::Closed)
    }
}

impl Drop for SqliteStore {
    fn drop(&mut self) {
        if let Ok(mut j) = self.jobs.lock() {
            j.take();
        }
        if let Ok(mut w) = self.writer.lock()
            && let Some(h) = w.take()
        {
            let _ = h.join();
        }
    }
}

impl Store for SqliteStore {
    fn create_collection(&self, id: &str, config: &str) -> StoreResult<i64> {
        self.create_collection_meta(id, config, "{}")
    }

    fn create_collection_meta(&self, id: &str, config: &str, meta: &str) -> StoreResult<i64> {
        let conn = self.read.lock().map_err(|_| StoreError::Closed)?;
        let sql = "INSERT INTO collections (id, config, meta) VALUES (?1, ?2, ?3)";
        match conn.execute(sql, rusqlite::params![id, config, meta]) {
            Ok(_) => Ok(conn.last_insert_rowid()),
            Err(rusqlite::Error::SqliteFailure(e, _)) if e.code == rusqlite::ErrorCode::ConstraintViolation => {
                Err(StoreError::Exists(id.to_string()))
            }
            Err(e) => Err(e.into()),
        }
    }

    fn insert_token(&self, t: &StoredToken) -> StoreResult<()> {
        let conn = self.read.lock().map_err(|_| StoreError::Closed)?;
        conn.execute(
            "INSERT INTO tokens (token_id, collection, hash, label, created, revoked) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            rusqlite::params![t.token_id, t.collection, t.hash, t.label, t.created as i64, t.revoked],
        )?;
        Ok(())
    }

    fn insert_tokens(&self, tokens: &[StoredToken]) -> StoreResult<()> {
        let mut conn = self.read.lock().map_err(|_| StoreError::Closed)?;
        let tx = conn.transaction()?;
        {
            let mut stmt = tx.prepare(
                "INSERT INTO tokens (token_id, collection, hash, label, created, revoked) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )?;
            for t in tokens {
                stmt.execute(rusqlite::params![
                    t.token_id,
                    t.collection,
                    t.hash,
                    t.label,
                    t.created as i64,
                    t.revoked
                ])?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    fn revoke_token(&self, token_id: &str) -> StoreResult<bool> {
        let conn = self.read.lock().map_err(|_| StoreError::Closed)?;
        Ok(conn.execute("UPDATE tokens SET revoked = 1 WHERE token_id = ?1", [token_id])? > 0)
    }

    fn tokens(&self) -> StoreResult<Vec<StoredToken>> {
        let conn = self.read.lock().map_err(|_| StoreError::Closed)?;
        let mut stmt = conn.prepare("SELECT token_id, collection, hash, label, created, revoked FROM tokens")?;
        let rows = stmt.query_map([], |r| {
            Ok(StoredToken {
                token_id: r.get(0)?,
                collection: r.get(1)?,
                hash: r.get(2)?,
                label: r.get(3)?,
                created: r.get::<_, i64>(4)? as u64,
                revoked: r.get(5)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn collections(&self) -> StoreResult<Vec<StoredCollection>> {
        let conn = self.read.lock().map_err(|_| StoreError::Closed)?;
        let mut stmt = conn.prepare("SELECT key, id, config, meta FROM collections ORDER BY key")?;
        let rows = stmt.query_map([], |r| {
            Ok(StoredCollection { key: r.get(0)?, id: r.get(1)?, config: r.get(2)?, meta: r.get(3)? })
        })?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    }

    fn insert_reports(&self, key: i64, reports: Vec<(String, Vec<u8>)>) -> StoreResult<Vec<bool>> {
        self.insert_reports_at(key, unix_now(), std::sync::Arc::new(reports), None)
    }

    fn insert_reports_at(
        &self,
        key: i64,
        received: i64,
        reports: Reports,
        delta: Option<BucketDelta>,
    ) -> StoreResult<Vec<bool>> {
        let (reply, rx) = sync_channel(1);
        let job = Job { key, day: utc_day(received), reports: reports.clone(), delta: Mutex::new(delta), reply };
        self.sender()?.send(job).map_err(|_| StoreError::Closed)?;
        let result = rx.recv().map_err(|_| StoreError::Closed)?;
        drop(reports);
        result
    }

    fn supports_buckets(&self) -> bool {
        true
    }

    fn create_collection_with_period(&self, id: &str, config: &str, meta: &str, period: i64) -> StoreResult<i64> {
        let mut conn = self.read.lock().map_err(|_| StoreError::Closed)?;
        let tx = conn.transaction()?;
        let sql = "INSERT INTO collections (id, config, meta) VALUES (?1, ?2, ?3)";
        let key = match tx.execute(sql, rusqlite::params![id, config, meta]) {
            Ok(_) => tx.last_insert_rowid(),
            Err(rusqlite::Error::SqliteFailure(e, _)) if e.code == rusqlite::ErrorCode::ConstraintViolation => {
                return Err(StoreError::Exists(id.to_string()));
            }
            Err(e) => return Err(e.into()),
        };
        tx.execute("INSERT INTO periods (collection, seconds) VALUES (?1, ?2)", rusqlite::params![key, period])?;
        tx.commit()?;
        Ok(key)
    }

    fn period(&self, key: i64) -> StoreResult<Option<i64>> {
        let conn = self.read.lock().map_err(|_| StoreError::Closed)?;
        match conn.query_row("SELECT seconds FROM periods WHERE collection = ?1", [key], |r| r.get(0)) {
            Ok(s) => Ok(Some(s)),
            Err(rusqlite::Error::QueryReturnedNoRows) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    fn for_each_bucket_state(&self, key: i64, f: &mut dyn FnMut(i64, &[u8])) -> StoreResult<()> {
        let conn = self.analytics.lock().map_err(|_| StoreError::Closed)?;
        let mut stmt = conn.prepare_cached("SELECT bucket, state FROM bucket_states WHERE collection = ?1")?;
        let mut rows = stmt.query([key])?;
        while let Some(row) = rows.next()? {
            let state = row.get_ref(1)?.as_blob().map_err(|e| StoreError::Db(e.to_string()))?;
            f(row.get(0)?, state);
        }
        Ok(())
    }

    fn adopt_buckets(&self, key: i64, period: i64, states: Vec<(i64, Vec<u8>)>) -> StoreResult<bool> {
        let mut conn = self.read.lock().map_err(|_| StoreError::Closed)?;
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let n = tx.execute(
            "INSERT OR IGNORE INTO periods (collection, seconds) VALUES (?1, ?2)",
            rusqlite::params![key, period],
        )?;
        if n == 0 {
            return Ok(false);
        }
        for (bucket, state) in states {
            tx.execute(
                "INSERT INTO bucket_states (collection, bucket, state) VALUES (?1, ?2, ?3)",
                rusqlite::params![key, bucket, state],
            )?;
        }
        tx.commit()?;
        Ok(true)
    }

    fn for_each_stored(&self, key: i64, f: &mut dyn FnMut(StoredReport<'_>) -> ControlFlow<()>) -> StoreResult<()> {
        self.scan(key, ALL_COLUMNS, f)
    }

    fn for_each_report(&self, key: i64, f: &mut dyn FnMut(&[u8])) -> StoreResult<()> {
        self.scan(key, BODY_ONLY, &mut |r| {
            f(r.body);
            ControlFlow::Continue(())
        })
    }

    fn count_reports(&self, key: i64) -> StoreResult<u64> {
        let conn = self.analytics.lock().map_err(|_| StoreError::Closed)?;
        let n: i64 = conn.query_row("SELECT COUNT(*) FROM reports WHERE collection = ?1", [key], |r| r.get(0))?;
        Ok(n as u64)
    }

    fn day_counts(&self, key: i64) -> StoreResult<Vec<(Option<i32>, u64)>> {
        let conn = self.analytics.lock().map_err(|_| StoreError::Closed)?;
        let mut stmt =
            conn.prepare_cached("SELECT day, COUNT(*) FROM reports WHERE collection = ?1 GROUP BY day ORDER BY day")?;
        let rows =
            stmt.query_map([key], |r| Ok((r.get::<_, Option<i64>>(0)?.map(|d| d as i32), r.get::<_, i64>(1)? as u64)))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The writer is running and the read connection answers; a read connection busy with
    /// another request answers for itself (readiness never queues behind a query).
    fn ping(&self) -> StoreResult<()> {
        self.sender()?;
        let conn = match self.read.try_lock() {
            Ok(conn) => conn,
            Err(std::sync::TryLockError::WouldBlock) => return Ok(()),
            Err(std::sync::TryLockError::Poisoned(_)) => return Err(StoreError::Closed),
        };
        conn.query_row("SELECT 1", [], |r| r.get::<_, i64>(0))?;
        Ok(())
    }

    fn supports_training(&self) -> bool {
        true
    }

    fn insert_gradient(
        &self,
        key: i64,
        device_id: &str,
        round: u64,
        seq: u64,
        body: &[u8],
        advance: Option<(u64, &[f64])>,
    ) -> StoreResult<bool> {
        let mut conn = self.read.lock().map_err(|_| StoreError::Closed)?;
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let n = tx.execute(
            "INSERT OR IGNORE INTO gradients (collection, device_id, round, seq, body) VALUES (?1, ?2, ?3, ?4, ?5)",
            rusqlite::params![key, device_id, round as i64, seq as i64, body],
        )?;
        if n == 0 {
            return Ok(false);
        }
        if let Some((next, w)) = advance {
            tx.execute(
                "INSERT INTO models (collection, round, params) VALUES (?1, ?2, ?3)
                 ON CONFLICT (collection) DO UPDATE SET round = excluded.round, params = excluded.params",
                rusqlite::params![key, next as i64, params_to_blob(w)],
            )?;
        }
        tx.commit()?;
        Ok(true)
    }

    fn has_gradient(&self, key: i64, device_id: &str) -> StoreResult<bool> {
        let conn = self.read.lock().map_err(|_| StoreError::Closed)?;
        let n: i64 = conn.query_row(
            "SELECT COUNT(*) FROM gradients WHERE collection = ?1 AND device_id = ?2",
            rusqlite::params![key, device_id],
            |r| r.get(0),
        )?;
        Ok(n > 0)
    }

    fn model(&self, key: i64) -> StoreResult<Option<(u64, Vec<f64>)>> {
        let conn = self.read.lock().map_err(|_| StoreError::Closed)?;
        let mut stmt = conn.prepare("SELECT round, params FROM models WHERE collection = ?1")?;
        let mut rows = stmt.query([key])?;
        match rows.next()? {
            Some(r) => {
                let round: i64 = r.get(0)?;
                let blob: Vec<u8> = r.get(1)?;
                Ok(Some((round as u64, blob_to_params(&blob))))
            }
            None => Ok(None),
        }
    }

    fn for_each_gradient(&self, key: i64, round: u64, f: &mut dyn FnMut(&[u8])) -> StoreResult<()> {
        let conn = self.read.lock().map_err(|_| StoreError::Closed)?;
        let mut stmt = conn.prepare("SELECT body FROM gradients WHERE collection = ?1 AND round = ?2 ORDER BY seq")?;
        let mut rows = stmt.query(rusqlite::params![key, round as i64])?;
        while let Some(row) = rows.next()? {
            let body = row.get_ref(0)?.as_blob().map_err(|e| StoreError::Db(e.to_string()))?;
            f(body);
        }
        Ok(())
    }

    fn insert_query(&self, key: i64, round: u64, query: &str, filled: u64) -> StoreResult<()> {
        let mut conn = self.read.lock().map_err(|_| StoreError::Closed)?;
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let stored: i64 = tx
            .query_row("SELECT round FROM models WHERE collection = ?1", [key], |r| r.get(0))
            .or_else(|e| if e == rusqlite::Error::QueryReturnedNoRows { Ok(1) } else { Err(e) })?;
        let count: i64 = tx.query_row(
            "SELECT COUNT(*) FROM gradients WHERE collection = ?1 AND round = ?2",
            rusqlite::params![key, stored],
            |r| r.get(0),
        )?;
        if stored as u64 + 1 != round || count as u64 != filled {
            return Err(StoreError::RoundMoved(format!(
                "stored round {stored} with {count} answers, expected round {} with {filled}",
                round - 1
            )));
        }
        tx.execute(
            "INSERT INTO queries (collection, round, query) VALUES (?1, ?2, ?3)",
            rusqlite::params![key, round as i64, query],
        )?;
        tx.execute(
            "INSERT INTO models (collection, round, params) VALUES (?1, ?2, ?3)
             ON CONFLICT (collection) DO UPDATE SET round = excluded.round, params = excluded.params",
            rusqlite::params![key, round as i64, Vec::<u8>::new()],
        )?;
        tx.commit()?;
        Ok(())
    }

    fn queries(&self, key: i64) -> StoreResult<Vec<(u64, String)>> {
        let conn = self.read.lock().map_err(|_| StoreError::Closed)?;
        let mut stmt = conn.prepare("SELECT round, query FROM queries WHERE collection = ?1 ORDER BY round")?;
        let rows = stmt.query_map([key], |r| Ok((r.get::<_, i64>(0)? as u64, r.get::<_, String>(1)?)))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idempotent_inserts_and_reopen() {
        let dir = std::env::temp_dir().join(format!("harmony-store-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.db");
        let _ = std::fs::remove_file(&path);
        {
            let s = SqliteStore::open(&path).unwrap();
            let k = s.create_collection("c1", "{}").unwrap();
            assert!(matches!(s.create_collection("c1", "{}"), Err(StoreError::Exists(_))));
            let f = s.insert_reports(k, vec![("a".into(), vec![1]), ("b".into(), vec![2])]).unwrap();
            assert_eq!(f, vec![true, true]);
            // The same id with other bytes: a conflict, and nothing of that batch stored.
            let e = s.insert_reports(k, vec![("c".into(), vec![3]), ("b".into(), vec![9])]).unwrap_err();
            assert!(matches!(&e, StoreError::Conflict { index: 1, id } if id == "b"), "{e}");
            let f = s.insert_reports(k, vec![("b".into(), vec![2]), ("c".into(), vec![3])]).unwrap();
            assert_eq!(f, vec![false, true]);
        }
        let s = SqliteStore::open(&path).unwrap();
        let c = s.collections().unwrap();
        assert_eq!(c.len(), 1);
        let mut bodies = Vec::new();
        s.for_each_report(c[0].key, &mut |b| bodies.push(b.to_vec())).unwrap();
        bodies.sort();
        assert_eq!(bodies, vec![vec![1], vec![2], vec![3]]);
        assert_eq!(s.count_reports(c[0].key).unwrap(), 3);
        assert_eq!(s.day_counts(c[0].key).unwrap(), vec![(Some(utc_day_now()), 3)]);
        drop(s);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A database created before the `day` column: it opens (the column is added), its old
    /// reports read back with no day, new ones with today's.
    #[test]
    fn old_database_gains_the_day_column() {
        let dir = std::env::temp_dir().join(format!("harmony-store-old-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("old.db");
        let _ = std::fs::remove_file(&path);
        {
            let old = rusqlite::Connection::open(&path).unwrap();
            old.execute_batch(
                "CREATE TABLE collections (key INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, config TEXT NOT NULL);
                 CREATE TABLE reports (collection INTEGER NOT NULL, report_id TEXT NOT NULL, body BLOB NOT NULL,
                     PRIMARY KEY (collection, report_id)) WITHOUT ROWID;
                 INSERT INTO collections (key, id, config) VALUES (1, 'c', '{}');
                 INSERT INTO reports VALUES (1, 'old', x'01');",
            )
            .unwrap();
        }
        let s = SqliteStore::open(&path).unwrap();
        assert_eq!(s.insert_reports(1, vec![("new".into(), vec![2])]).unwrap(), vec![true]);
        let mut rows = Vec::new();
        s.for_each_stored(1, &mut |r| {
            rows.push((r.id.to_string(), r.day, r.body.to_vec()));
            ControlFlow::Continue(())
        })
        .unwrap();
        rows.sort();
        assert_eq!(rows, vec![("new".into(), Some(utc_day_now()), vec![2]), ("old".into(), None, vec![1])]);
        drop(s);
        // Opening again does not add the column twice.
        drop(SqliteStore::open(&path).unwrap());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
