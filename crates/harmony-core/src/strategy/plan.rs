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
/// to compare) at `epsilon`, in that order.
pub fn compare(schema: &Schema, epsilon: f64, extra: Option<OracleKind>) -> Result<Vec<PlanChoice>> {
    let mut combos: Vec<(StrategyKind, &str, &str)> = COMBOS.to_vec();
    if let Some(kind) = extra {
        combos.push((StrategyKind::Split, "duchi-multi", kind.name()));
        combos.push((StrategyKind::SampleK, "hm", kind.name()));
    }
    combos
        .into_iter()
        .map(|(kind, num, cat)| {
            let opts = StrategyOptions {
                kind,
                epsilon,
                numeric_mechanism: num.parse()?,
                categorical_mechanism: cat.parse()?,
                k: KChoice::Optimal,
            };
            let mech = RecordMechanism::new(schema.clone(), opts)?;
            let (numeric_mechanism, categorical_mechanism) = mech.mechanism_names();
            Ok(PlanChoice {
                epsilon,
                strategy: kind,
                numeric_mechanism,
                categorical_mechanism,
                k: mech.k(),
                variances: mech.worst_case_variances(),
            })
        })
        .collect()
}

/// The users a choice needs so that every attribute's worst-case standard error is at most
/// `target`.
pub fn users_needed(choice: &PlanChoice, target: f64) -> u64 {
    let worst = choice.variances.iter().cloned().fold(0.0, f64::max);
    (worst / (target * target)).ceil() as u64
}
