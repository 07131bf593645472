//! # harmony-protocol
//!
//! Every type that crosses the wire between devices, the collection server and analysts:
//!
//! * [`spec`]: what an analyst asks for — `POST /v1/collections` ([`CreateCollection`]): a
//!   schema, ε and one [`TaskSpec`] (means, frequency, range, heavy hitters, marginals, linear
//!   queries, train), each with typed options.
//! * [`config`]: what a device fetches — `GET /v1/collections/{id}/config`
//!   ([`CollectionConfig`]): the spec with every choice the server made written out.
//! * [`bodies`]: report batches, acknowledgements, model rounds, errors.
//! * [`estimates`]: the estimate document of each task (`GET …/estimates`), every number with
//!   its standard error and 95% CI (`null` when there is none yet).
//! * [`encoding`]: report ids, hex, size limits.
//! * [`typed`]: each task's spec and estimate types to and from [`TaskSpec`] and [`TaskEstimate`].
//!
//! Types only: no I/O, no randomizers (those live in harmony-core, -analytics and -learn; the
//! task registry `harmony-tasks` builds them from a config).
//!
//! Reports travel as their versioned binary wire encoding ([`harmony_core::wire`]), hex-encoded
//! inside a JSON batch: `{"collection": ID, "config_version": 3, "reports": [{"id": RID,
//! "report": HEX}, ...]}`. A report id is chosen by the device (random 128 bits) and makes a
//! retried batch idempotent.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod bodies;
pub mod config;
pub mod encoding;
pub mod estimates;
#[cfg(feature = "openapi")]
mod openapi;
pub mod period;
pub mod spec;
pub mod typed;

pub use bodies::{
    AnswerAck, AnswerPost, BatchAck, CollectionSummary, DeviceKey, EnrollRequest, Enrolled, ErrorBody, ErrorDetail,
    GradientAck, GradientPost, ModelState, QueryRound, ReportBatch, ReportItem, TokenCreated, TokenInfo, TokenRequest,
};
pub use config::{CONFIG_VERSION, CollectionConfig, Created, TrainPublished};
pub use encoding::{MAX_BATCH, MAX_REPORT_BYTES, MAX_REPORT_ID, from_hex_into, to_hex, valid_report_id};
pub use estimates::{EstimateDocument, TaskEstimate};
pub use period::Period;
pub use spec::{CollectionLabel, CreateCollection, NewCollection, TaskKind, TaskSpec};
pub use typed::WrongTask;
