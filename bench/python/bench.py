#!/usr/bin/env python3
"""harmony_ldp (the Python package) against the Python peers and against `harmony bench`, side
by side in one process; writes bench/python/RESULTS.md.

    bench/python/run.sh                      # venv + wheel + release CLI, then this script
    bench/.venv/bin/python bench/python/bench.py --harmony target/release/harmony [--quick]

For GRR, OUE, OLH and HR at d = 1024, eps = 1 on n = 10^6 users (Zipf(1.1) categories, the
workload of bench/compare.py):

1. Harmony from Python: `FrequencyOracle.randomize(values, seed=s)` then `.estimate(reports)`
   (the default DataFrame output), median of --repeats runs, one thread.
2. Binding overhead: `harmony bench --mechanisms M --d 1024 --epsilon 1 --n 1000000 --threads 1`
   (randomize_s + aggregate_s, its own repetitions) run alternately with (1), --rounds rounds;
   overhead = the median over the rounds of (Python time / CLI time of the same round) - 1.
3. The peers pure-ldp, multi-freq-ldpy and ldp-toolbox (bench/requirements.txt pins), through
   the adapters of bench/peers (each library's public per-user API): randomize on the largest n
   of a ladder that fits --budget seconds, aggregate (ingest + estimate all d) likewise, both
   scaled linearly to 10^6 users. A peer without a server side in the adapters (the GRR ones)
   is charged its randomize time only, which favours it.
4. The GIL: randomize + estimate of 10^6 users on 1 thread, then the same work twice on 2
   Python threads; speedup = 2 * t(1 thread) / t(2 threads).
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
ROOT = os.path.dirname(BENCH)
sys.path.insert(0, BENCH)

import numpy as np  # noqa: E402

import harmony_ldp as hl  # noqa: E402

MECHS = {"GRR": "grr", "OUE": "oue", "OLH": "olh", "HR": "hr"}
PEERS = ["pure_ldp", "multi_freq_ldpy", "ldp_toolbox"]
LADDER = [1_000_000, 300_000, 100_000, 30_000, 10_000, 3_000, 1_000, 300, 100]


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def workload(n, d):
    from peers.common import data_seed, gen_categorical
    return gen_categorical("zipf", d, n, data_seed("cat", "zipf", d, n))


# ----------------------------------------------------------------------------- Harmony
def harmony_once(oracle, values, seed, as_frame=None):
    t0 = time.perf_counter()
    r = oracle.randomize(values, seed=seed)
    t1 = time.perf_counter()
    oracle.estimate(r, as_frame=as_frame)
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1


def harmony_py(name, values, d, eps, repeats):
    """Median seconds of `repeats` runs (randomize with a seed, estimate, their sum) and of
    randomize without a seed (ChaCha20 from the OS)."""
    o = hl.FrequencyOracle(name, epsilon=eps, d=d)
    harmony_once(o, values, 0)  # warm-up (allocator, pandas import)
    runs = [harmony_once(o, values, 1 + i) for i in range(repeats)]
    rnd = statistics.median(r for r, _ in runs)
    agg = statistics.median(a for _, a in runs)
    total = statistics.median(r + a for r, a in runs)
    os_rnd = statistics.median(harmony_once(o, values, None)[0] for _ in range(max(1, repeats // 2)))
    return dict(randomize_s=rnd, aggregate_s=agg, total_s=total, os_randomize_s=os_rnd)


def medians(dicts):
    return {k: statistics.median(x[k] for x in dicts) for k in dicts[0]}


def harmony_cli(harmony, name, d, eps, n):
    cmd = [harmony, "bench", "--format", "json", "--mechanisms", name, "--d", str(d), "--epsilon", str(eps),
           "--n", str(n), "--threads", "1"]
    p = subprocess.run(cmd, capture_output=True, text=True, check=True)
    row = json.loads(p.stdout)["results"][0]
    assert row["n"] == n, row
    return dict(randomize_s=row["randomize_s"], aggregate_s=row["aggregate_s"],
                total_s=row["randomize_s"] + row["aggregate_s"])


# ----------------------------------------------------------------------------- peers
def timed(fn, *args):
    t = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - t, out


def pick(per_item, budget, limit):
    for n in LADDER:
        if n <= limit and per_item * n <= budget:
            return n
    return LADDER[-1]


def peer(lib, mech, d, eps, budget):
    """Per-user randomize and aggregate seconds of one peer, or None when it has no adapter."""
    from peers.adapters import REGISTRY
    from peers.common import deep_size, seed_everything
    cls = REGISTRY.get((lib, mech))
    if cls is None:
        return None
    seed_everything(1)
    a = cls(d, eps)
    prep = (lambda v: v.tolist()) if a.wants_list else (lambda v: v)
    a.client(prep(workload(3, d)))  # warm-up: numba JIT, lazy imports
    c = 100
    while True:
        tc, r = timed(a.client, prep(workload(c, d)))
        if tc >= 0.3 or c >= LADDER[0] or tc * 10 > budget:
            break
        c *= 10
    rep_bytes = deep_size(r) / c + 8
    del r
    n = pick(tc / c, budget, min(LADDER[0], int(2 * 2**30 / rep_bytes)))
    values = prep(workload(n, d))
    seed_everything(11)
    tc, reports = timed(a.client, values)
    out = dict(lib=lib, n_randomize=n, randomize_per_user=tc / n, aggregate_per_user=0.0, n_aggregate=0)
    if a.has_server:
        k = min(100, n)
        while True:
            part = reports[:k]
            a.reset()
            ts, _ = timed(a.server, part, k)
            if ts >= 0.3 or k >= n or ts * 10 > budget:
                break
            k = min(n, k * 10)
        k = pick(ts / k, budget, n)
        a.reset()
        ts, est = timed(a.server, reports[:k], k)
        assert np.asarray(est).shape == (d,)
        out.update(n_aggregate=k, aggregate_per_user=ts / k)
    return out


# ----------------------------------------------------------------------------- GIL
def gil(name, values, d, eps):
    o = hl.FrequencyOracle(name, epsilon=eps, d=d)

    def work(seed):
        o.estimate(o.randomize(values, seed=seed), as_frame=False)

    def run(threads):
        ts = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
        t = time.perf_counter()
        for x in ts:
            x.start()
        for x in ts:
            x.join()
        return time.perf_counter() - t

    work(0)
    speedups = []
    for _ in range(3):
        one = run(1)
        speedups.append(2 * one / run(2))
    return max(speedups), speedups


# ----------------------------------------------------------------------------- report
def si(x):
    for div, suf in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if x >= div:
            return f"{x / div:.3g}{suf}"
    return f"{x:.3g}"


def ms(s):
    return f"{s * 1e3:.1f} ms" if s < 10 else f"{s:.0f} s"


def write(path, args, rows, overhead, peers, threads, wall):
    n = args.n
    lines = [
        "# harmony_ldp: speed from Python",
        "",
        f"Generated by `bench/python/run.sh{' --quick' if args.quick else ''}` on "
        f"{datetime.date.today().isoformat()} ({platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, numpy {np.__version__}, harmony-ldp {hl.__version__}); "
        f"{wall:.0f} s in all; load average {args.load[0]:.1f} at the start, {args.load[1]:.1f} at the end "
        "(a machine shared with other jobs: times vary, ratios measured side by side are the figures). "
        f"d = {args.d}, ε = {args.eps}, n = {n:,} users (Zipf(1.1) categories); every time is one thread "
        "unless said. Method: the docstring of bench/python/bench.py.",
        "",
        "## Randomize + aggregate: Harmony from Python vs the best Python peer",
        "",
        "Peers measured at the n shown (the largest of a ladder that fits the time budget) and scaled "
        f"linearly to {n:,} users; a peer without an aggregator in the adapters (GRR) is charged its "
        "randomize time only.",
        "",
        "| mechanism | harmony_ldp randomize | estimate | total | best peer (randomize n / aggregate n) | peer total, scaled | ratio | ≥ 100× |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for m, r in rows.items():
        best = min((p for p in peers[m] if p), key=lambda p: p["total_s"], default=None)
        if best is None:
            continue
        ratio = best["total_s"] / r["total_s"]
        agg_n = f"{best['n_aggregate']:,}" if best["n_aggregate"] else "none"
        lines.append(f"| {m} | {ms(r['randomize_s'])} | {ms(r['aggregate_s'])} | {ms(r['total_s'])} | "
                     f"{best['lib']} ({best['n_randomize']:,} / {agg_n}) | {ms(best['total_s'])} | "
                     f"{ratio:,.0f}× | {'✓' if ratio >= 100 else '✗'} |")
    lines += ["", "Every peer (scaled to the same n):", "",
              "| mechanism | peer | randomize /s | aggregate /s | randomize + aggregate, scaled |", "|---|---|---|---|---|"]
    for m, ps in peers.items():
        for p in ps:
            if p:
                agg = si(1 / p["aggregate_per_user"]) if p["aggregate_per_user"] else "-"
                lines.append(f"| {m} | {p['lib']} (n = {p['n_randomize']:,}) | {si(1 / p['randomize_per_user'])} | "
                             f"{agg} | {ms(p['total_s'])} |")
    lines += ["", "## Binding overhead against `harmony bench` (same mechanism, one thread)", "",
              f"`harmony bench --mechanisms M --d {args.d} --epsilon {args.eps} --n {n} --threads 1`: randomize_s "
              f"+ aggregate_s, alternated with the Python measurement ({args.rounds} rounds; Python: median of "
              f"{args.repeats} runs per round). Overhead: the median over the rounds of Python time / CLI time "
              "of the same round − 1; the times shown are medians. The Python time includes the argument checks, "
              "the numpy arrays and the DataFrame of the estimates.", "",
              "| mechanism | harmony bench | harmony_ldp | overhead | ≤ 10% | harmony_ldp randomize without a seed (ChaCha20) |",
              "|---|---|---|---|---|---|"]
    for m, o in overhead.items():
        lines.append(f"| {m} | {ms(o['cli'])} | {ms(o['py'])} | {100 * o['overhead']:+.1f}% | "
                     f"{'✓' if o['overhead'] <= 0.10 else '✗'} | {ms(rows[m]['os_randomize_s'])} |")
    lines += ["", "## GIL released: 2 Python threads", "",
              f"randomize + estimate of {n:,} users; speedup = 2 × t(1 thread) / t(2 threads doing it twice), "
              "best of 3.", "", "| mechanism | speedup (best) | all 3 | ≥ 1.7× |", "|---|---|---|---|"]
    for m, (best, all3) in threads.items():
        lines.append(f"| {m} | {best:.2f}× | {', '.join(f'{x:.2f}' for x in all3)} | {'✓' if best >= 1.7 else '✗'} |")
    lines.append("")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--harmony", default=os.path.join(ROOT, "target", "release", "harmony"))
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--d", type=int, default=1024)
    ap.add_argument("--eps", type=float, default=1.0)
    ap.add_argument("--repeats", type=int, default=5, help="Python runs per round (median)")
    ap.add_argument("--rounds", type=int, default=5, help="alternations of harmony bench and Python")
    ap.add_argument("--budget", type=float, default=10.0, help="seconds per peer measurement (default 10)")
    ap.add_argument("--quick", action="store_true", help="n = 10^5, 3 repeats, 2 s peer budget")
    ap.add_argument("--out", default=os.path.join(HERE, "RESULTS.md"))
    args = ap.parse_args()
    if args.quick:
        args.n, args.repeats, args.rounds, args.budget = 100_000, 3, 3, 2.0
        if args.out == os.path.join(HERE, "RESULTS.md"):
            args.out = os.path.join(HERE, "RESULTS-quick.md")
    start = time.perf_counter()
    values = workload(args.n, args.d)
    rows, overhead, peers, threads = {}, {}, {}, {}
    load_before = os.getloadavg()[0]
    for m, name in MECHS.items():
        cli, py = [], []
        for _ in range(args.rounds):
            cli.append(harmony_cli(args.harmony, name, args.d, args.eps, args.n)["total_s"])
            py.append(harmony_py(name, values, args.d, args.eps, args.repeats))
        rows[m] = medians(py)
        c, p = statistics.median(cli), rows[m]["total_s"]
        # Each round's Python time over the CLI time measured just before it (the pairs share
        # the machine's load); the median of those ratios.
        paired = statistics.median(q["total_s"] / x for q, x in zip(py, cli))
        overhead[m] = dict(cli=c, py=p, overhead=paired - 1)
        log(f"{m}: harmony bench {ms(c)}, harmony_ldp {ms(p)} (paired {100 * (paired - 1):+.1f}%)")
        peers[m] = []
        for lib in PEERS:
            pr = peer(lib, m, args.d, args.eps, args.budget)
            if pr:
                pr["total_s"] = (pr["randomize_per_user"] + pr["aggregate_per_user"]) * args.n
                log(f"{m}: {lib} randomize {si(1 / pr['randomize_per_user'])}/s (n={pr['n_randomize']}), "
                    f"scaled total {ms(pr['total_s'])}")
            peers[m].append(pr)
        threads[m] = gil(name, values, args.d, args.eps)
        log(f"{m}: 2 threads {threads[m][0]:.2f}x")
    args.load = (load_before, os.getloadavg()[0])
    write(args.out, args, rows, overhead, peers, threads, time.perf_counter() - start)
    log(f"wrote {args.out}")


if __name__ == "__main__":
    main()
