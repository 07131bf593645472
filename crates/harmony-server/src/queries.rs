//! Adaptive query rounds (`linear-queries` with `mechanism: "adaptive-rounds"`) with storage
//! around the pure state machine of harmony-tasks ([`harmony_tasks::linear_rounds`]), as
//! [`crate::rounds`] does for `train`. The collection's accumulator is the [`QueryRounds`]; under
//! its lock an answer is checked against the round, stored (with the round's advance when it fills
//! it and the next query exists, in one transaction) and only then applied in memory, and a posted
//! query is stored before it opens its round. The store keeps a device's answer as a gradient of
//! its round (one per device per collection: what keeps the groups disjoint) and each posted
//! query, so a restart rebuilds the queries and every round's answers.

use crate::error::ApiError;
use crate::state::Collection;
use crate::store::{Store, StoreError};
use axum::http::StatusCode;
use harmony_protocol::{AnswerAck, AnswerPost, CollectionConfig, QueryRound};
use harmony_tasks::TaskAggregator;
use harmony_tasks::linear_rounds::QueryBitReport;
use harmony_tasks::linear_rounds::QueryRounds;
use std::sync::atomic::Ordering;

/// Whether a config's collection runs adaptive query rounds.
pub fn is_adaptive(config: &CollectionConfig) -> bool {
    config.task.answers_in_rounds()
}

fn rounds_of(agg: &dyn TaskAggregator) -> Result<&QueryRounds, ApiError> {
    agg.as_any().downcast_ref::<QueryRounds>().ok_or_else(|| ApiError::internal("an accumulator that is not rounds"))
}

fn rounds_mut(agg: &mut dyn TaskAggregator) -> Result<&mut QueryRounds, ApiError> {
    agg.as_any_mut()
        .and_then(|a| a.downcast_mut::<QueryRounds>())
        .ok_or_else(|| ApiError::internal("an accumulator that is not rounds"))
}

/// The stored rounds of a collection: the spec's queries, then round by round its stored
/// answers (in arrival order) and the posted query that opened the next round.
pub fn replay(store: &dyn Store, col: &Collection) -> Result<Box<dyn TaskAggregator>, String> {
    let mut agg = col.task.aggregator();
    let r = rounds_mut(agg.as_mut()).map_err(|e| e.message)?;
    let mut posted = store.queries(col.key).map_err(|e| e.to_string())?.into_iter();
    let (mut round, mut bad) = (1u64, None);
    loop {
        store
            .for_each_gradient(col.key, round, &mut |b| {
                if bad.is_none()
                    && let Err(e) = harmony_core::wire::decode::<QueryBitReport>(b).and_then(|a| r.answer(&a))
                {
                    bad = Some(e.to_string());
                }
            })
            .map_err(|e| e.to_string())?;
        if let Some(e) = bad {
            return Err(format!("a stored answer of round {round} does not apply: {e}"));
        }
        if round < r.queries().len() as u64 {
            round += 1;
            continue;
        }
        match posted.next() {
            None => break,
            Some((t, q)) if t == round + 1 => {
                let json = serde_json::from_str(&q).map_err(|e| format!("stored query of round {t}: {e}"))?;
                r.push(&json).map_err(|e| format!("stored query of round {t}: {e}"))?;
                round = t;
            }
            Some((t, _)) => return Err(format!("a stored query for round {t}, expected round {}", round + 1)),
        }
    }
    Ok(agg)
}

/// Replaces the collection's rounds with the stored ones (a store failure, another server).
fn reload(store: &dyn Store, c: &Collection, agg: &mut Box<dyn TaskAggregator>) -> Result<(), ApiError> {
    *agg = replay(store, c).map_err(|e| {
        tracing::error!(error = %e, "reloading the query rounds failed");
        ApiError::store(StoreError::Db(e))
    })?;
    c.stale.store(false, Ordering::Release);
    c.cache.lock().unwrap_or_else(|p| p.into_inner()).clear();
    Ok(())
}

/// The locked accumulator, reloaded first when a write's commit outcome is unknown.
fn settled<'a>(
    store: &dyn Store,
    c: &'a Collection,
) -> Result<std::sync::MutexGuard<'a, Box<dyn TaskAggregator>>, ApiError> {
    let mut agg = c.agg();
    if c.stale.load(Ordering::Acquire) {
        reload(store, c, &mut agg)?;
    }
    Ok(agg)
}

/// Reloads the rounds if a write's commit outcome is unknown (before an estimate; blocking).
pub fn settle(store: &dyn Store, c: &Collection) -> Result<(), ApiError> {
    settled(store, c).map(|_| ())
}

/// `GET …/query`: the current round (blocking).
pub fn current(store: &dyn Store, c: &Collection) -> Result<QueryRound, ApiError> {
    let agg = settled(store, c)?;
    Ok(rounds_of(agg.as_ref())?.state())
}

fn conflict(field: &str, msg: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::CONFLICT, field, msg)
}

fn repeated() -> ApiError {
    conflict("device_id", "this device id already answered a query of this collection (one answer per device)")
}

/// Checks, stores and applies one device's answer (blocking).
pub fn answer(store: &dyn Store, c: &Collection, post: &AnswerPost, bytes: &[u8]) -> Result<AnswerAck, ApiError> {
    let report: QueryBitReport = harmony_core::wire::decode(bytes).map_err(|e| ApiError::from_core("report: ", e))?;
    let mut agg = settled(store, c)?;
    // A later round than ours (at most one query beyond ours): another server sharing the
    // database may have opened it. Other rounds are refused without reading the store.
    let (asked, r) = (report.query as u64 + 1, rounds_of(agg.as_ref())?);
    if asked > r.round() && asked <= r.queries().len() as u64 + 1 {
        reload(store, c, &mut agg)?;
    }
    let r = rounds_of(agg.as_ref())?;
    if let Err(e) = r.check(&report) {
        // A device whose stored answer's acknowledgement was lost learns that it was stored.
        if store.has_gradient(c.key, &post.device_id).map_err(ApiError::store)? {
            return Err(repeated());
        }
        return Err(conflict("round", e.to_string()));
    }
    let round = r.round();
    let seq = r.received(round);
    let full = seq + 1 == r.batch_size();
    let advance = (full && round < r.queries().len() as u64).then_some((round + 1, &[][..]));
    match store.insert_gradient(c.key, &post.device_id, round, seq, bytes, advance) {
        Ok(true) => {}
        Ok(false) => return Err(repeated()),
        Err(StoreError::RoundMoved(why)) => {
            tracing::info!(%why, "query round moved on in the store; reloading");
            reload(store, c, &mut agg)?;
            if store.has_gradient(c.key, &post.device_id).map_err(ApiError::store)? {
                return Err(repeated());
            }
            let now = rounds_of(agg.as_ref())?.round();
            return Err(conflict("round", format!("the round moved on to {now}; fetch the query again")));
        }
        Err(e) => {
            if matches!(e, StoreError::Db(_)) {
                c.stale.store(true, Ordering::Release);
            }
            return Err(ApiError::store(e));
        }
    }
    rounds_mut(agg.as_mut())?.answer(&report).map_err(|e| ApiError::from_core("report: ", e))?;
    Ok(AnswerAck { round, full })
}

/// Stores the analyst's next query and opens its round (blocking). 409 naming `round` while a
/// round is open; 400 naming `query` for a query that does not parse over the domain.
pub fn post_query(store: &dyn Store, c: &Collection, query: &serde_json::Value) -> Result<QueryRound, ApiError> {
    let mut agg = settled(store, c)?;
    let r = rounds_of(agg.as_ref())?;
    if r.open() {
        let round = r.round();
        let msg = format!(
            "round {round} is open ({} of its {} answers): the next query is taken once every round is full",
            r.received(round),
            r.batch_size()
        );
        return Err(conflict("round", msg));
    }
    r.parse(query).map_err(|e| ApiError::from_core("", e))?;
    let next = r.queries().len() as u64 + 1;
    let text = serde_json::to_string(query).expect("JSON of a query");
    match store.insert_query(c.key, next, &text, r.batch_size()) {
        Ok(()) => {}
        Err(StoreError::RoundMoved(why)) => {
            reload(store, c, &mut agg)?;
            return Err(conflict(
                "round",
                format!("another query was posted meanwhile ({why}); read the estimates again"),
            ));
        }
        Err(e) => {
            if matches!(e, StoreError::Db(_)) {
                c.stale.store(true, Ordering::Release);
            }
            return Err(ApiError::store(e));
        }
    }
    let state = rounds_mut(agg.as_mut())?.push(query).map_err(|e| ApiError::from_core("", e))?;
    c.cache.lock().unwrap_or_else(|p| p.into_inner()).clear();
    tracing::info!(collection = %c.config.id, round = state.round, "query posted");
    Ok(state)
}
