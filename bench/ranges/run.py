#!/usr/bin/env python3
"""Acceptance experiments for range queries and quantiles (docs/ANALYTICS-RANGES.md).

Runs `harmony simulate --task range|quantiles --format json` on Adult's age and hours_per_week
and on census_income_kdd's numeric columns, and prints:
  1. per (column, method, eps): empirical MSE over the random ranges and runs, the closed-form
     prediction and their ratio (HH: the raw estimator; its consistent MSE and the reduction beside);
  2. the winner per (column, eps), by empirical MSE (raw HH and consistent HH listed apart);
  3. quantile coverage of the 95% interval (median, p90 by default) at eps = 1;
  4. the time to answer 10^6 random ranges from one collection.

Usage: python3 bench/ranges/run.py [--runs 200] [--qruns 100] [--queries 1000] [--quick]
                                   [--bin target/release/harmony] [--json-dir DIR]
Only the standard library is needed.
"""
import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
ADULT = ("data/adult.csv", "examples/adult.toml", ["age", "hours_per_week"])
CENSUS = ("data/census_income_kdd.csv.xz", "examples/census_income_kdd.toml", [
    "age", "wage_per_hour", "capital_gains", "capital_losses", "dividends_from_stocks",
    "num_persons_worked_for_employer", "own_business_or_self_employed", "veterans_benefits",
    "weeks_worked_in_year"])
# The domain size D of each column: one bin per integer value (64 equal-width bins for the money
# columns). Given explicitly because the example schemas' `[bins]` are coarse bins meant for
# marginals (2–9 per column), which `--task range` would otherwise take.
BINS = {
    "adult:age": 74, "adult:hours_per_week": 99,
    "census_income_kdd:age": 91, "census_income_kdd:wage_per_hour": 64,
    "census_income_kdd:capital_gains": 64, "census_income_kdd:capital_losses": 64,
    "census_income_kdd:dividends_from_stocks": 64,
    "census_income_kdd:num_persons_worked_for_employer": 7,
    "census_income_kdd:own_business_or_self_employed": 3,
    "census_income_kdd:veterans_benefits": 3, "census_income_kdd:weeks_worked_in_year": 53,
}


def harmony(binary, args):
    out = subprocess.run([binary, "simulate", "--format", "json"] + args, cwd=ROOT,
                         capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"harmony {' '.join(args)} failed:\n{out.stderr}")
    return json.loads(out.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "target", "release", "harmony"))
    ap.add_argument("--runs", type=int, default=200, help="range runs on Adult")
    ap.add_argument("--census-runs", type=int, default=60, help="range runs on census_income_kdd (6x the users)")
    ap.add_argument("--qruns", type=int, default=100)
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--quick", action="store_true", help="Adult only, 20 runs")
    ap.add_argument("--json-dir", help="also save each JSON output here")
    a = ap.parse_args()
    sets = [ADULT] if a.quick else [ADULT, CENSUS]
    runs_of = {ADULT[0]: 20 if a.quick else a.runs, CENSUS[0]: a.census_runs}
    rows, quant, speed = [], [], []
    t0 = time.time()
    for data, schema, cols in sets:
        runs = runs_of[data]
        for col in cols:
            key = f"{os.path.basename(data).split('.')[0]}:{col}"
            base = ["--data", data, "--schema", schema, "--column", col, "--seed", str(a.seed),
                    "--bins", str(BINS[key])]
            r = harmony(a.bin, base + ["--task", "range", "--runs", str(runs), "--queries", str(a.queries),
                                       "--epsilon", "0.5,1,2,4"])
            q = harmony(a.bin, base + ["--task", "quantiles", "--runs", str(a.qruns), "--epsilon", "1",
                                       "--quantiles", "0.5,0.9"])
            if a.json_dir:
                os.makedirs(a.json_dir, exist_ok=True)
                for kind, obj in (("range", r), ("quantiles", q)):
                    with open(os.path.join(a.json_dir, f"{os.path.basename(data).split('.')[0]}_{col}_{kind}.json"), "w") as f:
                        json.dump(obj, f, indent=1)
            name = f"{os.path.basename(data).split('.')[0]}:{col}"
            for res in r["results"]:
                rows.append((name, r["n"], r["bins"], r["runs"], res))
                speed.append((name, res["method"], res["epsilon"], res["million_queries"]))
            for res in q["results"]:
                for qq in res["quantiles"]:
                    quant.append((name, q["bins"], res["method"], qq))
            print(f"# done {name} ({time.time() - t0:.0f} s)", file=sys.stderr)

    print(f"## Ranges: {a.queries} random ranges per (method, eps), runs as listed\n")
    print("| column | n | D | runs | method | eps | B | empirical MSE | predicted MSE | ratio ± se | consistent MSE | reduction |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    ratios = []
    for name, n, d, nr, res in rows:
        cons = res.get("consistent_mse")
        ratios.append(res["ratio"])
        print(f"| {name} | {n} | {d} | {nr} | {res['method']} | {res['epsilon']} | {res['branching'] or '-'} | "
              f"{res['empirical_mse']:.3e} | {res['predicted_mse']:.3e} | {res['ratio']:.3f} ± {res.get('ratio_se', float('nan')):.3f} | "
              + (f"{cons:.3e} | {100 * res['consistency_reduction']:.0f}% |" if cons is not None else "- | - |"))
    inside = sum(0.85 <= x <= 1.15 for x in ratios)
    print(f"\nratio in [0.85, 1.15]: {inside}/{len(ratios)} (min {min(ratios):.3f}, max {max(ratios):.3f})")
    reds = [res["consistency_reduction"] for _, _, _, _, res in rows if "consistency_reduction" in res]
    if reds:
        print(f"consistency lowers HH's MSE by {100 * min(reds):.0f}% to {100 * max(reds):.0f}% "
              f"(median {100 * sorted(reds)[len(reds) // 2]:.0f}%)")

    print("\n## Winner per (column, eps) by empirical MSE\n")
    print("| column | eps | best of hh(raw)/haar/flat | best incl. consistent hh | MSEs hh-raw / hh-cons / haar / flat |")
    print("|---|---|---|---|---|")
    cells = {}
    for name, _, _, _, res in rows:
        cells.setdefault((name, res["epsilon"]), {})[res["method"]] = res
    for (name, eps), m in cells.items():
        raw = {k: v["empirical_mse"] for k, v in m.items()}
        best = min(raw, key=raw.get)
        allm = dict(raw)
        if "hh" in m:
            allm["hh-consistent"] = m["hh"]["consistent_mse"]
        best_all = min(allm, key=allm.get)
        fmt = lambda k: f"{allm[k]:.2e}" if k in allm else "-"
        print(f"| {name} | {eps} | {best} | {best_all} | {fmt('hh')} / {fmt('hh-consistent')} / {fmt('haar')} / {fmt('flat')} |")

    print(f"\n## Quantiles at eps = 1: 95% interval coverage over {a.qruns} runs\n")
    print("| column | D | method | q | true value | true bin | run-0 estimate (units) | run-0 interval (units) | coverage |")
    print("|---|---|---|---|---|---|---|---|---|")
    covs = []
    for name, d, method, qq in quant:
        covs.append(qq["coverage"])
        e = qq["estimate"]
        print(f"| {name} | {d} | {method} | {qq['q']} | {qq['true_value']:g} | {qq['true_bin']} | "
              f"[{e['units'][0]:g}, {e['units'][1]:g}) | [{e['interval_units'][0]:g}, {e['interval_units'][1]:g}) | "
              f"{100 * qq['coverage']:.0f}% |")
    print(f"\ncoverage >= 93%: {sum(c >= 0.93 for c in covs)}/{len(covs)} (min {100 * min(covs):.0f}%)")

    print("\n## Speed: 10^6 random ranges answered from one collection\n")
    worst = max(s["seconds"] for _, _, _, s in speed)
    worst_raw = max((s.get("raw_seconds", 0.0) for _, _, _, s in speed), default=0.0)
    print(f"slowest: {worst:.4f} s (O(1) prefix sums; HH raw O(h·B) decomposition: {worst_raw:.4f} s)")


if __name__ == "__main__":
    main()
