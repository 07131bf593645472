//! Report ids, hex and the size limits of a batch.

/// Largest number of reports in one batch.
pub const MAX_BATCH: usize = 10_000;
/// Longest report id (characters `[A-Za-z0-9_-]`).
pub const MAX_REPORT_ID: usize = 64;
/// Largest encoded report (bytes, before hex).
pub const MAX_REPORT_BYTES: usize = 4096;

/// Lower-case hex of bytes.
pub fn to_hex(bytes: &[u8]) -> String {
    const D: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        s.push(D[(b >> 4) as usize] as char);
        s.push(D[(b & 15) as usize] as char);
    }
    s
}

/// Decodes hex (either case) into `out`; `None` on an odd length or a non-hex character.
pub fn from_hex_into(text: &str, out: &mut Vec<u8>) -> Option<()> {
    let b = text.as_bytes();
    if !b.len().is_multiple_of(2) {
        return None;
    }
    out.clear();
    out.reserve(b.len() / 2);
    fn nib(c: u8) -> Option<u8> {
        match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            b'A'..=b'F' => Some(c - b'A' + 10),
            _ => None,
        }
    }
    for pair in b.chunks_exact(2) {
        out.push(nib(pair[0])? << 4 | nib(pair[1])?);
    }
    Some(())
}

/// Whether a report (or device) id is acceptable: 1..=64 characters of `[A-Za-z0-9_-]`.
pub fn valid_report_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_REPORT_ID
        && id.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_roundtrip_and_rejections() {
        let bytes: Vec<u8> = (0..=255).collect();
        let mut out = Vec::new();
        from_hex_into(&to_hex(&bytes), &mut out).unwrap();
        assert_eq!(out, bytes);
        from_hex_into("ABcd", &mut out).unwrap();
        assert_eq!(out, vec![0xab, 0xcd]);
        assert!(from_hex_into("abc", &mut out).is_none());
        assert!(from_hex_into("zz", &mut out).is_none());
        assert!(valid_report_id("a-Z_09"));
        assert!(!valid_report_id(""));
        assert!(!valid_report_id("a b"));
        assert!(!valid_report_id(&"x".repeat(65)));
    }
}
