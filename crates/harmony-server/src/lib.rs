//! The Harmony collection server (axum + tokio).
//!
//! * `POST /v1/collections` (analyst): schema, ε, strategy, tasks → a new immutable collection.
//! * `GET /v1/collections/{id}/config` (public): everything a client needs to randomize.
//! * `POST /v1/collections/{id}/reports` (public): a batch of encoded reports with
//!   client-chosen ids. Every report is decoded and validated before anything is stored; one bad
//!   report rejects the batch with a 4xx naming it. A batch is acknowledged after its SQLite
//!   transaction commits; a retried id is stored and counted once.
//! * `GET /v1/collections/{id}/estimates` (analyst): estimates with standard errors and 95% CIs
//!   from accumulators updated per batch (no rescan), rebuilt from the stored reports on start.
//! * `GET /openapi.json`, `GET /metrics` (Prometheus text), `GET /healthz`.
//!
//! Logs (tracing) carry collection ids, counts and latencies, never report contents.

#![warn(missing_docs)]

pub mod pg;
pub mod store;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use harmony_client::protocol::{
    self, BatchAck, CONFIG_VERSION, CONFIG_VERSION_TRAIN, CollectionConfig, CreateCollection, Created, ErrorBody,
    ErrorDetail, Estimates, GradientAck, GradientPost, ModelState, ReportBatch, SCHEDULES, TrainPublished, TrainSpec,
};
use harmony_core::aggregate::Aggregator;
use harmony_core::strategy::{RecordAggregator, RecordMechanism, RecordReport, StrategyKind, StrategyOptions};
use harmony_learn::remote::{GradientReport, RemoteMechanism, RoundRule, RoundSchedule, tail_average};
use harmony_learn::trainer::{GRADIENT_SCALE, NOISE_KAPPA};
use rand::Rng;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;
pub use store::{SqliteStore, Store, StoreError};

/// Largest request body (bytes).
pub const MAX_BODY: usize = 32 << 20;

/// One collection in memory: its config, a validator and the live accumulator.
struct Collection {
    key: i64,
    config: CollectionConfig,
    /// An empty aggregator used only for `validate` (no lock needed).
    validator: RecordAggregator,
    agg: Mutex<RecordAggregator>,
    /// Model rounds (collections with the `train` task).
    train: Option<Training>,
}

/// A training collection's fixed setup and its current round.
struct Training {
    spec: TrainSpec,
    mech: RemoteMechanism,
    rule: RoundRule,
    state: Mutex<Round>,
}

/// The current round: the parameters w_t, the sum of the tail-averaged iterates so far (empty
/// with `decay`) and the accumulator of the gradients received.
struct Round {
    round: u64,
    w: Vec<f64>,
    sum: Vec<f64>,
    acc: Vec<f64>,
    received: u64,
}

impl Round {
    /// Round 1: w = 0, nothing averaged or received.
    fn start(d: usize, rule: &RoundRule) -> Self {
        let sum = if matches!(rule.schedule, RoundSchedule::Noise { .. }) { vec![0.0; d] } else { Vec::new() };
        Round { round: 1, w: vec![0.0; d], sum, acc: vec![0.0; d], received: 0 }
    }
    /// The stored model state: w, then the tail sum (with `noise`).
    fn stored(&self) -> Vec<f64> {
        [self.w.as_slice(), &self.sum].concat()
    }
}

/// `field is VALUE, expected …` as a 400 on `train.FIELD`.
fn bad_spec(field: &str, value: impl std::fmt::Display, expected: &str) -> ApiError {
    ApiError::bad(format!("train.{field}"), format!("{field} is {value}, expected {expected}"))
}

/// A finite number > 0 (or ≥ 1 with `at_least_one`), or a 400 naming the field.
fn check_positive(field: &str, v: f64, at_least_one: bool) -> Result<(), ApiError> {
    let (ok, expected) =
        if at_least_one { (v >= 1.0, "a finite number >= 1") } else { (v > 0.0, "a finite number > 0") };
    if ok && v.is_finite() { Ok(()) } else { Err(bad_spec(field, v, expected)) }
}

impl Training {
    /// Validates a spec against the schema and ε; returns the published setup too, with the
    /// `noise` schedule's κ, c and step γ written out. A spec without `schedule` is a `decay`
    /// one (stored before schedules existed; new collections get it written out at creation).
    fn new(config: &CollectionConfig, spec: &TrainSpec) -> Result<(Self, TrainPublished), ApiError> {
        let fm = harmony_client::feature_map(&config.schema, spec).map_err(|e| ApiError::from_core("train.", e))?;
        let d = fm.dimension();
        let mech = RemoteMechanism::new(&spec.mechanism, config.strategy.epsilon, d)
            .map_err(|e| ApiError::from_core("train.", e))?;
        if spec.batch_size == 0 {
            return Err(bad_spec("batch_size", 0, "an integer >= 1"));
        }
        if !(spec.lambda >= 0.0 && spec.lambda.is_finite()) {
            return Err(bad_spec("lambda", spec.lambda, "a finite number >= 0"));
        }
        if spec.rounds == Some(0) {
            return Err(bad_spec("rounds", 0, "an integer >= 1"));
        }
        let mut spec = spec.clone();
        if let Some(c) = spec.gradient_scale {
            check_positive("gradient_scale", c, true)?;
        }
        let schedule = match spec.schedule.as_deref() {
            None | Some("decay") => {
                if let Some(k) = spec.kappa {
                    return Err(bad_spec("kappa", k, "no kappa with schedule \"decay\" (it sets the noise step)"));
                }
                let Some(lr) = spec.learning_rate else {
                    return Err(ApiError::bad(
                        "train.learning_rate",
                        "learning_rate is missing, expected a finite number > 0 (gamma_0 of schedule \"decay\")",
                    ));
                };
                check_positive("learning_rate", lr, false)?;
                RoundSchedule::Decay { learning_rate: lr }
            }
            Some("noise") => {
                if let Some(lr) = spec.learning_rate {
                    return Err(bad_spec(
                        "learning_rate",
                        lr,
                        "no learning_rate with schedule \"noise\" (its step is computed; use \"decay\" to set gamma_0)",
                    ));
                }
                let Some(rounds) = spec.rounds else {
                    return Err(ApiError::bad(
                        "train.rounds",
                        "rounds is missing, expected an integer >= 1: the planned number of rounds T \
                         (floor(expected devices / batch_size)), which the noise step depends on",
                    ));
                };
                let kappa = *spec.kappa.get_or_insert(NOISE_KAPPA);
                check_positive("kappa", kappa, false)?;
                let c = *spec.gradient_scale.get_or_insert(GRADIENT_SCALE);
                let loss = harmony_client::train_loss(&spec).map_err(|e| ApiError::from_core("train.", e))?;
                let step = RoundRule::noise_step(loss, fm.max_l1(), kappa, c, &mech, spec.batch_size, rounds);
                RoundSchedule::Noise { step, rounds }
            }
            Some(other) => {
                return Err(bad_spec("schedule", format!("{other:?}"), &format!("one of {}", SCHEDULES.join(", "))));
            }
        };
        let rule = RoundRule { schedule, gradient_scale: spec.scale(), lambda: spec.lambda };
        let step = match schedule {
            RoundSchedule::Noise { step, .. } => Some(step),
            RoundSchedule::Decay { .. } => None,
        };
        let published = TrainPublished {
            spec: spec.clone(),
            dimension: d,
            features: fm.names().to_vec(),
            sampled: mech.sampled(),
            step,
        };
        let state = Round::start(d, &rule);
        Ok((Training { spec, mech, rule, state: Mutex::new(state) }, published))
    }

    fn done(&self, round: u64) -> bool {
        self.spec.rounds.is_some_and(|t| round > t)
    }

    /// `GET …/model` of the round `r`.
    fn model_state(&self, r: &Round) -> ModelState {
        let averaged = self.rule.averaged(r.round - 1);
        ModelState {
            round: r.round,
            parameters: r.w.clone(),
            batch_size: self.spec.batch_size,
            received: r.received,
            done: self.done(r.round),
            schedule: if self.spec.is_noise() { "noise" } else { "decay" }.to_string(),
            step: self.rule.step(r.round),
            model: tail_average(&r.w, &r.sum, averaged),
            averaged,
        }
    }
}

#[derive(Default)]
struct Metrics {
    accepted: AtomicU64,
    duplicates: AtomicU64,
    rejected_batches: AtomicU64,
    batches: AtomicU64,
    commit_micros: AtomicU64,
}

/// Shared server state.
#[derive(Clone)]
pub struct AppState {
    inner: Arc<Inner>,
}

struct Inner {
    store: Arc<dyn Store>,
    token: String,
    collections: RwLock<HashMap<String, Arc<Collection>>>,
    metrics: Metrics,
}

/// Server errors: a status and `{"error": {"field", "message"}}`.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    field: String,
    message: String,
}

impl ApiError {
    fn new(status: StatusCode, field: impl Into<String>, message: impl Into<String>) -> Self {
        ApiError { status, field: field.into(), message: message.into() }
    }
    fn bad(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, field, message)
    }
    fn from_core(prefix: &str, e: harmony_core::Error) -> Self {
        let field = match &e {
            harmony_core::Error::InvalidReport { field, .. }
            | harmony_core::Error::InvalidInput { name: field, .. } => {
                format!("{prefix}{field}")
            }
            harmony_core::Error::InvalidParameter { name, .. } => format!("{prefix}{name}"),
            harmony_core::Error::Incompatible(_) => prefix.trim_end_matches(": ").to_string(),
        };
        Self::bad(field, e.to_string())
    }
    fn store(e: StoreError) -> Self {
        if let StoreError::Unsupported(what) = e {
            return Self::new(
                StatusCode::NOT_IMPLEMENTED,
                "store",
                format!("{what} are not implemented by this store"),
            );
        }
        tracing::error!(error = %e, "store failure");
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "store", "storage unavailable; retry the batch")
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody { error: ErrorDetail { field: self.field, message: self.message } };
        (self.status, axum::Json(body)).into_response()
    }
}

impl AppState {
    /// Loads every collection from `store` and rebuilds its accumulator from the stored reports.
    pub fn new(store: Arc<dyn Store>, token: &str) -> Result<Self, String> {
        let mut map = HashMap::new();
        for c in store.collections().map_err(|e| e.to_string())? {
            let config: CollectionConfig =
                serde_json::from_str(&c.config).map_err(|e| format!("collection {}: config: {e}", c.id))?;
            let mech = RecordMechanism::new(config.schema.clone(), config.strategy.clone())
                .map_err(|e| format!("collection {}: {e}", c.id))?;
            let mut agg = mech.aggregator();
            let mut bad = 0u64;
            let t = Instant::now();
            store
                .for_each_report(c.key, &mut |b| match harmony_core::wire::decode::<RecordReport>(b) {
                    Ok(r) if agg.validate(&r).is_ok() => agg.add_unchecked(&r),
                    _ => bad += 1,
                })
                .map_err(|e| e.to_string())?;
            if bad > 0 {
                return Err(format!("collection {}: {bad} stored reports do not decode", c.id));
            }
            tracing::info!(collection = %c.id, reports = agg.count(), seconds = t.elapsed().as_secs_f64(), "rebuilt accumulator");
            let validator = mech.aggregator();
            let train = match config.train.as_ref() {
                Some(p) => Some(
                    rebuild_training(store.as_ref(), c.key, &config, p)
                        .map_err(|e| format!("collection {}: {e}", c.id))?,
                ),
                None => None,
            };
            map.insert(
                c.id.clone(),
                Arc::new(Collection { key: c.key, config, validator, agg: Mutex::new(agg), train }),
            );
        }
        Ok(AppState {
            inner: Arc::new(Inner {
                store,
                token: token.to_string(),
                collections: RwLock::new(map),
                metrics: Metrics::default(),
            }),
        })
    }

    fn collection(&self, id: &str) -> Result<Arc<Collection>, ApiError> {
        self.inner
            .collections
            .read()
            .expect("collections lock")
            .get(id)
            .cloned()
            .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, "collection", format!("no collection {id:?}")))
    }

    fn check_token(&self, headers: &HeaderMap) -> Result<(), ApiError> {
        let got =
            headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "));
        match got {
            Some(t) if constant_time_eq(t.as_bytes(), self.inner.token.as_bytes()) => Ok(()),
            Some(_) => Err(ApiError::new(StatusCode::UNAUTHORIZED, "authorization", "wrong analyst token")),
            None => Err(ApiError::new(
                StatusCode::UNAUTHORIZED,
                "authorization",
                "missing analyst token, expected `Authorization: Bearer TOKEN`",
            )),
        }
    }
}

/// Rebuilds a training collection's round from storage: the last stored model state (or w = 0
/// at round 1) and the current round's gradients, in arrival order.
fn rebuild_training(
    store: &dyn Store,
    key: i64,
    config: &CollectionConfig,
    stored: &TrainPublished,
) -> Result<Training, String> {
    let (mut t, mut published) =
        Training::new(config, &stored.spec).map_err(|e| format!("{}: {}", e.field, e.message))?;
    // γ was computed once, at creation: the stored value is the collection's.
    if let (Some(step), RoundSchedule::Noise { step: s, .. }) = (stored.step, &mut t.rule.schedule) {
        *s = step;
        published.step = Some(step);
    }
    // d, k and γ were fixed at creation: a build that derives others cannot serve this collection.
    if *stored != published {
        return Err(format!(
            "training setup changed: published d = {}, k = {}, step = {:?}; this build derives d = {}, k = {}, step = {:?}",
            stored.dimension, stored.sampled, stored.step, published.dimension, published.sampled, published.step
        ));
    }
    {
        let mut st = t.state.lock().expect("round lock");
        load_round(store, key, &t, &mut st)?;
        tracing::info!(round = st.round, received = st.received, "rebuilt model round");
    }
    Ok(t)
}

/// Loads the stored round into `st`: the last stored model state (w, then with `noise` the sum
/// of the tail-averaged iterates; or w = 0 at round 1) and the round's gradients, in arrival
/// order. On an error `st` is unchanged.
fn load_round(store: &dyn Store, key: i64, t: &Training, st: &mut Round) -> Result<(), String> {
    let d = st.w.len();
    let mut next = Round::start(d, &t.rule);
    if let Some((round, state)) = store.model(key).map_err(|e| e.to_string())? {
        let want = d + next.sum.len();
        if state.len() != want {
            return Err(format!("stored model state has {} numbers, expected {want}", state.len()));
        }
        next.round = round;
        next.w.copy_from_slice(&state[..d]);
        next.sum.copy_from_slice(&state[d..]);
    }
    let (mut bad, round) = (0u64, next.round);
    let Round { acc, received, .. } = &mut next;
    store
        .for_each_gradient(key, round, &mut |b| match harmony_core::wire::decode::<GradientReport>(b) {
            Ok(r) if t.mech.validate(&r).is_ok() => {
                t.mech.add(&r, acc);
                *received += 1;
            }
            _ => bad += 1,
        })
        .map_err(|e| e.to_string())?;
    if bad > 0 {
        return Err(format!("{bad} stored gradients do not decode"));
    }
    *st = next;
    Ok(())
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The router with every endpoint.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/v1/collections", post(create_collection))
        .route("/v1/collections/{id}/config", get(get_config))
        .route("/v1/collections/{id}/reports", post(post_reports))
        .route("/v1/collections/{id}/estimates", get(get_estimates))
        .route("/v1/collections/{id}/model", get(get_model))
        .route("/v1/collections/{id}/gradients", post(post_gradient))
        .route("/openapi.json", get(openapi))
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok" }))
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(state)
}

fn parse_json<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|e| {
        let field = if e.is_data() { "body (schema)" } else { "body (JSON syntax)" };
        ApiError::bad(field, format!("the request body does not parse: {e}"))
    })
}

/// A request body, or why it was refused (over [`MAX_BODY`], unreadable).
type Body = Result<Bytes, axum::extract::rejection::BytesRejection>;

/// The body's bytes; a refused body becomes the usual JSON error (413 for one over [`MAX_BODY`]).
fn body_bytes(body: Body) -> Result<Bytes, ApiError> {
    body.map_err(|r| ApiError::new(r.status(), "body", format!("{} (the limit is {MAX_BODY} bytes)", r.body_text())))
}

async fn create_collection(State(st): State<AppState>, headers: HeaderMap, body: Body) -> Result<Response, ApiError> {
    st.check_token(&headers)?;
    let body = body_bytes(body)?;
    let req: CreateCollection = parse_json(&body)?;
    let kind = StrategyKind::parse(&req.strategy).map_err(|e| ApiError::from_core("", e))?;
    let mut options = StrategyOptions::default_for(kind, req.epsilon);
    if let Some(n) = req.numeric_mechanism {
        options.numeric_mechanism =
            harmony_core::kinds::RecordNumeric::parse(&n).map_err(|e| ApiError::from_core("", e))?;
    }
    if let Some(c) = req.categorical_mechanism {
        options.categorical_mechanism =
            harmony_core::kinds::OracleKind::parse(&c).map_err(|e| ApiError::from_core("", e))?;
    }
    let training = req.tasks.iter().any(|t| t == "train");
    for t in &req.tasks {
        if t != "means" && t != "train" {
            return Err(ApiError::bad("tasks", format!("task {t:?} is not served, expected \"means\" or \"train\"")));
        }
    }
    if training && req.tasks.len() != 1 {
        return Err(ApiError::bad(
            "tasks",
            format!("tasks {:?}: \"train\" must be the only task (a device contributes once)", req.tasks),
        ));
    }
    match (training, &req.train) {
        (true, None) => return Err(ApiError::bad("train", "\"tasks\": [\"train\"] needs a \"train\" object")),
        (false, Some(_)) => return Err(ApiError::bad("train", "a \"train\" object needs \"tasks\": [\"train\"]")),
        _ => {}
    }
    if training && !st.inner.store.supports_training() {
        return Err(ApiError::new(
            StatusCode::NOT_IMPLEMENTED,
            "tasks",
            "model rounds (\"train\") are not implemented by this store",
        ));
    }
    let mech = RecordMechanism::new(req.schema.clone(), options.clone()).map_err(|e| ApiError::from_core("", e))?;
    let id = {
        let mut b = [0u8; 12];
        harmony_core::sampling::secure_rng().fill_bytes(&mut b);
        protocol::to_hex(&b)
    };
    let mut config = CollectionConfig {
        id: id.clone(),
        config_version: CONFIG_VERSION,
        wire_version: harmony_core::wire::WIRE_VERSION,
        schema: req.schema,
        strategy: options,
        tasks: req.tasks,
        train: None,
    };
    let train = match &req.train {
        Some(spec) => {
            // A new collection's default schedule is `noise`, written out in the published spec.
            let mut spec = spec.clone();
            spec.schedule.get_or_insert_with(|| "noise".into());
            let (t, published) = Training::new(&config, &spec)?;
            config.config_version = CONFIG_VERSION_TRAIN;
            config.train = Some(published);
            Some(t)
        }
        None => None,
    };
    let text = serde_json::to_string(&config).expect("JSON of a config");
    let store = st.inner.store.clone();
    let id2 = id.clone();
    let key = tokio::task::spawn_blocking(move || store.create_collection(&id2, &text))
        .await
        .map_err(|_| ApiError::store(StoreError::Closed))?
        .map_err(ApiError::store)?;
    let c = Collection {
        key,
        config: config.clone(),
        validator: mech.aggregator(),
        agg: Mutex::new(mech.aggregator()),
        train,
    };
    st.inner.collections.write().expect("collections lock").insert(id.clone(), Arc::new(c));
    tracing::info!(collection = %id, strategy = config.strategy.kind.name(), epsilon = config.strategy.epsilon, "collection created");
    Ok((StatusCode::CREATED, axum::Json(Created { id, config })).into_response())
}

async fn get_config(State(st): State<AppState>, Path(id): Path<String>) -> Result<Response, ApiError> {
    let c = st.collection(&id)?;
    Ok(axum::Json(c.config.clone()).into_response())
}

async fn post_reports(State(st): State<AppState>, Path(id): Path<String>, body: Body) -> Result<Response, ApiError> {
    let t0 = Instant::now();
    let result = match body_bytes(body) {
        Ok(body) => ingest(&st, &id, &body).await,
        Err(e) => Err(e),
    };
    match &result {
        Ok(ack) => {
            let m = &st.inner.metrics;
            m.batches.fetch_add(1, Ordering::Relaxed);
            m.accepted.fetch_add(ack.accepted, Ordering::Relaxed);
            m.duplicates.fetch_add(ack.duplicates, Ordering::Relaxed);
            m.commit_micros.fetch_add(t0.elapsed().as_micros() as u64, Ordering::Relaxed);
            tracing::debug!(collection = %id, accepted = ack.accepted, duplicates = ack.duplicates, micros = t0.elapsed().as_micros() as u64, "batch stored");
        }
        Err(e) => {
            st.inner.metrics.rejected_batches.fetch_add(1, Ordering::Relaxed);
            // The field names the problem; report contents are never logged.
            tracing::info!(collection = %id, status = e.status.as_u16(), field = %e.field, "batch rejected");
        }
    }
    result.map(|ack| axum::Json(ack).into_response())
}

async fn ingest(st: &AppState, id: &str, body: &[u8]) -> Result<BatchAck, ApiError> {
    let c = st.collection(id)?;
    if c.train.is_some() {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "collection",
            format!("collection {id:?} trains a model: post gradients to /v1/collections/{id}/gradients"),
        ));
    }
    let batch: ReportBatch = parse_json(body)?;
    if batch.collection != id {
        return Err(ApiError::bad(
            "collection",
            format!("the batch is for collection {:?}, posted to {id:?}", batch.collection),
        ));
    }
    if batch.config_version != c.config.config_version {
        return Err(ApiError::bad(
            "config_version",
            format!("config_version is {}, expected {}", batch.config_version, c.config.config_version),
        ));
    }
    if batch.reports.is_empty() || batch.reports.len() > protocol::MAX_BATCH {
        let status = if batch.reports.is_empty() { StatusCode::BAD_REQUEST } else { StatusCode::PAYLOAD_TOO_LARGE };
        return Err(ApiError::new(
            status,
            "reports",
            format!("{} reports, expected 1 to {}", batch.reports.len(), protocol::MAX_BATCH),
        ));
    }
    let mut rows = Vec::with_capacity(batch.reports.len());
    let mut decoded = Vec::with_capacity(batch.reports.len());
    let mut seen = std::collections::HashSet::with_capacity(batch.reports.len());
    let mut buf = Vec::new();
    for (i, item) in batch.reports.into_iter().enumerate() {
        if !protocol::valid_report_id(&item.id) {
            return Err(ApiError::bad(
                format!("reports[{i}].id"),
                format!("report id of {} bytes, expected 1 to 64 characters [A-Za-z0-9_-]", item.id.len()),
            ));
        }
        if item.report.len() > 2 * protocol::MAX_REPORT_BYTES {
            return Err(ApiError::bad(
                format!("reports[{i}].report"),
                format!("{} hex characters, expected at most {}", item.report.len(), 2 * protocol::MAX_REPORT_BYTES),
            ));
        }
        if protocol::from_hex_into(&item.report, &mut buf).is_none() {
            return Err(ApiError::bad(format!("reports[{i}].report"), "not hex: expected an even number of [0-9a-f]"));
        }
        let report = harmony_core::wire::decode::<RecordReport>(&buf)
            .map_err(|e| ApiError::from_core(&format!("reports[{i}].report: "), e))?;
        c.validator.validate(&report).map_err(|e| ApiError::from_core(&format!("reports[{i}].report: "), e))?;
        if !seen.insert(item.id.clone()) {
            return Err(ApiError::bad(format!("reports[{i}].id"), format!("id {:?} twice in one batch", item.id)));
        }
        rows.push((item.id, buf.clone()));
        decoded.push(report);
    }
    let store = st.inner.store.clone();
    let key = c.key;
    let flags = tokio::task::spawn_blocking(move || store.insert_reports(key, rows))
        .await
        .map_err(|_| ApiError::store(StoreError::Closed))?
        .map_err(ApiError::store)?;
    let mut accepted = 0;
    {
        let mut agg = c.agg.lock().expect("aggregator lock");
        for (r, new) in decoded.iter().zip(&flags) {
            if *new {
                agg.add_unchecked(r);
                accepted += 1;
            }
        }
    }
    Ok(BatchAck { accepted, duplicates: flags.len() as u64 - accepted })
}

async fn get_estimates(
    State(st): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    st.check_token(&headers)?;
    let c = st.collection(&id)?;
    let (n, est) = {
        let agg = c.agg.lock().expect("aggregator lock");
        (agg.count(), agg.estimates())
    };
    let out = Estimates::from_core(&id, n, &c.config.strategy, &c.config.schema, &est);
    Ok(axum::Json(out).into_response())
}

fn training<'a>(c: &'a Collection, id: &str) -> Result<&'a Training, ApiError> {
    c.train.as_ref().ok_or_else(|| {
        ApiError::new(StatusCode::NOT_FOUND, "collection", format!("collection {id:?} has no \"train\" task"))
    })
}

async fn get_model(State(st): State<AppState>, Path(id): Path<String>) -> Result<Response, ApiError> {
    let c = st.collection(&id)?;
    let t = training(&c, &id)?;
    let out = t.model_state(&t.state.lock().expect("round lock"));
    Ok(axum::Json(out).into_response())
}

async fn post_gradient(State(st): State<AppState>, Path(id): Path<String>, body: Body) -> Result<Response, ApiError> {
    let body = body_bytes(body)?;
    let c = st.collection(&id)?;
    training(&c, &id)?;
    let post: GradientPost = parse_json(&body)?;
    if !protocol::valid_report_id(&post.device_id) {
        return Err(ApiError::bad(
            "device_id",
            format!("device id of {} bytes, expected 1 to 64 characters [A-Za-z0-9_-]", post.device_id.len()),
        ));
    }
    if post.report.len() > 2 * protocol::MAX_REPORT_BYTES {
        return Err(ApiError::bad(
            "report",
            format!("{} hex characters, expected at most {}", post.report.len(), 2 * protocol::MAX_REPORT_BYTES),
        ));
    }
    let mut buf = Vec::new();
    if protocol::from_hex_into(&post.report, &mut buf).is_none() {
        return Err(ApiError::bad("report", "not hex: expected an even number of [0-9a-f]"));
    }
    let report = harmony_core::wire::decode::<GradientReport>(&buf).map_err(|e| ApiError::from_core("report: ", e))?;
    {
        let t = training(&c, &id)?;
        t.mech.validate(&report).map_err(|e| ApiError::from_core("report: ", e))?;
    }
    let store = st.inner.store.clone();
    let c2 = c.clone();
    let result = tokio::task::spawn_blocking(move || {
        let t = c2.train.as_ref().expect("training collection");
        // One gradient at a time per collection: check, store, then update the round.
        let mut r = t.state.lock().expect("round lock");
        let repeated = || {
            ApiError::new(
                StatusCode::CONFLICT,
                "device_id",
                "this device id already contributed a gradient to this collection (one per device)",
            )
        };
        // A later round than ours: another server sharing the database may have advanced it.
        if post.round > r.round && !t.done(r.round) {
            load_round(store.as_ref(), c2.key, t, &mut r).map_err(|e| {
                tracing::error!(error = %e, "reloading the round failed");
                ApiError::store(StoreError::Db(e))
            })?;
        }
        // A device whose stored gradient's acknowledgement was lost learns that it was stored,
        // even after the round moved on.
        if (t.done(r.round) || post.round != r.round)
            && store.has_gradient(c2.key, &post.device_id).map_err(ApiError::store)?
        {
            return Err(repeated());
        }
        if t.done(r.round) {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "round",
                format!("training finished after {} rounds", r.round - 1),
            ));
        }
        if post.round != r.round {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "round",
                format!("round is {}, expected the current round {}; fetch the model again", post.round, r.round),
            ));
        }
        let mut acc = r.acc.clone();
        t.mech.add(&report, &mut acc);
        let received = r.received + 1;
        let full = received >= t.spec.batch_size;
        let next = if full {
            let mut w = r.w.clone();
            let mut sum = r.sum.clone();
            t.rule.apply(&mut w, &mut sum, &acc, received as usize, r.round);
            Some(Round { round: r.round + 1, w, sum, acc: vec![0.0; acc.len()], received: 0 })
        } else {
            None
        };
        let state = next.as_ref().map(Round::stored);
        let advance = state.as_deref().map(|w| (r.round + 1, w));
        let new = match store.insert_gradient(c2.key, &post.device_id, r.round, r.received, &buf, advance) {
            Ok(new) => new,
            // Another server sharing the database moved the round on: nothing was stored; catch
            // up with the stored round and let the device fetch the model again.
            Err(StoreError::RoundMoved(why)) => {
                tracing::info!(collection = %c2.config.id, %why, "round moved on in the store; reloading");
                load_round(store.as_ref(), c2.key, t, &mut r).map_err(|e| {
                    tracing::error!(error = %e, "reloading the round failed");
                    ApiError::store(StoreError::Db(e))
                })?;
                if store.has_gradient(c2.key, &post.device_id).map_err(ApiError::store)? {
                    return Err(repeated());
                }
                return Err(ApiError::new(
                    StatusCode::CONFLICT,
                    "round",
                    format!("the round moved on to {}; fetch the model again", r.round),
                ));
            }
            Err(e) => return Err(ApiError::store(e)),
        };
        if !new {
            return Err(repeated());
        }
        let round = r.round;
        match next {
            Some(next) => *r = next,
            None => {
                r.acc = acc;
                r.received = received;
            }
        }
        Ok(GradientAck { round, advanced: full })
    })
    .await
    .map_err(|_| ApiError::store(StoreError::Closed))?;
    match &result {
        Ok(ack) => tracing::debug!(collection = %id, round = ack.round, advanced = ack.advanced, "gradient stored"),
        Err(e) => tracing::info!(collection = %id, status = e.status.as_u16(), field = %e.field, "gradient rejected"),
    }
    result.map(|ack| axum::Json(ack).into_response())
}

/// The OpenAPI 3.1 document.
pub const OPENAPI: &str = include_str!("../../../docs/openapi.json");

async fn openapi() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], OPENAPI).into_response()
}

async fn metrics(State(st): State<AppState>) -> Response {
    let m = &st.inner.metrics;
    let mut s = String::new();
    let mut line = |name: &str, help: &str, kind: &str, v: u64| {
        s.push_str(&format!("# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {v}\n"));
    };
    line(
        "harmony_reports_accepted_total",
        "Reports stored and aggregated.",
        "counter",
        m.accepted.load(Ordering::Relaxed),
    );
    line(
        "harmony_reports_duplicate_total",
        "Reports whose id was already stored.",
        "counter",
        m.duplicates.load(Ordering::Relaxed),
    );
    line("harmony_batches_total", "Acknowledged batches.", "counter", m.batches.load(Ordering::Relaxed));
    line(
        "harmony_batches_rejected_total",
        "Rejected batches (4xx/5xx).",
        "counter",
        m.rejected_batches.load(Ordering::Relaxed),
    );
    line(
        "harmony_batch_seconds_micros_total",
        "Total handling time of acknowledged batches, microseconds.",
        "counter",
        m.commit_micros.load(Ordering::Relaxed),
    );
    let n = st.inner.collections.read().expect("collections lock").len() as u64;
    line("harmony_collections", "Collections served.", "gauge", n);
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], s).into_response()
}

/// Opens the store a URL names: `sqlite://PATH` (or a bare path) or `postgres://…`.
pub fn open_store(url: &str) -> Result<Arc<dyn Store>, String> {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        return Ok(Arc::new(pg::PgStore::open(url).map_err(|e| format!("{url}: {e}"))?));
    }
    let path = url.strip_prefix("sqlite://").unwrap_or(url);
    Ok(Arc::new(SqliteStore::open(std::path::Path::new(path)).map_err(|e| format!("{url}: {e}"))?))
}

/// A running server (for tests, `harmony demo` and `harmony serve`).
pub struct Running {
    /// The bound address.
    pub addr: std::net::SocketAddr,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Running {
    /// `http://ADDR`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
    /// Stops the server gracefully and waits for it.
    pub fn stop(mut self) {
        self.stop_inner();
    }
    fn stop_inner(&mut self) {
        if let Some(s) = self.shutdown.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop_inner();
    }
}

/// Starts a server on its own tokio runtime in a background thread.
pub fn spawn(store: Arc<dyn Store>, token: &str, listen: &str, workers: usize) -> Result<Running, String> {
    let state = AppState::new(store, token)?;
    let std_listener = std::net::TcpListener::bind(listen).map_err(|e| format!("--listen {listen}: {e}"))?;
    std_listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    let addr = std_listener.local_addr().map_err(|e| e.to_string())?;
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers.max(1))
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let thread = std::thread::Builder::new()
        .name("harmony-server".into())
        .spawn(move || {
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(std_listener).expect("tokio listener");
                let app = router(state);
                let _ = axum::serve(listener, app)
                    .with_graceful_shutdown(async move {
                        let _ = rx.await;
                    })
                    .await;
            });
        })
        .map_err(|e| e.to_string())?;
    Ok(Running { addr, shutdown: Some(tx), thread: Some(thread) })
}

/// Serves until Ctrl-C / SIGTERM on the current thread.
pub fn serve_forever(store: Arc<dyn Store>, token: &str, listen: &str) -> Result<(), String> {
    let state = AppState::new(store, token)?;
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(|e| e.to_string())?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(listen).await.map_err(|e| format!("--listen {listen}: {e}"))?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        eprintln!("harmony server listening on http://{addr}");
        tracing::info!(%addr, "listening");
        axum::serve(listener, router(state))
            .with_graceful_shutdown(async {
                let _ = tokio::signal::ctrl_c().await;
            })
            .await
            .map_err(|e| e.to_string())
    })
}
