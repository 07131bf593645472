//! What `harmony submit` sent: a local record of (collection, file digest) pairs, so that
//! running the same submission twice is refused instead of making every row report twice (real
//! devices draw new report ids each run; the server cannot tell the second run from new
//! devices). Simulated devices (`--simulate-devices --seed`) resend the same report ids, which
//! the server stores once, so they are not recorded.
//!
//! The record is a JSON file beside the budget ledger (`harmony-submitted.json`): one entry per
//! submission, keyed by collection id and the SHA-256 of the data file.

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// The record's file name, in the budget ledger's directory.
pub const FILE_NAME: &str = "harmony-submitted.json";

/// One submission.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sent {
    /// The collection id.
    pub collection: String,
    /// SHA-256 of the data file, hex.
    pub sha256: String,
    /// The file as given.
    pub file: String,
    /// Devices sent.
    pub devices: usize,
    /// When (ISO 8601, UTC).
    pub at: String,
}

/// The record file: every submission made from this directory.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Record {
    /// The submissions, oldest first.
    pub sent: Vec<Sent>,
}

/// Where the record of a submission whose budget ledger is `ledger` lives.
pub fn path_beside(ledger: &Path) -> PathBuf {
    ledger.with_file_name(FILE_NAME)
}

/// SHA-256 of a file's bytes, hex (`None` for standard input, which cannot be read twice).
pub fn digest(path: &Path) -> Result<Option<String>> {
    if path == Path::new("-") {
        return Ok(None);
    }
    let mut f = std::fs::File::open(path).with_context(|| format!("--data {}", path.display()))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = std::io::Read::read(&mut f, &mut buf).with_context(|| format!("--data {}", path.display()))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(Some(harmony_protocol::to_hex(&h.finalize())))
}

impl Record {
    /// Reads the record (empty when the file does not exist).
    pub fn open(path: &Path) -> Result<Self> {
        match std::fs::read_to_string(path) {
            Ok(text) => serde_json::from_str(&text)
                .with_context(|| format!("{}: not a record of submissions (delete it to start anew)", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Record::default()),
            Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
        }
    }
    /// The earlier submission of this file to this collection, if any.
    pub fn find(&self, collection: &str, sha256: &str) -> Option<&Sent> {
        self.sent.iter().find(|s| s.collection == collection && s.sha256 == sha256)
    }
    /// Adds a submission and writes the record (through a temporary file, then renamed).
    pub fn add(&mut self, path: &Path, sent: Sent) -> Result<()> {
        self.sent.push(sent);
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, serde_json::to_vec_pretty(self)?).with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))
    }
}

/// Refuses a second submission of the file with digest `sha256` to `collection` (unless
/// `force`), naming when it was sent and how to send it again.
pub fn check(record: &Record, record_path: &Path, collection: &str, sha256: &str, force: bool) -> Result<()> {
    match record.find(collection, sha256) {
        Some(s) if !force => bail!(
            "{} was already submitted to collection {collection} ({} devices at {}, recorded in {}): sending it again would make every row report twice; pass --force to send it anyway",
            s.file,
            s.devices,
            s.at,
            record_path.display()
        ),
        Some(_) => {
            eprintln!(
                "warning: --force: this file was already submitted to collection {collection}; its rows report again"
            );
            Ok(())
        }
        None => Ok(()),
    }
}

/// Now, ISO 8601 in UTC.
pub fn now_iso() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    harmony_data::temporal::format_datetime(secs as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_submission_of_a_file_is_refused_unless_forced() {
        let dir = std::env::temp_dir().join(format!("harmony-sent-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let data = dir.join("rows.csv");
        std::fs::write(&data, "a\n1\n").unwrap();
        let path = path_beside(&dir.join("harmony-budget.json"));
        let _ = std::fs::remove_file(&path);
        let sha = digest(&data).unwrap().unwrap();
        assert_eq!(sha.len(), 64);
        let mut record = Record::open(&path).unwrap();
        check(&record, &path, "c1", &sha, false).unwrap();
        let sent =
            Sent { collection: "c1".into(), sha256: sha.clone(), file: "rows.csv".into(), devices: 1, at: now_iso() };
        record.add(&path, sent).unwrap();
        let record = Record::open(&path).unwrap();
        let e = check(&record, &path, "c1", &sha, false).unwrap_err().to_string();
        assert!(e.contains("already submitted to collection c1") && e.contains("--force"), "{e}");
        check(&record, &path, "c1", &sha, true).unwrap();
        check(&record, &path, "c2", &sha, false).unwrap();
        std::fs::write(&data, "a\n2\n").unwrap();
        check(&record, &path, "c1", &digest(&data).unwrap().unwrap(), false).unwrap();
        assert_eq!(digest(Path::new("-")).unwrap(), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
