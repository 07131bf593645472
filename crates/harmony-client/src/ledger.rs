//! Where a device remembers what it told servers, as one state kept together: the report it
//! made per collection (keyed by the id the device asked for), every ε and δ it spent, and the
//! permanent reports of its recurring series.
//!
//! The three live in one [`LedgerState`] and change together in one [`Ledger::update`], so
//! no crash, lost file or second process can leave a charge without its report (or a report
//! without its charge) behind a device's back. A [`FileLedger`] keeps the state in one JSON
//! file and holds an OS file lock across each read-check-write: two processes (or two
//! handles) on one file see each other's reports and spends, and never both pass a budget
//! check that only one of them fits.

use crate::Result;
use crate::budget::Spend;
use harmony_protocol::ReportItem;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

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

/// A recurring series' permanent report ([`crate::memo`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeriesEntry {
    /// The collections of the series this device was served so far.
    pub collections: u64,
    /// The epoch of the permanent report (`collections / refresh` when it was drawn).
    pub epoch: u64,
    /// The permanent report (hex).
    pub report: String,
}

/// Everything a device remembers (what a [`Ledger`] persists, and what the browser SDK keeps
/// in its storage).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LedgerState {
    /// The report made per collection.
    #[serde(default)]
    pub ledger: BTreeMap<String, LedgerEntry>,
    /// Every ε and δ charged.
    #[serde(default)]
    pub spends: Vec<Spend>,
    /// The permanent reports of recurring series, by series key.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub series: BTreeMap<String, SeriesEntry>,
}

/// Where a device keeps its [`LedgerState`].
pub trait Ledger {
    /// The state as last read or written (a snapshot: another process may have changed it
    /// since; every decision is made in [`Ledger::update`]).
    fn state(&self) -> &LedgerState;
    /// Runs `f` on the latest state with exclusive access (a file store re-reads it under its
    /// lock) and, when `f` returns `Ok(true)`, persists the state durably before returning.
    /// `f` changes the state only when it returns `Ok(true)`.
    fn update(&mut self, f: &mut dyn FnMut(&mut LedgerState) -> Result<bool>) -> Result<()>;
    /// The entry for a collection (from [`Ledger::state`]).
    fn get(&self, collection: &str) -> Option<LedgerEntry> {
        self.state().ledger.get(collection).cloned()
    }
}

/// An in-memory ledger (tests, simulations, the browser SDK, which persists the state itself).
#[derive(Debug, Clone, Default)]
pub struct MemoryLedger(pub LedgerState);

impl Ledger for MemoryLedger {
    fn state(&self) -> &LedgerState {
        &self.0
    }
    fn update(&mut self, f: &mut dyn FnMut(&mut LedgerState) -> Result<bool>) -> Result<()> {
        f(&mut self.0).map(drop)
    }
}

/// The state in one JSON file, rewritten atomically (temporary file, fsync, rename) under an
/// exclusive OS lock on a companion file (`NAME.lock`, never renamed), held across each
/// read-check-write. A missing file is an empty state; a corrupt one is an error (never read
/// as empty).
#[cfg(not(target_arch = "wasm32"))]
#[derive(Debug, Clone)]
pub struct FileLedger {
    path: std::path::PathBuf,
    state: LedgerState,
}

#[cfg(not(target_arch = "wasm32"))]
impl FileLedger {
    /// Opens (or starts) the ledger at `path`.
    pub fn open(path: &std::path::Path) -> Result<Self> {
        let mut ledger = FileLedger { path: path.to_path_buf(), state: LedgerState::default() };
        let _lock = ledger.lock()?;
        ledger.state = ledger.read()?;
        Ok(ledger)
    }
    /// The file.
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }
    fn err(&self, e: impl ToString) -> crate::ClientError {
        crate::ClientError::Ledger { path: self.path.clone(), message: e.to_string() }
    }
    /// `path` with `suffix` appended to its file name (`x.json` → `x.json.lock`: two ledgers
    /// never share a companion file).
    fn companion(&self, suffix: &str) -> std::path::PathBuf {
        let mut name = self.path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
        name.push(suffix);
        self.path.with_file_name(name)
    }
    /// The exclusive lock, released when the returned file is dropped.
    fn lock(&self) -> Result<std::fs::File> {
        let path = self.companion(".lock");
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| self.err(format!("lock file {}: {e}", path.display())))?;
        f.lock().map_err(|e| self.err(format!("lock {}: {e}", path.display())))?;
        Ok(f)
    }
    fn read(&self) -> Result<LedgerState> {
        match std::fs::read(&self.path) {
            Ok(b) => serde_json::from_slice(&b).map_err(|e| self.err(e)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(LedgerState::default()),
            Err(e) => Err(self.err(e)),
        }
    }
    fn write(&self, state: &LedgerState) -> Result<()> {
        use std::io::Write;
        let tmp = self.companion(".tmp");
        let written = (|| -> std::io::Result<()> {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(&serde_json::to_vec(state).expect("JSON of a ledger"))?;
            f.sync_all()?;
            std::fs::rename(&tmp, &self.path)
        })();
        written.map_err(|e| self.err(e))
    }
}

#[cfg(not(target_arch = "wasm32"))]
impl Ledger for FileLedger {
    fn state(&self) -> &LedgerState {
        &self.state
    }
    fn update(&mut self, f: &mut dyn FnMut(&mut LedgerState) -> Result<bool>) -> Result<()> {
        let _lock = self.lock()?;
        let mut state = self.read()?;
        let changed = f(&mut state);
        if let Ok(true) = changed {
            self.write(&state)?;
        }
        self.state = state;
        changed.map(drop)
    }
}
