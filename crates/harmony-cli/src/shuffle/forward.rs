//! Forwarding rounds upstream: per collection, independently (one collection's failure never
//! stops another's), each failing collection backed off on its own.

use super::Relay;
use super::buffer::Row;
use anyhow::{Context, Result};
use harmony_client::{Client, ClientError};
use harmony_core::sampling::secure_rng;
use harmony_protocol::{MAX_BATCH, ReportBatch, ReportItem, valid_report_id};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Largest forwarded body: batches are cut at this many hex bytes or `MAX_BATCH` reports.
const MAX_FORWARD_BYTES: usize = 16 << 20;
/// Longest wait before a failing collection is tried again.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// Forwards rounds as they become ready, for ever (woken by each buffered batch); drops groups
/// older than the group TTL that stayed below `min_batch`.
pub fn forward_loop(relay: &Relay, upstream: &Client, min_batch: u64) {
    let mut backoff: HashMap<String, (Instant, Duration)> = HashMap::new();
    loop {
        if let Err(e) = relay.expire(min_batch) {
            eprintln!("harmony shuffle: expiring old groups failed: {e:#}");
        }
        let now = Instant::now();
        let skip = |c: &str| backoff.get(c).is_some_and(|(at, _)| *at > now);
        let (n, failures) = forward_ready(relay, upstream, min_batch, &skip);
        if n > 0 {
            eprintln!("harmony shuffle: forwarded {n} reports");
        }
        let failed: Vec<String> = failures.iter().map(|(c, _)| c.clone()).collect();
        for (c, e) in failures {
            let delay = backoff.get(&c).map_or(Duration::from_secs(1), |(_, d)| (*d * 2).min(MAX_BACKOFF));
            eprintln!("harmony shuffle: forwarding collection {c} failed, retrying in {delay:?}: {e:#}");
            backoff.insert(c, (Instant::now() + delay, delay));
        }
        backoff.retain(|c, (at, _)| failed.contains(c) || *at > Instant::now());
        let size = relay.size.lock().expect("size lock");
        let _ = relay.wake.wait_timeout(size, Duration::from_millis(500)).expect("size lock");
    }
}

/// Forwards every collection (but those `skip` names) with a round in progress or at least
/// `min_batch` new reports; returns the reports forwarded and each collection that failed.
pub fn forward_ready(
    relay: &Relay,
    upstream: &Client,
    min_batch: u64,
    skip: &dyn Fn(&str) -> bool,
) -> (u64, Vec<(String, anyhow::Error)>) {
    let groups = match relay.buffer.lock().expect("buffer lock").groups() {
        Ok(g) => g,
        Err(e) => return (0, vec![("(the buffer)".into(), e)]),
    };
    let mut total = 0;
    let mut failures = Vec::new();
    for (collection, fresh, in_progress) in groups {
        if (!in_progress && fresh < min_batch) || skip(&collection) {
            continue;
        }
        match forward_collection(relay, upstream, &collection) {
            Ok(n) => total += n,
            Err(e) => failures.push((collection, e)),
        }
    }
    (total, failures)
}

/// Takes (or resumes) a collection's round, shuffles it and forwards it.
fn forward_collection(relay: &Relay, upstream: &Client, collection: &str) -> Result<u64> {
    if !valid_report_id(collection) {
        // Only a buffer written by an older relay holds such ids: no URL can name them.
        let why = "not a collection id: expected 1 to 64 of [A-Za-z0-9_-]";
        let (n, bytes) = relay.buffer.lock().expect("buffer lock").reject_collection(collection, why)?;
        relay.release(collection, n, bytes);
        anyhow::bail!("{n} reports moved to `rejected`: {why}");
    }
    let mut rows = relay.buffer.lock().expect("buffer lock").take_round(collection)?;
    super::shuffle(&mut rows, &mut secure_rng());
    forward_round(relay, upstream, collection, &rows)
}

/// Posts a shuffled round in order, batch by batch (one config version each), deleting each
/// batch once acknowledged.
fn forward_round(relay: &Relay, upstream: &Client, collection: &str, rows: &[Row]) -> Result<u64> {
    let mut start = 0;
    while start < rows.len() {
        let (mut end, mut bytes) = (start, 0);
        while end < rows.len()
            && end - start < MAX_BATCH
            && rows[end].version == rows[start].version
            && bytes + rows[end].report.len() + 64 <= MAX_FORWARD_BYTES
        {
            bytes += rows[end].report.len() + 64;
            end += 1;
        }
        forward_batch(relay, upstream, collection, rows[start].version, rows[start..end].iter().collect())?;
        start = end;
    }
    Ok(rows.len() as u64)
}

/// Posts one batch. When the upstream refuses one report (`reports[i]…`), only that report
/// is moved to `rejected` and the rest is posted again; a refusal of the whole batch (an
/// unknown collection, another config version) moves it all. 401, 403, 408 and 429 are kept
/// for a retry (the relay's token or the upstream's state, not the reports).
fn forward_batch(relay: &Relay, upstream: &Client, collection: &str, version: u32, mut chunk: Vec<&Row>) -> Result<()> {
    while !chunk.is_empty() {
        let reports = chunk.iter().map(|r| ReportItem { id: r.id.clone(), report: r.report.clone() }).collect();
        let batch = ReportBatch { collection: collection.to_string(), config_version: version, reports };
        let body = serde_json::to_vec(&batch).expect("JSON of a batch");
        let (status, field, message) = match upstream.submit_raw(collection, &body) {
            Ok(_) => {
                let seqs: Vec<i64> = chunk.iter().map(|r| r.seq).collect();
                let freed = relay.buffer.lock().expect("buffer lock").remove(&seqs, None)?;
                relay.release(collection, seqs.len() as u64, freed);
                return Ok(());
            }
            Err(ClientError::Rejected { status, field, message }) => (status, field, message),
            Err(e) => return Err(e).context(format!("forwarding to collection {collection}")),
        };
        if matches!(status, 401 | 403 | 408 | 429) {
            anyhow::bail!("the upstream answered {status}: {field}: {message}");
        }
        let why = format!("{status}: {field}: {message}");
        let one = offending_index(&field).filter(|&i| i < chunk.len());
        let out: Vec<&Row> = match one {
            Some(i) => vec![chunk.remove(i)],
            None => std::mem::take(&mut chunk),
        };
        eprintln!(
            "harmony shuffle: upstream refused {} reports of {collection} ({why}); kept in `rejected`",
            out.len()
        );
        let seqs: Vec<i64> = out.iter().map(|r| r.seq).collect();
        let freed = relay.buffer.lock().expect("buffer lock").remove(&seqs, Some(&why))?;
        relay.release(collection, seqs.len() as u64, freed);
    }
    Ok(())
}

/// `i` of an error field `reports[i]…`.
fn offending_index(field: &str) -> Option<usize> {
    field.strip_prefix("reports[")?.split(']').next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn offending_index_reads_the_field() {
        assert_eq!(super::offending_index("reports[54].report"), Some(54));
        assert_eq!(super::offending_index("reports[0].id"), Some(0));
        assert_eq!(super::offending_index("reports"), None);
        assert_eq!(super::offending_index("collection"), None);
    }
}
