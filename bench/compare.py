#!/usr/bin/env python3
"""Harmony vs Python LDP libraries: randomize (client) and aggregation (server) throughput.

    bench/run.sh                      # creates bench/.venv, builds harmony, runs this, writes docs/BENCHMARKS.md
    bench/.venv/bin/python bench/compare.py [--quick] [--budget S] [--harmony PATH] [--out FILE]

For every mechanism (GRR, OUE, OLH, HR, PM, HM, Duchi, Laplace) at eps = 1 and, for frequency
oracles, d in {16, 1024, 65536}, it measures on the same seeded workload (Zipf(1.1) categories,
U[-1, 1] numbers):
  * every Python peer library that implements the mechanism (pure-ldp, multi-freq-ldpy,
    ldp-toolbox, OpenDP), through its public per-user (or batch) API,
  * numpy_ref, a vectorised NumPy implementation of the same mechanism (not a peer),
  * Harmony, through `harmony bench --format json ... --threads 1`, run right before the Python
    measurements of the same mechanism (so both see the same load on a shared machine),
all single-threaded. Each Python measurement runs in its own process (OMP/OPENBLAS/NUMBA threads
= 1, LOKY_MAX_CPU_COUNT = 1) and is calibrated first: n is the largest of {1M, 300k, 100k, 30k,
10k, 3k, 1k, 300, 100} whose predicted time fits the budget (and whose reports fit in memory).
Aggregation (ingest every report + estimate all d frequencies) is measured on the reports of the
randomize step, for the mechanisms where a peer has a server side (OUE, OLH, HR).
It then runs a few Harmony-only measurements on all cores (OLH full-domain evaluations, OUE
aggregation, HR / Hadamard aggregation scaling in n and d, the `--quick` wall time) and writes the
tables into the generated block of docs/BENCHMARKS.md.
"""
import argparse
import datetime
import json
import math
import os
import platform
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

SINGLE_THREAD_ENV = dict(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1", NUMBA_NUM_THREADS="1",
                         LOKY_MAX_CPU_COUNT="1", PYTHONHASHSEED="0", PYTHONWARNINGS="ignore")
N_LADDER = [1_000_000, 300_000, 100_000, 30_000, 10_000, 3_000, 1_000, 300, 100]
EPS = 1.0
D_LIST = [16, 1024, 65536]
FREQ = ["GRR", "OUE", "OLH", "HR"]
NUMERIC = ["PM", "HM", "Duchi", "Laplace"]
HARMONY_NAME = {"GRR": "grr", "OUE": "oue", "OLH": "olh", "HR": "hr", "PM": "pm", "HM": "hm", "Duchi": "duchi",
                "Laplace": "laplace"}
BEGIN, END = "<!-- BEGIN GENERATED (bench/compare.py) -->", "<!-- END GENERATED -->"


# =============================================================================
# one measurement (runs in a child process: `compare.py --task JSON`)
# =============================================================================
def _take(reports, k):
    """The first k reports, whatever container the adapter returns."""
    if isinstance(reports, tuple):
        return tuple(r[:k] for r in reports)
    if isinstance(reports, list) and reports and hasattr(reports[0], "ndim") and reports[0].ndim == 2:
        import numpy as np  # numpy_ref OUE: a list of bit-packed row blocks
        return [np.concatenate(reports)[:k]]
    return reports[:k]


def _values(a, n, seed_n=None):
    from peers.common import data_seed, gen_categorical, gen_numeric
    seed_n = seed_n or n
    if a.kind == "numeric":
        v = gen_numeric("uniform", n, data_seed("num", "uniform", 0, seed_n))
    else:
        v = gen_categorical("zipf", a.d, n, data_seed("cat", "zipf", a.d, seed_n))
    return v.tolist() if a.wants_list else v


def _pick(per_item, fixed, budget, limit, bytes_per_item, mem_bytes):
    for n in N_LADDER:
        if n <= limit and fixed + per_item * n <= budget and bytes_per_item * n <= mem_bytes:
            return n
    return min(N_LADDER[-1], limit)


def run_task(spec):
    import numpy as np
    from peers.adapters import REGISTRY
    from peers.common import deep_size, seed_everything

    lib, mech, d, eps = spec["lib"], spec["mech"], spec["d"], spec["eps"]
    budget, max_n, mem = spec["budget"], spec["max_n"], spec["mem_gb"] * 2 ** 30
    cls = REGISTRY[(lib, mech)]
    seed_everything(1)
    t = time.perf_counter()
    a = cls(d, eps)
    t_setup = time.perf_counter() - t
    a.client(_values(a, 3))  # warm-up: numba JIT, lazy imports

    # calibrate the client on growing batches until one takes >= 0.2 s
    c = 100
    while True:
        v = _values(a, c)
        t = time.perf_counter()
        r = a.client(v)
        tc = time.perf_counter() - t
        if tc >= 0.2 or c >= max_n or tc * 10 > budget:
            break
        c *= 10
    per_user = tc / c
    rep_bytes = deep_size(r) / c + (8 if isinstance(r, list) else 0)
    del r, v
    n = _pick(per_user, 0.0, budget, max_n, rep_bytes, mem)

    values = _values(a, n)
    seed_everything(11)
    t = time.perf_counter()
    reports = a.client(values)
    t_client = time.perf_counter() - t
    del values
    out = dict(lib=lib, mech=mech, d=d, eps=eps, n=n, randomize_s=t_client, randomize_per_s=n / t_client,
               bytes_per_report=rep_bytes, setup_s=t_setup, notes=a.notes)

    if spec.get("aggregate") and a.has_server:
        c = min(100, n)
        while True:
            part = _take(reports, c)
            a.reset()
            t = time.perf_counter()
            a.server(part, c)
            ts = time.perf_counter() - t
            if ts >= 0.2 or c >= n or ts * 10 > spec["agg_budget"]:
                break
            c = min(n, c * 10)
        n_agg = _pick(ts / c, 0.0, spec["agg_budget"], n, 0, 1)
        part = _take(reports, n_agg)
        a.reset()
        t = time.perf_counter()
        est = np.asarray(a.server(part, n_agg), dtype=float)
        t_agg = time.perf_counter() - t
        assert est.shape == (d,), est.shape
        out.update(n_aggregate=n_agg, aggregate_s=t_agg, aggregate_per_s=n_agg / t_agg)
    return out


# =============================================================================
# driver
# =============================================================================
def child_env():
    env = dict(os.environ)
    env.update(SINGLE_THREAD_ENV)
    return env


def run_child(spec, timeout):
    cmd = [sys.executable, os.path.abspath(__file__), "--task", json.dumps(spec)]
    try:
        p = subprocess.run(cmd, env=child_env(), capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return dict(spec, error=f"timeout after {timeout:.0f} s")
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode != 0 or not lines:
        return dict(spec, error=(p.stderr.strip().splitlines() or ["no output"])[-1][:300])
    return json.loads(lines[-1])


def peer_tasks(args):
    from peers.adapters import REGISTRY
    tasks = []
    for mech in FREQ + NUMERIC:
        libs = [lib for (lib, m) in REGISTRY if m == mech]
        for d in ([1] if mech in NUMERIC else args.d):
            for lib in libs:
                if args.only and not any(o in f"{lib}:{mech}" for o in args.only):
                    continue
                tasks.append(dict(lib=lib, mech=mech, d=d, eps=EPS, budget=args.budget, agg_budget=args.budget,
                                  max_n=1_000_000, mem_gb=4.0, aggregate=mech in ("OUE", "OLH", "HR")))
    return tasks


def harmony_json(harmony, argv, timeout=900):
    """Runs `harmony bench --format json ARGV`; returns (rows, wall seconds)."""
    cmd = [harmony, "bench", "--format", "json"] + argv
    t = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    wall = time.perf_counter() - t
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {p.stderr.strip()[-500:]}")
    return json.loads(p.stdout)["results"], wall


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# =============================================================================
# report
# =============================================================================
def rate(x):
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "-"
    for div, suf in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if x >= div:
            return f"{x / div:.3g}{suf}"
    return f"{x:.3g}"


def nfmt(n):
    if n is None:
        return "-"
    return f"{n / 1e6:g}M" if n >= 1e6 else (f"{n / 1e3:g}k" if n >= 1e3 else str(int(n)))


def ratio(a, b, goal=None):
    """a / b as "12.3×"; with a goal, followed by ✓ (met) or ✗ (missed)."""
    if a is None or b is None or b == 0:
        return "-"
    r = a / b
    txt = f"{r:,.0f}×" if r >= 100 else (f"{r:.1f}×" if r >= 10 else f"{r:.2f}×")
    return txt if goal is None else txt + (" ✓" if r >= goal else " ✗")


def md_table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def best(rows, key):
    rows = [r for r in rows if r.get(key)]
    return max(rows, key=lambda r: r[key]) if rows else None


def with_n(r, key, nkey="n"):
    return "-" if r is None else f"{rate(r[key])} ({r['lib']}, n={nfmt(r[nkey])})"


def build_report(meta, peers, harm, extras, args):
    md = [BEGIN, ""]
    md.append(f"Generated {meta['date']} by `{meta['command']}` on {meta['machine']}.\n")
    md.append("Versions: " + ", ".join(f"{k} {v}" for k, v in meta["versions"].items()) + ".\n")
    if args.quick:
        md.append("**Quick mode** (small budgets, d ≤ 1024): indicative numbers only.\n")

    def hrow(mech, d):
        return harm.get((HARMONY_NAME[mech], 1 if mech in NUMERIC else d))

    # ---- randomize
    md.append("### Randomize (client) throughput, ε = 1, one thread\n")
    md.append("Reports per second. Best peer = the fastest Python library implementing the mechanism "
              "(n = the user count it was measured at: the largest that fitted the time budget). numpy_ref = "
              "vectorised NumPy, not a peer. Harmony: `harmony bench --threads 1`, batch API, seeded "
              "FastRng (`sampling::fast_rng`: 8 interleaved Xoshiro256++ streams, AVX-512 or AVX2 refill when available), "
              "through each mechanism's own batch API (SUE/OUE: the packed one, d-bit words; Duchi: the packed one, "
              "`randomize_signs`, one sign bit per report; Laplace: `randomize_units`, one i64 of grid units per report; "
              "the batch kernels run an AVX2 build when the CPU has it); "
              "the last column is the rate through the generic API: `AnyOracle::randomize_batch` (run-time dispatch, "
              "`AnyReport` output) for frequency oracles, `AnyNumeric::randomize_batch` (`NumericReport` output) for "
              "Duchi and Laplace. "
              "Goals: Harmony ≥ 100× best peer and ≥ 5× numpy.\n")
    H = ["mechanism", "d", "best Python peer", "numpy_ref", "Harmony", "Harmony / best peer", "Harmony / numpy",
         "Harmony via AnyOracle / AnyNumeric"]
    R = []
    for mech in FREQ + NUMERIC:
        for d in ([1] if mech in NUMERIC else args.d):
            rows = [r for r in peers if r["mech"] == mech and r["d"] == d and "error" not in r]
            bp = best([r for r in rows if r["lib"] != "numpy_ref"], "randomize_per_s")
            npr = best([r for r in rows if r["lib"] == "numpy_ref"], "randomize_per_s")
            h = hrow(mech, d)
            hr = h["randomize_per_s"] if h else None
            R.append([mech, d if mech not in NUMERIC else "-", with_n(bp, "randomize_per_s"),
                      with_n(npr, "randomize_per_s") if npr else "-",
                      f"{rate(hr)} (n={nfmt(h['n'])})" if h else "-", ratio(hr, bp and bp["randomize_per_s"], 100),
                      ratio(hr, npr and npr["randomize_per_s"], 5), rate(h.get("randomize_any_per_s")) if h else "-"])
    md.append(md_table(H, R) + "\n")

    # ---- aggregation
    md.append("### Aggregation (server) throughput, ε = 1, one thread\n")
    md.append("Reports per second through ingest + estimation of all d frequencies, on the reports of the "
              "randomize run (n = reports aggregated). For OLH the per-candidate hash evaluations per second "
              "(reports × d / s) are in brackets.\n")
    H = ["mechanism", "d", "best Python peer", "numpy_ref", "Harmony (1 thread)", "Harmony / best peer",
         "Harmony / numpy"]
    R = []
    for mech in ("OUE", "OLH", "HR"):
        for d in args.d:
            rows = [r for r in peers if r["mech"] == mech and r["d"] == d and r.get("aggregate_per_s")]
            bp = best([r for r in rows if r["lib"] != "numpy_ref"], "aggregate_per_s")
            npr = best([r for r in rows if r["lib"] == "numpy_ref"], "aggregate_per_s")
            h = hrow(mech, d)
            ha = h.get("aggregate_per_s") if h else None
            ev = f" [{rate(ha * d)} eval/s]" if ha and mech == "OLH" else ""
            R.append([mech, d, with_n(bp, "aggregate_per_s", "n_aggregate"),
                      with_n(npr, "aggregate_per_s", "n_aggregate") if npr else "-",
                      f"{rate(ha)} (n={nfmt(h['n'])}){ev}" if h else "-", ratio(ha, bp and bp["aggregate_per_s"]),
                      ratio(ha, npr and npr["aggregate_per_s"])])
    md.append(md_table(H, R) + "\n")

    # ---- all peers
    md.append("### Every Python measurement\n")
    H = ["mechanism", "d", "library", "n", "randomize/s", "bytes/report", "n aggregated", "aggregate/s", "notes"]
    R = []
    for r in peers:
        if "error" in r:
            R.append([r["mech"], r["d"], r["lib"], "-", "-", "-", "-", "-", "error: " + r["error"]])
            continue
        R.append([r["mech"], r["d"] if r["mech"] not in NUMERIC else "-", r["lib"], nfmt(r["n"]),
                  rate(r["randomize_per_s"]), f"{r['bytes_per_report']:.0f}", nfmt(r.get("n_aggregate")),
                  rate(r.get("aggregate_per_s")), r.get("notes", "")])
    md.append(md_table(H, R) + "\n")

    # ---- Harmony alone
    if extras:
        md.append("### Harmony alone, all cores\n")
        md.append(extras)
    md.append(END)
    return "\n".join(md)


def harmony_extras(harmony, quick):
    """Harmony-only acceptance figures on all cores. Returns (markdown, raw rows)."""
    md, raw = [], {}
    ncpu = os.cpu_count() or 1
    big = 100_000 if quick else 1_000_000
    log("harmony: OLH / OUE aggregation on all cores")
    rows, _ = harmony_json(harmony, ["--mechanisms", "olh,oue", "--d", "1024,65536", "--epsilon", "1", "--n", str(big)])
    raw["all_cores"] = rows
    H = ["mechanism", "d", "n", "threads", "aggregate s", "reports/s", "evaluations/s", "evaluations/s per thread"]
    R = []
    for r in rows:
        ev = r.get("evaluations_per_s")
        R.append([r["mechanism"], r["d"], nfmt(r["n"]), r["threads"], f"{r['aggregate_s']:.3g}",
                  rate(r["aggregate_per_s"]), rate(ev), rate(ev / r["threads"]) if ev else "-"])
    md.append(md_table(H, R) + "\n")
    for r in rows:
        if r["mechanism"] == "olh" and r["d"] == 65536:
            per = r["evaluations_per_s"] / r["threads"]
            md.append(f"* OLH full-domain aggregation, n = {nfmt(r['n'])}, d = 65 536: {rate(per)} evaluations/s per "
                      f"thread (goal ≥ 1G {'✓' if per >= 1e9 else '✗'}), {r['aggregate_s']:.1f} s on {r['threads']} "
                      f"threads (goal: well under a minute {'✓' if r['aggregate_s'] < 40 else '✗'}).")
        if r["mechanism"] == "oue" and r["d"] == 1024:
            a = r["aggregate_per_s"]
            md.append(f"* OUE aggregation, d = 1024, n = {nfmt(r['n'])}: {rate(a)} reports/s on {r['threads']} threads "
                      f"(goal ≥ 20M {'✓' if a >= 20e6 else '✗'}).")
    md.append("")

    log("harmony: HR / Hadamard aggregation vs n and d")
    H = ["mechanism", "n", "d", "aggregate s (add + estimate)", "of which add", "of which estimate", "reports/s"]
    R = []
    scaling = []
    for n in ([10_000, 100_000] if quick else [100_000, 1_000_000]):
        rows, _ = harmony_json(harmony, ["--mechanisms", "hr,hadamard", "--d", "1024,65536,1048576", "--epsilon", "1",
                                         "--n", str(n)])
        scaling += rows
    scaling.sort(key=lambda r: (r["mechanism"], r["n"], r["d"]))
    raw["scaling"] = scaling
    for r in scaling:
        est = r.get("estimate_s", 0.0)
        R.append([r["mechanism"], nfmt(r["n"]), r["d"], f"{r['aggregate_s']:.4f}", f"{r['aggregate_s'] - est:.4f}",
                  f"{est:.4f}", rate(r["aggregate_per_s"])])
    md.append("Aggregation time against n and d (O(n + d log d): the per-report part grows with n, the FWHT in "
              "`estimate` with d log d):\n")
    md.append(md_table(H, R) + "\n")

    log("harmony: --quick wall time")
    rows, wall = harmony_json(harmony, ["--quick"])
    raw["quick"] = dict(wall_s=wall, rows=len(rows))
    md.append(f"`harmony bench --quick --format json`: {wall:.1f} s wall, {len(rows)} result rows, "
              f"{ncpu} cores (goal < 30 s).\n")
    return "\n".join(md), raw


def machine_info():
    model = platform.processor() or "?"
    try:
        with open("/proc/cpuinfo") as fh:
            for ln in fh:
                if ln.startswith("model name"):
                    model = ln.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = ""
    try:
        with open("/proc/meminfo") as fh:
            mem = f", {int(fh.readline().split()[1]) / 2 ** 20:.0f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    return f"{model}, {os.cpu_count()} cores{mem}, {platform.system()} {platform.release()}"


def versions(harmony):
    from importlib.metadata import PackageNotFoundError, version
    v = {"Python": platform.python_version()}
    for p in ("numpy", "numba", "pure-ldp", "multi-freq-ldpy", "ldp-toolbox", "opendp"):
        try:
            v[p] = version(p)
        except PackageNotFoundError:
            v[p] = "missing"

    def out(cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT).stdout.strip()
        except OSError:
            return "?"
    v["rustc"] = out(["rustc", "--version"]).replace("rustc ", "")
    v["harmony"] = out([harmony, "--version"]).replace("harmony ", "")
    rev = out(["git", "rev-parse", "--short", "HEAD"])
    dirty = out(["git", "status", "--porcelain", "--untracked-files=no"])
    v["commit"] = rev + ("+changes" if dirty else "")
    return v


def write_doc(path, block):
    head = ("# Benchmarks\n\nHow fast Harmony randomizes and aggregates, next to the Python LDP libraries and a "
            "vectorised NumPy implementation of the same mechanisms. Everything between the markers below is "
            "regenerated by `bench/run.sh`; the notes after it are written by hand.\n\n")
    text = open(path).read() if os.path.exists(path) else head + BEGIN + "\n" + END + "\n"
    if BEGIN in text and END in text:
        pre, rest = text.split(BEGIN, 1)
        post = rest.split(END, 1)[1]
        text = pre + block + post
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        fh.write(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--task", help=argparse.SUPPRESS)
    ap.add_argument("--quick", action="store_true", help="small budgets, d in {16, 1024} (a smoke run)")
    ap.add_argument("--budget", type=float, help="seconds per Python measurement (default 8, quick 1)")
    ap.add_argument("--d", type=lambda s: [int(x) for x in s.split(",")], help="domain sizes (default 16,1024,65536)")
    ap.add_argument("--only", type=lambda s: s.split(","), help="only peer tasks matching lib:MECH substrings")
    ap.add_argument("--harmony", default=os.path.join(ROOT, "target", "release", "harmony"))
    ap.add_argument("--out", help="markdown file to update (default docs/BENCHMARKS.md; quick: bench/results/)")
    ap.add_argument("--no-extras", action="store_true", help="skip the Harmony-only all-core measurements")
    ap.add_argument("--skip-harmony", action="store_true", help="Python side only (development)")
    args = ap.parse_args()
    if args.task:
        print(json.dumps(run_task(json.loads(args.task)), default=float), flush=True)
        return

    args.budget = args.budget or (1.0 if args.quick else 8.0)
    args.d = args.d or ([16, 1024] if args.quick else D_LIST)
    results_dir = os.path.join(HERE, "results")
    os.makedirs(results_dir, exist_ok=True)
    out = args.out or (os.path.join(results_dir, "BENCHMARKS-quick.md") if args.quick
                       else os.path.join(ROOT, "docs", "BENCHMARKS.md"))
    if args.skip_harmony:
        args.no_extras = True
    elif not os.access(args.harmony, os.X_OK):
        sys.exit(f"harmony binary not found at {args.harmony}: cargo build --release -p harmony-cli")

    cmd = "bench/run.sh" + (" --quick" if args.quick else "")
    meta = dict(date=datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), machine=machine_info(),
                versions=versions(args.harmony), command=cmd)
    if args.skip_harmony:
        meta["versions"].pop("harmony")
    t0 = time.time()

    # 1-2. mechanism by mechanism: Harmony (one thread) right before every Python measurement of
    # the same mechanism, so both see the same load on the shared machine
    n = 100_000 if args.quick else 1_000_000
    hrows, peers = [], []
    tasks = peer_tasks(args)
    done = 0
    for mech in FREQ + NUMERIC:
        if not args.skip_harmony:
            log(f"harmony: {HARMONY_NAME[mech]} d={args.d} n={n} threads=1")
            rows, _ = harmony_json(args.harmony, ["--mechanisms", HARMONY_NAME[mech], "--d", ",".join(map(str, args.d)),
                                                  "--epsilon", "1", "--n", str(n), "--threads", "1"])
            hrows += rows
        for spec in [t for t in tasks if t["mech"] == mech]:
            t = time.time()
            r = run_child(spec, timeout=12 * args.budget + 120)
            peers.append(r)
            done += 1
            msg = r.get("error") or (f"n={nfmt(r['n'])} rand {rate(r['randomize_per_s'])}/s"
                                     + (f", agg {rate(r['aggregate_per_s'])}/s (n={nfmt(r['n_aggregate'])})"
                                        if r.get("aggregate_per_s") else ""))
            log(f"[{done}/{len(tasks)}] {spec['lib']}:{spec['mech']} d={spec['d']}: {msg} ({time.time() - t:.1f} s)")
    harm = {(r["mechanism"], r["d"]): r for r in hrows}

    # 3. Harmony alone on all cores
    extras, raw = ("", {}) if args.no_extras else harmony_extras(args.harmony, args.quick)

    block = build_report(meta, peers, harm, extras, args)
    write_doc(out, block)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    with open(os.path.join(results_dir, f"compare-{stamp}.json"), "w") as fh:
        json.dump(dict(meta=meta, harmony=hrows, peers=peers, extras=raw), fh, indent=1, default=float)
    print(block)
    log(f"done in {time.time() - t0:.0f} s; wrote {os.path.relpath(out, ROOT)} and bench/results/compare-{stamp}.json")


if __name__ == "__main__":
    main()
