//! Replicas: several `harmony serve` processes on one PostgreSQL database.
//!
//! Every server commits each batch with the saved state of its new reports, tagged with the
//! bucket it was received in and with the server's mark ([`crate::buckets`], [`crate::pg`]).
//! A server sharing its store polls it every [`INTERVAL`]: it serves the collections another
//! server created, takes the analyst tokens and revocations another server stored, and merges
//! into its live accumulator and buckets the bucket states the others committed since it last
//! looked. So every replica answers every window with the same estimates once a poll has passed
//! after the last commit (the staleness bound, measured in the replicas test), and `/readyz` is
//! a 503 naming how far behind a replica is when its polls fail for longer than [`STALE`].
//!
//! "Since it last looked" is exact, not approximate: the store returns, with the states, the
//! horizon of its snapshot (the oldest transaction still running), and a state committed later
//! belongs to a transaction numbered at least that. A poll reads the states numbered from the
//! previous horizon on, skips its own and the ones it merged already ([`Cursor`]), and moves
//! the horizon. A report retried on another replica is stored once (report ids are the primary
//! key), and only the replica that stored it writes its state.
//!
//! Model rounds and adaptive query rounds keep no mergeable state: each replica serves their
//! stored rounds as of its start or its last reload; send one collection's rounds to one replica.

use crate::state::{AppState, Collection, Inner};
use crate::store::{SharedState, Store};
use harmony_tasks::TaskAggregator;
use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

/// How often a replica polls the store.
pub const INTERVAL: Duration = Duration::from_millis(200);
/// How long a replica may go without a successful poll before `/readyz` says it is behind.
pub const STALE: Duration = Duration::from_secs(2);

/// Where a collection's merge of the other replicas' states stands.
#[derive(Debug, Default, Clone)]
pub struct Cursor {
    /// States of transactions numbered below this are all merged.
    horizon: i64,
    /// States at or above the horizon merged already: sequence number → transaction number.
    seen: HashMap<i64, i64>,
}

impl Cursor {
    /// The cursor after reading the states `read` ((seq, xid) of each, merged) with `horizon`.
    fn advance(&mut self, horizon: i64, read: impl IntoIterator<Item = (i64, i64)>) {
        self.horizon = self.horizon.max(horizon);
        self.seen.extend(read);
        let h = self.horizon;
        self.seen.retain(|_, xid| *xid >= h);
    }
}

/// A replica's poll status, for `/readyz`.
#[derive(Debug)]
pub struct Status {
    /// When the last poll succeeded (Unix milliseconds).
    last_ok: AtomicI64,
}

fn unix_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

impl Status {
    /// A status as of now (the state was just loaded).
    pub fn now() -> Self {
        Status { last_ok: AtomicI64::new(unix_ms()) }
    }

    /// Milliseconds since the last successful poll.
    pub fn behind_ms(&self) -> i64 {
        (unix_ms() - self.last_ok.load(Ordering::Relaxed)).max(0)
    }

    /// Whether the replica is behind: no successful poll for longer than [`STALE`].
    pub fn behind(&self) -> bool {
        self.behind_ms() > STALE.as_millis() as i64
    }
}

/// Bucket start (Unix seconds) → the merge of its states.
pub type States = std::collections::BTreeMap<i64, Box<dyn TaskAggregator>>;

/// The merge of every visible bucket state of a collection: (bucket start → accumulator), the
/// cursor after them. What a replica loads at start and after a store failure.
pub fn load_all(store: &dyn Store, task: &dyn harmony_tasks::Task, key: i64) -> Result<(States, Cursor), String> {
    let (mut states, mut read, mut bad) = (std::collections::BTreeMap::new(), Vec::new(), None);
    let horizon = store
        .bucket_states_after(key, None, &mut |s: SharedState<'_>| {
            read.push((s.seq, s.xid));
            let agg = states.entry(s.bucket).or_insert_with(|| task.aggregator());
            if bad.is_none()
                && let Err(e) = harmony_tasks::state::merge(task, agg.as_mut(), s.state)
            {
                bad = Some(format!(
                    "a stored state of the bucket at {} does not merge: {e}",
                    crate::buckets::iso(s.bucket)
                ));
            }
        })
        .map_err(|e| e.to_string())?;
    if let Some(e) = bad {
        return Err(e);
    }
    let mut cursor = Cursor::default();
    cursor.advance(horizon, read);
    Ok((states, cursor))
}

/// Merges into `c` the states the other replicas committed since its cursor; how many.
pub fn pull(store: &dyn Store, c: &Collection) -> Result<usize, String> {
    // Shared with ingest; a rebuild after a store failure ([`Collection::settle`]) excludes it.
    let _committing = c.committing();
    // A collection created here starts with no cursor: every state is new but its own.
    let Some(Cursor { horizon: since, seen }) = c.buckets().map(|b| b.cursor.clone().unwrap_or_default()) else {
        return Ok(0);
    };
    let task = c.task.as_ref();
    let (mut fresh, mut read, mut bad) = (Vec::new(), Vec::new(), None);
    let horizon = store
        .bucket_states_after(c.key, Some(since), &mut |s: SharedState<'_>| {
            if s.own || seen.contains_key(&s.seq) || bad.is_some() {
                return;
            }
            read.push((s.seq, s.xid));
            let mut agg = task.aggregator();
            match harmony_tasks::state::merge(task, agg.as_mut(), s.state) {
                Ok(()) => fresh.push((s.bucket, agg)),
                Err(e) => {
                    bad =
                        Some(format!("a state of the bucket at {} does not merge: {e}", crate::buckets::iso(s.bucket)))
                }
            }
        })
        .map_err(|e| e.to_string())?;
    if let Some(e) = bad {
        return Err(e);
    }
    let n = fresh.len();
    let mut agg = c.agg();
    let mut buckets = c.buckets().expect("checked above");
    for (b, delta) in &fresh {
        agg.merge(delta.as_ref()).map_err(|e| e.to_string())?;
        buckets.add(task, *b, delta.as_ref()).map_err(|e| e.to_string())?;
    }
    buckets.cursor.get_or_insert_with(Cursor::default).advance(horizon, read);
    drop((buckets, agg));
    if n > 0 {
        c.cache.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }
    Ok(n)
}

/// One poll: new collections, tokens, then every collection's new states.
fn poll(st: &AppState) -> Result<(), String> {
    let store = st.inner.store.clone();
    st.inner.tokens.absorb(store.tokens().map_err(|e| e.to_string())?);
    for stored in store.collections().map_err(|e| e.to_string())? {
        if !st.serves(&stored.id) {
            st.adopt_stored(&stored);
        }
    }
    let mut failed = Ok(());
    for c in st.all() {
        if let Err(e) = pull(store.as_ref(), &c) {
            failed = Err(format!("collection {}: {e}", c.config.id));
        }
    }
    failed
}

/// Polls the store every [`INTERVAL`] while the state lives.
pub(crate) fn spawn(inner: Weak<Inner>) {
    let spawned = std::thread::Builder::new().name("harmony-replica".into()).spawn(move || {
        // Logged when polls start failing and when they succeed again, not at every poll.
        let mut failing = false;
        loop {
            std::thread::sleep(INTERVAL);
            let Some(inner) = inner.upgrade() else { return };
            let st = AppState { inner };
            match poll(&st) {
                Ok(()) => {
                    if let Some(s) = &st.inner.replica {
                        s.last_ok.store(unix_ms(), Ordering::Relaxed);
                    }
                    if std::mem::take(&mut failing) {
                        tracing::info!("replica: polls of the store succeed again");
                    }
                }
                Err(e) if !failing => {
                    failing = true;
                    tracing::warn!(error = %e, "replica: a poll of the store failed (retried every 200 ms)");
                }
                Err(_) => {}
            }
        }
    });
    if let Err(e) = spawned {
        tracing::error!(error = %e, "replica: the poll thread did not start");
    }
}

impl AppState {
    /// The collections served, as shared handles.
    fn all(&self) -> Vec<Arc<Collection>> {
        self.inner.collections.read().unwrap_or_else(|p| p.into_inner()).values().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cursor_forgets_what_falls_below_the_horizon() {
        let mut k = Cursor::default();
        k.advance(10, [(1, 9), (2, 10), (3, 12)]);
        assert_eq!(k.horizon, 10);
        assert_eq!(k.seen.len(), 2);
        k.advance(12, [(4, 12)]);
        assert_eq!(k.seen.keys().copied().collect::<std::collections::BTreeSet<_>>(), [3, 4].into());
        // A horizon never moves back.
        k.advance(5, []);
        assert_eq!(k.horizon, 12);
    }
}
