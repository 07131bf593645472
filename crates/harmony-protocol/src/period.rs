//! The periods of continuous collection: a UTC hour, a UTC day or an ISO week. The server
//! buckets a collection's reports by the period they were received in; a recurring collection
//! asks each device for one report per period (the device keys its ledger and its budget's
//! charge by the period's start).

use serde::{Deserialize, Serialize};

/// Seconds in an hour, a day and a week.
const HOUR: i64 = 3_600;
const DAY: i64 = 86_400;
const WEEK: i64 = 7 * DAY;
/// 1970-01-01 was a Thursday: ISO weeks start on the Monday four days later.
const MONDAY: i64 = 4 * DAY;

/// The length of a collection's buckets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum Period {
    /// One UTC hour.
    Hour,
    /// One UTC day (the default).
    Day,
    /// One ISO week (Monday 00:00 UTC to the next Monday).
    Week,
}

impl Period {
    /// Every period, shortest first.
    pub const ALL: [Period; 3] = [Period::Hour, Period::Day, Period::Week];

    /// Its length in seconds (what the store keeps).
    pub fn seconds(self) -> i64 {
        match self {
            Period::Hour => HOUR,
            Period::Day => DAY,
            Period::Week => WEEK,
        }
    }

    /// The period of a stored length.
    pub fn from_seconds(s: i64) -> Option<Period> {
        Self::ALL.into_iter().find(|p| p.seconds() == s)
    }

    /// Its name in the API: `hour`, `day` or `week`.
    pub fn name(self) -> &'static str {
        match self {
            Period::Hour => "hour",
            Period::Day => "day",
            Period::Week => "week",
        }
    }

    /// The period named `s` (`hour`, `day` or `week`).
    pub fn from_name(s: &str) -> Option<Period> {
        Self::ALL.into_iter().find(|p| p.name() == s)
    }

    /// The start (Unix seconds) of the bucket holding instant `t`.
    pub fn start(self, t: i64) -> i64 {
        match self {
            Period::Week => (t - MONDAY).div_euclid(WEEK) * WEEK + MONDAY,
            p => t.div_euclid(p.seconds()) * p.seconds(),
        }
    }

    /// Whether `t` is a bucket boundary.
    pub fn aligned(self, t: i64) -> bool {
        self.start(t) == t
    }

    /// Whether every bucket of `self` lies inside one bucket of `coarser` (an hour in a day, a day
    /// in a week).
    pub fn divides(self, coarser: Period) -> bool {
        self <= coarser
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn periods_start_on_their_boundaries() {
        // 2026-01-07 (a Wednesday) 13:45:10 UTC.
        let t = 20_460 * DAY + 13 * HOUR + 45 * 60 + 10;
        assert_eq!(Period::Hour.start(t), 20_460 * DAY + 13 * HOUR);
        assert_eq!(Period::Day.start(t), 20_460 * DAY);
        assert_eq!(Period::Week.start(t), 20_458 * DAY, "the Monday before");
        assert!(Period::Week.aligned(20_458 * DAY) && !Period::Week.aligned(20_459 * DAY));
        for p in Period::ALL {
            assert_eq!(Period::from_name(p.name()), Some(p));
            assert_eq!(Period::from_seconds(p.seconds()), Some(p));
            assert_eq!(serde_json::to_string(&p).unwrap(), format!("\"{}\"", p.name()));
        }
        assert_eq!(Period::from_name("minute"), None);
    }
}
