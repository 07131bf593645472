"""Mechanisms by name: frequency oracles over categories 0..d-1 and numeric mechanisms on an
interval, randomizing numpy arrays and estimating with standard errors and 95% CIs."""

from typing import Any, Dict, Optional, Tuple, Union

import numpy as np

from . import _checks as check
from . import _native

__all__ = ["FREQUENCY_NAMES", "NUMERIC_NAMES", "FrequencyOracle", "NumericMechanism", "unpack_bits"]

#: The frequency oracles, by name.
FREQUENCY_NAMES: Tuple[str, ...] = tuple(_native.FREQUENCY_NAMES)
#: The numeric (1-D mean) mechanisms, by name.
NUMERIC_NAMES: Tuple[str, ...] = tuple(_native.NUMERIC_NAMES)

Estimates = Union["pandas.DataFrame", Dict[str, np.ndarray]]  # noqa: F821


class FrequencyOracle:
    """A locally private frequency oracle over the categories ``0 .. d-1``, chosen by name.

    ``name`` is one of ``FREQUENCY_NAMES``: ``grr``, ``sue``, ``oue``, ``olh``, ``hadamard``,
    ``hr``, ``bassily-smith`` (a biased baseline), ``ss`` (Subset Selection), ``adaptive`` (the
    oracle with the smallest variance at this ``epsilon`` and ``d``: GRR, SS, ...). Each user's report is ``epsilon``-LDP.

    Reports are numpy arrays, one row per user, in the oracle's ``layout``:

    ===================================  ==========  ===================  =============================
    oracles                              layout      dtype, shape         one row
    ===================================  ==========  ===================  =============================
    grr, hr, adaptive (GRR chosen)       index       uint32 (n,)          the reported category/output
    sue, oue, ss, adaptive (SS chosen)   bits        uint64 (n, ⌈d/64⌉)   bit v: word v//64, bit v%64
    olh                                  seed_hash   uint64 (n, 2)        (hash seed, hash value)
    hadamard, bassily-smith              row_bit     uint32 (n, 2)        (row, bit; 1 is +1)
    ===================================  ==========  ===================  =============================

    They are the buffers Rust wrote, handed to numpy without a copy. ``unpack_bits`` expands a
    ``bits`` array into booleans.

    >>> import numpy as np
    >>> import harmony_ldp as hl
    >>> oracle = hl.FrequencyOracle("oue", epsilon=1.0, d=4)
    >>> oracle
    FrequencyOracle('oue', epsilon=1.0, d=4)
    >>> values = np.repeat(np.arange(4), [5000, 3000, 1500, 500])
    >>> reports = oracle.randomize(values, seed=1)
    >>> reports.dtype, reports.shape, oracle.layout
    (dtype('uint64'), (10000, 1), 'bits')
    >>> est = oracle.estimate(reports, as_frame=False)
    >>> sorted(est)
    ['ci_high', 'ci_low', 'estimate', 'std_error']
    >>> bool(abs(est["estimate"][0] - 0.5) < 4.42 * est["std_error"][0])
    True
    """

    def __init__(self, name: str, epsilon: float, d: int) -> None:
        self._o = _native.NativeOracle(
            check.name(name), check.real(epsilon, "epsilon"), check.integer(d, "d", 0, check.U64_MAX)
        )

    @property
    def name(self) -> str:
        """The oracle's name."""
        return self._o.name

    @property
    def epsilon(self) -> float:
        """The privacy budget of one report."""
        return self._o.epsilon

    @property
    def d(self) -> int:
        """The domain size: categories are ``0 .. d-1``."""
        return self._o.d

    @property
    def layout(self) -> str:
        """The report layout: ``index``, ``bits``, ``seed_hash`` or ``row_bit`` (see the class)."""
        return self._o.layout[0]

    @property
    def report_dtype(self) -> np.dtype:
        """The dtype of the report arrays (uint32 or uint64)."""
        return np.dtype(self._o.layout[1])

    @property
    def report_columns(self) -> int:
        """Columns of the 2-D report arrays (0 for 1-D ones)."""
        return self._o.layout[2]

    @property
    def details(self) -> Dict[str, float]:
        """The oracle's constants (``p`` and ``q``, OLH's ``g``, Hadamard's ``rows``, ...).

        >>> import harmony_ldp as hl
        >>> sorted(hl.FrequencyOracle("olh", epsilon=1.0, d=100).details)
        ['g', 'p', 'q']
        """
        return dict(self._o.details)

    def randomize(self, values: Any, seed: Optional[int] = None) -> np.ndarray:
        """Randomizes each user's category (a 1-D integer array, ``0 <= v < d``) into a report.

        With ``seed`` the randomness is the seeded fast generator of simulations (the same
        reports for the same seed); without it, ChaCha20 seeded by the operating system, as on
        a device. The GIL is released while the reports are drawn.

        >>> import harmony_ldp as hl
        >>> grr = hl.FrequencyOracle("grr", epsilon=2.0, d=8)
        >>> r = grr.randomize([0, 1, 7, 7], seed=3)
        >>> r.dtype, r.shape
        (dtype('uint32'), (4,))
        >>> bool((grr.randomize([0, 1, 7, 7], seed=3) == r).all())
        True
        >>> grr.randomize([8])
        Traceback (most recent call last):
        ...
        harmony_ldp.HarmonyError: invalid input: values[0] is 8, expected an integer in [0, 8)
        """
        return self._o.randomize(check.categories(values), check.seed(seed))

    def estimate(self, reports: Any, *, as_frame: Optional[bool] = None) -> Estimates:
        """Unbiased frequency estimates (fractions of the users) of every category, each with
        its standard error and normal 95% CI, from reports of this oracle.

        Returns a DataFrame indexed by category (columns ``estimate``, ``std_error``,
        ``ci_low``, ``ci_high``; ``attrs["n"]`` the number of reports) when pandas is installed
        and ``as_frame`` is not False; else a dict of those four numpy arrays. Integer arrays
        of another dtype are accepted when every value fits the layout's dtype. The GIL is
        released while the reports are aggregated.

        >>> import numpy as np
        >>> import harmony_ldp as hl
        >>> hr = hl.FrequencyOracle("hr", epsilon=1.0, d=16)
        >>> est = hr.estimate(hr.randomize(np.zeros(20_000, dtype=np.int64), seed=5), as_frame=False)
        >>> bool(abs(est["estimate"][0] - 1.0) < 4.42 * est["std_error"][0])
        True
        >>> bool(np.allclose(est["ci_high"] - est["estimate"], 1.959963984540054 * est["std_error"]))
        True
        """
        dtype, cols = self._o.layout[1], self._o.layout[2]
        n, block = self._o.estimate(check.reports(reports, dtype, cols, self.layout))
        return check.as_frame(block, self.d, "category", as_frame, {"n": n, "oracle": self.name})

    def variance(self, frequencies: Any, n: float = 1) -> np.ndarray:
        """The exact variance of every category's estimate, Var(f̂_v) for v in ``0 .. d-1``,
        when ``n`` users hold the categories in the proportions ``frequencies`` (d fractions
        summing to 1). With ``n = 1`` it is the variance of one report.

        >>> import numpy as np
        >>> import harmony_ldp as hl
        >>> oue = hl.FrequencyOracle("oue", epsilon=1.0, d=4)
        >>> v = oue.variance([0.5, 0.3, 0.2, 0.0], n=10_000)
        >>> v.shape
        (4,)
        >>> bool(v[3] <= oue.worst_case_variance() / 10_000)
        True
        """
        f = check.numbers_1d(frequencies, "frequencies")
        return self._o.variance(f, check.real(n, "n"))

    def worst_case_variance(self) -> float:
        """The largest variance of one report's estimate over the user's category and the
        estimated one; ``worst_case_variance() / n`` bounds every Var(f̂_v) of n users.

        >>> import harmony_ldp as hl, math
        >>> e = math.e
        >>> oue = hl.FrequencyOracle("oue", epsilon=1.0, d=64)
        >>> bool(abs(oue.worst_case_variance() - (e + 1) ** 2 / (e - 1) ** 2) < 1e-9)  # x = v
        True
        """
        return self._o.worst_case_variance()

    def __repr__(self) -> str:
        return f"FrequencyOracle({self.name!r}, epsilon={self.epsilon!r}, d={self.d})"


class NumericMechanism:
    """A locally private mechanism for one number per user in ``[low, high]``, chosen by name;
    the mean over the users is estimated without bias.

    ``name`` is one of ``NUMERIC_NAMES``: ``laplace``, ``duchi``, ``pm`` (piecewise), ``hm``
    (hybrid), ``scdf``, ``staircase``. Values are mapped to [-1, 1]; a report is a float64, the
    mechanism's unbiased output on that scale (``±C`` for Duchi's sign reports, a multiple of
    2⁻²⁰ otherwise); the estimate is mapped back to ``[low, high]``.

    >>> import numpy as np
    >>> import harmony_ldp as hl
    >>> ages = np.random.default_rng(0).integers(18, 90, size=50_000)
    >>> pm = hl.NumericMechanism("pm", epsilon=1.0, low=18, high=90)
    >>> pm
    NumericMechanism('pm', epsilon=1.0, low=18.0, high=90.0)
    >>> est = pm.estimate(pm.randomize(ages, seed=2), as_frame=False)
    >>> bool(abs(est["estimate"][0] - ages.mean()) < 4.42 * est["std_error"][0])
    True
    """

    def __init__(self, name: str, epsilon: float, low: float = -1.0, high: float = 1.0) -> None:
        self._m = _native.NativeNumeric(
            check.name(name), check.real(epsilon, "epsilon"), check.real(low, "low"), check.real(high, "high")
        )

    @property
    def name(self) -> str:
        """The mechanism's name."""
        return self._m.name

    @property
    def epsilon(self) -> float:
        """The privacy budget of one report."""
        return self._m.epsilon

    @property
    def low(self) -> float:
        """The smallest value a user may hold."""
        return self._m.low

    @property
    def high(self) -> float:
        """The largest value a user may hold."""
        return self._m.high

    def randomize(self, values: Any, seed: Optional[int] = None) -> np.ndarray:
        """Randomizes each user's number (a 1-D real array in ``[low, high]``; NaN is rejected)
        into a float64 report. ``seed`` as for ``FrequencyOracle.randomize``; the GIL is
        released meanwhile.

        >>> import harmony_ldp as hl
        >>> duchi = hl.NumericMechanism("duchi", epsilon=1.0)
        >>> r = duchi.randomize([0.5, -0.25, 1.0], seed=4)
        >>> bool((abs(r) == abs(r[0])).all())  # Duchi reports are +C or -C
        True
        >>> duchi.randomize([0.5, float("nan")])
        Traceback (most recent call last):
        ...
        harmony_ldp.HarmonyError: invalid input: values[1] is NaN, expected a number in [-1, 1]
        """
        return self._m.randomize(check.numbers_1d(values), check.seed(seed))

    def estimate(self, reports: Any, *, as_frame: Optional[bool] = None) -> Estimates:
        """The unbiased mean of the users' values (in ``[low, high]`` units) with its standard
        error and 95% CI, from reports of this mechanism: a one-row DataFrame (index ``mean``;
        ``attrs["n"]`` the number of reports) or, without pandas or with ``as_frame=False``, a
        dict of one-element arrays. The GIL is released meanwhile.

        >>> import numpy as np
        >>> import harmony_ldp as hl
        >>> hm = hl.NumericMechanism("hm", epsilon=2.0, low=0, high=10)
        >>> est = hm.estimate(hm.randomize(np.full(40_000, 7.5), seed=8), as_frame=False)
        >>> bool(abs(est["estimate"][0] - 7.5) < 4.42 * est["std_error"][0])
        True
        >>> hm.estimate([0.1234])
        Traceback (most recent call last):
        ...
        harmony_ldp.HarmonyError: invalid report: report 0: value is 0.1234, expected a hm report (±1.3130352854993312 or a multiple of 2^-20)
        """
        n, *values = self._m.estimate(check.numbers_1d(reports, "reports"))
        block = np.array(values, dtype=np.float64).reshape(4, 1)
        return check.as_frame(block, ["mean"], "statistic", as_frame, {"n": n, "mechanism": self.name})

    def variance(self, values: Any) -> np.ndarray:
        """The variance of one report of a user holding each value of ``values`` (in
        ``[low, high]``), in squared units; the mean of n users has variance mean(variance)/n.

        >>> import harmony_ldp as hl
        >>> laplace = hl.NumericMechanism("laplace", epsilon=1.0)
        >>> [round(float(v), 6) for v in laplace.variance([0.0, 1.0])]  # 8/eps^2, whatever the value
        [8.0, 8.0]
        """
        return self._m.variance(check.numbers_1d(values))

    def worst_case_variance(self) -> float:
        """The largest one-report variance over ``[low, high]``, in squared units.

        >>> import harmony_ldp as hl
        >>> d = hl.NumericMechanism("duchi", epsilon=1.0, low=0, high=2)
        >>> a, b = d.variance_coefficients()
        >>> bool(abs(d.worst_case_variance() - max(b, a + b)) < 1e-12)
        True
        """
        return self._m.worst_case_variance()

    def variance_coefficients(self) -> Tuple[float, float]:
        """(a, b) with Var(one report | t) = a·t² + b, for t the value mapped to [-1, 1].

        >>> import harmony_ldp as hl
        >>> hl.NumericMechanism("laplace", epsilon=2.0).variance_coefficients()[1] > 2.0
        True
        """
        return self._m.variance_coefficients()

    def __repr__(self) -> str:
        return f"NumericMechanism({self.name!r}, epsilon={self.epsilon!r}, low={self.low!r}, high={self.high!r})"


def unpack_bits(reports: Any, d: int) -> np.ndarray:
    """Expands ``bits``-layout reports (uint64, shape (n, ⌈d/64⌉)) into a bool array of shape
    (n, d): entry (i, v) is bit v of report i.

    >>> import numpy as np
    >>> import harmony_ldp as hl
    >>> hl.unpack_bits(np.array([[0b1011]], dtype=np.uint64), 4)
    array([[ True,  True, False,  True]])
    """
    words = np.ascontiguousarray(reports, dtype="<u8")
    d = check.integer(d, "d", 1, 64 * max(1, words.shape[-1] if words.ndim == 2 else 1))
    if words.ndim != 2:
        from ._errors import _error

        raise _error("invalid report", "reports", f"an array of shape {tuple(words.shape)}", "a 2-D uint64 array")
    return np.unpackbits(words.view(np.uint8), axis=1, count=d, bitorder="little").astype(bool)
