"""How fast pyarrow's Parquet reader (one thread) reads OLH report bodies as exported (a binary
column) against as many rows of typed columns (int64 seed, int32 value): docs/SCALE.md's
argument for exporting decoded fields. Best of 3 each; the typed file is written to a temp dir.

    python3 bench/scale/typed_columns.py /tmp/scale-auto/collection=olh
"""
import glob
import os
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq


def best(f):
    ts = []
    for _ in range(3):
        t = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t)
    return min(ts)


def main(collection):
    parts = sorted(glob.glob(os.path.join(collection, "day=*", "part-*.parquet")))
    n = sum(pq.ParquetFile(p).metadata.num_rows for p in parts)
    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    tb = best(lambda: [pq.read_table(p, columns=["body"], use_threads=False) for p in parts])
    rng = np.random.default_rng(1)
    t = pa.table({"seed": rng.integers(0, 2**63, n, dtype=np.int64), "value": rng.integers(0, 4, n, dtype=np.int32)})
    with tempfile.TemporaryDirectory() as d:
        typed = os.path.join(d, "typed.parquet")
        pq.write_table(t, typed, row_group_size=65536, compression="snappy")
        tt = best(lambda: pq.read_table(typed, columns=["seed", "value"], use_threads=False))
    print(f"{n} reports: body column {n / tb / 1e6:.1f} M/s, typed seed + value {n / tt / 1e6:.1f} M/s, {tb / tt:.1f}x")


if __name__ == "__main__":
    main(sys.argv[1])
