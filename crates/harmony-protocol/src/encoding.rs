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

/// The value of each hex digit (either case); [`NOT_HEX`] for every other byte.
const NIBBLE: [u8; 256] = {
    let mut t = [NOT_HEX; 256];
    let mut i = 0;
    while i < 10 {
        t[b'0' as usize + i] = i as u8;
        i += 1;
    }
    let mut i = 0;
    while i < 6 {
        t[b'a' as usize + i] = 10 + i as u8;
        t[b'A' as usize + i] = 10 + i as u8;
        i += 1;
    }
    t
};
/// Not a hex digit: its high bits are set, which no digit's value (< 16) has.
const NOT_HEX: u8 = 0xff;

/// Decodes hex (either case) into `out`; `None` on an odd length or a non-hex character (then
/// `out`'s contents are unspecified). Branch-free over the digits (a table lookup per digit and
/// one check at the end): the server decodes every report of a batch with it.
pub fn from_hex_into(text: &str, out: &mut Vec<u8>) -> Option<()> {
    let b = text.as_bytes();
    if !b.len().is_multiple_of(2) {
        return None;
    }
    out.clear();
    out.resize(b.len() / 2, 0);
    let mut seen = 0u8;
    for (o, pair) in out.iter_mut().zip(b.chunks_exact(2)) {
        let (hi, lo) = (NIBBLE[pair[0] as usize], NIBBLE[pair[1] as usize]);
        seen |= hi | lo;
        *o = hi << 4 | lo;
    }
    (seen & 0xf0 == 0).then_some(())
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

    /// Every pair of ASCII characters (and non-ASCII ones) decodes as the digit-by-digit
    /// definition says: the table and the final check are the `match` they replaced.
    #[test]
    fn hex_table_equals_the_definition() {
        fn digit(c: char) -> Option<u8> {
            c.to_digit(16).map(|d| d as u8)
        }
        let mut out = Vec::new();
        for a in (0u8..128).map(char::from).chain(['é', '٣', '\u{ff}']) {
            for b in (0u8..128).map(char::from).chain(['é', '\u{ff}']) {
                let text: String = [a, b].iter().collect();
                let want = digit(a).zip(digit(b)).map(|(h, l)| vec![h << 4 | l]);
                let got = from_hex_into(&text, &mut out).map(|()| out.clone());
                assert_eq!(got, want, "{text:?}");
            }
        }
        assert!(from_hex_into("00g0", &mut out).is_none(), "a bad digit after good ones");
        from_hex_into("", &mut out).unwrap();
        assert!(out.is_empty());
    }
}
