//! Exhaustive enumeration of the real-valued samplers' grid distributions.
//!
//! In exact arithmetic, rounding an ε-LDP real output to the fixed 2⁻²⁰ grid keeps ε-LDP. In
//! floating point the unrounded output lives on a lattice (its uniforms have 53 bits, its
//! values an `f64` spacing), and at tiny ε that lattice is coarse against the grid: at
//! ε = 10⁻⁹ PM's probabilities of neighbouring grid points differed by a factor e^0.41 where the
//! density is flat. These tests compute the samplers' exact probabilities P[k | t] of grid points
//! k — every random word that lands near the window, with its exact rounding weight — and
//! compare them with the exact mechanism's:
//!
//! * PM (and HM's PM branch, the same sampler): P[k | t] must lie in
//!   [s·p_tail·(1 − δ), s·p·(1 + δ)] for every k whose rounding support is inside [−C, C]
//!   (s the grid step, p and p_tail = p/e^ε the two density levels): then for any two inputs
//!   P[k | t]/P[k | t'] ≤ e^ε·(1 + δ)/(1 − δ).
//! * Laplace (the full-precision draw shared by the scalar and batch paths): P[k | t] must be
//!   within relative δ of the exact ∫ f(y)·tent(y/s − k) dy, whose ratios are at most e^ε.
//! * Staircase / SCDF: P(G = g) within relative δ of (1 − b)bᵍ (G = ⌊E/ε⌋ from the
//!   full-precision E), and the uniform position inside a step within relative δ of the flat
//!   density (grid probabilities of one step's interior).
//!
//! With δ = 5·10⁻⁷·ε the ln-ratio is at most ε + 2δ = ε·(1 + 10⁻⁶). The fast tier runs one or
//! two windows per sampler at the smallest accepted ε ([`MIN_EPSILON`], the worst case: the
//! lattice is coarsest against the grid there); the heavy tier more windows and inputs, and a
//! table of the slack around the minimum. Laplace sets it: its float draw −ln U has one `f64`
//! ulp of resolution, about 2000·2²⁰·ulp(x) ≈ 7·10⁻⁶ grid steps at x = 28 when ε = 10⁻³, and
//! its enumerated slack there reached 2.2δ; at ε = 0.002 it stays below 0.5δ. PM alone would
//! allow ε ≈ 2·10⁻⁴ (slack ≈ 2.2·10⁻¹⁸/ε², the audit's measurement, reproduced).

use super::staircase::StaircaseNoise;
use super::{GRID_STEP, Laplace, NumericMechanism, Piecewise};
use crate::params::{Epsilon, MIN_EPSILON};
use crate::sampling::{ln_uniform_finish, ln_uniform_reduce};

/// The rounding of a sampler: `randomized_round_fast` (scalar PM/HM, staircase) or
/// `randomized_round_from_word` (the PM/HM batch kernels).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Rounding {
    Scalar,
    Batch,
}

/// (⌊y/s⌋, P[round up]·2⁶⁴) of `y` under `r`, exactly as the sampler computes them.
fn round_weights(y: f64, r: Rounding) -> (i64, u128) {
    let scaled = y / GRID_STEP;
    match r {
        Rounding::Scalar if scaled.abs() < (1u64 << 30) as f64 => {
            // (fixed + U₃₂) >> 32 with fixed = trunc(scaled·2³²): up iff U₃₂ ≥ 2³² − rem.
            let fixed = (scaled * (1u64 << 32) as f64) as i64;
            let rem = (fixed & 0xffff_ffff) as u128;
            (fixed >> 32, rem << 32)
        }
        Rounding::Scalar => {
            // `randomized_round`: Bernoulli(frac) against ⌊frac·2⁶⁴⌋.
            let lo = scaled.floor();
            let frac = scaled - lo;
            let thr = if frac > 0.0 { (frac * 18_446_744_073_709_551_616.0) as u64 as u128 } else { 0 };
            (lo as i64, thr)
        }
        Rounding::Batch => {
            // Up iff (w >> 12)·2⁻⁵² < frac: ⌈frac·2⁵²⌉ of the 2⁵² values.
            let t = scaled as i64;
            let lo = t - ((t as f64) > scaled) as i64;
            let frac = scaled - lo as f64;
            ((lo), ((frac * 4_503_599_627_370_496.0).ceil() as u128) << 12)
        }
    }
}

/// P[k | t] of PM's sampler for k in [k_lo, k_hi]: every uniform u = j·2⁻⁵³ whose output is
/// within one grid step of the window (found by bisection: the sampler is a monotone inverse
/// CDF, up to a few ulps at its piece boundaries), with its exact rounding weights.
fn pm_probabilities(m: &Piecewise, t: f64, k_lo: i64, k_hi: i64, r: Rounding) -> Vec<f64> {
    let y = |j: u64| m.sample_real(t, j as f64 * (1.0 / (1u64 << 53) as f64));
    let first_at = |bound: f64| {
        let (mut lo, mut hi) = (0u64, 1u64 << 53);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if y(mid) < bound { lo = mid + 1 } else { hi = mid }
        }
        lo
    };
    // Outputs in [(k_lo − 1)·s, (k_hi + 1)·s) are the ones with weight on the window (a point
    // missed by a few-ulp disorder at a piece boundary would carry a weight of ~10⁻¹⁰ of one).
    let (ja, jb) = (first_at((k_lo - 1) as f64 * GRID_STEP), first_at((k_hi + 1) as f64 * GRID_STEP));
    let mut acc = vec![0u128; (k_hi - k_lo + 1) as usize];
    let mut add = |k: i64, w: u128| {
        if (k_lo..=k_hi).contains(&k) {
            acc[(k - k_lo) as usize] += w;
        }
    };
    for j in ja..jb {
        let (lo, up) = round_weights(y(j), r);
        add(lo, (1u128 << 64) - up);
        add(lo + 1, up);
    }
    // Each j has probability 2⁻⁵³, each weight is in units of 2⁻⁶⁴.
    acc.iter().map(|&a| a as f64 * 2f64.powi(-117)).collect()
}

/// The largest relative excursion of PM's grid probabilities outside [s·p_tail, s·p] over the
/// first `windows` windows of half-width `w` grid steps around the interesting places of input t
/// (the centre, both window edges, next to −C, both tails), and the largest |P/(s·level) − 1| over points
/// whose rounding support sees one density level only (the lattice slack proper).
fn pm_excursion(m: &Piecewise, t: f64, w: i64, r: Rounding, windows: usize) -> (f64, f64) {
    let (c, s) = (m.scale(), GRID_STEP);
    let (l, rt) = (m.left(t), m.right(t));
    let mut centres = vec![0.5 * (l + rt), l, rt, -c + (w + 3) as f64 * s];
    if l > -c + 0.01 * c {
        centres.push(0.5 * (l - c));
    }
    if rt < c - 0.01 * c {
        centres.push(0.5 * (rt + c));
    }
    let (hi_level, lo_level) = (s * m.center_density(), s * m.tail_density());
    let (mut excursion, mut slack) = (0.0f64, 0.0f64);
    for y0 in centres.into_iter().take(windows) {
        let k0 = (y0 / s).round() as i64;
        let ps = pm_probabilities(m, t, k0 - w, k0 + w, r);
        for (i, &p) in ps.iter().enumerate() {
            let k = k0 - w + i as i64;
            let (a, b) = ((k - 1) as f64 * s, (k + 1) as f64 * s);
            if a < -c || b > c {
                continue; // the rounding support reaches past ±C: a partial tent
            }
            excursion = excursion.max(p / hi_level - 1.0).max(1.0 - p / lo_level);
            let (da, db) = (m.density(t, a), m.density(t, b));
            if da == db && m.density(t, k as f64 * s) == da {
                slack = slack.max((p / (s * da) - 1.0).abs());
            }
        }
    }
    (excursion, slack)
}

/// The tolerance δ = 5·10⁻⁷·ε: ln-ratio at most ε + 2δ = ε(1 + 10⁻⁶).
fn delta(eps: f64) -> f64 {
    5e-7 * eps
}

/// Fast tier: PM at the smallest accepted ε, both roundings, t = 1, three grid points at the
/// centre of the high window and at its left edge: every grid probability within the envelope
/// (the audit's pm_tiny.py found 0.41 in ln-ratio at ε = 10⁻⁹ on the same lattice).
#[test]
fn pm_grid_probabilities_stay_in_the_envelope_at_min_epsilon() {
    let m = Piecewise::new(MIN_EPSILON).unwrap();
    for r in [Rounding::Scalar, Rounding::Batch] {
        let (ex, slack) = pm_excursion(&m, 1.0, 1, r, 2);
        assert!(ex <= delta(MIN_EPSILON), "{r:?}: excursion {ex:.3e} > {:.3e}", delta(MIN_EPSILON));
        eprintln!("pm eps {MIN_EPSILON} {r:?} t 1: excursion {ex:.2e}, lattice slack {slack:.2e}");
    }
}

/// The largest |ln P[k | t] − ln P[k | t']| of PM's sampler over the inputs `ts` and the grid
/// points k whose rounding support reaches ±C (the partial cells at the edges, where the
/// density drops to 0; `edges`: +C only, or both), by exact enumeration. Infinite when one
/// input gives a point a probability and another none.
fn pm_edge_ratio(m: &Piecewise, ts: &[f64], r: Rounding, edges: &[f64]) -> f64 {
    let s = GRID_STEP;
    let mut worst = 0.0f64;
    for &sign in edges {
        let k_lo = (sign * m.scale() / s).floor() as i64 - 1;
        let ps: Vec<Vec<f64>> = ts.iter().map(|&t| pm_probabilities(m, t, k_lo, k_lo + 3, r)).collect();
        for i in 0..4 {
            let (lo, hi) = ps.iter().map(|p| p[i]).fold((f64::INFINITY, 0.0f64), |(a, b), p| (a.min(p), b.max(p)));
            if hi > 0.0 {
                worst = worst.max((hi / lo).ln());
            }
        }
    }
    worst
}

/// The bound PM's edge cells keep (documented in PRIVACY-SAMPLERS.md and `params.rs`): the
/// ln-ratio is at most ε + 2⁻²⁹/p_tail (≈ 2⁻²⁶/ε at small ε). The output is clamped to the last
/// grid point inside [−C, C], so every edge report has at least half a tent of the tail density
/// p_tail (probability ≥ s·p_tail/2), and the float lattice moves it by a few points of 2⁻⁵³
/// each (one per step of the density: the window's ends and C), a relative 2⁻³²/p_tail each.
fn pm_edge_bound(m: &Piecewise) -> f64 {
    m.epsilon().value() + 2f64.powi(-29) / m.tail_density()
}

/// Fast tier: PM's partial grid cells at +C, by ratio, at the accepted ε whose C sits 4.3·10⁻⁶
/// grid steps past a grid point (the worst phase of 0.002 ≤ ε < 0.004, scanned in steps of
/// 10⁻⁸): the audit's pair of inputs 1 − 3·10⁻¹⁵ and −1, and 1. Unclamped, the last point
/// holds about a dozen lattice points of weight 4·10⁻⁶: its ln-ratio was 0.122, 43 ε.
#[test]
fn pm_edge_cells_keep_the_ratio_bound() {
    let eps = 0.002_867_05;
    let m = Piecewise::new(eps).unwrap();
    for r in [Rounding::Scalar, Rounding::Batch] {
        let worst = pm_edge_ratio(&m, &[1.0 - 3e-15, -1.0, 1.0], r, &[1.0]);
        eprintln!("pm edge eps {eps} {r:?}: ln-ratio {worst:.6e} (ε {eps}, bound {:.6e})", pm_edge_bound(&m));
        assert!(worst <= pm_edge_bound(&m), "{r:?}: edge ln-ratio {worst:.6e} > {:.6e}", pm_edge_bound(&m));
    }
}

/// Heavy tier: both edges, more inputs and ε (the minimum, the phases of C nearest a grid point
/// below 0.004, and 0.01: above it a grid cell holds more than 10⁷ lattice points, and the
/// lattice is finer against the grid), both roundings.
#[test]
#[ignore = "heavy: run in release with --ignored"]
fn heavy_pm_edge_cells_keep_the_ratio_bound() {
    let ts = [1.0 - 3e-15, 1.0, 1.0 - 1e-9, 0.999, 0.5, 0.0, -0.5, -1.0 + 3e-15, -1.0];
    for eps in [MIN_EPSILON, 0.002_867_05, 0.002_962_42, 0.002_066_63, 0.004, 0.01] {
        let m = Piecewise::new(eps).unwrap();
        for r in [Rounding::Scalar, Rounding::Batch] {
            let worst = pm_edge_ratio(&m, &ts, r, &[1.0, -1.0]);
            let slack = pm_edge_bound(&m) - eps;
            eprintln!("pm edge eps {eps} {r:?}: ln-ratio − ε = {:.3e} (bound {slack:.3e})", worst - eps);
            assert!(worst <= pm_edge_bound(&m), "eps {eps} {r:?}: edge ln-ratio {worst:.6e}");
        }
    }
}

/// P[k | t] of the Laplace sampler (scalar and batch: one draw, [`crate::sampling::laplace1_full`])
/// for k in [k_lo, k_hi] (the window above t, noise sign +): every (exponent e, significand m) of
/// U whose output lands within one grid step of the window (plus a margin of 64 significands), with probability 2⁻ᵉ·2⁻⁵²·½ and the
/// exact weights of `randomized_round32` (32 bits, then a 52-bit tie-break).
fn laplace_probabilities(mech: &Laplace, t: f64, k_lo: i64, k_hi: i64) -> Vec<f64> {
    let lambda = mech.scale();
    let x_of = |y: f64| (y - t) / lambda;
    let (x_lo, x_hi) = (x_of((k_lo - 1) as f64 * GRID_STEP), x_of((k_hi + 1) as f64 * GRID_STEP));
    assert!(x_lo > 0.0, "the window must lie above t");
    let (u_lo, u_hi) = ((-x_hi).exp(), (-x_lo).exp());
    let e_of = |u: f64| (-u.log2()).ceil() as i32;
    let n = (k_hi - k_lo + 1) as usize;
    let mut total = vec![0.0f64; n];
    for e in (e_of(u_hi) - 1).max(1)..=e_of(u_lo) + 1 {
        let m_of = |u: f64| (u * 2f64.powi(e) - 1.0) * 4_503_599_627_370_496.0;
        let m_a = (m_of(u_lo).floor() - 64.0).clamp(0.0, 4_503_599_627_370_495.0) as u64;
        let m_b = (m_of(u_hi).ceil() + 64.0).clamp(0.0, 4_503_599_627_370_495.0) as u64;
        let zeros = 11 * ((e as u64 - 1) / 11);
        let lead = e as u64 - 1 - zeros;
        let top = (1u64 << (10 - lead)) << 52;
        let mut acc = vec![0u128; n];
        for mm in m_a..=m_b {
            let (f, s, dk) = ln_uniform_reduce(zeros, top | mm);
            let x = -ln_uniform_finish(f, s, dk);
            let scaled = (lambda / GRID_STEP).mul_add(x, t * (1.0 / GRID_STEP));
            let lo = scaled.floor();
            let big = (scaled - lo) * 4_294_967_296.0;
            let f32 = big.floor();
            // Up: U₃₂ < F (F values), or U₃₂ = F and a fresh unit52 < big − F.
            let up = ((f32 as u128) << 52) + ((big - f32) * 4_503_599_627_370_496.0).ceil() as u128;
            for (k, w) in [(lo as i64, (1u128 << 84) - up), (lo as i64 + 1, up)] {
                if (k_lo..=k_hi).contains(&k) {
                    acc[(k - k_lo) as usize] += w;
                }
            }
        }
        for (tot, &a) in total.iter_mut().zip(&acc) {
            *tot += a as f64 * 2f64.powi(-(e + 52 + 1 + 84));
        }
    }
    total
}

/// The largest |P/P_exact − 1| of the Laplace sampler over windows of half-width `w` at noise
/// `xs` (in scales λ) above t. P_exact[k] = s·f(ks)·2(cosh a − 1)/a², a = s/λ (the exact
/// integral of the density against the rounding's tent).
fn laplace_slack(mech: &Laplace, t: f64, xs: &[f64], w: i64) -> f64 {
    let (lambda, s) = (mech.scale(), GRID_STEP);
    let a = s / lambda;
    let smooth = 1.0 + a * a / 12.0;
    let mut worst = 0.0f64;
    for &x in xs {
        let k0 = ((t + lambda * x) / s).round() as i64;
        let ps = laplace_probabilities(mech, t, k0 - w, k0 + w);
        for (i, &p) in ps.iter().enumerate() {
            let y = (k0 - w + i as i64) as f64 * s;
            let exact = s * mech.density(t, y) * smooth;
            worst = worst.max((p / exact - 1.0).abs());
        }
    }
    worst
}

/// Fast tier: the Laplace sampler at the smallest accepted ε at 28 scales, where the old scalar
/// path had holes (the audit's lap_tail.py region): one grid point. The heavy tier covers the
/// body, the hot/cold boundary of the draw (11·ln 2) and the tail up to the cut.
#[test]
fn laplace_grid_probabilities_are_exact_at_min_epsilon() {
    let m = Laplace::new(MIN_EPSILON).unwrap();
    let slack = laplace_slack(&m, 0.3, &[28.0], 0);
    eprintln!("laplace eps {MIN_EPSILON}: slack {slack:.2e}");
    assert!(slack <= delta(MIN_EPSILON), "slack {slack:.3e} > {:.3e}", delta(MIN_EPSILON));
}

/// P(G = g) of the staircase sampler, exactly: G = ⌊E·(1/ε)⌋ with E = −ln U from the
/// full-precision draw; for each binary exponent e of U the significands m with
/// ⌊E(e, m)/ε⌋ = g form an interval (E decreases with m), found by bisection.
fn staircase_g_probability(eps: f64, g: u64) -> f64 {
    let inv = 1.0 / eps;
    let bucket = |e: u64, mm: u64| {
        let zeros = 11 * ((e - 1) / 11);
        let top = (1u64 << (10 - (e - 1 - zeros))) << 52;
        let (f, s, dk) = ln_uniform_reduce(zeros, top | mm);
        (-ln_uniform_finish(f, s, dk) * inv) as i64 as u64
    };
    // The first significand whose bucket is ≤ `g` (bucket is non-increasing in m).
    let first_le = |e: u64, g: u64| {
        let (mut lo, mut hi) = (0u64, 1u64 << 52);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if bucket(e, mid) > g { lo = mid + 1 } else { hi = mid }
        }
        lo
    };
    // U ∈ [2⁻ᵉ, 2¹⁻ᵉ) gives E ∈ ((e − 1)·ln 2, e·ln 2]: the exponents that can reach [gε, (g + 1)ε).
    let ln2 = std::f64::consts::LN_2;
    let (e_lo, e_hi) = ((g as f64 * eps / ln2).floor() as u64, ((g + 1) as f64 * eps / ln2).ceil() as u64 + 1);
    let mut p = 0.0;
    for e in e_lo.max(1)..=e_hi {
        // Bucket g is [first_le(g), first_le(g − 1)) (bucket 0: to the end).
        let end = if g == 0 { 1u64 << 52 } else { first_le(e, g - 1) };
        p += (end - first_le(e, g)) as f64 * 2f64.powi(-(e as i32) - 52);
    }
    p
}

/// The largest |P(G = g)/((1 − b)bᵍ) − 1| over `gs`.
fn staircase_g_slack(eps: f64, gs: &[u64]) -> f64 {
    let mut worst = 0.0f64;
    for &g in gs {
        let exact = -(-eps).exp_m1() * (-eps * g as f64).exp();
        let p = staircase_g_probability(eps, g);
        worst = worst.max((p / exact - 1.0).abs());
    }
    worst
}

/// Fast tier: the staircase's step count G at the smallest and largest accepted ε, up to the
/// tail cut 42/ε.
#[test]
fn staircase_step_count_is_exactly_geometric() {
    let eps = MIN_EPSILON;
    let slack = staircase_g_slack(eps, &[0, 1, 2, 10, 1000, 10_000, 20_999]);
    eprintln!("staircase G eps {eps}: slack {slack:.2e}");
    assert!(slack <= delta(eps), "eps {eps}: slack {slack:.3e}");
    for eps in [1.0, 20.0] {
        let slack = staircase_g_slack(eps, &[0, 1, 2, (42.0 / eps) as u64]);
        assert!(slack <= delta(eps), "eps {eps}: slack {slack:.3e}");
    }
}

/// The staircase noise's position inside one step: for step g and piece (offset, width) the
/// unrounded output is t + Δ·((g + offset) + width·U), U = j·2⁻⁵³. Returns the largest
/// |P[k | g, piece]/(s/(Δ·width)) − 1| over grid points of the window of half-width `w` around
/// the piece's middle (their rounding support inside the piece), from the exact count of the
/// uniforms behind every `f64` output value (the output is monotone in U: each value's
/// preimage is an interval, found by bisection).
fn staircase_piece_slack(t: f64, g: f64, offset: f64, width: f64, w: i64) -> f64 {
    const DELTA: f64 = 2.0;
    let s = GRID_STEP;
    let y = |j: u64| t + DELTA * (g + offset + width * (j as f64 * (1.0 / (1u64 << 53) as f64)));
    let first_at = |bound: f64| {
        let (mut lo, mut hi) = (0u64, 1u64 << 53);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if y(mid) < bound { lo = mid + 1 } else { hi = mid }
        }
        lo
    };
    let k0 = ((t + DELTA * (g + offset + 0.5 * width)) / s).round() as i64;
    let (k_lo, k_hi) = (k0 - w, k0 + w);
    let mut acc = vec![0u128; (2 * w + 1) as usize];
    // Walk the output values from the first j reaching (k_lo − 1)·s to the first reaching
    // (k_hi + 1)·s; the next value's first j by galloping from the last count, then bisection.
    let (mut j, end) = (first_at((k_lo - 1) as f64 * s), first_at((k_hi + 1) as f64 * s));
    let mut step = 1u64;
    while j < end {
        let v = y(j);
        let (mut lo, mut hi) = (j, (j + step).min(end));
        while hi < end && y(hi) <= v {
            (lo, hi) = (hi, (j + 2 * (hi - j)).min(end));
        }
        while lo + 1 < hi {
            let mid = lo + (hi - lo) / 2;
            if y(mid) <= v { lo = mid } else { hi = mid }
        }
        // y(lo) = v < y(hi) (or hi = end): the values equal to v are [j, hi).
        let count = (hi - j) as u128;
        step = (hi - j).max(1);
        let (k, up) = round_weights(v, Rounding::Scalar);
        for (k, wt) in [(k, (1u128 << 64) - up), (k + 1, up)] {
            if (k_lo..=k_hi).contains(&k) {
                acc[(k - k_lo) as usize] += count * wt;
            }
        }
        j = hi;
    }
    let level = s / (DELTA * width);
    acc.iter().map(|&a| (a as f64 * 2f64.powi(-117) / level - 1.0).abs()).fold(0.0, f64::max)
}

/// Fast tier: the position inside a step at the smallest accepted ε at the tail cut
/// (|y| ≈ 42 000, where the output's `f64` spacing is 2⁻¹⁷ grid steps).
#[test]
fn staircase_step_interior_is_flat_at_min_epsilon() {
    let eps = MIN_EPSILON;
    let gamma = StaircaseNoise::optimal_gamma(eps).unwrap();
    let mut worst = 0.0f64;
    // Near 0 the output's float spacing (2⁻⁵² relative) is far below the rounding's resolution:
    // the tail cut, where it is coarsest, is the case to enumerate.
    for g in [20_999.0] {
        for (offset, width) in [(0.0, gamma), (gamma, 1.0 - gamma)] {
            worst = worst.max(staircase_piece_slack(0.3, g, offset, width, 1));
        }
    }
    eprintln!("staircase step interior eps {eps}: slack {worst:.2e}");
    assert!(worst <= delta(eps), "slack {worst:.3e}");
}

/// Heavy tier: more windows, inputs and both roundings at the smallest ε; and the slack table
/// below it (printed: the reason for the minimum), e.g. PM's lattice slack grows like ε⁻².
///
/// In four tests (PM's scalar and batch rounding, Laplace and the staircase, below the minimum)
/// so that the heavy tier's test runner can spread them over the cores.
fn heavy_lattice_pm(r: Rounding) {
    let eps = MIN_EPSILON;
    let m = Piecewise::new(eps).unwrap();
    for t in [-1.0, -0.55, 0.0, 0.3, 1.0] {
        let (ex, slack) = pm_excursion(&m, t, 12, r, 6);
        eprintln!("pm eps {eps} {r:?} t {t}: excursion {ex:.2e}, lattice slack {slack:.2e}");
        assert!(ex <= delta(eps), "{r:?} t {t}: excursion {ex:.3e}");
    }
}

#[test]
#[ignore = "heavy: run in release with --ignored"]
fn heavy_lattice_enumeration_pm_scalar() {
    heavy_lattice_pm(Rounding::Scalar);
}

#[test]
#[ignore = "heavy: run in release with --ignored"]
fn heavy_lattice_enumeration_pm_batch() {
    heavy_lattice_pm(Rounding::Batch);
}

#[test]
#[ignore = "heavy: run in release with --ignored"]
fn heavy_lattice_enumeration_laplace_and_staircase() {
    let eps = MIN_EPSILON;
    let l = Laplace::new(eps).unwrap();
    for t in [-1.0, 0.3, 1.0] {
        let slack = laplace_slack(&l, t, &[0.01, 0.5, 3.0, 7.6, 7.63, 15.0, 28.0, 30.0, 36.0, 40.0, 41.9], 3);
        eprintln!("laplace eps {eps} t {t}: slack {slack:.2e}");
        assert!(slack <= delta(eps), "t {t}: slack {slack:.3e}");
    }
    let gs: Vec<u64> = [0u64, 1, 2, 3, 7, 100, 999, 5000, 12_345, 20_999].to_vec();
    let slack = staircase_g_slack(eps, &gs);
    assert!(slack <= delta(eps), "staircase G: slack {slack:.3e}");
    for gamma in [StaircaseNoise::optimal_gamma(eps).unwrap(), super::staircase::scdf_gamma(eps)] {
        for g in [1000.0, 20_999.0] {
            for (offset, width) in [(0.0, gamma), (gamma, 1.0 - gamma)] {
                let slack = staircase_piece_slack(-1.0, g, offset, width, 3);
                assert!(slack <= delta(eps), "staircase g {g} piece ({offset}, {width}): slack {slack:.3e}");
            }
        }
    }
}

#[test]
#[ignore = "heavy: run in release with --ignored"]
fn heavy_lattice_enumeration_below_the_minimum() {
    // Around and below the minimum (built from a raw ε: the constructors refuse ε < 0.002).
    let raw = Epsilon::new(MIN_EPSILON).unwrap();
    for e in [1e-5, 1e-4, 1e-3, 2e-3, 4e-3, 1e-2] {
        let pm = Piecewise::with_constants(raw, e);
        let (ex, slack) = pm_excursion(&pm, 0.3, 3, Rounding::Scalar, 6);
        let l = Laplace::with_scale(raw, e);
        let lap = if e >= 1e-3 { laplace_slack(&l, 0.3, &[0.5, 15.0, 36.0, 41.9], 3) } else { f64::NAN };
        eprintln!(
            "eps {e:e}: pm excursion {ex:.2e} (lattice slack {slack:.2e}), laplace slack {lap:.2e}; in units of delta = 5e-7 eps: pm {:.3}, laplace {:.3}",
            ex / delta(e),
            lap / delta(e)
        );
    }
}

/// An RNG returning the given words in order (then zeros): drives a sampler through chosen words.
struct Words(std::collections::VecDeque<u64>);
impl rand::TryRng for Words {
    type Error = std::convert::Infallible;
    fn try_next_u32(&mut self) -> Result<u32, Self::Error> {
        Ok((self.0.pop_front().unwrap_or(0) >> 32) as u32)
    }
    fn try_next_u64(&mut self) -> Result<u64, Self::Error> {
        Ok(self.0.pop_front().unwrap_or(0))
    }
    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Self::Error> {
        dst.fill(0);
        Ok(())
    }
}

/// The enumerations model the samplers the clients run: for random words (and words forcing
/// the tail: U < 2⁻³³, the old scalar Laplace's 20-bit region, and U < 2⁻¹¹⁰), `randomize`
/// (Laplace, PM) and the staircase noise give exactly the enumerated functions of those words.
/// Fails on the old main, whose scalar Laplace and staircase drew a ziggurat Exp(1).
#[test]
fn client_samplers_are_the_enumerated_functions() {
    use crate::numeric::NumericReport;
    use crate::sampling::fast_rng;
    use rand::Rng;
    let mut rng = fast_rng(3);
    let lap = Laplace::new(0.5).unwrap();
    let pm = Piecewise::new(0.5).unwrap();
    let noise = StaircaseNoise::new(0.5, 0.3).unwrap();
    for i in 0..20_000u64 {
        let t = (i % 201) as f64 / 100.0 - 1.0;
        // The noise word: random, or with bits 52–62 cleared (cold) and 0–3 extra zero words.
        let mut w = rng.next_u64();
        let extra: Vec<u64> = if i % 5 == 0 {
            w &= !(0x7ff << 52);
            (0..i % 4).map(|_| 0).chain([rng.next_u64() | (1 << 60)]).collect()
        } else {
            if w & (0x7ff << 52) == 0 {
                w |= 1 << 52; // (a random cold word: made hot, its finish words are not scripted)
            }
            Vec::new()
        };
        let u = rng.next_u64();
        // Laplace: word w, then the rounding's 32 bits, then the cold words.
        let words: Vec<u64> = [w, u].into_iter().chain(extra.iter().copied()).collect();
        let got = lap.randomize_unchecked(t, &mut Words(words.into()));
        let (zeros, v) = if extra.is_empty() { (0, w) } else { (11 * extra.len() as u64, *extra.last().unwrap()) };
        let (f, s, dk) = ln_uniform_reduce(zeros, v);
        let x = -ln_uniform_finish(f, s, dk);
        let x = if w >> 63 == 1 { -x } else { x };
        let scaled = (lap.scale() / GRID_STEP).mul_add(x, t * (1.0 / GRID_STEP));
        let (lo, big) = (scaled.floor(), (scaled - scaled.floor()) * 4_294_967_296.0);
        let up = ((u >> 32) as f64) < big.floor(); // (ties have probability 2⁻³²: none here)
        assert_eq!(got, NumericReport::Fixed(lo as i64 + up as i64), "laplace word {w:#x}");
        // PM: the uniform, then the rounding word.
        let got = pm.randomize_unchecked(t, &mut Words(vec![w, u].into()));
        let y = pm.sample_real(t, (w >> 11) as f64 * (1.0 / (1u64 << 53) as f64));
        let (lo, up_w) = round_weights(y, Rounding::Scalar);
        let up = ((u >> 32) as u128) << 32 >= (1u128 << 64) - up_w;
        assert_eq!(got, NumericReport::Fixed(lo + up as i64), "pm word {w:#x}");
        // Staircase: G = ⌊E/ε⌋ from the same full-precision E, the sign from bit 63.
        let sample = noise.sample(&mut Words([w].into_iter().chain(extra.iter().copied()).chain([0, 0]).collect()));
        let g = (x.abs() / 0.5) as i64 as f64;
        assert!(sample.is_sign_negative() == (w >> 63 == 1), "staircase sign");
        assert!((sample.abs() / 2.0 - g) >= 0.0 && sample.abs() / 2.0 - g < 1.0, "staircase step {g} vs {sample}");
    }
}
