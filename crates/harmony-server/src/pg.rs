//! PostgreSQL storage (selected by a `postgres://` URL, for scale-out): the same [`Store`]
//! contract as SQLite. One writer connection group-commits queued batches in one transaction
//! (one `INSERT … SELECT FROM UNNEST … ON CONFLICT DO NOTHING RETURNING` per batch); reads use a
//! second connection. Commits are durable with PostgreSQL's default `synchronous_commit = on`.
//!
//! Model rounds: one transaction per gradient on the read connection. It locks the collection's
//! row (`SELECT … FOR UPDATE`, so gradients of one collection are serialized across servers
//! sharing the database), inserts the gradient keyed `(collection, device_id)` with `ON CONFLICT
//! DO NOTHING` (a repeated device writes nothing), checks that the stored round and its gradient
//! count are the ones the server computed with (else [`StoreError::RoundMoved`], nothing written),
//! and, when the batch is full, upserts the new model (exact f64 bytes) before committing.

use crate::store::{Store, StoreError, StoreResult, StoredCollection, blob_to_params, params_to_blob};
use std::collections::HashSet;
use std::sync::Mutex;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};

impl From<postgres::Error> for StoreError {
    fn from(e: postgres::Error) -> Self {
        StoreError::Db(e.to_string())
    }
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS harmony_collections (
    key BIGSERIAL PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    config TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS harmony_reports (
    collection BIGINT NOT NULL,
    report_id TEXT NOT NULL,
    body BYTEA NOT NULL,
    PRIMARY KEY (collection, report_id)
);
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
";

const INSERT: &str = "INSERT INTO harmony_reports (collection, report_id, body)
    SELECT $1, r, b FROM UNNEST($2::text[], $3::bytea[]) AS t(r, b)
    ON CONFLICT DO NOTHING RETURNING report_id";

struct Job {
    key: i64,
    reports: Vec<(String, Vec<u8>)>,
    reply: SyncSender<StoreResult<Vec<bool>>>,
}

/// PostgreSQL storage (see the module docs).
pub struct PgStore {
    jobs: Mutex<Option<SyncSender<Job>>>,
    /// `Option` so that `Drop` can close it on a plain thread (the blocking client cannot be
    /// dropped inside a tokio runtime).
    read: Mutex<Option<postgres::Client>>,
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PgStore")
    }
}

/// Commits a group of batches in one transaction; each batch in its own savepoint, rolled back
/// alone when one of its ids is already stored with other bytes.
fn commit_group(conn: &mut postgres::Client, group: &[Job]) -> StoreResult<Vec<StoreResult<Vec<bool>>>> {
    let mut tx = conn.transaction()?;
    let stmt = tx.prepare(INSERT)?;
    let mut out = Vec::with_capacity(group.len());
    for job in group {
        let mut sp = tx.transaction()?;
        let ids: Vec<&str> = job.reports.iter().map(|(r, _)| r.as_str()).collect();
        let bodies: Vec<&[u8]> = job.reports.iter().map(|(_, b)| b.as_slice()).collect();
        let rows = sp.query(&stmt, &[&job.key, &ids, &bodies])?;
        let new: HashSet<String> = rows.iter().map(|r| r.get::<_, String>(0)).collect();
        let flags: Vec<bool> = job.reports.iter().map(|(r, _)| new.contains(r)).collect();
        match conflict(&mut sp, job, &flags)? {
            Some(c) => {
                sp.rollback()?;
                out.push(Err(c));
            }
            None => {
                sp.commit()?;
                out.push(Ok(flags));
            }
        }
    }
    tx.commit()?;
    Ok(out)
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

fn writer_loop(mut conn: postgres::Client, jobs: Receiver<Job>) {
    while let Ok(first) = jobs.recv() {
        let mut group = vec![first];
        let mut n = group[0].reports.len();
        while n < 200_000 {
            match jobs.try_recv() {
                Ok(j) => {
                    n += j.reports.len();
                    group.push(j);
                }
                Err(_) => break,
            }
        }
        match commit_group(&mut conn, &group) {
            Ok(results) => {
                for (job, r) in group.into_iter().zip(results) {
                    let _ = job.reply.send(r);
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

impl PgStore {
    /// Connects to `url` (`postgres://user:password@host:port/db` or key=value form) and
    /// creates the tables if needed.
    pub fn open(url: &str) -> StoreResult<Self> {
        let mut write = postgres::Client::connect(url, postgres::NoTls)?;
        write.batch_execute(SCHEMA)?;
        let read = postgres::Client::connect(url, postgres::NoTls)?;
        let (tx, rx) = sync_channel::<Job>(1024);
        let handle = std::thread::Builder::new()
            .name("harmony-pg-writer".into())
            .spawn(move || writer_loop(write, rx))
            .map_err(|e| StoreError::Db(e.to_string()))?;
        Ok(PgStore { jobs: Mutex::new(Some(tx)), read: Mutex::new(Some(read)), writer: Mutex::new(Some(handle)) })
    }
}

impl Drop for PgStore {
    fn drop(&mut self) {
        if let Ok(mut j) = self.jobs.lock() {
            j.take();
        }
        if let Ok(mut w) = self.writer.lock()
            && let Some(h) = w.take()
        {
            let _ = h.join();
        }
        if let Ok(mut r) = self.read.lock()
            && let Some(c) = r.take()
        {
            let _ = std::thread::spawn(move || drop(c)).join();
        }
    }
}

impl Store for PgStore {
    fn create_collection(&self, id: &str, config: &str) -> StoreResult<i64> {
        let mut guard = self.read.lock().map_err(|_| StoreError::Closed)?;
        let c = guard.as_mut().ok_or(StoreError::Closed)?;
        let rows = c.query(
            "INSERT INTO harmony_collections (id, config) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING RETURNING key",
            &[&id, &config],
        )?;
        match rows.first() {
            Some(r) => Ok(r.get(0)),
            None => Err(StoreError::Exists(id.to_string())),
        }
    }

    fn collections(&self) -> StoreResult<Vec<StoredCollection>> {
        let mut guard = self.read.lock().map_err(|_| StoreError::Closed)?;
        let c = guard.as_mut().ok_or(StoreError::Closed)?;
        let rows = c.query("SELECT key, id, config FROM harmony_collections ORDER BY key", &[])?;
        Ok(rows.iter().map(|r| StoredCollection { key: r.get(0), id: r.get(1), config: r.get(2) }).collect())
    }

    fn insert_reports(&self, key: i64, reports: Vec<(String, Vec<u8>)>) -> StoreResult<Vec<bool>> {
        let (reply, rx) = sync_channel(1);
        let tx = self.jobs.lock().map_err(|_| StoreError::Closed)?.clone().ok_or(StoreError::Closed)?;
        tx.send(Job { key, reports, reply }).map_err(|_| StoreError::Closed)?;
        rx.recv().map_err(|_| StoreError::Closed)?
    }

    fn for_each_report(&self, key: i64, f: &mut dyn FnMut(&[u8])) -> StoreResult<()> {
        use postgres::fallible_iterator::FallibleIterator;
        let mut guard = self.read.lock().map_err(|_| StoreError::Closed)?;
        let c = guard.as_mut().ok_or(StoreError::Closed)?;
        let params: [&(dyn postgres::types::ToSql + Sync); 1] = [&key];
        let mut rows = c.query_raw("SELECT body FROM harmony_reports WHERE collection = $1", params)?;
        while let Some(row) = rows.next()? {
            f(row.get::<_, &[u8]>(0));
        }
        Ok(())
    }

    fn count_reports(&self, key: i64) -> StoreResult<u64> {
        let mut guard = self.read.lock().map_err(|_| StoreError::Closed)?;
        let c = guard.as_mut().ok_or(StoreError::Closed)?;
        let n: i64 = c.query_one("SELECT COUNT(*) FROM harmony_reports WHERE collection = $1", &[&key])?.get(0);
        Ok(n as u64)
    }

    fn ping(&self) -> StoreResult<()> {
        let mut guard = self.read.lock().map_err(|_| StoreError::Closed)?;
        let c = guard.as_mut().ok_or(StoreError::Closed)?;
        c.is_valid(std::time::Duration::from_secs(2))?;
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
        let mut guard = self.read.lock().map_err(|_| StoreError::Closed)?;
        let c = guard.as_mut().ok_or(StoreError::Closed)?;
        let (round, seq) = (round as i64, seq as i64);
        // Dropping `tx` without commit rolls back.
        let mut tx = c.transaction()?;
        // Serializes the gradients of one collection across connections (and servers).
        if tx.query_opt("SELECT key FROM harmony_collections WHERE key = $1 FOR UPDATE", &[&key])?.is_none() {
            return Err(StoreError::Db(format!("no collection with key {key}")));
        }
        let n = tx.execute(
            "INSERT INTO harmony_gradients (collection, device_id, round, seq, body) VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT (collection, device_id) DO NOTHING",
            &[&key, &device_id, &round, &seq, &body],
        )?;
        if n == 0 {
            return Ok(false);
        }
        let stored: i64 =
            tx.query_opt("SELECT round FROM harmony_models WHERE collection = $1", &[&key])?.map_or(1, |r| r.get(0));
        let count: i64 = tx
            .query_one("SELECT COUNT(*) FROM harmony_gradients WHERE collection = $1 AND round = $2", &[&key, &round])?
            .get(0);
        if stored != round || count != seq + 1 {
            return Err(StoreError::RoundMoved(format!(
                "stored round {stored} with {} gradients, expected round {round} with {seq}",
                if stored == round { count - 1 } else { 0 }
            )));
        }
        if let Some((next, w)) = advance {
            tx.execute(
                "INSERT INTO harmony_models (collection, round, params) VALUES ($1, $2, $3)
                 ON CONFLICT (collection) DO UPDATE SET round = EXCLUDED.round, params = EXCLUDED.params",
                &[&key, &(next as i64), &params_to_blob(w)],
            )?;
        }
        tx.commit()?;
        Ok(true)
    }

    fn has_gradient(&self, key: i64, device_id: &str) -> StoreResult<bool> {
        let mut guard = self.read.lock().map_err(|_| StoreError::Closed)?;
        let c = guard.as_mut().ok_or(StoreError::Closed)?;
        let row = c.query_opt(
            "SELECT 1 FROM harmony_gradients WHERE collection = $1 AND device_id = $2",
            &[&key, &device_id],
        )?;
        Ok(row.is_some())
    }

    fn model(&self, key: i64) -> StoreResult<Option<(u64, Vec<f64>)>> {
        let mut guard = self.read.lock().map_err(|_| StoreError::Closed)?;
        let c = guard.as_mut().ok_or(StoreError::Closed)?;
        let row = c.query_opt("SELECT round, params FROM harmony_models WHERE collection = $1", &[&key])?;
        Ok(row.map(|r| (r.get::<_, i64>(0) as u64, blob_to_params(r.get::<_, &[u8]>(1)))))
    }

    fn for_each_gradient(&self, key: i64, round: u64, f: &mut dyn FnMut(&[u8])) -> StoreResult<()> {
        use postgres::fallible_iterator::FallibleIterator;
        let mut guard = self.read.lock().map_err(|_| StoreError::Closed)?;
        let c = guard.as_mut().ok_or(StoreError::Closed)?;
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
    }
}
