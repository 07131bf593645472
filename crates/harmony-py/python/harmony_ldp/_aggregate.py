"""A collection's aggregator in Python: what an engine's workers run on their partitions.

``Aggregator(spec)`` builds the collection's task from its config (the ``spec.json`` that
``harmony export`` writes beside the reports, or the JSON of ``GET …/config``), adds report
bodies (an Arrow binary column, without a copy per report; or a list of ``bytes``), saves its
state (the counters, framed with the config's fingerprint: a state of another collection does
not merge), merges saved states and estimates the document ``harmony query`` prints."""

import json
import os
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple, Union

import numpy as np

from . import _native
from ._errors import _error

__all__ = ["Aggregator", "device_reports", "read_spec", "resolve_config"]


def read_spec(path: Union[str, "os.PathLike[str]"]) -> str:
    """The config of an exported collection: ``path`` is its directory (``collection=ID``, holding
    ``spec.json``) or the ``spec.json`` file itself.

    >>> import json, os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> with open(os.path.join(d, "spec.json"), "w") as f:
    ...     _ = f.write(json.dumps(_example()[0]))
    >>> json.loads(read_spec(d))["task"]["kind"]
    'frequency'
    """
    p = os.fspath(path)
    if os.path.isdir(p):
        p = os.path.join(p, "spec.json")
    with open(p, encoding="utf-8") as f:
        return f.read()


def resolve_config(request: Mapping[str, Any], collection: str = "local") -> Dict[str, Any]:
    """The config a server publishes for a collection ``request`` (a ``CreateCollection``: schema,
    ε, task) under the id ``collection``: every choice written out (the ``spec`` of
    ``Aggregator`` and of ``harmony_ldp.spark.estimate``).

    >>> spec = resolve_config({"schema": [{"kind": "categorical", "name": "c", "categories": ["a", "b"]}],
    ...                        "epsilon": 1.0, "task": {"kind": "frequency", "attribute": "c"}}, "c1")
    >>> spec["id"], spec["task"]["kind"]
    ('c1', 'frequency')
    """
    return json.loads(_native.resolve_config(json.dumps(dict(request)), str(collection)))


def device_reports(config: Mapping[str, Any], frame: Any, max_epsilon: float = 10.0) -> List[Tuple[str, bytes]]:
    """What the devices of ``frame``'s rows would send for the collection ``config``: ``(report
    id, report bytes)`` per row, randomized here with the OS CSPRNG after the config is checked
    against a device policy of ``max_epsilon`` (as ``Device.submit`` does, without the network).
    For heavy hitters, ``frame`` is the devices' items.

    >>> spec, _ = _example()
    >>> reports = device_reports(spec, {"c": ["a", "b", "b"]})
    >>> len(reports), len(reports[0][0])
    (3, 32)
    """
    from ._records import Schema
    from ._tasks import _item_sets

    device = _native.NativeDeviceTask(json.dumps(dict(config)), json.dumps({"max_epsilon": float(max_epsilon)}))
    if config["task"]["kind"] == "heavy-hitters":
        items = device.item_sets(_item_sets(frame))
    else:
        columns, _ = Schema({"attributes": config["schema"]}).encode(frame)
        items = device.records(columns)
    return [(i, bytes.fromhex(r)) for i, r in items]


def _example() -> Tuple[Dict[str, Any], List[bytes]]:
    """A frequency collection over ``c`` ∈ {a, b} (ε = 1) and 1,000 of its devices' reports (600 a)."""
    spec = resolve_config({"schema": [{"kind": "categorical", "name": "c", "categories": ["a", "b"]}],
                           "epsilon": 1.0, "task": {"kind": "frequency", "attribute": "c"}}, "c1")
    return spec, [body for _, body in device_reports(spec, {"c": ["a"] * 600 + ["b"] * 400})]


def _spec_text(spec: Union[str, Mapping[str, Any]]) -> str:
    if isinstance(spec, Mapping):
        return json.dumps(spec)
    if isinstance(spec, str):
        return spec
    raise _error("invalid parameter", "spec", type(spec).__name__, "the collection's config as a JSON string or a dict")


class Aggregator:
    """A mergeable accumulator of one collection's reports.

    >>> spec, bodies = _example()                     # a config and 1,000 reports
    >>> first, second = Aggregator(spec), Aggregator(spec)
    >>> first.add(bodies[:300]), second.add(bodies[300:])
    (300, 700)
    >>> first.merge(second.save())                     # as an engine merges partitions
    >>> doc = first.estimate()
    >>> doc["reports"], [c["label"] for c in doc["categories"]]
    (1000, ['a', 'b'])
    """

    def __init__(self, spec: Union[str, Mapping[str, Any]]) -> None:
        self._native = _native.NativeAggregator(_spec_text(spec))

    def add_arrow(self, column: Any) -> int:
        """Adds every report of an Arrow binary column (``pyarrow`` ``Array`` or
        ``ChunkedArray`` of ``binary``, ``large_binary`` or ``binary_view``, or a dictionary of
        them, as ``harmony export`` writes repeating reports, or the structs of two integer
        fields it writes distinct OLH reports and one-attribute records as), each validated as
        the server does; returns how many. A null or a report of another collection is an error
        naming its row, and nothing of that chunk is added.

        >>> import pyarrow as pa
        >>> spec, bodies = _example()
        >>> Aggregator(spec).add_arrow(pa.array(bodies, pa.binary()))
        1000
        """
        import pyarrow as pa

        chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
        n = 0
        for arr in chunks:
            if arr.null_count:
                raise _error("invalid input", "body", f"{arr.null_count} nulls", "a report body in every row")
            t = arr.type
            if pa.types.is_struct(t):
                n += self._add_fields(arr)
                continue
            if pa.types.is_dictionary(t):
                # `harmony export` writes repeating reports as dictionary<int32, binary>.
                arr = arr.dictionary_decode()
                t = arr.type
            if pa.types.is_binary_view(t) if hasattr(pa.types, "is_binary_view") else False:
                arr, t = arr.cast(pa.large_binary()), pa.large_binary()
            if pa.types.is_large_binary(t):
                dtype = np.int64
            elif pa.types.is_binary(t):
                dtype = np.int32
            else:
                raise _error("invalid input", "body", str(t), "an Arrow binary column of report bodies")
            _, offsets, data = arr.buffers()[:3]
            offs = np.frombuffer(offsets, dtype=dtype)[arr.offset : arr.offset + len(arr) + 1]
            body = np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, np.uint8)
            n += self._native.add_packed(offs.astype(np.int64, copy=False), body)
        return n

    def _add_fields(self, arr: Any) -> int:
        # `harmony export` writes distinct OLH reports as struct<seed: int64, y: int32> and
        # one-attribute fixed-point records as struct<attribute: int32, units: int64>.
        import pyarrow as pa

        names = [arr.type.field(i).name for i in range(arr.type.num_fields)]
        layouts = {
            ("seed", "y"): ((pa.int64(), pa.int32()), self._native.add_olh_fields),
            ("attribute", "units"): ((pa.int32(), pa.int64()), self._native.add_record_fields),
        }
        key = next((k for k in layouts if sorted(k) == sorted(names)), None)
        if key is None:
            raise _error("invalid input", "body", str(arr.type),
                         "struct<seed: int64, y: int32> or struct<attribute: int32, units: int64> (reports' fields)")
        cols = dict(zip(names, arr.flatten()))  # flatten applies the array's offset
        types, add = layouts[key]
        for name, ty in zip(key, types):
            if cols[name].type != ty or cols[name].null_count:
                got = f"{cols[name].type}, {cols[name].null_count} nulls"
                raise _error("invalid input", f"body.{name}", got, f"{ty} without nulls")
        return add(*(cols[name].to_numpy(zero_copy_only=True) for name in key))

    def add(self, reports: Iterable[bytes]) -> int:
        """Adds report bodies given as ``bytes`` (validated as the server does; all or nothing);
        returns how many.

        >>> spec, bodies = _example()
        >>> agg = Aggregator(spec)
        >>> agg.add(bodies), agg.count
        (1000, 1000)
        """
        items = [bytes(r) for r in reports]
        offs = np.zeros(len(items) + 1, dtype=np.int64)
        np.cumsum([len(r) for r in items], out=offs[1:])
        return self._native.add_packed(offs, np.frombuffer(b"".join(items), dtype=np.uint8))

    def save(self) -> bytes:
        """The saved state: bytes to ship to wherever the states are merged (the counters, framed
        with the config's fingerprint).

        >>> spec, bodies = _example()
        >>> agg = Aggregator(spec)
        >>> _ = agg.add(bodies)
        >>> agg.save()[:4]
        b'HST1'
        """
        return self._native.save()

    def merge(self, state: bytes) -> None:
        """Merges a state ``save`` returned (of the same collection; another's is refused).

        >>> spec, bodies = _example()
        >>> a, b = Aggregator(spec), Aggregator(spec)
        >>> _ = b.add(bodies)
        >>> a.merge(b.save()); a.count
        1000
        """
        self._native.merge(bytes(state))

    @property
    def count(self) -> int:
        """Reports added here and through merged states."""
        return self._native.count

    def estimate(self, query: Optional[str] = None) -> Dict[str, Any]:
        """The estimate document (as ``harmony query --format json`` prints it); ``query`` is
        ``ranges=LO:HI,…&quantiles=Q,…`` for range collections.

        >>> spec, bodies = _example()
        >>> agg = Aggregator(spec)
        >>> _ = agg.add(bodies)
        >>> doc = agg.estimate()
        >>> doc["task"], doc["reports"], abs(doc["categories"][0]["estimate"] - 0.6) < 5 * doc["categories"][0]["std_error"]
        ('frequency', 1000, True)
        """
        return json.loads(self._native.estimate(query or ""))
