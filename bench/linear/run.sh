#!/usr/bin/env bash
# Reproduces the linear-query figures of docs/ANALYTICS-LINEAR.md (seed 1), then the divan
# micro-benchmarks. About 1 minute on 2 cores after the build.
#
#   bench/linear/run.sh            # acceptance figures + micro-benchmarks
#   bench/linear/run.sh --no-bench # acceptance figures only
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$ROOT"
cargo build -p harmony-cli >&2
H="$ROOT/target/debug/harmony"

echo "== projection in the high-dimensional regime: identity, J = 1000, n = 5000, eps = 1, 20 runs"
"$H" simulate --task linear-queries --synthetic 5000 --synthetic-domain 1000 --epsilon 1 --runs 20 --method gaussian,hr
echo "== same, every eps (10 runs)"
"$H" simulate --task linear-queries --synthetic 5000 --synthetic-domain 1000 --epsilon 0.5,1,2,4 --runs 10
echo "== HR vs HR + simplex on Adult's largest categorical attribute (native_country), 50 runs"
"$H" simulate --task linear-queries --method hr --runs 50
echo "== example workloads on Adult (eps = 1, 20 runs)"
"$H" simulate --task linear-queries --queries examples/queries/adult_sex_race.json --epsilon 1 --runs 20
"$H" simulate --task linear-queries --queries examples/queries/adult_native_country.json --epsilon 1 --runs 20
"$H" simulate --task linear-queries --queries examples/queries/adult_education.csv --attributes education --epsilon 1 --runs 20
"$H" simulate --task linear-queries --schema examples/queries/adult_binned.toml \
    --queries examples/queries/adult_age_sex.json --epsilon 1 --runs 20
if [ "${1:-}" != "--no-bench" ]; then
    echo "== micro-benchmarks (divan, release)"
    cargo bench -p harmony-analytics --bench linear
fi
