//! [`AnyNumeric`]: a 1-D mechanism chosen by name at run time (CLI, config files).

use super::{Duchi, Hybrid, Laplace, NumericMechanism, NumericReport, Piecewise, Scdf, Staircase};
use crate::error::Result;
use crate::kinds::NumericKind;
use crate::params::Epsilon;
use rand::Rng;

/// The names accepted by [`AnyNumeric::by_name`], in the order of the enum.
pub const NUMERIC_NAMES: &[&str] = &["laplace", "duchi", "pm", "hm", "scdf", "staircase"];

/// Any 1-D numeric mechanism; every method delegates to the wrapped one.
///
/// # Privacy
/// That of the wrapped mechanism: each is exactly ε-LDP (see its documentation).
///
/// # Utility
/// That of the wrapped mechanism: [`NumericMechanism::variance_coefficients`] delegates.
///
/// # Example
/// ```
/// use harmony_core::numeric::{AnyNumeric, NumericMechanism, NUMERIC_NAMES};
/// use harmony_core::{Aggregator, sampling::fast_rng};
///
/// let mut rng = fast_rng(42);
/// let ts: Vec<f64> = (0..4000).map(|i| ((i * 7) % 201) as f64 / 100.0 - 1.0).collect();
/// let truth = ts.iter().sum::<f64>() / ts.len() as f64;
/// for name in NUMERIC_NAMES {
///     let mech = AnyNumeric::by_name(name, 2.0)?;
///     let mut reports = Vec::new();
///     mech.randomize_batch(&ts, &mut rng, &mut reports)?;
///     let mut agg = mech.aggregator();
///     agg.add_batch(&reports)?;
///     let est = agg.estimate();
///     println!("{name}: {:.3} ± {:.3} (truth {truth:.3})", est.value, est.std_error);
///     assert!((est.value - truth).abs() < 5.0 * est.std_error);
/// }
/// assert!(AnyNumeric::by_name("gaussian", 1.0).is_err());
/// # Ok::<(), harmony_core::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum AnyNumeric {
    /// [`Laplace`] (`laplace`).
    Laplace(Laplace),
    /// [`Duchi`] (`duchi`).
    Duchi(Duchi),
    /// [`Piecewise`] (`pm`).
    Piecewise(Piecewise),
    /// [`Hybrid`] (`hm`).
    Hybrid(Hybrid),
    /// [`Scdf`] (`scdf`).
    Scdf(Scdf),
    /// [`Staircase`] (`staircase`).
    Staircase(Staircase),
}

impl AnyNumeric {
    /// The mechanism called `name` (one of [`NUMERIC_NAMES`]) with budget ε.
    pub fn by_name(name: &str, epsilon: f64) -> Result<Self> {
        Self::new(NumericKind::parse(name)?, epsilon)
    }
    /// The mechanism `kind` with budget ε.
    pub fn new(kind: NumericKind, epsilon: f64) -> Result<Self> {
        Ok(match kind {
            NumericKind::Laplace => AnyNumeric::Laplace(Laplace::new(epsilon)?),
            NumericKind::Duchi => AnyNumeric::Duchi(Duchi::new(epsilon)?),
            NumericKind::Pm => AnyNumeric::Piecewise(Piecewise::new(epsilon)?),
            NumericKind::Hm => AnyNumeric::Hybrid(Hybrid::new(epsilon)?),
            NumericKind::Scdf => AnyNumeric::Scdf(Scdf::new(epsilon)?),
            NumericKind::Staircase => AnyNumeric::Staircase(Staircase::new(epsilon)?),
        })
    }
    /// Which mechanism this is.
    pub fn kind(&self) -> NumericKind {
        match self {
            AnyNumeric::Laplace(_) => NumericKind::Laplace,
            AnyNumeric::Duchi(_) => NumericKind::Duchi,
            AnyNumeric::Piecewise(_) => NumericKind::Pm,
            AnyNumeric::Hybrid(_) => NumericKind::Hm,
            AnyNumeric::Scdf(_) => NumericKind::Scdf,
            AnyNumeric::Staircase(_) => NumericKind::Staircase,
        }
    }
}

/// Calls `$body` with `$m` bound to the wrapped mechanism.
macro_rules! delegate {
    ($self:expr, $m:ident => $body:expr) => {
        match $self {
            AnyNumeric::Laplace($m) => $body,
            AnyNumeric::Duchi($m) => $body,
            AnyNumeric::Piecewise($m) => $body,
            AnyNumeric::Hybrid($m) => $body,
            AnyNumeric::Scdf($m) => $body,
            AnyNumeric::Staircase($m) => $body,
        }
    };
}

impl NumericMechanism for AnyNumeric {
    fn name(&self) -> &'static str {
        delegate!(self, m => m.name())
    }
    fn epsilon(&self) -> Epsilon {
        delegate!(self, m => m.epsilon())
    }
    #[inline]
    fn randomize_unchecked<R: Rng + ?Sized>(&self, t: f64, rng: &mut R) -> NumericReport {
        delegate!(self, m => m.randomize_unchecked(t, rng))
    }
    fn decode(&self, report: &NumericReport) -> Result<f64> {
        delegate!(self, m => m.decode(report))
    }
    fn variance_coefficients(&self) -> (f64, f64) {
        delegate!(self, m => m.variance_coefficients())
    }
    /// Dispatches once per batch, then runs the wrapped mechanism's loop.
    fn randomize_batch<R: Rng + ?Sized>(&self, ts: &[f64], rng: &mut R, out: &mut Vec<NumericReport>) -> Result<()> {
        delegate!(self, m => m.randomize_batch(ts, rng, out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    #[test]
    fn names_round_trip_and_unknown_names_fail() {
        for &name in NUMERIC_NAMES {
            let m = AnyNumeric::by_name(name, 1.0).unwrap();
            assert_eq!(m.name(), name);
            assert_eq!(m.epsilon().value(), 1.0);
        }
        let e = AnyNumeric::by_name("gauss", 1.0).unwrap_err();
        assert!(matches!(e, Error::InvalidParameter { name: "mechanism", .. }));
        assert!(e.to_string().contains("\"gauss\"") && e.to_string().contains("laplace, duchi"), "{e}");
        assert!(matches!(AnyNumeric::by_name("pm", f64::NAN), Err(Error::InvalidParameter { name: "epsilon", .. })));
        let hm = AnyNumeric::by_name("hm", 1.0).unwrap();
        assert_eq!(hm.variance_coefficients(), Hybrid::new(1.0).unwrap().variance_coefficients());
    }
}
