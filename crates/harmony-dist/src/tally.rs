//! Identical short reports, counted instead of decoded one by one.
//!
//! A counting oracle's reports are a few distinct short byte strings (GRR: the category;
//! Hadamard: a row and a bit; unary at small d: the bit vector), so a column of them repeats
//! each many times. The [`Tally`] keys every report of at most 12 bytes by its bytes (one
//! 128-bit word: the length, then the bytes, which is exactly a `BinaryView`'s inline view, so
//! a view column needs no copy), validates a report the first time it is seen, counts the
//! rest, and adds each distinct report once with its count ([`TaskAggregator::add_times`]).
//! Reports that are longer, or a column where most reports differ (OLH's seeds), take the
//! direct path: it switches itself off when it stops paying.

use harmony_tasks::{Task, TaskAggregator};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Most distinct reports held at once (a few MiB): then they are added and the tally restarts.
const MAX_DISTINCT: usize = 1 << 17;
/// Reports counted before the tally judges whether it pays: it switches off for good when
/// more than half of them were distinct.
const TRIAL_ROWS: u64 = 1 << 16;

/// The longest report a key holds.
pub const MAX_SHORT: usize = 12;

/// A report of at most [`MAX_SHORT`] bytes as one word: length (low 32 bits), then the bytes,
/// zero-padded (the Arrow `BinaryView` layout of an inline value).
pub fn key_of(report: &[u8]) -> Option<u128> {
    if report.len() > MAX_SHORT {
        return None;
    }
    let mut k = [0u8; 16];
    k[..4].copy_from_slice(&(report.len() as u32).to_le_bytes());
    k[4..4 + report.len()].copy_from_slice(report);
    Some(u128::from_le_bytes(k))
}

/// A `BinaryView` view as a key: `None` for a value stored out of line (longer than 12 bytes).
/// The padding is masked, so a view equals [`key_of`] of its bytes whoever wrote it.
#[inline]
pub fn key_of_view(view: u128) -> Option<u128> {
    let len = view as u32;
    match len {
        12 => Some(view),
        0..12 => Some(view & ((1u128 << (32 + 8 * len)) - 1)),
        _ => None,
    }
}

/// The report a key holds.
fn bytes_of(key: u128, out: &mut [u8; 16]) -> &[u8] {
    *out = key.to_le_bytes();
    let len = (key as u32) as usize;
    &out[4..4 + len]
}

/// A multiply-fold hash of the key (the table's keys are attacker-free: reports already
/// stored, and the worst case is a slower tally).
#[derive(Default)]
pub struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        bytes.iter().for_each(|&b| self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
    }
    fn write_u128(&mut self, k: u128) {
        let m = u128::from((k as u64) ^ ((k >> 64) as u64).rotate_left(29)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        self.0 = (m as u64) ^ ((m >> 64) as u64);
    }
}

/// Slots of the front table (a direct-mapped cache of counters: 8 KiB, in L1).
const FRONT: usize = 256;

/// Counts of distinct short reports not yet added (see the module's text). A report's counter
/// lives in the front table's slot for its key while it keeps coming (a compare and an
/// increment); a report that takes a busy slot moves the occupant's count into the table of
/// every report seen, which also remembers which reports were validated.
pub struct Tally {
    front: Box<[(u128, u64)]>,
    counts: HashMap<u128, u64, BuildHasherDefault<KeyHasher>>,
    rows: u64,
    judged: bool,
    off: bool,
}

impl Default for Tally {
    fn default() -> Self {
        Tally { front: vec![(0, 0); FRONT].into(), counts: HashMap::default(), rows: 0, judged: false, off: false }
    }
}

/// The front slot of a key.
#[inline(always)]
fn slot(key: u128) -> usize {
    (((key as u64) ^ ((key >> 64) as u64)).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 56) as usize
}

impl Tally {
    /// Whether the tally still takes reports.
    pub fn on(&self) -> bool {
        !self.off
    }
    /// Counts the report of `key`, validating it (as `task` does) the first time it is seen.
    #[inline(always)]
    pub fn add(&mut self, key: u128, task: &dyn Task) -> harmony_core::error::Result<()> {
        let i = slot(key);
        let e = &mut self.front[i];
        if e.1 != 0 && e.0 == key {
            e.1 += 1;
            return Ok(());
        }
        self.miss(key, i, task)
    }
    /// A report whose counter is not in its front slot: validated if never seen, then it takes
    /// the slot (the occupant's count moves to the table).
    #[cold]
    #[inline(never)]
    fn miss(&mut self, key: u128, i: usize, task: &dyn Task) -> harmony_core::error::Result<()> {
        if let std::collections::hash_map::Entry::Vacant(e) = self.counts.entry(key) {
            task.validate(bytes_of(key, &mut [0; 16]))?;
            e.insert(0);
        }
        let (old, n) = std::mem::replace(&mut self.front[i], (key, 1));
        if n > 0 {
            *self.counts.get_mut(&old).expect("a front key is in the table") += n;
        }
        Ok(())
    }
    /// Records that `n` more reports were counted (once per batch: the trial's clock).
    pub fn counted(&mut self, n: u64) {
        self.rows += n;
    }
    /// Adds the counted reports to `agg`, and judges the tally after its trial.
    pub fn flush(&mut self, agg: &mut dyn TaskAggregator) -> harmony_core::error::Result<()> {
        for (key, n) in self.front.iter_mut().filter(|e| e.1 > 0) {
            *self.counts.get_mut(key).expect("a front key is in the table") += std::mem::take(n);
        }
        let distinct = self.counts.len() as u64;
        let mut buf = [0u8; 16];
        for (&key, &times) in self.counts.iter().filter(|(_, n)| **n > 0) {
            agg.add_times(bytes_of(key, &mut buf), times)?;
        }
        self.counts.clear();
        if !self.judged && self.rows >= TRIAL_ROWS {
            self.judged = true;
            self.off = 2 * distinct > self.rows;
        }
        self.rows = 0;
        Ok(())
    }
    /// Whether to flush now: the table is full, or the trial is over.
    pub fn due(&self) -> bool {
        self.counts.len() >= MAX_DISTINCT || (!self.judged && self.rows >= TRIAL_ROWS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use harmony_core::schema::Value as Cell;

    fn task(mechanism: &str) -> Box<dyn Task> {
        let req = serde_json::json!({"epsilon": 1.0,
            "schema": [{"kind": "categorical", "name": "c", "categories": ["a", "b", "c", "d", "e"]}],
            "task": {"kind": "frequency", "attribute": "c", "mechanism": mechanism}});
        let config = harmony_tasks::resolve(&serde_json::from_value(req).unwrap(), "t").unwrap();
        harmony_tasks::build(&config).unwrap()
    }

    /// Tallies `n` reports of `mechanism` (the short ones), flushing when due; whether the
    /// tally is still on, and the reports added.
    fn run(mechanism: &str, n: u64) -> (bool, u64) {
        let task = task(mechanism);
        let (mut tally, mut agg, mut report) = (Tally::default(), task.aggregator(), Vec::new());
        let mut rng = harmony_core::sampling::fast_rng(3);
        let mut long = 0;
        for i in 0..n {
            task.randomize(&harmony_tasks::Input::Record(&[Cell::Category((i % 5) as u32)]), &mut rng, &mut report)
                .unwrap();
            match key_of(&report).filter(|_| tally.on()) {
                Some(key) => {
                    tally.add(key, task.as_ref()).unwrap();
                    tally.counted(1);
                }
                None => {
                    agg.add(&report).unwrap();
                    long += 1;
                }
            }
            if tally.due() {
                tally.flush(agg.as_mut()).unwrap();
            }
        }
        tally.flush(agg.as_mut()).unwrap();
        assert_eq!(agg.count(), n, "{mechanism}: {long} reports took the direct path");
        (tally.on(), long)
    }

    #[test]
    fn the_tally_keeps_repeated_reports_and_drops_distinct_ones() {
        assert_eq!(run("grr", 100_000), (true, 0));
        assert_eq!(run("hadamard", 100_000), (true, 0));
        // About half of OLH's reports are short (the seed's varint), all distinct: after 2^16 of
        // them the tally is off and the rest take the direct path.
        let (on, long) = run("olh", 200_000);
        assert!(!on && long >= 200_000 - (1 << 16), "olh: on {on}, {long} direct");
    }

    #[test]
    fn keys_of_bytes_and_of_views_agree_and_round_trip() {
        for len in 0..=12usize {
            let report: Vec<u8> = (0..len as u8).map(|b| b.wrapping_mul(37).wrapping_add(1)).collect();
            let key = key_of(&report).unwrap();
            // A view with garbage in its padding is the same key.
            let garbage = if len < 12 { !0u128 << (32 + 8 * len) } else { 0 };
            assert_eq!(key_of_view(key | garbage), Some(key), "len {len}");
            assert_eq!(bytes_of(key, &mut [0; 16]), &report[..]);
        }
        assert_eq!(key_of(&[0; 13]), None);
        assert_eq!(key_of_view(13), None);
        assert_ne!(key_of(&[]), key_of(&[0]), "the length is part of the key");
    }
}
