//! A SQLite store whose connection can be cut or lose a commit's answer, as a PostgreSQL restart
//! would (the recovery and readiness tests; the real restart is harmony-cli's `pg_restart`).

use harmony_server::store::{BucketDelta, StoreResult, StoredCollection, StoredReport};
use harmony_server::{SqliteStore, Store, StoreError};
use std::sync::atomic::{AtomicU8, Ordering};

/// Working.
pub const UP: u8 = 0;
/// Commits, then fails as if the connection died during COMMIT (outcome unknown to the server).
pub const LOSE_ACK: u8 = 1;
/// Unreachable: nothing attempted.
pub const DOWN: u8 = 2;

/// [`SqliteStore`] behind a switch ([`UP`], [`LOSE_ACK`], [`DOWN`]).
pub struct Flaky {
    pub inner: SqliteStore,
    mode: AtomicU8,
}

impl Flaky {
    /// A store at `path`, up.
    pub fn open(path: &std::path::Path) -> Self {
        Flaky { inner: SqliteStore::open(path).unwrap(), mode: UP.into() }
    }
    /// Switches the mode.
    pub fn set(&self, mode: u8) {
        self.mode.store(mode, Ordering::SeqCst);
    }
    /// After a commit: in [`LOSE_ACK`], the error of a connection that died during COMMIT.
    fn lost(&self) -> StoreResult<()> {
        match self.mode.load(Ordering::SeqCst) {
            LOSE_ACK => Err(StoreError::Db("connection closed during COMMIT".into())),
            _ => Ok(()),
        }
    }
    fn up(&self) -> StoreResult<()> {
        match self.mode.load(Ordering::SeqCst) {
            DOWN => Err(StoreError::Unavailable("connection refused".into())),
            _ => Ok(()),
        }
    }
}

impl Store for Flaky {
    fn create_collection(&self, id: &str, config: &str) -> StoreResult<i64> {
        self.up()?;
        let key = self.inner.create_collection(id, config)?;
        self.lost()?;
        Ok(key)
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
        self.up()?;
        let new = self.inner.insert_gradient(key, device_id, round, seq, body, advance)?;
        self.lost()?;
        Ok(new)
    }
    fn has_gradient(&self, key: i64, device_id: &str) -> StoreResult<bool> {
        self.up()?;
        self.inner.has_gradient(key, device_id)
    }
    fn model(&self, key: i64) -> StoreResult<Option<(u64, Vec<f64>)>> {
        self.up()?;
        self.inner.model(key)
    }
    fn for_each_gradient(&self, key: i64, round: u64, f: &mut dyn FnMut(&[u8])) -> StoreResult<()> {
        self.up()?;
        self.inner.for_each_gradient(key, round, f)
    }
    fn collections(&self) -> StoreResult<Vec<StoredCollection>> {
        self.up()?;
        self.inner.collections()
    }
    fn insert_reports(&self, key: i64, reports: Vec<(String, Vec<u8>)>) -> StoreResult<Vec<bool>> {
        self.up()?;
        let flags = self.inner.insert_reports(key, reports)?;
        self.lost()?;
        Ok(flags)
    }
    fn for_each_stored(
        &self,
        key: i64,
        f: &mut dyn FnMut(StoredReport<'_>) -> std::ops::ControlFlow<()>,
    ) -> StoreResult<()> {
        self.up()?;
        self.inner.for_each_stored(key, f)
    }
    fn count_reports(&self, key: i64) -> StoreResult<u64> {
        self.inner.count_reports(key)
    }
    fn supports_buckets(&self) -> bool {
        true
    }
    fn create_collection_with_period(&self, id: &str, config: &str, meta: &str, period: i64) -> StoreResult<i64> {
        self.up()?;
        let key = self.inner.create_collection_with_period(id, config, meta, period)?;
        self.lost()?;
        Ok(key)
    }
    fn period(&self, key: i64) -> StoreResult<Option<i64>> {
        self.up()?;
        self.inner.period(key)
    }
    fn insert_reports_at(
        &self,
        key: i64,
        received: i64,
        reports: harmony_server::store::Reports,
        delta: Option<BucketDelta>,
    ) -> StoreResult<Vec<bool>> {
        self.up()?;
        let flags = self.inner.insert_reports_at(key, received, reports, delta)?;
        self.lost()?;
        Ok(flags)
    }
    fn for_each_bucket_state(&self, key: i64, f: &mut dyn FnMut(i64, &[u8])) -> StoreResult<()> {
        self.up()?;
        self.inner.for_each_bucket_state(key, f)
    }
    fn adopt_buckets(&self, key: i64, period: i64, states: Vec<(i64, Vec<u8>)>) -> StoreResult<bool> {
        self.up()?;
        self.inner.adopt_buckets(key, period, states)
    }
    fn ping(&self) -> StoreResult<()> {
        self.up()?;
        self.inner.ping()
    }
}
