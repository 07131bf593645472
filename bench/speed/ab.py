#!/usr/bin/env python3
"""Speed of two `harmony` binaries side by side: `harmony bench --quick` (randomize and aggregate
throughput of every mechanism) and `harmony load` per task (reports/s into the embedded SQLite
server), alternating A B, B A, … round by round so that drift on a shared machine falls on both.

    python3 bench/speed/ab.py A_BIN B_BIN [--rounds 5] [--reports 300000] [--skip-bench]

Prints, per case, the median over rounds of B/A (and its range), then the geometric mean over
bench --quick's entries. A ratio above 1 means B is faster.
"""
import argparse
import json
import math
import statistics
import subprocess

LOADS = [
    ("means (sample-k)", []),
    ("frequency (education)", ["--task", "frequency", "--column", "education"]),
    ("range (age, hh)", ["--task", "range", "--column", "age", "--method", "hh"]),
    ("linear-queries (hr)", ["--task", "linear-queries", "--method", "hr", "--attributes", "native_country"]),
    ("heavy-hitters (pem)", ["--task", "heavy-hitters", "--column", "education", "--method", "pem"]),
    ("marginals (calm, 5)", ["--task", "marginals", "--attributes", "sex,race,income,workclass,relationship"]),
]


def run_json(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def bench(binary):
    d = run_json([binary, "bench", "--quick", "--format", "json"])
    rows = {}
    for r in d["results"]:
        key = f"{r['mechanism']} d={r['d']}"
        rows[key + " randomize"] = r["randomize_per_s"]
        rows[key + " aggregate"] = r["aggregate_per_s"]
    return rows


def load(binary, args, reports):
    cmd = [binary, "load", "--reports", str(reports), "--estimate-queries", "1", "--json", *args]
    return run_json(cmd)["reports_per_second"]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--reports", type=int, default=300_000)
    p.add_argument("--skip-bench", action="store_true")
    args = p.parse_args()
    ratios = {}
    for r in range(args.rounds):
        order = [args.a, args.b] if r % 2 == 0 else [args.b, args.a]
        if not args.skip_bench:
            got = {b: bench(b) for b in order}
            for k in got[args.a]:
                if got[args.a][k] and got[args.b].get(k):
                    ratios.setdefault(("bench", k), []).append(got[args.b][k] / got[args.a][k])
        for label, extra in LOADS:
            got = {b: load(b, extra, args.reports) for b in order}
            ratios.setdefault(("load", label), []).append(got[args.b] / got[args.a])
        print(f"round {r + 1}/{args.rounds} done", flush=True)
    for (kind, label), rs in sorted(ratios.items()):
        if kind == "load":
            print(f"load   {label:<28} B/A median {statistics.median(rs):.3f}  range {min(rs):.3f}–{max(rs):.3f}")
    bench_medians = [statistics.median(rs) for (kind, _), rs in ratios.items() if kind == "bench"]
    if bench_medians:
        geo = math.exp(sum(math.log(x) for x in bench_medians) / len(bench_medians))
        within = sum(1 for x in bench_medians if 0.95 <= x)
        print(f"bench --quick: {len(bench_medians)} figures, geometric mean of the per-figure medians B/A {geo:.3f};"
              f" {within} of {len(bench_medians)} at ≥ 0.95; lowest {min(bench_medians):.3f}, highest {max(bench_medians):.3f}")
        for (kind, label), rs in sorted(ratios.items()):
            if kind == "bench" and statistics.median(rs) < 0.95:
                print(f"  below 0.95: {label} median {statistics.median(rs):.3f} ({', '.join(f'{x:.2f}' for x in rs)})")


if __name__ == "__main__":
    main()
