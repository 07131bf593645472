"""Planning before collecting: ``harmony plan`` from Python."""

import math
from typing import Any, Dict, List, Optional, Sequence, Union

from . import _checks as check
from ._errors import _error
from ._records import Schema
from ._tasks import Estimates

__all__ = ["plan"]


def plan(
    schema: Schema,
    *,
    users: Optional[int] = None,
    epsilon: Union[float, Sequence[float], None] = None,
    target_error: Optional[float] = None,
    categorical_mechanism: Optional[str] = None,
    as_frame: Optional[bool] = None,
) -> Any:
    """Predicts, before any data is collected, each attribute's worst-case standard error under
    every strategy and mechanism ``harmony plan`` compares (split, harmony, sample-k with
    their mechanisms; plus ``categorical_mechanism`` when given), at ``users`` users and each
    ``epsilon`` (default: the schema's, else 1); with ``target_error`` also the users each
    choice needs so that every attribute meets it. One row per (ε, choice, attribute):
    ``epsilon, strategy, numeric_mechanism, categorical_mechanism, k, attribute, kind,
    variance_per_user, std_error`` (on [-1, 1] for numeric attributes, of a frequency for
    categorical ones), ``std_error_units`` (numeric, in the attribute's units),
    ``users_needed``, and ``recommended`` (the choice with the least mean standard error at
    ``users``, or with ``target_error`` the fewest users needed, per ε). The same numbers as
    ``harmony plan --format json``. A DataFrame when pandas imports, else a dict of lists.

    >>> import harmony_ldp as hl
    >>> s = hl.Schema.from_dict({"attributes": [
    ...     {"kind": "numeric", "name": "age", "min": 17, "max": 91},
    ...     {"kind": "categorical", "name": "sex", "categories": ["F", "M"]}]})
    >>> p = hl.plan(s, users=48_842, epsilon=1.0, as_frame=False)
    >>> best = [i for i, r in enumerate(p["recommended"]) if r]
    >>> sorted({p["strategy"][i] for i in best})
    ['sample-k']
    >>> round(p["std_error_units"][best[0]], 2)  # age's SE in years
    0.52
    """
    if not isinstance(schema, Schema):
        raise _error("invalid parameter", "schema", type(schema).__name__, "a harmony_ldp.Schema")
    if users is None and target_error is None:
        raise _error("invalid parameter", "users", "None", "users and/or target_error")
    n = None if users is None else check.integer(users, "users", 1)
    target = None if target_error is None else check.real(target_error, "target_error")
    if target is not None and not (target > 0 and math.isfinite(target)):
        raise _error("invalid parameter", "target_error", target, "a finite number > 0")
    if epsilon is None:
        epsilons = list(schema.epsilon or [1.0])
    elif isinstance(epsilon, Sequence):
        epsilons = [check.real(e, "epsilon") for e in epsilon]
    else:
        epsilons = [check.real(epsilon, "epsilon")]
    cols: Dict[str, List[Any]] = {k: [] for k in (
        "epsilon", "strategy", "numeric_mechanism", "categorical_mechanism", "k", "attribute", "kind",
        "variance_per_user", "std_error", "std_error_units", "users_needed", "recommended")}
    attrs = schema.attributes
    for eps in epsilons:
        choices = schema._s.plan(eps, categorical_mechanism)
        score = []
        for strategy, num, cat, k, variances in choices:
            needed = None if target is None else math.ceil(max(variances) / target**2)
            ses = [math.nan if n is None else math.sqrt(v / n) for v in variances]
            score.append(needed if needed is not None else sum(ses) / len(ses))
            for a, v, se in zip(attrs, variances, ses):
                numeric = a["kind"] == "numeric"
                row = dict(epsilon=eps, strategy=strategy, numeric_mechanism=num, categorical_mechanism=cat, k=k,
                           attribute=a["name"], kind=a["kind"], variance_per_user=v, std_error=se,
                           std_error_units=se * 0.5 * (a["max"] - a["min"]) if numeric else math.nan,
                           users_needed=needed)
                for key, value in row.items():
                    cols[key].append(value)
        best = min(range(len(score)), key=lambda i: score[i])
        cols["recommended"].extend(i == best for i in range(len(choices)) for _ in attrs)
    return Estimates._convert(cols, as_frame)
