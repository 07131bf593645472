#!/bin/bash
# docs/SCALE.md's rate tables: three rounds of `harmony bench` (one thread: the aggregators fed
# decoded reports in memory) interleaved with the scale example (DataFusion on 1 and 2 partitions
# and its scan of the body column, best of 3 each; the in-process path in the first round), on an
# idle machine. JSON into OUT; the medians are what the docs quote.
#
#   bench/scale/rounds.sh DATA MECHANISMS D N OUT
#   bench/scale/rounds.sh /tmp/scale-data grr,oue,olh,hadamard 16 10000000 /tmp/rounds-d16
#   bench/scale/rounds.sh /tmp/scale-d1024 olh,hr,bassily-smith,sue 1024 3000000 /tmp/rounds-d1024
#   bench/scale/rounds.sh /tmp/scale-means pm,duchi,laplace 16 10000000 /tmp/rounds-means  # means-pm, …; D ignored
#
# DATA comes from `target/release/examples/scale generate DATA REPORTS MECHANISMS D`. Builds:
#   cargo build --release -p harmony-dist --example scale
#   cargo build --release -p harmony-cli -p workspace-hack   # the same features: no second build
set -euo pipefail
[ $# -eq 5 ] || { sed -n 2,12p "$0"; exit 2; }
DATA=$1 MECHS=$2 D=$3 N=$4 OUT=$5
cd "$(dirname "$0")/../.."
mkdir -p "$OUT"
for r in 1 2 3; do
  target/release/harmony bench --mechanisms "$MECHS" --d "$D" --epsilon 1 --threads 1 --n "$N" --format json > "$OUT/bench-$r.json"
  if [ "$r" = 1 ]; then local_flag=(); else local_flag=(--no-local); fi
  target/release/examples/scale time "$DATA" 1,2 "${local_flag[@]}" > "$OUT/scale-$r.jsonl"
done
python3 - "$OUT" <<'PY'
import glob, json, statistics as st, sys
out = sys.argv[1]
bench, scale = {}, {}
for f in glob.glob(f"{out}/bench-*.json"):
    for r in json.load(open(f))["results"]:
        bench.setdefault(r["mechanism"], []).append(r["aggregate_per_s"] / 1e6)
for f in glob.glob(f"{out}/scale-*.jsonl"):
    for line in open(f):
        r = json.loads(line)
        scale.setdefault((r["collection"].split("=")[1], r["engine"], r["partitions"]), []).append(r["per_s"] / 1e6)
med = lambda k: st.median(scale.get(k, [float("nan")]))
for b_name, b in bench.items():
    # A means collection (`means-pm`) is compared with bench's aggregator of its mechanism (`pm`).
    m = b_name if any(k[0] == b_name for k in scale) else f"means-{b_name}"
    df1, df2 = med((m, "datafusion", 1)), med((m, "datafusion", 2))
    print(f"{m}: bench {st.median(b):.1f} M/s, scan {med((m, 'scan', 1)):.1f}, DataFusion {df1:.1f} "
          f"({100 * df1 / st.median(b):.0f}%), 2 partitions {df2:.1f} ({df2 / df1:.2f}x), in-process {med((m, 'local', 1)):.2f}")
PY
