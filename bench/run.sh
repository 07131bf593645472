#!/usr/bin/env bash
# Harmony vs Python LDP libraries. Creates bench/.venv (once; again when requirements.txt
# changes), builds the release `harmony` binary, then runs bench/compare.py, which writes the
# generated block of docs/BENCHMARKS.md (--quick: bench/results/BENCHMARKS-quick.md).
#
#   bench/run.sh            # full comparison, about 10 min on 2 cores
#   bench/run.sh --quick    # smoke run, about 2 min
# Any other argument is passed to compare.py (see `bench/.venv/bin/python bench/compare.py -h`).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(dirname "$HERE")"
VENV="$HERE/.venv"
PY="${PYTHON:-python3}"

if [ ! -x "$VENV/bin/python" ]; then
    echo "creating $VENV" >&2
    "$PY" -m venv "$VENV"
fi
STAMP="$VENV/.requirements.sha256"
WANT="$(sha256sum "$HERE/requirements.txt" | cut -d' ' -f1)"
if [ "$(cat "$STAMP" 2>/dev/null || true)" != "$WANT" ]; then
    echo "installing bench/requirements.txt into $VENV" >&2
    "$VENV/bin/python" -m pip install --quiet -r "$HERE/requirements.txt" >&2
    echo "$WANT" > "$STAMP"
fi

(cd "$ROOT" && cargo build --release -p harmony-cli >&2)
exec "$VENV/bin/python" "$HERE/compare.py" --harmony "$ROOT/target/release/harmony" "$@"
