"""Training from Python: a frame's rows as the devices of a ``train`` collection, in order,
round by round, through the task a server runs (``harmony simulate --task train``'s code path:
device i randomizes its gradient with the generator of ``--seed``'s device i), and the fitted
model with ``predict``."""

import json
from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np

from . import _checks as check
from . import _native
from ._errors import _error
from ._tasks import Estimates

__all__ = ["Model", "train"]


class Model:
    """A linear model trained under LDP (``train`` returns one): ``coef_`` the weights in the
    order of ``features`` (intercept first), on the model's inputs (numeric attributes scaled to
    ``[-1, 1]`` by their public bounds, categorical ones one-hot). ``predict`` gives labels for a
    classifier (the positive label or the other one for a two-label target, else ``True`` for the
    positive class) and values in the target's units for ``linear``; ``decision_function`` the
    margins. ``estimates`` is the estimate document (the round state: ``round``, ``done``, the
    step, how many gradients each round took), ``config`` the published config (the spec with
    every choice written out).

    >>> import numpy as np
    >>> import harmony_ldp as hl
    >>> rng = np.random.default_rng(3)
    >>> x = rng.uniform(-1, 1, 20_000)
    >>> frame = {"x": x, "y": np.where(x + rng.normal(0, 0.3, 20_000) > 0, "yes", "no")}
    >>> m = hl.train(frame, target="y", model="logistic", epsilon=4.0, seed=1)
    >>> m.features
    ['(intercept)', 'x']
    >>> bool(m.coef_[1] > 0), list(m.predict({"x": np.array([-0.9, 0.9])}))
    (True, ['no', 'yes'])
    >>> bool(m.score(frame) < 0.25)
    True
    """

    def __init__(self, config: Mapping[str, Any], document: Mapping[str, Any]) -> None:
        self.config: Dict[str, Any] = dict(config)
        self.estimates = Estimates(document, as_frame=False)
        state = document["state"]
        #: The feature names, intercept first.
        self.features: List[str] = list(document["features"])
        #: The weights, one per feature (the model to use: the tail average with ``noise``).
        self.coef_: np.ndarray = np.asarray(state["model"], dtype=np.float64)
        spec = self.config["task"]
        self._task: str = spec["task"]
        self._target: str = spec["target"]
        self._attrs = {a["name"]: a for a in self.config["schema"]}
        target = self._attrs[self._target]
        self._labels: Optional[List[str]] = None
        if target["kind"] == "categorical" and self._task != "linear":
            cats = list(target["categories"])
            positive = spec.get("positive") or cats[1]
            if len(cats) == 2:
                self._labels = [c for c in cats if c != positive] + [positive]

    def __repr__(self) -> str:
        st = self.estimates.document["state"]
        return f"Model(task={self._task!r}, target={self._target!r}, features={len(self.features)}, round={st['round']}, done={st['done']})"

    def _encoded(self, frame: Any, need_target: bool = False) -> Tuple[np.ndarray, np.ndarray]:
        """The model's inputs and targets (±1 or ``[-1, 1]``) of the rows of ``frame`` the
        schema's ``invalid`` policy keeps; without the target column, a placeholder target."""
        from ._records import Schema, _columns

        names = _columns(frame)
        if self._target not in names:
            if need_target:
                raise _error("invalid input", "frame", f"no column {self._target!r}", "the target column to score against")
            n = len(np.asarray(frame[names[0]])) if names else 0
            t = self._attrs[self._target]
            fill = np.full(n, t["categories"][0], dtype=object) if t["kind"] == "categorical" else np.full(n, float(t["min"]))
            frame = {**{k: frame[k] for k in names}, self._target: fill}
        columns, _ = Schema({"attributes": self.config["schema"]}).encode(frame)
        return _native.train_features(json.dumps(self.config), columns)

    def decision_function(self, frame: Any) -> np.ndarray:
        """The margins ``x·w`` of every row (on the target's ``[-1, 1]`` scale for ``linear``).

        >>> import numpy as np
        >>> import harmony_ldp as hl
        >>> x = np.random.default_rng(0).uniform(-1, 1, 5000)
        >>> schema = [{"kind": "numeric", "name": "x", "min": -1, "max": 1},
        ...           {"kind": "categorical", "name": "y", "categories": ["no", "yes"]}]
        >>> frame = {"x": x, "y": np.where(x > 0, "yes", "no")}
        >>> m = hl.train(frame, target="y", epsilon=8.0, schema=schema, seed=1)
        >>> m.decision_function({"x": np.array([-1.0, 1.0])}).shape
        (2,)
        """
        return self._encoded(frame)[0] @ self.coef_

    def predict(self, frame: Any) -> np.ndarray:
        """Predictions for every row of ``frame`` (a DataFrame or a dict of columns with the
        schema's feature columns; the target column is not needed): labels or ``True``/``False``
        for a classifier, values in the target's units for ``linear``.

        >>> import numpy as np
        >>> import harmony_ldp as hl
        >>> x = np.random.default_rng(0).uniform(-1, 1, 5000)
        >>> schema = [{"kind": "numeric", "name": "x", "min": -1, "max": 1},
        ...           {"kind": "categorical", "name": "y", "categories": ["no", "yes"]}]
        >>> frame = {"x": x, "y": np.where(x > 0, "yes", "no")}
        >>> m = hl.train(frame, target="y", epsilon=8.0, schema=schema, seed=1)
        >>> set(m.predict({"x": np.array([-1.0, 0.5, 1.0])})) <= {"no", "yes"}
        True
        """
        margin = self.decision_function(frame)
        if self._task == "linear":
            t = self._attrs[self._target]
            return t["min"] + (np.clip(margin, -1.0, 1.0) + 1.0) / 2.0 * (t["max"] - t["min"])
        positive = margin > 0
        if self._labels is not None:
            return np.where(positive, self._labels[1], self._labels[0]).astype(object)
        return positive

    def score(self, frame: Any) -> float:
        """What ``harmony simulate --task train`` prints: the misclassification rate
        (classifiers) or the mean squared error on the target's ``[-1, 1]`` scale (``linear``),
        over the rows of ``frame`` (which must hold the target column).

        >>> import numpy as np
        >>> import harmony_ldp as hl
        >>> x = np.random.default_rng(0).uniform(-1, 1, 5000)
        >>> schema = [{"kind": "numeric", "name": "x", "min": -1, "max": 1},
        ...           {"kind": "categorical", "name": "y", "categories": ["no", "yes"]}]
        >>> frame = {"x": x, "y": np.where(x > 0, "yes", "no")}
        >>> m = hl.train(frame, target="y", epsilon=8.0, schema=schema, seed=1)
        >>> 0.0 <= m.score(frame) < 0.5
        True
        """
        x, y = self._encoded(frame, need_target=True)
        z = x @ self.coef_
        if self._task == "linear":
            return float(np.mean((np.clip(z, -1.0, 1.0) - y) ** 2))
        return float(np.mean((z > 0) != (y > 0)))


def train(
    frame: Any,
    target: str,
    model: str = "logistic",
    epsilon: float = 1.0,
    *,
    schema: Any = None,
    batch_size: Optional[int] = None,
    rounds: Optional[int] = None,
    mechanism: Optional[str] = None,
    schedule: Optional[str] = None,
    positive: Optional[str] = None,
    threshold: Optional[float] = None,
    learning_rate: Optional[float] = None,
    lam: Optional[float] = None,
    seed: int = 1,
) -> Model:
    """Trains a linear model (``logistic``, ``svm`` or ``linear``) under LDP: every row of
    ``frame`` is a device that, in order, joins the current round and posts one randomized
    gradient at the round's model (``hm`` or ``pm``), exactly as devices of a ``train``
    collection do on a server and as ``harmony simulate --task train --seed SEED`` does (same
    seed, same model). ``batch_size`` is the devices per round g (default: the papers'
    ``max(2·d·ln d/ε², n/1000)``), ``rounds`` T (default ⌊n/g⌋); ``schedule`` ``noise``
    (default) or ``decay`` (with ``learning_rate``); ``positive`` / ``threshold`` choose the
    positive class of a categorical / numeric target; ``lam`` the L2 regularisation. The
    schema may be given (a ``Schema``, a dict or a list of attributes) or is inferred from the
    frame (its bounds then come from the data, which is not private). Returns a ``Model``.

    >>> import numpy as np
    >>> import harmony_ldp as hl
    >>> rng = np.random.default_rng(5)
    >>> x = rng.uniform(0, 10, 30_000)
    >>> frame = {"x": x, "y": 2.0 + 0.5 * x + rng.normal(0, 0.5, 30_000)}
    >>> schema = [{"kind": "numeric", "name": "x", "min": 0, "max": 10},
    ...           {"kind": "numeric", "name": "y", "min": 0, "max": 10}]
    >>> m = hl.train(frame, target="y", model="linear", epsilon=4.0, schema=schema, seed=2)
    >>> bool(abs(m.predict({"x": np.array([5.0])})[0] - 4.5) < 1.0)
    True
    """
    from ._records import Schema

    if schema is None:
        schema = Schema.infer(frame)
    elif not isinstance(schema, Schema):
        schema = Schema({"attributes": list(schema)} if isinstance(schema, (list, tuple)) else schema)
    task: Dict[str, Any] = {"kind": "train", "task": model, "target": target}
    for name, value in (("mechanism", mechanism), ("schedule", schedule), ("positive", positive)):
        if value is not None:
            task[name] = value
    if threshold is not None:
        task["threshold"] = check.real(threshold, "threshold")
    if learning_rate is not None:
        task["learning_rate"] = check.real(learning_rate, "learning_rate")
    if lam is not None:
        task["lambda"] = check.real(lam, "lam")
    task["batch_size"] = 0 if batch_size is None else check.integer(batch_size, "batch_size", low=1)
    if rounds is not None:
        task["rounds"] = check.integer(rounds, "rounds", low=1)
    columns, _ = schema.encode(frame)
    eps = check.real(epsilon, "epsilon")
    request = {"schema": schema.attributes, "epsilon": eps, "task": task}
    config, doc = _native.simulate_train(json.dumps(request), columns, check.integer(seed, "seed"))
    return Model(json.loads(config), json.loads(doc))
