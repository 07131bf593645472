//! The bulk path of [`super::commit_group`] against a real PostgreSQL named by
//! `HARMONY_TEST_POSTGRES` (skipped without it). Each test works in a schema of its own, so it
//! neither sees nor drops the tables of the other PostgreSQL tests.

use super::*;
use crate::pg_copy::{COPY, copy_batch, encode};

/// A connection whose tables live in the fresh schema `schema` (dropped first if left over), the
/// tables created by [`PgStore::open`], the key of a new collection and the URL of the schema;
/// `None` without a server.
fn fresh(schema: &str) -> Option<(postgres::Client, i64, String)> {
    let Ok(url) = std::env::var("HARMONY_TEST_POSTGRES") else {
        eprintln!("HARMONY_TEST_POSTGRES not set: PostgreSQL test skipped");
        return None;
    };
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    admin.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema}")).unwrap();
    let sep = if url.contains('?') { '&' } else { '?' };
    let url = format!("{url}{sep}options=-csearch_path%3D{schema}");
    let key = PgStore::open(&url).unwrap().create_collection("c", "{}").unwrap();
    Some((postgres::Client::connect(&url, postgres::NoTls).unwrap(), key, url))
}

fn rows(ids: &[(&str, u8)]) -> Vec<(String, Vec<u8>)> {
    ids.iter().map(|(id, b)| (id.to_string(), vec![*b])).collect()
}

/// A job whose bucket state is `all` when every report is new, else the flags as bytes (1: new).
fn job(key: i64, reports: Vec<(String, Vec<u8>)>) -> Job {
    let redo: crate::store::Redo = Box::new(|flags: &[bool]| Ok(flags.iter().map(|f| u8::from(*f)).collect()));
    let delta = BucketDelta { bucket: 0, state: b"all".to_vec(), redo };
    Job { key, day: 1, reports: std::sync::Arc::new(reports), delta: Mutex::new(Some(delta)), reply: sync_channel(1).0 }
}

fn stored(c: &mut postgres::Client, key: i64) -> Vec<(String, Vec<u8>)> {
    let sql = "SELECT report_id, body FROM harmony_reports WHERE collection = $1 ORDER BY report_id";
    c.query(sql, &[&key]).unwrap().iter().map(|r| (r.get(0), r.get(1))).collect()
}

fn states(c: &mut postgres::Client, key: i64) -> Vec<Vec<u8>> {
    let sql = "SELECT state FROM harmony_bucket_states WHERE collection = $1 ORDER BY seq";
    c.query(sql, &[&key]).unwrap().iter().map(|r| r.get(0)).collect()
}

#[test]
fn copy_refuses_a_batch_with_a_stored_id_and_writes_none_of_it() {
    let Some((mut c, key, _)) = fresh("harmony_copy_refuses") else { return };
    let mut tx = c.transaction().unwrap();
    let stmt = tx.prepare(COPY).unwrap();
    let mut data = Vec::new();
    encode(&mut data, key, 7, &rows(&[("a", 1), ("b", 2)])).unwrap();
    let mut sp = tx.transaction().unwrap();
    assert!(copy_batch(&mut sp, &stmt, &data).unwrap(), "new ids are copied");
    sp.commit().unwrap();
    // "c" is new, "b" is stored: nothing of the copy is written, and the savepoint rolls back.
    encode(&mut data, key, 7, &rows(&[("c", 3), ("b", 2)])).unwrap();
    let mut sp = tx.transaction().unwrap();
    assert!(!copy_batch(&mut sp, &stmt, &data).unwrap(), "a stored id fails the copy");
    sp.rollback().unwrap();
    tx.commit().unwrap();
    assert_eq!(stored(&mut c, key), rows(&[("a", 1), ("b", 2)]));
    let day: i32 = c.query_one("SELECT day FROM harmony_reports WHERE report_id = 'a'", &[]).unwrap().get(0);
    assert_eq!(day, 7);
}

#[test]
fn a_group_commits_each_batch_alone_when_ids_repeat() {
    let Some((mut c, key, _)) = fresh("harmony_copy_group") else { return };
    let first = [job(key, rows(&[("a1", 1), ("a2", 2)])), job(key, rows(&[("b1", 3)]))];
    let out = commit_group(&mut c, &first, 1).unwrap();
    assert_eq!(out.into_iter().map(Result::unwrap).collect::<Vec<_>>(), vec![vec![true, true], vec![true]]);
    let second = [
        // A resent id with its bytes, and a new one.
        job(key, rows(&[("a1", 1), ("c1", 4)])),
        // A resent id with other bytes: this batch alone is refused.
        job(key, rows(&[("d1", 5), ("b1", 9)])),
        job(key, rows(&[("e1", 6), ("e2", 7)])),
        // An id of the batch before, in the same group.
        job(key, rows(&[("e1", 6), ("f1", 8)])),
    ];
    let out = commit_group(&mut c, &second, 1).unwrap();
    assert_eq!(out[0].as_ref().unwrap(), &vec![false, true]);
    assert!(matches!(&out[1], Err(StoreError::Conflict { index: 1, id }) if id == "b1"), "{:?}", out[1]);
    assert_eq!(out[2].as_ref().unwrap(), &vec![true, true]);
    assert_eq!(out[3].as_ref().unwrap(), &vec![false, true]);
    let want = rows(&[("a1", 1), ("a2", 2), ("b1", 3), ("c1", 4), ("e1", 6), ("e2", 7), ("f1", 8)]);
    assert_eq!(stored(&mut c, key), want, "each report once, the refused batch not at all");
    // Each stored batch's state, of its new reports only; none for the refused batch.
    let all = b"all".to_vec();
    assert_eq!(states(&mut c, key), vec![all.clone(), all.clone(), vec![0, 1], all, vec![0, 1]]);
}

/// Eight clients resend the same 20 batches, each in its own order, so that copies of one batch
/// race in both writers: every report is stored once and acknowledged as new exactly once. A
/// group that PostgreSQL aborted (two writers' groups crossing) wrote nothing and is retried, as
/// a client retries an error.
#[test]
fn resends_racing_in_two_writers_store_each_report_once() {
    let Some((mut c, key, url)) = fresh("harmony_copy_race") else { return };
    let store = PgStore::open(&url).unwrap();
    let batch =
        |b: usize| -> Vec<(String, Vec<u8>)> { (0..100).map(|i| (format!("r{b}-{i}"), vec![b as u8])).collect() };
    let new = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for t in 0..8 {
            let (store, new) = (&store, &new);
            s.spawn(move || {
                for k in 0..20 {
                    let b = (k * 7 + t * 3) % 20;
                    let flags = (0..20)
                        .find_map(|_| match store.insert_reports(key, batch(b)) {
                            Err(StoreError::Db(_)) => None,
                            r => Some(r.unwrap()),
                        })
                        .expect("a batch stored within 20 attempts");
                    new.fetch_add(flags.iter().filter(|f| **f).count(), std::sync::atomic::Ordering::Relaxed);
                }
            });
        }
    });
    assert_eq!(new.into_inner(), 2000, "each report acknowledged as new once");
    assert_eq!(stored(&mut c, key).len(), 2000);
}
