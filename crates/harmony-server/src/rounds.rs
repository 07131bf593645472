//! Model rounds with storage around the pure state machine of harmony-tasks
//! ([`harmony_tasks::train`]): one gradient at a time per collection is checked, stored (with the
//! model's step when it completes the round, in one transaction) and only then applied in
//! memory, so the round in memory is always the stored one. A gradient whose commit outcome is
//! unknown (the store connection died during it) marks the round stale: it is reloaded from the
//! store before its next use, so the served model is always the stored one.

use crate::error::ApiError;
use crate::store::{Store, StoreError};
use axum::http::StatusCode;
use harmony_protocol::{CollectionConfig, GradientAck, GradientPost, ModelState};
use harmony_tasks::train::{GradientReport, Round, TrainTask};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

/// A training collection's task and its current round.
pub struct Training {
    /// The task (randomizer, update rule).
    pub task: TrainTask,
    state: Mutex<Round>,
    /// A gradient's commit outcome is unknown: reload the round before its next use.
    stale: AtomicBool,
}

fn repeated() -> ApiError {
    ApiError::new(
        StatusCode::CONFLICT,
        "device_id",
        "this device id already contributed a gradient to this collection (one per device)",
    )
}

fn reload_failed(e: String) -> ApiError {
    tracing::error!(error = %e, "reloading the round failed");
    ApiError::store(StoreError::Db(e))
}

impl Training {
    /// The rounds of a training config, at round 1.
    pub fn new(config: &CollectionConfig) -> harmony_core::Result<Self> {
        let task = TrainTask::new(config.clone())?;
        let state = Mutex::new(task.start());
        Ok(Training { task, state, stale: AtomicBool::new(false) })
    }

    fn round(&self) -> MutexGuard<'_, Round> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Loads the stored round: the last stored model state (or w = 0 at round 1) and the round's
    /// gradients, in arrival order.
    pub fn load(&self, store: &dyn Store, key: i64) -> Result<(), String> {
        let mut st = self.round();
        self.load_into(store, key, &mut st)?;
        tracing::info!(round = st.round, received = st.received, "rebuilt model round");
        Ok(())
    }

    /// Replaces `st` with the stored round; on an error `st` is unchanged.
    fn load_into(&self, store: &dyn Store, key: i64, st: &mut Round) -> Result<(), String> {
        let mut next = match store.model(key).map_err(|e| e.to_string())? {
            Some((round, state)) => self.task.restore(round, &state).map_err(|e| e.to_string())?,
            None => self.task.start(),
        };
        let (mut bad, round) = (0u64, next.round);
        store
            .for_each_gradient(key, round, &mut |b| match self.task.decode(b) {
                Ok(r) => next = self.task.next(&next, &r).0,
                Err(_) => bad += 1,
            })
            .map_err(|e| e.to_string())?;
        if bad > 0 {
            return Err(format!("{bad} stored gradients do not decode"));
        }
        *st = next;
        Ok(())
    }

    /// The round, reloaded from the store first if a gradient's commit outcome is unknown
    /// (503 while the store does not answer).
    fn settled(&self, store: &dyn Store, key: i64) -> Result<MutexGuard<'_, Round>, ApiError> {
        let mut r = self.round();
        if self.stale.load(Ordering::Acquire) {
            self.load_into(store, key, &mut r).map_err(reload_failed)?;
            self.stale.store(false, Ordering::Release);
            tracing::info!(round = r.round, received = r.received, "reloaded the round after a store failure");
        }
        Ok(r)
    }

    /// Whether a gradient's commit outcome is unknown (the round must be reloaded).
    pub fn is_stale(&self) -> bool {
        self.stale.load(Ordering::Acquire)
    }

    /// The model in memory (see [`Training::model_settled`] for `GET …/model`).
    pub fn model(&self) -> ModelState {
        self.task.model_state(&self.round())
    }

    /// `GET …/model`: the stored model (reloaded first if it may differ; blocking).
    pub fn model_settled(&self, store: &dyn Store, key: i64) -> Result<ModelState, ApiError> {
        Ok(self.task.model_state(&*self.settled(store, key)?))
    }

    /// Checks, stores and applies one device's gradient (blocking: call from a blocking thread).
    pub fn post(
        &self,
        store: &dyn Store,
        key: i64,
        post: &GradientPost,
        report: &GradientReport,
        bytes: &[u8],
    ) -> Result<GradientAck, ApiError> {
        let mut r = self.settled(store, key)?;
        // A later round than ours: another server sharing the database may have advanced it.
        if post.round > r.round && !self.task.done(r.round) {
            self.load_into(store, key, &mut r).map_err(reload_failed)?;
        }
        // A device whose stored gradient's acknowledgement was lost learns that it was stored,
        // even after the round moved on.
        let off_round = self.task.done(r.round) || post.round != r.round;
        if off_round && store.has_gradient(key, &post.device_id).map_err(ApiError::store)? {
            return Err(repeated());
        }
        if self.task.done(r.round) {
            let msg = format!("training finished after {} rounds", r.round - 1);
            return Err(ApiError::new(StatusCode::CONFLICT, "round", msg));
        }
        if post.round != r.round {
            let msg = format!("round is {}, expected the current round {}; fetch the model again", post.round, r.round);
            return Err(ApiError::new(StatusCode::CONFLICT, "round", msg));
        }
        let (next, advanced) = self.task.next(&r, report);
        let state = advanced.then(|| next.stored());
        let advance = state.as_deref().map(|w| (next.round, w));
        match store.insert_gradient(key, &post.device_id, r.round, r.received, bytes, advance) {
            Ok(true) => {}
            Ok(false) => return Err(repeated()),
            // Another server sharing the database moved the round on: nothing was stored; catch
            // up with the stored round and let the device fetch the model again.
            Err(StoreError::RoundMoved(why)) => {
                tracing::info!(%why, "round moved on in the store; reloading");
                self.load_into(store, key, &mut r).map_err(reload_failed)?;
                if store.has_gradient(key, &post.device_id).map_err(ApiError::store)? {
                    return Err(repeated());
                }
                let msg = format!("the round moved on to {}; fetch the model again", r.round);
                return Err(ApiError::new(StatusCode::CONFLICT, "round", msg));
            }
            Err(e) => {
                // The connection died during the commit: the gradient (and the round's step)
                // may be stored. Reload before the next use; the device's retry learns which.
                if matches!(e, StoreError::Db(_)) {
                    self.stale.store(true, Ordering::Release);
                }
                return Err(ApiError::store(e));
            }
        }
        let round = r.round;
        *r = next;
        Ok(GradientAck { round, advanced })
    }
}
