"""Harmony on Apache Spark: a collection's reports aggregated where they are stored.

Every Harmony aggregator is a mergeable monoid. ``estimate(df, spec)`` adds each partition's
reports into its own aggregator on the executors (Arrow batches through ``mapInArrow``: the
report bodies reach Rust without a copy per report), ships one saved state per partition to the
driver and merges them there; the result is the estimate document ``harmony query`` prints,
equal to one in-process aggregation of the same reports (to 1e-12: sums of floats are added in
another order). A task Spark retries (an executor lost mid-job) recomputes its partition's state
from the reports, so the result does not change (docs/SCALE.md).

>>> from pyspark.sql import SparkSession                         # doctest: +SKIP
>>> from harmony_ldp import spark as hs                          # doctest: +SKIP
>>> df, spec = hs.read_export(session, "exports/collection=ID")  # doctest: +SKIP
>>> doc = hs.estimate(df, spec)                                  # doctest: +SKIP

Needs ``pyspark`` (3.4 or later) and ``pyarrow`` on the driver and the executors, and
``harmony_ldp`` importable by the executors' Python workers.
"""

from typing import Any, Dict, Iterator, Mapping, Optional, Tuple, Union

from ._aggregate import Aggregator, _spec_text, read_spec

__all__ = ["estimate", "partial_states", "read_export"]


def read_export(session: Any, path: str) -> Tuple[Any, str]:
    """The reports (a DataFrame with ``report_id``, ``day`` and ``body``) and the config of a
    collection exported by ``harmony export`` (``path`` is its ``collection=ID`` directory).
    The ``day=…`` directories are read as files (``recursiveFileLookup``): the parts hold their
    own ``day`` column."""
    spec = read_spec(path)
    df = session.read.option("recursiveFileLookup", "true").option("pathGlobFilter", "*.parquet").parquet(path)
    return df, spec


def partial_states(df: Any, spec: Union[str, Mapping[str, Any]], column: str = "body") -> Any:
    """A DataFrame of one saved state per partition (column ``state``, binary): what
    ``estimate`` merges, and what can be stored to merge later (``Aggregator.merge``)."""
    import pyarrow as pa

    text = _spec_text(spec)
    Aggregator(text)  # a bad spec fails here, on the driver, before any job runs
    schema = pa.schema([pa.field("state", pa.binary(), nullable=False)])

    def partial(batches: Iterator[Any]) -> Iterator[Any]:
        agg = Aggregator(text)
        for batch in batches:
            agg.add_arrow(batch.column(0))
        yield pa.RecordBatch.from_arrays([pa.array([agg.save()], type=pa.binary())], schema=schema)

    return df.select(column).mapInArrow(partial, "state binary")


def estimate(
    df: Any,
    spec: Union[str, Mapping[str, Any]],
    query: Optional[str] = None,
    column: str = "body",
) -> Dict[str, Any]:
    """The estimate document of the reports in ``df``'s binary column ``column`` (the collection's
    config is ``spec``: the ``spec.json`` text or a dict): partial states on the executors, merged
    on the driver. ``query`` is ``ranges=LO:HI,…&quantiles=Q,…`` for range collections."""
    agg = Aggregator(spec)
    for row in partial_states(df, spec, column).collect():
        agg.merge(row["state"])
    return agg.estimate(query)
