"""Tasks from Python: any analysis of the protocol (the JSON of ``harmony_protocol``'s
``CreateCollection``: a schema, ε and one task) simulated on a frame through the task registry
— ``harmony simulate``'s code path — and its estimate document as tables."""

import json
from typing import Any, Dict, List, Mapping, Optional, Sequence

import numpy as np

from . import _checks as check
from . import _native
from ._errors import _error

__all__ = ["Estimates", "simulate_task"]

#: The columns every table of estimates has.
EST_COLUMNS = ("estimate", "std_error", "ci_low", "ci_high")
#: The in-domain value and interval beside them (equal to the raw ones where those are in domain).
IN_DOMAIN_COLUMNS = ("in_domain", "in_domain_ci_low", "in_domain_ci_high")


def _num(x: Optional[float]) -> float:
    return float("nan") if x is None else float(x)


def _est(row: Dict[str, List[Any]], e: Mapping[str, Any]) -> None:
    """Appends an estimate's four raw numbers (``null`` → NaN: no estimate, or post-processed)
    and its in-domain value and interval (the raw ones where the document gives none)."""
    ci = e.get("ci95") or (None, None)
    for col, v in zip(EST_COLUMNS, (e.get("estimate"), e.get("std_error"), ci[0], ci[1])):
        row.setdefault(col, []).append(_num(v))
    d = e.get("in_domain")
    dci = (d.get("ci95") or (None, None)) if d else ci
    for col, v in zip(IN_DOMAIN_COLUMNS, (d["estimate"] if d else e.get("estimate"), dci[0], dci[1])):
        row.setdefault(col, []).append(_num(v))


def _add(row: Dict[str, List[Any]], **cells: Any) -> None:
    for k, v in cells.items():
        row.setdefault(k, []).append(v)


def _tables(doc: Mapping[str, Any]) -> Dict[str, Dict[str, List[Any]]]:
    """The estimate document's tables, column by column (see ``Estimates``)."""
    task = doc.get("task")
    t: Dict[str, Dict[str, List[Any]]] = {}
    if task == "means":
        means: Dict[str, List[Any]] = {}
        freqs: Dict[str, List[Any]] = {}
        for a in doc["attributes"]:
            if a["kind"] == "numeric":
                _add(means, attribute=a["name"])
                _est(means, a)
            else:
                for c in a["categories"]:
                    _add(freqs, attribute=a["name"], category=c["label"])
                    _est(freqs, c)
        t["means"], t["frequencies"] = means, freqs
    elif task == "frequency":
        t["frequencies"] = {}
        for c in doc["categories"]:
            _add(t["frequencies"], category=c["label"])
            _est(t["frequencies"], c)
    elif task == "range":
        cdf: Dict[str, List[Any]] = {}
        for p in doc["cdf"]:
            _add(cdf, bin=p["bin"], x=p["x"])
            _est(cdf, p)
        ranges: Dict[str, List[Any]] = {}
        for r in doc["ranges"]:
            _add(ranges, low=r["range"][0], high=r["range"][1], bin_low=r["bins"][0], bin_high=r["bins"][1])
            _est(ranges, r)
        quantiles: Dict[str, List[Any]] = {}
        for q in doc["quantiles"]:
            v, iv = q.get("value") or (None, None), q.get("interval") or (None, None)
            _add(quantiles, q=q["q"], bin=q.get("bin"), value_low=_num(v[0]), value_high=_num(v[1]),
                 ci_low=_num(iv[0]), ci_high=_num(iv[1]))
        t["cdf"], t["ranges"], t["quantiles"] = cdf, ranges, quantiles
    elif task == "range2d":
        cells: Dict[str, List[Any]] = {}
        n, (x0, x1), (y0, y1) = doc["bins"], doc["x_bounds"], doc["y_bounds"]
        for iy, row in enumerate(doc["heatmap"]):
            for ix, e in enumerate(row):
                _add(cells, x_bin=ix, y_bin=iy, x_low=x0 + (x1 - x0) * ix / n, x_high=x0 + (x1 - x0) * (ix + 1) / n,
                     y_low=y0 + (y1 - y0) * iy / n, y_high=y0 + (y1 - y0) * (iy + 1) / n)
                _est(cells, e)
        rects: Dict[str, List[Any]] = {}
        for r in doc["rects"]:
            _add(rects, x_low=r["rect"][0], x_high=r["rect"][1], y_low=r["rect"][2], y_high=r["rect"][3],
                 x_bin_low=r["bins"][0], x_bin_high=r["bins"][1], y_bin_low=r["bins"][2], y_bin_high=r["bins"][3])
            _est(rects, r)
        t["cells"], t["rects"] = cells, rects
    elif task == "linear-queries":
        t["queries"] = {}
        for q in doc["queries"]:
            _add(t["queries"], query=q["name"])
            _est(t["queries"], q)
            _add(t["queries"], projected=_num(q.get("projected")))
    elif task == "heavy-hitters":
        t["items"] = {}
        for h in doc["items"]:
            _add(t["items"], code=h["code"], item=h.get("item"))
            _est(t["items"], h)
    elif task == "marginals":
        t["cells"] = {}
        for m, marginal in enumerate(doc["marginals"]):
            labels = marginal["labels"]
            for i, e in enumerate(marginal["cells"]):
                # Row-major cells, the last attribute fastest.
                idx, cell = i, []
                for ls in reversed(labels):
                    idx, r = divmod(idx, len(ls))
                    cell.append(ls[r])
                _add(t["cells"], marginal=m, attributes=",".join(marginal["attributes"]), cell=tuple(reversed(cell)))
                _est(t["cells"], e)
    elif task == "train":
        # The model's weights: no standard error (private SGD has no closed form for one).
        t["model"] = {}
        for f, w in zip(doc["features"], doc["state"]["model"]):
            _add(t["model"], feature=f)
            _add(t["model"], estimate=float(w), std_error=float("nan"), ci_low=float("nan"), ci_high=float("nan"),
                 in_domain=float(w), in_domain_ci_low=float("nan"), in_domain_ci_high=float("nan"))
    return t


class Estimates:
    """A collection's estimate document (``harmony query``'s JSON, the ``estimates`` of
    ``harmony simulate --format json``) with its tables: every table has the columns
    ``estimate, std_error, ci_low, ci_high`` (NaN where the document has ``null``: no estimate
    yet, or a post-processed number without a standard error of its own), and beside them
    ``in_domain, in_domain_ci_low, in_domain_ci_high``: the estimate and interval moved into
    their domain (frequencies on the simplex, means inside [min, max], …; biased towards the
    domain's interior), equal to the raw ones where those already lie in it. The raw estimate
    is the unbiased one, the one that merges. ``note`` says how the in-domain values were
    obtained and ``warnings`` lists the estimates too imprecise to read, with the reports that
    would make them useful; both are in the text repr.

    Tables by task: ``means`` → ``means`` (one row per numeric attribute, in its units) and
    ``frequencies`` (attribute, category); ``frequency`` → ``frequencies``; ``range`` → ``cdf``,
    ``ranges`` and ``quantiles`` (the bin interval ``value_low, value_high`` and the 95%
    interval ``ci_low, ci_high``, in the attribute's units); ``range2d`` → ``cells`` (the
    finest grid: ``x_bin, y_bin`` and their bounds in units) and ``rects`` (the rectangles
    asked, in units and in bins); ``linear-queries`` → ``queries``
    (with ``projected``); ``heavy-hitters`` → ``items``; ``marginals`` → ``cells``; ``train`` →
    ``model`` (feature, weight as ``estimate``; no standard error: private SGD has no closed form
    for one). A table is a pandas DataFrame when pandas is importable (or ``as_frame=True``), else
    a dict of arrays.

    >>> import harmony_ldp as hl
    >>> doc = {"collection": "c", "reports": 10, "epsilon": 1.0, "task": "frequency", "attribute": "sex",
    ...        "mechanism": "grr", "categories": [{"label": "F", "estimate": 0.4, "std_error": 0.1, "ci95": [0.2, 0.6]},
    ...                                          {"label": "M", "estimate": 0.6, "std_error": 0.1, "ci95": [0.4, 0.8]}]}
    >>> e = hl.Estimates(doc, as_frame=False)
    >>> e.task, e.reports, e.names, e["frequencies"]["estimate"].tolist()
    ('frequency', 10, ['frequencies'], [0.4, 0.6])
    >>> e["frequencies"]["in_domain"].tolist(), e.note, e.warnings
    ([0.4, 0.6], None, [])
    """

    def __init__(self, document: Mapping[str, Any], as_frame: Optional[bool] = None) -> None:
        if not isinstance(document, Mapping) or "task" not in document:
            raise _error("invalid input", "document", type(document).__name__, "an estimate document (a dict with 'task')")
        #: The document as the server or the CLI prints it.
        self.document: Dict[str, Any] = dict(document)
        cols = _tables(self.document)
        self._tables = {name: self._convert(c, as_frame) for name, c in cols.items()}

    @staticmethod
    def _convert(columns: Dict[str, List[Any]], as_frame: Optional[bool]) -> Any:
        floats = EST_COLUMNS + IN_DOMAIN_COLUMNS
        arrays = {k: (np.asarray(v, dtype=np.float64) if k in floats else v) for k, v in columns.items()}
        pd = check.pandas(as_frame)
        return arrays if pd is None else pd.DataFrame(arrays)

    @property
    def task(self) -> str:
        """The task's name (``means``, ``frequency``, ``range``, …)."""
        return str(self.document["task"])

    @property
    def reports(self) -> int:
        """Reports aggregated."""
        return int(self.document["reports"])

    @property
    def epsilon(self) -> float:
        """ε of one report."""
        return float(self.document["epsilon"])

    @property
    def note(self) -> Optional[str]:
        """How the in-domain values were obtained, when any differs from the raw estimate."""
        note = self.document.get("in_domain_note")
        return None if note is None else str(note)

    @property
    def warnings(self) -> List[str]:
        """One line per estimate too imprecise to read (its standard error against its scale,
        and about how many reports would bring it to 1% of the scale)."""
        return [str(w["message"]) for w in self.document.get("warnings") or []]

    @property
    def names(self) -> List[str]:
        """The names of the tables."""
        return list(self._tables)

    def table(self, name: str) -> Any:
        """One table by name (also ``estimates[name]``).

        >>> import harmony_ldp as hl
        >>> e = hl.Estimates({"collection": "c", "reports": 0, "epsilon": 1.0, "task": "linear-queries",
        ...     "mechanism": "hr", "domain_size": 4, "sigma": None, "group_reports": [], "projection_bound": None,
        ...     "queries": [{"name": "q0", "estimate": None, "std_error": None, "ci95": None, "projected": None}]},
        ...     as_frame=False)
        >>> e.table("queries")["query"], e.table("queries")["estimate"].tolist()
        (['q0'], [nan])
        """
        if name not in self._tables:
            raise _error("invalid parameter", "table", repr(name), "one of " + ", ".join(self._tables))
        return self._tables[name]

    def __getitem__(self, name: str) -> Any:
        return self.table(name)

    def __repr__(self) -> str:
        head = f"Estimates(task={self.task!r}, reports={self.reports}, tables={self.names})"
        lines = ([f"note: {self.note}"] if self.note else []) + [f"warning: {w}" for w in self.warnings]
        return "\n".join([head, *lines])


def _item_sets(items: Any) -> List[List[str]]:
    """The devices' item sets: one element per device, a string or a sequence of strings."""
    if isinstance(items, (str, bytes)) or not hasattr(items, "__len__"):
        raise _error("invalid input", "items", type(items).__name__, "a sequence with one element per device")
    sets: List[List[str]] = []
    for i, x in enumerate(items.tolist() if hasattr(items, "tolist") else items):
        if isinstance(x, str):
            sets.append([x])
        elif isinstance(x, Sequence) and not isinstance(x, bytes) and all(isinstance(v, str) for v in x):
            sets.append(list(x))
        else:
            raise _error("invalid input", f"items[{i}]", repr(x)[:80], "a string or a list of strings")
    return sets


def _simulate_items(request: Dict[str, Any], items: Any, seed: int, as_frame: Optional[bool]) -> "Estimates":
    sets = _item_sets(items)
    try:
        text = json.dumps(request)
    except (TypeError, ValueError) as e:
        raise _error("invalid parameter", "spec", f"not JSON ({e})", "a CreateCollection request") from None
    doc = _native.simulate_items(text, sets, check.integer(seed, "seed"))
    return Estimates(json.loads(doc), as_frame=as_frame)


def simulate_task(
    spec: Mapping[str, Any],
    frame: Any,
    seed: int = 1,
    *,
    query: Optional[Mapping[str, Any]] = None,
    as_frame: Optional[bool] = None,
) -> Estimates:
    """Simulates one collection of any task on a frame: ``spec`` is what an analyst sends to
    create it (the JSON of ``harmony_protocol::CreateCollection``: ``schema``, ``epsilon`` and
    ``task`` with its ``kind`` and options); every row of ``frame`` is a device that
    randomizes its record with the task's randomizer (device i with the generator of
    ``harmony simulate --seed SEED``'s device i), the reports are aggregated and estimated
    through the same registry a server runs. ``query`` asks a range task for ``ranges``
    (``[[lo, hi], …]``) and ``quantiles``. The schema may also be a ``Schema``, or left out to
    be inferred from the frame. Same seed, same numbers as the CLI and as the same devices
    sent to a server. Tasks whose devices hold one record: ``means``, ``frequency``,
    ``range``, ``marginals``, ``linear-queries`` (``train`` reports in rounds). For
    ``heavy-hitters`` the second argument is the devices' items instead of a frame: a sequence
    (a list, a pandas Series) with one element per device, a string (one item) or a sequence of
    strings (its set); no schema is needed. ``hl.simulate(spec, frame, seed=S)`` is the same call.

    >>> import numpy as np
    >>> import harmony_ldp as hl
    >>> rng = np.random.default_rng(1)
    >>> frame = {"age": rng.integers(17, 91, 20_000), "sex": rng.choice(["F", "M"], 20_000)}
    >>> spec = {"schema": [{"kind": "numeric", "name": "age", "min": 17, "max": 91},
    ...                    {"kind": "categorical", "name": "sex", "categories": ["F", "M"]}],
    ...         "epsilon": 1.0, "task": {"kind": "range", "attribute": "age", "bins": 74}}
    >>> est = hl.simulate_task(spec, frame, seed=3, query={"ranges": [[17, 54]], "quantiles": [0.5]})
    >>> est
    Estimates(task='range', reports=20000, tables=['cdf', 'ranges', 'quantiles'])
    note: in-domain values: the CDF made non-decreasing (isotonic regression) and clamped to [0, 1]; ...
    warning: age: standard error ...
    >>> r = est["ranges"].iloc[0]
    >>> bool(abs(r.estimate - np.mean(frame["age"] < 54)) < 4.42 * r.std_error)
    True

    Heavy hitters: each device holds a string (or a list of them).

    >>> words = rng.choice(["apple", "pear", "fig", "kiwi"], 40_000, p=[0.5, 0.3, 0.15, 0.05])
    >>> hh = {"epsilon": 4.0, "task": {"kind": "heavy-hitters", "top": 2, "bits": 16,
    ...                                "candidates": ["apple", "pear", "fig", "kiwi"]}}
    >>> found = hl.simulate_task(hh, list(words), seed=2)["items"]
    >>> sorted(found["item"])
    ['apple', 'pear']
    """
    from ._records import Schema

    if not isinstance(spec, Mapping):
        raise _error("invalid parameter", "spec", type(spec).__name__, "a dict (a CreateCollection request)")
    request = dict(spec)
    task = request.get("task")
    if isinstance(task, Mapping) and task.get("kind") == "heavy-hitters":
        return _simulate_items(request, frame, seed, as_frame)
    schema = request.get("schema")
    if schema is None:
        schema = Schema.infer(frame)
    elif not isinstance(schema, Schema):
        schema = Schema({"attributes": list(schema)} if isinstance(schema, Sequence) else schema)
    request["schema"] = schema.attributes
    columns, _ = schema.encode(frame)
    try:
        text = json.dumps(request)
        q = json.dumps(dict(query or {}))
    except (TypeError, ValueError) as e:
        raise _error("invalid parameter", "spec", f"not JSON ({e})", "a CreateCollection request") from None
    doc = _native.simulate_task(text, columns, check.integer(seed, "seed"), q)
    return Estimates(json.loads(doc), as_frame=as_frame)
