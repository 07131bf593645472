//! Several servers on one PostgreSQL database (`HARMONY_TEST_POSTGRES`, as in tests/postgres.rs):
//! they start together on a fresh database. Each round runs in a database of its own, created and
//! dropped here, so the other PostgreSQL tests' tables are never touched. Without the variable
//! the test says so and passes.

use harmony_server::pg::PgStore;
use std::sync::{Arc, Barrier};

/// `url` with its database name replaced by `db`.
fn with_database(url: &str, db: &str) -> String {
    let (base, _) = url.rsplit_once('/').expect("a postgres:// URL ending in /database");
    format!("{base}/{db}")
}

#[test]
fn replicas_start_together_on_a_fresh_database() {
    let Ok(url) = std::env::var("HARMONY_TEST_POSTGRES") else {
        eprintln!("HARMONY_TEST_POSTGRES not set: PostgreSQL test skipped");
        return;
    };
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let db = format!("harmony_replicas_{}", std::process::id());
    // Concurrent `CREATE TABLE IF NOT EXISTS` of the same table is a race in PostgreSQL (one
    // session fails on the catalog's unique index): several rounds of six stores opening at once
    // on an empty database, each of which must open.
    for round in 0..5 {
        admin.batch_execute(&format!("DROP DATABASE IF EXISTS {db}")).unwrap();
        admin.batch_execute(&format!("CREATE DATABASE {db}")).unwrap();
        let fresh = with_database(&url, &db);
        let start = Arc::new(Barrier::new(6));
        let opened: Vec<Result<(), String>> = (0..6)
            .map(|_| {
                let (fresh, start) = (fresh.clone(), start.clone());
                std::thread::spawn(move || {
                    start.wait();
                    PgStore::open(&fresh).map(drop).map_err(|e| e.to_string())
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|h| h.join().unwrap())
            .collect();
        for (i, r) in opened.iter().enumerate() {
            assert!(r.is_ok(), "round {round}: store {i} of 6 failed to open a fresh database: {r:?}");
        }
    }
    admin.batch_execute(&format!("DROP DATABASE IF EXISTS {db}")).unwrap();
}
