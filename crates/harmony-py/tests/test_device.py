"""hl.Device as one device of the Rust SDK (`harmony_client::Device`): its budget, its store
of reports, spends and permanent reports (a file that survives restarts), clamping of
out-of-range numbers, and `invalid` for the rows of a frame. The mirrors of harmony-client's
tests/budget.rs, tests/fail_closed.rs and tests/memo.rs, against `harmony serve`."""

import json

import numpy as np
import pytest

import harmony_ldp as hl
from harmony_ldp import _native
from test_tasks import server  # noqa: F401 (the fixture)

SCHEMA = [
    {"name": "age", "kind": "numeric", "min": 17.0, "max": 90.0},
    {"name": "race", "kind": "categorical", "categories": ["a", "b", "c"]},
]


def collection(server, epsilon=2.0, kind="frequency"):  # noqa: F811
    task = {"kind": "frequency", "attribute": "race"} if kind == "frequency" else {"kind": "means"}
    cid, _ = hl.Analyst(server, "tok").create({"schema": SCHEMA, "epsilon": epsilon, "task": task})
    return cid


def reports(server, cid):  # noqa: F811
    return hl.Analyst(server, "tok").estimates(cid).reports


def test_device_budget_refuses_a_collection_beyond_it(server, tmp_path):  # noqa: F811
    """A budget of ε 3 per 30 days: the first ε 2 collection is reported and charged, the
    second is refused (policy.budget) before anything is randomized or sent; a new Device on
    the same store (an app restart) still counts the first charge."""
    store = tmp_path / "device.json"
    first, second = collection(server), collection(server)
    device = hl.Device(server, store=store, budget="3/30")
    assert device.report(first, {"age": 30, "race": "b"}) == {"accepted": 1, "duplicates": 0}
    assert [(s["key"], s["epsilon"]) for s in device.spends()] == [(first, 2.0)]
    for d in (device, hl.Device(server, store=store, budget="3/30")):
        with pytest.raises(hl.HarmonyError) as e:
            d.report(second, {"age": 30, "race": "b"})
        assert e.value.field == "policy.budget", e.value.field
        with pytest.raises(hl.HarmonyError) as e:
            d.submit(second, {"age": [30, 40], "race": ["a", "b"]})
        assert e.value.field == "policy.budget", e.value.field
    assert reports(server, second) == 0


def test_device_restart_with_the_same_store_sends_no_fresh_report(server, tmp_path):  # noqa: F811
    """A report is kept in the store before it is sent: a restart with the same store
    prepares the same bytes under the same id; after the acknowledgement it refuses. A store
    that lost the report but kept the charge refuses (policy.ledger), never randomizes again.
    A frame's collection is charged once: a second submit is refused."""
    store = tmp_path / "device.json"
    cid = collection(server)
    config = json.dumps(hl.Device(server).config(cid))
    policy = json.dumps({"max_epsilon": 10.0})
    cols = [np.array([30.0]), np.array([1])]
    made = _native.NativeDevice(policy, str(store)).prepare(config, cols)
    for _ in range(20):
        assert _native.NativeDevice(policy, str(store)).prepare(config, cols) == made
    device = hl.Device(server, store=store)
    assert device.report(cid, {"age": 30, "race": "b"}) == {"accepted": 1, "duplicates": 0}
    with pytest.raises(hl.HarmonyError) as e:
        hl.Device(server, store=store).report(cid, {"age": 30, "race": "b"})
    assert e.value.field == "collection", e.value.field
    assert reports(server, cid) == 1
    # The report lost, the charge kept: refused, nothing sent.
    lost = collection(server)
    hl.Device(server, store=store).submit(lost, {"age": [30, 40], "race": ["a", "b"]})
    state = json.loads(store.read_text())
    state["ledger"] = {}
    store.write_text(json.dumps(state))
    for _ in range(100):
        with pytest.raises(hl.HarmonyError) as e:
            hl.Device(server, store=store).report(cid, {"age": 30, "race": "b"})
        assert e.value.field == "policy.ledger", e.value.field
        with pytest.raises(hl.HarmonyError) as e:
            hl.Device(server, store=store).submit(lost, {"age": [30], "race": ["a"]})
        assert e.value.field == "policy.ledger", e.value.field
    assert reports(server, cid) == 1 and reports(server, lost) == 2


def test_device_series_keeps_its_permanent_report_across_restarts(server, tmp_path):  # noqa: F811
    """A recurring series: one permanent report (the same bytes under new ids) for every
    collection of the series, kept in the store across restarts and charged once."""
    store = tmp_path / "device.json"
    policy = json.dumps({"max_epsilon": 10.0})
    cols = [np.array([30.0]), np.array([2])]
    made = []
    for _ in range(5):
        cid = collection(server)
        config = json.dumps(hl.Device(server).config(cid))
        made.append(_native.NativeDevice(policy, str(store)).prepare(config, cols, "weekly"))
    assert len({report for _, report in made}) == 1 and len({i for i, _ in made}) == 5
    assert len(_native.NativeDevice(policy, str(store)).spends()) == 1


def test_device_clamps_out_of_range_values(server):  # noqa: F811
    """A number outside the schema's range is clamped on the device, never refused (a refusal
    would tell the server the value is out of range): one report, and every row of a frame."""
    cid = collection(server, kind="means")
    assert hl.Device(server).report(cid, {"age": 300, "race": "a"}) == {"accepted": 1, "duplicates": 0}
    out = hl.Device(server).submit(collection(server, kind="means"),
                                   {"age": [-5, 30, 1e9, float("inf")], "race": ["a", "b", "c", "a"]})
    assert out == {"devices": 4, "accepted": 4, "duplicates": 0, "skipped": 0, "clamped": 3}


def test_device_invalid_skip_counts_the_skipped_rows(server):  # noqa: F811
    """`invalid="skip"`: a row the schema cannot encode (an unknown label) is skipped and
    counted; `invalid="error"` (the default) names its row and sends nothing."""
    frame = {"age": [20, 30, 40], "race": ["a", "zebra", "c"]}
    cid = collection(server)
    with pytest.raises(hl.HarmonyError) as e:
        hl.Device(server).submit(cid, frame)
    assert e.value.field == 'row 1, column "race"', e.value.field
    assert reports(server, cid) == 0
    out = hl.Device(server, invalid="skip").submit(cid, frame)
    assert out == {"devices": 2, "accepted": 2, "duplicates": 0, "skipped": 1, "clamped": 0}
    other = collection(server)
    assert hl.Device(server).submit(other, frame, invalid="skip")["skipped"] == 1
    with pytest.raises(hl.HarmonyError) as e:
        hl.Device(server, invalid="sometimes")
    assert e.value.field == "invalid"


def test_device_reports_a_uniform_value_in_place_of_one_the_schema_cannot_encode(server):  # noqa: F811
    """A label outside the server's list, a missing or non-numeric number: the device reports a
    uniformly random value in its place (never refuses: a refusal would tell the server the
    device's value is outside its list)."""
    for record in ({"age": 30, "race": "zebra"}, {"age": None, "race": "a"}, {"age": "old", "race": "b"}, {}):
        cid = collection(server)
        assert hl.Device(server).report(cid, record) == {"accepted": 1, "duplicates": 0}, record
        assert reports(server, cid) == 1
