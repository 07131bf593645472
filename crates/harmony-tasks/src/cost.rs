//! The costs a task spec asks of a server, checked whole before anything is built: a
//! `linear-queries` domain, and the memory of Bassily–Smith's matrices (the only oracle whose
//! memory grows as d·m; never a default, so only when the spec names it). The schema's own
//! limits (attributes, labels, bounds) are the server's.

use harmony_core::kinds::OracleKind;
use harmony_core::schema::{Attribute, Schema};
use harmony_protocol::spec::TaskSpec;

/// Largest domain (the cross-product of the attributes) of a `linear-queries` collection.
pub const MAX_LINEAR_DOMAIN: u64 = 1 << 20;
/// Most memory of Bassily–Smith's projection matrices over a collection (bits: 32 MiB, one
/// attribute of 4,096 labels).
pub const MAX_ORACLE_BITS: u64 = 1 << 28;

/// A spec over a cost limit: the spec field, what it asks and the limit.
#[derive(Debug, Clone, PartialEq)]
pub struct OverLimit {
    /// The field (`task.attributes`, …).
    pub field: &'static str,
    /// What the spec asks (`a domain of 2097152 cells`).
    pub value: String,
    /// The limit.
    pub limit: String,
}

fn over(field: &'static str, value: impl Into<String>, limit: impl ToString) -> OverLimit {
    OverLimit { field, value: value.into(), limit: limit.to_string() }
}

/// Checks `task`'s costs on `schema` ([`OverLimit`] names the field, the value and the limit).
pub fn check_cost(schema: &Schema, task: &TaskSpec) -> Result<(), OverLimit> {
    match task {
        TaskSpec::LinearQueries(s) => {
            let card = |name: &String| -> u64 {
                match (schema.position(name).map(|p| &schema.attributes()[p]), s.bins.get(name)) {
                    (Some(Attribute::Categorical { categories, .. }), _) => categories.len() as u64,
                    (_, Some(&k)) => k as u64,
                    _ => 1,
                }
            };
            match s.attributes.iter().try_fold(1u64, |acc, n| acc.checked_mul(card(n))) {
                Some(j) if j <= MAX_LINEAR_DOMAIN => Ok(()),
                Some(j) => Err(over("task.attributes", format!("a domain of {j} cells"), MAX_LINEAR_DOMAIN)),
                None => Err(over("task.attributes", "a domain over 2^64 cells", MAX_LINEAR_DOMAIN)),
            }
        }
        TaskSpec::Means(s) if s.categorical_mechanism == Some(OracleKind::BassilySmith) => {
            bassily(&mut schema.attributes().iter())
        }
        TaskSpec::Frequency(s) if s.mechanism == Some(OracleKind::BassilySmith) => {
            bassily(&mut schema.attributes().iter().filter(|a| a.name() == s.attribute))
        }
        _ => Ok(()),
    }
}

/// Bassily–Smith's matrices over `attrs` (d × m bits per categorical attribute).
fn bassily(attrs: &mut dyn Iterator<Item = &Attribute>) -> Result<(), OverLimit> {
    let bits: u64 = attrs
        .map(|a| match a {
            Attribute::Categorical { categories, .. } => {
                let d = categories.len();
                d as u64 * harmony_core::frequency::BassilySmith::default_rows(d) as u64
            }
            Attribute::Numeric { .. } => 0,
        })
        .sum();
    if bits > MAX_ORACLE_BITS {
        let value = format!("bassily-smith matrices of {} MiB", bits >> 23);
        return Err(over("task.categorical_mechanism", value, format!("{} MiB", MAX_ORACLE_BITS >> 23)));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use harmony_protocol::spec::{FrequencySpec, MeansSpec};

    fn schema(attributes: usize, labels: usize) -> Schema {
        let categories: Vec<String> = (0..labels).map(|i| format!("c{i}")).collect();
        let attrs = (0..attributes)
            .map(|j| Attribute::Categorical { name: format!("a{j}"), categories: categories.clone() })
            .collect();
        Schema::new(attrs).unwrap()
    }

    #[test]
    fn bassily_smith_matrices_over_the_limit_are_refused_and_one_attribute_is_not() {
        let s = schema(3, 4096);
        let means =
            TaskSpec::Means(MeansSpec { categorical_mechanism: Some(OracleKind::BassilySmith), ..Default::default() });
        let e = check_cost(&s, &means).unwrap_err();
        assert_eq!(e.field, "task.categorical_mechanism");
        assert_eq!((e.value.as_str(), e.limit.as_str()), ("bassily-smith matrices of 96 MiB", "32 MiB"));
        let one =
            TaskSpec::Frequency(FrequencySpec { attribute: "a1".into(), mechanism: Some(OracleKind::BassilySmith) });
        assert_eq!(check_cost(&s, &one), Ok(()));
        assert_eq!(check_cost(&s, &TaskSpec::Means(MeansSpec::default())), Ok(()));
    }

    #[test]
    fn a_linear_domain_over_the_limit_is_refused() {
        let s = schema(3, 128);
        let spec = |n: usize| {
            let attributes: Vec<String> = (0..n).map(|j| format!("a{j}")).collect();
            let json = serde_json::json!({"kind": "linear-queries", "attributes": attributes, "mechanism": "hr", "workload": "identity"});
            serde_json::from_value::<TaskSpec>(json).unwrap()
        };
        assert_eq!(check_cost(&s, &spec(2)), Ok(()));
        let e = check_cost(&s, &spec(3)).unwrap_err();
        assert_eq!((e.field, e.value.as_str()), ("task.attributes", "a domain of 2097152 cells"));
    }
}
