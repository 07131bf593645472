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
/// | 1–11, 13–19 | harmony-core ([`ReportKind`]; 13–15 the sketches; 16 Subset Selection, declared with its report; 17–19 free) |
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
    /// Adaptive: the registered oracle of least variance for (ε, d).
    Adaptive = 8,
    /// Harmony 1-bit multi-attribute numeric: coordinate and sign.
    HarmonyBit = 9,
    /// Duchi multidimensional: sign vector.
    DuchiMulti = 10,
    /// A whole-record report of a multi-attribute strategy.
    Record = 11,
    /// Apple's Count Mean Sketch: hash index and m bits.
    Cms = 13,
    /// Apple's Hadamard Count Mean Sketch: hash index, coefficient index and sign.
    Hcms = 14,
    /// RAPPOR: cohort and Bloom-filter bits.
    Rappor = 15,
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
            ReportKind::Cms => "Cms",
            ReportKind::Hcms => "Hcms",
            ReportKind::Rappor => "Rappor",
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

/// Reads postcard's varint of a `bits`-bit integer from the start of `bytes` as postcard's
/// `try_take_varint_*` does (little-endian groups of 7 bits; at most ⌈bits/7⌉ bytes, the last of
/// which holds only the bits left): the value and the bytes read, `None` where postcard fails.
/// The reports' serde-free decoders (an engine's batch path) read with it.
pub fn take_varint(bytes: &[u8], bits: u32) -> Option<(u64, usize)> {
    let max = bits.div_ceil(7) as usize;
    let last = (1u8 << (bits % 7)) - 1;
    let mut out = 0u64;
    for (i, &b) in bytes.iter().take(max).enumerate() {
        out |= u64::from(b & 0x7F) << (7 * i);
        if b & 0x80 == 0 {
            return (i + 1 < max || b <= last).then_some((out, i + 1));
        }
    }
    None
}

/// Three near misses of an encoded report, for the decoders' agreement tests: cut at a random
/// length, one byte changed at random, one random byte appended.
#[cfg(test)]
pub(crate) fn mutations(bytes: &[u8], rng: &mut impl rand::RngExt) -> [Vec<u8>; 3] {
    let pos = rng.random_range(0..bytes.len());
    let mut changed = bytes.to_vec();
    changed[pos] = rng.random();
    [bytes[..pos].to_vec(), changed, [bytes, &[rng.random()]].concat()]
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

    /// postcard's own reading of a varint from the start of `bytes`, and the bytes it read.
    fn postcard_varint(bytes: &[u8], bits: u32) -> Option<(u64, usize)> {
        let read = match bits {
            32 => postcard::take_from_bytes::<u32>(bytes).map(|(v, rest)| (u64::from(v), rest)),
            _ => postcard::take_from_bytes::<u64>(bytes),
        };
        read.ok().map(|(v, rest)| (v, bytes.len() - rest.len()))
    }

    #[test]
    fn take_varint_reads_what_postcard_reads() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut agree = [0usize; 2];
        for n in 0..200_000 {
            let len = (next() % 14) as usize;
            // Bytes with the continuation bit set more often than not, so that long varints occur.
            let bytes: Vec<u8> = (0..len).map(|_| next() as u8 | if next() % 5 != 0 { 0x80 } else { 0 }).collect();
            for bits in [32, 64] {
                let want = postcard_varint(&bytes, bits);
                assert_eq!(take_varint(&bytes, bits), want, "{bytes:02x?}, {bits} bits");
                agree[want.is_some() as usize] += 1;
            }
            let v = next() >> (n % 64);
            let enc = postcard::to_allocvec(&v).unwrap();
            assert_eq!(take_varint(&[&enc[..], &[0xAB; 6]].concat(), 64), Some((v, enc.len())), "{v}");
            let v = v as u32;
            let enc = postcard::to_allocvec(&v).unwrap();
            assert_eq!(take_varint(&[&enc[..], &[0xCD; 6]].concat(), 32), Some((v as u64, enc.len())), "{v}");
        }
        assert!(agree[0] > 10_000 && agree[1] > 10_000, "refused and read: {agree:?}");
    }

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
