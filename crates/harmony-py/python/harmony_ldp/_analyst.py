"""The analyst's client of a Harmony collection server (``harmony serve``): create a
collection, read its config, query its estimates as tables. Standard library HTTP only."""

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ._errors import HarmonyError, _error
from ._tasks import Estimates

__all__ = ["Analyst"]


class Analyst:
    """An analyst of the server at ``url`` (``http://host:port``), with its bearer token
    (``harmony serve --analyst-token``). Every request that fails raises a ``HarmonyError``
    with the server's ``field`` and message (or the connection error); ``status`` holds the
    HTTP status.

    >>> import harmony_ldp as hl
    >>> a = hl.Analyst("http://127.0.0.1:9/", "secret-token")
    >>> a
    Analyst('http://127.0.0.1:9')
    >>> a.estimates("no-such-id")  # no server listens there  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    harmony_ldp.HarmonyError: request failed: GET http://127.0.0.1:9/v1/collections/no-such-id/estimates is ...
    """

    def __init__(self, url: str, token: str, timeout: float = 60.0) -> None:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise _error("invalid parameter", "url", repr(url), "an http:// or https:// URL")
        if not isinstance(token, str) or not token:
            raise _error("invalid parameter", "token", repr(token), "the analyst token (a non-empty str)")
        self.url = url.rstrip("/")
        self._token = token
        self.timeout = float(timeout)

    def _request(self, method: str, path: str, body: Optional[Mapping[str, Any]] = None) -> Any:
        url = self.url + path
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(url, data=data, method=method)
        req.add_header("Authorization", f"Bearer {self._token}")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:
            field, message = "", e.reason
            try:
                detail = json.loads(e.read())["error"]
                field, message = detail.get("field", ""), detail.get("message", message)
            except (ValueError, KeyError, TypeError):
                pass
            err = HarmonyError(f"server: {e.code} {message}", field or path, "", str(message))
            err.status = e.code  # type: ignore[attr-defined]
            raise err from None
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise _error("request failed", f"{method} {url}", repr(str(reason)),
                         "a reachable Harmony server") from None

    def create(
        self, spec: Mapping[str, Any], *, name: Optional[str] = None, description: Optional[str] = None
    ) -> Tuple[str, Dict[str, Any]]:
        """Creates a collection (``POST /v1/collections``) from a request — ``schema``,
        ``epsilon`` and ``task``, as for ``simulate_task`` (a ``Schema`` is accepted for the
        schema) — with an optional ``name`` (1 to 128 characters) and ``description`` (up to
        2,000) that the collection list and the dashboard show, and returns its id and the
        published config, every default written out.

        >>> import harmony_ldp as hl
        >>> hl.Analyst("http://127.0.0.1:9", "t").create({"epsilon": 1.0})  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        harmony_ldp.HarmonyError: request failed: POST http://127.0.0.1:9/v1/collections is ...
        """
        from ._records import Schema

        if not isinstance(spec, Mapping):
            raise _error("invalid parameter", "spec", type(spec).__name__, "a dict (a CreateCollection request)")
        body = dict(spec)
        for key, value in (("name", name), ("description", description)):
            if value is not None:
                if not isinstance(value, str):
                    raise _error("invalid parameter", key, type(value).__name__, "a str")
                body[key] = value
        if isinstance(body.get("schema"), Schema):
            body["schema"] = body["schema"].attributes
        created = self._request("POST", "/v1/collections", body)
        return created["id"], created["config"]

    def collections(self) -> List[Dict[str, Any]]:
        """The collections this token reads (``GET /v1/collections``): ``id``, ``task``,
        ``epsilon``, ``reports`` and, when given, ``name``, ``description`` and ``created``
        (ISO 8601, UTC).

        >>> import harmony_ldp as hl
        >>> hl.Analyst("http://127.0.0.1:9", "t").collections()  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        harmony_ldp.HarmonyError: request failed: GET http://127.0.0.1:9/v1/collections is ...
        """
        return list(self._request("GET", "/v1/collections"))

    def config(self, collection: str) -> Dict[str, Any]:
        """A collection's published config (``GET /v1/collections/{id}/config``): what devices
        randomize with.

        >>> import harmony_ldp as hl
        >>> hl.Analyst("http://127.0.0.1:9", "t").config("x")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        harmony_ldp.HarmonyError: request failed: GET http://127.0.0.1:9/v1/collections/x/config is ...
        """
        return self._request("GET", f"/v1/collections/{urllib.parse.quote(collection, safe='')}/config")

    def estimates(
        self,
        collection: str,
        *,
        ranges: Optional[Sequence[Sequence[float]]] = None,
        quantiles: Optional[Sequence[float]] = None,
        as_frame: Optional[bool] = None,
    ) -> Estimates:
        """The collection's estimates now (``GET /v1/collections/{id}/estimates``), as
        ``Estimates`` (the document and its tables); ``ranges`` (``[[lo, hi], …]``) and
        ``quantiles`` are asked of a range task.

        >>> import harmony_ldp as hl
        >>> hl.Analyst("http://127.0.0.1:9", "t").estimates("x", quantiles=[0.5])  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        harmony_ldp.HarmonyError: request failed: GET http://127.0.0.1:9/v1/collections/x/estimates?quantiles=0.5 is ...
        """
        params = []
        if ranges:
            params.append("ranges=" + ",".join(f"{float(lo)!r}:{float(hi)!r}" for lo, hi in ranges))
        if quantiles is not None:
            params.append("quantiles=" + ",".join(repr(float(q)) for q in quantiles))
        path = f"/v1/collections/{urllib.parse.quote(collection, safe='')}/estimates"
        if params:
            path += "?" + "&".join(params)
        return Estimates(self._request("GET", path), as_frame=as_frame)

    def __repr__(self) -> str:
        return f"Analyst({self.url!r})"
