"""Exported collections for the aggregator and Spark tests: every report task of the protocol
resolved (`resolve_config`), its devices' reports randomized by the device SDK
(`NativeDeviceTask`, the OS CSPRNG) and written as `harmony export` writes them
(`collection=ID/day=YYYY-MM-DD/part-NNNNN.parquet`: report_id, day, body; `spec.json`)."""

import json
import os
from typing import Any, Dict, List, Tuple

import numpy as np

import harmony_ldp as hl
from harmony_ldp import _native

SCHEMA = [
    {"kind": "numeric", "name": "age", "min": 0, "max": 100},
    {"kind": "categorical", "name": "color", "categories": ["red", "green", "blue"]},
    {"kind": "numeric", "name": "score", "min": -1, "max": 1},
    {"kind": "categorical", "name": "size", "categories": ["s", "m", "l", "xl", "xxl"]},
]

#: (name, task, ε): one collection per report task (and a few methods).
TASKS: List[Tuple[str, Dict[str, Any], float]] = [
    ("means-harmony", {"kind": "means", "strategy": "harmony"}, 1.0),
    ("means-split", {"kind": "means", "strategy": "split"}, 2.0),
    ("frequency-oue", {"kind": "frequency", "attribute": "size", "mechanism": "oue"}, 1.0),
    ("frequency-olh", {"kind": "frequency", "attribute": "size", "mechanism": "olh"}, 1.0),
    # The same, its bodies written as `harmony export` writes distinct OLH reports: their fields.
    ("frequency-olh-fields", {"kind": "frequency", "attribute": "size", "mechanism": "olh"}, 1.0),
    # Means of one numeric attribute (schema: age only): one fixed-point record per device,
    # written as `harmony export` writes them: struct<attribute: int32, units: int64>.
    ("means-age-pm-fields", {"kind": "means", "strategy": "split", "numeric_mechanism": "pm"}, 1.0),
    ("range-hh", {"kind": "range", "attribute": "age", "bins": 16, "method": "hh"}, 1.0),
    ("marginals-direct", {"kind": "marginals", "method": "direct", "bins": {"age": 4, "score": 2}, "ways": [2]}, 1.0),
    ("linear-hr", {"kind": "linear-queries", "attributes": ["color", "age"], "bins": {"age": 4},
                   "workload": "prefix", "mechanism": "hr"}, 1.0),
    ("heavy-hitters-pem", {"kind": "heavy-hitters", "method": "pem", "top": 3, "pad_length": 2}, 2.0),
]

POLICY = json.dumps({"max_epsilon": 10.0})


def frame(n: int, seed: int) -> Dict[str, Any]:
    rng = np.random.default_rng(seed)
    return {
        "age": rng.uniform(17, 90, n).round(),
        "color": rng.choice(["red", "green", "blue"], n, p=[0.5, 0.3, 0.2]),
        "score": rng.uniform(-1, 1, n),
        "size": rng.choice(["s", "m", "l", "xl", "xxl"], n),
    }


def reports(config: Dict[str, Any], n: int, seed: int) -> List[Tuple[str, bytes]]:
    """n devices' (report id, body) of a collection."""
    device = _native.NativeDeviceTask(json.dumps(config), POLICY)
    if config["task"]["kind"] == "heavy-hitters":
        rng = np.random.default_rng(seed)
        words = ["ab", "cd", "ef", "gh", "ij"]
        items = device.item_sets([[words[min(int(rng.exponential(1.2)), 4)]] for _ in range(n)])
    else:
        columns, _ = hl.Schema({"attributes": config["schema"]}).encode(frame(n, seed))
        items = device.records(columns)
    return [(i, bytes.fromhex(r)) for i, r in items]


def export(out: str, name: str, task: Dict[str, Any], eps: float, n: int, parts: int = 3) -> Tuple[str, str]:
    """Writes n reports of a new collection `name` under out/collection=name (`parts` days);
    returns (its directory, its spec)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = SCHEMA[:1] if "-age-" in name else SCHEMA
    config = hl.resolve_config({"schema": schema, "epsilon": eps, "task": task}, name)
    spec = json.dumps(config)
    rows = reports(config, n, seed=abs(hash(name)) % 2**32)
    d = os.path.join(out, f"collection={name}")
    fields = name.endswith("-fields")
    to_fields = record_fields if task["kind"] == "means" else olh_fields
    body_type = (RECORD_FIELDS if task["kind"] == "means" else OLH_FIELDS) if fields else pa.binary()
    schema = pa.schema([("report_id", pa.string(), False), ("day", pa.date32()), ("body", body_type, False)])
    for p in range(parts):
        chunk = rows[p::parts]
        day = 20_000 + p
        ddir = os.path.join(d, "day=%s" % (np.datetime64(day, "D")))
        os.makedirs(ddir, exist_ok=True)
        table = pa.table(
            {"report_id": [i for i, _ in chunk], "day": pa.array([day] * len(chunk), pa.int32()).cast(pa.date32()),
             "body": to_fields([b for _, b in chunk]) if fields else [b for _, b in chunk]},
            schema=schema,
        )
        pq.write_table(table, os.path.join(ddir, "part-00000.parquet"), row_group_size=max(1, len(chunk) // 2))
    with open(os.path.join(d, "spec.json"), "w", encoding="utf-8") as f:
        f.write(spec)
    return d, spec


def _varint(b: bytes, i: int) -> Tuple[int, int]:
    x, shift = 0, 0
    while True:
        x |= (b[i] & 0x7F) << shift
        shift += 7
        i += 1
        if b[i - 1] < 0x80:
            return x, i


def _to_varint(x: int) -> bytes:
    out = bytearray()
    while x >= 0x80:
        out.append(x & 0x7F | 0x80)
        x >>= 7
    out.append(x)
    return bytes(out)


def _pa() -> Any:
    import pyarrow as pa

    return pa


OLH_FIELDS = _pa().struct([("seed", _pa().int64(), False), ("y", _pa().int32(), False)])


def olh_fields(bodies: List[bytes]) -> Any:
    """OLH report bodies as `harmony export`'s struct<seed: int64, y: int32> (the u64 seed's and
    u32 value's bits)."""
    seeds, ys = [], []
    for b in bodies:
        seed, i = _varint(b, 2)
        y, i = _varint(b, i)
        assert i == len(b) and b[:2] == OLH_HEADER
        seeds.append(seed - (1 << 64) if seed >= 1 << 63 else seed)
        ys.append(y - (1 << 32) if y >= 1 << 31 else y)
    pa = _pa()
    return pa.StructArray.from_arrays([pa.array(seeds, pa.int64()), pa.array(ys, pa.int32())], fields=list(OLH_FIELDS))


#: An OLH report's wire header: version 1, OLH's kind byte (harmony_core::wire::ReportKind::Olh).
OLH_HEADER = b"\x01\x04"


RECORD_FIELDS = _pa().struct([("attribute", _pa().int32(), False), ("units", _pa().int64(), False)])

#: A record report's wire header (version 1, the Record kind byte) and the postcard bytes of a
#: one-attribute record up to the index (1 attribute), between index and value (Numeric, Fixed)
#: and after it (no joint report).
RECORD_HEADER, NUMERIC_FIXED, NO_JOINT = b"\x01\x0b\x01", b"\x00\x01", b"\x00"


def record_fields(bodies: List[bytes]) -> Any:
    """One-attribute fixed-point record bodies as `harmony export`'s struct<attribute: int32,
    units: int64>."""
    attributes, units = [], []
    for b in bodies:
        assert b[:3] == RECORD_HEADER, b
        j, i = _varint(b, 3)
        assert b[i:i + 2] == NUMERIC_FIXED, b
        z, i = _varint(b, i + 2)
        assert b[i:] == NO_JOINT, b
        attributes.append(j)
        units.append((z >> 1) ^ -(z & 1))
    pa = _pa()
    return pa.StructArray.from_arrays([pa.array(attributes, pa.int32()), pa.array(units, pa.int64())],
                                      fields=list(RECORD_FIELDS))


def body_bytes(column: Any) -> List[bytes]:
    """The report bytes of a body column (reports' fields encoded back)."""
    rows = column.to_pylist()
    if rows and isinstance(rows[0], dict) and "seed" in rows[0]:
        return [OLH_HEADER + _to_varint(r["seed"] % (1 << 64)) + _to_varint(r["y"] % (1 << 32)) for r in rows]
    if rows and isinstance(rows[0], dict):
        zigzag = [(r["units"] << 1) ^ (r["units"] >> 63) for r in rows]
        return [RECORD_HEADER + _to_varint(r["attribute"]) + NUMERIC_FIXED + _to_varint(z % (1 << 64)) + NO_JOINT
                for r, z in zip(rows, zigzag)]
    return [bytes(b) for b in rows]


def rel_diff(a: Any, b: Any) -> float:
    """The largest relative difference between two documents' numbers (inf when shapes differ)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return 0.0 if a == b else float("inf")
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if a == b:
            return 0.0
        return abs(a - b) / max(abs(a), abs(b))
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return max([rel_diff(x, y) for x, y in zip(a, b)], default=0.0)
    if isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys():
        return max([rel_diff(a[k], b[k]) for k in a], default=0.0)
    return 0.0 if a == b else float("inf")


def read_body(d: str) -> Any:
    """The body column of every part of an exported collection (day=*/part-*.parquet, sorted by
    path as `harmony aggregate` reads them)."""
    import glob

    import pyarrow as pa
    import pyarrow.parquet as pq

    parts = sorted(glob.glob(os.path.join(d, "day=*", "part-*.parquet")))
    return pa.concat_tables([pq.read_table(p, columns=["body"]) for p in parts]).column("body")
