"""harmony_ldp.Aggregator: a collection's reports added from Arrow columns or bytes, states saved
and merged (what an engine's workers run), the estimate document equal to one accumulator's and
to `harmony aggregate --engine local` of the same Parquet files."""

import json
import os
import subprocess

import pytest

import harmony_ldp as hl
from reports_util import SCHEMA, TASKS, body_bytes, export, read_body, rel_diff

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")


def _body(d):
    return read_body(d)


@pytest.mark.parametrize("name,task,eps", TASKS, ids=[t[0] for t in TASKS])
def test_partial_states_merge_to_one_accumulator(tmp_path, name, task, eps):
    d, spec = export(str(tmp_path), name, task, eps, 1200)
    body = _body(d)
    whole = hl.Aggregator(spec)
    assert whole.add_arrow(body) == 1200
    merged = hl.Aggregator(json.loads(spec))
    for lo, hi in [(0, 100), (100, 100), (100, 1200)]:
        part = hl.Aggregator(spec)
        part.add_arrow(body.slice(lo, hi - lo))  # a sliced array: offsets from the slice's start
        merged.merge(part.save())
    assert merged.count == whole.count == 1200
    assert rel_diff(whole.estimate(), merged.estimate()) <= 1e-12
    # Bytes in, the same.
    again = hl.Aggregator(spec)
    again.add(body_bytes(body))
    assert again.save() == whole.save()
    if pa.types.is_struct(body.type):
        # Reports' fields: the same as the bytes they encode, in one binary column and as a dictionary.
        body = pa.array(body_bytes(body), pa.binary())
        plain = hl.Aggregator(spec)
        assert plain.add_arrow(body) == 1200
        assert plain.save() == whole.save()
    # A dictionary column (`harmony export` writes repeating reports so), the same.
    coded = hl.Aggregator(spec)
    assert coded.add_arrow(body.dictionary_encode()) == 1200
    assert coded.save() == whole.save()
    # `harmony aggregate --engine local` on the same files.
    binary = os.environ.get("HARMONY_BIN")
    if binary:
        out = subprocess.run([binary, "aggregate", "--engine", "local", "--reports", d, "--format", "json"],
                             check=True, capture_output=True, text=True).stdout
        assert rel_diff(json.loads(out), whole.estimate()) <= 1e-12


def test_errors_name_the_row_and_refuse_foreign_states(tmp_path):
    (n1, t1, e1), (n2, t2, e2) = TASKS[2], TASKS[5]
    d1, spec1 = export(str(tmp_path), n1, t1, e1, 50)
    d2, spec2 = export(str(tmp_path), n2, t2, e2, 50)
    a = hl.Aggregator(spec1)
    with pytest.raises(hl.HarmonyError) as e:
        a.merge(hl.Aggregator(spec2).save())
    assert "another collection" in str(e.value)
    with pytest.raises(hl.HarmonyError) as e:
        a.add([b"\x01\x02\x03"])
    assert e.value.field == "reports[0]" and a.count == 0
    bodies = [bytes(b) for b in _body(d1).to_pylist()]
    with pytest.raises(hl.HarmonyError) as e:
        a.add(bodies[:3] + [b"\xff"] + bodies[3:])
    assert e.value.field == "reports[3]" and a.count == 0, "all or nothing"
    with pytest.raises(hl.HarmonyError) as e:
        a.add_arrow(pa.array([b"x", None], pa.binary()))
    assert e.value.field == "body"
    with pytest.raises(hl.HarmonyError) as e:
        a.add_arrow(pa.array(["text"]))
    assert "binary" in str(e.value)
    with pytest.raises(hl.HarmonyError) as e:
        a.merge(a.save()[:-1])
    with pytest.raises(hl.HarmonyError) as e:
        hl.Aggregator("{}")
    assert e.value.field == "spec"
    train = hl.resolve_config({"schema": SCHEMA, "epsilon": 1,
                               "task": {"kind": "train", "task": "linear", "target": "score", "batch_size": 4, "rounds": 2}})
    with pytest.raises(hl.HarmonyError) as e:
        hl.Aggregator(train)
    assert "any order" in str(e.value)
    assert hl.read_spec(d1) == spec1


def test_olh_fields_refuse_nulls_other_structs_and_bad_values(tmp_path):
    name, task, eps = next(t for t in TASKS if t[0] == "frequency-olh-fields")
    _, spec = export(str(tmp_path), name, task, eps, 50)
    a = hl.Aggregator(spec)
    null_seed = pa.StructArray.from_arrays([pa.array([1, None], pa.int64()), pa.array([0, 1], pa.int32())],
                                           names=["seed", "y"])
    with pytest.raises(hl.HarmonyError) as e:
        a.add_arrow(null_seed)
    assert "body.seed" in str(e.value)
    with pytest.raises(hl.HarmonyError) as e:
        a.add_arrow(pa.StructArray.from_arrays([pa.array([1], pa.int64())], names=["x"]))
    assert "reports' fields" in str(e.value)
    # y = -1 holds the u32 2^32 - 1: outside [0, g), named by its row; nothing is added.
    bad_y = pa.StructArray.from_arrays([pa.array([1, 2], pa.int64()), pa.array([0, -1], pa.int32())],
                                       names=["seed", "y"])
    with pytest.raises(hl.HarmonyError) as e:
        a.add_arrow(bad_y)
    assert "reports[1]" in str(e.value)
    assert a.count == 0
