//! The fast Walsh–Hadamard transform in natural (Sylvester) order.
//!
//! `H[i, j] = (−1)^popcount(i & j)`, the matrix built by Sylvester doubling
//! `H_{2k} = [[H_k, H_k], [H_k, −H_k]]`. [`fwht`] computes `a ← H a` in place in
//! `O(K log K)` additions; `H` is symmetric and `H·H = K·I`.

use std::ops::{Add, Sub};

/// `H[i, j]` as ±1: `+1` when `popcount(i & j)` is even.
#[inline]
pub fn hadamard_entry(i: u64, j: u64) -> i8 {
    if (i & j).count_ones().is_multiple_of(2) { 1 } else { -1 }
}

/// Whether `H[i, j] = +1`.
#[inline]
pub fn hadamard_positive(i: u64, j: u64) -> bool {
    (i & j).count_ones().is_multiple_of(2)
}

/// In-place fast Walsh–Hadamard transform `a ← H a`, natural order, unnormalised.
///
/// # Panics
/// If `a.len()` is not a power of two (a programming error: callers size their buffers to a
/// power of two). An empty slice is left alone.
pub fn fwht<T: Copy + Add<Output = T> + Sub<Output = T>>(a: &mut [T]) {
    let n = a.len();
    if n == 0 {
        return;
    }
    assert!(n.is_power_of_two(), "fwht needs a power-of-two length, got {n}");
    let mut h = 1;
    while h < n {
        for block in a.chunks_exact_mut(2 * h) {
            let (lo, hi) = block.split_at_mut(h);
            for (x, y) in lo.iter_mut().zip(hi.iter_mut()) {
                let (u, v) = (*x, *y);
                *x = u + v;
                *y = u - v;
            }
        }
        h *= 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn explicit(a: &[i64]) -> Vec<i64> {
        let k = a.len();
        (0..k).map(|i| (0..k).map(|j| hadamard_entry(i as u64, j as u64) as i64 * a[j]).sum()).collect()
    }

    #[test]
    fn fwht_equals_the_explicit_sylvester_matrix() {
        for log_k in 0..=7 {
            let k = 1usize << log_k;
            let a: Vec<i64> = (0..k as i64).map(|i| (i * 7919 + 13) % 23 - 11).collect();
            let mut b = a.clone();
            fwht(&mut b);
            assert_eq!(b, explicit(&a), "K = {k}");
            // H·H = K·I
            fwht(&mut b);
            assert_eq!(b, a.iter().map(|x| x * k as i64).collect::<Vec<_>>(), "K = {k}");
        }
    }

    #[test]
    fn sylvester_doubling_matches_popcount_entries() {
        // Build H_8 by doubling [v||v, v||-v] and compare with the popcount rule.
        let mut h = vec![vec![1i8]];
        while h.len() < 8 {
            let k = h.len();
            let mut next = vec![vec![0i8; 2 * k]; 2 * k];
            for i in 0..k {
                for j in 0..k {
                    next[i][j] = h[i][j];
                    next[i][j + k] = h[i][j];
                    next[i + k][j] = h[i][j];
                    next[i + k][j + k] = -h[i][j];
                }
            }
            h = next;
        }
        for (i, row) in h.iter().enumerate() {
            for (j, &x) in row.iter().enumerate() {
                assert_eq!(x, hadamard_entry(i as u64, j as u64));
                assert_eq!(x == 1, hadamard_positive(i as u64, j as u64));
            }
        }
    }

    #[test]
    fn fwht_f64_and_empty() {
        let mut a = [1.0, 0.0, 0.0, 0.0];
        fwht(&mut a);
        assert_eq!(a, [1.0; 4]);
        let mut e: [f64; 0] = [];
        fwht(&mut e);
    }

    #[test]
    #[should_panic(expected = "power-of-two")]
    fn fwht_rejects_non_power_of_two() {
        fwht(&mut [1i64, 2, 3]);
    }
}
