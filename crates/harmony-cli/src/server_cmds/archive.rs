//! `harmony serve --archive DIR`: every report the server stores for the first time is also
//! appended to Parquet segments in `harmony export`'s layout (docs/EXPORT.md), so an append-only
//! archive grows beside the database without exports:
//!
//! ```text
//! DIR/collection=ID/spec.json
//! DIR/collection=ID/day=YYYY-MM-DD/part-NNNNN.parquet        closed segments (readers see these)
//! DIR/collection=ID/day=YYYY-MM-DD/part-NNNNN.parquet.tmp    the open segment (readers skip it)
//! ```
//!
//! A segment is closed (renamed from `.tmp`) after `--archive-segment-reports` reports or
//! `--archive-segment-seconds` seconds (a background thread checks every second), and every open
//! segment when the server shuts down. A report's `day` is the UTC day at which it is archived,
//! a moment after the store stamped its own (the two can differ by one day at midnight). The database stays the record: a report is archived after the store has
//! written it, a retried report (already stored) is not archived twice, and a failure to write the
//! archive is logged without failing the batch (`harmony export` rebuilds an archive from the
//! database). After a crash the open segments stay `.tmp` and are not read.
//!
//! [`ArchivingStore`] wraps the server's store: every method is the inner store's.

use harmony_data::reports::ReportsWriter;
use harmony_server::Store;
use harmony_server::store::{StoreResult, StoredCollection, StoredReport, StoredToken, utc_day_now};
use std::collections::HashMap;
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// When a segment closes.
#[derive(Debug, Clone, Copy)]
pub struct Rolling {
    /// After this many reports.
    pub reports: u64,
    /// After this long.
    pub age: Duration,
}

/// One collection's open segment.
struct Segment {
    writer: ReportsWriter,
    rows: u64,
    opened: Instant,
}

/// The segments being written.
struct Archive {
    dir: PathBuf,
    rolling: Rolling,
    /// Collection key → (id, config JSON).
    collections: HashMap<i64, (String, String)>,
    open: HashMap<i64, Segment>,
}

impl Archive {
    fn collection(&mut self, inner: &dyn Store, key: i64) -> Result<(String, String), String> {
        if let Some(c) = self.collections.get(&key) {
            return Ok(c.clone());
        }
        for c in inner.collections().map_err(|e| e.to_string())? {
            self.collections.insert(c.key, (c.id, c.config));
        }
        self.collections.get(&key).cloned().ok_or_else(|| format!("no collection with key {key}"))
    }

    fn push(&mut self, inner: &dyn Store, key: i64, day: i32, reports: &[&(String, Vec<u8>)]) -> Result<(), String> {
        for (id, body) in reports {
            if !self.open.contains_key(&key) {
                self.open_segment(inner, key)?;
            }
            let seg = self.open.get_mut(&key).expect("opened above");
            seg.writer.push(id, Some(day), body).map_err(|e| e.to_string())?;
            seg.rows += 1;
            if seg.rows >= self.rolling.reports {
                self.close(key)?;
            }
        }
        Ok(())
    }

    fn open_segment(&mut self, inner: &dyn Store, key: i64) -> Result<(), String> {
        let (id, config) = self.collection(inner, key)?;
        let dir = self.dir.join(format!("collection={id}"));
        let writer = ReportsWriter::append(&dir).map_err(|e| e.to_string())?;
        let spec = dir.join(crate::server_cmds::export::SPEC_FILE);
        if !spec.is_file() {
            std::fs::write(&spec, config).map_err(|e| format!("{}: {e}", spec.display()))?;
        }
        self.open.insert(key, Segment { writer, rows: 0, opened: Instant::now() });
        Ok(())
    }

    fn close(&mut self, key: i64) -> Result<(), String> {
        match self.open.remove(&key) {
            Some(seg) => seg.writer.finish().map(|_| ()).map_err(|e| e.to_string()),
            None => Ok(()),
        }
    }

    fn close_aged(&mut self) {
        let aged: Vec<i64> =
            self.open.iter().filter(|(_, s)| s.opened.elapsed() >= self.rolling.age).map(|(k, _)| *k).collect();
        for key in aged {
            if let Err(e) = self.close(key) {
                tracing::error!(collection_key = key, error = %e, "closing an archive segment failed");
            }
        }
    }

    fn close_all(&mut self) {
        let keys: Vec<i64> = self.open.keys().copied().collect();
        for key in keys {
            if let Err(e) = self.close(key) {
                tracing::error!(collection_key = key, error = %e, "closing an archive segment failed");
            }
        }
    }
}

/// A store that also archives every newly stored report (see the module's documentation).
pub struct ArchivingStore {
    inner: Arc<dyn Store>,
    archive: Arc<Mutex<Archive>>,
}

impl ArchivingStore {
    /// Wraps `inner`, archiving into `dir`; a thread closes aged segments until the store is dropped.
    pub fn new(inner: Arc<dyn Store>, dir: PathBuf, rolling: Rolling) -> Self {
        let archive = Archive { dir, rolling, collections: HashMap::new(), open: HashMap::new() };
        let archive = Arc::new(Mutex::new(archive));
        let weak = Arc::downgrade(&archive);
        std::thread::spawn(move || {
            loop {
                std::thread::sleep(Duration::from_secs(1));
                let Some(a) = weak.upgrade() else { return };
                if let Ok(mut a) = a.lock() {
                    a.close_aged();
                }
            }
        });
        ArchivingStore { inner, archive }
    }
}

impl Drop for ArchivingStore {
    fn drop(&mut self) {
        if let Ok(mut a) = self.archive.lock() {
            a.close_all();
        }
    }
}

impl Store for ArchivingStore {
    fn create_collection(&self, id: &str, config: &str) -> StoreResult<i64> {
        self.create_collection_meta(id, config, "{}")
    }
    fn create_collection_meta(&self, id: &str, config: &str, meta: &str) -> StoreResult<i64> {
        let key = self.inner.create_collection_meta(id, config, meta)?;
        if let Ok(mut a) = self.archive.lock() {
            a.collections.insert(key, (id.to_string(), config.to_string()));
        }
        Ok(key)
    }
    fn collections(&self) -> StoreResult<Vec<StoredCollection>> {
        self.inner.collections()
    }
    fn insert_reports(&self, key: i64, reports: Vec<(String, Vec<u8>)>) -> StoreResult<Vec<bool>> {
        // The inner store takes the reports; the archive needs the new ones after it decides.
        let copy = reports.clone();
        let fresh = self.inner.insert_reports(key, reports)?;
        let day = utc_day_now();
        let new: Vec<&(String, Vec<u8>)> = copy.iter().zip(&fresh).filter(|(_, f)| **f).map(|(r, _)| r).collect();
        if !new.is_empty() {
            let result = match self.archive.lock() {
                Ok(mut a) => a.push(self.inner.as_ref(), key, day, &new),
                Err(_) => Err("the archive's lock is poisoned".to_string()),
            };
            if let Err(e) = result {
                tracing::error!(collection_key = key, reports = new.len(), error = %e,
                    "archiving reports failed; they are stored in the database (harmony export rebuilds the archive)");
            }
        }
        Ok(fresh)
    }
    fn for_each_stored(&self, key: i64, f: &mut dyn FnMut(StoredReport<'_>) -> ControlFlow<()>) -> StoreResult<()> {
        self.inner.for_each_stored(key, f)
    }
    fn for_each_report(&self, key: i64, f: &mut dyn FnMut(&[u8])) -> StoreResult<()> {
        self.inner.for_each_report(key, f)
    }
    fn count_reports(&self, key: i64) -> StoreResult<u64> {
        self.inner.count_reports(key)
    }
    fn day_counts(&self, key: i64) -> StoreResult<Vec<(Option<i32>, u64)>> {
        self.inner.day_counts(key)
    }
    fn ping(&self) -> StoreResult<()> {
        self.inner.ping()
    }
    fn insert_token(&self, token: &StoredToken) -> StoreResult<()> {
        self.inner.insert_token(token)
    }
    fn insert_tokens(&self, tokens: &[StoredToken]) -> StoreResult<()> {
        self.inner.insert_tokens(tokens)
    }
    fn revoke_token(&self, token_id: &str) -> StoreResult<bool> {
        self.inner.revoke_token(token_id)
    }
    fn tokens(&self) -> StoreResult<Vec<StoredToken>> {
        self.inner.tokens()
    }
    fn supports_training(&self) -> bool {
        self.inner.supports_training()
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
        self.inner.insert_gradient(key, device_id, round, seq, body, advance)
    }
    fn has_gradient(&self, key: i64, device_id: &str) -> StoreResult<bool> {
        self.inner.has_gradient(key, device_id)
    }
    fn model(&self, key: i64) -> StoreResult<Option<(u64, Vec<f64>)>> {
        self.inner.model(key)
    }
    fn for_each_gradient(&self, key: i64, round: u64, f: &mut dyn FnMut(&[u8])) -> StoreResult<()> {
        self.inner.for_each_gradient(key, round, f)
    }
    fn insert_query(&self, key: i64, round: u64, query: &str, filled: u64) -> StoreResult<()> {
        self.inner.insert_query(key, round, query, filled)
    }
    fn queries(&self, key: i64) -> StoreResult<Vec<(u64, String)>> {
        self.inner.queries(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use harmony_server::SqliteStore;

    #[test]
    fn retried_reports_are_archived_once_and_segments_roll() {
        let dir = std::env::temp_dir().join(format!("harmony-archive-unit-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let inner: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.join("db.sqlite")).unwrap());
        let rolling = Rolling { reports: 3, age: Duration::from_secs(3600) };
        let store = ArchivingStore::new(inner, dir.join("archive"), rolling);
        let key = store.create_collection("c1", "{\"id\": \"c1\"}").unwrap();
        let batch: Vec<(String, Vec<u8>)> = (0..3).map(|i| (format!("r{i}"), vec![i as u8])).collect();
        assert_eq!(store.insert_reports(key, batch.clone()).unwrap(), vec![true; 3]);
        assert_eq!(store.insert_reports(key, batch).unwrap(), vec![false; 3], "a retry stores nothing");
        let more: Vec<(String, Vec<u8>)> = (3..6).map(|i| (format!("r{i}"), vec![i as u8])).collect();
        store.insert_reports(key, more).unwrap();
        drop(store);
        let col = dir.join("archive/collection=c1");
        let mut ids = Vec::new();
        let files = harmony_data::reports::part_files(&col).unwrap();
        for f in &files {
            harmony_data::reports::for_each_row(f, &mut |r| {
                ids.push(r.id.to_string());
                Ok(())
            })
            .unwrap();
        }
        ids.sort();
        assert_eq!(ids, ["r0", "r1", "r2", "r3", "r4", "r5"], "each report once");
        assert_eq!(files.len(), 2, "a segment closes at 3 reports: {files:?}");
        assert_eq!(std::fs::read_to_string(col.join("spec.json")).unwrap(), "{\"id\": \"c1\"}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
