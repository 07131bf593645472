"""The analyst's client of a Harmony collection server (``harmony serve``): create a
collection, read its config, query its estimates as tables. Standard library HTTP only."""

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ._checks import pandas
from ._errors import HarmonyError, _error
from ._tasks import EST_COLUMNS, IN_DOMAIN_COLUMNS, Estimates, _tables

__all__ = ["Analyst"]

#: The columns of ``Analyst.compare``'s table.
DIFFERENCE_COLUMNS = ("path", "a", "b", "difference", "std_error", "z", "p", "significant")


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

    def _path(self, collection: str, what: str, params: Sequence[Tuple[str, Optional[str]]]) -> str:
        path = f"/v1/collections/{urllib.parse.quote(collection, safe='')}/{what}"
        query = urllib.parse.urlencode([(k, v) for k, v in params if v is not None], safe=":,")
        return path + ("?" + query if query else "")

    def estimates(
        self,
        collection: str,
        *,
        ranges: Optional[Sequence[Sequence[float]]] = None,
        quantiles: Optional[Sequence[float]] = None,
        from_: Optional[str] = None,
        to: Optional[str] = None,
        as_frame: Optional[bool] = None,
        rects: Optional[Sequence[Sequence[float]]] = None,
    ) -> Estimates:
        """The collection's estimates (``GET /v1/collections/{id}/estimates``), as
        ``Estimates`` (the document and its tables): of every report so far, or of the window
        ``[from_, to)`` (ISO dates or UTC timestamps ``YYYY-MM-DDTHH:MMZ`` on the collection's
        period; either end may be open). ``ranges`` (``[[lo, hi], …]``) and ``quantiles`` are
        asked of a range task, ``rects`` (``[[x_lo, x_hi, y_lo, y_hi], …]``) of a range2d task.

        >>> import harmony_ldp as hl
        >>> hl.Analyst("http://127.0.0.1:9", "t").estimates("x", quantiles=[0.5])  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        harmony_ldp.HarmonyError: request failed: GET http://127.0.0.1:9/v1/collections/x/estimates?quantiles=0.5 is ...
        """
        params = _range_params(ranges, quantiles) + [("from", _instant(from_, "from_")), ("to", _instant(to, "to"))]
        if rects:
            params.append(("rects", ",".join(":".join(repr(float(v)) for v in r) for r in rects)))
        return Estimates(self._request("GET", self._path(collection, "estimates", params)), as_frame=as_frame)

    def series(
        self,
        collection: str,
        period: str = "day",
        *,
        from_: Optional[str] = None,
        to: Optional[str] = None,
        ranges: Optional[Sequence[Sequence[float]]] = None,
        quantiles: Optional[Sequence[float]] = None,
        as_frame: Optional[bool] = None,
    ) -> Any:
        """One estimate document per ``period`` (``hour``, ``day`` or ``week``; the
        collection's period or a longer one) over ``[from_, to)`` (``GET …/series``), as one long
        table: a row per period and estimate, with the columns ``period`` (the period's first
        instant, UTC), ``period_end``, ``reports`` (of the period), ``table`` (the name of the
        ``Estimates`` table the row comes from: ``frequencies``, ``means``, ``cdf``, …), that
        table's own key columns (``attribute``, ``category``, …; absent keys are ``None``), then
        ``estimate, std_error, ci_low, ci_high`` and the in-domain columns. Periods without
        reports are left out. A pandas DataFrame when pandas is importable (``period`` as UTC
        timestamps), else a dict of lists.

        >>> import harmony_ldp as hl
        >>> hl.Analyst("http://127.0.0.1:9", "t").series("x", "week", from_="2026-11-02")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        harmony_ldp.HarmonyError: request failed: GET http://127.0.0.1:9/v1/collections/x/series?period=week&from=2026-11-02 is ...
        """
        if period not in ("hour", "day", "week"):
            raise _error("invalid parameter", "period", repr(period), "hour, day or week")
        params = [("period", period), ("from", _instant(from_, "from_")), ("to", _instant(to, "to"))]
        doc = self._request("GET", self._path(collection, "series", params + _range_params(ranges, quantiles)))
        return _long_table(doc["points"], as_frame)

    def compare(
        self,
        collection: str,
        a: Tuple[Optional[str], Optional[str]],
        b: Tuple[Optional[str], Optional[str]],
        *,
        as_frame: Optional[bool] = None,
    ) -> Any:
        """The change of every estimate from window ``a`` to window ``b`` (each ``(from, to)``,
        disjoint; ``GET …/compare``): a table with ``path`` (where the estimate is in the
        document), ``a``, ``b``, ``difference`` (b − a), ``std_error`` (√(se_a² + se_b²),
        independent device sets), ``z``, ``p`` (two-sided) and ``significant`` (Holm–Bonferroni
        over the table at family-wise level 0.05). The table's ``attrs`` (a DataFrame's) or
        ``"_meta"`` key (a dict) holds the windows' report counts, the rule and the independence
        statement.

        >>> import harmony_ldp as hl
        >>> hl.Analyst("http://127.0.0.1:9", "t").compare("x", ("2026-11-01", "2026-11-08"), ("2026-11-08", None))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        harmony_ldp.HarmonyError: request failed: GET http://127.0.0.1:9/v1/collections/x/compare?a_from=2026-11-01&a_to=2026-11-08&b_from=2026-11-08 is ...
        """
        params = []
        for name, window in (("a", a), ("b", b)):
            if not isinstance(window, (tuple, list)) or len(window) != 2:
                raise _error("invalid parameter", name, repr(window), "a (from, to) pair (None for an open end)")
            params += [(f"{name}_from", _instant(window[0], name)), (f"{name}_to", _instant(window[1], name))]
        doc = self._request("GET", self._path(collection, "compare", params))
        cols: Dict[str, List[Any]] = {k: [d[k] for d in doc["differences"]] for k in DIFFERENCE_COLUMNS}
        meta = {"a": doc["a"], "b": doc["b"], "rule": doc["rule"], "independence": doc["independence"]}
        return _frame(cols, as_frame, meta)

    def __repr__(self) -> str:
        return f"Analyst({self.url!r})"


def _instant(value: Optional[str], field: str) -> Optional[str]:
    """A window end as the server takes it (an ISO date or UTC timestamp), or None (open)."""
    if value is None:
        return None
    if hasattr(value, "isoformat"):  # a date, or a datetime in UTC
        text = value.isoformat()
        return text.replace("+00:00", "Z") if "T" in text else text
    if not isinstance(value, str) or not value:
        raise _error("invalid parameter", field, repr(value), "an ISO date (YYYY-MM-DD) or UTC timestamp (YYYY-MM-DDTHH:MMZ)")
    return value


def _range_params(ranges: Optional[Sequence[Sequence[float]]], quantiles: Optional[Sequence[float]]) -> List[Tuple[str, Optional[str]]]:
    params: List[Tuple[str, Optional[str]]] = []
    if ranges:
        params.append(("ranges", ",".join(f"{float(lo)!r}:{float(hi)!r}" for lo, hi in ranges)))
    if quantiles is not None:
        params.append(("quantiles", ",".join(repr(float(q)) for q in quantiles)))
    return params


def _long_table(points: Sequence[Mapping[str, Any]], as_frame: Optional[bool]) -> Any:
    """The series' points as one long table (see ``Analyst.series``)."""
    values = EST_COLUMNS + IN_DOMAIN_COLUMNS
    rows: List[Dict[str, Any]] = []
    for point in points:
        doc = point["document"]
        flat = dict(doc["result"]) if "result" in doc else dict(doc)
        flat.update({k: doc[k] for k in ("collection", "reports", "epsilon") if k in doc})
        for name, table in _tables(flat).items():
            n = len(next(iter(table.values()), []))
            for i in range(n):
                row = {"period": point["from"], "period_end": point["to"], "reports": doc["reports"], "table": name}
                # A one-attribute task names its attribute once, in the document.
                row["attribute"] = flat.get("attribute") if isinstance(flat.get("attribute"), str) else None
                row.update({k: v[i] for k, v in table.items()})
                rows.append(row)
    keys: List[str] = ["period", "period_end", "reports", "table"]
    for row in rows:
        keys += [k for k in row if k not in keys and k not in values]
    keys += list(values)
    cols = {k: [row.get(k) for row in rows] for k in keys}
    return _frame(cols, as_frame, {}, times=("period", "period_end"))


def _frame(cols: Dict[str, List[Any]], as_frame: Optional[bool], meta: Dict[str, Any], times: Sequence[str] = ()) -> Any:
    """A DataFrame of ``cols`` when pandas is importable (or ``as_frame``), else the dict (with
    ``meta`` under ``"_meta"`` when not empty)."""
    pd = pandas(as_frame)
    if pd is None:
        return {**cols, "_meta": meta} if meta else cols
    frame = pd.DataFrame(cols)
    for t in times:
        frame[t] = pd.to_datetime(frame[t], utc=True)
    frame.attrs.update(meta)
    return frame
