//! The real-valued samplers against their integrated densities: the privacy
//! proofs are about the density, so the sampler must draw from exactly that density, not only
//! with the right mean and variance. A report is a grid point k (the output y rounded by
//! randomized rounding, k = ⌊y/s + V⌋), whose exact law is P[report ≤ k] = ∫₀¹ F((k + z)·s) dz,
//! F the exact CDF of y at input t (computed piece by piece: F is linear between the density's
//! breakpoints, or smooth). The randomized probability integral transform
//! u = F_d(k − 1) + V·(F_d(k) − F_d(k − 1)) (V uniform) is then exactly uniform on [0, 1] under
//! the right sampler, so a χ² test over B equiprobable bins of u checks the whole shape, at any ε
//! (at ε = 20 PM's high window is only 95 grid steps wide: the rounding matters). HM adds its two
//! Sign outputs as categories (probabilities (1 − α)·P±(t)).
//!
//! Every mechanism with real outputs (PM, HM, Laplace, SCDF, staircase), at t = −1, 0, 1, for
//! the scalar path (`randomize`, the client path) and the batch path (`randomize_batch`). Each
//! test's overall false-failure rate is 1e-5 (Bonferroni over its χ² statistics, Wilson–Hilferty
//! quantiles).

mod frequency_support;

use frequency_support::chi2_critical;
use harmony_core::numeric::{
    AnyNumeric, GRID_STEP, Laplace, NumericMechanism, NumericReport, Piecewise, StaircaseNoise,
};
use harmony_core::sampling::{fast_rng, stream_seed, uniform01};

/// The exact CDF of PM's output at t: piecewise linear (density p_tail, p, p_tail).
fn pm_cdf(m: &Piecewise, t: f64, y: f64) -> f64 {
    let c = m.scale();
    let (l, r) = (m.left(t), m.right(t));
    let y = y.clamp(-c, c);
    let (lo, hi) = (m.tail_density(), m.center_density());
    lo * (y.min(l) + c) + hi * (y.clamp(l, r) - l) + lo * (y.max(r) - r)
}

/// The exact CDF of Laplace(t, λ).
fn laplace_cdf(m: &Laplace, t: f64, y: f64) -> f64 {
    let z = (y - t) / m.scale();
    if z < 0.0 { 0.5 * z.exp() } else { 1.0 - 0.5 * (-z).exp() }
}

/// The exact CDF of staircase noise at x: the steps 0 … K − 1 on x's side hold (1 − b^K)/2, the
/// partial step K holds a·Δ·b^K·(min(z, γ) + b·(z − γ)⁺) with z = x/Δ − K.
fn staircase_cdf(n: &StaircaseNoise, x: f64) -> f64 {
    const DELTA: f64 = 2.0;
    if x < 0.0 {
        return 1.0 - staircase_cdf(n, -x);
    }
    let (b, g, a) = (n.ratio(), n.gamma(), n.peak_density());
    let k = (x / DELTA).floor();
    let z = x / DELTA - k;
    let bk = b.powf(k);
    0.5 + 0.5 * (1.0 - bk) + a * DELTA * bk * (z.min(g) + b * (z - g).max(0.0))
}

/// F(y), the exact CDF of the real-valued output (HM: of its PM branch) at input t.
fn cdf(m: &AnyNumeric, t: f64, y: f64) -> f64 {
    match m {
        AnyNumeric::Piecewise(p) => pm_cdf(p, t, y),
        AnyNumeric::Hybrid(h) => pm_cdf(h.piecewise().expect("a Fixed report comes from the PM branch"), t, y),
        AnyNumeric::Laplace(l) => laplace_cdf(l, t, y),
        AnyNumeric::Scdf(s) => staircase_cdf(s.noise(), y - t),
        AnyNumeric::Staircase(s) => staircase_cdf(s.noise(), y - t),
        AnyNumeric::Duchi(_) => unreachable!("Duchi has Sign reports only"),
    }
}

/// The breakpoints of F inside (a, b): PM's ±C, l(t), r(t); Laplace's t; the staircase's step
/// edges t ± Δ·(j + {0, γ}).
fn breaks(m: &AnyNumeric, t: f64, a: f64, b: f64) -> Vec<f64> {
    let mut out = Vec::new();
    let pm = match m {
        AnyNumeric::Piecewise(p) => Some(*p),
        AnyNumeric::Hybrid(h) => h.piecewise().copied(),
        _ => None,
    };
    if let Some(p) = pm {
        out.extend([-p.scale(), p.left(t), p.right(t), p.scale()]);
    }
    if matches!(m, AnyNumeric::Laplace(_)) {
        out.push(t);
    }
    let stair = match m {
        AnyNumeric::Scdf(s) => Some(*s.noise()),
        AnyNumeric::Staircase(s) => Some(*s.noise()),
        _ => None,
    };
    if let Some(n) = stair {
        let g = n.gamma();
        let lo = ((a - t).abs().min((b - t).abs()) / 2.0).floor() - 1.0;
        let hi = ((a - t).abs().max((b - t).abs()) / 2.0).ceil() + 1.0;
        let mut j = lo.max(0.0);
        while j <= hi {
            for off in [0.0, g] {
                out.extend([t + 2.0 * (j + off), t - 2.0 * (j + off)]);
            }
            j += 1.0;
        }
    }
    out.retain(|&x| x > a && x < b);
    out.sort_by(f64::total_cmp);
    out
}

/// P[report ≤ k] = ∫₀¹ F((k + z)·s) dz: trapezoids between the breakpoints (exact where F is
/// linear; Laplace's curvature error is below (s/λ)² ≤ 10⁻¹⁰).
fn grid_cdf(m: &AnyNumeric, t: f64, k: i64) -> f64 {
    let (a, b) = (k as f64 * GRID_STEP, (k + 1) as f64 * GRID_STEP);
    let mut pts = vec![a];
    pts.extend(breaks(m, t, a, b));
    pts.push(b);
    let f = |y: f64| cdf(m, t, y);
    pts.windows(2).map(|w| 0.5 * (f(w[0]) + f(w[1])) * (w[1] - w[0])).sum::<f64>() / GRID_STEP
}

/// The category of a report: the randomized PIT u of its grid point in one of `bins`
/// equiprobable bins (after the two Sign categories: 0 = −, 1 = +). `v` is a fresh uniform.
fn category(m: &AnyNumeric, t: f64, r: &NumericReport, bins: usize, v: f64) -> usize {
    let k = match *r {
        NumericReport::Sign(positive) => return positive as usize,
        NumericReport::Fixed(u) => u,
    };
    let (lo, hi) = (grid_cdf(m, t, k - 1), grid_cdf(m, t, k));
    let u = lo + v * (hi - lo);
    2 + ((u * bins as f64).floor().max(0.0) as usize).min(bins - 1)
}

/// The expected probabilities of the categories: the Sign outputs (HM's Duchi branch), then
/// `bins` equal shares of the real-valued branch's mass.
fn expected(m: &AnyNumeric, t: f64, bins: usize) -> Vec<f64> {
    let (pm_share, signs) = match m {
        AnyNumeric::Hybrid(h) => {
            let p = h.duchi().prob_positive(t);
            let w = 1.0 - h.alpha();
            (h.alpha(), [w * (1.0 - p), w * p])
        }
        _ => (1.0, [0.0, 0.0]),
    };
    signs.into_iter().chain(std::iter::repeat_n(pm_share / bins as f64, bins)).collect()
}

/// χ² of n reports of input t (scalar or batch path) against the exact category probabilities;
/// returns (χ², degrees of freedom).
fn chi_square(m: &AnyNumeric, t: f64, n: usize, bins: usize, batch: bool, seed: u64) -> (f64, usize) {
    let mut rng = fast_rng(seed);
    let reports: Vec<NumericReport> = if batch {
        let mut out = Vec::new();
        m.randomize_batch(&vec![t; n], &mut rng, &mut out).unwrap();
        out
    } else {
        (0..n).map(|_| m.randomize(t, &mut rng).unwrap()).collect()
    };
    let mut counts = vec![0u64; 2 + bins];
    let mut pit = fast_rng(seed ^ 0x9e37);
    for r in &reports {
        counts[category(m, t, r, bins, uniform01(&mut pit))] += 1;
    }
    let probs = expected(m, t, bins);
    let mut chi2 = 0.0;
    let mut cells = 0;
    for (&c, &p) in counts.iter().zip(&probs) {
        if p == 0.0 {
            assert_eq!(c, 0, "{} eps {} t {t}: an impossible category was drawn", m.name(), m.epsilon().value());
            continue;
        }
        let e = n as f64 * p;
        chi2 += (c as f64 - e).powi(2) / e;
        cells += 1;
    }
    (chi2, cells - 1)
}

/// Runs every case; returns the failures. `epsilons` × mechanisms × t ∈ {−1, 0, 1} × paths.
fn run(epsilons: &[f64], n: usize, bins: usize, base: u64) -> Vec<String> {
    let names = ["pm", "hm", "laplace", "scdf", "staircase"];
    let cases = epsilons.len() * names.len() * 3 * 2;
    let alpha = 1e-5 / cases as f64;
    let mut failures = Vec::new();
    let mut stream = 0;
    for &eps in epsilons {
        for name in names {
            let m = AnyNumeric::by_name(name, eps).unwrap();
            if matches!(m, AnyNumeric::Hybrid(h) if h.piecewise().is_none()) {
                continue; // HM at ε ≤ ε* is Duchi: Sign outputs only (audited elsewhere).
            }
            for t in [-1.0, 0.0, 1.0] {
                for batch in [false, true] {
                    stream += 1;
                    let (chi2, dof) = chi_square(&m, t, n, bins, batch, stream_seed(base, stream));
                    let crit = chi2_critical(dof, alpha);
                    if chi2 >= crit {
                        failures.push(format!(
                            "{name} eps {eps} t {t} {}: n = {n}, chi2 {chi2:.1} >= {crit:.1} ({dof} dof)",
                            if batch { "batch" } else { "scalar" }
                        ));
                    }
                }
            }
        }
    }
    failures
}

/// Fast tier: ε ∈ {0.5, 2}, 4·10⁴ reports per case, 32 bins.
#[test]
fn samplers_follow_their_densities() {
    let failures = run(&[0.5, 2.0], 40_000, 32, 0x5a3);
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

/// Heavy tier: the accepted range's ends and four ordinary budgets, 10⁶ reports per case, 256
/// bins.
#[test]
#[ignore = "heavy: run in release with --ignored"]
fn heavy_samplers_follow_their_densities() {
    let eps = [harmony_core::params::MIN_EPSILON, 0.5, 1.0, 2.0, 4.0, harmony_core::params::MAX_EPSILON];
    let failures = run(&eps, 1_000_000, 256, 0x5a4);
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

/// The test has power: a PM whose centre window is drawn at the wrong place (shifted by 5% of
/// C, mean and variance nearly unchanged for t = 0) and SCDF with the old γ = 1/2 noise fail it.
#[test]
fn the_density_test_catches_shape_errors() {
    let n = 40_000;
    let alpha = 1e-5;
    // SCDF at ε = 4 with γ = 1/2: the reports of a γ = 1/2 staircase, tested against SCDF's CDF.
    let scdf = AnyNumeric::by_name("scdf", 4.0).unwrap();
    let half = StaircaseNoise::new(4.0, 0.5).unwrap();
    let mut rng = fast_rng(5);
    let mut counts = vec![0u64; 34];
    for _ in 0..n {
        let y = half.sample(&mut rng);
        let k = (y / GRID_STEP).round() as i64;
        counts[category(&scdf, 0.0, &NumericReport::Fixed(k), 32, uniform01(&mut rng))] += 1;
    }
    let e = n as f64 / 32.0;
    let chi2: f64 = counts[2..].iter().map(|&c| (c as f64 - e).powi(2) / e).sum();
    assert!(chi2 > chi2_critical(31, alpha), "gamma 1/2 passed as SCDF: chi2 {chi2:.1}");
    // PM at ε = 1, t = 0, with the reports shifted by 0.05·C.
    let pm = Piecewise::new(1.0).unwrap();
    let any = AnyNumeric::Piecewise(pm);
    let mut counts = vec![0u64; 34];
    for _ in 0..n {
        let NumericReport::Fixed(u) = pm.randomize(0.0, &mut rng).unwrap() else { unreachable!() };
        let y = (u as f64 * GRID_STEP + 0.05 * pm.scale()).min(pm.scale());
        let k = (y / GRID_STEP) as i64;
        counts[category(&any, 0.0, &NumericReport::Fixed(k), 32, uniform01(&mut rng))] += 1;
    }
    let chi2: f64 = counts[2..].iter().map(|&c| (c as f64 - e).powi(2) / e).sum();
    assert!(chi2 > chi2_critical(31, alpha), "shifted PM passed: chi2 {chi2:.1}");
}
