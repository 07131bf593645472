"""Argument checks and conversions shared by the public classes: everything that reaches the
native module has the exact dtype, shape and C order it expects, and anything else raises a
``HarmonyError`` naming the argument."""

import numbers
from typing import Any, Dict, List, Optional, Union

import numpy as np

from ._errors import _error

U64_MAX = (1 << 64) - 1


def name(value: Any, field: str = "mechanism") -> str:
    if not isinstance(value, str):
        raise _error("invalid parameter", field, repr(value), "a name (str)")
    return value


def real(value: Any, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise _error("invalid parameter", field, repr(value), "a real number")
    return float(value)


def integer(value: Any, field: str, low: int = 0, high: int = U64_MAX) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise _error("invalid parameter", field, repr(value), "an integer")
    v = int(value)
    if not low <= v <= high:
        raise _error("invalid parameter", field, v, f"an integer in [{low}, {high}]")
    return v


def seed(value: Any) -> Optional[int]:
    """None (the OS CSPRNG) or a seed in [0, 2^64)."""
    return None if value is None else integer(value, "seed")


def _array(values: Any, field: str) -> np.ndarray:
    try:
        return np.asarray(values)
    except Exception as e:  # ragged nested lists and the like
        raise _error("invalid input", field, f"an object numpy cannot read ({e})", "a 1-D array") from None


def _shape(a: np.ndarray) -> str:
    return str(tuple(a.shape))


def categories(values: Any) -> np.ndarray:
    """A 1-D integer array as C-contiguous int64 (no copy when it already is)."""
    a = _array(values, "values")
    if a.dtype.kind not in "iu":
        raise _error("invalid input", "values", f"an array of dtype {a.dtype}", "an integer array (int64 is zero-copy)")
    if a.ndim != 1:
        raise _error("invalid input", "values", f"an array of shape {_shape(a)}", "a 1-D array")
    if a.dtype.kind == "u" and a.dtype.itemsize == 8 and a.size and int(a.max()) > (1 << 63) - 1:
        i = int(np.argmax(a > (1 << 63) - 1))
        raise _error("invalid input", f"values[{i}]", int(a[i]), "a category index below 2^63")
    return np.ascontiguousarray(a, dtype=np.int64)


def numbers_1d(values: Any, field: str = "values") -> np.ndarray:
    """A 1-D real array as C-contiguous float64 (no copy when it already is)."""
    a = _array(values, field)
    if a.dtype.kind not in "iuf":
        raise _error("invalid input", field, f"an array of dtype {a.dtype}", "a real (float or integer) array")
    if a.ndim != 1:
        raise _error("invalid input", field, f"an array of shape {_shape(a)}", "a 1-D array")
    return np.ascontiguousarray(a, dtype=np.float64)


def reports(values: Any, dtype: str, columns: int, layout: str) -> np.ndarray:
    """Reports of a frequency oracle's layout: an integer array of shape (n,) or (n, columns),
    converted to ``dtype`` when every value fits."""
    a = _array(values, "reports")
    shape = "(n,)" if columns == 0 else f"(n, {columns})"
    expected = f"a {dtype} array of shape {shape} ({layout} layout)"
    if a.dtype.kind not in "iu":
        raise _error("invalid report", "reports", f"an array of dtype {a.dtype}", expected)
    if (columns == 0 and a.ndim != 1) or (columns > 0 and (a.ndim != 2 or a.shape[1] != columns)):
        raise _error("invalid report", "reports", f"an array of shape {_shape(a)}", expected)
    target = np.dtype(dtype)
    if a.dtype != target and a.size:
        lo, hi = int(a.min()), int(a.max())
        info = np.iinfo(target)
        if lo < 0 or hi > info.max:
            bad = int(np.argmax((a < 0) | (a > info.max)) if a.ndim == 1 else np.argmax(((a < 0) | (a > info.max)).any(axis=1)))
            raise _error("invalid report", f"reports[{bad}]", a[bad].tolist(), f"values in [0, {info.max}] ({dtype})")
    return np.ascontiguousarray(a, dtype=target)


COLUMNS = ("estimate", "std_error", "ci_low", "ci_high")


def pandas(as_frame: Optional[bool]) -> Any:
    """The pandas module when a table should be a DataFrame: ``as_frame`` True (pandas must
    import), or None and pandas imports; else None (a dict of arrays)."""
    if as_frame is False:
        return None
    try:
        import pandas as pd
    except ImportError:
        if as_frame:
            raise
        return None
    return pd


def as_frame(block: np.ndarray, index: Union[int, List[str]], index_name: str, as_frame: Optional[bool], attrs: Dict[str, Any]):
    """Estimates from a (4, k) block (rows: ``COLUMNS``): a pandas DataFrame when ``as_frame``
    is True, or None and pandas imports (``attrs`` in its ``attrs``; the block is its one
    float64 block, not copied); else a dict of the four rows."""
    pd = pandas(as_frame)
    if pd is None:
        return dict(zip(COLUMNS, block))
    rows = pd.RangeIndex(index) if isinstance(index, int) else index  # int: categories 0..d-1
    df = pd.DataFrame(block.T, columns=list(COLUMNS), index=rows, copy=False)
    df.index.name = index_name
    df.attrs.update(attrs)
    return df
