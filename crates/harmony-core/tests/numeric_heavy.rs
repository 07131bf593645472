//! Heavy statistical tier (10⁶ samples per case), run in release by CI:
//! `cargo test -p harmony-core --release -- --ignored`. Same checks as the fast tier, at 10× the
//! sample size, so a 1/√10 smaller bias is visible: |z| < 4.42 per statistic (1e-5 false-failure
//! rate each).

mod numeric_common;

use harmony_core::numeric::{DuchiMulti, HarmonyBit};
use harmony_core::sampling::{fast_rng, stream_seed};
use numeric_common::*;

const N: usize = 1_000_000;

#[test]
#[ignore = "heavy: run in release with --ignored"]
fn heavy_one_dimensional_means_and_variances() {
    let failures = check_all_1d(N, 0x004e_a71d);
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

#[test]
#[ignore = "heavy: run in release with --ignored"]
fn heavy_vector_means_and_variances() {
    let mut failures = Vec::new();
    for (k, eps) in EPSILONS.into_iter().enumerate() {
        for d in [1usize, 2, 3, 4, 6, 9, 64, 65, 200] {
            let m = DuchiMulti::new(eps, d).unwrap();
            let n = if d > 10 { N / 10 } else { N };
            if let Err(e) = check_vector(&m, &test_vector(d), n, stream_seed(0xd0c, (k * 1000 + d) as u64)) {
                failures.push(e);
            }
        }
        for d in [1usize, 2, 7, 20] {
            let m = HarmonyBit::new(eps, d).unwrap();
            if let Err(e) = check_vector(&m, &test_vector(d), N, stream_seed(0xb17, (k * 1000 + d) as u64)) {
                failures.push(e);
            }
        }
    }
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

#[test]
#[ignore = "heavy: run in release with --ignored"]
fn heavy_duchi_multi_large_d_is_unbiased() {
    // d = 1000: per-coordinate means over 2·10⁴ reports, combined into one chi-square-like
    // statistic: Σ z_j² over 1000 coordinates is ~ chi-square(1000), mean 1000, sd 44.7;
    // threshold 1000 + 4.42·44.7 ≈ 1198 (plus a little for the non-normal tails).
    let d = 1000;
    let m = DuchiMulti::new(2.0, d).unwrap();
    let t = test_vector(d);
    let n = 20_000;
    let mut rng = fast_rng(0x1000);
    let mut sums = vec![0.0; d];
    for _ in 0..n {
        let r = harmony_core::numeric::VectorMechanism::randomize(&m, &t, &mut rng).unwrap();
        for (j, s) in sums.iter_mut().enumerate() {
            *s += if r.sign(j) { m.scale() } else { -m.scale() };
        }
    }
    let stat: f64 = (0..d)
        .map(|j| {
            let var = m.scale() * m.scale() - t[j] * t[j];
            let z = (sums[j] / n as f64 - t[j]) / (var / n as f64).sqrt();
            z * z
        })
        .sum();
    assert!(stat < 1210.0, "d = {d}, n = {n}: sum of squared z {stat:.1}, expected ~1000 (< 1210)");
}
