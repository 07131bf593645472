#!/usr/bin/env bash
# harmony_ldp vs the Python peers and vs `harmony bench`, in one Python process. Uses bench/.venv
# (bench/requirements.txt: the peers, pinned), installs the harmony-ldp wheel from
# crates/harmony-py into it, builds the release `harmony` binary, then runs bench.py, which
# writes bench/python/RESULTS.md (--quick: RESULTS-quick.md).
#
#   bench/python/run.sh            # full: n = 10^6, about 5 min on 2 cores
#   bench/python/run.sh --quick    # n = 10^5, about 1 min
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
BENCH="$(dirname "$HERE")"
ROOT="$(dirname "$BENCH")"
VENV="$BENCH/.venv"
PY="${PYTHON:-python3}"

if [ ! -x "$VENV/bin/python" ]; then
    echo "creating $VENV" >&2
    "$PY" -m venv "$VENV"
fi
STAMP="$VENV/.requirements.sha256"
WANT="$(sha256sum "$BENCH/requirements.txt" | cut -d' ' -f1)"
if [ "$(cat "$STAMP" 2>/dev/null || true)" != "$WANT" ]; then
    echo "installing bench/requirements.txt into $VENV" >&2
    "$VENV/bin/python" -m pip install --quiet -r "$BENCH/requirements.txt" >&2
    echo "$WANT" > "$STAMP"
fi
echo "building and installing the harmony-ldp wheel into $VENV" >&2
"$VENV/bin/python" -m pip install --quiet "$ROOT/crates/harmony-py" >&2
(cd "$ROOT" && cargo build --release -p harmony-cli >&2)
exec "$VENV/bin/python" "$HERE/bench.py" --harmony "$ROOT/target/release/harmony" "$@"
