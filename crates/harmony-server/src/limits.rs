//! What a collection may ask for, checked whole before anything is built or stored: no unknown
//! fields (the typed parse refuses them in the envelope and the task spec; the schema's
//! attributes are checked here on the raw JSON), names of a documented character set, and cost
//! limits so that one create cannot hang or exhaust the server.
//! Every refusal is a 400 naming the field, the value and the limit.

use crate::error::ApiError;
use harmony_core::schema::{Attribute, Schema};
use harmony_protocol::CreateCollection;
use serde_json::Value;

/// Most attributes in a schema (sample-k's choice of k is quadratic in them: 1,000 take ~0.1 s).
pub const MAX_ATTRIBUTES: usize = 1000;
/// Most labels of one categorical attribute (a frequency oracle's domain d).
pub const MAX_CATEGORIES: usize = 4096;
/// Most labels over all attributes: bounds the aggregator's counters and the work per report
/// (OLH decodes a report in O(d) hash evaluations, so a report costs at most this many).
pub const MAX_LABELS: usize = 16_384;
/// Most characters in an attribute name.
pub const MAX_NAME: usize = 128;
/// Most bytes in a category label.
pub const MAX_LABEL_BYTES: usize = 256;
/// Largest |min|, |max| of a numeric attribute: below 2^53 every bound and their difference are
/// exact doubles, so [min, max] ↔ [-1, 1] stays finite and estimates are numbers, not null.
pub const MAX_BOUND: f64 = 1e15;
/// The fields an attribute of each kind has.
const NUMERIC_FIELDS: [&str; 5] = ["kind", "name", "min", "max", "missing"];
const CATEGORICAL_FIELDS: [&str; 4] = ["kind", "name", "categories", "missing"];

fn too_big(field: impl Into<String>, value: impl std::fmt::Display, limit: impl std::fmt::Display) -> ApiError {
    ApiError::bad(field, format!("{value}, the limit is {limit}"))
}

/// Refuses unknown fields inside the schema's attributes (`schema[3].bogus`), which the typed
/// parse would drop silently.
pub fn check_raw(raw: &Value) -> Result<(), ApiError> {
    let Some(attrs) = raw.get("schema").and_then(Value::as_array) else { return Ok(()) };
    for (i, a) in attrs.iter().enumerate() {
        let Some(obj) = a.as_object() else { continue };
        let allowed: &[&str] = match obj.get("kind").and_then(Value::as_str) {
            Some("numeric") => &NUMERIC_FIELDS,
            Some("categorical") => &CATEGORICAL_FIELDS,
            _ => continue,
        };
        if let Some(k) = obj.keys().find(|k| !allowed.contains(&k.as_str())) {
            let msg = format!("unknown field {k:?}, expected one of {}", allowed.join(", "));
            return Err(ApiError::bad(format!("schema[{i}].{k}"), msg));
        }
    }
    Ok(())
}

/// Whether `name` is a valid attribute name: 1 to [`MAX_NAME`] characters, each a letter or a
/// digit (any script) or one of `_ - . : / ( ) #` and space; no control, markup or quote
/// characters (`< > & " ' \``), no leading or trailing space.
pub fn valid_name(name: &str) -> bool {
    let n = name.chars().count();
    (1..=MAX_NAME).contains(&n)
        && name.trim() == name
        && name.chars().all(|c| c.is_alphanumeric() || "_-.:/()# ".contains(c))
}

/// Whether `label` is a valid category label: 1 to [`MAX_LABEL_BYTES`] bytes, no
/// [`unsafe_char`] (labels are data values such as `<=50K`; clients escape them when rendering).
pub fn valid_label(label: &str) -> bool {
    (1..=MAX_LABEL_BYTES).contains(&label.len()) && !label.chars().any(unsafe_char)
}

/// Whether `c` may not appear in a name, label or other text a request carries: control
/// characters (they drive terminals: `ESC [ 2 J` clears the admin's screen), line and paragraph
/// separators (they end JavaScript strings and lines) and bidirectional overrides and
/// isolates (they reorder what is shown).
pub fn unsafe_char(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{2028}' | '\u{2029}' | '\u{061C}' | '\u{200E}' | '\u{200F}')
        || ('\u{202A}'..='\u{202E}').contains(&c)
        || ('\u{2066}'..='\u{2069}').contains(&c)
}

/// Refuses any string of `value` (keys included) with an [`unsafe_char`]: a 400 naming its
/// path below `field` (`task.candidates[3]`, `query.name`), the character and its position.
pub fn check_text(value: &Value, field: &str) -> Result<(), ApiError> {
    let bad = |field: String, s: &str| -> Result<(), ApiError> {
        match s.chars().enumerate().find(|(_, c)| unsafe_char(*c)) {
            None => Ok(()),
            Some((i, c)) => Err(ApiError::bad(
                field,
                format!(
                    "character {i} is U+{:04X}: expected text without control, line-separator or bidirectional \
                     control characters",
                    c as u32
                ),
            )),
        }
    };
    match value {
        Value::String(s) => bad(field.to_string(), s),
        Value::Array(items) => items.iter().enumerate().try_for_each(|(i, v)| check_text(v, &format!("{field}[{i}]"))),
        Value::Object(map) => map.iter().try_for_each(|(k, v)| {
            let inner = if field.is_empty() { k.clone() } else { format!("{field}.{k}") };
            bad(inner.clone(), k)?;
            check_text(v, &inner)
        }),
        _ => Ok(()),
    }
}

/// Checks the schema's names, sizes and bounds.
pub fn check_schema(schema: &Schema) -> Result<(), ApiError> {
    let attrs = schema.attributes();
    if attrs.len() > MAX_ATTRIBUTES {
        return Err(too_big("schema", format!("{} attributes", attrs.len()), MAX_ATTRIBUTES));
    }
    let mut labels = 0usize;
    for (i, a) in attrs.iter().enumerate() {
        if !valid_name(a.name()) {
            let msg = format!(
                "name {:?}: expected 1 to {MAX_NAME} letters, digits, spaces or _-.:/()# (no control, markup or \
                 quote characters, no leading or trailing space)",
                a.name()
            );
            return Err(ApiError::bad(format!("schema[{i}].name"), msg));
        }
        match a {
            Attribute::Numeric { min, max, .. } => {
                if min.abs() > MAX_BOUND || max.abs() > MAX_BOUND {
                    return Err(too_big(format!("schema[{i}].min"), format!("bounds [{min}, {max}]"), MAX_BOUND));
                }
            }
            Attribute::Categorical { categories, .. } => {
                if categories.len() > MAX_CATEGORIES {
                    let value = format!("{} categories", categories.len());
                    return Err(too_big(format!("schema[{i}].categories"), value, MAX_CATEGORIES));
                }
                if let Some((j, c)) = categories.iter().enumerate().find(|(_, c)| !valid_label(c)) {
                    let msg = format!(
                        "label {c:?}: expected 1 to {MAX_LABEL_BYTES} bytes without control, line-separator or \
                         bidirectional control characters"
                    );
                    return Err(ApiError::bad(format!("schema[{i}].categories[{j}]"), msg));
                }
                labels += categories.len();
            }
        }
    }
    if labels > MAX_LABELS {
        return Err(too_big("schema", format!("{labels} labels over all attributes"), MAX_LABELS));
    }
    Ok(())
}

/// Everything above, for a create request (`raw` is its JSON).
pub fn check_request(raw: &Value, req: &CreateCollection) -> Result<(), ApiError> {
    check_raw(raw)?;
    check_text(raw, "")?;
    if let Some(schema) = &req.schema {
        check_schema(schema)?;
        harmony_tasks::cost::check_cost(schema, &req.task).map_err(|o| too_big(o.field, o.value, o.limit))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_labels() {
        for ok in ["age", "hours_per_week", "Age (years)", "état", "a.b:c/d#1"] {
            assert!(valid_name(ok), "{ok}");
        }
        for bad in ["", " a", "a ", "x\u{0}", "a\r\nb", "<script>", "a\"b", "a'b", "a&b", &"x".repeat(129)] {
            assert!(!valid_name(bad), "{bad:?}");
        }
        assert!(valid_label("<=50K") && valid_label("Self-emp-not-inc"));
        assert!(!valid_label("") && !valid_label("a\u{7}") && !valid_label(&"x".repeat(257)));
        assert!(!valid_label("x\u{2028}y") && !valid_label("a\u{202E}b") && valid_label("état"));
    }
}
