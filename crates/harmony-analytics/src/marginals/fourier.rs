//! The Fourier method of Cormode, Kulkarni and Srivastava (SIGMOD'18, "InpHT"): attributes are
//! binary-encoded (attribute a with c_a categories takes ⌈log2 c_a⌉ bits); a marginal over the
//! bit set β is p(y) = 2^{−|β|} Σ_{α ⊆ β} θ_α (−1)^{⟨α, y⟩} with θ_α = E[(−1)^{⟨α, x⟩}], θ_∅ = 1.
//! The set T of needed non-empty coefficients is the union over the queries of all subsets of
//! their bit sets. Each user picks α ∈ T uniformly at random and reports c·t or −c·t with
//! t = (−1)^{⟨α, x⟩} by binary randomized response (keep with probability e^ε/(e^ε+1),
//! c = (e^ε+1)/(e^ε−1)). The aggregator's θ̂_α = Σ_{users on α} reports / (n/|T|) (Horvitz–
//! Thompson, unbiased) has Var = (|T| c² − θ_α²)/n, and a query's cells (the valid codes among
//! the 2^{|β|} bit patterns) come from a Hadamard transform of the θ̂.
//!
//! # Utility
//! Each cell has variance 2^{−2|β|} Σ_{∅≠α⊆β} Var(θ̂_α), so E\[SSE\] = |D_q| 2^{−2|β|} Σ Var(θ̂_α)
//! (plug-in θ̂² clamped to 1).
//!
//! # Privacy
//! One bit by randomized response at ε, α independent of the data: ε-LDP.

use super::{Dataset, MarginalEstimate};
use harmony_core::frequency::fwht::fwht;
use harmony_core::sampling::{bernoulli, uniform_below};
use harmony_core::{Epsilon, Error, Result};
use rand::Rng;
use std::collections::HashMap;

/// Bit offsets of each attribute in the binary encoding, and the total number of bits.
pub fn bit_layout(cards: &[usize]) -> (Vec<usize>, Vec<usize>, usize) {
    let widths: Vec<usize> = cards.iter().map(|&c| (usize::BITS - (c - 1).leading_zeros()) as usize).collect();
    let mut offsets = Vec::with_capacity(cards.len());
    let mut o = 0;
    for &w in &widths {
        offsets.push(o);
        o += w;
    }
    (offsets, widths, o)
}

fn query_bits(q: &[usize], offsets: &[usize], widths: &[usize]) -> Vec<usize> {
    q.iter().flat_map(|&a| offsets[a]..offsets[a] + widths[a]).collect()
}

fn deposit(local: usize, bits: &[usize]) -> u128 {
    bits.iter().enumerate().filter(|(i, _)| local >> i & 1 == 1).fold(0u128, |m, (_, &b)| m | (1u128 << b))
}

/// Runs the method on `queries`. Errors: ε invalid, no query, more than 128 bits in the
/// encoding, a query over more than 24 bits.
pub fn run<R: Rng + ?Sized>(
    data: &Dataset,
    epsilon: f64,
    queries: &[Vec<usize>],
    rng: &mut R,
) -> Result<Vec<MarginalEstimate>> {
    let eps = Epsilon::new(epsilon)?;
    if queries.is_empty() {
        return Err(Error::input("queries", "none", "at least one marginal to estimate"));
    }
    let (offsets, widths, total) = bit_layout(data.cards());
    if total > 128 {
        return Err(Error::input("attributes", format!("{total} bits when binary-encoded"), "at most 128 bits"));
    }
    // T: every non-empty subset of every query's bit set.
    let mut index: HashMap<u128, usize> = HashMap::new();
    let mut coeffs: Vec<u128> = Vec::new();
    let mut qbits = Vec::with_capacity(queries.len());
    for q in queries {
        let b = query_bits(q, &offsets, &widths);
        if b.len() > 24 {
            return Err(Error::input("query", format!("{} over {} bits", data.label(q), b.len()), "at most 24 bits"));
        }
        for local in 1..(1usize << b.len()) {
            let g = deposit(local, &b);
            index.entry(g).or_insert_with(|| {
                coeffs.push(g);
                coeffs.len() - 1
            });
        }
        qbits.push(b);
    }
    let t = coeffs.len();
    let n = data.n();
    // Collection: each user's bits, a uniform α, randomized response on the parity.
    let keep = eps.exp() / (eps.exp() + 1.0);
    let c = eps.c();
    let mut sums = vec![0.0f64; t];
    for i in 0..n {
        let r = data.record(i);
        let x: u128 = r.iter().enumerate().fold(0u128, |m, (a, &v)| m | ((v as u128) << offsets[a]));
        let j = uniform_below(rng, t as u64) as usize;
        let parity = (coeffs[j] & x).count_ones() & 1;
        let truth = if parity == 0 { 1.0 } else { -1.0 };
        sums[j] += if bernoulli(rng, keep) { c * truth } else { -c * truth };
    }
    let scale = t as f64 / n as f64;
    let theta: Vec<f64> = sums.iter().map(|s| s * scale).collect();
    let var = |th: f64| (t as f64 * c * c - th.clamp(-1.0, 1.0).powi(2)) / n as f64;
    // Answering: Hadamard transform per query, then keep the valid codes.
    let mut out = Vec::with_capacity(queries.len());
    for (q, b) in queries.iter().zip(&qbits) {
        let size = 1usize << b.len();
        let mut h = vec![0.0f64; size];
        h[0] = 1.0;
        let mut var_sum = 0.0;
        for (local, slot) in h.iter_mut().enumerate().skip(1) {
            let th = theta[index[&deposit(local, b)]];
            *slot = th;
            var_sum += var(th);
        }
        fwht(&mut h);
        let inv = 1.0 / size as f64;
        // Local bit order: attribute by attribute (query order), low bits first.
        let cards: Vec<usize> = q.iter().map(|&a| data.cards()[a]).collect();
        let dq: usize = cards.iter().product();
        let mut cells = Vec::with_capacity(dq);
        let mut digits = vec![0usize; q.len()];
        for _ in 0..dq {
            let mut y = 0usize;
            let mut shift = 0;
            for (k, &a) in q.iter().enumerate() {
                y |= digits[k] << shift;
                shift += widths[a];
            }
            cells.push(h[y] * inv);
            for k in (0..q.len()).rev() {
                digits[k] += 1;
                if digits[k] < cards[k] {
                    break;
                }
                digits[k] = 0;
            }
        }
        let predicted = dq as f64 * inv * inv * var_sum;
        out.push(MarginalEstimate { attrs: q.clone(), cells, predicted_sse: Some(predicted) });
    }
    Ok(out)
}
