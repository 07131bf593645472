"""Property tests: arbitrary arrays and parameters never crash the interpreter (a panic or an
abort would end this process); each call either returns or raises HarmonyError."""

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import harmony_ldp as hl

DTYPES = st.sampled_from(["int8", "uint8", "int32", "uint32", "int64", "uint64", "float32", "float64", "bool",
                          "complex128", "U3", "O"])
ARRAYS = DTYPES.flatmap(lambda dt: hnp.arrays(np.dtype(dt), hnp.array_shapes(min_dims=0, max_dims=3, max_side=20),
                                              elements=None if dt != "O" else st.integers(-5, 5)))
NUMBERS = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-(2**70), 2**70), st.none(),
                    st.text(max_size=3), st.booleans())
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))


def call(fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except hl.HarmonyError:
        return None


@SETTINGS
@given(name=st.sampled_from(hl.FREQUENCY_NAMES + ("nope",)), eps=NUMBERS, d=NUMBERS, values=ARRAYS,
       seed=st.one_of(st.none(), st.integers(-3, 2**65)))
def test_frequency_oracles_never_crash(name, eps, d, values, seed):
    if isinstance(d, int) and d > 5000:
        d = d % 5000  # large valid domains only cost time
    o = call(hl.FrequencyOracle, name, eps, d)
    if o is None:
        return
    r = call(o.randomize, values, seed=seed)
    call(o.estimate, values)
    if r is not None:
        est = o.estimate(r, as_frame=False)
        assert est["estimate"].shape == (o.d,)


@SETTINGS
@given(name=st.sampled_from(hl.NUMERIC_NAMES + ("nope",)), eps=NUMBERS, low=NUMBERS, high=NUMBERS, values=ARRAYS,
       seed=st.one_of(st.none(), st.integers(0, 2**64 - 1)))
def test_numeric_mechanisms_never_crash(name, eps, low, high, values, seed):
    m = call(hl.NumericMechanism, name, eps, low if low is not None else -1.0, high if high is not None else 1.0)
    if m is None:
        return
    r = call(m.randomize, values, seed=seed)
    call(m.estimate, values)
    call(m.variance, values)
    if r is not None:
        m.estimate(r, as_frame=False)


@SETTINGS
@given(reports=ARRAYS, name=st.sampled_from(hl.FREQUENCY_NAMES), d=st.integers(2, 200))
def test_arbitrary_reports_are_rejected_or_aggregated(reports, name, d):
    o = hl.FrequencyOracle(name, 1.0, d)
    est = call(o.estimate, reports, as_frame=False)
    assert est is None or est["estimate"].shape == (d,)


@SETTINGS
@given(spec=st.dictionaries(st.text(max_size=4), st.one_of(
    st.tuples(NUMBERS, NUMBERS), st.lists(st.text(max_size=3), max_size=4), NUMBERS), max_size=4),
    rows=st.lists(st.tuples(st.floats(allow_nan=True), st.text(max_size=2)), max_size=30))
def test_schemas_and_simulation_never_crash(spec, rows):
    s = call(hl.Schema, spec)
    if s is None:
        return
    frame = {name: [r[0] if a["kind"] == "numeric" else r[1] for r in rows] for name, a in zip(s.names, s.attributes)}
    call(hl.simulate, frame, s, epsilon=1.0, strategy=["split", "sample-k"], as_frame=False)
