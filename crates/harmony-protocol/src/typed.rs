//! Each task's own spec and estimate types, tied to their variants of [`TaskSpec`] and
//! [`TaskEstimate`] in one table: code written for one task (its CLI module, its Python class)
//! converts with `From` and `TryFrom` rather than naming the enums' variants, so that only this
//! crate and harmony-tasks match on task kinds.
//!
//! ```
//! use harmony_protocol::spec::{FrequencySpec, TaskSpec};
//! let spec = TaskSpec::from(FrequencySpec { attribute: "race".into(), mechanism: None });
//! let back: &FrequencySpec = (&spec).try_into().unwrap();
//! assert_eq!(back.attribute, "race");
//! let err = <&harmony_protocol::spec::RangeSpec>::try_from(&spec).unwrap_err();
//! assert_eq!(err.to_string(), "a frequency spec, expected a range one");
//! ```

use crate::estimates::{
    FrequencyEstimate, HeavyHittersEstimate, LinearEstimate, MarginalsEstimate, MeansEstimate, Range2dEstimate,
    RangeEstimate, TaskEstimate, TrainEstimate,
};
use crate::spec::{
    FrequencySpec, HeavyHittersSpec, LinearQueriesSpec, MarginalsSpec, MeansSpec, Range2dSpec, RangeSpec, TaskKind,
    TaskSpec, TrainSpec,
};

/// A spec or estimate document of another task than the one asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WrongTask {
    /// The task asked for.
    pub expected: TaskKind,
    /// The task found.
    pub found: TaskKind,
    /// `spec` or `estimate document`.
    pub what: &'static str,
}

impl std::fmt::Display for WrongTask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "a {} {}, expected a {} one", self.found, self.what, self.expected)
    }
}

impl std::error::Error for WrongTask {}

macro_rules! tie {
    ($($kind:ident: $spec:ty, $est:ty;)*) => {
        impl TaskEstimate {
            /// Which task's document this is.
            pub fn kind(&self) -> TaskKind {
                match self { $(TaskEstimate::$kind(_) => TaskKind::$kind,)* }
            }
        }
        $(
            impl From<$spec> for TaskSpec {
                fn from(s: $spec) -> Self {
                    TaskSpec::$kind(s)
                }
            }
            impl<'a> TryFrom<&'a TaskSpec> for &'a $spec {
                type Error = WrongTask;
                fn try_from(t: &'a TaskSpec) -> Result<Self, WrongTask> {
                    match t {
                        TaskSpec::$kind(s) => Ok(s),
                        other => Err(WrongTask { expected: TaskKind::$kind, found: other.kind(), what: "spec" }),
                    }
                }
            }
            impl<'a> TryFrom<&'a mut TaskSpec> for &'a mut $spec {
                type Error = WrongTask;
                fn try_from(t: &'a mut TaskSpec) -> Result<Self, WrongTask> {
                    let found = t.kind();
                    match t {
                        TaskSpec::$kind(s) => Ok(s),
                        _ => Err(WrongTask { expected: TaskKind::$kind, found, what: "spec" }),
                    }
                }
            }
            impl From<$est> for TaskEstimate {
                fn from(e: $est) -> Self {
                    TaskEstimate::$kind(e)
                }
            }
            impl<'a> TryFrom<&'a TaskEstimate> for &'a $est {
                type Error = WrongTask;
                fn try_from(t: &'a TaskEstimate) -> Result<Self, WrongTask> {
                    match t {
                        TaskEstimate::$kind(e) => Ok(e),
                        other => Err(WrongTask { expected: TaskKind::$kind, found: other.kind(), what: "estimate document" }),
                    }
                }
            }
        )*
    };
}

tie! {
    Means: MeansSpec, MeansEstimate;
    Frequency: FrequencySpec, FrequencyEstimate;
    Range: RangeSpec, RangeEstimate;
    Range2d: Range2dSpec, Range2dEstimate;
    HeavyHitters: HeavyHittersSpec, HeavyHittersEstimate;
    Marginals: MarginalsSpec, MarginalsEstimate;
    LinearQueries: LinearQueriesSpec, LinearEstimate;
    Train: TrainSpec, TrainEstimate;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_round_trips_and_names_the_wrong_one() {
        let mut spec = TaskSpec::from(FrequencySpec { attribute: "a".into(), mechanism: None });
        assert_eq!(spec.kind(), TaskKind::Frequency);
        <&mut FrequencySpec>::try_from(&mut spec).unwrap().attribute = "b".into();
        assert_eq!(<&FrequencySpec>::try_from(&spec).unwrap().attribute, "b");
        let err = <&mut TrainSpec>::try_from(&mut spec).unwrap_err();
        assert_eq!((err.expected, err.found), (TaskKind::Train, TaskKind::Frequency));
        assert_eq!(err.to_string(), "a frequency spec, expected a train one");
        for k in TaskKind::ALL {
            assert_eq!(TaskKind::from_name(k.name()), Some(*k));
        }
        assert_eq!(TaskKind::from_name("ranges"), None);
    }
}
