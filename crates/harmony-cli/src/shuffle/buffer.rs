//! The relay's durable buffer: one SQLite file (WAL, `synchronous=FULL`: a commit is fsynced
//! before the device is acknowledged).
//!
//! `buffered` holds each report's bytes (lowercase hex, as re-encoded by the relay), the
//! collection and config version it is for, and the relay-chosen random id it will be forwarded
//! under (chosen here, so a forward retried after a crash reuses it and the upstream counts it
//! once). `round` marks rows taken into a shuffled round: after a crash they are forwarded on
//! start even if fewer than `--min-batch` remain. `seen` remembers device ids per collection
//! (only to count a device's retried batch once; never forwarded, kept without rowid so its
//! order is the key's, not arrival's) with when they were first seen (whole seconds): ids older
//! than `--seen-ttl-secs`, and the oldest beyond `--max-seen`, are forgotten. `groups` holds per collection the config its buffered
//! reports were checked against (served again after a restart) and when its oldest report not
//! yet in a round arrived (whole seconds; a group below `--min-batch` for longer than
//! `--group-ttl-secs` is dropped).

use anyhow::{Context, Result};
use rusqlite::{Connection, OptionalExtension, params};
use std::collections::HashMap;
use std::path::Path;

/// Outcome of offering one device report to the buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offer {
    /// Buffered under a fresh relay id.
    New,
    /// The device id was already sent to this collection (a retry; its bytes are not compared,
    /// so the answer says nothing about what the first report held).
    Duplicate,
}

/// One buffered report as the forwarder reads it.
pub struct Row {
    pub seq: i64,
    pub version: u32,
    pub id: String,
    pub report: String,
}

/// One device report to buffer: (device id, lowercase hex, fresh relay id).
pub type Item = (String, String, String);

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
             CREATE INDEX IF NOT EXISTS buffered_collection ON buffered (collection, round);
             CREATE TABLE IF NOT EXISTS seen (collection TEXT NOT NULL, device_id TEXT NOT NULL,
               report_hash INTEGER NOT NULL, PRIMARY KEY (collection, device_id)) WITHOUT ROWID;
             CREATE TABLE IF NOT EXISTS rejected (collection TEXT NOT NULL, config_version INTEGER NOT NULL,
               id TEXT NOT NULL, report TEXT NOT NULL, reason TEXT NOT NULL);
             CREATE TABLE IF NOT EXISTS groups (collection TEXT PRIMARY KEY, since INTEGER, config TEXT);",
        )
        .with_context(|| format!("--buffer: cannot set up {}", path.display()))?;
        // `seen.at` (when the id was first seen); a buffer from before it gets it with 0, so
        // its ids are forgotten at the first sweep.
        let has_at: bool =
            conn.query_row("SELECT count(*) > 0 FROM pragma_table_info('seen') WHERE name = 'at'", [], |r| r.get(0))?;
        if !has_at {
            conn.execute_batch("ALTER TABLE seen ADD COLUMN at INTEGER NOT NULL DEFAULT 0")?;
        }
        conn.execute_batch("CREATE INDEX IF NOT EXISTS seen_at ON seen (at)")?;
        Ok(Buffer { conn })
    }

    /// Reports and hex bytes buffered per collection (to enforce `--max-buffer-mib` after a
    /// restart and to know which pinned configs are in use).
    pub fn counts(&self) -> Result<HashMap<String, (u64, u64)>> {
        let mut st = self.conn.prepare(
            "SELECT collection, count(*), coalesce(sum(length(report)), 0) FROM buffered GROUP BY collection",
        )?;
        let rows = st.query_map([], |r| Ok((r.get(0)?, (r.get::<_, i64>(1)? as u64, r.get::<_, i64>(2)? as u64))))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// The configs (JSON) of the collections with buffered reports.
    pub fn pinned(&self) -> Result<Vec<(String, String)>> {
        let mut st = self.conn.prepare(
            "SELECT collection, config FROM groups WHERE config IS NOT NULL
             AND collection IN (SELECT DISTINCT collection FROM buffered)",
        )?;
        let rows = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Stores one device batch in one transaction (committed, i.e. fsynced, on return), checked
    /// against `config` (JSON, version `config_version`) at `now` (Unix seconds). Returns per
    /// item whether it was new, or `Err(version)` when the collection's buffered reports were
    /// checked against another config version (nothing stored: one round, one config).
    pub fn insert(
        &mut self,
        collection: &str,
        config_version: u32,
        config: &str,
        now: i64,
        items: &[Item],
    ) -> Result<std::result::Result<Vec<Offer>, u32>> {
        let tx = self.conn.transaction()?;
        let held: Option<u32> = tx
            .query_row("SELECT config_version FROM buffered WHERE collection = ?1 LIMIT 1", [collection], |r| r.get(0))
            .optional()?;
        if let Some(v) = held.filter(|&v| v != config_version) {
            return Ok(Err(v));
        }
        let mut out = Vec::with_capacity(items.len());
        {
            let mut find = tx.prepare_cached("SELECT 1 FROM seen WHERE collection = ?1 AND device_id = ?2")?;
            let mut see =
                tx.prepare_cached("INSERT INTO seen (collection, device_id, report_hash, at) VALUES (?1, ?2, 0, ?3)")?;
            let mut put = tx.prepare_cached(
                "INSERT INTO buffered (collection, config_version, id, report) VALUES (?1, ?2, ?3, ?4)",
            )?;
            for (device_id, hex, relay_id) in items {
                if find.exists(params![collection, device_id])? {
                    out.push(Offer::Duplicate);
                    continue;
                }
                see.execute(params![collection, device_id, now])?;
                put.execute(params![collection, config_version, relay_id, hex])?;
                out.push(Offer::New);
            }
        }
        tx.execute(
            "INSERT INTO groups (collection, since, config) VALUES (?1, ?2, ?3) ON CONFLICT (collection)
             DO UPDATE SET since = coalesce(since, excluded.since), config = excluded.config",
            params![collection, now, config],
        )?;
        tx.commit()?;
        Ok(Ok(out))
    }

    /// The collections with their unrounded count and whether a round is in progress.
    pub fn groups(&self) -> Result<Vec<(String, u64, bool)>> {
        let mut st =
            self.conn.prepare("SELECT collection, sum(round = 0), max(round) FROM buffered GROUP BY collection")?;
        let rows = st.query_map([], |r| Ok((r.get(0)?, r.get::<_, i64>(1)? as u64, r.get::<_, i64>(2)? > 0)))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Starts a round: marks every row of the collection (committed), unless one is in
    /// progress, then returns the round's rows (in seq order; the caller shuffles).
    pub fn take_round(&mut self, collection: &str) -> Result<Vec<Row>> {
        let tx = self.conn.transaction()?;
        let in_progress: bool =
            tx.query_row("SELECT count(*) > 0 FROM buffered WHERE collection = ?1 AND round = 1", [collection], |r| {
                r.get(0)
            })?;
        if !in_progress {
            tx.execute("UPDATE buffered SET round = 1 WHERE collection = ?1", [collection])?;
            tx.execute("UPDATE groups SET since = NULL WHERE collection = ?1", [collection])?;
        }
        let rows = {
            let mut st =
                tx.prepare("SELECT seq, config_version, id, report FROM buffered WHERE collection = ?1 AND round = 1")?;
            let rows = st.query_map([collection], |r| {
                Ok(Row { seq: r.get(0)?, version: r.get(1)?, id: r.get(2)?, report: r.get(3)? })
            })?;
            rows.collect::<rusqlite::Result<Vec<_>>>()?
        };
        tx.commit()?;
        Ok(rows)
    }

    /// Deletes forwarded rows (after the upstream acknowledged them); `reason` moves them to
    /// `rejected` instead (the upstream refused them with a 4xx). Returns their hex bytes.
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

    /// Moves every row of a collection that cannot be forwarded (an id no server has) to
    /// `rejected`; returns (reports, hex bytes).
    pub fn reject_collection(&mut self, collection: &str, reason: &str) -> Result<(u64, u64)> {
        let tx = self.conn.transaction()?;
        let (n, b): (i64, i64) = tx.query_row(
            "SELECT count(*), coalesce(sum(length(report)), 0) FROM buffered WHERE collection = ?1",
            [collection],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        tx.execute(
            "INSERT INTO rejected SELECT collection, config_version, id, report, ?2 FROM buffered WHERE collection = ?1",
            params![collection, reason],
        )?;
        tx.execute("DELETE FROM buffered WHERE collection = ?1", [collection])?;
        tx.commit()?;
        Ok((n as u64, b as u64))
    }

    /// Forgets the device ids first seen before `cutoff` (Unix seconds), then the oldest ones
    /// beyond `max` (committed); returns how many were forgotten.
    pub fn forget_seen(&mut self, cutoff: i64, max: u64) -> Result<u64> {
        let tx = self.conn.transaction()?;
        let mut n = tx.execute("DELETE FROM seen WHERE at < ?1", [cutoff])? as u64;
        let held: i64 = tx.query_row("SELECT count(*) FROM seen", [], |r| r.get(0))?;
        let over = (held as u64).saturating_sub(max);
        if over > 0 {
            n += tx.execute(
                "DELETE FROM seen WHERE (collection, device_id) IN
                 (SELECT collection, device_id FROM seen ORDER BY at LIMIT ?1)",
                [over as i64],
            )? as u64;
        }
        tx.commit()?;
        Ok(n)
    }

    /// Drops the reports of every collection whose oldest report not in a round arrived before
    /// `cutoff` (Unix seconds) while fewer than `min_batch` wait and no round is in progress:
    /// they would never be forwarded in a round of `min_batch`. Returns per collection the
    /// (reports, hex bytes) dropped.
    pub fn expire(&mut self, cutoff: i64, min_batch: u64) -> Result<Vec<(String, u64, u64)>> {
        let tx = self.conn.transaction()?;
        let stale: Vec<String> = {
            let mut st = tx.prepare(
                "SELECT g.collection FROM groups g WHERE g.since < ?1
                 AND NOT EXISTS (SELECT 1 FROM buffered b WHERE b.collection = g.collection AND b.round = 1)
                 AND (SELECT count(*) FROM buffered b WHERE b.collection = g.collection) < ?2",
            )?;
            let rows = st.query_map(params![cutoff, min_batch as i64], |r| r.get(0))?;
            rows.collect::<rusqlite::Result<_>>()?
        };
        let mut out = Vec::with_capacity(stale.len());
        for c in stale {
            let (n, b): (i64, i64) = tx.query_row(
                "SELECT count(*), coalesce(sum(length(report)), 0) FROM buffered WHERE collection = ?1",
                [&c],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )?;
            tx.execute("DELETE FROM buffered WHERE collection = ?1", [&c])?;
            tx.execute("UPDATE groups SET since = NULL WHERE collection = ?1", [&c])?;
            out.push((c, n as u64, b as u64));
        }
        tx.commit()?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `seen` is bounded: ids older than the TTL are forgotten (their resend is new again), a
    /// recent one is still a duplicate, and beyond the most remembered the oldest go first.
    #[test]
    fn seen_ids_expire_and_stay_under_the_cap() {
        let dir = std::env::temp_dir().join(format!("harmony-relay-seen-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut b = Buffer::open(&dir).unwrap();
        let item = |d: &str| (d.to_string(), "0102".to_string(), format!("relay-{d}"));
        let offer = |b: &mut Buffer, d: &str, now: i64| b.insert("c", 3, "{}", now, &[item(d)]).unwrap().unwrap()[0];
        assert_eq!(offer(&mut b, "old", 100), Offer::New);
        assert_eq!(offer(&mut b, "recent", 200), Offer::New);
        assert_eq!(offer(&mut b, "old", 150), Offer::Duplicate, "a retry within the TTL");
        assert_eq!(b.forget_seen(150, 10).unwrap(), 1, "only the id first seen at 100 is past the cutoff");
        assert_eq!(offer(&mut b, "recent", 210), Offer::Duplicate);
        assert_eq!(offer(&mut b, "old", 220), Offer::New, "forgotten after the TTL");
        for i in 0..5 {
            offer(&mut b, &format!("d{i}"), 300 + i);
        }
        assert_eq!(b.forget_seen(0, 3).unwrap(), 4, "7 held, 3 kept");
        let kept: Vec<String> = {
            let mut st = b.conn.prepare("SELECT device_id FROM seen ORDER BY at").unwrap();
            st.query_map([], |r| r.get(0)).unwrap().collect::<rusqlite::Result<_>>().unwrap()
        };
        assert_eq!(kept, ["d2", "d3", "d4"], "the newest are kept");
        drop(b);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
