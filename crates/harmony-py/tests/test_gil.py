"""The GIL is released in long native calls: another Python thread runs meanwhile, and two
threads randomize + aggregate at least 1.7 times as fast as one (on a machine with 2 cores)."""

import hashlib
import os
import threading
import time

import numpy as np
import pytest

import harmony_ldp as hl

ORACLE = hl.FrequencyOracle("olh", epsilon=1.0, d=1024)
VALUES = np.random.default_rng(0).integers(0, 1024, 100_000)


def work(seed):
    ORACLE.estimate(ORACLE.randomize(VALUES, seed=seed), as_frame=False)


def test_python_threads_run_during_a_native_call():
    """While a worker thread is inside a long estimate (10^6 OLH reports, d = 1024: ~10^9 hash
    evaluations), the main thread runs Python code: it finishes a short loop long before the
    call ends. With the GIL held it could only run once the call returned."""
    reports = ORACLE.randomize(np.tile(VALUES, 10), seed=1)
    inside, times = threading.Event(), {}

    def worker():
        times["start"] = time.perf_counter()
        inside.set()
        ORACLE.estimate(reports, as_frame=False)
        times["call"] = time.perf_counter() - times["start"]

    t = threading.Thread(target=worker)
    t.start()
    inside.wait()
    total = sum(i * i for i in range(1000))
    main_done = time.perf_counter() - times["start"]
    t.join()
    assert total > 0
    assert main_done < 0.5 * times["call"], (main_done, times)


def speedup(target, rounds=3):
    """Best of `rounds`: 2 * t(1 thread doing it once) / t(2 threads doing it once each)."""
    target(0)  # warm-up

    def timed(threads):
        ts = [threading.Thread(target=target, args=(i,)) for i in range(threads)]
        t0 = time.perf_counter()
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        return time.perf_counter() - t0

    best = 0.0
    for _ in range(rounds):
        best = max(best, 2 * timed(1) / timed(2))
        if best >= 1.7:
            break
    return best


def reference(_):
    """A GIL-free reference: hashlib releases the GIL on large inputs."""
    hashlib.sha256(BLOB).digest()


BLOB = bytes(64 << 20)


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs 2 cores")
def test_two_threads_are_faster_than_one():
    """>= 1.7x on 2 threads. Timings on a shared 2-core machine are noisy, so up to four
    attempts alternate ours with a GIL-free reference (each the best of 3): the test passes at
    the first attempt where ours reaches 1.7x, is skipped when the reference never reaches 1.7x
    either (the machine too busy for the timing to show anything; the test above still shows
    the GIL released), and fails when the reference reached 1.7x but ours never did."""
    attempts = []
    for _ in range(4):
        ours = speedup(work)
        if ours >= 1.7:
            return
        attempts.append((round(ours, 2), round(speedup(reference), 2)))
    if all(ref < 1.7 for _, ref in attempts):
        pytest.skip(f"busy machine: (ours, GIL-free reference) speedups on 2 threads: {attempts}")
    assert False, f"ours never reached 1.7x while the reference did: (ours, reference) = {attempts}"
