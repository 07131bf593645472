#!/usr/bin/env bash
# multi-freq-ldpy's SMP / SPL solutions vs Harmony's sample-k (k = 1) / split on Adult's 9
# categorical attributes. Creates bench/multifreq/.venv (once; reinstalls when requirements.txt
# changes), builds the release `harmony` binary, then runs compare_smp_spl.py, which prints the
# tables and writes docs/MULTIFREQ.md. About 2-3 minutes on 2 cores with the defaults.
#
#   bench/multifreq/run.sh                         # 5 runs, eps 0.5,1,2,4
#   bench/multifreq/run.sh --runs 2 --epsilon 1    # quicker; --out - writes no file
# Arguments go to compare_smp_spl.py (`--help` lists them).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
VENV="$HERE/.venv"
PY="${PYTHON:-python3}"

if [ ! -x "$VENV/bin/python" ]; then
    echo "creating $VENV" >&2
    "$PY" -m venv "$VENV"
fi
STAMP="$VENV/.requirements.sha256"
WANT="$(sha256sum "$HERE/requirements.txt" | cut -d' ' -f1)"
if [ "$(cat "$STAMP" 2>/dev/null || true)" != "$WANT" ]; then
    echo "installing $HERE/requirements.txt into $VENV" >&2
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r "$HERE/requirements.txt" >&2
    echo "$WANT" > "$STAMP"
fi

(cd "$ROOT" && cargo build --release -p harmony-cli >&2)
exec "$VENV/bin/python" "$HERE/compare_smp_spl.py" --harmony "$ROOT/target/release/harmony" "$@"
