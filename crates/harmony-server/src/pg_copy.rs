//! PostgreSQL's bulk path for report batches: `COPY harmony_reports … FROM STDIN (FORMAT binary)`.
//!
//! A batch is first copied straight into `harmony_reports` inside its own savepoint. In the usual
//! case every id is new, the copy succeeds, and every report is flagged new: PostgreSQL then
//! inserts the rows in bulk (pages of heap tuples at once) with no per-row conflict check and no
//! ids sent back. If one of the batch's ids is already stored (a retry, a resent batch) the copy
//! fails on the primary key (`unique_violation`) and has written nothing: the caller rolls the
//! savepoint back and stores that batch on the per-row path (`INSERT … ON CONFLICT DO NOTHING
//! RETURNING`), which tells duplicates from conflicting bytes. Idempotency and the 409 on
//! conflicting bytes are therefore exactly the per-row path's; the copy only decides faster when
//! there is nothing to decide.
//!
//! The rows are encoded here in the binary copy format (a header, one tuple per report: the
//! field count, then each field's length and bytes in network order, and a trailer): collection
//! `bigint`, report id `text` (UTF-8, the connection's client encoding), body `bytea` and day
//! `integer`.

use crate::store::{StoreError, StoreResult};
use std::io::Write;

/// The copy statement; the columns in the order [`encode`] writes them.
pub(crate) const COPY: &str = "COPY harmony_reports (collection, report_id, body, day) FROM STDIN (FORMAT binary)";

/// The binary copy format's signature, flags (none) and header extension length (none).
const HEADER: &[u8] = b"PGCOPY\n\xff\r\n\0\0\0\0\0\0\0\0\0";
/// The fields of each tuple.
const FIELDS: i16 = 4;
/// The trailer: a tuple with field count -1.
const TRAILER: [u8; 2] = (-1i16).to_be_bytes();

/// Appends one field (its length, then its bytes) to `out`.
fn field(out: &mut Vec<u8>, name: &str, bytes: &[u8]) -> StoreResult<()> {
    let len = i32::try_from(bytes.len()).map_err(|_| {
        StoreError::Db(format!("{name} of {} bytes, expected at most {} for COPY", bytes.len(), i32::MAX))
    })?;
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(bytes);
    Ok(())
}

/// The binary copy data of one batch's rows `(report id, body)` of collection `key` received on
/// `day`, into `out` (cleared first).
pub(crate) fn encode(out: &mut Vec<u8>, key: i64, day: i32, reports: &[(String, Vec<u8>)]) -> StoreResult<()> {
    out.clear();
    let per_row = 2 + 4 + 8 + 4 + 4 + 4 + 4;
    out.reserve(HEADER.len() + TRAILER.len() + reports.iter().map(|(r, b)| per_row + r.len() + b.len()).sum::<usize>());
    out.extend_from_slice(HEADER);
    for (id, body) in reports {
        out.extend_from_slice(&FIELDS.to_be_bytes());
        field(out, "collection", &key.to_be_bytes())?;
        field(out, "report_id", id.as_bytes())?;
        field(out, "body", body)?;
        field(out, "day", &day.to_be_bytes())?;
    }
    out.extend_from_slice(&TRAILER);
    Ok(())
}

/// Whether `e` is PostgreSQL's `unique_violation` (an id of the copy is already stored).
fn unique_violation(e: &postgres::Error) -> bool {
    e.code() == Some(&postgres::error::SqlState::UNIQUE_VIOLATION)
}

/// The PostgreSQL error under an I/O error of the copy writer, if it carries one.
fn db_error(e: &std::io::Error) -> Option<&postgres::Error> {
    e.get_ref().and_then(|inner| inner.downcast_ref::<postgres::Error>())
}

/// Copies one batch's encoded rows (`data`, from [`encode`]) with the prepared copy statement
/// `stmt` in `tx`, which should be a savepoint of the batch's own: `Ok(true)` when every row was
/// stored, `Ok(false)` when one of the ids is already stored (nothing of the copy was written,
/// and `tx` is aborted: the caller rolls it back). Any other failure is an error.
pub(crate) fn copy_batch(
    tx: &mut postgres::Transaction<'_>,
    stmt: &postgres::Statement,
    data: &[u8],
) -> StoreResult<bool> {
    let mut writer = tx.copy_in(stmt)?;
    if let Err(e) = writer.write_all(data) {
        return match db_error(&e) {
            Some(d) if unique_violation(d) => Ok(false),
            Some(d) => Err(StoreError::Db(crate::pg::describe(d))),
            None => Err(StoreError::Db(format!("COPY of a batch: {e}"))),
        };
    }
    match writer.finish() {
        Ok(_) => Ok(true),
        Err(e) if unique_violation(&e) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_the_binary_copy_format() {
        let mut out = Vec::new();
        let rows = vec![("ab".to_string(), vec![7u8, 0, 255]), ("c".to_string(), Vec::new())];
        encode(&mut out, 0x0102, -3, &rows).unwrap();
        let mut want: Vec<u8> = b"PGCOPY\n\xff\r\n\0".to_vec();
        want.extend_from_slice(&[0; 8]);
        // Tuple 1: 4 fields; bigint 0x0102; text "ab"; bytea 07 00 ff; integer -3.
        want.extend_from_slice(&[0, 4, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 1, 2, 0, 0, 0, 2, b'a', b'b']);
        want.extend_from_slice(&[0, 0, 0, 3, 7, 0, 255, 0, 0, 0, 4, 0xff, 0xff, 0xff, 0xfd]);
        // Tuple 2: an empty body is a zero-length field, not NULL.
        want.extend_from_slice(&[0, 4, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 1, 2, 0, 0, 0, 1, b'c', 0, 0, 0, 0]);
        want.extend_from_slice(&[0, 0, 0, 4, 0xff, 0xff, 0xff, 0xfd, 0xff, 0xff]);
        assert_eq!(out, want);
        // The buffer is reused: a second batch replaces the first.
        encode(&mut out, 1, 0, &[]).unwrap();
        assert_eq!(out.len(), HEADER.len() + 2);
    }
}
