#!/usr/bin/env python3
"""Markdown tables of docs/LEARN.md from `harmony train --format json` outputs.

    python3 bench/learn/tables.py bench/learn/results/adult_logistic.json ...

Per file: the non-private reference and the trivial predictor (mean ± std over folds × repeats),
then one row per design (mechanism, and ` r = R` under projection) with "mean ± std" per ε and
the fraction of the gap between the trivial predictor and the non-private model closed at the
largest ε: (trivial − design) / (trivial − non-private).
"""
import json
import sys


def fmt(x):
    return f"{x:.4f}"


def table(path):
    d = json.load(open(path))
    np_, base = d["non_private"], d["baseline"]
    name = "majority class" if base["name"] == "majority" else "mean predictor"
    out = [f"<!-- {path} -->", "",
           f"non-private {fmt(np_['mean'])} ± {fmt(np_['std'])}, {name} {fmt(base['mean'])} ± {fmt(base['std'])}.", ""]
    eps = sorted({r["epsilon"] for r in d["results"]})
    rows = {}
    for r in d["results"]:
        key = r["mechanism"] + (f" r = {r['projection_dim']}" if r.get("projection_dim") else "")
        rows.setdefault(key, {})[r["epsilon"]] = r
    top = eps[-1]
    out.append("| design | " + " | ".join(f"ε = {e:g}" for e in eps) + f" | gap closed at ε = {top:g} |")
    out.append("|---|" + "---|" * (len(eps) + 1))
    gap = base["mean"] - np_["mean"]
    for key, by in rows.items():
        cells = [f"{fmt(by[e]['mean'])} ± {fmt(by[e]['std'])}" if e in by else "-" for e in eps]
        closed = f"{100 * (base['mean'] - by[top]['mean']) / gap:.0f}%" if top in by and gap > 0 else "-"
        out.append(f"| {key} | " + " | ".join(cells) + f" | {closed} |")
    return "\n".join(out)


if __name__ == "__main__":
    print("\n\n".join(table(p) for p in sys.argv[1:]))
