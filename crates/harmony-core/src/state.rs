//! An aggregator's counters as bytes: the partial state a distributed engine ships between its
//! partial and final aggregations. Only the counters travel; the parameters (ε, domain, hashes)
//! are rebuilt from the collection's config on the receiving side, so a state can only add
//! counts into an aggregator that already has the same shape: every length is checked, and a
//! state that does not fit is an error, never a panic.
//!
//! Little-endian fixed-width integers; a vector is its length (u64) then its items.

use crate::error::{Error, Result};

/// An aggregator whose counters save to bytes and add back into an aggregator of the same
/// parameters.
pub trait SaveState {
    /// Appends the counters.
    fn save_state(&self, w: &mut StateWriter<'_>);
    /// Adds the counters `save_state` wrote. On error `self` may hold part of them: callers
    /// merge into a copy (`harmony_tasks::state` does).
    fn merge_state(&mut self, r: &mut StateReader<'_>) -> Result<()>;
}

/// Appends counters to a buffer.
pub struct StateWriter<'a>(pub &'a mut Vec<u8>);

impl StateWriter<'_> {
    /// One u64.
    pub fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    /// One i128.
    pub fn i128(&mut self, v: i128) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    /// One u128.
    pub fn u128(&mut self, v: u128) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    /// One f64 (its bits: exact).
    pub fn f64(&mut self, v: f64) {
        self.u64(v.to_bits());
    }
    /// A length.
    pub fn len(&mut self, n: usize) {
        self.u64(n as u64);
    }
    /// u64s with their length.
    pub fn u64s(&mut self, v: &[u64]) {
        self.len(v.len());
        v.iter().for_each(|&x| self.u64(x));
    }
    /// i64s with their length.
    pub fn i64s(&mut self, v: &[i64]) {
        self.len(v.len());
        v.iter().for_each(|&x| self.u64(x as u64));
    }
    /// i128s with their length.
    pub fn i128s(&mut self, v: &[i128]) {
        self.len(v.len());
        v.iter().for_each(|&x| self.i128(x));
    }
    /// f64s with their length.
    pub fn f64s(&mut self, v: &[f64]) {
        self.len(v.len());
        v.iter().for_each(|&x| self.f64(x));
    }
}

/// Reads counters back; every error names the field being read.
pub struct StateReader<'a> {
    buf: &'a [u8],
    at: usize,
}

fn bad(field: &str, expected: String) -> Error {
    Error::Incompatible(format!("a saved aggregator state: {field}: {expected}"))
}

impl<'a> StateReader<'a> {
    /// Reads `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        StateReader { buf, at: 0 }
    }
    fn take<const N: usize>(&mut self, field: &str) -> Result<[u8; N]> {
        let end = self.at + N;
        let bytes = self.buf.get(self.at..end).ok_or_else(|| {
            bad(field, format!("{N} more bytes expected at offset {}, the state ends at {}", self.at, self.buf.len()))
        })?;
        self.at = end;
        Ok(bytes.try_into().expect("N bytes"))
    }
    /// One u64.
    pub fn u64(&mut self, field: &str) -> Result<u64> {
        self.take::<8>(field).map(u64::from_le_bytes)
    }
    /// One i128.
    pub fn i128(&mut self, field: &str) -> Result<i128> {
        self.take::<16>(field).map(i128::from_le_bytes)
    }
    /// One u128.
    pub fn u128(&mut self, field: &str) -> Result<u128> {
        self.take::<16>(field).map(u128::from_le_bytes)
    }
    /// One f64.
    pub fn f64(&mut self, field: &str) -> Result<f64> {
        self.u64(field).map(f64::from_bits)
    }
    /// A length that must equal `expected`.
    pub fn len_exactly(&mut self, field: &str, expected: usize) -> Result<()> {
        let n = self.u64(field)?;
        if n != expected as u64 {
            return Err(bad(field, format!("{n} items, expected {expected} (a state of another shape)")));
        }
        Ok(())
    }
    /// A length of items of `item_bytes` bytes each, at most what is left.
    pub fn len_any(&mut self, field: &str, item_bytes: usize) -> Result<usize> {
        let n = self.u64(field)?;
        let left = (self.buf.len() - self.at) / item_bytes.max(1);
        if n > left as u64 {
            return Err(bad(field, format!("{n} items, but only {left} fit in the rest of the state")));
        }
        Ok(n as usize)
    }
    /// Adds saved u64s into `into` (same length).
    pub fn add_u64s(&mut self, field: &str, into: &mut [u64]) -> Result<()> {
        self.len_exactly(field, into.len())?;
        for x in into.iter_mut() {
            *x = x.checked_add(self.u64(field)?).ok_or_else(|| bad(field, "a count that overflows".into()))?;
        }
        Ok(())
    }
    /// Adds saved i64s into `into` (same length).
    pub fn add_i64s(&mut self, field: &str, into: &mut [i64]) -> Result<()> {
        self.len_exactly(field, into.len())?;
        for x in into.iter_mut() {
            *x = x.checked_add(self.u64(field)? as i64).ok_or_else(|| bad(field, "a count that overflows".into()))?;
        }
        Ok(())
    }
    /// Adds saved i128s into `into` (same length).
    pub fn add_i128s(&mut self, field: &str, into: &mut [i128]) -> Result<()> {
        self.len_exactly(field, into.len())?;
        for x in into.iter_mut() {
            *x = x.checked_add(self.i128(field)?).ok_or_else(|| bad(field, "a count that overflows".into()))?;
        }
        Ok(())
    }
    /// Adds saved f64s into `into` (same length).
    pub fn add_f64s(&mut self, field: &str, into: &mut [f64]) -> Result<()> {
        self.len_exactly(field, into.len())?;
        for x in into.iter_mut() {
            *x += self.f64(field)?;
        }
        Ok(())
    }
    /// Succeeds when every byte was read.
    pub fn finish(&self) -> Result<()> {
        if self.at != self.buf.len() {
            return Err(bad("end", format!("{} bytes left over after the counters", self.buf.len() - self.at)));
        }
        Ok(())
    }
}

/// Saves every item of a slice (whose length the receiver checks).
pub fn save_all<T: SaveState>(w: &mut StateWriter<'_>, items: &[T]) {
    w.len(items.len());
    items.iter().for_each(|a| a.save_state(w));
}

/// Merges saved items into `items` (same length).
pub fn merge_all<T: SaveState>(r: &mut StateReader<'_>, field: &str, items: &mut [T]) -> Result<()> {
    r.len_exactly(field, items.len())?;
    items.iter_mut().try_for_each(|a| a.merge_state(r))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_round_trip_and_misfits_are_errors() {
        let mut buf = Vec::new();
        let mut w = StateWriter(&mut buf);
        w.u64(7);
        w.u64s(&[1, 2, 3]);
        w.f64(0.1);
        let mut into = [10u64, 20, 30];
        let mut r = StateReader::new(&buf);
        assert_eq!(r.u64("n").unwrap(), 7);
        r.add_u64s("counts", &mut into).unwrap();
        assert_eq!(into, [11, 22, 33]);
        assert_eq!(r.f64("sum").unwrap(), 0.1);
        r.finish().unwrap();
        // Another shape, a truncated state, trailing bytes.
        let mut r = StateReader::new(&buf);
        r.u64("n").unwrap();
        let e = r.add_u64s("counts", &mut [0u64; 2]).unwrap_err().to_string();
        assert!(e.contains("counts") && e.contains("3 items, expected 2"), "{e}");
        let mut r = StateReader::new(&buf[..20]);
        r.u64("n").unwrap();
        assert!(r.add_u64s("counts", &mut into).unwrap_err().to_string().contains("ends at 20"));
        let r = StateReader::new(&buf);
        assert!(r.finish().unwrap_err().to_string().contains("left over"));
        let mut long = Vec::new();
        StateWriter(&mut long).u64s(&[1]);
        long.truncate(8);
        assert!(StateReader::new(&long).len_any("items", 8).is_err(), "a length past the end is refused");
        let mut full = [u64::MAX, 0, 0];
        let e = StateReader::new(&buf[8..]).add_u64s("counts", &mut full).unwrap_err().to_string();
        assert!(e.contains("overflows"), "{e}");
    }
}
