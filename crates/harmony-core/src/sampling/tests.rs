use super::words::FILL_CHUNK;
use super::*;

#[test]
fn bernoulli_edges_are_exact() {
    let mut rng = fast_rng(1);
    for _ in 0..1000 {
        assert!(!bernoulli(&mut rng, 0.0));
        assert!(bernoulli(&mut rng, 1.0));
        assert!(!bernoulli(&mut rng, f64::NAN));
    }
}

#[test]
fn bernoulli_words_expansion_is_exact() {
    // The stored expansion must reproduce p exactly.
    for &p in &[0.5, 0.25, 0.2689414213699951, 1.0 / 3.0, 1e-5, 0.999999, 3.0e-300] {
        let bw = BernoulliWords::new(p);
        let mut v = 0.0f64;
        for (i, &m) in bw.masks.iter().enumerate() {
            assert!(m == 0 || m == u64::MAX);
            if m != 0 {
                v += (-(i as f64 + 1.0)).exp2();
            }
        }
        assert_eq!(bw.masks.last(), Some(&u64::MAX), "p = {p}: expansion ends with a 1 bit");
        assert_eq!(v, p, "p = {p}");
    }
}

#[test]
fn pdep_matches_the_instruction() {
    let mut rng = fast_rng(22);
    assert_eq!(pdep(0b1011, 0b1111_0000), 0b1011_0000);
    assert_eq!(pdep(u64::MAX, 0), 0);
    assert_eq!(pdep(0b10, 0x8000_0000_0000_0001), 0x8000_0000_0000_0000);
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("bmi2") {
        for _ in 0..10_000 {
            let (a, m) = (rng.next_u64(), rng.next_u64() & rng.next_u64());
            // SAFETY: BMI2 was detected on this CPU just above.
            #[allow(unsafe_code)]
            let hw = unsafe { std::arch::x86_64::_pdep_u64(a, m) };
            assert_eq!(pdep(a, m), hw, "a = {a:#x}, m = {m:#x}");
        }
    }
}

/// `fill`'s AVX2 build (hardware pdep) and portable build give the same words, for lengths
/// around every chunk size and p's with short and long expansions.
#[test]
fn bernoulli_words_fill_builds_agree() {
    for &p in &[0.2689414213699951, 0.3125, 0.375, 0.5, 1e-5, 0.999] {
        let bw = BernoulliWords::new(p);
        for &len in &[1usize, 3, 4, 5, 31, 33, 255, 256, 257, 700] {
            let mut a = vec![0u64; len];
            bw.fill(&mut fast_rng(len as u64), &mut a);
            let mut b = vec![0u64; len];
            match len {
                0..=4 => bw.fill_kernel::<_, 4>(0, &mut fast_rng(len as u64), &mut b, u64::MAX, pdep),
                5..=32 => bw.fill_kernel::<_, 32>(0, &mut fast_rng(len as u64), &mut b, u64::MAX, pdep),
                _ => bw.fill_kernel::<_, FILL_CHUNK>(0, &mut fast_rng(len as u64), &mut b, u64::MAX, pdep),
            }
            assert_eq!(a, b, "p = {p}, len {len}");
        }
    }
}

#[test]
fn bernoulli_words_fill_mean_within_4_42_sigma() {
    let mut rng = fast_rng(21);
    for &p in &[0.5, 0.2689414213699951, 0.01, 0.9, 1.0, 0.0, 0.3125, 0.375, 1e-5, 0.1] {
        let bw = BernoulliWords::new(p);
        let mut out = vec![0u64; 20_001];
        bw.fill(&mut rng, &mut out);
        let ones: u64 = out.iter().map(|w| w.count_ones() as u64).sum();
        let n = 64.0 * out.len() as f64;
        let sd = (n * p * (1.0 - p)).sqrt();
        assert!((ones as f64 - n * p).abs() <= 4.42 * sd, "p = {p}: {ones} of {n}");
        // Lanes are independent: the pair (lane 0, lane 1) is 11 with probability p².
        let both = out.iter().filter(|&&w| w & 3 == 3).count() as f64;
        let m = out.len() as f64;
        let sd2 = (m * p * p * (1.0 - p * p)).sqrt();
        assert!((both - m * p * p).abs() <= 4.42 * sd2 + 1e-9, "p = {p}: pairs {both} of {m}");
    }
}

#[test]
fn bernoulli_words_mean_within_4_42_sigma() {
    // z = 4.42 <-> two-sided false-failure rate 1e-5.
    let mut rng = fast_rng(2);
    for &p in &[0.5, 0.2689414213699951, 0.01, 0.9] {
        let bw = BernoulliWords::new(p);
        let words = 20_000u64;
        let ones: u64 = (0..words).map(|_| bw.sample(&mut rng).count_ones() as u64).sum();
        let n = (words * 64) as f64;
        let z = (ones as f64 - n * p) / (n * p * (1.0 - p)).sqrt();
        assert!(z.abs() < 4.42, "p = {p}, n = {n}, ones = {ones}, z = {z}");
    }
    assert_eq!(BernoulliWords::new(0.0).sample(&mut rng), 0);
    assert_eq!(BernoulliWords::new(1.0).sample(&mut rng), u64::MAX);
}

#[test]
fn bernoulli_words_masked_lanes_are_exact_and_confined() {
    // z = 4.42 <-> two-sided false-failure rate 1e-5.
    let mut rng = fast_rng(11);
    let mask = 0xFFFFu64;
    for &p in &[0.5, 0.2689414213699951, 0.05] {
        let bw = BernoulliWords::new(p);
        let words = 50_000u64;
        let mut ones = 0u64;
        for _ in 0..words {
            let w = bw.sample_masked(&mut rng, mask);
            assert_eq!(w & !mask, 0);
            ones += w.count_ones() as u64;
        }
        let n = (words * 16) as f64;
        let z = (ones as f64 - n * p) / (n * p * (1.0 - p)).sqrt();
        assert!(z.abs() < 4.42, "p = {p}, n = {n}, ones = {ones}, z = {z}");
    }
    assert_eq!(BernoulliWords::new(1.0).sample_masked(&mut rng, 0b101), 0b101);
    assert_eq!(BernoulliWords::new(0.0).sample_masked(&mut rng, 0b101), 0);
}

#[test]
fn precomputed_bernoulli_matches_bernoulli() {
    for &p in &[0.0, 1e-30, 0.25, 0.7310585786300049, 0.999, 1.0, 2.0, f64::NAN] {
        let b = Bernoulli::new(p);
        let (mut r1, mut r2) = (fast_rng(12), fast_rng(12));
        for _ in 0..1000 {
            assert_eq!(b.sample(&mut r1), bernoulli(&mut r2, p), "p = {p}");
        }
        if (0.0..=1.0).contains(&p) && p >= 1.0 / 4096.0 || p == 0.0 {
            assert_eq!(b.probability(), p);
        }
    }
}

#[test]
fn splitmix64_is_pinned() {
    // Reference values of SplitMix64 seeded with 0 (first outputs of the generator).
    assert_eq!(splitmix64(0), 0xE220_A839_7B1D_CDAF);
    assert_eq!(splitmix64(0x9E37_79B9_7F4A_7C15), 0x6E78_9E6A_A1B9_65F4);
}

#[test]
fn uniform_below_covers_range_without_bias() {
    let mut rng = fast_rng(3);
    let n = 7u64;
    let mut counts = [0u64; 7];
    let draws = 70_000;
    for _ in 0..draws {
        counts[uniform_below(&mut rng, n) as usize] += 1;
    }
    let e = draws as f64 / 7.0;
    let chi2: f64 = counts.iter().map(|&c| (c as f64 - e).powi(2) / e).sum();
    // chi-square, 6 dof: P[chi2 > 35.9] ~ 3e-6
    assert!(chi2 < 35.9, "chi2 = {chi2}, counts = {counts:?}");
    assert_eq!(uniform_below(&mut rng, 1), 0);
}

#[test]
fn k_of_d_is_distinct_and_uniform() {
    let mut rng = fast_rng(4);
    let mut out = Vec::new();
    let mut counts = [0u64; 10];
    for _ in 0..20_000 {
        sample_k_of_d(&mut rng, 3, 10, &mut out);
        assert_eq!(out.len(), 3);
        assert!(out[0] != out[1] && out[1] != out[2] && out[0] != out[2]);
        for &i in &out {
            counts[i] += 1;
        }
    }
    let e = 20_000.0 * 3.0 / 10.0;
    let chi2: f64 = counts.iter().map(|&c| (c as f64 - e).powi(2) / e).sum();
    assert!(chi2 < 45.0, "chi2 = {chi2}");
}

#[test]
fn sign_and_exp1_moments() {
    // z = 4.42 <-> two-sided false-failure rate 1e-5 per statistic.
    let mut rng = fast_rng(6);
    let n = 200_000;
    let mut m = crate::estimate::Moments::default();
    let mut negatives = 0u64;
    for _ in 0..n {
        let (neg, e) = sign_and_exp1(&mut rng);
        assert!(e >= 0.0 && e.is_finite());
        negatives += neg as u64;
        m.push(e);
    }
    // Exp(1): mean 1, variance 1.
    assert!(m.z_mean(1.0, 1.0).abs() < 4.42, "mean {} (n = {n})", m.mean);
    assert!(m.z_variance(1.0).abs() < 4.42, "variance {} (n = {n})", m.variance());
    let z = (negatives as f64 - n as f64 / 2.0) / (n as f64 / 4.0).sqrt();
    assert!(z.abs() < 4.42, "negatives {negatives} of {n}");
    // Laplace(0, 1): mean 0, variance 2.
    let mut l = crate::estimate::Moments::default();
    (0..n).for_each(|_| l.push(standard_laplace(&mut rng)));
    assert!(l.z_mean(0.0, 2.0).abs() < 4.42, "mean {}", l.mean);
    assert!(l.z_variance(2.0).abs() < 4.42, "variance {}", l.variance());
}

#[test]
fn exp_ziggurat_matches_the_exponential_cdf() {
    // Chi-square over 64 equiprobable bins of Exp(1), plus the far tail beyond r = 7.7.
    let z = ExpZiggurat::build();
    assert!((z.x[0] - (ZIG_EXP_R + 1.0)).abs() < 1e-9, "base strip width {}", z.x[0]);
    for i in 1..256 {
        // Every layer has area v.
        let area = z.x[i] * (z.f[i + 1] - z.f[i]);
        assert!((area / ZIG_EXP_V - 1.0).abs() < 1e-9, "layer {i}: area {area}");
    }
    let mut rng = fast_rng(10);
    let (n, bins) = (640_000usize, 64usize);
    let mut counts = vec![0u64; bins];
    let mut tail = 0u64;
    for _ in 0..n {
        let (_, e) = sign_and_exp1(&mut rng);
        let cdf = -(-e).exp_m1();
        counts[((cdf * bins as f64) as usize).min(bins - 1)] += 1;
        tail += (e > ZIG_EXP_R) as u64;
    }
    let expect = n as f64 / bins as f64;
    let chi2: f64 = counts.iter().map(|&c| (c as f64 - expect).powi(2) / expect).sum();
    // chi-square with 63 dof: P[chi2 > 122.0] ~ 1e-5.
    assert!(chi2 < 122.0, "chi2 = {chi2}");
    let p = (-ZIG_EXP_R).exp();
    let z_tail = (tail as f64 - n as f64 * p) / (n as f64 * p).sqrt();
    assert!(z_tail.abs() < 4.42, "tail count {tail}, expected {}", n as f64 * p);
}

#[test]
fn bernoulli_fast_is_exact_at_the_edges_and_unbiased() {
    let mut rng = fast_rng(12);
    for _ in 0..1000 {
        assert!(!bernoulli_fast(&mut rng, 0.0) && !bernoulli_fast(&mut rng, -1.0));
        assert!(!bernoulli_fast(&mut rng, f64::NAN));
        assert!(bernoulli_fast(&mut rng, 1.0) && bernoulli_fast(&mut rng, 2.0));
    }
    for &p in &[0.5, 0.2689414213699951, 0.01, 0.999] {
        let n = 200_000;
        let ones = (0..n).filter(|_| bernoulli_fast(&mut rng, p)).count() as f64;
        let z = (ones - n as f64 * p) / (n as f64 * p * (1.0 - p)).sqrt();
        assert!(z.abs() < 4.42, "p = {p}: {ones} of {n}");
    }
}

#[test]
fn randomized_round_fast_is_unbiased_on_both_paths() {
    let mut rng = fast_rng(13);
    let step = 1.0 / (1u64 << 20) as f64;
    for &y in &[0.3 * step, -2.7 * step, 1.0 + 0.25 * step, -5000.75 * step, 3000.0 + 0.4 * step] {
        let n = 100_000;
        let base = (y / step).floor();
        let frac = y / step - base;
        let ups = (0..n).filter(|_| randomized_round_fast(&mut rng, y, step) as f64 > base).count() as f64;
        let sd = (n as f64 * frac * (1.0 - frac)).sqrt();
        assert!((ups - n as f64 * frac).abs() < 4.42 * sd + 1.0, "y = {y}: {ups} ups of {n}, frac {frac}");
        let r = randomized_round_fast(&mut rng, y, step) as f64;
        assert!(r == base || r == base + 1.0, "y = {y}: {r} not adjacent to {base}");
    }
    assert_eq!(randomized_round_fast(&mut rng, 2.0 * step, step), 2);
}

#[test]
fn geometric_rate_matches_geometric() {
    let mut rng = fast_rng(7);
    let r: f64 = 0.6;
    let n = 100_000;
    let mut m = crate::estimate::Moments::default();
    (0..n).for_each(|_| m.push(geometric_rate(&mut rng, -r.ln())));
    let (mean, var) = (r / (1.0 - r), r / ((1.0 - r) * (1.0 - r)));
    assert!(m.z_mean(mean, var).abs() < 4.42, "mean {} vs {mean}", m.mean);
    let zeros = {
        let mut rng = fast_rng(8);
        (0..n).filter(|_| geometric_rate(&mut rng, -r.ln()) == 0.0).count()
    };
    let z = (zeros as f64 - n as f64 * (1.0 - r)) / (n as f64 * r * (1.0 - r)).sqrt();
    assert!(z.abs() < 4.42, "P[G = 0]: {zeros} of {n}");
}

#[test]
fn fill_bits_zeroes_padding_and_is_fair() {
    let mut rng = fast_rng(9);
    let mut w = [0u64; 2];
    let mut ones = 0u64;
    for _ in 0..10_000 {
        fill_bits(&mut rng, &mut w, 70);
        assert_eq!(w[1] >> 6, 0);
        ones += (w[0].count_ones() + w[1].count_ones()) as u64;
    }
    let n = 700_000.0;
    assert!(((ones as f64 - n / 2.0) / (n / 4.0).sqrt()).abs() < 4.42, "ones {ones}");
    assert_eq!(padding_mask(64), u64::MAX);
    assert_eq!(padding_mask(3), 0b111);
}

#[test]
fn randomized_round_is_unbiased() {
    let mut rng = fast_rng(5);
    let step = 0.25;
    let y = 0.3;
    let n = 100_000;
    let s: i64 = (0..n).map(|_| randomized_round(&mut rng, y, step)).sum();
    let mean = s as f64 * step / n as f64;
    let sd = (0.2f64 * 0.8).sqrt() * step / (n as f64).sqrt();
    assert!(((mean - y) / sd).abs() < 4.42, "mean {mean}");
}

#[test]
fn bernoulli63_from_word_equals_bernoulli_fast() {
    let mut rng = fast_rng(31);
    let mut ps = vec![
        0.0,
        -0.0,
        -1.0,
        1.0,
        2.0,
        1e300,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        0.5,
        0.25,
        1e-300,
        5e-324,
        1.0 / 2048.0,
        1.0 / 2048.0 - 1e-18,
        0.999_999_999_999_999_9,
        1.0 - f64::EPSILON / 2.0,
    ];
    ps.extend((0..2000).map(|_| uniform01(&mut rng)));
    ps.extend((0..500).map(|_| uniform01(&mut rng) * 1e-5));
    ps.extend((0..500).map(|_| (-60.0 * uniform01(&mut rng)).exp2()));
    for &p in &ps {
        for k in 0..200 {
            let w = rng.next_u64();
            // Also words right at the threshold.
            let w = if k % 3 == 0 { (((p * 9_223_372_036_854_775_808.0) as i64 as u64) << 1) ^ (k & 3) } else { w };
            let want = bernoulli_fast(&mut crate::sampling::tests::OneWord(w), p);
            assert_eq!(bernoulli63_from_word(w, p), want, "p = {p:e}, w = {w:#x}");
        }
    }
}

#[test]
fn word_helpers_equal_their_scalar_forms() {
    let mut rng = fast_rng(32);
    for k in 0..100_000u64 {
        let w = if k < 64 { (1u64 << k) | (k & 1) } else { rng.next_u64() };
        assert_eq!(uniform01_from_word(w), uniform01(&mut OneWord(w)), "w = {w:#x}");
        // The vectorisable hot path of randomized rounding equals the scalar one.
        let scaled = f64::from_bits(rng.next_u64() & !(0x7ffu64 << 52) | ((1000 + (k % 74)) << 52))
            * if k % 2 == 0 { 1.0 } else { -1.0 };
        for x in [scaled, (k as f64) - 50.0, -(k as f64) * 0.25, 0.0, -0.0, 2147483647.5, -1125899906842623.5] {
            if !randomized_round_is_cold(x) {
                assert_eq!(randomized_round_hot(w, x), randomized_round_from_word(w, x, 1.0), "x = {x:e}");
            }
        }
    }
    // randomized_round_from_word: hot and cold paths, one word each, unbiased (see also
    // randomized_round_fast_is_unbiased_on_both_paths).
    let step = 1.0 / (1u64 << 20) as f64;
    for y in [0.3 * step, -2.7 * step, 5000.0 + 0.5 * step, -3.0e4 - 0.25 * step] {
        let scaled = y / step;
        let base = scaled.floor() as i64;
        for _ in 0..100 {
            let w = rng.next_u64();
            let r = randomized_round_from_word(w, y, step);
            assert!(r == base || r == base + 1, "y = {y}");
        }
        // Unbiased: P[up] = frac (z = 4.42).
        let frac = scaled - scaled.floor();
        let n = 100_000;
        let ups = (0..n).filter(|_| randomized_round_from_word(rng.next_u64(), y, step) > base).count() as f64;
        let sd = (n as f64 * frac * (1.0 - frac)).sqrt();
        assert!((ups - n as f64 * frac).abs() < 4.42 * sd + 1.0, "y = {y}: {ups} ups of {n}, frac {frac}");
    }
}

/// The uniform of [`laplace1_from_word`]'s layout, built independently: 2⁻⁽ᴸ⁺¹⁾·(1 + M).
fn dyadic_uniform(w: u64) -> f64 {
    let g = (w >> 52) & 0x7ff;
    let l = g.leading_zeros() - 53;
    (1.0 + (w & ((1 << 52) - 1)) as f64 * (-52f64).exp2()) * (-(l as f64) - 1.0).exp2()
}

#[test]
fn laplace1_from_word_is_minus_ln_u_within_an_ulp_or_two() {
    // Against the C library's `ln` (< 1 ulp) on the exactly representable U: random words,
    // every exponent, significands at 0, at the √2 reduction boundary and at the top.
    let mut rng = fast_rng(41);
    let mut words: Vec<u64> = (0..200_000).map(|_| rng.next_u64()).collect();
    for g in 1..0x800u64 {
        for m in [0, 1, 0x6_a09e_667f_3bcc, 0x6_a09e_667f_3bcd, (1 << 52) - 1, rng.next_u64() >> 12] {
            words.push(g << 52 | m | (rng.next_u64() & (1 << 63)));
        }
    }
    let mut worst = 0.0f64;
    for &w in &words {
        let (x, hot) = laplace1_from_word(w);
        assert_eq!(hot, (w >> 52) & 0x7ff != 0, "w = {w:#x}");
        if !hot {
            continue;
        }
        let want = -dyadic_uniform(w).ln();
        assert!(want > 0.0 && want < 11.0 * std::f64::consts::LN_2 + 1e-12);
        // Sign: bit 63 set = negative.
        assert_eq!(x < 0.0, w >> 63 == 1, "w = {w:#x}");
        let ulps = (x.abs() - want).abs() / (want * f64::EPSILON);
        worst = worst.max(ulps);
        assert!(ulps <= 2.0, "w = {w:#x}: {x} vs {want} ({ulps} ulp)");
        // The finish gives the same value for a hot word (no draw).
        assert_eq!(laplace1_from_word_finish(&mut OneWord(0), w), x);
    }
    eprintln!("laplace1_from_word: worst error {worst:.3} ulp of −ln U over {} words", words.len());
    assert!(worst > 0.0 && worst <= 2.0, "worst {worst} ulp");
}

/// An RNG that returns the given words in turn.
struct Words(Vec<u64>);
impl rand::TryRng for Words {
    type Error = std::convert::Infallible;
    fn try_next_u32(&mut self) -> Result<u32, Self::Error> {
        Ok(self.0.remove(0) as u32)
    }
    fn try_next_u64(&mut self) -> Result<u64, Self::Error> {
        Ok(self.0.remove(0))
    }
    fn try_fill_bytes(&mut self, _: &mut [u8]) -> Result<(), Self::Error> {
        unimplemented!("not used")
    }
}

#[test]
fn laplace1_finish_extends_the_exponent_without_bound() {
    let ln2 = std::f64::consts::LN_2;
    let mut rng = fast_rng(42);
    for _ in 0..10_000 {
        let hot = rng.next_u64() | (1 << 60);
        let cold = rng.next_u64() & !(0x7ff << 52);
        let e = laplace1_from_word(hot).0.abs();
        // One, two, then 40 zero exponent fields before the hot word: 11·ln 2 each.
        for zeros in [1usize, 2, 40] {
            let mut seq = vec![cold & !(1 << 63); zeros - 1];
            seq.push(hot);
            let x = laplace1_from_word_finish(&mut Words(seq), cold);
            let want = 11.0 * zeros as f64 * ln2 + e;
            assert!((x.abs() - want).abs() <= 4.0 * f64::EPSILON * want, "{zeros}: {x} vs {want}");
            assert_eq!(x < 0.0, cold >> 63 == 1);
        }
    }
    // Conditional on the cold case, x − 11·ln 2 is again Exp(1) (z = 4.42): mean and
    // variance 1, and 2⁻¹¹ of those draws are cold again (beyond 22·ln 2).
    let n = 100_000;
    let mut m = crate::estimate::Moments::default();
    let mut deeper = 0u64;
    for _ in 0..n {
        let cold = rng.next_u64() & !(0x7ff << 52);
        let x = laplace1_from_word_finish(&mut rng, cold).abs() - 11.0 * ln2;
        deeper += (x > 11.0 * ln2) as u64;
        m.push(x);
    }
    assert!(m.z_mean(1.0, 1.0).abs() < 4.42 && m.z_variance(1.0).abs() < 4.42, "mean {}", m.mean);
    let p = (-11.0f64).exp2();
    assert!((deeper as f64 - n as f64 * p).abs() < 4.42 * (n as f64 * p).sqrt() + 1.0, "{deeper}");
}

#[test]
fn exp1_unbounded_is_exp1_above_2_to_minus_33_and_extends_below() {
    let (mut a, mut b) = (fast_rng(43), fast_rng(43));
    for _ in 0..10_000 {
        assert_eq!(exp1_unbounded(&mut a), exp1(&mut b));
    }
    let ln2 = std::f64::consts::LN_2;
    let next = 1u64 << 63; // U' = (2⁵² + 1)·2⁻⁵³
    let tail = exp1_unbounded(&mut Words(vec![((1 << 20) - 1) << 11, next]));
    let want = 33.0 * ln2 - ((next >> 11) as f64 + 1.0).mul_add((-53f64).exp2(), 0.0).ln();
    assert!((tail - want).abs() < 1e-14 && tail > 33.0 * ln2, "{tail} vs {want}");
    assert!(exp1_unbounded(&mut Words(vec![0, 0, next])) > 66.0 * ln2);
}

#[test]
fn randomized_round32_is_exact_and_unbiased() {
    let mut rng = fast_rng(44);
    // Hot = full wherever the hot path decides, and adjacent integers.
    for k in 0..200_000u64 {
        let u = rng.next_u64() as u32;
        let e = (k % 70) as f64 - 20.0;
        let scaled = (2.0 * uniform01(&mut rng) - 1.0) * e.exp2();
        let (hot, decided) = randomized_round32_hot(u, scaled);
        let full = randomized_round32(&mut OneWord(rng.next_u64()), u, scaled);
        if decided {
            assert_eq!(hot, full, "scaled {scaled:e}, u {u}");
        }
        assert!(full == scaled.floor() as i64 || full == scaled.floor() as i64 + 1);
    }
    // Unbiased (z = 4.42), including values with bits below 2⁻³² of a step, where u ties
    // with ⌊frac·2³²⌋ and a fresh word decides.
    for &scaled in &[0.3f64, -2.7, 1e6 + 0.25, -3e9 - 0.5, 1e-12, 0.5 + 3e-12, -7.0 - 1e-11] {
        let base = scaled.floor();
        let frac = scaled - base;
        let f32bits = (frac * 4_294_967_296.0).floor();
        let n = 200_000;
        let mut ups = 0u64;
        let mut tie_ups = 0u64;
        for i in 0..n {
            let u = rng.next_u64() as u32;
            ups += (randomized_round32(&mut rng, u, scaled) as f64 > base) as u64;
            // Forced ties: P[up] = frac·2³² − F.
            if i < 50_000 {
                tie_ups += (randomized_round32(&mut rng, f32bits as u32, scaled) as f64 > base) as u64;
            }
        }
        let sd = (n as f64 * frac * (1.0 - frac)).sqrt();
        assert!((ups as f64 - n as f64 * frac).abs() < 4.42 * sd + 1.0, "{scaled}: {ups} of {n}");
        let rem = frac * 4_294_967_296.0 - f32bits;
        let sd = (5e4 * rem * (1.0 - rem)).sqrt();
        assert!((tie_ups as f64 - 5e4 * rem).abs() < 4.42 * sd + 1.0, "{scaled}: ties {tie_ups}, rem {rem}");
    }
    // Huge, infinite and NaN values: no panic, saturated.
    assert_eq!(randomized_round32(&mut rng, 7, 2f64.powi(60)), 1 << 60);
    assert_eq!(randomized_round32(&mut rng, 7, f64::INFINITY), i64::MAX);
    assert_eq!(randomized_round32(&mut rng, 7, -1e300), i64::MIN);
    assert_eq!(randomized_round32(&mut rng, 7, f64::NAN), 0);
}

#[test]
fn fill_u32s_are_the_little_endian_halves_of_words() {
    for len in [0usize, 1, 2, 7, 255, 256, 257, 1000] {
        let mut got = vec![0u32; len];
        let mut a = fast_rng(45);
        fill_u32s(&mut a, &mut got);
        let mut b = fast_rng(45);
        let want: Vec<u32> = (0..len.div_ceil(2))
            .flat_map(|_| {
                b.next_u64()
                    .to_le_bytes()
                    .chunks(4)
                    .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
                    .collect::<Vec<_>>()
            })
            .take(len)
            .collect();
        assert_eq!(got, want, "len {len}");
        assert_eq!(a.next_u64(), b.next_u64(), "len {len}: streams stay in step");
    }
}

/// An RNG that returns one fixed word (to feed a chosen word to a sampler).
pub(crate) struct OneWord(pub u64);
impl rand::TryRng for OneWord {
    type Error = std::convert::Infallible;
    fn try_next_u32(&mut self) -> Result<u32, Self::Error> {
        Ok((self.0 >> 32) as u32)
    }
    fn try_next_u64(&mut self) -> Result<u64, Self::Error> {
        Ok(self.0)
    }
    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Self::Error> {
        dst.iter_mut().zip(self.0.to_le_bytes().iter().cycle()).for_each(|(d, &b)| *d = b);
        Ok(())
    }
}
