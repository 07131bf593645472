"""harmony_ldp.spark on a real Spark cluster (`local-cluster[2,1,2048]`: a master, two workers,
one executor JVM each): for every report task, `estimate` equals the in-process aggregation of
the same Parquet reports to 1e-12; an executor killed mid-job (Spark retries its tasks) gives
the same result; throughput on 1 and 2 executors is printed (docs/SCALE.md).

Runs when HARMONY_SPARK=1 (pyspark and Java 17 installed; .ci/run's Spark stage), else skips."""

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

import harmony_ldp as hl
from reports_util import TASKS, export, read_body, rel_diff

if os.environ.get("HARMONY_SPARK") != "1":
    pytest.skip("HARMONY_SPARK=1 runs the Spark tests (pyspark, Java 17)", allow_module_level=True)

pyspark = pytest.importorskip("pyspark")
pq = pytest.importorskip("pyarrow.parquet")
from harmony_ldp import spark as hs  # noqa: E402


def session(executors: int, name: str):
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    return (
        SparkSession.builder.master(f"local-cluster[{executors},1,2048]")
        .appName(name)
        .config("spark.executor.memory", "1g")
        .config("spark.driver.memory", "1g")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.task.maxFailures", "4")
        # A lost executor's tasks are retried on the other one (and on its replacement).
        .config("spark.excludeOnFailure.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .getOrCreate()
    )


@pytest.fixture(scope="module")
def cluster():
    s = session(2, "harmony-spark-test")
    yield s
    s.stop()


def local_estimate(d: str, spec: str) -> dict:
    agg = hl.Aggregator(spec)
    agg.add_arrow(read_body(d))
    return agg.estimate()


def test_spark_equals_in_process_for_every_task(cluster, tmp_path):
    for name, task, eps in TASKS:
        d, spec = export(str(tmp_path), name, task, eps, 3000)
        df, spec2 = hs.read_export(cluster, d)
        assert spec2 == spec and df.count() == 3000
        got = hs.estimate(df.repartition(5), spec)
        want = local_estimate(d, spec)
        diff = rel_diff(want, got)
        print(f"{name}: spark (2 executors, 5 partitions) vs in-process: largest relative difference {diff:.3g}")
        assert diff <= 1e-12, (name, diff)
        binary = os.environ.get("HARMONY_BIN")
        if binary:
            out = subprocess.run([binary, "aggregate", "--engine", "local", "--reports", d, "--format", "json"],
                                 check=True, capture_output=True, text=True).stdout
            assert rel_diff(json.loads(out), got) <= 1e-12, name


def executor_pids():
    out = subprocess.run(["pgrep", "-f", "CoarseGrainedExecutorBackend"], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def test_an_executor_killed_mid_job_gives_the_same_result(cluster, tmp_path):
    name, task, eps = TASKS[2]
    d, spec = export(str(tmp_path), name, task, eps, 20000, parts=4)
    want = local_estimate(d, spec)
    df, _ = hs.read_export(cluster, d)

    def slow(batches):  # every partition takes ≥ 1.5 s, so the job runs ≥ 7 s on 2 executors
        time.sleep(1.5)
        yield from batches

    slowed = df.repartition(10).mapInArrow(slow, df.schema)
    pids = executor_pids()
    assert len(pids) == 2, pids
    tracker = cluster.sparkContext.statusTracker()
    killed = []

    def kill():
        # Once the job's stage has finished a task and still runs others: mid-job.
        t0 = time.time()
        while time.time() - t0 < 120:
            for sid in tracker.getActiveStageIds():
                info = tracker.getStageInfo(sid)
                if info and info.numCompletedTasks >= 1 and info.numActiveTasks >= 1 and info.numTasks >= 10:
                    os.kill(pids[0], signal.SIGKILL)
                    killed.append((pids[0], info.numCompletedTasks, info.numTasks))
                    return
            time.sleep(0.05)

    t = threading.Thread(target=kill)
    t.start()
    t0 = time.time()
    got = hs.estimate(slowed, spec)
    t.join()
    assert killed, "the job ended before an executor could be killed mid-job"
    pid, done, total = killed[0]
    print(f"executor {pid} killed after {done} of {total} tasks; the job finished in {time.time() - t0:.1f} s")
    assert pid not in executor_pids()
    assert rel_diff(want, got) <= 1e-12
    assert got["reports"] == 20000


def test_throughput_on_one_and_two_executors(tmp_path):
    """Reports per second through `estimate` (mapInArrow → partial states → merge), 1 vs 2
    executors; printed for docs/SCALE.md (the machine has 2 cores, shared with the driver)."""
    from pyspark.sql import SparkSession

    n = int(os.environ.get("HARMONY_SPARK_REPORTS", "2000000"))
    name, task, eps = TASKS[2]
    d, spec = export(str(tmp_path), name, task, eps, n, parts=8)
    active = SparkSession.getActiveSession()
    if active is not None:  # the module's 2-executor cluster: each rate gets its own
        active.stop()
    rates = {}
    for executors in (1, 2):
        s = session(executors, f"harmony-spark-rate-{executors}")
        try:
            df, _ = hs.read_export(s, d)
            df = df.select("body").repartition(8).cache()
            df.count()
            hs.estimate(df, spec)  # warm the Python workers
            best = float("inf")
            for _ in range(3):
                t0 = time.time()
                doc = hs.estimate(df, spec)
                best = min(best, time.time() - t0)
            assert doc["reports"] == n
            rates[executors] = n / best
        finally:
            s.stop()
    print(f"spark throughput ({n:,} frequency-OUE reports, 8 cached partitions, best of 3): "
          f"1 executor {rates[1]:,.0f} reports/s, 2 executors {rates[2]:,.0f} reports/s, "
          f"speed-up {rates[2] / rates[1]:.2f}")
    assert rates[2] > 0.8 * rates[1]
