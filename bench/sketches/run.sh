#!/usr/bin/env bash
# Harmony's CMS, HCMS and RAPPOR beside pure-ldp 1.2.0's on census_income_kdd's largest
# categorical column (bench/sketches/compare.py): frequency MSE over runs and the time of a run,
# one thread. Creates bench/sketches/.venv (again when requirements.txt changes), builds the
# release `harmony`, writes the generated block of docs/SKETCHES.md and
# bench/sketches/results/sketches-*.json. Harmony's side: crates/harmony-core/examples/sketch_column.rs.
#
#   bench/sketches/run.sh                          # eps 1 and 4, 20 Harmony / 4 pure-ldp runs (~40 min)
#   bench/sketches/run.sh --epsilon 2 --peer-runs 2   # any other compare.py option
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
VENV="$HERE/.venv"
if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
fi
STAMP="$VENV/.requirements.sha256"
WANT="$(sha256sum "$HERE/requirements.txt" | cut -d' ' -f1)"
if [ "$(cat "$STAMP" 2>/dev/null || true)" != "$WANT" ]; then
    "$VENV/bin/python" -m pip install --quiet -r "$HERE/requirements.txt" >&2
    echo "$WANT" > "$STAMP"
fi
(cd "$ROOT" && cargo build --release -q -p harmony-cli && cargo build --release -q -p harmony-core --example sketch_column) >&2
exec "$VENV/bin/python" "$HERE/compare.py" --harmony "$ROOT/target/release/harmony" "$@"
