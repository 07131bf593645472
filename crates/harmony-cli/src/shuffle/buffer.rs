//! The relay's durable buffer: one SQLite file (WAL, `synchronous=FULL`: a commit is fsynced
//! before the device is acknowledged).
//!
//! `buffered` holds each report's bytes (lowercase hex, as re-encoded by the relay), the
//! collection and config version it is for, and the relay-chosen random id it will be forwarded
//! under (chosen here, so a forward retried after a crash reuses it and the upstream counts it
//! once). `round` marks rows taken into a shuffled round: after a crash they are forwarded on
//! start even if fewer than `--min-batch` remain. `seen` remembers device ids per collection
//! (only to count a device's retried batch once; never forwarded, kept without rowid so its
//! order is the key's, not arrival's).

use anyhow::{Context, Result};
use rusqlite::{Connection, OptionalExtension, params};
use std::path::Path;

/// Outcome of offering one device report to the buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offer {
    /// Buffered under a fresh relay id.
    New,
    /// The device already sent this id with the same bytes (a retry).
    Duplicate,
}

/// One buffered report as the forwarder reads it.
pub struct Row {
    pub seq: i64,
    pub id: String,
    pub report: String,
}

/// The buffer file.
pub struct Buffer {
    conn: Connection,
}

impl Buffer {
    /// Opens (creating) `dir/buffer.sqlite`.
    pub fn open(dir: &Path) -> Result<Buffer> {
        std::fs::create_dir_all(dir).with_context(|| format!("--buffer {}: cannot create it", dir.display()))?;
        let path = dir.join("buffer.sqlite");
        let conn = Connection::open(&path).with_context(|| format!("--buffer: cannot open {}", path.display()))?;
        conn.execute_batch(
            "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA busy_timeout=10000;
             CREATE TABLE IF NOT EXISTS buffered (seq INTEGER PRIMARY KEY, collection TEXT NOT NULL,
               config_version INTEGER NOT NULL, id TEXT NOT NULL, report TEXT NOT NULL,
               round INTEGER NOT NULL DEFAULT 0);
             CREATE INDEX IF NOT EXISTS buffered_group ON buffered (collection, config_version, round);
             CREATE TABLE IF NOT EXISTS seen (collection TEXT NOT NULL, device_id TEXT NOT NULL,
               report_hash INTEGER NOT NULL, PRIMARY KEY (collection, device_id)) WITHOUT ROWID;
             CREATE TABLE IF NOT EXISTS rejected (collection TEXT NOT NULL, config_version INTEGER NOT NULL,
               id TEXT NOT NULL, report TEXT NOT NULL, reason TEXT NOT NULL);",
        )
        .with_context(|| format!("--buffer: cannot set up {}", path.display()))?;
        Ok(Buffer { conn })
    }

    /// Reports and hex bytes buffered (to enforce `--max-buffer-mib` after a restart).
    pub fn totals(&self) -> Result<(u64, u64)> {
        let (n, b): (i64, i64) =
            self.conn.query_row("SELECT count(*), coalesce(sum(length(report)), 0) FROM buffered", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })?;
        Ok((n as u64, b as u64))
    }

    /// Stores one device batch in one transaction (committed, i.e. fsynced, on return).
    /// `items` are (device id, lowercase hex, its hash, fresh relay id). Returns per item whether
    /// it was new, or `Err((index, message))` for a device id already sent with other bytes
    /// (nothing of the batch stored).
    pub fn insert(
        &mut self,
        collection: &str,
        config_version: u32,
        items: &[(String, String, i64, String)],
    ) -> Result<std::result::Result<Vec<Offer>, (usize, String)>> {
        let tx = self.conn.transaction()?;
        let mut out = Vec::with_capacity(items.len());
        {
            let mut find =
                tx.prepare_cached("SELECT report_hash FROM seen WHERE collection = ?1 AND device_id = ?2")?;
            let mut see =
                tx.prepare_cached("INSERT INTO seen (collection, device_id, report_hash) VALUES (?1, ?2, ?3)")?;
            let mut put = tx.prepare_cached(
                "INSERT INTO buffered (collection, config_version, id, report) VALUES (?1, ?2, ?3, ?4)",
            )?;
            for (i, (device_id, hex, hash, relay_id)) in items.iter().enumerate() {
                let prior: Option<i64> = find.query_row(params![collection, device_id], |r| r.get(0)).optional()?;
                match prior {
                    Some(h) if h == *hash => out.push(Offer::Duplicate),
                    Some(_) => return Ok(Err((i, format!("id {device_id:?} was already sent with other bytes")))),
                    None => {
                        see.execute(params![collection, device_id, hash])?;
                        put.execute(params![collection, config_version, relay_id, hex])?;
                        out.push(Offer::New);
                    }
                }
            }
        }
        tx.commit()?;
        Ok(Ok(out))
    }

    /// The groups (collection, config version) with their unrounded count and whether a round
    /// is in progress.
    pub fn groups(&self) -> Result<Vec<(String, u32, u64, bool)>> {
        let mut st = self.conn.prepare(
            "SELECT collection, config_version, sum(round = 0), max(round) FROM buffered
             GROUP BY collection, config_version",
        )?;
        let rows =
            st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get::<_, i64>(2)? as u64, r.get::<_, i64>(3)? > 0)))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Starts a round: marks every row of the group (committed), unless one is in progress,
    /// then returns the round's rows (in seq order; the caller shuffles).
    pub fn take_round(&mut self, collection: &str, config_version: u32) -> Result<Vec<Row>> {
        let tx = self.conn.transaction()?;
        let in_progress: bool = tx.query_row(
            "SELECT count(*) > 0 FROM buffered WHERE collection = ?1 AND config_version = ?2 AND round = 1",
            params![collection, config_version],
            |r| r.get(0),
        )?;
        if !in_progress {
            tx.execute(
                "UPDATE buffered SET round = 1 WHERE collection = ?1 AND config_version = ?2",
                params![collection, config_version],
            )?;
        }
        let rows = {
            let mut st = tx.prepare(
                "SELECT seq, id, report FROM buffered WHERE collection = ?1 AND config_version = ?2 AND round = 1",
            )?;
            let rows = st.query_map(params![collection, config_version], |r| {
                Ok(Row { seq: r.get(0)?, id: r.get(1)?, report: r.get(2)? })
            })?;
            rows.collect::<rusqlite::Result<Vec<_>>>()?
        };
        tx.commit()?;
        Ok(rows)
    }

    /// Deletes forwarded rows (after the upstream acknowledged them); `reason` moves them to
    /// `rejected` instead (the upstream refused them with a 4xx).
    pub fn remove(&mut self, seqs: &[i64], reason: Option<&str>) -> Result<u64> {
        let tx = self.conn.transaction()?;
        let mut bytes = 0u64;
        {
            let mut len = tx.prepare_cached("SELECT length(report) FROM buffered WHERE seq = ?1")?;
            let mut keep = tx.prepare_cached(
                "INSERT INTO rejected SELECT collection, config_version, id, report, ?2 FROM buffered WHERE seq = ?1",
            )?;
            let mut del = tx.prepare_cached("DELETE FROM buffered WHERE seq = ?1")?;
            for &s in seqs {
                bytes += len.query_row([s], |r| r.get::<_, i64>(0)).unwrap_or(0) as u64;
                if let Some(why) = reason {
                    keep.execute(params![s, why])?;
                }
                del.execute([s])?;
            }
        }
        tx.commit()?;
        Ok(bytes)
    }
}
