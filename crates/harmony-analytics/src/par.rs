//! Chunked map-and-sum over a slice: on all cores with the `parallel` feature (rayon), else in
//! one thread (wasm and phone devices, which never aggregate).

use harmony_core::Result;

/// Σ over chunks of `f(chunk)` (each a vector of `len` counts), element-wise.
pub(crate) fn sum_chunks<T, C, F>(items: &[T], chunk: usize, len: usize, f: F) -> Result<Vec<C>>
where
    T: Sync,
    C: Copy + Default + std::ops::AddAssign + Send,
    F: Fn(&[T]) -> Result<Vec<C>> + Sync + Send,
{
    let add = |mut a: Vec<C>, b: Vec<C>| {
        a.iter_mut().zip(b).for_each(|(x, y)| *x += y);
        a
    };
    #[cfg(feature = "parallel")]
    {
        use rayon::prelude::*;
        items.par_chunks(chunk).map(&f).try_reduce(|| vec![C::default(); len], |a, b| Ok(add(a, b)))
    }
    #[cfg(not(feature = "parallel"))]
    {
        items.chunks(chunk).try_fold(vec![C::default(); len], |a, c| Ok(add(a, f(c)?)))
    }
}
