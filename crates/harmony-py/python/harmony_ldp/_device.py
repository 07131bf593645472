"""The device client of a Harmony collection server: fetch a collection's config, check it
against the device's own policy (the Rust SDK's check: the server's config is never trusted),
randomize on this machine with the OS CSPRNG through ``harmony_client::Device`` (its policy,
budget and store of reports, spends and permanent reports), and post the reports with retries.
Standard library HTTP; randomization in Rust (``harmony-client``)."""

import json
import os
import random
import time
import urllib.error
import urllib.request
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import _checks as check
from . import _native
from ._errors import HarmonyError, _error

__all__ = ["Device"]

#: Reports per POST (the server takes at most 10,000).
BATCH = 1000


class Device:
    """A device that reports to the server at ``url`` (``http://host:port``) under a policy
    the app sets, enforced by the Rust SDK (``harmony_client::Device``): at most
    ``max_epsilon`` per collection (default 10); pure ε-LDP only unless ``approximate=True``
    (then δ ≤ ``max_delta``, default 1e-9); when given only the ``tasks``
    (``["means", "frequency", …]``) and ``mechanisms`` (``["grr", "oue", …]``) listed; and
    with ``budget`` (``"E/DAYS"`` or ``{"epsilon": E, "days": DAYS, "delta": D}``) at most E
    in total over any rolling window of DAYS days; ``max_item_id``: the app's largest
    heavy-hitter item id (a config whose code cannot hold it is refused). A collection asking for more is refused
    before anything is randomized, with a ``HarmonyError`` whose ``field`` names the rule
    (``policy.max_epsilon``, ``policy.budget``).

    ``store`` is the file where the device keeps its reports, the budget's spends and the
    permanent reports of recurring series (one JSON file, locked across processes; a new file
    is an empty store). Give it on a real device: without it the store is in memory and an
    app restart forgets what was charged. A collection charged once is never randomized again:
    a restart with the same store resends the kept report or refuses, never a fresh one.

    ``report(collection, record)`` is this device's one report (one record). Numeric values
    outside the schema's range are clamped to it, never refused. ``submit(collection,
    frame)`` sends every row of ``frame`` as one device from this machine (loading data), the
    collection charged once in the store (a second submit to it is refused). Rows the schema
    cannot encode (an unknown label, a missing value under ``missing = "error"``) raise under
    ``invalid="error"`` (the default) or are skipped and counted under ``invalid="skip"``.
    Reports are posted in batches of ``batch``; a failed batch (connection error, 5xx, 429)
    is retried with the same bytes and ids, so the server counts it once. For
    ``heavy-hitters`` the frame is the devices' items (a sequence of strings or of lists of
    strings). Training collections report in rounds: use ``harmony submit``. A ``Device`` is
    used from any thread.

    >>> import harmony_ldp as hl
    >>> hl.Device("http://127.0.0.1:9", max_epsilon=2.0)
    Device('http://127.0.0.1:9', max_epsilon=2.0)
    >>> hl.Device("ftp://x")
    Traceback (most recent call last):
    ...
    harmony_ldp.HarmonyError: invalid parameter: url is 'ftp://x', expected an http:// or https:// URL
    """

    def __init__(
        self,
        url: str,
        *,
        max_epsilon: float = 10.0,
        tasks: Optional[Sequence[str]] = None,
        mechanisms: Optional[Sequence[str]] = None,
        approximate: bool = False,
        max_delta: Optional[float] = None,
        budget: Optional[Union[str, Mapping[str, float]]] = None,
        max_item_id: Optional[int] = None,
        store: Optional[Union[str, "os.PathLike[str]"]] = None,
        invalid: str = "error",
        batch: int = BATCH,
        timeout: float = 60.0,
        attempts: int = 5,
    ) -> None:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise _error("invalid parameter", "url", repr(url), "an http:// or https:// URL")
        self.url = url.rstrip("/")
        self.policy: Dict[str, Any] = {"max_epsilon": check.real(max_epsilon, "max_epsilon")}
        if tasks is not None:
            self.policy["tasks"] = [str(t) for t in tasks]
        if mechanisms is not None:
            self.policy["mechanisms"] = [str(m) for m in mechanisms]
        if approximate:
            self.policy["approximate"] = True
        if max_delta is not None:
            self.policy["max_delta"] = check.real(max_delta, "max_delta")
        if budget is not None:
            self.policy["budget"] = budget if isinstance(budget, str) else dict(budget)
        if max_item_id is not None:
            self.policy["max_item_id"] = check.integer(max_item_id, "max_item_id")
        self.invalid = _invalid(invalid)
        self.store = None if store is None else os.fspath(store)
        self._device = _native.NativeDevice(json.dumps(self.policy), self.store)
        self.batch = check.integer(batch, "batch")
        if not 1 <= self.batch <= 10_000:
            raise _error("invalid parameter", "batch", self.batch, "reports per POST in 1..=10000")
        self.timeout = float(timeout)
        self.attempts = max(1, check.integer(attempts, "attempts"))

    def _send(self, method: str, path: str, body: Optional[bytes] = None) -> Tuple[int, bytes]:
        req = urllib.request.Request(self.url + path, data=body, method=method)
        if body is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def _request(self, method: str, path: str, body: Optional[bytes] = None) -> Any:
        """Sends with retries on connection errors, 5xx and 429 (exponential backoff with
        jitter, honouring ``Retry-After``'s one second); 4xx raise at once."""
        last = ""
        for attempt in range(self.attempts):
            if attempt:
                time.sleep(min(5.0, 0.1 * 2**attempt) * (0.5 + random.random()))
            try:
                status, data = self._send(method, path, body)
            except (urllib.error.URLError, OSError) as e:
                last = str(getattr(e, "reason", e))
                continue
            if 200 <= status < 300:
                return json.loads(data)
            if status == 429 or status >= 500:
                last = f"HTTP {status}"
                continue
            field, message = path, data.decode(errors="replace")
            try:
                detail = json.loads(data)["error"]
                field, message = detail.get("field", field), detail.get("message", message)
            except (ValueError, KeyError, TypeError):
                pass
            err = HarmonyError(f"server: {status} {message}", field, "", str(message))
            err.status = status  # type: ignore[attr-defined]
            raise err
        raise _error("request failed", f"{method} {self.url}{path}", f"unanswered after {self.attempts} attempts ({last})",
                     "a reachable server")

    def config(self, collection: str) -> Dict[str, Any]:
        """The collection's published config, checked against this device's policy.

        >>> import harmony_ldp as hl
        >>> hl.Device("http://127.0.0.1:9", attempts=1).config("c1")  # no server listens there  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        harmony_ldp.HarmonyError: request failed: GET http://127.0.0.1:9/v1/collections/c1/config is unanswered after 1 attempts (...
        """
        config = self._request("GET", f"/v1/collections/{collection}/config")
        if config.get("id") != collection:
            raise _error("invalid config", "id", repr(config.get("id")), f"the collection asked for ({collection!r})")
        _native.NativeDeviceTask(json.dumps(config), json.dumps(self.policy))
        return config

    def submit(self, collection: str, frame: Any, *, invalid: Optional[str] = None) -> Dict[str, int]:
        """Randomizes every row of ``frame`` (or, for heavy hitters, every device's items) on
        this machine, one device per row, and posts the reports; returns ``{"devices",
        "accepted", "duplicates", "skipped", "clamped"}``. The collection is charged once in
        the device's store (its budget checked) before anything is randomized; a second
        submit to it is refused. ``invalid`` overrides the device's ``invalid`` for this frame.
        (The test ``test_device_client_submits_a_frame_under_its_policy`` runs it on a server.)

        >>> import harmony_ldp as hl
        >>> hl.Device("http://127.0.0.1:9", attempts=1).submit("c1", {"age": [30]})  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        harmony_ldp.HarmonyError: request failed: GET http://127.0.0.1:9/v1/collections/c1/config is unanswered ...
        """
        from ._tasks import _item_sets

        config = self.config(collection)
        task = _native.NativeDeviceTask(json.dumps(config), json.dumps(self.policy))
        kind = config["task"]["kind"]
        if kind == "train":
            raise _error("invalid parameter", "collection", collection,
                         "a collection whose devices report once (training reports in rounds: harmony submit)")
        counts = {"skipped": 0, "clamped": 0}
        if kind != "heavy-hitters":
            columns, counts = _encode(config, frame, _invalid(invalid) if invalid is not None else self.invalid)
        sets = _item_sets(frame) if kind == "heavy-hitters" else None
        self._device.charge_batch(json.dumps(config))
        items: List[Tuple[str, str]] = task.item_sets(sets) if sets is not None else task.records(columns)
        out = {"devices": len(items), "accepted": 0, "duplicates": 0,
               "skipped": counts["skipped"], "clamped": counts["clamped"]}
        for start in range(0, len(items), self.batch):
            ack = self._post(collection, config, items[start:start + self.batch])
            out["accepted"] += int(ack["accepted"])
            out["duplicates"] += int(ack["duplicates"])
        return out

    def report(self, collection: str, record: Mapping[str, Any], *, series: Optional[str] = None) -> Dict[str, int]:
        """This device's one report to ``collection`` for ``record`` (a mapping of attribute
        to value; numeric values clamped to the schema's range): randomized once, charged and
        kept in the store before it is posted; a retry after a failure (or after a restart
        with the same store) resends the same report under the same id, and a collection
        already acknowledged raises ``HarmonyError`` (field ``collection``). A value the
        server's schema cannot encode (a label outside its list, a missing value under
        ``missing = "error"``, text for a number) is replaced by a uniformly random value
        (OS CSPRNG): the device reports either way, so whether it reports never depends on
        its data, and a report of a uniform value is within e^ε of any real value's. For a recurring
        frequency ``series``, the series' permanent report (memoized, charged once per epoch).
        Returns ``{"accepted", "duplicates"}``.

        >>> import harmony_ldp as hl
        >>> hl.Device("http://127.0.0.1:9", attempts=1).report("c1", {"age": 30})  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        harmony_ldp.HarmonyError: request failed: GET http://127.0.0.1:9/v1/collections/c1/config is unanswered ...
        """
        config = self.config(collection)
        if not isinstance(record, Mapping):
            raise _error("invalid input", "record", f"a {type(record).__name__}", "a mapping of attribute to value")
        columns, _ = _encode(config, _encodable(config, record), "error")
        item = self._device.prepare(json.dumps(config), columns, series)
        ack = self._post(collection, config, [item])
        self._device.acknowledge(collection)
        return {"accepted": int(ack["accepted"]), "duplicates": int(ack["duplicates"])}

    def spends(self) -> List[Dict[str, Any]]:
        """The ε and δ charged in the device's store: ``[{"key", "epsilon", "delta", "at"}]``
        (``key`` a collection id, or a series' epoch for memoized reports; ``at`` Unix seconds).

        >>> import harmony_ldp as hl
        >>> hl.Device("http://127.0.0.1:9").spends()
        []
        """
        return [{"key": k, "epsilon": e, "delta": d, "at": t} for k, e, d, t in self._device.spends()]

    def _post(self, collection: str, config: Mapping[str, Any], items: Sequence[Tuple[str, str]]) -> Any:
        body = {"collection": collection, "config_version": config["config_version"],
                "reports": [{"id": i, "report": r} for i, r in items]}
        return self._request("POST", f"/v1/collections/{collection}/reports", json.dumps(body).encode())

    def __repr__(self) -> str:
        return f"Device({self.url!r}, max_epsilon={self.policy['max_epsilon']})"


def _invalid(invalid: str) -> str:
    if invalid not in ("error", "skip"):
        raise _error("invalid parameter", "invalid", repr(invalid), "error or skip")
    return invalid


def _encode(config: Mapping[str, Any], frame: Any, invalid: str) -> Tuple[List[np.ndarray], Dict[str, int]]:
    """The frame's columns as the collection's schema encodes them, numeric values clamped to
    their range first (a device never refuses a number for being out of range: that refusal
    would tell the server about the value); cells the schema cannot encode raise or skip the
    row under ``invalid``. The counts ``{"rows", "skipped", "clamped"}``."""
    from ._records import Schema, _columns, _numbers

    attributes = config.get("schema") or []
    names = _columns(frame)
    cols: Dict[str, Any] = {name: frame[name] for name in names}
    clamped = 0
    for a in attributes:
        if a.get("kind") != "numeric" or a["name"] not in cols:
            continue
        raw = cols[a["name"]]
        x = _numbers(raw)
        out = np.isinf(x) | (np.isfinite(x) & ((x < a["min"]) | (x > a["max"])))
        if out.any():
            clamped += int(out.sum())
            fixed = np.asarray(raw)
            fixed = fixed.astype(np.float64 if fixed.dtype.kind in "iuf" else object)
            fixed[out] = np.clip(x[out], a["min"], a["max"])
            cols[a["name"]] = fixed
    columns, counts = Schema({"attributes": attributes, "invalid": invalid}).encode(cols)
    return columns, {**counts, "clamped": clamped}


def _encodable(config: Mapping[str, Any], record: Mapping[str, Any]) -> Dict[str, List[Any]]:
    """The record as a one-row frame whose every value the config's schema encodes: a value it
    cannot (an unknown label, a missing value its ``missing`` policy does not cover, text for a
    number) is replaced by a uniformly random one, drawn with the OS CSPRNG (the Rust and
    browser SDKs' ``policy::fallback``)."""
    import secrets

    from ._records import _labels, _missing_numbers, _numbers

    out: Dict[str, List[Any]] = {k: [v] for k, v in record.items()}
    for a in config.get("schema") or []:
        name, covered = a["name"], a.get("missing", "error") != "error"
        cell = out.get(name, [None])
        if a["kind"] == "numeric":
            x = _numbers(cell)
            ok = not np.isnan(x[0]) or (covered and bool(_missing_numbers(cell, x)[0]))
            if not ok:
                cell = [a["min"] + (a["max"] - a["min"]) * secrets.randbits(53) / 2**53]
        else:
            label = _labels(cell)[0]
            if label not in a["categories"] and not (covered and label == "?"):
                cell = [a["categories"][secrets.randbelow(len(a["categories"]))]]
        out[name] = cell
    return out
