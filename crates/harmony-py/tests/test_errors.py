"""Bad input raises harmony_ldp.HarmonyError (a ValueError) naming the field, the value and what
was expected: NaN, wrong dtypes, wrong shapes, unknown mechanisms, out-of-domain values and
reports, bad parameters."""

import numpy as np
import pytest

import harmony_ldp as hl


def raises(field_part, fn, *args, **kwargs):
    with pytest.raises(hl.HarmonyError) as info:
        fn(*args, **kwargs)
    e = info.value
    assert isinstance(e, ValueError)
    assert field_part in e.field, (e.field, str(e))
    assert e.expected and str(e).endswith(e.expected) and f"{e.field} is {e.value}" in str(e)
    return e


def test_unknown_mechanisms():
    e = raises("mechanism", hl.FrequencyOracle, "rappor", 1.0, 8)
    assert e.value == '"rappor"' and "bassily-smith" in e.expected
    e = raises("mechanism", hl.NumericMechanism, "gaussian", 1.0)
    assert "staircase" in e.expected
    raises("mechanism", hl.FrequencyOracle, 3, 1.0, 8)


@pytest.mark.parametrize("eps", [float("nan"), float("inf"), 0.0, -1.0, 701.0])
def test_bad_epsilon(eps):
    raises("epsilon", hl.FrequencyOracle, "grr", eps, 8)
    raises("epsilon", hl.NumericMechanism, "pm", eps)


def test_bad_parameters():
    raises("d", hl.FrequencyOracle, "grr", 1.0, 1)
    raises("d", hl.FrequencyOracle, "grr", 1.0, -3)
    raises("d", hl.FrequencyOracle, "grr", 1.0, 2.5)
    raises("epsilon", hl.FrequencyOracle, "grr", "1", 8)
    raises("high", hl.NumericMechanism, "pm", 1.0, low=2, high=1)
    raises("low", hl.NumericMechanism, "pm", 1.0, low=float("nan"))
    o = hl.FrequencyOracle("grr", 1.0, 4)
    raises("seed", o.randomize, [0], seed=-1)
    raises("seed", o.randomize, [0], seed=2**64)
    raises("seed", o.randomize, [0], seed=1.5)
    raises("frequencies", o.variance, [0.5, 0.5])
    raises("frequencies", o.variance, [0.5, 0.5, 0.5, 0.5])
    raises("frequencies[1]", o.variance, [0.5, -0.5, 0.5, 0.5])
    raises("n", o.variance, [0.25] * 4, n=0)


def test_nan_and_out_of_domain_values():
    pm = hl.NumericMechanism("pm", 1.0, low=0, high=10)
    e = raises("values[2]", pm.randomize, [1.0, 2.0, float("nan")])
    assert e.value == "NaN" and e.expected == "a number in [0, 10]"
    raises("values[0]", pm.randomize, [10.5])
    raises("values[1]", pm.randomize, [0, -np.inf])
    o = hl.FrequencyOracle("oue", 1.0, 8)
    e = raises("values[1]", o.randomize, [0, 8])
    assert e.value == "8" and e.expected == "an integer in [0, 8)"
    e = raises("values[0]", o.randomize, [-1])
    assert e.value == "-1"
    raises("values[0]", o.randomize, np.array([2**63], dtype=np.uint64))


def test_wrong_dtypes_and_shapes():
    o = hl.FrequencyOracle("grr", 1.0, 8)
    e = raises("values", o.randomize, np.array([0.0, 1.0]))
    assert "float64" in e.value
    raises("values", o.randomize, np.array(["a", "b"]))
    raises("values", o.randomize, np.array([True, False]))
    raises("values", o.randomize, [[0, 1], [2, 3]])
    raises("values", o.randomize, 3)
    raises("values", o.randomize, [[0], [1, 2]])  # ragged
    pm = hl.NumericMechanism("pm", 1.0)
    raises("values", pm.randomize, np.array([1 + 2j]))
    raises("values", pm.randomize, np.array(["0.5"]))
    raises("values", pm.randomize, np.zeros((2, 2)))


def test_bad_reports():
    grr = hl.FrequencyOracle("grr", 1.0, 8)
    e = raises("report 1: y", grr.estimate, np.array([0, 8], dtype=np.uint32))
    assert e.value == "8"
    raises("reports", grr.estimate, np.zeros((3, 2), dtype=np.uint32))
    raises("reports", grr.estimate, np.array([0.5]))
    raises("reports[0]", grr.estimate, np.array([-1], dtype=np.int64))
    oue = hl.FrequencyOracle("oue", 1.0, 8)
    raises("reports", oue.estimate, np.zeros((3, 2), dtype=np.uint64))
    e = raises("report 0", oue.estimate, np.array([[1 << 9]], dtype=np.uint64))  # a padding bit
    olh = hl.FrequencyOracle("olh", 1.0, 8)
    raises("report 0: y", olh.estimate, np.array([[1, 1000]], dtype=np.uint64))
    raises("report 0: y", olh.estimate, np.array([[1, 2**40]], dtype=np.uint64))
    had = hl.FrequencyOracle("hadamard", 1.0, 8)
    raises("report 0: bit", had.estimate, np.array([[0, 2]], dtype=np.uint32))
    raises("report 0: j", had.estimate, np.array([[99, 1]], dtype=np.uint32))
    duchi = hl.NumericMechanism("duchi", 1.0)
    raises("report 1: value", duchi.estimate, [duchi.randomize([0.0], seed=1)[0], 0.5])
    raises("report 0: value", hl.NumericMechanism("pm", 1.0).estimate, [float("nan")])
    raises("report 0: value", hl.NumericMechanism("pm", 1.0).estimate, [1e6])  # beyond PM's range


def test_native_layer_rejects_wrong_types_without_crashing():
    """The private native classes are reachable; wrong types there are Python exceptions too."""
    from harmony_ldp import _native

    o = _native.NativeOracle("grr", 1.0, 8)
    with pytest.raises(hl.HarmonyError):
        o.estimate(np.zeros(3, dtype=np.int64))
    with pytest.raises(hl.HarmonyError):
        o.estimate(np.zeros(6, dtype=np.uint32)[::2])  # not contiguous
    with pytest.raises(TypeError):
        o.randomize(np.zeros(3, dtype=np.float64))
    with pytest.raises(OverflowError):
        _native.NativeOracle("grr", 1.0, -1)


def test_errors_pickle_with_their_fields():
    import pickle

    e = pytest.raises(hl.HarmonyError, hl.FrequencyOracle, "grr", 0.0, 8).value
    back = pickle.loads(pickle.dumps(e))
    assert (str(back), back.field, back.value, back.expected) == (str(e), e.field, e.value, e.expected)
