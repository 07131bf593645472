"""Binding overhead of one frequency oracle, quickly: `harmony bench --threads 1` (randomize +
aggregate) against harmony_ldp's randomize(seed) + estimate at n = 10^6, d = 1024, eps = 1, five
alternated rounds (Python: median of 5 runs per round); prints each round and the median of
Python/CLI − 1. bench.py's full run adds the peers and the GIL test.

    python bench/python/overhead.py <harmony binary> grr|oue|olh|hr
"""
import json, statistics, subprocess, sys, time
import numpy as np
import harmony_ldp as hl
H = sys.argv[1]; mech = sys.argv[2]; n = 1_000_000; d = 1024
rng = np.random.default_rng(7)
p = 1.0 / np.arange(1, d + 1) ** 1.1; p /= p.sum()
values = rng.choice(d, size=n, p=p).astype(np.int64)
def once(o, seed):
    t0 = time.perf_counter(); r = o.randomize(values, seed=seed); t1 = time.perf_counter(); o.estimate(r); t2 = time.perf_counter()
    return t1 - t0, t2 - t1
def py():
    o = hl.FrequencyOracle(mech, epsilon=1.0, d=d); once(o, 0)
    runs = [once(o, 1 + i) for i in range(5)]
    return statistics.median(a + b for a, b in runs), statistics.median(a for a, _ in runs), statistics.median(b for _, b in runs)
def cli():
    out = subprocess.run([H, "bench", "--format", "json", "--mechanisms", mech, "--d", str(d), "--epsilon", "1", "--n", str(n), "--threads", "1"], capture_output=True, text=True, check=True).stdout
    r = json.loads(out)["results"][0]; return r["randomize_s"] + r["aggregate_s"], r["randomize_s"], r["aggregate_s"]
ratios = []
for _ in range(5):
    c = cli(); p_ = py(); ratios.append(p_[0] / c[0])
    print(f"cli {c[0]*1e3:.1f} ms (r {c[1]*1e3:.1f} a {c[2]*1e3:.1f})  py {p_[0]*1e3:.1f} ms (r {p_[1]*1e3:.1f} a {p_[2]*1e3:.1f})  ratio {p_[0]/c[0]:.3f}")
print(mech, "median overhead", f"{100*(statistics.median(ratios)-1):+.1f}%")
