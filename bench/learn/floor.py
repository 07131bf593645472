#!/usr/bin/env python3
"""Exact least-squares floors of linear regression with and without MGD-DR's random projection.

A private model trained on the projected features x' = (1, P x) can at best reach the test MSE of
the exact least-squares fit on those features with all the data and no noise. This script
computes that floor (NumPy `lstsq`, no regularisation) for a random P ∈ {±1/√r}^{r×(d−1)} (the
`norm` scaling of harmony-learn, intercept kept) and several r, beside the mean predictor and the
unprojected fit. Features are encoded as harmony-learn does (intercept 1, numeric attributes
mapped to [-1, 1] by the schema's range, categorical attributes one-hot in {0, 1} with the first
label as reference); the target is on its [-1, 1] scale and predictions are clamped to [-1, 1].
10 folds (its own permutation, seed 1), three draws of P per fold. Nothing here is private; it
is a feasibility check of the MGD-DR criterion of docs/LEARN.md.

    python3 bench/learn/floor.py data/census_income_kdd.csv.xz examples/census_income_kdd.toml \
        weeks_worked_in_year 20,40,60,100      # ~2 min, 3 GB of memory
    python3 bench/learn/floor.py data/adult.csv examples/adult.toml hours_per_week 20,40

Needs numpy and pandas: `bench/run.sh` creates bench/.venv with both (bench/requirements.txt), so
`bench/.venv/bin/python bench/learn/floor.py …` works after it.
"""
import sys
import tomllib

import numpy as np
import pandas as pd


def encode(data, schema, target):
    attributes = tomllib.load(open(schema, "rb"))["attributes"]
    df = pd.read_csv(data, dtype=str, keep_default_na=False)
    df.columns = [c.strip() for c in df.columns]
    cols, y = [np.ones(len(df))], None
    for a in attributes:
        v = df[a["name"]].str.strip()
        if a["kind"] == "numeric":
            s = 2 * (pd.to_numeric(v).to_numpy(float) - a["min"]) / (a["max"] - a["min"]) - 1
            if a["name"] == target:
                y = s
            else:
                cols.append(np.clip(s, -1, 1))
        elif a["name"] != target:
            v = v.replace("", "?")
            cols.extend((v == c).to_numpy(float) for c in a["categories"][1:])
    if y is None:
        sys.exit(f"target {target!r}: not a numeric attribute of {schema}")
    return np.column_stack(cols), y


def test_mse(X, y, train, test):
    w, *_ = np.linalg.lstsq(X[train], y[train], rcond=None)
    return np.mean((np.clip(X[test] @ w, -1, 1) - y[test]) ** 2)


def main():
    data, schema, target = sys.argv[1:4]
    rs = [int(r) for r in sys.argv[4].split(",")] if len(sys.argv) > 4 else [20]
    X, y = encode(data, schema, target)
    n, d = X.shape
    rng = np.random.default_rng(1)
    perm = rng.permutation(n)
    splits = []
    for f in range(10):
        keep = np.ones(n, bool)
        keep[perm[f::10]] = False
        splits.append((np.where(keep)[0], perm[f::10]))
    print(f"{data}, target {target}: n = {n}, d = {d}; 10 folds; test MSE on [-1, 1]\n")
    print("| model | test MSE (mean ± std) | best draw |\n|---|---|---|")
    mean = [np.mean((y[te] - y[tr].mean()) ** 2) for tr, te in splits]
    print(f"| mean predictor | {np.mean(mean):.4f} ± {np.std(mean):.4f} | |")
    full = [test_mse(X, y, tr, te) for tr, te in splits]
    print(f"| exact least squares, no projection | {np.mean(full):.4f} ± {np.std(full):.4f} | |")
    for r in rs:
        out = []
        for tr, te in splits:
            for _ in range(3):
                P = rng.choice([-1.0, 1.0], size=(d - 1, r)) / np.sqrt(r)
                out.append(test_mse(np.column_stack([X[:, :1], X[:, 1:] @ P]), y, tr, te))
        print(f"| exact least squares on (1, Px), r = {r} (30 draws of P) | "
              f"{np.mean(out):.4f} ± {np.std(out):.4f} | {np.min(out):.4f} |")


if __name__ == "__main__":
    main()
