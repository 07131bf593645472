//! Planning before collecting: the predicted worst-case variance of every attribute under each
//! strategy and mechanism combination `harmony plan` (and `harmony_ldp.plan`) compares.

use super::{KChoice, RecordMechanism, StrategyKind, StrategyOptions};
use crate::error::Result;
use crate::kinds::OracleKind;
use crate::schema::Schema;

/// The combinations compared: (strategy, numeric mechanism, categorical oracle).
pub const COMBOS: &[(StrategyKind, &str, &str)] = &[
    (StrategyKind::Split, "laplace", "oue"),
    (StrategyKind::Split, "scdf", "oue"),
    (StrategyKind::Split, "staircase", "oue"),
    (StrategyKind::Split, "duchi-multi", "oue"),
    (StrategyKind::Split, "duchi-multi", "bassily-smith"),
    (StrategyKind::Harmony, "duchi", "hadamard"),
    (StrategyKind::SampleK, "pm", "oue"),
    (StrategyKind::SampleK, "hm", "oue"),
    (StrategyKind::SampleK, "hm", "olh"),
    (StrategyKind::SampleK, "hm", "adaptive"),
];

/// One combination's prediction at one ε.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanChoice {
    /// ε of a user's record.
    pub epsilon: f64,
    /// The strategy.
    pub strategy: StrategyKind,
    /// The numeric mechanism's name.
    pub numeric_mechanism: &'static str,
    /// The categorical oracle's name.
    pub categorical_mechanism: &'static str,
    /// Attributes each user reports (sample-k's k; every attribute otherwise).
    pub k: usize,
    /// Per attribute: the worst-case variance of its estimate per user (divide by n), on
    /// [-1, 1] for a numeric attribute, of a frequency for a categorical one.
    pub variances: Vec<f64>,
}

/// Every combination of [`COMBOS`] (plus split and sample-k with `extra`, a categorical oracle
/// to compare) at `epsilon`, in that order, but the built-in ones the schema refuses (see
/// [`compare_accepted`]).
pub fn compare(schema: &Schema, epsilon: f64, extra: Option<OracleKind>) -> Result<Vec<PlanChoice>> {
    Ok(compare_accepted(schema, epsilon, extra)?.0)
}

/// A built-in combination left out of a comparison, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Refused {
    /// The strategy.
    pub strategy: StrategyKind,
    /// The numeric mechanism's name.
    pub numeric_mechanism: &'static str,
    /// The categorical oracle's name.
    pub categorical_mechanism: &'static str,
    /// Why the schema refuses it.
    pub reason: crate::Error,
}

/// [`compare`], with the built-in combinations whose categorical oracle the schema refuses (an
/// attribute reporting missing values needs an oracle with a cross moment,
/// [`RATIO_ORACLES`](crate::missing::RATIO_ORACLES)) left out and returned with the reason. An
/// `extra` oracle the schema refuses is an error: it was asked for by name.
pub fn compare_accepted(
    schema: &Schema,
    epsilon: f64,
    extra: Option<OracleKind>,
) -> Result<(Vec<PlanChoice>, Vec<Refused>)> {
    let mut combos: Vec<(StrategyKind, &'static str, &'static str, bool)> =
        COMBOS.iter().map(|&(k, n, c)| (k, n, c, true)).collect();
    if let Some(kind) = extra {
        combos.push((StrategyKind::Split, "duchi-multi", kind.name(), false));
        combos.push((StrategyKind::SampleK, "hm", kind.name(), false));
    }
    let (mut choices, mut refused) = (Vec::new(), Vec::new());
    for (kind, num, cat, builtin) in combos {
        let opts = StrategyOptions {
            kind,
            epsilon,
            numeric_mechanism: num.parse()?,
            categorical_mechanism: cat.parse()?,
            k: KChoice::Optimal,
        };
        let mech = match RecordMechanism::new(schema.clone(), opts) {
            Ok(m) => m,
            Err(e @ crate::Error::InvalidParameter { name: "categorical mechanism", .. }) if builtin => {
                refused.push(Refused { strategy: kind, numeric_mechanism: num, categorical_mechanism: cat, reason: e });
                continue;
            }
            Err(e) => return Err(e),
        };
        let (numeric_mechanism, categorical_mechanism) = mech.mechanism_names();
        choices.push(PlanChoice {
            epsilon,
            strategy: kind,
            numeric_mechanism,
            categorical_mechanism,
            k: mech.k(),
            variances: mech.worst_case_variances(),
        });
    }
    Ok((choices, refused))
}

/// The users a choice needs so that every attribute's worst-case standard error is at most
/// `target`.
pub fn users_needed(choice: &PlanChoice, target: f64) -> u64 {
    let worst = choice.variances.iter().cloned().fold(0.0, f64::max);
    (worst / (target * target)).ceil() as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{Attribute, Declared, Missing};

    /// A categorical attribute reporting missing values (what schema inference writes for a
    /// column with gaps) refuses the oracles without a cross moment: the comparison leaves those
    /// combinations out, says why, and keeps the others.
    #[test]
    fn combinations_an_attribute_refuses_are_left_out_not_fatal() {
        let schema = Schema::with_missing(vec![
            Declared {
                attribute: Attribute::Numeric { name: "age".into(), min: 0.0, max: 90.0 },
                missing: Missing::Report,
            },
            Declared {
                attribute: Attribute::Categorical {
                    name: "occ".into(),
                    categories: vec!["a".into(), "b".into(), "c".into()],
                },
                missing: Missing::Report,
            },
        ])
        .unwrap();
        let choices = compare(&schema, 1.0, None).unwrap();
        let (kept, refused) = compare_accepted(&schema, 1.0, None).unwrap();
        assert_eq!(choices, kept);
        assert!(!refused.is_empty() && refused.len() < COMBOS.len(), "{refused:?}");
        assert_eq!(kept.len() + refused.len(), COMBOS.len());
        assert!(refused.iter().any(|r| r.categorical_mechanism == "bassily-smith"));
        assert!(refused.iter().all(|r| r.reason.to_string().contains("occ reports missing values")));
        // Asked for by name, a refused oracle is an error.
        let e = compare(&schema, 1.0, Some("bassily-smith".parse().unwrap())).unwrap_err().to_string();
        assert!(e.contains("bassily-smith for occ"), "{e}");
    }
}
