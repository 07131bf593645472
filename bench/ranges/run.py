#!/usr/bin/env python3
"""Acceptance experiments for range queries and quantiles (docs/ANALYTICS-RANGES.md).

Runs `harmony simulate --task range|quantiles --format json` on Adult's age and hours_per_week
and on census_income_kdd's numeric columns, and prints:
  1. per (column, method, eps): empirical MSE over the random ranges and runs, the closed-form
     prediction and their ratio (HH: the raw estimator; its consistent MSE and the reduction beside);
  2. the winner per (column, eps), by empirical MSE (raw HH and consistent HH listed apart);
  3. quantile coverage of the 95% interval (median, p90 by default) at eps = 1.
Each run goes through the `range` task a server runs (the experiment runner's JSON: per setting
`label`, `epsilon`, `metrics` {mean, std_error}, `seconds_per_run`, run 1's `estimates`).

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
# The domain size D of each column: D equal-width bins over the schema's [min, max] (about one per
# integer value; 64 for the money columns). Given explicitly because the example schemas' `[bins]`
# are coarse bins meant for marginals (2–9 per column), which `--task range` would otherwise take.
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
    rows, quant = [], []
    t0 = time.time()
    for data, schema, cols in sets:
        runs = runs_of[data]
        for col in cols:
            key = f"{os.path.basename(data).split('.')[0]}:{col}"
            base = ["--data", data, "--schema", schema, "--column", col, "--seed", str(a.seed),
                    "--bins", str(BINS[key])]
            r = harmony(a.bin, base + ["--task", "range", "--runs", str(runs), "--queries", str(a.queries),
                                       "--epsilon", "0.5,1,2,4"])
            qs = {lvl: harmony(a.bin, base + ["--task", "quantiles", "--runs", str(a.qruns), "--epsilon", "1",
                                              "--quantiles", lvl]) for lvl in ("0.5", "0.9")}
            if a.json_dir:
                os.makedirs(a.json_dir, exist_ok=True)
                for kind, obj in [("range", r)] + [(f"quantile_{k}", v) for k, v in qs.items()]:
                    with open(os.path.join(a.json_dir, f"{key.replace(':', '_')}_{kind}.json"), "w") as f:
                        json.dump(obj, f, indent=1)
            for res in r["results"]:
                rows.append((key, r["n"], BINS[key], r["runs"], res))
            for q in qs.values():
                for res in q["results"]:
                    quant.append((key, q["truth"]["bins"], res))
            print(f"# done {key} ({time.time() - t0:.0f} s)", file=sys.stderr)

    mean = lambda res, k: res["metrics"][k]["mean"]
    print(f"## Ranges: {a.queries} random ranges per (method, eps), runs as listed\n")
    print("| column | n | D | runs | method | eps | unbiased MSE | predicted MSE | ratio ± se | consistent MSE | reduction |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    ratios, reds = [], []
    for name, n, d, nr, res in rows:
        u, p = res["metrics"]["unbiased_mse"], mean(res, "predicted_mse")
        ratios.append(u["mean"] / p)
        se = (u["std_error"] or float("nan")) / p
        hh = res["label"] == "hh"
        if hh:
            reds.append(1 - mean(res, "mse") / u["mean"])
        print(f"| {name} | {n} | {d} | {nr} | {res['label']} | {res['epsilon']} | {u['mean']:.3e} | {p:.3e} | "
              f"{u['mean'] / p:.3f} ± {se:.3f} | "
              + (f"{mean(res, 'mse'):.3e} | {100 * reds[-1]:.0f}% |" if hh else "- | - |"))
    inside = sum(0.85 <= x <= 1.15 for x in ratios)
    print(f"\nratio in [0.85, 1.15]: {inside}/{len(ratios)} (min {min(ratios):.3f}, max {max(ratios):.3f})")
    if reds:
        print(f"consistency lowers HH's MSE by {100 * min(reds):.0f}% to {100 * max(reds):.0f}% "
              f"(median {100 * sorted(reds)[len(reds) // 2]:.0f}%)")

    print("\n## Winner per (column, eps) by empirical MSE\n")
    print("| column | eps | best of hh(raw)/haar/flat | best incl. consistent hh | MSEs hh-raw / hh-cons / haar / flat |")
    print("|---|---|---|---|---|")
    cells = {}
    for name, _, _, _, res in rows:
        cells.setdefault((name, res["epsilon"]), {})[res["label"]] = res
    for (name, eps), m in cells.items():
        raw = {k: mean(v, "unbiased_mse") for k, v in m.items()}
        best = min(raw, key=raw.get)
        allm = dict(raw)
        if "hh" in m:
            allm["hh-consistent"] = mean(m["hh"], "mse")
        best_all = min(allm, key=allm.get)
        fmt = lambda k: f"{allm[k]:.2e}" if k in allm else "-"
        print(f"| {name} | {eps} | {best} | {best_all} | {fmt('hh')} / {fmt('hh-consistent')} / {fmt('haar')} / {fmt('flat')} |")

    print(f"\n## Quantiles at eps = 1: 95% interval coverage over {a.qruns} runs\n")
    print("| column | D | method | q | true bin | run-1 estimate (units) | run-1 interval (units) | coverage | mean abs bin error |")
    print("|---|---|---|---|---|---|---|---|---|")
    covs = []
    for name, freqs, res in quant:
        e = res["estimates"]["quantiles"][0]
        acc, true_bin = 0.0, len(freqs) - 1
        for t, f in enumerate(freqs):
            acc += f
            if acc >= e["q"] - 1e-12:
                true_bin = t
                break
        cov = mean(res, "quantile_coverage")
        covs.append(cov)
        print(f"| {name} | {len(freqs)} | {res['label']} | {e['q']} | {true_bin} | "
              f"[{e['value'][0]:g}, {e['value'][1]:g}) | [{e['interval'][0]:g}, {e['interval'][1]:g}) | "
              f"{100 * cov:.0f}% | {mean(res, 'quantile_bin_error'):.2f} |")
    print(f"\ncoverage >= 93%: {sum(c >= 0.93 for c in covs)}/{len(covs)} (min {100 * min(covs):.0f}%)")


if __name__ == "__main__":
    main()
