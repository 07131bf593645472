//! The two randomness sources: a seed gives the core's fast simulation RNG
//! (`harmony_core::sampling::fast_rng`, reproducible), no seed the OS-seeded ChaCha20 CSPRNG of
//! client paths (`harmony_core::sampling::secure_rng`, here without its panic: a failing entropy
//! source is an `OSError`).

use pyo3::PyResult;
use pyo3::exceptions::PyOSError;
use rand::SeedableRng;
use rand::rngs::{ChaCha20Rng, SysRng};

/// ChaCha20 seeded by the operating system.
pub fn os_rng() -> PyResult<ChaCha20Rng> {
    ChaCha20Rng::try_from_rng(&mut SysRng).map_err(|e| {
        PyOSError::new_err(format!("the OS entropy source failed ({e}); refusing to randomize without it"))
    })
}

/// Runs `$body` with `$rng` bound to `fast_rng(seed)` when `$seed` is `Some(seed)`, else to
/// [`os_rng`] (each arm monomorphised: the mechanisms' batch kernels stay inlined).
macro_rules! with_rng {
    ($seed:expr, |$rng:ident| $body:expr) => {
        match $seed {
            Some(seed) => {
                let mut $rng = harmony_core::sampling::fast_rng(seed);
                $body
            }
            None => {
                let mut $rng = $crate::rng::os_rng()?;
                $body
            }
        }
    };
}
pub(crate) use with_rng;
