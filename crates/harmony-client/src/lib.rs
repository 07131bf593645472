//! Harmony client SDK: fetch a collection's configuration, randomize a record locally with a
//! secure RNG, and submit it with retries and backoff. A [`Ledger`] remembers, per collection,
//! the one report a device made: a retry resends the same bytes under the same report id (the
//! server counts it once) and a device never randomizes twice for one collection (which would
//! spend its privacy budget again).
//!
//! Only randomized reports leave the device: [`Device::report`] encodes the output of
//! [`harmony_core::client::SecureRandomizer::record`], never a raw value.

#![warn(missing_docs)]

pub mod protocol;

use harmony_core::schema::Value;
use harmony_core::strategy::{RecordMechanism, RecordReport};
use protocol::{
    BatchAck, CollectionConfig, CreateCollection, Created, ErrorBody, Estimates, GradientAck, GradientPost, ModelState,
    ReportBatch, ReportItem, TrainSpec,
};
use rand::Rng;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Client errors.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The server rejected the request (4xx): retrying will not help.
    #[error("server rejected the request ({status}): {field}: {message}")]
    Rejected {
        /// HTTP status.
        status: u16,
        /// The field the server named.
        field: String,
        /// The server's message.
        message: String,
    },
    /// Transport errors or 5xx after every retry.
    #[error("request to {url} failed after {attempts} attempts: {last}")]
    Unavailable {
        /// The URL.
        url: String,
        /// Attempts made.
        attempts: u32,
        /// The last error.
        last: String,
    },
    /// A response that does not parse.
    #[error("unexpected response from {url}: {message}")]
    Protocol {
        /// The URL.
        url: String,
        /// What did not parse.
        message: String,
    },
    /// Randomization or configuration errors from harmony-core.
    #[error(transparent)]
    Core(#[from] harmony_core::Error),
    /// The ledger file.
    #[error("ledger {path}: {message}")]
    Ledger {
        /// Ledger path.
        path: PathBuf,
        /// What failed.
        message: String,
    },
    /// This device already reported to this collection.
    #[error("this device already reported to collection {0}")]
    AlreadyReported(String),
    /// The collection has no training task (or another one than expected).
    #[error("collection {0} has no training task")]
    NotTraining(String),
}

/// Result alias.
pub type Result<T, E = ClientError> = std::result::Result<T, E>;

/// Retry schedule: exponential backoff with full jitter.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    /// Attempts in total (≥ 1).
    pub attempts: u32,
    /// First backoff.
    pub base: Duration,
    /// Largest backoff.
    pub max: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy { attempts: 8, base: Duration::from_millis(50), max: Duration::from_secs(5) }
    }
}

/// A blocking HTTP client for one server.
#[derive(Debug, Clone)]
pub struct Client {
    base: String,
    token: Option<String>,
    agent: ureq::Agent,
    retry: RetryPolicy,
}

impl Client {
    /// A client for `base` (e.g. `http://127.0.0.1:8080`).
    pub fn new(base: &str) -> Self {
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(60)))
            .build();
        Client {
            base: base.trim_end_matches('/').to_string(),
            token: None,
            agent: config.into(),
            retry: RetryPolicy::default(),
        }
    }
    /// Sets the analyst bearer token.
    pub fn with_token(mut self, token: &str) -> Self {
        self.token = Some(token.to_string());
        self
    }
    /// Sets the retry policy.
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }
    /// The base URL.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// Sends a request with retries on transport errors, 5xx and 429; 4xx fail at once.
    fn request(&self, method: &str, path: &str, body: Option<&[u8]>) -> Result<Vec<u8>> {
        let url = format!("{}{}", self.base, path);
        let attempts = self.retry.attempts.max(1);
        let mut last = String::new();
        let mut rng = harmony_core::sampling::fast_rng(harmony_core::sampling::secure_rng().next_u64());
        for attempt in 0..attempts {
            if attempt > 0 {
                let cap = self.retry.base.saturating_mul(1 << attempt.min(16)).min(self.retry.max);
                let wait = cap.mul_f64(harmony_core::sampling::uniform01(&mut rng));
                std::thread::sleep(wait);
            }
            let resp = match (method, body) {
                ("GET", _) => {
                    let mut r = self.agent.get(&url);
                    if let Some(t) = &self.token {
                        r = r.header("authorization", &format!("Bearer {t}"));
                    }
                    r.call()
                }
                (_, b) => {
                    let mut r = self.agent.post(&url).content_type("application/json");
                    if let Some(t) = &self.token {
                        r = r.header("authorization", &format!("Bearer {t}"));
                    }
                    r.send(b.unwrap_or(&[]))
                }
            };
            let mut resp = match resp {
                Ok(r) => r,
                Err(e) => {
                    last = e.to_string();
                    continue;
                }
            };
            let status = resp.status().as_u16();
            let bytes = match resp.body_mut().with_config().limit(64 << 20).read_to_vec() {
                Ok(b) => b,
                Err(e) => {
                    last = e.to_string();
                    continue;
                }
            };
            if (200..300).contains(&status) {
                return Ok(bytes);
            }
            if status == 429 || status >= 500 {
                last = format!("HTTP {status}: {}", String::from_utf8_lossy(&bytes));
                continue;
            }
            let (field, message) = match serde_json::from_slice::<ErrorBody>(&bytes) {
                Ok(b) => (b.error.field, b.error.message),
                Err(_) => ("body".to_string(), String::from_utf8_lossy(&bytes).into_owned()),
            };
            return Err(ClientError::Rejected { status, field, message });
        }
        Err(ClientError::Unavailable { url, attempts, last })
    }

    fn parse<T: for<'de> Deserialize<'de>>(&self, path: &str, bytes: &[u8]) -> Result<T> {
        serde_json::from_slice(bytes)
            .map_err(|e| ClientError::Protocol { url: format!("{}{}", self.base, path), message: e.to_string() })
    }

    /// Creates a collection (analyst token required); returns its id and config.
    pub fn create_collection(&self, req: &CreateCollection) -> Result<Created> {
        let body = serde_json::to_vec(req).expect("JSON of a request");
        let bytes = self.request("POST", "/v1/collections", Some(&body))?;
        self.parse("/v1/collections", &bytes)
    }
    /// Fetches a collection's public client configuration.
    pub fn config(&self, collection: &str) -> Result<CollectionConfig> {
        let path = format!("/v1/collections/{collection}/config");
        let bytes = self.request("GET", &path, None)?;
        self.parse(&path, &bytes)
    }
    /// Submits a batch of encoded reports (retried with backoff; idempotent by report id).
    pub fn submit(&self, config: &CollectionConfig, reports: Vec<ReportItem>) -> Result<BatchAck> {
        let batch = ReportBatch { collection: config.id.clone(), config_version: config.config_version, reports };
        let body = serde_json::to_vec(&batch).expect("JSON of a batch");
        let path = format!("/v1/collections/{}/reports", config.id);
        let bytes = self.request("POST", &path, Some(&body))?;
        self.parse(&path, &bytes)
    }
    /// Submits an already serialized body (for tests and load generators).
    pub fn submit_raw(&self, collection: &str, body: &[u8]) -> Result<BatchAck> {
        let path = format!("/v1/collections/{collection}/reports");
        let bytes = self.request("POST", &path, Some(body))?;
        self.parse(&path, &bytes)
    }
    /// The current model round of a training collection.
    pub fn model(&self, collection: &str) -> Result<ModelState> {
        let path = format!("/v1/collections/{collection}/model");
        let bytes = self.request("GET", &path, None)?;
        self.parse(&path, &bytes)
    }
    /// Posts one randomized gradient.
    pub fn post_gradient(&self, collection: &str, post: &GradientPost) -> Result<GradientAck> {
        let path = format!("/v1/collections/{collection}/gradients");
        let body = serde_json::to_vec(post).expect("JSON of a gradient");
        let bytes = self.request("POST", &path, Some(&body))?;
        self.parse(&path, &bytes)
    }
    /// Current estimates (analyst token required).
    pub fn estimates(&self, collection: &str) -> Result<Estimates> {
        let path = format!("/v1/collections/{collection}/estimates");
        let bytes = self.request("GET", &path, None)?;
        self.parse(&path, &bytes)
    }
}

/// Builds the record mechanism a configuration describes.
pub fn mechanism(config: &CollectionConfig) -> Result<RecordMechanism> {
    Ok(RecordMechanism::new(config.schema.clone(), config.strategy.clone())?)
}

/// The feature map a training spec defines on a schema (the server and every device build the
/// same one; categorical attributes are zero-one encoded, the intercept first).
pub fn feature_map(
    schema: &harmony_core::schema::Schema,
    spec: &TrainSpec,
) -> harmony_core::Result<harmony_learn::features::FeatureMap> {
    use harmony_learn::features::{Encoding, FeatureMap, TargetSpec, Task, Threshold};
    let task = Task::parse(&spec.task)?;
    let target = TargetSpec {
        column: spec.target.clone(),
        positive: spec.positive.clone(),
        threshold: spec.threshold.map(Threshold::Value),
    };
    FeatureMap::new(schema, task, Encoding::ZeroOne, &target, &[])
}

fn check_record(schema: &harmony_core::schema::Schema, record: &[Value]) -> harmony_core::Result<()> {
    use harmony_core::Error;
    if record.len() != schema.len() {
        return Err(Error::param(
            "record",
            format!("{} values", record.len()),
            format!("{} (the schema)", schema.len()),
        ));
    }
    for (a, v) in schema.attributes().iter().zip(record) {
        let ok = match *v {
            Value::Unit(t) => a.is_numeric() && (-1.0..=1.0).contains(&t),
            Value::Category(c) => !a.is_numeric() && (c as usize) < a.cardinality(),
        };
        if !ok {
            return Err(Error::param(
                "record",
                format!("{}: {v:?}", a.name()),
                "a value of the attribute's kind (numeric on [-1, 1], or a label index)",
            ));
        }
    }
    Ok(())
}

/// The loss of a training spec's task.
pub fn train_loss(spec: &TrainSpec) -> harmony_core::Result<harmony_learn::loss::Loss> {
    Ok(harmony_learn::loss::Loss::for_task(harmony_learn::features::Task::parse(&spec.task)?))
}

/// Computes a device's randomized gradient at `model` for `record` (the schema's values,
/// target included): features, c·ℓ'(⟨w, x⟩, y)·x (c the spec's gradient scale) clipped to
/// [-1, 1]^d, randomized with `rng`.
/// Only the returned report leaves the device.
pub fn randomize_gradient<R: Rng + ?Sized>(
    config: &CollectionConfig,
    model: &ModelState,
    record: &[Value],
    rng: &mut R,
) -> Result<harmony_learn::remote::GradientReport> {
    let t = config.train.as_ref().ok_or_else(|| ClientError::NotTraining(config.id.clone()))?;
    check_record(&config.schema, record)?;
    let fm = feature_map(&config.schema, &t.spec)?;
    let d = fm.dimension();
    if model.parameters.len() != d {
        return Err(ClientError::Protocol {
            url: format!("/v1/collections/{}/model", config.id),
            message: format!("{} parameters, expected d = {d}", model.parameters.len()),
        });
    }
    let mech = harmony_learn::remote::RemoteMechanism::new(&t.spec.mechanism, config.strategy.epsilon, d)?;
    let mut x = vec![0.0; d];
    fm.encode_row(record, &mut x);
    let mut g = vec![0.0; d];
    let (loss, c) = (train_loss(&t.spec)?, t.spec.scale());
    // Refuses non-finite or huge parameters and scales (typed errors) before any randomization.
    harmony_learn::remote::device_gradient(loss, &model.parameters, &x, fm.target(record), c, &mut g)?;
    Ok(mech.randomize(&g, rng))
}

/// A fresh random report id (128 bits from `rng`, hex).
pub fn report_id<R: Rng + ?Sized>(rng: &mut R) -> String {
    let mut b = [0u8; 16];
    rng.fill_bytes(&mut b);
    protocol::to_hex(&b)
}

/// Randomizes an encoded record with `rng` and packs it as a batch item. Devices use
/// [`Device::report`] (secure RNG); simulations pass a seeded RNG here.
pub fn randomize_item<R: Rng + ?Sized>(
    mech: &RecordMechanism,
    record: &[Value],
    rng: &mut R,
    id: String,
    report: &mut RecordReport,
    scratch: &mut Vec<usize>,
    buf: &mut Vec<u8>,
) -> Result<ReportItem> {
    mech.randomize_into(record, rng, report, scratch)?;
    buf.clear();
    harmony_core::wire::encode_into(report, buf);
    Ok(ReportItem { id, report: protocol::to_hex(buf) })
}

/// One device's record of what it reported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerEntry {
    /// The batch item (report id and encoded report) made for the collection; for a gradient,
    /// the device id and the encoded gradient.
    pub item: ReportItem,
    /// Whether the server acknowledged it.
    pub acknowledged: bool,
    /// The round a gradient was computed for (training collections).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round: Option<u64>,
}

/// Where a device remembers its reports, one per collection.
pub trait Ledger {
    /// The entry for a collection.
    fn get(&self, collection: &str) -> Option<LedgerEntry>;
    /// Records an entry durably before returning.
    fn put(&mut self, collection: &str, entry: LedgerEntry) -> Result<()>;
}

/// An in-memory ledger (tests, simulations).
#[derive(Debug, Clone, Default)]
pub struct MemoryLedger(BTreeMap<String, LedgerEntry>);

impl Ledger for MemoryLedger {
    fn get(&self, collection: &str) -> Option<LedgerEntry> {
        self.0.get(collection).cloned()
    }
    fn put(&mut self, collection: &str, entry: LedgerEntry) -> Result<()> {
        self.0.insert(collection.to_string(), entry);
        Ok(())
    }
}

/// A JSON file ledger, rewritten atomically (write to a temporary file, fsync, rename).
#[derive(Debug, Clone)]
pub struct FileLedger {
    path: PathBuf,
    entries: BTreeMap<String, LedgerEntry>,
}

impl FileLedger {
    /// Opens (or starts) the ledger at `path`.
    pub fn open(path: &Path) -> Result<Self> {
        let err = |m: String| ClientError::Ledger { path: path.to_path_buf(), message: m };
        let entries = match std::fs::read(path) {
            Ok(b) => serde_json::from_slice(&b).map_err(|e| err(e.to_string()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(e) => return Err(err(e.to_string())),
        };
        Ok(FileLedger { path: path.to_path_buf(), entries })
    }
}

impl Ledger for FileLedger {
    fn get(&self, collection: &str) -> Option<LedgerEntry> {
        self.entries.get(collection).cloned()
    }
    fn put(&mut self, collection: &str, entry: LedgerEntry) -> Result<()> {
        use std::io::Write;
        self.entries.insert(collection.to_string(), entry);
        let err = |m: String| ClientError::Ledger { path: self.path.clone(), message: m };
        let tmp = self.path.with_extension("tmp");
        let mut f = std::fs::File::create(&tmp).map_err(|e| err(e.to_string()))?;
        f.write_all(&serde_json::to_vec(&self.entries).expect("JSON of a ledger")).map_err(|e| err(e.to_string()))?;
        f.sync_all().map_err(|e| err(e.to_string()))?;
        std::fs::rename(&tmp, &self.path).map_err(|e| err(e.to_string()))?;
        Ok(())
    }
}

/// A device: a secure randomizer and a ledger.
#[derive(Debug)]
pub struct Device<L: Ledger> {
    randomizer: harmony_core::client::SecureRandomizer,
    ledger: L,
}

impl<L: Ledger> Device<L> {
    /// A device with an OS-seeded randomizer.
    pub fn new(ledger: L) -> Self {
        Device { randomizer: harmony_core::client::SecureRandomizer::new(), ledger }
    }
    /// The ledger.
    pub fn ledger(&self) -> &L {
        &self.ledger
    }

    /// Reports `record` (encoded by the config's schema) to the collection once: randomizes
    /// and records the report in the ledger before sending; a later call after a failure
    /// resends the same report; after an acknowledgement it returns
    /// [`ClientError::AlreadyReported`].
    pub fn report(&mut self, client: &Client, config: &CollectionConfig, record: &[Value]) -> Result<BatchAck> {
        let entry = match self.ledger.get(&config.id) {
            Some(e) if e.acknowledged => return Err(ClientError::AlreadyReported(config.id.clone())),
            Some(e) => e,
            None => {
                let mech = mechanism(config)?;
                let report = self.randomizer.record(&mech, record)?;
                let id = report_id(&mut harmony_core::sampling::secure_rng());
                let item = ReportItem { id, report: protocol::to_hex(&harmony_core::wire::encode(&report)) };
                let e = LedgerEntry { item, acknowledged: false, round: None };
                self.ledger.put(&config.id, e.clone())?;
                e
            }
        };
        let ack = client.submit(config, vec![entry.item.clone()])?;
        self.ledger.put(&config.id, LedgerEntry { item: entry.item, acknowledged: true, round: None })?;
        Ok(ack)
    }

    /// Contributes one gradient to a training collection, once per device: fetches the model,
    /// computes the clipped gradient of `record` at the current parameters, randomizes it with the
    /// secure RNG, records it in the ledger and posts it. A later call after a failure resends
    /// the same gradient (the same device id and round); after an acknowledgement (or the server
    /// saying this device id already contributed) it returns [`ClientError::AlreadyReported`].
    /// Raw features never leave the device.
    pub fn contribute_gradient(
        &mut self,
        client: &Client,
        config: &CollectionConfig,
        record: &[Value],
    ) -> Result<GradientAck> {
        let entry = match self.ledger.get(&config.id) {
            Some(e) if e.acknowledged => return Err(ClientError::AlreadyReported(config.id.clone())),
            Some(e) => e,
            None => {
                let model = client.model(&config.id)?;
                let report = randomize_gradient(config, &model, record, &mut harmony_core::sampling::secure_rng())?;
                let id = report_id(&mut harmony_core::sampling::secure_rng());
                let item = ReportItem { id, report: protocol::to_hex(&harmony_core::wire::encode(&report)) };
                let e = LedgerEntry { item, acknowledged: false, round: Some(model.round) };
                self.ledger.put(&config.id, e.clone())?;
                e
            }
        };
        let post = GradientPost {
            device_id: entry.item.id.clone(),
            round: entry.round.unwrap_or(0),
            report: entry.item.report.clone(),
        };
        match client.post_gradient(&config.id, &post) {
            Ok(ack) => {
                self.ledger.put(&config.id, LedgerEntry { acknowledged: true, ..entry })?;
                Ok(ack)
            }
            // A retry of a gradient the server stored (its ack was lost).
            Err(ClientError::Rejected { status: 409, field, .. }) if field == "device_id" => {
                self.ledger.put(&config.id, LedgerEntry { acknowledged: true, ..entry })?;
                Err(ClientError::AlreadyReported(config.id.clone()))
            }
            Err(e) => Err(e),
        }
    }
}
