"""Records: schemas (from a dict, a TOML schema file or inferred from a frame) and the seeded
multi-attribute simulation of ``harmony simulate`` on a DataFrame."""

import json
import math
import os
import warnings
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import _checks as check
from . import _native
from ._errors import _error

__all__ = ["STRATEGY_NAMES", "Schema", "simulate"]

#: The multi-attribute strategies, by name.
STRATEGY_NAMES: Tuple[str, ...] = tuple(_native.STRATEGY_NAMES)

Frame = Any  # a pandas DataFrame, or a mapping of column name -> 1-D array-like


def _is_missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _labels(column: Any) -> np.ndarray:
    """A column as labels (an object array of stripped strings; ``?`` for missing cells: None,
    NaN, pandas' NA, empty), as the CLI reads CSV fields. Vectorised with pandas."""
    try:
        import pandas as pd
    except ImportError:
        out = [None if _is_missing(v) else str(v).strip() for v in column]
        return np.array([t if t else "?" for t in out], dtype=object)
    ser = column if isinstance(column, pd.Series) else pd.Series(list(column) if not hasattr(column, "dtype") else column)
    # Strip the distinct values only (hash-based factorize), then expand.
    codes, uniques = pd.factorize(ser.astype(str))
    stripped = np.array([u.strip() or "?" for u in uniques] + ["?"], dtype=object)
    out = stripped[codes]  # code -1 (none here) would pick the trailing "?"
    out[np.asarray(ser.isna())] = "?"
    return out


def _missing_numbers(column: Any, x: np.ndarray) -> np.ndarray:
    """Where a numeric column's cell is missing (None, NaN, pandas' NA, empty, ``?``), as opposed
    to text that is not a number."""
    a = np.asarray(column)
    if a.dtype.kind in "iuf":
        return np.isnan(x)
    try:
        import pandas as pd
        na = np.asarray(pd.isna(pd.Series(a, dtype=object)), dtype=bool)
    except ImportError:
        na = np.fromiter((_is_missing(v) for v in a), dtype=bool, count=len(a))
    blank = np.fromiter((str(v).strip() in ("", "?") for v in a), dtype=bool, count=len(a))
    return np.isnan(x) & (na | blank)


def _codes(labels: np.ndarray, categories: List[str]) -> np.ndarray:
    """Category codes of ``labels`` (-1 for a label not in ``categories``)."""
    try:
        import pandas as pd
    except ImportError:
        index = {c: i for i, c in enumerate(categories)}
        return np.fromiter((index.get(t, -1) for t in labels), dtype=np.int64, count=len(labels))
    return np.asarray(pd.Index(categories, dtype=object).get_indexer(labels), dtype=np.int64)


def _numbers(column: Any) -> np.ndarray:
    """A column as float64, NaN where a cell is missing or not a number."""
    a = np.asarray(column)
    if a.dtype.kind in "iuf":
        return a.astype(np.float64)
    out = np.full(len(a), np.nan)
    for i, v in enumerate(a):
        try:
            out[i] = float(str(v).strip()) if not _is_missing(v) else np.nan
        except ValueError:
            pass
    return out


class Schema:
    """The ordered attributes of a record — numeric ones with their public ``[min, max]``,
    categorical ones with their ordered labels — plus the collection defaults of a schema file
    (``epsilon``, ``strategies``, ``numeric_mechanism``, ``categorical_mechanism``, ``invalid``,
    ``bins``).

    Build one from a dict, either the structure of a schema file or the short form
    ``{column: (min, max) or [labels]}``; from a TOML schema file (``Schema.from_toml``, the
    format of the CLI's ``--schema``); or infer it from a frame (``Schema.infer``).

    >>> import harmony_ldp as hl
    >>> s = hl.Schema({"age": (17, 90), "sex": ["Female", "Male"]})
    >>> s
    Schema(age: numeric [17.0, 90.0], sex: 2 categories)
    >>> s.names
    ['age', 'sex']
    >>> hl.Schema({"attributes": [{"name": "x", "kind": "numeric", "min": 0, "max": 1}], "epsilon": [1.0]}).epsilon
    [1.0]
    >>> hl.Schema({"sex": ["Male"]})
    Traceback (most recent call last):
    ...
    harmony_ldp.HarmonyError: invalid parameter: categories is "sex: 1 categories", expected at least 2 categories
    """

    def __init__(self, spec: Mapping[str, Any]) -> None:
        if isinstance(spec, _native.NativeSchema):
            self._s = spec
        else:
            self._s = _native.NativeSchema.from_json(json.dumps(self._file_form(spec)))
        self._file: Dict[str, Any] = json.loads(self._s.to_json())

    @staticmethod
    def _file_form(spec: Mapping[str, Any]) -> Dict[str, Any]:
        if not isinstance(spec, Mapping):
            raise _error("invalid parameter", "schema", f"a {type(spec).__name__}", "a dict")
        if isinstance(spec.get("attributes"), list):
            return dict(spec)
        attributes = []
        for name, v in spec.items():
            if isinstance(v, tuple) and len(v) == 2:
                attributes.append({"name": str(name), "kind": "numeric", "min": check.real(v[0], f"{name} min"),
                                   "max": check.real(v[1], f"{name} max")})
            elif isinstance(v, (list, np.ndarray)) or (isinstance(v, tuple) and len(v) != 2):
                attributes.append({"name": str(name), "kind": "categorical", "categories": [str(c) for c in v]})
            else:
                raise _error("invalid parameter", f"attribute {name!r}", repr(v),
                             "(min, max) for a numeric attribute or a list of labels for a categorical one")
        return {"attributes": attributes}

    @classmethod
    def from_dict(cls, spec: Mapping[str, Any]) -> "Schema":
        """The same as ``Schema(spec)``.

        >>> import harmony_ldp as hl
        >>> hl.Schema.from_dict({"x": (0, 1)}).names
        ['x']
        """
        return cls(spec)

    @classmethod
    def from_toml(cls, path: Union[str, "os.PathLike[str]"]) -> "Schema":
        """Reads a TOML schema file (the format of ``examples/adult.toml`` and the CLI's
        ``--schema``), with the CLI's parser and validation.

        >>> import harmony_ldp as hl, tempfile, os
        >>> text = 'epsilon = [1.0]\\n[[attributes]]\\nname = "x"\\nkind = "numeric"\\nmin = 0\\nmax = 1\\n'
        >>> with tempfile.TemporaryDirectory() as d:
        ...     p = os.path.join(d, "s.toml")
        ...     _ = open(p, "w").write(text)
        ...     hl.Schema.from_toml(p).to_dict()["epsilon"]
        [1.0]
        """
        with open(path, encoding="utf-8") as f:
            text = f.read()
        return cls(_native.NativeSchema.from_toml(text))

    @classmethod
    def infer(cls, frame: Frame, max_categories: int = 100, skip: Sequence[str] = ()) -> "Schema":
        """Infers a schema as ``harmony schema infer`` does: a column is numeric when every
        cell is a finite number (bounds = its min and max), else categorical (sorted labels,
        ``?`` for missing cells). Columns with one value, or more than ``max_categories``
        labels, are left out (with a warning). The bounds and labels come from the data, so
        they are not private: take them from public knowledge in a real collection.

        >>> import harmony_ldp as hl, warnings
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")
        ...     s = hl.Schema.infer({"age": [20, 35, 50], "sex": ["F", None, "M"]})
        >>> s.attributes[1]["categories"]
        ['?', 'F', 'M']
        """
        max_categories = check.integer(max_categories, "max_categories")
        attributes: List[Dict[str, Any]] = []
        notes: List[str] = []
        for name in _columns(frame):
            if name in skip:
                continue
            col = frame[name]
            labels = _labels(col)
            nums = _numbers(col)
            if np.isfinite(nums).all() and len(nums):
                lo, hi = float(nums.min()), float(nums.max())
                if lo < hi:
                    attributes.append({"name": str(name), "kind": "numeric", "min": lo, "max": hi})
                else:
                    notes.append(f"column {name!r} is constant ({lo}); left out")
                continue
            labels = sorted(set(labels.tolist()))
            if len(labels) > max_categories:
                notes.append(f"column {name!r} has {len(labels)} labels (> max_categories {max_categories}); left out")
            elif len(labels) < 2:
                notes.append(f"column {name!r} has a single label; left out")
            else:
                attributes.append({"name": str(name), "kind": "categorical", "categories": labels})
        for n in notes:
            warnings.warn(n, stacklevel=2)
        warnings.warn("numeric bounds and category lists were learned from the raw data: they are not private. "
                      "In a real collection, take them from public knowledge.", stacklevel=2)
        return cls({"attributes": attributes})

    @property
    def attributes(self) -> List[Dict[str, Any]]:
        """The attributes in order, as dicts (``name``, ``kind``, ``min``/``max`` or ``categories``)."""
        return [dict(a) for a in self._file["attributes"]]

    @property
    def names(self) -> List[str]:
        """The attribute names in order."""
        return [a["name"] for a in self._file["attributes"]]

    @property
    def epsilon(self) -> Optional[List[float]]:
        """The schema file's default privacy budgets, if any."""
        return self._file.get("epsilon")

    @property
    def strategies(self) -> Optional[List[str]]:
        """The schema file's default strategies, if any."""
        return self._file.get("strategies")

    @property
    def invalid(self) -> str:
        """What to do with a value outside the schema: ``error``, ``skip`` the row or ``clamp``."""
        return self._file.get("invalid", "error")

    def to_dict(self) -> Dict[str, Any]:
        """The schema file's structure (``Schema(s.to_dict())`` is ``s`` again).

        >>> import harmony_ldp as hl
        >>> hl.Schema({"x": (0, 1)}).to_dict()
        {'invalid': 'error', 'attributes': [{'kind': 'numeric', 'name': 'x', 'min': 0.0, 'max': 1.0}]}
        """
        return json.loads(self._s.to_json())

    def to_toml(self) -> str:
        """The schema as a TOML schema file for the CLI's ``--schema``.

        >>> import harmony_ldp as hl
        >>> print(hl.Schema({"x": (0, 1)}).to_toml().strip().splitlines()[0])
        invalid = "error"
        """
        return self._s.to_toml()

    def encode(self, frame: Frame) -> Tuple[List[np.ndarray], Dict[str, int]]:
        """The frame's columns in schema order as the native simulation reads them (float64
        numbers, int64 category codes; missing categorical cells are ``?``), with the schema's
        ``invalid`` policy applied; and the counts ``{"rows", "skipped", "clamped"}``. An
        attribute's ``missing`` policy applies first: ``"report"`` sets a missing number to the
        range's midpoint and appends its presence column (0 present, 1 missing) after it, or
        gives a missing label the category ``(missing)``; ``{"impute": v}`` fills in v. A bad
        cell under ``invalid = "error"`` raises a ``HarmonyError`` naming the row, the column,
        the value and what was expected.

        >>> import harmony_ldp as hl
        >>> cols, counts = hl.Schema({"age": (17, 90), "sex": ["F", "M"]}).encode({"age": [20, 30], "sex": ["M", "F"]})
        >>> cols[1].tolist(), counts
        ([1, 0], {'rows': 2, 'skipped': 0, 'clamped': 0})
        >>> hl.Schema({"age": (17, 90)}).encode({"age": [20, 300]})
        Traceback (most recent call last):
        ...
        harmony_ldp.HarmonyError: invalid input: row 1, column "age" is 300.0, expected a number in [17, 90]
        """
        n = _length(frame)
        keep = np.ones(n, dtype=bool)
        first_bad: Optional[Tuple[int, int, Any, str]] = None  # (row, attribute, value, expected)
        clamped = 0
        columns: List[np.ndarray] = []
        for j, a in enumerate(self._file["attributes"]):
            if a["name"] not in _columns(frame):
                raise _error("invalid input", "frame", f"a frame without column {a['name']!r}",
                             f"the columns {', '.join(self.names)}")
            col = frame[a["name"]]
            if len(col) != n:
                raise _error("invalid input", f"column {a['name']!r}", f"{len(col)} rows", f"{n} rows")
            policy = a.get("missing", "error")
            presence = None
            if a["kind"] == "numeric":
                x = _numbers(col)
                lo, hi = a["min"], a["max"]
                # Missing values under the attribute's policy: reported (the midpoint, plus a
                # presence column after it) or imputed; "error" leaves them bad.
                miss = _missing_numbers(col, x)
                if policy == "report":
                    x = np.where(miss, (lo + hi) / 2, x)
                    presence = miss.astype(np.int64)
                elif isinstance(policy, Mapping):
                    x = np.where(miss, float(policy["impute"]), x)
                bad = ~((x >= lo) & (x <= hi))
                expected = f"a number in [{_fmt(lo)}, {_fmt(hi)}]"
                if self.invalid == "clamp":
                    fixable = bad & np.isfinite(x)
                    clamped += int((fixable & keep).sum())
                    x = np.where(fixable, np.clip(x, lo, hi), x)
                    bad = bad & ~fixable
                raw = np.asarray(col)
                columns.append(np.where(bad, lo, x))
            else:
                labels = a["categories"]
                raw = _labels(col)
                codes = _codes(raw, labels)
                # A missing cell reads "?": the category "(missing)" (added last) or the imputed label.
                if policy == "report":
                    codes = np.where((codes < 0) & (raw == "?"), len(labels), codes)
                elif isinstance(policy, Mapping):
                    codes = np.where((codes < 0) & (raw == "?"), labels.index(policy["impute"]), codes)
                bad = codes < 0
                expected = "one of " + ", ".join(f'"{c}"' for c in labels[:8]) + (
                    f", … ({len(labels)} labels)" if len(labels) > 8 else "")
                columns.append(np.where(bad, 0, codes))
            if presence is not None:
                columns.append(presence)
            if bad.any():
                i = int(np.argmax(bad))
                if first_bad is None or i < first_bad[0]:
                    v = raw[i]
                    first_bad = (i, j, float(v) if a["kind"] == "numeric" and not isinstance(v, str) else v, expected)
                keep &= ~bad
        if first_bad is not None and self.invalid == "error":
            i, j, v, expected = first_bad
            shown = f'"{v}"' if isinstance(v, str) else v
            raise _error("invalid input", f'row {i}, column "{self.names[j]}"', shown, expected)
        if not keep.all():
            columns = [c[keep] for c in columns]
        rows = int(keep.sum())
        if rows == 0:
            raise _error("invalid input", "frame", f"{n} rows, none usable", "at least one row the schema accepts")
        return columns, {"rows": rows, "skipped": n - rows, "clamped": clamped}

    def __repr__(self) -> str:
        parts = []
        for a in self._file["attributes"]:
            if a["kind"] == "numeric":
                parts.append(f"{a['name']}: numeric [{a['min']}, {a['max']}]")
            else:
                parts.append(f"{a['name']}: {len(a['categories'])} categories")
        return f"Schema({', '.join(parts)})"


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(x)


def _columns(frame: Frame) -> List[str]:
    cols = getattr(frame, "columns", None)
    if cols is not None:
        return [str(c) for c in cols]
    if isinstance(frame, Mapping):
        return [str(c) for c in frame.keys()]
    raise _error("invalid input", "frame", f"a {type(frame).__name__}", "a pandas DataFrame or a dict of columns")


def _length(frame: Frame) -> int:
    names = _columns(frame)
    return len(frame[names[0]]) if names else 0


def simulate(
    frame: Frame,
    schema: Optional[Union[Schema, Mapping[str, Any], str, "os.PathLike[str]"]] = None,
    *,
    epsilon: Optional[Union[float, Sequence[float]]] = None,
    strategy: Optional[Union[str, Sequence[str]]] = None,
    numeric_mechanism: Optional[str] = None,
    categorical_mechanism: Optional[str] = None,
    k: Union[str, int] = "optimal",
    runs: int = 1,
    seed: int = 1,
    as_frame: Optional[bool] = None,
):
    """Collects every row of ``frame`` as a device would — each row randomized into one
    ε-LDP report of the whole record by a multi-attribute strategy (``split``, ``harmony``,
    ``sample-k``) — aggregates, and returns every attribute's estimate with its standard error
    and 95% CI beside the truth: ``harmony simulate`` from Python.

    ``schema`` is a ``Schema``, a dict, a TOML file path, or None (inferred, with a warning).
    ``epsilon`` and ``strategy`` (one or several) default to the schema file's, else
    ε ∈ {0.5, 1, 2, 4} and all three strategies; ``numeric_mechanism``,
    ``categorical_mechanism`` and ``k`` (``optimal``, ``paper`` or a number) as the CLI's
    options. Each (ε, strategy) cell is the ``means`` task the registry builds, as in
    ``harmony simulate``: run r is seeded like the CLI's run r, so for the same seed the
    estimates are the CLI's, bit for bit (and run 0's those of a server fed
    ``harmony submit --simulate-devices --seed SEED``).
    The GIL is released while the runs go (on all cores).

    Returns a long table, one row per (ε, strategy, run, attribute, category): the columns
    ``epsilon, strategy, k, numeric_mechanism, categorical_mechanism, run, attribute, category``
    (None for numeric attributes), ``truth, estimate, std_error, ci_low, ci_high`` — numeric
    attributes as means in their units, categorical ones as frequencies. A DataFrame when pandas
    is installed (``attrs`` holds the row counts), else a dict of columns.

    Called as ``simulate(spec, frame, seed=S)`` with a task request (a dict with ``task``),
    it is ``simulate_task``: one collection of any task, its ``Estimates``.

    >>> import numpy as np
    >>> import harmony_ldp as hl
    >>> rng = np.random.default_rng(1)
    >>> frame = {"age": rng.integers(17, 91, 20_000), "sex": rng.choice(["Female", "Male"], 20_000)}
    >>> schema = hl.Schema({"age": (17, 90), "sex": ["Female", "Male"]})
    >>> t = hl.simulate(frame, schema, epsilon=2.0, strategy="sample-k", seed=3, as_frame=False)
    >>> t["attribute"], t["category"]
    (['age', 'sex', 'sex'], [None, 'Female', 'Male'])
    >>> bool(np.all(np.abs(t["estimate"] - t["truth"]) < 4.42 * t["std_error"]))
    True
    """
    if isinstance(frame, Mapping) and isinstance(frame.get("task"), Mapping):
        # simulate(spec, frame, seed=S): one collection of any task (see simulate_task).
        from ._tasks import simulate_task

        return simulate_task(frame, schema, seed, as_frame=as_frame)
    if schema is None:
        schema = Schema.infer(frame)
    elif isinstance(schema, (str, os.PathLike)):
        schema = Schema.from_toml(schema)
    elif not isinstance(schema, Schema):
        schema = Schema(schema)
    eps = None if epsilon is None else [check.real(e, "epsilon") for e in (
        [epsilon] if not isinstance(epsilon, (list, tuple, np.ndarray)) else epsilon)]
    strategies = None if strategy is None else [check.name(s, "strategy") for s in (
        [strategy] if isinstance(strategy, str) else strategy)]
    if isinstance(k, bool) or not isinstance(k, (str, int)):
        raise _error("invalid parameter", "k", repr(k), "optimal, paper or a positive integer")
    num = None if numeric_mechanism is None else check.name(numeric_mechanism, "numeric_mechanism")
    cat = None if categorical_mechanism is None else check.name(categorical_mechanism, "categorical_mechanism")
    columns, counts = schema.encode(frame)
    table = _native.simulate(schema._s, columns, eps, strategies, num, cat, str(k),
                             check.integer(runs, "runs", 1, 1 << 32), check.integer(seed, "seed"))
    pd = check.pandas(as_frame)
    if pd is None:
        return table
    df = pd.DataFrame(table)
    df.attrs.update(counts)
    return df
