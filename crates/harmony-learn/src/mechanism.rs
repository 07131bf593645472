//! Randomizers of a clipped gradient g ∈ [-1, 1]^d: each user's one report, decoded to an
//! unbiased vector and added to the batch's accumulator.
//!
//! | name | what | one-report variance of coordinate j (worst case) |
//! |---|---|---|
//! | `pm`, `hm` | Wang et al. Alg. 4: k of the d coordinates sampled, each by PM / HM at ε/k, scaled by d/k; k minimises the closed-form worst case ([`optimal_k`]) | (d/k)(σ²(ε/k) + 1) − 1 |
//! | `harmony-1bit` | Harmony's 1-bit mechanism (one coordinate, Duchi at ε, scaled by d) | d·c² |
//! | `duchi-multi` | Duchi et al.'s multidimensional mechanism with Harmony's correction for even d | B² |
//! | `laplace` | Laplace on every coordinate at ε/d (split budget; the baseline) | 8d²/ε² |
//! | `non-private` | g itself | 0 |
//!
//! Every mechanism is the one of `harmony-core` (its exact-ε and variance tests live there); this
//! module only wires them to the gradient and keeps per-user work free of allocation (scratch
//! buffers live in the randomizer, which each training run owns).

use crate::trainer::clip_coordinate;
use harmony_core::error::{Error, Result};
use harmony_core::numeric::{
    AnyNumeric, DuchiMulti, DuchiMultiReport, HarmonyBit, Laplace, NumericMechanism, VectorMechanism,
};
use harmony_core::params::Epsilon;
use harmony_core::sampling::{sample_k_of_d, uniform_below};
use harmony_core::strategy::sampled_numeric_worst;
use rand::Rng;

/// A user-side gradient randomizer with its server-side decoding: `randomize_add` randomizes one
/// user's clipped gradient and adds the decoded (unbiased) vector to `acc`. It must see nothing
/// but `g`.
pub trait GradientRandomizer: Send {
    /// The mechanism's name (CLI, JSON).
    fn name(&self) -> &'static str;
    /// The dimension d of the gradients.
    fn dimension(&self) -> usize;
    /// The worst-case variance of one coordinate of one decoded report (over inputs in [-1, 1]),
    /// a public number that sets the step of [`crate::trainer::Schedule::Noise`].
    fn variance(&self) -> f64;
    /// Randomizes `g` (length d, every coordinate in [-1, 1]) and adds the decoded report to `acc`.
    fn randomize_add<R: Rng + ?Sized>(&mut self, g: &[f64], rng: &mut R, acc: &mut [f64]);
}

/// The mechanisms by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MechanismKind {
    /// Exact gradients.
    NonPrivate,
    /// Laplace at ε/d per coordinate.
    Laplace,
    /// Corrected Duchi multidimensional.
    DuchiMulti,
    /// Harmony's 1-bit sampling.
    HarmonyBit,
    /// PM with k-of-d sampling.
    Pm,
    /// HM with k-of-d sampling.
    Hm,
    /// HM with k-of-m sampling of attribute blocks, Hadamard-coded categorical blocks.
    HmAttr,
}

impl MechanismKind {
    /// The private mechanisms' names (what `--mechanism` accepts), in the order of the papers.
    pub const NAMES: &'static [&'static str] = &["hm", "pm", "harmony-1bit", "duchi-multi", "laplace", "hm-attr"];
    /// Parses a name (also `non-private`).
    pub fn parse(name: &str) -> Result<Self> {
        Ok(match name {
            "non-private" => MechanismKind::NonPrivate,
            "laplace" => MechanismKind::Laplace,
            "duchi-multi" => MechanismKind::DuchiMulti,
            "harmony-1bit" => MechanismKind::HarmonyBit,
            "pm" => MechanismKind::Pm,
            "hm" => MechanismKind::Hm,
            "hm-attr" => MechanismKind::HmAttr,
            _ => return Err(Error::param("mechanism", name, format!("one of {}", Self::NAMES.join(", ")))),
        })
    }
    /// The name.
    pub fn name(self) -> &'static str {
        match self {
            MechanismKind::NonPrivate => "non-private",
            MechanismKind::Laplace => "laplace",
            MechanismKind::DuchiMulti => "duchi-multi",
            MechanismKind::HarmonyBit => "harmony-1bit",
            MechanismKind::Pm => "pm",
            MechanismKind::Hm => "hm",
            MechanismKind::HmAttr => "hm-attr",
        }
    }
    /// The randomizer for gradients of dimension d at budget ε (ignored by `non-private`); for
    /// `hm-attr` every coordinate is its own block (see [`MechanismKind::build_blocks`]).
    pub fn build(self, epsilon: f64, d: usize) -> Result<GradientMechanism> {
        self.build_blocks(epsilon, d, &[])
    }
    /// Like [`MechanismKind::build`], with the attribute blocks of the features for `hm-attr`:
    /// consecutive block lengths summing to d (empty: one block per coordinate).
    pub fn build_blocks(self, epsilon: f64, d: usize, blocks: &[usize]) -> Result<GradientMechanism> {
        if self == MechanismKind::NonPrivate {
            return Ok(GradientMechanism::NonPrivate { d });
        }
        let eps = Epsilon::new(epsilon)?;
        Ok(match self {
            MechanismKind::NonPrivate => unreachable!(),
            MechanismKind::Laplace => {
                GradientMechanism::Laplace { m: Laplace::new(eps.value() / d as f64)?, d, epsilon: eps.value() }
            }
            MechanismKind::DuchiMulti => {
                let m = DuchiMulti::new(eps.value(), d)?;
                GradientMechanism::DuchiMulti {
                    m,
                    report: DuchiMultiReport { bits: vec![0; m.words()] },
                    sq: vec![0.0; d],
                }
            }
            MechanismKind::HarmonyBit => {
                GradientMechanism::HarmonyBit { m: HarmonyBit::new(eps.value(), d)?, sq: vec![0.0; d] }
            }
            MechanismKind::HmAttr => {
                let lens: Vec<usize> = if blocks.is_empty() { vec![1; d] } else { blocks.to_vec() };
                if lens.iter().sum::<usize>() != d || lens.contains(&0) {
                    return Err(Error::param(
                        "blocks",
                        format!("{lens:?}"),
                        format!("positive block lengths summing to d = {d}"),
                    ));
                }
                let mut start = 0;
                let blocks: Vec<Block> = lens
                    .iter()
                    .map(|&len| {
                        let b = Block { start, len, rows: len.next_power_of_two() as u64 };
                        start += len;
                        b
                    })
                    .collect();
                let m = blocks.len();
                let k = optimal_k("hm", eps.value(), m)?;
                GradientMechanism::Blocks {
                    m: AnyNumeric::by_name("hm", eps.value() / k as f64)?,
                    blocks,
                    d,
                    k,
                    scale: m as f64 / k as f64,
                    picked: Vec::with_capacity(k),
                }
            }
            MechanismKind::Pm | MechanismKind::Hm => {
                let name = if self == MechanismKind::Pm { "pm" } else { "hm" };
                let k = optimal_k(name, eps.value(), d)?;
                GradientMechanism::Sampled {
                    name: if self == MechanismKind::Pm { "pm" } else { "hm" },
                    m: AnyNumeric::by_name(name, eps.value() / k as f64)?,
                    d,
                    k,
                    scale: d as f64 / k as f64,
                    picked: Vec::with_capacity(k),
                }
            }
        })
    }
}

/// k minimising the worst-case one-report variance of Wang et al.'s k-of-d sampling with the 1-D
/// mechanism `name` (`pm` or `hm`) at ε/k: max over t ∈ {0, 1} of (d/k)(σ²(t; ε/k) + t²) − t²
/// (docs/MECHANISMS.md §B5: the closed-form argmin, not the paper's ⌊ε/2.5⌋). Searched over
/// 1 ≤ k ≤ min(d, ⌈ε⌉ + 2): the variance grows again once ε/k falls below ~2.
pub fn optimal_k(name: &str, epsilon: f64, d: usize) -> Result<usize> {
    // ε validated first (finite, within the global range): ⌈ε⌉ + 2 cannot overflow.
    let epsilon = Epsilon::new(epsilon)?.value();
    let top = d.min(epsilon.ceil() as usize + 2).max(1);
    let mut best = (f64::INFINITY, 1);
    for k in 1..=top {
        let m = AnyNumeric::by_name(name, epsilon / k as f64)?;
        let (a, b) = m.variance_coefficients();
        let v = sampled_numeric_worst(a, b, d as f64 / k as f64);
        if v < best.0 {
            best = (v, k);
        }
    }
    Ok(best.1)
}

/// A block of consecutive coordinates of which at most one is non-zero (one attribute's columns).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Block {
    /// First coordinate.
    pub start: usize,
    /// Number of coordinates L.
    pub len: usize,
    /// Hadamard rows K = L rounded up to a power of two.
    pub rows: u64,
}

/// H[j, c] = (−1)^popcount(j & c), the Sylvester–Hadamard matrix.
#[inline]
fn hadamard(j: u64, c: usize) -> f64 {
    if (j & c as u64).count_ones().is_multiple_of(2) { 1.0 } else { -1.0 }
}

/// A built gradient randomizer (see the module table).
#[derive(Debug, Clone)]
pub enum GradientMechanism {
    /// Exact gradients.
    NonPrivate {
        /// Dimension.
        d: usize,
    },
    /// Laplace at ε/d per coordinate.
    Laplace {
        /// The 1-D mechanism at ε/d.
        m: Laplace,
        /// Dimension.
        d: usize,
        /// The whole vector's ε.
        epsilon: f64,
    },
    /// Corrected Duchi multidimensional.
    DuchiMulti {
        /// The mechanism.
        m: DuchiMulti,
        /// Reused report buffer.
        report: DuchiMultiReport,
        /// Scratch for the aggregator's sum of squares (unused).
        sq: Vec<f64>,
    },
    /// Harmony's 1-bit mechanism.
    HarmonyBit {
        /// The mechanism.
        m: HarmonyBit,
        /// Scratch for the aggregator's sum of squares (unused).
        sq: Vec<f64>,
    },
    /// PM or HM with k-of-d sampling (Wang et al. Alg. 4).
    Sampled {
        /// `pm` or `hm`.
        name: &'static str,
        /// The 1-D mechanism at ε/k.
        m: AnyNumeric,
        /// Dimension.
        d: usize,
        /// Coordinates sampled per user.
        k: usize,
        /// d/k.
        scale: f64,
        /// Reused index buffer.
        picked: Vec<usize>,
    },
    /// `hm-attr`: k of the m attribute blocks sampled, each reported by HM at ε/k and scaled by
    /// m/k. A one-coordinate block reports its value; a block of L coordinates (a categorical
    /// attribute's one-hot columns, so at most one is non-zero) draws a Hadamard row j < K and
    /// reports t = Σ_c H[j, c]·g_c ∈ [-1, 1]; the decoded block is HM(t)·H[j, ·]·m/k, unbiased
    /// because E_j[H[j, c]H[j, c']] = 1[c = c'].
    ///
    /// # Privacy
    /// The blocks and j are drawn independently of the data; each sampled block is one HM report
    /// at ε/k of a value in [-1, 1] (t is clamped there, which changes nothing for a block with at
    /// most one non-zero coordinate in [-1, 1]): ε-LDP by composition over the k blocks.
    ///
    /// # Utility
    /// Var of a coordinate ≈ (m/k)(σ²_HM(ε/k) + t²) with m the number of attributes, not the
    /// number of columns d: on Adult m = 14 against d = 101.
    Blocks {
        /// HM at ε/k.
        m: AnyNumeric,
        /// The attribute blocks.
        blocks: Vec<Block>,
        /// Dimension.
        d: usize,
        /// Blocks sampled per user.
        k: usize,
        /// m/k.
        scale: f64,
        /// Reused index buffer.
        picked: Vec<usize>,
    },
}

impl GradientMechanism {
    /// Coordinates reported per user (k for sampling, d otherwise).
    pub fn sampled(&self) -> usize {
        match self {
            GradientMechanism::Sampled { k, .. } | GradientMechanism::Blocks { k, .. } => *k,
            GradientMechanism::HarmonyBit { .. } => 1,
            _ => self.dimension(),
        }
    }
    /// The worst-case one-report variance of one coordinate (over inputs in [-1, 1]).
    pub fn worst_case_variance(&self) -> f64 {
        match self {
            GradientMechanism::NonPrivate { .. } => 0.0,
            GradientMechanism::Laplace { m, .. } => m.worst_case_variance(),
            GradientMechanism::DuchiMulti { m, .. } => VectorMechanism::worst_case_variance(m),
            GradientMechanism::HarmonyBit { m, .. } => VectorMechanism::worst_case_variance(m),
            GradientMechanism::Sampled { m, scale, .. } | GradientMechanism::Blocks { m, scale, .. } => {
                let (a, b) = m.variance_coefficients();
                sampled_numeric_worst(a, b, *scale)
            }
        }
    }
}

impl GradientRandomizer for GradientMechanism {
    fn name(&self) -> &'static str {
        match self {
            GradientMechanism::NonPrivate { .. } => "non-private",
            GradientMechanism::Laplace { .. } => "laplace",
            GradientMechanism::DuchiMulti { .. } => "duchi-multi",
            GradientMechanism::HarmonyBit { .. } => "harmony-1bit",
            GradientMechanism::Sampled { name, .. } => name,
            GradientMechanism::Blocks { .. } => "hm-attr",
        }
    }
    fn dimension(&self) -> usize {
        match self {
            GradientMechanism::NonPrivate { d } | GradientMechanism::Laplace { d, .. } => *d,
            GradientMechanism::DuchiMulti { m, .. } => m.dimension(),
            GradientMechanism::HarmonyBit { m, .. } => m.dimension(),
            GradientMechanism::Sampled { d, .. } | GradientMechanism::Blocks { d, .. } => *d,
        }
    }
    fn variance(&self) -> f64 {
        self.worst_case_variance()
    }
    /// Every coordinate reaches the mechanism through [`clip_coordinate`] (clipped to [-1, 1],
    /// 0 if not finite): no NaN reaches an unchecked sampler, whatever `g` holds.
    #[inline]
    fn randomize_add<R: Rng + ?Sized>(&mut self, g: &[f64], rng: &mut R, acc: &mut [f64]) {
        match self {
            GradientMechanism::NonPrivate { .. } => acc.iter_mut().zip(g).for_each(|(a, x)| *a += x),
            GradientMechanism::Laplace { m, .. } => {
                for (a, &x) in acc.iter_mut().zip(g) {
                    *a += m.decode(&m.randomize_unchecked(clip_coordinate(x), rng)).expect("own report");
                }
            }
            GradientMechanism::DuchiMulti { m, report, sq } => {
                m.randomize_into(&clean(g), rng, report);
                m.accumulate(report, acc, sq);
            }
            GradientMechanism::HarmonyBit { m, sq } => {
                let report = m.randomize_unchecked(&clean(g), rng);
                m.accumulate(&report, acc, sq);
            }
            GradientMechanism::Sampled { m, d, k, scale, picked, .. } => {
                sample_k_of_d(rng, *k, *d, picked);
                for &j in picked.iter() {
                    acc[j] +=
                        *scale * m.decode(&m.randomize_unchecked(clip_coordinate(g[j]), rng)).expect("own report");
                }
            }
            GradientMechanism::Blocks { m, blocks, k, scale, picked, .. } => {
                sample_k_of_d(rng, *k, blocks.len(), picked);
                for &b in picked.iter() {
                    let Block { start, len, rows } = blocks[b];
                    let block = &g[start..start + len];
                    if len == 1 {
                        let y = m.decode(&m.randomize_unchecked(clip_coordinate(block[0]), rng)).expect("own report");
                        acc[start] += *scale * y;
                        continue;
                    }
                    let j = uniform_below(rng, rows);
                    let t: f64 = block.iter().enumerate().map(|(c, &v)| hadamard(j, c) * clip_coordinate(v)).sum();
                    let y = *scale * m.decode(&m.randomize_unchecked(clip_coordinate(t), rng)).expect("own report");
                    for (c, a) in acc[start..start + len].iter_mut().enumerate() {
                        *a += y * hadamard(j, c);
                    }
                }
            }
        }
    }
}

/// `g` itself when every coordinate is in [-1, 1] (the trainer's clipped gradients: no copy),
/// else a copy through [`clip_coordinate`].
fn clean(g: &[f64]) -> std::borrow::Cow<'_, [f64]> {
    if g.iter().all(|v| (-1.0..=1.0).contains(v)) {
        std::borrow::Cow::Borrowed(g)
    } else {
        std::borrow::Cow::Owned(g.iter().map(|&v| clip_coordinate(v)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use harmony_core::sampling::fast_rng;

    #[test]
    fn names_parse_and_unknown_lists_valid() {
        for &n in MechanismKind::NAMES.iter().chain(&["non-private"]) {
            let k = MechanismKind::parse(n).unwrap();
            assert_eq!(k.name(), n);
            assert_eq!(k.build(1.0, 7).unwrap().name(), n);
        }
        let e = MechanismKind::parse("gauss").unwrap_err().to_string();
        assert!(
            e.contains("mechanism is \"gauss\"") && e.contains("hm, pm, harmony-1bit, duchi-multi, laplace, hm-attr"),
            "{e}"
        );
        let e = MechanismKind::Hm.build(f64::NAN, 5).unwrap_err().to_string();
        assert!(e.contains("epsilon is NaN"), "{e}");
        assert!(MechanismKind::Pm.build(0.0, 5).is_err());
        assert!(MechanismKind::Hm.build(-1.0, 5).is_err());
    }

    /// hm-attr with a 3-column block (one non-zero) and two scalars is unbiased too.
    #[test]
    fn attribute_blocks_are_unbiased() {
        let g = [0.0, -0.7, 0.0, 0.9, -0.4];
        let n = 40_000;
        let mut m = MechanismKind::HmAttr.build_blocks(3.0, 5, &[3, 1, 1]).unwrap();
        assert_eq!(m.sampled(), 1);
        let mut acc = vec![0.0; 5];
        let mut rng = fast_rng(23);
        for _ in 0..n {
            m.randomize_add(&g, &mut rng, &mut acc);
        }
        let se = (m.worst_case_variance() / n as f64).sqrt();
        for (j, (&a, &t)) in acc.iter().zip(&g).enumerate() {
            assert!((a / n as f64 - t).abs() <= 5.0 * se, "coordinate {j}: {} vs {t} (se {se})", a / n as f64);
        }
        assert!(MechanismKind::HmAttr.build_blocks(3.0, 5, &[3, 1]).is_err());
    }

    #[test]
    fn optimal_k_beats_the_paper_rule_where_it_differs() {
        // docs/MECHANISMS.md §B5: HM, d = 5, ε = 4.5: the rule gives k = 1, the optimum is 2.
        assert_eq!(optimal_k("hm", 4.5, 5).unwrap(), 2);
        assert_eq!(optimal_k("hm", 0.5, 100).unwrap(), 1);
        assert_eq!(optimal_k("pm", 1.0, 1).unwrap(), 1);
    }

    /// Every mechanism is unbiased: the mean of many decoded reports matches g within 5 standard
    /// errors of the closed-form worst case (false-failure rate ~6e-7 per coordinate).
    #[test]
    fn decoded_reports_are_unbiased() {
        let g = [0.8, -0.3, 0.0, 1.0, -1.0];
        let n = 20_000;
        for &name in MechanismKind::NAMES.iter().chain(&["non-private"]) {
            let mut m = MechanismKind::parse(name).unwrap().build(2.0, g.len()).unwrap();
            let mut acc = vec![0.0; g.len()];
            let mut rng = fast_rng(17);
            for _ in 0..n {
                m.randomize_add(&g, &mut rng, &mut acc);
            }
            let se = (m.worst_case_variance() / n as f64).sqrt();
            for (j, (&a, &t)) in acc.iter().zip(&g).enumerate() {
                let mean = a / n as f64;
                assert!((mean - t).abs() <= 5.0 * se + 1e-12, "{name} coordinate {j}: {mean} vs {t} (se {se})");
            }
        }
    }
}
