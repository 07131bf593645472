//! Dates and times as numbers: ISO 8601 text (`2024-03-01`, `2024-03-01T12:30:00Z`,
//! `2024-03-01 12:30:00.25+02:00`) and Arrow dates/timestamps become days or seconds since the
//! Unix epoch (1970-01-01T00:00:00Z), the unit a schema names for the attribute.
//!
//! A datetime without an offset is read as UTC. Calendar arithmetic is the proleptic Gregorian
//! calendar (H. Hinnant's `days_from_civil`), exact for any year 0000–9999.

use serde::{Deserialize, Serialize};

/// The unit of a numeric attribute read from dates or timestamps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Unit {
    /// Days since 1970-01-01 (a date; a timestamp gives fractional days).
    Days,
    /// Seconds since 1970-01-01T00:00:00Z (a timestamp; a date is its midnight UTC).
    Seconds,
}

impl Unit {
    /// The unit in words, for notes and errors.
    pub fn describe(self) -> &'static str {
        match self {
            Unit::Days => "days since 1970-01-01",
            Unit::Seconds => "seconds since 1970-01-01T00:00:00Z",
        }
    }
    /// Converts `x` given in `from` into this unit.
    pub fn convert(self, x: f64, from: Unit) -> f64 {
        match (from, self) {
            (Unit::Days, Unit::Seconds) => x * DAY,
            (Unit::Seconds, Unit::Days) => x / DAY,
            _ => x,
        }
    }
}

/// Seconds per day.
pub const DAY: f64 = 86_400.0;

/// A parsed ISO 8601 value: a date (days) or a datetime (seconds).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Temporal {
    /// `YYYY-MM-DD`: days since the epoch.
    Date(i64),
    /// `YYYY-MM-DD[T ]HH:MM[:SS[.f]][Z|±HH[:]MM]`: seconds since the epoch.
    DateTime(f64),
}

impl Temporal {
    /// The value in `unit`.
    pub fn value(self, unit: Unit) -> f64 {
        match self {
            Temporal::Date(d) => unit.convert(d as f64, Unit::Days),
            Temporal::DateTime(s) => unit.convert(s, Unit::Seconds),
        }
    }
}

/// Days from 1970-01-01 to the date y-m-d.
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m as i64 + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date (y, m, d) `z` days after 1970-01-01.
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + (m <= 2) as i64, m, d)
}

fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// `n` ASCII digits at the start of `s`, as a number.
fn digits(s: &[u8], n: usize) -> Option<u32> {
    if s.len() < n || !s[..n].iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(s[..n].iter().fold(0, |acc, &b| acc * 10 + (b - b'0') as u32))
}

/// Parses `YYYY-MM-DD` (a valid calendar date) into days since the epoch.
fn date(s: &[u8]) -> Option<i64> {
    if s.len() < 10 || s[4] != b'-' || s[7] != b'-' {
        return None;
    }
    let (y, m, d) = (digits(s, 4)? as i64, digits(&s[5..], 2)?, digits(&s[8..], 2)?);
    ((1..=12).contains(&m) && d >= 1 && d <= days_in_month(y, m)).then(|| days_from_civil(y, m, d))
}

/// Parses a UTC offset (`Z`, `±HH`, `±HHMM`, `±HH:MM`) into seconds east of UTC.
fn offset(s: &[u8]) -> Option<i64> {
    match s {
        [] => Some(0),
        [b'Z' | b'z'] => Some(0),
        [sign @ (b'+' | b'-'), rest @ ..] => {
            let h = digits(rest, 2)? as i64;
            let m = match &rest[2..] {
                [] => 0,
                [b':', mm @ ..] | mm if mm.len() == 2 => digits(mm, 2)? as i64,
                _ => return None,
            };
            (h <= 23 && m <= 59).then_some(if *sign == b'-' { -1 } else { 1 } * (h * 3600 + m * 60))
        }
        _ => None,
    }
}

/// Parses the time part `HH:MM[:SS[.f]]` followed by an optional offset into seconds after
/// midnight UTC.
fn time(s: &[u8]) -> Option<f64> {
    let (h, m) = (digits(s, 2)?, digits(s.get(3..)?, 2)?);
    if s[2] != b':' || h > 23 || m > 59 {
        return None;
    }
    let mut rest = &s[5..];
    let mut sec = 0.0;
    if let [b':', tail @ ..] = rest {
        let whole = digits(tail, 2)?;
        if whole > 60 {
            return None;
        }
        let frac_len = match tail.get(2) {
            Some(b'.' | b',') => 1 + tail[3..].iter().take_while(|b| b.is_ascii_digit()).count(),
            _ => 0,
        };
        if frac_len == 1 {
            return None;
        }
        let frac: f64 =
            if frac_len > 0 { std::str::from_utf8(&tail[3..2 + frac_len]).ok()?.parse().ok()? } else { 0.0 };
        sec = whole as f64 + if frac_len > 0 { frac / 10f64.powi(frac_len as i32 - 1) } else { 0.0 };
        rest = &tail[2 + frac_len..];
    }
    let off = offset(rest)?;
    Some((h as i64 * 3600 + m as i64 * 60 - off) as f64 + sec)
}

/// Parses ISO 8601 text: a date, or a date and time (`T` or one space between them).
pub fn parse(s: &str) -> Option<Temporal> {
    let b = s.as_bytes();
    let days = date(b)?;
    match b.get(10) {
        None => Some(Temporal::Date(days)),
        Some(b'T' | b't' | b' ') => Some(Temporal::DateTime(days as f64 * DAY + time(&b[11..])?)),
        _ => None,
    }
}

/// `YYYY-MM-DD` for a day number.
pub fn format_date(days: i64) -> String {
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02}")
}

/// `YYYY-MM-DDTHH:MM:SS[.fff…]Z` for seconds since the epoch.
pub fn format_datetime(seconds: f64) -> String {
    let days = (seconds / DAY).floor();
    let rest = seconds - days * DAY;
    let whole = rest.floor() as i64;
    let (h, m, s) = (whole / 3600, whole / 60 % 60, whole % 60);
    let frac = rest - whole as f64;
    let frac = if frac > 0.0 { format!("{frac:.9}").trim_end_matches('0')[1..].to_string() } else { String::new() };
    format!("{}T{h:02}:{m:02}:{s:02}{frac}Z", format_date(days as i64))
}

/// Bounds around [min, max] (in `unit`) on calendar boundaries: whole years when the data span
/// two years or more, whole months from two months, whole days from two days (or for dates),
/// whole hours otherwise. Returns the bounds and the boundary's name.
pub fn outward(min: f64, max: f64, unit: Unit) -> (f64, f64, &'static str) {
    let (lo_s, hi_s) = (Unit::Seconds.convert(min, unit), Unit::Seconds.convert(max, unit));
    let span_days = (hi_s - lo_s) / DAY;
    let back = |s: f64| unit.convert(s, Unit::Seconds);
    if unit == Unit::Seconds && span_days < 2.0 {
        return (back((lo_s / 3600.0).floor() * 3600.0), back((hi_s / 3600.0).ceil() * 3600.0), "whole hours");
    }
    // The boundary on or before a day, and the boundary after a boundary.
    type Step = fn(i64) -> i64;
    let (floor, next, name): (Step, Step, _) = if span_days >= 730.0 {
        (
            |z| days_from_civil(civil_from_days(z).0, 1, 1),
            |b| days_from_civil(civil_from_days(b).0 + 1, 1, 1),
            "whole years",
        )
    } else if span_days >= 60.0 {
        let floor: Step = |z| {
            let (y, m, _) = civil_from_days(z);
            days_from_civil(y, m, 1)
        };
        let next: Step = |b| {
            let (y, m, _) = civil_from_days(b);
            days_from_civil(y + (m == 12) as i64, m % 12 + 1, 1)
        };
        (floor, next, "whole months")
    } else {
        (|z| z, |b| b + 1, "whole days")
    };
    let lo = floor((lo_s / DAY).floor() as i64);
    let top = floor((hi_s / DAY).floor() as i64);
    // The upper bound is the maximum itself when it falls on a boundary.
    let hi = if hi_s == top as f64 * DAY { top } else { next(top) };
    (back(lo as f64 * DAY), back(hi as f64 * DAY), name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_round_trip_and_known_days() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(days_from_civil(1969, 12, 31), -1);
        for z in (-800_000..800_000).step_by(997) {
            let (y, m, d) = civil_from_days(z);
            assert_eq!(days_from_civil(y, m, d), z);
        }
    }

    #[test]
    fn parses_iso_dates_and_datetimes() {
        assert_eq!(parse("2000-03-01"), Some(Temporal::Date(11_017)));
        assert_eq!(parse("2000-02-29"), Some(Temporal::Date(11_016)));
        assert_eq!(parse("1970-01-02T00:00:01Z"), Some(Temporal::DateTime(86_401.0)));
        assert_eq!(parse("1970-01-02 01:00"), Some(Temporal::DateTime(90_000.0)));
        assert_eq!(parse("1970-01-01T02:00:00+02:00"), Some(Temporal::DateTime(0.0)));
        assert_eq!(parse("1970-01-01T00:00:00-0130"), Some(Temporal::DateTime(5400.0)));
        assert_eq!(parse("1970-01-01T00:00:00.25"), Some(Temporal::DateTime(0.25)));
        for bad in [
            "2001-02-29",
            "2000-13-01",
            "2000-1-01",
            "20000101",
            "2000-01-01x",
            "2000-01-01T25:00",
            "2000-01-01T10:00:00.",
            "12",
            "",
        ] {
            assert_eq!(parse(bad), None, "{bad}");
        }
        assert_eq!(Temporal::Date(2).value(Unit::Seconds), 2.0 * DAY);
        assert_eq!(Temporal::DateTime(DAY / 2.0).value(Unit::Days), 0.5);
    }

    #[test]
    fn formats_round_trip() {
        assert_eq!(format_date(11_017), "2000-03-01");
        assert_eq!(format_datetime(86_401.5), "1970-01-02T00:00:01.5Z");
        assert_eq!(format_datetime(-1.0), "1969-12-31T23:59:59Z");
        assert_eq!(parse(&format_datetime(1.7e9)), Some(Temporal::DateTime(1.7e9)));
    }

    #[test]
    fn outward_bounds_fall_on_calendar_boundaries() {
        let d = |y, m, dd| days_from_civil(y, m, dd) as f64;
        assert_eq!(outward(d(2019, 5, 3), d(2023, 2, 1), Unit::Days), (d(2019, 1, 1), d(2024, 1, 1), "whole years"));
        assert_eq!(outward(d(2019, 5, 3), d(2019, 9, 1), Unit::Days), (d(2019, 5, 1), d(2019, 9, 1), "whole months"));
        assert_eq!(outward(d(2019, 5, 3), d(2019, 12, 9), Unit::Days).1, d(2020, 1, 1));
        assert_eq!(outward(d(2019, 5, 3), d(2019, 5, 9), Unit::Days), (d(2019, 5, 3), d(2019, 5, 9), "whole days"));
        let s = |x: f64| x * DAY;
        let (lo, hi, how) = outward(s(d(2019, 5, 3)) + 100.0, s(d(2019, 5, 3)) + 7300.0, Unit::Seconds);
        assert_eq!((lo, hi, how), (s(d(2019, 5, 3)), s(d(2019, 5, 3)) + 3.0 * 3600.0, "whole hours"));
    }
}
