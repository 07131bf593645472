#!/usr/bin/env python3
"""Harmony's sketch oracles (CMS, HCMS, RAPPOR) beside pure-ldp 1.2.0's, on census_income_kdd's
largest categorical column: frequency MSE over runs (with its standard error) and the time of
one run (randomize every user + aggregate + estimate, one thread).

    bench/sketches/run.sh                       # venv, release build, this script, docs/SKETCHES.md
    bench/sketches/.venv/bin/python bench/sketches/compare.py --harmony target/release/harmony

Both sides get the same parameters: CMS / HCMS with k hash functions onto m buckets; RAPPOR with
an m-bit Bloom filter, h hashes, C cohorts and the permanent randomized response f =
2/(1 + e^(eps/2h)) only (pure-ldp has no instantaneous response), so eps is the budget of one
report on both sides (pure-ldp's own `epsilon` = 2h ln((1 - f/2)/(f/2)) = eps). Every run draws a
fresh hash family on both sides (Harmony: `seed=` in the mechanism name; pure-ldp: its public
`generate_hash` with random seeds for CMS/HCMS, its own random seeds for RAPPOR), so the MSE is
averaged over hash families on both sides.

Harmony runs through crates/harmony-core/examples/sketch_column.rs (`AnyOracle::by_name` with the
parameters, the client's randomizer for every user, one report added at a time, estimate), one
thread, one process per run; its `seconds` is the timed run (reading the codes excluded). A
collection (`harmony simulate/collection create --task frequency --categorical-mechanism cms`)
takes the sketches by kind with their default parameters and fixed seeds, so it cannot draw a
fresh hash family per run. pure-ldp runs through its public per-user API: `privatise` for every
user, `aggregate_all`, `estimate_all`, timed together.

pure-ldp's RAPPOR client never clears a set Bloom bit (`RAPPORClient._perturb` sets a bit to 1
with probability 1 - f/2 when it is set and f/2 when it is not, but has no branch that sets it to
0), so P[reported 1 | Bloom bit 1] = 1 instead of 1 - f/2: a 0 in a report proves the item's
Bloom bit is 0 (not eps-LDP for any eps), and the server's debiasing (count - f/2 N)/(1 - f)
inflates the set bits by (1 - f/2)/(1 - f). It is measured as shipped (a probe counts the set
Bloom bits reported 0), and with `_perturb` corrected (the permanent response RAPPOR specifies:
each bit replaced by a fair coin with probability f); the corrected reports are decoded both by
pure-ldp's server (a non-negative ridge regression, ElasticNet alpha = 0.025 f) and by ordinary
least squares on pure-ldp's own design matrix and response (`_create_X`, `_create_y`), the
estimator Harmony implements (unbiased).
"""
import argparse
import datetime
import json
import math
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
import tomllib

import numpy as np
import pandas as pd

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BEGIN, END = "<!-- BEGIN GENERATED (bench/sketches/compare.py) -->", "<!-- END GENERATED -->"


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# =============================================================================
# data
# =============================================================================
def largest_column(schema_path):
    """The categorical attribute of the schema with the most labels: (name, labels)."""
    with open(schema_path, "rb") as fh:
        attrs = tomllib.load(fh)["attributes"]
    cats = [a for a in attrs if a["kind"] == "categorical"]
    best = max(cats, key=lambda a: len(a["categories"]))
    return best["name"], best["categories"]


def load_column(data_path, column, labels):
    raw = pd.read_csv(data_path, usecols=[column], dtype=str, keep_default_na=False)[column]
    raw = raw.where(raw != "", "?")  # as harmony's reader: an empty categorical field is "?"
    index = {lab: i for i, lab in enumerate(labels)}
    bad = set(raw) - set(index)
    if bad:
        sys.exit(f"{column}: values outside the schema's labels: {sorted(bad)[:5]}")
    return np.array([index[v] for v in raw], dtype=np.int64)


# =============================================================================
# Harmony
# =============================================================================
def harmony_spec(oracle, p, seed):
    if oracle == "rappor":
        return f"rappor:m={p['m']}:h={p['h']}:cohorts={p['cohorts']}:seed={seed}"
    return f"{oracle}:k={p['k']}:m={p['m']}:seed={seed}"


def harmony_run(example, codes_path, oracle, p, eps, seed, d):
    """One run of the `sketch_column` example (one thread): (estimates, seconds of the run)."""
    cmd = [example, harmony_spec(oracle, p, seed), str(eps), str(seed), codes_path, str(d)]
    out = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
    return np.array(out["estimates"]), out["seconds"]


def harmony_bench(harmony, oracle, p, eps, d, n):
    """`harmony bench` of the packed batch API, one thread: (randomize/s, aggregate/s)."""
    cmd = [harmony, "bench", "--format", "json", "--mechanisms", harmony_spec(oracle, p, 1), "--d", str(d),
           "--epsilon", str(eps), "--n", str(n), "--threads", "1"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    row = json.loads(out.stdout)["results"][0]
    return row["randomize_per_s"], row["aggregate_per_s"]


# =============================================================================
# pure-ldp
# =============================================================================
class _NoneShapeNumpy:
    """pure-ldp's FreqOracleServer does np.zeros(self.d) with d = None for the sketch oracles;
    NumPy 2 raises 'Use () not None as shape arguments'. The peer harness's shim for that one
    call (/work/shared/peers/adapters.py, RESULTS.md "Installation problems" 4)."""

    def __init__(self, real):
        self._np = real

    def __getattr__(self, k):
        return getattr(self._np, k)

    def zeros(self, shape, *a, **kw):
        return self._np.zeros(0 if shape is None else shape, *a, **kw)


def _patch():
    import pure_ldp.core._freq_oracle_server as fos
    if not isinstance(fos.np, _NoneShapeNumpy):
        fos.np = _NoneShapeNumpy(fos.np)


def ident(x):
    return x


def fixed_rappor_client():
    """pure-ldp's RAPPORClient with the permanent response corrected (see the module docs)."""
    from pure_ldp.frequency_oracles.rappor import RAPPORClient

    class FixedRAPPORClient(RAPPORClient):
        def _perturb(self, data):
            for i, bit in enumerate(data):
                u = random.random()
                data[i] = 1 if (bit == 1 and u < 1 - 0.5 * self.f) or (bit == 0 and u < 0.5 * self.f) else 0
            return data

    return FixedRAPPORClient


def rappor_probe(p, eps, d, users=2000, seed=7):
    """pure-ldp's RAPPOR as shipped: (set Bloom bits reported 0, set Bloom bits, expected share f/2)."""
    from pure_ldp.frequency_oracles.rappor import RAPPORClient, RAPPORServer
    random.seed(seed)
    f = 2.0 / (1.0 + math.exp(eps / (2 * p["h"])))
    server = RAPPORServer(f, p["m"], p["h"], d, num_of_cohorts=p["cohorts"], index_mapper=ident)
    client = RAPPORClient(f, p["m"], server.get_hash_funcs(), num_of_cohorts=p["cohorts"], index_mapper=ident)
    zeros = total = 0
    for u in range(users):
        x = u % d
        bits, cohort = client.privatise(x)
        for h in server.get_hash_funcs()[cohort]:
            total += 1
            zeros += bits[h(str(x))] == 0
    return zeros, total, f / 2


def peer_run(oracle, p, eps, values, d, seed, shipped=False):
    """One pure-ldp run: {decoder: estimates}, seconds (privatise + aggregate + estimate).
    RAPPOR: the corrected client, or pure-ldp's as shipped when `shipped`."""
    import warnings
    warnings.filterwarnings("ignore")
    random.seed(seed)
    np.random.seed(seed % 2**32)
    n = len(values)
    vals = values.tolist()
    out = {}
    if oracle in ("cms", "hcms"):
        from pure_ldp.core import generate_hash
        from pure_ldp.frequency_oracles.apple_cms import CMSClient, CMSServer
        _patch()
        had = oracle == "hcms"
        server = CMSServer(eps, p["k"], p["m"], is_hadamard=had)
        # A fresh hash family per run (pure-ldp's default is seeds 0..k-1, the same every run).
        server.hash_funcs = [generate_hash(p["m"], random.getrandbits(32)) for _ in range(p["k"])]
        client = CMSClient(eps, server.get_hash_funcs(), p["m"], is_hadamard=had)
        t = time.perf_counter()
        reports = [client.privatise(v) for v in vals]
        server.aggregate_all(reports)
        est = np.asarray(server.estimate_all(range(d), suppress_warnings=True), dtype=float) / n
        secs = time.perf_counter() - t
        out["default"] = est
    else:
        from pure_ldp.frequency_oracles.rappor import RAPPORClient, RAPPORServer
        f = 2.0 / (1.0 + math.exp(eps / (2 * p["h"])))
        server = RAPPORServer(f, p["m"], p["h"], d, num_of_cohorts=p["cohorts"], index_mapper=ident)
        cls = RAPPORClient if shipped else fixed_rappor_client()
        client = cls(f, p["m"], server.get_hash_funcs(), num_of_cohorts=p["cohorts"], index_mapper=ident)
        t = time.perf_counter()
        reports = [client.privatise(v) for v in vals]
        server.aggregate_all(reports)
        est = np.asarray(server.estimate_all(range(d), suppress_warnings=True), dtype=float) / n
        secs = time.perf_counter() - t
        out["default"] = est
        # The same reports decoded by ordinary least squares (pure-ldp's own X and y).
        coef = np.linalg.lstsq(server._create_X(), server._create_y(), rcond=None)[0]
        out["ols"] = coef * p["cohorts"] / n
        assert abs(server.epsilon - eps) < 1e-9, (server.epsilon, eps)
    return out, secs


# =============================================================================
# report
# =============================================================================
def mse(est, truth):
    return float(np.mean((est - truth) ** 2))


def summary(xs):
    xs = np.asarray(xs, dtype=float)
    se = xs.std(ddof=1) / math.sqrt(len(xs)) if len(xs) > 1 else float("nan")
    return float(xs.mean()), float(se)


def fmt(m, se):
    return f"{m:.3e} ± {se:.1e}"


def params_text(oracle, p):
    if oracle == "rappor":
        return f"m={p['m']}, h={p['h']}, C={p['cohorts']}, PRR only"
    return f"k={p['k']}, m={p['m']}"


VARIANTS = {
    "default": "pure-ldp",
    "ols": "pure-ldp, PRR corrected, least squares",
    "fixed-default": "pure-ldp, PRR corrected, its ElasticNet",
    "shipped": "pure-ldp as shipped (not LDP), its ElasticNet",
}


def build(meta, rows, speed, probes, args):
    md = [BEGIN, ""]
    md.append(f"Generated {meta['date']} by `{meta['command']}` on {meta['machine']}.\n")
    md.append("Versions: " + ", ".join(f"{k} {v}" for k, v in meta["versions"].items()) + ".\n")
    md.append(f"Data: `{meta['data']}`, column `{meta['column']}` (the schema's categorical attribute with the "
              f"most labels: d = {meta['d']}), n = {meta['n']} users; {meta['load']}.\n")
    md.append("### Frequency MSE (mean over the d labels of (f̂ − f)², mean ± standard error over runs)\n")
    md.append(f"Harmony: {args.runs} runs; pure-ldp: {args.peer_runs} runs ({args.shipped_runs} as shipped); a "
              "fresh hash family every run on both sides. z = (Harmony − pure-ldp)/√(SE² + SE²): |z| < 3 is "
              "equal within noise.\n")
    hdr = ["oracle", "parameters", "ε", "Harmony MSE", "pure-ldp", "pure-ldp MSE", "z"]
    out = ["| " + " | ".join(hdr) + " |", "|" + "---|" * len(hdr)]
    for r in rows:
        h = r["harmony"]
        for key, label in VARIANTS.items():
            if key not in r["peer"]:
                continue
            pm = r["peer"][key]
            z = (h[0] - pm[0]) / math.hypot(h[1], pm[1])
            out.append(f"| {r['oracle'].upper()} | {params_text(r['oracle'], r['params'])} | {r['eps']:g} | "
                       f"{fmt(*h)} | {label} | {fmt(*pm)} | {z:+.2f} |")
    md.append("\n".join(out) + "\n")
    for eps, (zeros, total, half) in sorted(probes.items()):
        md.append(f"* pure-ldp's RAPPOR as shipped, ε = {eps:g}: of {total} set Bloom bits of {total // 2} reports, "
                  f"{zeros} were reported 0 (a correct permanent response reports 0 with probability f/2 = {half:.3f}: "
                  f"about {half * total:.0f}).")
    md.append("")
    md.append("### Speed: one run (randomize every user + aggregate + estimate), one thread\n")
    md.append("Seconds per run, mean over the runs above (pure-ldp RAPPOR: the corrected client, the same per-bit "
              "loop as shipped). Harmony per user: the client path (`AnyOracle::randomize`, one `AnyReport` per "
              "user, added one by one; examples/sketch_column.rs). Harmony batch API: `harmony bench --threads 1` at the same n "
              "and d (`randomize_packed` + `add_packed` for CMS and RAPPOR, `randomize_batch` + `add_batch` for "
              "HCMS), as n·(1/randomize rate + 1/aggregate rate). Goal: ≥ 100×.\n")
    hdr = ["oracle", "ε", "pure-ldp s/run", "Harmony per user s/run", "ratio", "Harmony batch API s/run", "ratio"]
    out = ["| " + " | ".join(hdr) + " |", "|" + "---|" * len(hdr)]
    for r in rows:
        s = speed[(r["oracle"], r["eps"])]
        ps, hs = r["peer_secs"], r["harmony_secs"]
        bs = meta["n"] * (1 / s[0] + 1 / s[1])
        out.append(f"| {r['oracle'].upper()} | {r['eps']:g} | {ps:.1f} | {hs:.4f} | {ps / hs:,.0f}× | {bs:.4f} | "
                   f"{ps / bs:,.0f}× |")
    md.append("\n".join(out) + "\n")
    md.append(END)
    return "\n".join(md)


def write_doc(path, block):
    text = open(path).read() if os.path.exists(path) else BEGIN + "\n" + END + "\n"
    pre, rest = text.split(BEGIN, 1)
    post = rest.split(END, 1)[1]
    with open(path, "w") as fh:
        fh.write(pre + block + post)


def versions(harmony):
    from importlib.metadata import version
    v = {"Python": platform.python_version()}
    for p in ("numpy", "pure-ldp", "xxhash", "scikit-learn"):
        v[p] = version(p)
    run = lambda c: subprocess.run(c, capture_output=True, text=True, cwd=ROOT).stdout.strip()
    v["rustc"] = run(["rustc", "--version"]).replace("rustc ", "")
    v["commit"] = run(["git", "rev-parse", "--short", "HEAD"]) + (
        "+changes" if run(["git", "status", "--porcelain", "--untracked-files=no"]) else "")
    return v


def machine():
    model = "?"
    with open("/proc/cpuinfo") as fh:
        for ln in fh:
            if ln.startswith("model name"):
                model = ln.split(":", 1)[1].strip()
                break
    return f"{model}, {os.cpu_count()} cores, {platform.system()} {platform.release()}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--harmony", default=os.path.join(ROOT, "target", "release", "harmony"))
    ap.add_argument("--example", default=os.path.join(ROOT, "target", "release", "examples", "sketch_column"))
    ap.add_argument("--data", default=os.path.join(ROOT, "data", "census_income_kdd.csv.xz"))
    ap.add_argument("--schema", default=os.path.join(ROOT, "examples", "census_income_kdd.toml"))
    ap.add_argument("--epsilon", type=lambda s: [float(x) for x in s.split(",")], default=[1.0, 4.0])
    ap.add_argument("--oracles", type=lambda s: s.split(","), default=["cms", "hcms", "rappor"])
    ap.add_argument("--runs", type=int, default=20, help="Harmony runs per cell")
    ap.add_argument("--peer-runs", type=int, default=4, help="pure-ldp runs per cell")
    ap.add_argument("--shipped-runs", type=int, default=2, help="runs of pure-ldp's RAPPOR as shipped")
    ap.add_argument("--k", type=int, default=256)
    ap.add_argument("--m", type=int, default=1024)
    ap.add_argument("--rappor-m", type=int, default=128)
    ap.add_argument("--rappor-h", type=int, default=2)
    ap.add_argument("--cohorts", type=int, default=8)
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "SKETCHES.md"))
    args = ap.parse_args()

    column, labels = largest_column(args.schema)
    values = load_column(args.data, column, labels)
    n, d = len(values), len(labels)
    truth = np.bincount(values, minlength=d) / n
    log(f"{column}: d = {d}, n = {n}, top frequency {truth.max():.4f}")
    tmp = tempfile.mkdtemp(prefix="sketches-")
    codes_path = os.path.join(tmp, "codes.txt")
    np.savetxt(codes_path, values, fmt="%d")
    params = {"cms": dict(k=args.k, m=args.m), "hcms": dict(k=args.k, m=args.m),
              "rappor": dict(m=args.rappor_m, h=args.rappor_h, cohorts=args.cohorts)}
    load0 = os.getloadavg()[0]
    rows, speed, raw, probes = [], {}, [], {}
    for oracle in args.oracles:
        p = params[oracle]
        for eps in args.epsilon:
            hm, hs = [], []
            for r in range(args.runs):
                est, secs = harmony_run(args.example, codes_path, oracle, p, eps, 1000 + r, d)
                hm.append(mse(est, truth))
                hs.append(secs)
            log(f"harmony {oracle} eps={eps}: MSE {np.mean(hm):.3e}, {np.mean(hs):.4f} s/run")
            speed[(oracle, eps)] = harmony_bench(args.harmony, oracle, p, eps, d, n)
            pm, ps = {}, []
            for r in range(args.peer_runs):
                est, secs = peer_run(oracle, p, eps, values, d, 2000 + r)
                for k, e in est.items():
                    pm.setdefault("fixed-default" if (oracle == "rappor" and k == "default") else k, []).append(
                        mse(e, truth))
                ps.append(secs)
                log(f"pure-ldp {oracle} eps={eps} run {r}: " +
                    ", ".join(f"{k} MSE {v[-1]:.3e}" for k, v in pm.items()) + f", {secs:.1f} s")
            if oracle == "rappor":
                probes[eps] = rappor_probe(p, eps, d)
                for r in range(args.shipped_runs):
                    est, secs = peer_run(oracle, p, eps, values, d, 3000 + r, shipped=True)
                    pm.setdefault("shipped", []).append(mse(est["default"], truth))
                    log(f"pure-ldp as shipped rappor eps={eps} run {r}: MSE {pm['shipped'][-1]:.3e}, {secs:.1f} s")
            rows.append(dict(oracle=oracle, eps=eps, params=p, harmony=summary(hm), harmony_secs=float(np.mean(hs)),
                             peer={k: summary(v) for k, v in pm.items()}, peer_secs=float(np.mean(ps))))
            raw.append(dict(rows[-1], harmony_mse=hm, peer_mse=pm, harmony_secs_all=hs, peer_secs_all=ps,
                            batch=speed[(oracle, eps)]))
    load1 = os.getloadavg()[0]
    meta = dict(date=datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), machine=machine(),
                versions=versions(args.harmony), command="bench/sketches/run.sh",
                data=os.path.relpath(args.data, ROOT), column=column, d=d, n=n,
                load=f"load average {load0:.1f} at the start, {load1:.1f} at the end")
    block = build(meta, rows, speed, probes, args)
    write_doc(args.out, block)
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    with open(os.path.join(HERE, "results", f"sketches-{stamp}.json"), "w") as fh:
        json.dump(dict(meta=meta, rows=raw), fh, indent=1, default=float)
    print(block)


if __name__ == "__main__":
    main()
