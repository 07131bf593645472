"""Every mechanism by name: report layouts, seeded reproducibility, estimates against the truth
(z = 4.42: a false failure rate of 1e-5 per check for the unbiased mechanisms; the seeds are
fixed, so a run that passes always passes) and the variance formulas."""

import math

import numpy as np
import pytest

import harmony_ldp as hl

Z = 4.42
LAYOUT = {
    "grr": ("index", np.uint32, None),
    "hr": ("index", np.uint32, None),
    "sue": ("bits", np.uint64, "words"),
    "oue": ("bits", np.uint64, "words"),
    "olh": ("seed_hash", np.uint64, 2),
    "hadamard": ("row_bit", np.uint32, 2),
    "bassily-smith": ("row_bit", np.uint32, 2),
}


def zipf_values(n, d, seed):
    p = 1.0 / np.arange(1, d + 1) ** 1.1
    return np.random.default_rng(seed).choice(d, size=n, p=p / p.sum())


@pytest.mark.parametrize("name", hl.FREQUENCY_NAMES)
@pytest.mark.parametrize("d", [8, 100])
def test_oracle_layout_and_estimates(name, d):
    o = hl.FrequencyOracle(name, epsilon=2.0, d=d)
    values = zipf_values(40_000, d, seed=d)
    r = o.randomize(values, seed=11)
    layout, dtype, cols = LAYOUT.get(name, LAYOUT["grr"] if o.layout == "index" else LAYOUT["oue"])
    assert (o.layout, r.dtype) == (layout, np.dtype(dtype)) and r.dtype == o.report_dtype
    want = (len(values),) if cols is None else (len(values), math.ceil(d / 64) if cols == "words" else cols)
    assert r.shape == want and r.flags.c_contiguous and r.flags.owndata is False  # numpy wraps Rust's buffer
    est = o.estimate(r, as_frame=False)
    truth = np.bincount(values, minlength=d) / len(values)
    if name == "bassily-smith":  # a biased baseline: only loosely right
        assert np.abs(est["estimate"] - truth).max() < 0.5
    else:
        z = (est["estimate"] - truth) / est["std_error"]
        assert np.abs(z).max() < Z, (name, d, z)
    assert np.allclose(est["ci_high"] - est["estimate"], 1.959963984540054 * est["std_error"])
    assert np.allclose(est["estimate"] - est["ci_low"], 1.959963984540054 * est["std_error"])


@pytest.mark.parametrize("name", hl.FREQUENCY_NAMES)
def test_seeds_reproduce_and_os_randomness_differs(name):
    o = hl.FrequencyOracle(name, epsilon=1.0, d=20)
    v = np.arange(2000) % 20
    a, b = o.randomize(v, seed=5), o.randomize(v, seed=5)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, o.randomize(v, seed=6))
    assert not np.array_equal(o.randomize(v), o.randomize(v))  # ChaCha20 from the OS


def test_adaptive_follows_its_branch():
    assert hl.FrequencyOracle("adaptive", epsilon=1.0, d=4).layout == "index"  # d < 3e^eps + 2: GRR
    big = hl.FrequencyOracle("adaptive", epsilon=1.0, d=200)
    assert big.layout == "bits" and big.randomize([3, 199], seed=1).shape == (2, 4)


def test_estimate_frame_and_dict():
    pd = pytest.importorskip("pandas")
    o = hl.FrequencyOracle("grr", epsilon=1.0, d=5)
    r = o.randomize(np.arange(1000) % 5, seed=2)
    df = o.estimate(r)
    assert isinstance(df, pd.DataFrame)
    assert list(df.columns) == ["estimate", "std_error", "ci_low", "ci_high"]
    assert df.index.name == "category" and list(df.index) == [0, 1, 2, 3, 4]
    assert df.attrs["n"] == 1000
    d = o.estimate(r, as_frame=False)
    assert np.array_equal(d["estimate"], df["estimate"].to_numpy())
    # Reports of another integer dtype are accepted when they fit.
    assert np.array_equal(o.estimate(r.astype(np.int64), as_frame=False)["estimate"], d["estimate"])


def test_empty_input_gives_infinite_standard_errors():
    o = hl.FrequencyOracle("oue", epsilon=1.0, d=3)
    r = o.randomize(np.array([], dtype=np.int64), seed=1)
    assert r.shape == (0, 1)
    est = o.estimate(r, as_frame=False)
    assert np.all(est["estimate"] == 0) and np.all(np.isinf(est["std_error"]))


def test_unpack_bits_matches_the_layout():
    o = hl.FrequencyOracle("sue", epsilon=0.5, d=70)
    v = np.arange(3000) % 70
    bits = hl.unpack_bits(o.randomize(v, seed=3), 70)
    assert bits.shape == (3000, 70) and bits.dtype == bool
    # The user's own bit is set with p = e^(eps/2)/(e^(eps/2)+1), the others with q = 1 - p.
    own = bits[np.arange(3000), v].mean()
    p = math.exp(0.25) / (math.exp(0.25) + 1)
    assert abs(own - p) < Z * math.sqrt(p * (1 - p) / 3000)


@pytest.mark.parametrize("name", hl.FREQUENCY_NAMES)
def test_standard_errors_follow_the_variance_formula(name):
    """The plug-in standard error is close to the closed form at the true frequencies."""
    d, n = 16, 50_000
    o = hl.FrequencyOracle(name, epsilon=1.0, d=d)
    values = zipf_values(n, d, seed=4)
    truth = np.bincount(values, minlength=d) / n
    se = o.estimate(o.randomize(values, seed=9), as_frame=False)["std_error"]
    exact = np.sqrt(o.variance(truth, n=n))
    assert np.allclose(se, exact, rtol=0.05), (name, se / exact)
    assert np.all(o.variance(truth, n=1) <= o.worst_case_variance() * (1 + 1e-12))


@pytest.mark.parametrize("name", hl.NUMERIC_NAMES)
@pytest.mark.parametrize("bounds", [(-1.0, 1.0), (17.0, 90.0)])
def test_numeric_mechanisms(name, bounds):
    lo, hi = bounds
    m = hl.NumericMechanism(name, epsilon=1.0, low=lo, high=hi)
    x = np.random.default_rng(3).uniform(lo, hi, 60_000)
    r = m.randomize(x, seed=12)
    assert r.dtype == np.float64 and r.shape == x.shape
    assert np.array_equal(r, m.randomize(x, seed=12))
    est = m.estimate(r, as_frame=False)
    assert abs(est["estimate"][0] - x.mean()) < Z * est["std_error"][0]
    # The standard error is the closed form at these values (plug-in: within a few percent).
    exact = math.sqrt(m.variance(x).mean() / len(x))
    assert abs(est["std_error"][0] / exact - 1) < 0.05
    assert m.variance(x).max() <= m.worst_case_variance() * (1 + 1e-12)
    a, b = m.variance_coefficients()
    t = 2 * (x[:5] - lo) / (hi - lo) - 1
    assert np.allclose(m.variance(x[:5]), ((hi - lo) / 2) ** 2 * (a * t * t + b))


def test_numeric_reports_round_trip_as_the_mechanism_sends_them():
    duchi = hl.NumericMechanism("duchi", epsilon=0.5)
    r = duchi.randomize(np.zeros(1000), seed=1)
    c = abs(r[0])
    assert set(np.unique(r)) <= {c, -c}
    laplace = hl.NumericMechanism("laplace", epsilon=1.0)
    units = laplace.randomize(np.zeros(1000), seed=1) * 2**20
    assert np.array_equal(units, np.round(units))  # on the 2^-20 grid
    pd = pytest.importorskip("pandas")
    df = laplace.estimate(laplace.randomize(np.full(100, 0.5), seed=2))
    assert isinstance(df, pd.DataFrame) and list(df.index) == ["mean"] and df.attrs["n"] == 100


def test_recycled_bit_buffers_never_alias_live_arrays():
    """Bit-vector reports reuse the buffer of a dead report array (the oracle keeps one spare):
    arrays alive at the same time never share memory, and a dead array's buffer is reused."""
    o = hl.FrequencyOracle("oue", epsilon=1.0, d=200)
    v = np.arange(5000) % 200
    a = o.randomize(v, seed=1)
    a_copy = a.copy()
    b = o.randomize(v, seed=2)
    assert not np.shares_memory(a, b) and np.array_equal(a, a_copy)
    address = a.__array_interface__["data"][0]
    del a
    c = o.randomize(v, seed=3)
    assert c.__array_interface__["data"][0] == address  # a's buffer, reused
    assert not np.shares_memory(b, c)
    assert np.array_equal(c, o.randomize(v, seed=3)) and np.array_equal(b, o.randomize(v, seed=2))
    small = o.randomize(v[:10], seed=4)  # too small to take a large spare buffer
    assert small.shape == (10, 4) and np.array_equal(o.estimate(small, as_frame=False)["estimate"].shape, (200,))
