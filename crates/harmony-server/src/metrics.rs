//! `GET /metrics`: Prometheus text.

use std::sync::atomic::{AtomicU64, Ordering};

/// Counters of the ingest path.
#[derive(Default)]
pub struct Metrics {
    /// Reports stored and aggregated.
    pub accepted: AtomicU64,
    /// Reports whose id was already stored.
    pub duplicates: AtomicU64,
    /// Rejected batches (4xx/5xx).
    pub rejected_batches: AtomicU64,
    /// Acknowledged batches.
    pub batches: AtomicU64,
    /// Total handling time of acknowledged batches, microseconds.
    pub commit_micros: AtomicU64,
}

impl Metrics {
    /// The Prometheus text of the counters and the number of collections.
    pub fn render(&self, collections: u64) -> String {
        let mut s = String::new();
        let mut line = |name: &str, help: &str, kind: &str, v: u64| {
            s.push_str(&format!("# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {v}\n"));
        };
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        line("harmony_reports_accepted_total", "Reports stored and aggregated.", "counter", get(&self.accepted));
        line(
            "harmony_reports_duplicate_total",
            "Reports whose id was already stored.",
            "counter",
            get(&self.duplicates),
        );
        line("harmony_batches_total", "Acknowledged batches.", "counter", get(&self.batches));
        line("harmony_batches_rejected_total", "Rejected batches (4xx/5xx).", "counter", get(&self.rejected_batches));
        line(
            "harmony_batch_seconds_micros_total",
            "Total handling time of acknowledged batches, microseconds.",
            "counter",
            get(&self.commit_micros),
        );
        line("harmony_collections", "Collections served.", "gauge", collections);
        s
    }
}
