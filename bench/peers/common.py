"""Library-agnostic helpers: seeded data, seeding of every RNG the peers use, report sizes.

Copied (trimmed) from the project's peer harness so that the benchmark never reads anything
outside the repository at run time. Data seeds depend only on (kind, dist, d, n, rep), so every
library measured at the same n sees exactly the same users.
"""
import random
import sys
import zlib

import numpy as np

ZIPF_S = 1.1
BASE_SEED = 20240601


def dist_probs(dist: str, d: int) -> np.ndarray:
    if dist == "zipf":
        w = 1.0 / np.arange(1, d + 1, dtype=np.float64) ** ZIPF_S
    elif dist == "uniform":
        w = np.ones(d, dtype=np.float64)
    else:
        raise ValueError(dist)
    return w / w.sum()


def gen_categorical(dist: str, d: int, n: int, seed: int) -> np.ndarray:
    """Values in {0..d-1} (value 0 the most frequent under zipf)."""
    rng = np.random.default_rng(seed)
    return rng.choice(d, size=n, p=dist_probs(dist, d)).astype(np.int64)


def gen_numeric(dist: str, n: int, seed: int) -> np.ndarray:
    """Values in [-1, 1]: 'uniform' = U[-1, 1], 'skewed' = Beta(5, 2) mapped to [-1, 1]."""
    rng = np.random.default_rng(seed)
    if dist == "uniform":
        return rng.uniform(-1.0, 1.0, n)
    return rng.beta(5.0, 2.0, n) * 2.0 - 1.0


def data_seed(kind: str, dist: str, d: int, n: int, rep: int = 0) -> int:
    """Same seed => identical data for every library (fair comparison)."""
    h = zlib.crc32(repr((kind, dist, d, n)).encode()) & 0xFFFF
    return BASE_SEED + 1_000_003 * rep + h


_NUMBA_SEEDER = None


def seed_everything(seed: int) -> None:
    """Seeds python's random, numpy's legacy global RNG and numba's own RNG (numba keeps a
    separate per-thread RNG that np.random.seed from Python does not reach)."""
    global _NUMBA_SEEDER
    random.seed(seed)
    np.random.seed(seed % (2 ** 32))
    try:
        if _NUMBA_SEEDER is None:
            from numba import njit

            @njit(cache=False)
            def _s(x):
                np.random.seed(x)

            _NUMBA_SEEDER = _s
        _NUMBA_SEEDER(seed % (2 ** 32))
    except Exception:  # pragma: no cover - numba missing
        pass


def deep_size(obj, _seen=None) -> int:
    """Rough recursive size in bytes (numpy arrays counted by nbytes + header)."""
    if _seen is None:
        _seen = set()
    if id(obj) in _seen:
        return 0
    _seen.add(id(obj))
    if isinstance(obj, np.ndarray):
        return obj.nbytes + 112
    s = sys.getsizeof(obj)
    if isinstance(obj, (list, tuple, set)):
        s += sum(deep_size(o, _seen) for o in obj)
    elif isinstance(obj, dict):
        s += sum(deep_size(k, _seen) + deep_size(v, _seen) for k, v in obj.items())
    return s
