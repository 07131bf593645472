"""The device client of a Harmony collection server: fetch a collection's config, check it
against the device's own policy (the Rust SDK's check: the server's config is never trusted),
randomize each row of a frame on this machine with the OS CSPRNG, and post the reports in
batches with retries. Standard library HTTP; randomization in Rust (``harmony-client``)."""

import json
import random
import time
import urllib.error
import urllib.request
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from . import _checks as check
from . import _native
from ._errors import HarmonyError, _error

__all__ = ["Device"]

#: Reports per POST (the server takes at most 10,000).
BATCH = 1000


class Device:
    """Devices that report to the server at ``url`` (``http://host:port``) under a policy the
    app sets: at most ``max_epsilon`` per collection (default 10), and when given only the
    ``tasks`` (``["means", "frequency", …]``) and ``mechanisms`` (``["grr", "oue", …]``) listed.
    A collection asking for more is refused before anything is randomized, with a
    ``HarmonyError`` whose ``field`` names the rule (``policy.max_epsilon``).

    ``submit(collection, frame)`` makes every row of ``frame`` one device: its record is
    randomized with the OS CSPRNG (never a seed) into a report with a random id, and the
    reports are posted in batches of ``batch``; a failed batch (connection error, 5xx, 429) is
    retried with the same bytes and ids, so the server counts it once. For ``heavy-hitters``
    the frame is the devices' items (a sequence of strings or of lists of strings). Training
    collections report in rounds: use ``harmony submit``.

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

    def submit(self, collection: str, frame: Any) -> Dict[str, int]:
        """Randomizes every row of ``frame`` (or, for heavy hitters, every device's items) on
        this machine and posts the reports; returns ``{"devices", "accepted", "duplicates"}``
        (the test ``test_device_client_submits_a_frame_under_its_policy`` runs it on a server).

        >>> import harmony_ldp as hl
        >>> hl.Device("http://127.0.0.1:9", attempts=1).submit("c1", {"age": [30]})  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        harmony_ldp.HarmonyError: request failed: GET http://127.0.0.1:9/v1/collections/c1/config is unanswered ...
        """
        from ._records import Schema
        from ._tasks import _item_sets

        config = self.config(collection)
        task = _native.NativeDeviceTask(json.dumps(config), json.dumps(self.policy))
        kind = config["task"]["kind"]
        if kind == "train":
            raise _error("invalid parameter", "collection", collection,
                         "a collection whose devices report once (training reports in rounds: harmony submit)")
        if kind == "heavy-hitters":
            items: List[Tuple[str, str]] = task.item_sets(_item_sets(frame))
        else:
            columns, _ = Schema({"attributes": config["schema"]}).encode(frame)
            items = task.records(columns)
        out = {"devices": len(items), "accepted": 0, "duplicates": 0}
        for start in range(0, len(items), self.batch):
            chunk = items[start:start + self.batch]
            body = {"collection": collection, "config_version": config["config_version"],
                    "reports": [{"id": i, "report": r} for i, r in chunk]}
            ack = self._request("POST", f"/v1/collections/{collection}/reports", json.dumps(body).encode())
            out["accepted"] += int(ack["accepted"])
            out["duplicates"] += int(ack["duplicates"])
        return out

    def __repr__(self) -> str:
        return f"Device({self.url!r}, max_epsilon={self.policy['max_epsilon']})"
