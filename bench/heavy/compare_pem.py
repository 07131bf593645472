#!/usr/bin/env python3
"""Top-k heavy hitters: Harmony (`harmony simulate --task heavy-hitters`) against pure-ldp's PEM
on identical input, one table: F1 mean ± sd over runs, seconds per run, speed ratio.

Input: a CSV (optionally .xz) and either --column COL (one item per user) or --column '*' with
--schema TOML (each row is the set of its `attribute=value` items over the schema's attributes).
The script builds the users' item sets once and writes them to a transactions file (one user per
line, items separated by a tab); Harmony reads that file. Items get dense ids 0..D-1 in sorted
order (B = ceil(log2(D + 1)) bits, the all-ones id reserved for padding); the peer receives each
user's sampled item as a B-bit string, Harmony the same ids (`--items id --item-bits B`) and, in
a second row, the item strings hashed to 32 bits (its default; no dictionary needed).

Both sample one item per user after padding the set to L items (L = the 90th percentile of the
set sizes, as Harmony's default; a padding draw reports the all-ones id, which is dropped from
the peer's output as Harmony drops it). True top k: the k items held by most users (ties by
name), as in Harmony. Peer: PEMClient/PEMServer with OLH, start_length = floor(log2 k) and
fragment_length = 1 (the first group estimates floor(log2 k) + 1 bits, one bit per group after:
the PEM paper's code, pem.py). Timing: privatise + aggregate + find_heavy_hitters for the peer,
randomize + aggregate + estimate for Harmony (its JSON `seconds_per_run`), parsing excluded for
both.
"""
import argparse
import csv
import io
import json
import lzma
import math
import os
import random
import subprocess
import sys
import tempfile
import time
import tomllib

import numpy as np


def read_sets(path, column, schema):
    opener = lzma.open if path.endswith(".xz") else open
    with opener(path, "rt", newline="") as f:
        rows = list(csv.reader(f))
    header = [h.strip() for h in rows[0]]
    rows = rows[1:]
    if column == "*":
        with open(schema, "rb") as f:
            attrs = [a["name"] for a in tomllib.load(f)["attributes"]]
        cols = [(header.index(a), a) for a in attrs]
    else:
        cols = [(header.index(column), None)]
    sets = []
    for r in rows:
        s = []
        for j, a in cols:
            v = r[j].strip()
            if v:
                s.append(v if a is None else f"{a}={v}")
        sets.append(s)
    return sets


def f1(found, truth):
    hits = len(set(found) & set(truth))
    p = hits / len(found) if found else 0.0
    r = hits / len(truth)
    return 0.0 if p + r == 0 else 2 * p * r / (p + r)


def run_peer(ids_per_user, bits, pad, k, eps, seed):
    from pure_ldp.heavy_hitters.prefix_extending.pem_client import PEMClient
    from pure_ldp.heavy_hitters.prefix_extending.pem_server import PEMServer

    random.seed(seed)
    np.random.seed(seed % 2**32)
    start = max(int(math.floor(math.log2(k))), 1)
    client = PEMClient(epsilon=eps, start_length=start, max_string_length=bits, fragment_length=1)
    server = PEMServer(epsilon=eps, start_length=start, max_string_length=bits, fragment_length=1)
    padding = (1 << bits) - 1
    t0 = time.perf_counter()
    for s in ids_per_user:
        slots = max(pad, len(s))
        j = random.randrange(slots)
        item = s[j] if j < len(s) else padding
        server.aggregate(client.privatise(format(item, f"0{bits}b")))
    hh, _ = server.find_heavy_hitters(k=k + 1)
    found = [int(h, 2) for h in hh if int(h, 2) != padding][:k]
    return found, time.perf_counter() - t0


def run_harmony(binary, tx, extra, k, epsilons, runs, seed):
    cmd = [binary, "simulate", "--task", "heavy-hitters", "--transactions", tx, "--separator", "\t",
           "--top", str(k), "--epsilon", ",".join(map(str, epsilons)), "--runs", str(runs),
           "--seed", str(seed), "--format", "json"] + extra
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True)
    ap.add_argument("--column", required=True, help="a column, or '*' for attribute=value items (needs --schema)")
    ap.add_argument("--schema")
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("--epsilon", default="1,2,4")
    ap.add_argument("--runs", type=int, default=10, help="Harmony runs per epsilon")
    ap.add_argument("--peer-runs", type=int, default=1, help="pure-ldp PEM runs per epsilon (slow)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--harmony", default=os.path.join(os.path.dirname(__file__), "../../target/release/harmony"))
    a = ap.parse_args()
    epsilons = [float(e) for e in a.epsilon.split(",")]
    k = a.top

    sets = read_sets(a.data, a.column, a.schema)
    sets = [sorted(set(s)) for s in sets]
    names = sorted({x for s in sets for x in s})
    if any("\t" in x or "\n" in x for x in names):
        sys.exit("an item contains a tab or a newline; the transactions file cannot hold it")
    index = {x: i for i, x in enumerate(names)}
    bits = max(math.ceil(math.log2(len(names) + 1)), 2)
    ids_per_user = [[index[x] for x in s] for s in sets]
    counts = np.zeros(len(names), dtype=np.int64)
    for s in ids_per_user:
        counts[s] += 1
    order = sorted(range(len(names)), key=lambda i: (-counts[i], names[i]))
    truth = order[:k]
    sizes = sorted(len(s) for s in sets)
    pad = max(sizes[max(math.ceil(0.9 * len(sizes)), 1) - 1], 1)
    if sizes[-1] <= 1:
        pad = 1
    print(f"# {a.data} ({a.column}): n = {len(sets)}, {len(names)} distinct items, ids of {bits} bits, "
          f"padding L = {pad}, top {k}", file=sys.stderr)

    with tempfile.TemporaryDirectory() as tmp:
        tx_names = os.path.join(tmp, "names.tsv")
        tx_ids = os.path.join(tmp, "ids.tsv")
        with open(tx_names, "w") as f:
            f.writelines("\t".join(s) + "\n" for s in sets)
        with open(tx_ids, "w") as f:
            f.writelines("\t".join(map(str, s)) + "\n" for s in ids_per_user)
        base = ["--pad-length", str(pad)]
        h_ids = run_harmony(a.harmony, tx_ids, base + ["--items", "id", "--item-bits", str(bits)], k, epsilons, a.runs, a.seed)
        h_hash = run_harmony(a.harmony, tx_names, base, k, epsilons, a.runs, a.seed)
    # Harmony's truth must be the script's (same data, same tie rule).
    assert [str(i) for i in truth] == [t[0] for t in h_ids["true_top_k"]], "true top-k differs"

    rows = []
    for ei, eps in enumerate(epsilons):
        f1s, secs = [], []
        for r in range(a.peer_runs):
            found, s = run_peer(ids_per_user, bits, pad, k, eps, a.seed * 1000 + ei * 100 + r)
            f1s.append(f1(found, truth))
            secs.append(s)
            print(f"# peer eps={eps} run {r}: F1 {f1s[-1]:.3f}, {s:.1f} s", file=sys.stderr)
        rows.append((eps, h_ids["results"][ei], h_hash["results"][ei], np.mean(f1s), np.std(f1s, ddof=1) if len(f1s) > 1 else 0.0, np.mean(secs)))

    print(f"top-{k} heavy hitters, {a.data} ({'attribute=value items' if a.column == '*' else 'column ' + a.column}), "
          f"n = {len(sets)}, {len(names)} items, L = {pad}; Harmony {a.runs} runs, pure-ldp PEM {a.peer_runs} run(s) per eps")
    print(f"{'eps':>4} | {'Harmony ids F1':>15} {'s/run':>7} | {'Harmony hash32 F1':>17} {'s/run':>7} | "
          f"{'pure-ldp PEM F1':>15} {'s/run':>8} | {'speed ratio (ids, hash32)':>26}")
    for eps, hi, hh, pf, psd, ps in rows:
        print(f"{eps:>4g} | {hi['f1_mean']:>7.3f} ± {hi['f1_sd']:<5.3f} {hi['seconds_per_run']:>7.3f} | "
              f"{hh['f1_mean']:>9.3f} ± {hh['f1_sd']:<5.3f} {hh['seconds_per_run']:>7.3f} | "
              f"{pf:>7.3f} ± {psd:<5.3f} {ps:>8.1f} | "
              f"{ps / hi['seconds_per_run']:>11.0f}x {ps / hh['seconds_per_run']:>11.0f}x")
    print(f"Harmony levels (prefix bits): ids {[l['prefix_bits'] for l in h_ids['results'][0]['levels']]}, "
          f"hash32 {[l['prefix_bits'] for l in h_hash['results'][0]['levels']]}; "
          f"peer groups: {bits - max(int(math.floor(math.log2(k))), 1)} (one bit each)")


if __name__ == "__main__":
    main()
