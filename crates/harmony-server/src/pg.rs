//! PostgreSQL storage (selected by a `postgres://` URL, for scale-out): the same [`Store`]
//! contract as SQLite. Each of two writer connections group-commits the batches queued while it
//! waits in one transaction (each batch a binary `COPY` in its own savepoint (`pg_copy.rs`); a batch with an id
//! already stored one `INSERT … SELECT FROM UNNEST … ON CONFLICT DO NOTHING RETURNING`); reads
//! use a second connection. Commits are durable with PostgreSQL's default
//! `synchronous_commit = on`.
//!
//! Model rounds: one transaction per gradient on the read connection. It locks the collection's
//! row (`SELECT … FOR UPDATE`, so gradients of one collection are serialized across servers
//! sharing the database), inserts the gradient keyed `(collection, device_id)` with `ON CONFLICT
//! DO NOTHING` (a repeated device writes nothing), checks that the stored round and its gradient
//! count are the ones the server computed with (else [`StoreError::RoundMoved`], nothing written),
//! and, when the batch is full, upserts the new model (exact f64 bytes) before committing.
//!
//! Recovery: each connection is a [`Conn`] that reconnects after the database went away (a
//! restart, a failover): a connection that failed an operation is dropped, and the next use
//! reconnects, at most once per backoff interval (100 ms doubling to 5 s, reset by a success).
//! While it is down an operation fails at once with [`StoreError::Unavailable`] (nothing
//! attempted; the server answers 503 with `Retry-After`). An error during an operation is
//! [`StoreError::Db`]: its commit outcome is unknown, and the server rebuilds that collection's
//! accumulator from the store before using it again ([`crate::state`]). The writer thread also
//! retries on its own while down, so `/readyz` turns 200 again without traffic.

use crate::store::{
    BucketDelta, SharedState, Store, StoreError, StoreResult, StoredCollection, StoredReport, StoredToken,
    blob_to_params, params_to_blob, unix_now, utc_day,
};
use crate::tls::PgTls;
use std::collections::HashSet;
use std::ops::ControlFlow;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, sync_channel};
use std::sync::{Arc, Mutex, TryLockError};
use std::time::{Duration, Instant};

impl From<postgres::Error> for StoreError {
    /// The server's message and SQLSTATE (`FATAL: terminating connection due to administrator
    /// command (57P01)`), or the cause (`error connecting to server: Connection refused`).
    fn from(e: postgres::Error) -> Self {
        StoreError::Db(describe(&e))
    }
}

pub(crate) fn describe(e: &postgres::Error) -> String {
    match (e.as_db_error(), std::error::Error::source(e)) {
        (Some(d), _) => format!("{}: {} ({})", d.severity(), d.message(), d.code().code()),
        (None, Some(cause)) => format!("{e}: {cause}"),
        (None, None) => e.to_string(),
    }
}

/// The tables, created in one transaction under a transaction-scoped advisory lock: servers that
/// start together on a fresh database (replicas) create them one after the other. Without the
/// lock, concurrent `CREATE TABLE IF NOT EXISTS` of one table fails in all but one session on
/// the catalog's unique index (`pg_type_typname_nsp_index`). The key is an arbitrary constant
/// that only this schema's creation takes.
const SCHEMA: &str = "
BEGIN;
SELECT pg_advisory_xact_lock(7215963425010000001);
CREATE TABLE IF NOT EXISTS harmony_collections (
    key BIGSERIAL PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    config TEXT NOT NULL,
    meta TEXT
);
CREATE TABLE IF NOT EXISTS harmony_reports (
    collection BIGINT NOT NULL,
    report_id TEXT NOT NULL,
    body BYTEA NOT NULL,
    PRIMARY KEY (collection, report_id)
);
-- The UTC day (days since 1970-01-01) a report's batch was received; NULL on rows stored before
-- the column existed (a database created by an older server gains it here). Checked first: ALTER
-- TABLE takes an exclusive lock even when the column exists, which would wait for (and then
-- block) other servers' reads and writes of a shared database.
DO $$ BEGIN
    IF NOT EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema()
                   AND table_name = 'harmony_reports' AND column_name = 'day') THEN
        ALTER TABLE harmony_reports ADD COLUMN IF NOT EXISTS day INTEGER;
    END IF;
END $$;
-- A collection's name, description and creation time (JSON); NULL for one stored before.
DO $$ BEGIN
    IF NOT EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema()
                   AND table_name = 'harmony_collections' AND column_name = 'meta') THEN
        ALTER TABLE harmony_collections ADD COLUMN IF NOT EXISTS meta TEXT;
    END IF;
END $$;
CREATE TABLE IF NOT EXISTS harmony_gradients (
    collection BIGINT NOT NULL,
    device_id TEXT NOT NULL,
    round BIGINT NOT NULL,
    seq BIGINT NOT NULL,
    body BYTEA NOT NULL,
    PRIMARY KEY (collection, device_id)
);
CREATE INDEX IF NOT EXISTS harmony_gradients_round ON harmony_gradients (collection, round, seq);
CREATE TABLE IF NOT EXISTS harmony_models (
    collection BIGINT PRIMARY KEY,
    round BIGINT NOT NULL,
    params BYTEA NOT NULL
);
CREATE TABLE IF NOT EXISTS harmony_queries (
    collection BIGINT NOT NULL,
    round BIGINT NOT NULL,
    query TEXT NOT NULL,
    PRIMARY KEY (collection, round)
);
-- Continuous collection: each collection's bucket period (seconds) and the saved accumulator
-- state of each committed batch's new reports, tagged with its bucket (crate::buckets).
CREATE TABLE IF NOT EXISTS harmony_periods (
    collection BIGINT PRIMARY KEY,
    seconds BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS harmony_bucket_states (
    seq BIGSERIAL PRIMARY KEY,
    collection BIGINT NOT NULL,
    bucket BIGINT NOT NULL,
    state BYTEA NOT NULL
);
CREATE INDEX IF NOT EXISTS harmony_bucket_states_collection ON harmony_bucket_states (collection, bucket);
-- Replicas (crate::replicas): the server that wrote a state and the transaction that did, so
-- each server merges the states the others committed since it last looked.
ALTER TABLE harmony_bucket_states ADD COLUMN IF NOT EXISTS origin BIGINT NOT NULL DEFAULT 0;
ALTER TABLE harmony_bucket_states ADD COLUMN IF NOT EXISTS xid xid8 NOT NULL DEFAULT pg_current_xact_id();
CREATE INDEX IF NOT EXISTS harmony_bucket_states_xid ON harmony_bucket_states (collection, xid);
CREATE TABLE IF NOT EXISTS harmony_tokens (
    token_id TEXT PRIMARY KEY,
    collection TEXT NOT NULL,
    hash BYTEA NOT NULL UNIQUE,
    label TEXT NOT NULL,
    created BIGINT NOT NULL,
    revoked BOOLEAN NOT NULL DEFAULT FALSE
);
COMMIT;
";

const INSERT: &str = "INSERT INTO harmony_reports (collection, report_id, body, day)
    SELECT $1, r, b, $4 FROM UNNEST($2::text[], $3::bytea[]) AS t(r, b)
    ON CONFLICT DO NOTHING RETURNING report_id";

/// First wait before a reconnect attempt after a failure; doubled per failed attempt.
const BACKOFF_MIN: Duration = Duration::from_millis(100);
/// Longest wait between reconnect attempts.
const BACKOFF_MAX: Duration = Duration::from_secs(5);

/// A connection that reconnects with capped exponential backoff (see the module docs).
struct Conn {
    config: postgres::Config,
    /// The verifying TLS connector (`sslmode=prefer|require`), else plain.
    tls: Option<PgTls>,
    client: Option<postgres::Client>,
    backoff: Duration,
    next_try: Instant,
    last_error: String,
}

impl Conn {
    /// Connects now (the server refuses to start on a database it cannot reach).
    fn open(config: &postgres::Config, tls: &Option<PgTls>) -> StoreResult<Self> {
        let client = connect(config, tls)?;
        Ok(Conn {
            config: config.clone(),
            tls: tls.clone(),
            client: Some(client),
            backoff: BACKOFF_MIN,
            next_try: Instant::now(),
            last_error: String::new(),
        })
    }

    fn connected(&self) -> bool {
        self.client.as_ref().is_some_and(|c| !c.is_closed())
    }

    /// The client, reconnecting if the backoff allows; [`StoreError::Unavailable`] otherwise.
    fn get(&mut self) -> StoreResult<&mut postgres::Client> {
        if !self.connected() {
            self.discard();
            let now = Instant::now();
            if now < self.next_try {
                let wait = (self.next_try - now).as_millis();
                let msg = format!("PostgreSQL is unreachable ({}); next reconnect in {wait} ms", self.last_error);
                return Err(StoreError::Unavailable(msg));
            }
            match connect(&self.config, &self.tls) {
                Ok(c) => {
                    tracing::info!("reconnected to PostgreSQL");
                    self.client = Some(c);
                    self.backoff = BACKOFF_MIN;
                }
                Err(e) => {
                    self.last_error = describe(&e);
                    self.next_try = now + self.backoff;
                    let wait = self.backoff.as_millis();
                    self.backoff = (self.backoff * 2).min(BACKOFF_MAX);
                    let msg = format!("PostgreSQL is unreachable ({}); next reconnect in {wait} ms", self.last_error);
                    return Err(StoreError::Unavailable(msg));
                }
            }
        }
        self.client.as_mut().ok_or(StoreError::Closed)
    }

    /// Drops the client (on a plain thread: the blocking client cannot be dropped inside a
    /// tokio runtime); the next [`Conn::get`] reconnects.
    fn discard(&mut self) {
        if let Some(c) = self.client.take() {
            let _ = std::thread::spawn(move || drop(c)).join();
        }
    }

    /// Runs `f` on the connection; after a database error the connection is dropped (it may be
    /// closed or in an unknown state) and the next use reconnects.
    fn run<T>(&mut self, f: impl FnOnce(&mut postgres::Client) -> StoreResult<T>) -> StoreResult<T> {
        let r = f(self.get()?);
        if let Err(StoreError::Db(e)) = &r {
            tracing::warn!(error = %e, "PostgreSQL operation failed; reconnecting");
            self.last_error = e.clone();
            self.discard();
        }
        r
    }

    /// How long until the next reconnect attempt.
    fn wait(&self) -> Duration {
        self.next_try.saturating_duration_since(Instant::now()).max(Duration::from_millis(10))
    }
}

/// One connection, over TLS if `tls` is set.
fn connect(config: &postgres::Config, tls: &Option<PgTls>) -> Result<postgres::Client, postgres::Error> {
    match tls {
        Some(t) => config.connect(t.clone()),
        None => config.connect(postgres::NoTls),
    }
}

/// `url` without its `name=` query parameter, and that parameter's value (percent-decoding is
/// not needed for the parameters read here: `sslrootcert` paths and `sslmode` words).
fn take_param(url: &str, name: &str) -> (String, Option<String>) {
    let Some((base, query)) = url.split_once('?') else { return (url.to_string(), None) };
    let mut value = None;
    let kept: Vec<&str> = query
        .split('&')
        .filter(|kv| match kv.split_once('=') {
            Some((k, v)) if k == name => {
                value = Some(v.to_string());
                false
            }
            _ => true,
        })
        .collect();
    let url = if kept.is_empty() { base.to_string() } else { format!("{base}?{}", kept.join("&")) };
    (url, value)
}

/// The TLS of a URL: none unless `sslmode` is `prefer` or `require` (no `sslmode`: plain, as
/// before TLS was supported); then every certificate is verified against the system's roots,
/// `ca` and the URL's `sslrootcert`, and must name the URL's host. Returns the URL without
/// `sslrootcert` (which tokio-postgres does not know).
fn tls_of(url: &str, ca: Option<&Path>) -> StoreResult<(String, Option<PgTls>)> {
    let (url, rootcert) = take_param(url, "sslrootcert");
    let mode = take_param(&url, "sslmode").1;
    if !matches!(mode.as_deref(), Some("prefer" | "require")) {
        return Ok((url, None));
    }
    let rootcert = rootcert.map(std::path::PathBuf::from);
    let extra: Vec<&Path> = ca.into_iter().chain(rootcert.as_deref()).collect();
    let tls = crate::tls::pg_roots(&extra).and_then(PgTls::new).map_err(|m| StoreError::Db(format!("TLS: {m}")))?;
    Ok((url, Some(tls)))
}

struct Job {
    key: i64,
    /// The UTC day the batch was received.
    day: i32,
    reports: crate::store::Reports,
    /// The state of its new reports, stored with them.
    delta: Mutex<Option<BucketDelta>>,
    reply: SyncSender<StoreResult<Vec<bool>>>,
}

/// PostgreSQL storage (see the module docs).
pub struct PgStore {
    jobs: Mutex<Option<SyncSender<Job>>>,
    /// Reads, collections and model rounds.
    read: Mutex<Conn>,
    /// Scans and counts over a collection's reports (days, replay, export): a slow one never
    /// queues readiness, tokens or gradient commits behind it.
    analytics: Mutex<Conn>,
    /// Whether each writer thread's connection is up (for `/readyz`).
    writers_up: Vec<Arc<AtomicBool>>,
    writers: Mutex<Vec<std::thread::JoinHandle<()>>>,
    /// This server's mark on the bucket states it writes (random per open, never 0).
    origin: i64,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PgStore")
    }
}

/// Locks a collection's row until the transaction ends: the rounds (model or query) of one
/// collection are serialized across connections and servers sharing the database.
fn lock_collection(tx: &mut postgres::Transaction<'_>, key: i64) -> StoreResult<()> {
    match tx.query_opt("SELECT key FROM harmony_collections WHERE key = $1 FOR UPDATE", &[&key])? {
        Some(_) => Ok(()),
        None => Err(StoreError::Db(format!("no collection with key {key}"))),
    }
}

/// The stored round of a model or query-rounds collection (1 before any is stored).
fn stored_round(tx: &mut postgres::Transaction<'_>, key: i64) -> StoreResult<i64> {
    let row = tx.query_opt("SELECT round FROM harmony_models WHERE collection = $1", &[&key])?;
    Ok(row.map_or(1, |r| r.get(0)))
}

/// The gradients (answers, for query rounds) stored in one round of a collection.
fn count_in_round(tx: &mut postgres::Transaction<'_>, key: i64, round: i64) -> StoreResult<i64> {
    let sql = "SELECT COUNT(*) FROM harmony_gradients WHERE collection = $1 AND round = $2";
    Ok(tx.query_one(sql, &[&key, &round])?.get(0))
}

/// Stores a collection's round and its state (the model's parameters; empty for query rounds).
fn set_round(tx: &mut postgres::Transaction<'_>, key: i64, round: i64, params: &[u8]) -> StoreResult<()> {
    tx.execute(
        "INSERT INTO harmony_models (collection, round, params) VALUES ($1, $2, $3)
         ON CONFLICT (collection) DO UPDATE SET round = EXCLUDED.round, params = EXCLUDED.params",
        &[&key, &round, &params],
    )?;
    Ok(())
}

/// Commits a group of batches in one transaction; each batch in its own savepoint, rolled back
/// alone when one of its ids is already stored with other bytes. A batch is copied in bulk
/// ([`crate::pg_copy`]); only a batch with an id already stored takes the per-row insert.
fn commit_group(conn: &mut postgres::Client, group: &[Job], origin: i64) -> StoreResult<Vec<StoreResult<Vec<bool>>>> {
    let mut tx = conn.transaction()?;
    let stmt = tx.prepare(INSERT)?;
    let copy = tx.prepare(crate::pg_copy::COPY)?;
    let mut data = Vec::new();
    let mut out = Vec::with_capacity(group.len());
    for job in group {
        let mut sp = tx.transaction()?;
        crate::pg_copy::encode(&mut data, job.key, job.day, &job.reports)?;
        let flags = if crate::pg_copy::copy_batch(&mut sp, &copy, &data)? {
            vec![true; job.reports.len()]
        } else {
            sp.rollback()?;
            sp = tx.transaction()?;
            insert_rows(&mut sp, &stmt, job)?
        };
        match conflict(&mut sp, job, &flags)? {
            Some(c) => {
                sp.rollback()?;
                out.push(Err(c));
            }
            None => {
                let delta = job.delta.lock().map_err(|_| StoreError::Closed)?.take();
                if let Some(d) = delta {
                    let bucket = d.bucket;
                    if let Some(state) = d.resolve(&flags)? {
                        let sql = "INSERT INTO harmony_bucket_states (collection, bucket, state, origin) VALUES ($1, $2, $3, $4)";
                        sp.execute(sql, &[&job.key, &bucket, &state, &origin])?;
                    }
                }
                sp.commit()?;
                out.push(Ok(flags));
            }
        }
    }
    tx.commit()?;
    Ok(out)
}

/// Inserts a batch's reports row by row, skipping ids already stored: whether each was new.
fn insert_rows(sp: &mut postgres::Transaction<'_>, stmt: &postgres::Statement, job: &Job) -> StoreResult<Vec<bool>> {
    let ids: Vec<&str> = job.reports.iter().map(|(r, _)| r.as_str()).collect();
    let bodies: Vec<&[u8]> = job.reports.iter().map(|(_, b)| b.as_slice()).collect();
    let rows = sp.query(stmt, &[&job.key, &ids, &bodies, &job.day])?;
    let new: HashSet<String> = rows.iter().map(|r| r.get::<_, String>(0)).collect();
    Ok(job.reports.iter().map(|(r, _)| new.contains(r)).collect())
}

/// The first repeated id of a batch whose stored bytes differ.
fn conflict(tx: &mut postgres::Transaction<'_>, job: &Job, flags: &[bool]) -> StoreResult<Option<StoreError>> {
    let repeated: Vec<&str> =
        job.reports.iter().zip(flags).filter(|(_, new)| !**new).map(|((r, _), _)| r.as_str()).collect();
    if repeated.is_empty() {
        return Ok(None);
    }
    let rows = tx.query(
        "SELECT report_id, body FROM harmony_reports WHERE collection = $1 AND report_id = ANY($2)",
        &[&job.key, &repeated],
    )?;
    let stored: std::collections::HashMap<String, Vec<u8>> =
        rows.iter().map(|r| (r.get::<_, String>(0), r.get::<_, Vec<u8>>(1))).collect();
    for (index, ((rid, body), new)) in job.reports.iter().zip(flags).enumerate() {
        if !new && stored.get(rid).is_some_and(|b| b != body) {
            return Ok(Some(StoreError::Conflict { index, id: rid.clone() }));
        }
    }
    Ok(None)
}

/// Writer connections, each group-committing the batches queued while it waits: one
/// connection's backend copies while another's commit waits for its WAL flush, and the copies of
/// two groups use both of PostgreSQL's cores. Two batches with a common id in two writers wait on
/// each other's rows (the second is then a duplicate or a conflict, as in one writer).
const WRITERS: usize = 2;

/// The first job and those queued behind it, up to [`crate::store::GROUP_LIMIT`] reports.
fn gather(jobs: &Receiver<Job>, first: Job) -> Vec<Job> {
    crate::store::gather(jobs, first, |j| j.reports.len())
}

/// Takes the next group of jobs, holding the queue while it waits for the first. While the
/// connection is down it reconnects every backoff interval even without jobs, and takes jobs
/// (to refuse them at once) only when no other writer is waiting for them. `None` when the
/// store is dropped.
fn next_group(conn: &mut Conn, jobs: &Mutex<Receiver<Job>>, up: &AtomicBool) -> Option<Vec<Job>> {
    loop {
        if conn.connected() {
            let queue = jobs.lock().ok()?;
            let first = queue.recv().ok()?;
            return Some(gather(&queue, first));
        }
        match jobs.try_lock() {
            Ok(queue) => match queue.recv_timeout(conn.wait()) {
                Ok(first) => return Some(gather(&queue, first)),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return None,
            },
            Err(TryLockError::WouldBlock) => std::thread::sleep(conn.wait()),
            Err(TryLockError::Poisoned(_)) => return None,
        }
        let _ = conn.get();
        up.store(conn.connected(), Ordering::Relaxed);
    }
}

fn writer_loop(mut conn: Conn, jobs: Arc<Mutex<Receiver<Job>>>, up: Arc<AtomicBool>, origin: i64) {
    while let Some(group) = next_group(&mut conn, &jobs, &up) {
        let result = conn.run(|c| commit_group(c, &group, origin));
        up.store(conn.connected(), Ordering::Relaxed);
        match result {
            Ok(results) => {
                for (job, r) in group.into_iter().zip(results) {
                    let _ = job.reply.send(r);
                }
            }
            Err(e) => {
                let unavailable = matches!(e, StoreError::Unavailable(_));
                let msg = e.to_string();
                for job in group {
                    let e =
                        if unavailable { StoreError::Unavailable(msg.clone()) } else { StoreError::Db(msg.clone()) };
                    let _ = job.reply.send(Err(e));
                }
            }
        }
    }
}

impl PgStore {
    /// Connects to `url` (`postgres://user:password@host:port/db` or key=value form) and
    /// creates the tables if needed.
    /// A connect attempt gives up after 2 s unless the URL sets `connect_timeout`.
    pub fn open(url: &str) -> StoreResult<Self> {
        Self::open_with(url, None)
    }

    /// [`PgStore::open`] trusting the extra CA certificates of `ca` (PEM) for `sslmode=prefer`
    /// or `require` (see docs/SERVER.md, "TLS").
    pub fn open_with(url: &str, ca: Option<&Path>) -> StoreResult<Self> {
        let (url, tls) = tls_of(url, ca)?;
        let mut config: postgres::Config = url.parse()?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(Duration::from_secs(2));
        }
        let mut write = Conn::open(&config, &tls)?;
        write.run(|c| Ok(c.batch_execute(SCHEMA)?))?;
        let mut writes = vec![write];
        for _ in 1..WRITERS {
            writes.push(Conn::open(&config, &tls)?);
        }
        let read = Conn::open(&config, &tls)?;
        let analytics = Conn::open(&config, &tls)?;
        let (tx, rx) = sync_channel::<Job>(1024);
        let rx = Arc::new(Mutex::new(rx));
        let origin = (rand::Rng::next_u64(&mut harmony_core::sampling::secure_rng()) >> 1).max(1) as i64;
        let (mut writers_up, mut writers) = (Vec::new(), Vec::new());
        for (i, write) in writes.into_iter().enumerate() {
            let (up, jobs) = (Arc::new(AtomicBool::new(true)), rx.clone());
            writers_up.push(up.clone());
            let handle = std::thread::Builder::new()
                .name(format!("harmony-pg-writer-{i}"))
                .spawn(move || writer_loop(write, jobs, up, origin))
                .map_err(|e| StoreError::Db(e.to_string()))?;
            writers.push(handle);
        }
        Ok(PgStore {
            jobs: Mutex::new(Some(tx)),
            read: Mutex::new(read),
            analytics: Mutex::new(analytics),
            writers_up,
            writers: Mutex::new(writers),
            origin,
        })
    }

    /// The one read path of reports (`columns`: id, day and body, or placeholders for the first
    /// two), streamed.
    fn scan(&self, key: i64, columns: &str, f: &mut dyn FnMut(StoredReport<'_>) -> ControlFlow<()>) -> StoreResult<()> {
        use postgres::fallible_iterator::FallibleIterator;
        self.analytics(|c| {
            let params: [&(dyn postgres::types::ToSql + Sync); 1] = [&key];
            let sql = format!("SELECT {columns} FROM harmony_reports WHERE collection = $1");
            let mut rows = c.query_raw(sql.as_str(), params)?;
            while let Some(row) = rows.next()? {
                let r = StoredReport { id: row.get(0), day: row.get(1), body: row.get(2) };
                if f(r).is_break() {
                    break;
                }
            }
            Ok(())
        })
    }

    /// Runs `f` on the read connection ([`Conn::run`]).
    fn read<T>(&self, f: impl FnOnce(&mut postgres::Client) -> StoreResult<T>) -> StoreResult<T> {
        self.read.lock().map_err(|_| StoreError::Closed)?.run(f)
    }

    /// [`PgStore::read`] on the analytics connection.
    fn analytics<T>(&self, f: impl FnOnce(&mut postgres::Client) -> StoreResult<T>) -> StoreResult<T> {
        self.analytics.lock().map_err(|_| StoreError::Closed)?.run(f)
    }
}

impl Drop for PgStore {
    fn drop(&mut self) {
        if let Ok(mut j) = self.jobs.lock() {
            j.take();
        }
        if let Ok(mut w) = self.writers.lock() {
            for h in w.drain(..) {
                let _ = h.join();
            }
        }
        for conn in [&self.read, &self.analytics] {
            if let Ok(mut r) = conn.lock() {
                r.discard();
            }
        }
    }
}

impl Store for PgStore {
    fn create_collection(&self, id: &str, config: &str) -> StoreResult<i64> {
        self.create_collection_meta(id, config, "{}")
    }

    fn create_collection_meta(&self, id: &str, config: &str, meta: &str) -> StoreResult<i64> {
        self.read(|c| {
            let rows = c.query(
                "INSERT INTO harmony_collections (id, config, meta) VALUES ($1, $2, $3) ON CONFLICT (id) DO NOTHING \
                 RETURNING key",
                &[&id, &config, &meta],
            )?;
            match rows.first() {
                Some(r) => Ok(r.get(0)),
                None => Err(StoreError::Exists(id.to_string())),
            }
        })
    }

    fn insert_token(&self, t: &StoredToken) -> StoreResult<()> {
        self.read(|c| {
            c.execute(
                "INSERT INTO harmony_tokens (token_id, collection, hash, label, created, revoked) VALUES ($1, $2, $3, $4, $5, $6)",
                &[&t.token_id, &t.collection, &t.hash, &t.label, &(t.created as i64), &t.revoked],
            )?;
            Ok(())
        })
    }

    fn insert_tokens(&self, tokens: &[StoredToken]) -> StoreResult<()> {
        self.read(|c| {
            let mut tx = c.transaction()?;
            let stmt = tx.prepare(
                "INSERT INTO harmony_tokens (token_id, collection, hash, label, created, revoked) VALUES ($1, $2, $3, $4, $5, $6)",
            )?;
            for t in tokens {
                tx.execute(&stmt, &[&t.token_id, &t.collection, &t.hash, &t.label, &(t.created as i64), &t.revoked])?;
            }
            tx.commit()?;
            Ok(())
        })
    }

    fn revoke_token(&self, token_id: &str) -> StoreResult<bool> {
        self.read(|c| Ok(c.execute("UPDATE harmony_tokens SET revoked = TRUE WHERE token_id = $1", &[&token_id])? > 0))
    }

    fn tokens(&self) -> StoreResult<Vec<StoredToken>> {
        self.read(|c| {
            let rows =
                c.query("SELECT token_id, collection, hash, label, created, revoked FROM harmony_tokens", &[])?;
            Ok(rows
                .iter()
                .map(|r| StoredToken {
                    token_id: r.get(0),
                    collection: r.get(1),
                    hash: r.get(2),
                    label: r.get(3),
                    created: r.get::<_, i64>(4) as u64,
                    revoked: r.get(5),
                })
                .collect())
        })
    }

    fn collections(&self) -> StoreResult<Vec<StoredCollection>> {
        self.read(|c| {
            let rows = c.query("SELECT key, id, config, meta FROM harmony_collections ORDER BY key", &[])?;
            Ok(rows
                .iter()
                .map(|r| StoredCollection { key: r.get(0), id: r.get(1), config: r.get(2), meta: r.get(3) })
                .collect())
        })
    }

    fn insert_reports(&self, key: i64, reports: Vec<(String, Vec<u8>)>) -> StoreResult<Vec<bool>> {
        self.insert_reports_at(key, unix_now(), std::sync::Arc::new(reports), None)
    }

    fn insert_reports_at(
        &self,
        key: i64,
        received: i64,
        reports: crate::store::Reports,
        delta: Option<BucketDelta>,
    ) -> StoreResult<Vec<bool>> {
        let (reply, rx) = sync_channel(1);
        let tx = self.jobs.lock().map_err(|_| StoreError::Closed)?.clone().ok_or(StoreError::Closed)?;
        let job = Job { key, day: utc_day(received), reports, delta: Mutex::new(delta), reply };
        tx.send(job).map_err(|_| StoreError::Closed)?;
        rx.recv().map_err(|_| StoreError::Closed)?
    }

    fn supports_buckets(&self) -> bool {
        true
    }

    fn create_collection_with_period(&self, id: &str, config: &str, meta: &str, period: i64) -> StoreResult<i64> {
        self.read(|c| {
            let mut tx = c.transaction()?;
            let rows = tx.query(
                "INSERT INTO harmony_collections (id, config, meta) VALUES ($1, $2, $3) ON CONFLICT (id) DO NOTHING \
                 RETURNING key",
                &[&id, &config, &meta],
            )?;
            let Some(key) = rows.first().map(|r| r.get::<_, i64>(0)) else {
                return Err(StoreError::Exists(id.to_string()));
            };
            tx.execute("INSERT INTO harmony_periods (collection, seconds) VALUES ($1, $2)", &[&key, &period])?;
            tx.commit()?;
            Ok(key)
        })
    }

    fn period(&self, key: i64) -> StoreResult<Option<i64>> {
        self.read(|c| {
            let row = c.query_opt("SELECT seconds FROM harmony_periods WHERE collection = $1", &[&key])?;
            Ok(row.map(|r| r.get(0)))
        })
    }

    fn for_each_bucket_state(&self, key: i64, f: &mut dyn FnMut(i64, &[u8])) -> StoreResult<()> {
        use postgres::fallible_iterator::FallibleIterator;
        self.analytics(|c| {
            let params: [&(dyn postgres::types::ToSql + Sync); 1] = [&key];
            let sql = "SELECT bucket, state FROM harmony_bucket_states WHERE collection = $1";
            let mut rows = c.query_raw(sql, params)?;
            while let Some(row) = rows.next()? {
                f(row.get(0), row.get(1));
            }
            Ok(())
        })
    }

    fn shared(&self) -> bool {
        true
    }

    fn bucket_states_after(
        &self,
        key: i64,
        since: Option<i64>,
        f: &mut dyn FnMut(SharedState<'_>),
    ) -> StoreResult<i64> {
        use postgres::fallible_iterator::FallibleIterator;
        self.analytics(|c| {
            // One snapshot for the horizon and the rows: a state committed after it is either
            // numbered at or above the horizon or seen here.
            let mut tx = c.build_transaction().isolation_level(postgres::IsolationLevel::RepeatableRead).start()?;
            let horizon: i64 =
                tx.query_one("SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint", &[])?.get(0);
            let since = since.unwrap_or(0).to_string();
            let params: [&(dyn postgres::types::ToSql + Sync); 2] = [&key, &since];
            let sql = "SELECT seq, xid::text::bigint, origin, bucket, state FROM harmony_bucket_states \
                       WHERE collection = $1 AND xid >= $2::text::xid8";
            let mut rows = tx.query_raw(sql, params)?;
            while let Some(row) = rows.next()? {
                let own = row.get::<_, i64>(2) == self.origin;
                f(SharedState { seq: row.get(0), xid: row.get(1), own, bucket: row.get(3), state: row.get(4) });
            }
            drop(rows);
            tx.commit()?;
            Ok(horizon)
        })
    }

    fn adopt_buckets(&self, key: i64, period: i64, states: Vec<(i64, Vec<u8>)>) -> StoreResult<bool> {
        self.read(|c| {
            let mut tx = c.transaction()?;
            let n = tx.execute(
                "INSERT INTO harmony_periods (collection, seconds) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                &[&key, &period],
            )?;
            if n == 0 {
                return Ok(false);
            }
            for (bucket, state) in &states {
                tx.execute(
                    "INSERT INTO harmony_bucket_states (collection, bucket, state) VALUES ($1, $2, $3)",
                    &[&key, bucket, state],
                )?;
            }
            tx.commit()?;
            Ok(true)
        })
    }

    fn for_each_stored(&self, key: i64, f: &mut dyn FnMut(StoredReport<'_>) -> ControlFlow<()>) -> StoreResult<()> {
        self.scan(key, "report_id, day, body", f)
    }

    /// The replay reads no ids or days (they would double the bytes sent for small reports).
    fn for_each_report(&self, key: i64, f: &mut dyn FnMut(&[u8])) -> StoreResult<()> {
        self.scan(key, "''::text, NULL::integer, body", &mut |r| {
            f(r.body);
            ControlFlow::Continue(())
        })
    }

    fn count_reports(&self, key: i64) -> StoreResult<u64> {
        self.analytics(|c| {
            let n: i64 = c.query_one("SELECT COUNT(*) FROM harmony_reports WHERE collection = $1", &[&key])?.get(0);
            Ok(n as u64)
        })
    }

    fn day_counts(&self, key: i64) -> StoreResult<Vec<(Option<i32>, u64)>> {
        self.analytics(|c| {
            let rows = c.query(
                "SELECT day, COUNT(*) FROM harmony_reports WHERE collection = $1 GROUP BY day ORDER BY day",
                &[&key],
            )?;
            Ok(rows.iter().map(|r| (r.get::<_, Option<i32>>(0), r.get::<_, i64>(1) as u64)).collect())
        })
    }

    /// The read connection answers a trivial query (reconnecting if the backoff allows) and
    /// the writer's connection is up.
    fn ping(&self) -> StoreResult<()> {
        self.read(|c| Ok(c.is_valid(Duration::from_secs(2))?))?;
        if !self.writers_up.iter().all(|up| up.load(Ordering::Relaxed)) {
            return Err(StoreError::Unavailable("a writer's PostgreSQL connection is down; reconnecting".into()));
        }
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
        self.read(|c| {
            let (round, seq) = (round as i64, seq as i64);
            // Dropping `tx` without commit rolls back.
            let mut tx = c.transaction()?;
            lock_collection(&mut tx, key)?;
            let n = tx.execute(
                "INSERT INTO harmony_gradients (collection, device_id, round, seq, body) VALUES ($1, $2, $3, $4, $5)
                 ON CONFLICT (collection, device_id) DO NOTHING",
                &[&key, &device_id, &round, &seq, &body],
            )?;
            if n == 0 {
                return Ok(false);
            }
            let stored = stored_round(&mut tx, key)?;
            let count = count_in_round(&mut tx, key, round)?;
            if stored != round || count != seq + 1 {
                return Err(StoreError::RoundMoved(format!(
                    "stored round {stored} with {} gradients, expected round {round} with {seq}",
                    if stored == round { count - 1 } else { 0 }
                )));
            }
            if let Some((next, w)) = advance {
                set_round(&mut tx, key, next as i64, &params_to_blob(w))?;
            }
            tx.commit()?;
            Ok(true)
        })
    }

    fn has_gradient(&self, key: i64, device_id: &str) -> StoreResult<bool> {
        self.read(|c| {
            let row = c.query_opt(
                "SELECT 1 FROM harmony_gradients WHERE collection = $1 AND device_id = $2",
                &[&key, &device_id],
            )?;
            Ok(row.is_some())
        })
    }

    fn model(&self, key: i64) -> StoreResult<Option<(u64, Vec<f64>)>> {
        self.read(|c| {
            let row = c.query_opt("SELECT round, params FROM harmony_models WHERE collection = $1", &[&key])?;
            Ok(row.map(|r| (r.get::<_, i64>(0) as u64, blob_to_params(r.get::<_, &[u8]>(1)))))
        })
    }

    fn insert_query(&self, key: i64, round: u64, query: &str, filled: u64) -> StoreResult<()> {
        self.read(|c| {
            let mut tx = c.transaction()?;
            lock_collection(&mut tx, key)?;
            let stored = stored_round(&mut tx, key)?;
            let count = count_in_round(&mut tx, key, stored)?;
            if stored as u64 + 1 != round || count as u64 != filled {
                return Err(StoreError::RoundMoved(format!(
                    "stored round {stored} with {count} answers, expected round {} with {filled}",
                    round - 1
                )));
            }
            let round = round as i64;
            tx.execute(
                "INSERT INTO harmony_queries (collection, round, query) VALUES ($1, $2, $3)",
                &[&key, &round, &query],
            )?;
            set_round(&mut tx, key, round, &[])?;
            tx.commit()?;
            Ok(())
        })
    }

    fn queries(&self, key: i64) -> StoreResult<Vec<(u64, String)>> {
        self.read(|c| {
            let rows =
                c.query("SELECT round, query FROM harmony_queries WHERE collection = $1 ORDER BY round", &[&key])?;
            Ok(rows.iter().map(|r| (r.get::<_, i64>(0) as u64, r.get::<_, String>(1))).collect())
        })
    }

    fn for_each_gradient(&self, key: i64, round: u64, f: &mut dyn FnMut(&[u8])) -> StoreResult<()> {
        use postgres::fallible_iterator::FallibleIterator;
        self.read(|c| {
            let round = round as i64;
            let params: [&(dyn postgres::types::ToSql + Sync); 2] = [&key, &round];
            let mut rows = c.query_raw(
                "SELECT body FROM harmony_gradients WHERE collection = $1 AND round = $2 ORDER BY seq",
                params,
            )?;
            while let Some(row) = rows.next()? {
                f(row.get::<_, &[u8]>(0));
            }
            Ok(())
        })
    }
}

#[cfg(test)]
#[path = "pg_copy_tests.rs"]
mod copy_tests;
