//! SQLite's WAL checkpoints on a thread of their own, off the report writer's path.
//!
//! By default the connection that commits past 1,000 WAL pages copies the WAL back into the
//! database file and syncs it inside its commit: the report writer would stop ingesting for that
//! copy and two more syncs every few batches. The writer instead pokes a [`Checkpointer`] after
//! each commit, which runs a `PASSIVE` checkpoint (never waiting for the writer or readers) on its
//! own connection while the writer goes on. Commits stay durable as before: each still syncs the
//! WAL (`synchronous = FULL`).
//!
//! Only a writer that starts after a complete checkpoint starts the WAL over, and under sustained
//! ingest the background checkpoint seldom completes between two commits: the writer keeps its
//! own automatic checkpoint, raised to [`WAL_LIMIT_PAGES`], which then copies the few pages the
//! background thread has not yet copied, so that the next commit starts the WAL over. The WAL
//! stays bounded as before (by that limit instead of 1,000 pages, while no reader holds it).

use crate::store::StoreResult;
use std::path::Path;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};

/// The writer's automatic checkpoint: WAL pages (4 KiB by default, so 64 MiB) past which its
/// commit checkpoints (what the background thread left) itself.
pub(crate) const WAL_LIMIT_PAGES: i64 = 16_384;

/// The checkpoint thread of one database (see the module docs); stopped and joined when dropped.
pub(crate) struct Checkpointer {
    poke: Option<SyncSender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Checkpointer {
    /// Starts the thread with its own connection `conn` to the database.
    pub(crate) fn start(conn: rusqlite::Connection, path: &Path) -> StoreResult<Self> {
        let (poke, pokes) = sync_channel::<()>(1);
        let name = path.display().to_string();
        let thread = std::thread::Builder::new()
            .name("harmony-sqlite-checkpoint".into())
            .spawn(move || run(conn, pokes, &name))
            .map_err(|e| crate::store::StoreError::Db(format!("starting the checkpoint thread: {e}")))?;
        Ok(Checkpointer { poke: Some(poke), thread: Some(thread) })
    }

    /// Asks for a checkpoint (at once if none is running, else right after it; never blocks).
    pub(crate) fn poke(&self) {
        if let Some(p) = &self.poke
            && let Err(TrySendError::Disconnected(())) = p.try_send(())
        {
            tracing::warn!("the SQLite checkpoint thread stopped");
        }
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.poke.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One passive checkpoint.
fn checkpoint(conn: &rusqlite::Connection) -> rusqlite::Result<()> {
    conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))
}

fn run(conn: rusqlite::Connection, pokes: Receiver<()>, name: &str) {
    while pokes.recv().is_ok() {
        // A checkpoint already running (the writer's own) makes this one busy: the next poke
        // tries again, and the WAL keeps every commit meanwhile.
        if let Err(e) = checkpoint(&conn) {
            tracing::warn!(database = %name, error = %e, "SQLite checkpoint failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::store::{SqliteStore, Store};

    /// Commits reach the database file while the store is open and far below the writer's own
    /// checkpoint limit: the background thread copied them.
    #[test]
    fn commits_are_checkpointed_in_the_background() {
        let dir = std::env::temp_dir().join(format!("harmony-wal-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("w.db");
        let _ = std::fs::remove_file(&path);
        let s = SqliteStore::open(&path).unwrap();
        let k = s.create_collection("c", "{}").unwrap();
        let before = std::fs::metadata(&path).unwrap().len();
        // 10 batches of 1,000 reports of 32 bytes: about 100 WAL pages, under SQLite's default
        // automatic checkpoint (1,000 pages) too.
        for b in 0..10 {
            let batch = (0..1000).map(|i| (format!("r{b}-{i}"), vec![7u8; 32])).collect();
            assert!(s.insert_reports(k, batch).unwrap().iter().all(|new| *new));
        }
        let grown = (0..500).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(10));
            std::fs::metadata(&path).unwrap().len() > before + 200_000
        });
        let after = std::fs::metadata(&path).unwrap().len();
        assert!(grown, "the database file stayed at {after} bytes (from {before}): nothing was checkpointed");
        drop(s);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
