//! Wire format: a compact, versioned binary envelope (postcard) and a JSON form for every
//! report type. Decoding checks the version, the report kind and that no bytes are left over;
//! it never panics. Range checks against a mechanism's parameters happen in its aggregator's
//! `validate` (the envelope alone does not know d or ε).
//!
//! Binary layout: `[version: u8 = 1][kind: u8][postcard payload]`.

use crate::error::{Error, Result};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// The current wire version.
pub const WIRE_VERSION: u8 = 1;

/// A report kind on the wire: its byte and its name (for error messages).
///
/// Each crate owns the kinds of the reports it defines and declares them next to the report
/// type (`impl WireReport`). Bytes are stable: never reuse one. Allocation:
///
/// | bytes | owner |
/// |---|---|
/// | 1–11, 13–19 | harmony-core ([`ReportKind`]) |
/// | 12, 40–49 | harmony-learn (12: the randomized gradient) |
/// | 20–39 | harmony-analytics |
///
/// The task registry (harmony-tasks) checks in a test that no two report types share a byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WireKind {
    /// The kind byte.
    pub byte: u8,
    /// The report type's name.
    pub name: &'static str,
}

/// harmony-core's report kinds (one byte each). Numbers are stable: never reuse one; 12 belongs
/// to harmony-learn's gradient report (see [`WireKind`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ReportKind {
    /// [`crate::numeric::NumericReport`].
    Numeric = 1,
    /// GRR: one category index.
    Grr = 2,
    /// SUE / OUE: a bit vector.
    Unary = 3,
    /// OLH: hash seed and hashed value.
    Olh = 4,
    /// 1-bit Hadamard: row index and sign.
    Hadamard = 5,
    /// Hadamard Response: one output index.
    HadamardResponse = 6,
    /// Bassily–Smith with a random projection: row index and sign.
    BassilySmith = 7,
    /// Adaptive (GRR or OUE).
    Adaptive = 8,
    /// Harmony 1-bit multi-attribute numeric: coordinate and sign.
    HarmonyBit = 9,
    /// Duchi multidimensional: sign vector.
    DuchiMulti = 10,
    /// A whole-record report of a multi-attribute strategy.
    Record = 11,
}

impl ReportKind {
    /// The kind as a [`WireKind`].
    pub const fn wire(self) -> WireKind {
        let name = match self {
            ReportKind::Numeric => "Numeric",
            ReportKind::Grr => "Grr",
            ReportKind::Unary => "Unary",
            ReportKind::Olh => "Olh",
            ReportKind::Hadamard => "Hadamard",
            ReportKind::HadamardResponse => "HadamardResponse",
            ReportKind::BassilySmith => "BassilySmith",
            ReportKind::Adaptive => "Adaptive",
            ReportKind::HarmonyBit => "HarmonyBit",
            ReportKind::DuchiMulti => "DuchiMulti",
            ReportKind::Record => "Record",
        };
        WireKind { byte: self as u8, name }
    }
}

/// A report type that travels on the wire.
pub trait WireReport: Serialize + DeserializeOwned {
    /// Its kind (byte and name).
    const KIND: WireKind;
}

/// Encodes a report into `buf` (appended; no allocation when `buf` has capacity).
pub fn encode_into<T: WireReport>(report: &T, buf: &mut Vec<u8>) {
    buf.push(WIRE_VERSION);
    buf.push(T::KIND.byte);
    // postcard to an extendable Vec cannot fail for our plain-data report types.
    let payload = postcard::to_extend(report, std::mem::take(buf)).expect("postcard encoding of a report");
    *buf = payload;
}

/// Encodes a report into a fresh buffer.
pub fn encode<T: WireReport>(report: &T) -> Vec<u8> {
    let mut buf = Vec::with_capacity(16);
    encode_into(report, &mut buf);
    buf
}

/// Decodes a report, rejecting a wrong version, a wrong kind, a truncated or garbled payload and
/// trailing bytes with [`Error::InvalidReport`].
pub fn decode<T: WireReport>(bytes: &[u8]) -> Result<T> {
    match bytes {
        [] => Err(Error::report("header", "0 bytes", "at least 2 bytes (version, kind)")),
        [_] => Err(Error::report("header", "1 byte", "at least 2 bytes (version, kind)")),
        [v, ..] if *v != WIRE_VERSION => Err(Error::report("version", v, format!("{WIRE_VERSION}"))),
        [_, k, ..] if *k != T::KIND.byte => {
            Err(Error::report("kind", k, format!("{} ({})", T::KIND.byte, T::KIND.name)))
        }
        [_, _, payload @ ..] => {
            let (report, rest) = postcard::take_from_bytes::<T>(payload).map_err(|e| {
                Error::report("payload", e.to_string(), format!("a well-formed {} report", T::KIND.name))
            })?;
            if !rest.is_empty() {
                return Err(Error::report(
                    "payload",
                    format!("{} trailing bytes", rest.len()),
                    "no bytes after the report",
                ));
            }
            Ok(report)
        }
    }
}

/// The JSON form of a report.
pub fn to_json<T: WireReport>(report: &T) -> String {
    serde_json::to_string(report).expect("JSON encoding of a report")
}

/// Parses the JSON form of a report.
pub fn from_json<T: WireReport>(text: &str) -> Result<T> {
    serde_json::from_str(text)
        .map_err(|e| Error::report("json", e.to_string(), format!("a {} report in JSON", T::KIND.name)))
}

impl WireReport for crate::numeric::NumericReport {
    const KIND: WireKind = ReportKind::Numeric.wire();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::numeric::NumericReport;

    #[test]
    fn roundtrip_and_rejections() {
        for r in [NumericReport::Sign(true), NumericReport::Fixed(-123_456_789)] {
            let b = encode(&r);
            assert_eq!(decode::<NumericReport>(&b).unwrap(), r);
            assert_eq!(from_json::<NumericReport>(&to_json(&r)).unwrap(), r);
        }
        let b = encode(&NumericReport::Fixed(1 << 40));
        assert!(decode::<NumericReport>(&[]).unwrap_err().to_string().contains("header"));
        assert!(decode::<NumericReport>(&b[..b.len() - 1]).unwrap_err().to_string().contains("payload"));
        let mut wrong = b.clone();
        wrong[0] = 9;
        assert!(decode::<NumericReport>(&wrong).unwrap_err().to_string().contains("version is 9"));
        wrong = b.clone();
        wrong[1] = 2;
        assert!(decode::<NumericReport>(&wrong).unwrap_err().to_string().contains("kind is 2"));
        let mut long = b.clone();
        long.push(0);
        assert!(decode::<NumericReport>(&long).unwrap_err().to_string().contains("trailing"));
        assert!(from_json::<NumericReport>("{\"Nope\":1}").is_err());
    }
}
