#!/usr/bin/env bash
# Harmony heavy hitters vs pure-ldp PEM (bench/heavy/compare_pem.py) on census_income_kdd:
# attribute=value items (one sampled per user) and one string column. Creates its own venv.
# Usage: bench/heavy/run.sh [HARMONY_RUNS] [PEER_RUNS]   (defaults 10 and 1; the peer takes minutes)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
runs="${1:-10}"
peer_runs="${2:-1}"
if [ ! -x "$here/.venv/bin/python" ]; then
  python3 -m venv "$here/.venv"
fi
"$here/.venv/bin/pip" install -q -r "$here/requirements.txt"
(cd "$root" && cargo build --release -q -p harmony-cli)
py="$here/.venv/bin/python"
"$py" "$here/compare_pem.py" --data "$root/data/census_income_kdd.csv.xz" --column '*' \
  --schema "$root/examples/census_income_kdd.toml" --runs "$runs" --peer-runs "$peer_runs"
echo
"$py" "$here/compare_pem.py" --data "$root/data/census_income_kdd.csv.xz" \
  --column detailed_household_and_family_stat --runs "$runs" --peer-runs "$peer_runs"
