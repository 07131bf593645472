//! Column names as attribute names: trimmed, never empty, unique (a schema rejects an empty or
//! repeated name, so a header with either must still give a schema that loads).

use std::collections::HashSet;

/// Makes header names valid attribute names: each is trimmed; an empty one becomes
/// `column_N` (N = its 1-based position); a repeated one gets `_2`, `_3`… (the first keeps its
/// name), skipping any name already taken. Returns the names and one note per renamed column.
pub fn unique_names<S: AsRef<str>>(raw: &[S]) -> (Vec<String>, Vec<String>) {
    let trimmed: Vec<&str> = raw.iter().map(|s| s.as_ref().trim()).collect();
    let mut taken: HashSet<String> = trimmed.iter().filter(|s| !s.is_empty()).map(|s| s.to_string()).collect();
    let mut seen: HashSet<&str> = HashSet::new();
    let mut notes = Vec::new();
    let names = trimmed
        .iter()
        .enumerate()
        .map(|(i, &name)| {
            if !name.is_empty() && seen.insert(name) {
                return name.to_string();
            }
            let base = if name.is_empty() { format!("column_{}", i + 1) } else { name.to_string() };
            let mut candidate = base.clone();
            let mut k = 2;
            while taken.contains(&candidate) {
                candidate = format!("{base}_{k}");
                k += 1;
            }
            taken.insert(candidate.clone());
            notes.push(if name.is_empty() {
                format!("column {} has an empty header name: named \"{candidate}\"", i + 1)
            } else {
                format!("column {} repeats the header name \"{name}\": named \"{candidate}\"", i + 1)
            });
            candidate
        })
        .collect();
    (names, notes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_and_duplicate_names_become_unique() {
        let (names, notes) = unique_names(&[" a ", "", "a", "b", "a", "column_2", ""]);
        assert_eq!(names, ["a", "column_2_2", "a_2", "b", "a_3", "column_2", "column_7"]);
        assert_eq!(notes.len(), 4, "{notes:?}");
        assert!(notes[0].contains("column 2 has an empty header name"), "{notes:?}");
        assert!(notes[1].contains("repeats the header name \"a\""), "{notes:?}");
        let set: HashSet<&String> = names.iter().collect();
        assert_eq!(set.len(), names.len());
        assert_eq!(unique_names(&["x", "y"]), (vec!["x".to_string(), "y".to_string()], vec![]));
    }
}
