//! The shuffle-model accounting (harmony_core::shuffle) against the published numbers of
//! Feldman, McMillan, Talwar, "Hiding Among the Clones" (FOCS 2021) and their code
//! (github.com/apple/ml-shuffling-amplification, `computeamplification.py`).
//!
//! Reference values: the repository's README (its `example.py`: n = 10^5, ε₀ = 4, δ = 10^-6,
//! 10 bisection steps, step 100) prints "eps between 0.1675385583317841 and 0.172790550755978"
//! and "closed form ... at most 0.5378040242374512". The other values come from that Python with
//! its one-character fix (its upper bound's Q direction compares `upperc` with itself; fixed to
//! `lowerc`), numpy/scipy from PyPI:
//!   sed 's/max(deltaq_upperc, deltaq_upperc)/max(deltaq_upperc, deltaq_lowerc)/' \
//!     computeamplification.py > fixed/computeamplification.py
//!   python -c 'import computeamplification as CA; print(CA.numericalanalysis(n, e0, d, T, step, upper))'

use harmony_core::shuffle::{Options, closed_form_epsilon, local_epsilon_for, numerical_epsilon};

fn close(got: f64, want: f64, rel: f64) -> bool {
    (got - want).abs() <= rel * want.abs()
}

/// Two significant digits, as the acceptance asks.
fn sig2(x: f64) -> f64 {
    let scale = 10f64.powi(1 - x.abs().log10().floor() as i32);
    (x * scale).round() / scale
}

/// The README's example, computed the way the Python does (step 100, 10 bisection steps): the
/// lower bound and the closed form equal the published numbers to 1e-9; the upper bound equals
/// the fixed Python's (0.1754165469680749; the published 0.1728 comes from the typo).
#[test]
fn readme_example_reproduces_as_ported() {
    let python = Options { step: 100, iterations: 10, upper: true };
    let lower = numerical_epsilon(100_000, 4.0, 1e-6, Options { upper: false, ..python }).unwrap();
    assert!(close(lower, 0.1675385583317841, 1e-9), "lower {lower}");
    let upper = numerical_epsilon(100_000, 4.0, 1e-6, python).unwrap();
    assert!(close(upper, 0.1754165469680749, 1e-9), "upper {upper}");
    let closed = closed_form_epsilon(100_000, 4.0, 1e-6).unwrap().unwrap();
    assert!(close(closed, 0.5378040242374512, 1e-12), "closed form {closed}");
}

/// Exact mode (every c summed, 30 bisection steps), what `harmony plan --shuffle` prints: the
/// README's point lies between the published lower and upper bounds, 0.17 to 2 significant
/// digits; the other points match the fixed Python's step-1 lower bound (which is then exact
/// up to the tail it leaves out) to 0.1%.
#[test]
fn exact_mode_matches_the_published_and_reference_values() {
    let exact = Options::default();
    let e = numerical_epsilon(100_000, 4.0, 1e-6, exact).unwrap();
    assert!((0.1675385583317841..=0.172790550755978).contains(&e), "{e}");
    assert_eq!(sig2(e), 0.17);
    assert_eq!(sig2(0.1675385583317841), 0.17);
    assert_eq!(sig2(0.172790550755978), 0.17);
    for (n, e0, d, python_lower, python_upper) in [
        (1_000, 1.0, 1e-6, 0.18240762100693708, 0.19024512994388598),
        (10_000, 1.0, 1e-6, 0.05300519174626192, 0.05556159207050932),
        (10_000, 2.0, 1e-6, 0.15504425632775065, 0.16183930054699797),
    ] {
        let e = numerical_epsilon(n, e0, d, exact).unwrap();
        assert!(close(e, python_lower, 1e-3), "n={n} ε₀={e0}: {e} vs {python_lower}");
        assert!(e <= python_upper, "n={n} ε₀={e0}: {e} above the Python's upper bound {python_upper}");
        assert_eq!(sig2(e), sig2(python_lower));
    }
}

/// Amplification is monotone: the central ε grows with ε₀, shrinks with n, never exceeds ε₀.
#[test]
fn monotone_in_n_and_epsilon0() {
    let o = Options::default();
    let mut last = f64::INFINITY;
    for n in [100u64, 1_000, 10_000] {
        let e = numerical_epsilon(n, 2.0, 1e-6, o).unwrap();
        assert!(e < last && e <= 2.0, "n={n}: {e}");
        last = e;
    }
    let mut last = 0.0;
    for e0 in [0.5, 1.0, 2.0, 4.0] {
        let e = numerical_epsilon(10_000, e0, 1e-6, o).unwrap();
        assert!(e > last && e <= e0, "ε₀={e0}: {e}");
        last = e;
    }
}

/// The reverse: the ε₀ found reaches the target, 0.1% more does not.
#[test]
fn local_epsilon_for_a_target_is_the_largest() {
    let o = Options::default();
    let (n, target, d) = (10_000, 0.1, 1e-6);
    let e0 = local_epsilon_for(n, target, d, o).unwrap();
    assert!(e0 > 1.0 && e0 < 3.0, "{e0}");
    assert!(numerical_epsilon(n, e0, d, o).unwrap() <= target);
    assert!(numerical_epsilon(n, e0 * 1.001, d, o).unwrap() > target);
}
