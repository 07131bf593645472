//! Time-bucketed partial states: continuous collection.
//!
//! A collection has a period (one UTC hour, day or ISO week; a day unless its create asked for
//! another). Every batch of reports is stored with the saved accumulator state
//! ([`harmony_tasks::state::save`]) of its new reports, tagged with the bucket (the period) its
//! batch was received in, in the same transaction as the reports: nothing is acknowledged
//! outside a state. A bucket's state is the merge of its batches' states; a window is the merge
//! of the buckets it covers and the live accumulator the merge of all of them, so no estimate
//! ever rescans reports and a start reads the states, not the reports.
//!
//! Model rounds (`train`) and adaptive query rounds depend on the order of their reports: their
//! state does not split by period, so they keep one live accumulator and no windows.

use crate::error::ApiError;
use crate::store::{BucketDelta, Store, StoreError};
use harmony_tasks::{Task, TaskAggregator};
use std::collections::BTreeMap;
use std::ops::ControlFlow;

pub use harmony_protocol::Period;

/// Seconds in an hour and a day.
const HOUR: i64 = 3_600;
const DAY: i64 = 86_400;

/// Parses a period's name; the error names `field`.
pub fn parse_period(field: &str, s: &str) -> Result<Period, ApiError> {
    Period::from_name(s).ok_or_else(|| ApiError::bad(field, format!("{field} is {s:?}, expected hour, day or week")))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's `days_from_civil`).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Parses an instant: an ISO date (`2026-11-28`, its 00:00 UTC) or a UTC timestamp
/// (`2026-11-28T13:00:00Z`, `2026-11-28T13:00Z`, the `Z` optional); the error names `field`.
pub fn parse_instant(field: &str, raw: &str) -> Result<i64, ApiError> {
    let s = raw.replace("%3A", ":").replace("%3a", ":");
    let bad = || {
        ApiError::bad(
            field,
            format!("{field} is {raw:?}, expected an ISO date YYYY-MM-DD or a UTC timestamp YYYY-MM-DDTHH:MM[:SS]Z"),
        )
    };
    let s = s.strip_suffix('Z').unwrap_or(&s);
    let (date, time) = s.split_once('T').unwrap_or((s, ""));
    let num = |p: &str, len: usize| {
        if p.len() == len && p.bytes().all(|b| b.is_ascii_digit()) { p.parse::<i64>().ok() } else { None }
    };
    let mut parts = date.split('-');
    let (Some(y), Some(m), Some(d), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
        return Err(bad());
    };
    let (y, m, d) = (num(y, 4).ok_or_else(bad)?, num(m, 2).ok_or_else(bad)?, num(d, 2).ok_or_else(bad)?);
    let month_days = [
        31,
        if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    if !(1..=12).contains(&m) || d < 1 || d > month_days[(m - 1) as usize] {
        return Err(bad());
    }
    let mut secs = 0;
    if !time.is_empty() {
        let hms: Vec<&str> = time.split(':').collect();
        if !(2..=3).contains(&hms.len()) {
            return Err(bad());
        }
        let limits = [23, 59, 59];
        for (i, (p, max)) in hms.iter().zip(limits).enumerate() {
            let v = num(p, 2).filter(|v| *v <= max).ok_or_else(bad)?;
            secs += v * [HOUR, 60, 1][i];
        }
    }
    Ok(days_from_civil(y, m, d) * DAY + secs)
}

/// An instant as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn iso(t: i64) -> String {
    let day = crate::api::collections::civil_day(t.div_euclid(DAY) as i32);
    let s = t.rem_euclid(DAY);
    format!("{day}T{:02}:{:02}:{:02}Z", s / HOUR, s % HOUR / 60, s % 60)
}

/// A half-open time window `[from, to)`, in Unix seconds, on bucket boundaries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// First instant in it.
    pub from: i64,
    /// First instant after it.
    pub to: i64,
}

impl Window {
    /// Everything.
    pub const ALL: Window = Window { from: i64::MIN, to: i64::MAX };

    /// A window from optional `from`/`to` texts (either side open when absent), both on
    /// boundaries of `period`; the errors name `from_field` or `to_field`.
    pub fn parse(
        period: Period,
        (from_field, from): (&str, Option<&str>),
        (to_field, to): (&str, Option<&str>),
    ) -> Result<Window, ApiError> {
        let side = |field: &str, v: Option<&str>, open: i64| -> Result<i64, ApiError> {
            let Some(v) = v else { return Ok(open) };
            let t = parse_instant(field, v)?;
            if !period.aligned(t) {
                let msg = format!(
                    "{field} is {v:?} ({}), not the start of a {} of this collection: windows are whole buckets (a {} starts at {})",
                    iso(t),
                    period.name(),
                    period.name(),
                    iso(period.start(t))
                );
                return Err(ApiError::bad(field, msg));
            }
            Ok(t)
        };
        let w = Window { from: side(from_field, from, i64::MIN)?, to: side(to_field, to, i64::MAX)? };
        if w.from >= w.to {
            let msg =
                format!("{to_field} ({}) is not after {from_field} ({}): the window is empty", iso(w.to), iso(w.from));
            return Err(ApiError::bad(to_field, msg));
        }
        Ok(w)
    }

    /// Whether the bucket starting at `b` lies in the window.
    pub fn holds(&self, b: i64) -> bool {
        self.from <= b && b < self.to
    }

    /// Whether two windows share an instant.
    pub fn overlaps(&self, other: &Window) -> bool {
        self.from < other.to && other.from < self.to
    }

    /// `[from, to)` as ISO timestamps (`null` for an open side).
    pub fn describe(&self) -> (Option<String>, Option<String>) {
        let side = |t: i64, open: i64| (t != open).then(|| iso(t));
        (side(self.from, i64::MIN), side(self.to, i64::MAX))
    }
}

/// A collection's bucket states in memory: each bucket's merged state, exactly its committed
/// reports.
pub struct Buckets {
    /// The collection's period.
    pub period: Period,
    /// Bucket start (Unix seconds) → accumulator of the reports received in it.
    pub states: BTreeMap<i64, Box<dyn TaskAggregator>>,
    /// On a store shared with other servers: how far their states are merged
    /// ([`crate::replicas`]).
    pub cursor: Option<crate::replicas::Cursor>,
}

impl Buckets {
    /// No buckets yet.
    pub fn new(period: Period) -> Self {
        Buckets { period, states: BTreeMap::new(), cursor: None }
    }

    /// Folds `delta` (a batch's new reports) into bucket `b`.
    pub fn add(&mut self, task: &dyn Task, b: i64, delta: &dyn TaskAggregator) -> harmony_core::Result<()> {
        self.states.entry(b).or_insert_with(|| task.aggregator()).merge(delta)
    }

    /// The merge of the buckets in `w`.
    pub fn window(&self, task: &dyn Task, w: &Window) -> harmony_core::Result<Box<dyn TaskAggregator>> {
        let mut agg = task.aggregator();
        for (_, s) in self.states.range(w.from..w.to.max(w.from)) {
            agg.merge(s.as_ref())?;
        }
        Ok(agg)
    }

    /// The first bucket's start and the last bucket's end, if any bucket holds reports.
    pub fn span(&self) -> Option<(i64, i64)> {
        let first = *self.states.keys().next()?;
        let last = *self.states.keys().next_back()?;
        Some((first, last + self.period.seconds()))
    }
}

/// A collection's bucket states and its live accumulator (their merge).
pub type Loaded = (Buckets, Box<dyn TaskAggregator>);

/// The bucket states of a collection and its live accumulator (their merge), read from the
/// store, or `None` when the store keeps no buckets. A collection stored before buckets were kept
/// gets day buckets once, from its reports' received days (reports stored before days were kept
/// go to the bucket of 1970-01-01).
pub fn load(store: &dyn Store, task: &dyn Task, key: i64) -> Result<Option<Loaded>, String> {
    if !store.supports_buckets() {
        return Ok(None);
    }
    let period = match store.period(key).map_err(|e| e.to_string())? {
        Some(s) => Period::from_seconds(s)
            .ok_or_else(|| format!("a stored period of {s} seconds, expected 3600, 86400 or 604800"))?,
        None => {
            backfill(store, task, key)?;
            Period::Day
        }
    };
    let mut buckets = Buckets::new(period);
    if store.shared() {
        let (states, cursor) = crate::replicas::load_all(store, task, key)?;
        (buckets.states, buckets.cursor) = (states, Some(cursor));
        let live = buckets.window(task, &Window::ALL).map_err(|e| e.to_string())?;
        return Ok(Some((buckets, live)));
    }
    let mut bad = None;
    store
        .for_each_bucket_state(key, &mut |b, state| {
            if bad.is_some() {
                return;
            }
            let agg = buckets.states.entry(b).or_insert_with(|| task.aggregator());
            if let Err(e) = harmony_tasks::state::merge(task, agg.as_mut(), state) {
                bad = Some(format!("a stored state of the bucket at {} does not merge: {e}", iso(b)));
            }
        })
        .map_err(|e| e.to_string())?;
    if let Some(e) = bad {
        return Err(e);
    }
    let live = buckets.window(task, &Window::ALL).map_err(|e| e.to_string())?;
    Ok(Some((buckets, live)))
}

/// Day buckets of a collection stored before buckets were kept, from its reports.
fn backfill(store: &dyn Store, task: &dyn Task, key: i64) -> Result<(), String> {
    let mut days: BTreeMap<i64, Box<dyn TaskAggregator>> = BTreeMap::new();
    let mut bad = 0u64;
    store
        .for_each_stored(key, &mut |r| {
            let b = i64::from(r.day.unwrap_or(0)) * DAY;
            let agg = days.entry(b).or_insert_with(|| task.aggregator());
            if task.validate(r.body).and_then(|()| agg.add(r.body)).is_err() {
                bad += 1;
            }
            ControlFlow::Continue(())
        })
        .map_err(|e| e.to_string())?;
    if bad > 0 {
        return Err(format!("{bad} stored reports do not decode"));
    }
    let mut states = Vec::with_capacity(days.len());
    for (b, agg) in days {
        states.push((b, harmony_tasks::state::save(task, agg.as_ref()).map_err(|e| e.to_string())?));
    }
    let n = states.len();
    if store.adopt_buckets(key, Period::Day.seconds(), states).map_err(|e| e.to_string())? {
        tracing::info!(collection_key = key, buckets = n, "stored day buckets of a collection kept before buckets");
    }
    Ok(())
}

/// The state a batch stores with its reports: every report's (the usual case, all new), and
/// the new ones' when the store finds some already stored. Returns the accumulator of every
/// report too (folded into the live state and the bucket when all were new).
pub fn delta(
    c: &std::sync::Arc<crate::state::Collection>,
    bucket: i64,
    reports: crate::store::Reports,
) -> Result<(Box<dyn TaskAggregator>, BucketDelta), ApiError> {
    let c = c.clone();
    let build = move |keep: &dyn Fn(usize) -> bool| -> harmony_core::Result<(Box<dyn TaskAggregator>, Vec<u8>)> {
        let mut agg = c.task.aggregator();
        for (i, (_, b)) in reports.iter().enumerate() {
            if keep(i) {
                agg.add(b)?;
            }
        }
        let state = harmony_tasks::state::save(c.task.as_ref(), agg.as_ref())?;
        Ok((agg, state))
    };
    let (all, state) = build(&|_| true).map_err(|e| ApiError::from_core("reports: ", e))?;
    let redo = Box::new(move |flags: &[bool]| -> Result<Vec<u8>, StoreError> {
        build(&|i| flags[i]).map(|(_, s)| s).map_err(|e| StoreError::Db(format!("a batch's state: {e}")))
    });
    Ok((all, BucketDelta { bucket, state, redo }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_and_periods() {
        assert_eq!(parse_instant("from", "1970-01-01").unwrap(), 0);
        assert_eq!(parse_instant("from", "2026-11-28").unwrap(), 20_785 * DAY);
        assert_eq!(parse_instant("from", "2026-11-28T13:05:09Z").unwrap(), 20_785 * DAY + 13 * HOUR + 5 * 60 + 9);
        assert_eq!(parse_instant("from", "2026-11-28T13%3A00").unwrap(), 20_785 * DAY + 13 * HOUR);
        for bad in ["2026-02-30", "2026-13-01", "26-11-28", "2026-11-28T24:00Z", "yesterday", ""] {
            let e = parse_instant("from", bad).unwrap_err();
            assert_eq!(e.field, "from", "{bad}");
        }
        assert_eq!(iso(20_785 * DAY + 13 * HOUR), "2026-11-28T13:00:00Z");
        // 2026-11-23 is a Monday.
        let monday = parse_instant("w", "2026-11-23").unwrap();
        assert_eq!(Period::Week.start(parse_instant("w", "2026-11-29T23:59:59Z").unwrap()), monday);
        assert_eq!(Period::Week.start(monday), monday);
        assert_eq!(Period::Day.start(monday + 5), monday);
        assert!(Period::Hour.divides(Period::Day) && !Period::Week.divides(Period::Day));
    }

    #[test]
    fn windows_are_whole_buckets() {
        let w = Window::parse(Period::Day, ("from", Some("2026-11-01")), ("to", Some("2026-11-08"))).unwrap();
        assert_eq!(w.to - w.from, 7 * DAY);
        let e = Window::parse(Period::Day, ("from", Some("2026-11-01T10:00Z")), ("to", None)).unwrap_err();
        assert_eq!(e.field, "from");
        assert!(e.message.contains("2026-11-01T00:00:00Z"), "{}", e.message);
        let e = Window::parse(Period::Day, ("from", Some("2026-11-08")), ("to", Some("2026-11-08"))).unwrap_err();
        assert_eq!(e.field, "to");
        assert!(Window::parse(Period::Hour, ("from", Some("2026-11-01T10:00Z")), ("to", None)).is_ok());
    }
}
