//! What `harmony query` prints of names others chose (query names, labels, candidates): control,
//! line-separator and bidirectional control characters are shown escaped (`\u{1b}`), so a name
//! cannot clear the terminal, move the cursor or reorder the text around it.

use harmony_protocol::estimates::EstimateDocument;
use serde_json::Value;

/// Whether `c` is shown escaped.
fn unprintable(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{2028}' | '\u{2029}' | '\u{061C}' | '\u{200E}' | '\u{200F}')
        || ('\u{202A}'..='\u{202E}').contains(&c)
        || ('\u{2066}'..='\u{2069}').contains(&c)
}

/// `s` with every [`unprintable`] character written as `\u{…}`.
pub fn escape(s: &str) -> String {
    if !s.chars().any(unprintable) {
        return s.to_string();
    }
    s.chars().map(|c| if unprintable(c) { c.escape_unicode().to_string() } else { c.to_string() }).collect()
}

/// Every string of `v` (keys included) escaped.
fn escape_value(v: Value) -> Value {
    match v {
        Value::String(s) => Value::String(escape(&s)),
        Value::Array(items) => Value::Array(items.into_iter().map(escape_value).collect()),
        Value::Object(map) => Value::Object(map.into_iter().map(|(k, v)| (escape(&k), escape_value(v))).collect()),
        other => other,
    }
}

/// `doc` with every string escaped, for the table view (the document is unchanged if it does
/// not round-trip, which a server's document always does).
pub fn doc(doc: &EstimateDocument) -> EstimateDocument {
    let escaped = serde_json::to_value(doc).map(escape_value).and_then(serde_json::from_value);
    escaped.unwrap_or_else(|_| doc.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_controls_are_escaped() {
        assert_eq!(escape("\u{1b}[2J\u{1b}[31mFAKE\r\u{7}"), "\\u{1b}[2J\\u{1b}[31mFAKE\\u{d}\\u{7}");
        assert_eq!(escape("a\u{202e}b\u{2028}"), "a\\u{202e}b\\u{2028}");
        assert_eq!(escape("état <=50K"), "état <=50K");
    }
}
