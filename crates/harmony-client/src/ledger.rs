//! Where a device remembers what it reported, one entry per collection (keyed by the id the
//! device asked for).

use crate::{ClientError, Result};
use harmony_protocol::ReportItem;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

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
