#!/usr/bin/env bash
# The OpenAPI document and the server agree: schemathesis (every phase, every check) against
# `harmony serve` on loopback (SQLite in a scratch directory), bounded by --max-examples and
# --max-time. Installs schemathesis into a venv (pinned) unless SCHEMATHESIS names one.
# Usage: scripts/schemathesis.sh [HARMONY_BIN] (default target/debug/harmony). Exit 0: no failure.
# Env: ST_MAX_EXAMPLES (default 50), ST_MAX_TIME seconds (default 150), ST_PORT (default 23461).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-target/debug/harmony}
PORT=${ST_PORT:-23461}
DIR=$(mktemp -d /tmp/harmony-schemathesis.XXXXXX)
pid=""
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$DIR"
}
trap cleanup EXIT
ST=${SCHEMATHESIS:-}
if [ -z "$ST" ]; then
  python3 -m venv "$DIR/venv"
  "$DIR/venv/bin/pip" install --quiet "schemathesis==4.32.5"
  ST="$DIR/venv/bin/schemathesis"
fi
# A random admin token of 32 hex characters, passed through the environment (not argv).
TOKEN=$(python3 -c 'import secrets; print(secrets.token_hex(16))')
HARMONY_ADMIN_TOKEN="$TOKEN" "$BIN" serve --db "sqlite://$DIR/db.sqlite" --listen "127.0.0.1:$PORT" \
  --log-level warn > "$DIR/serve.log" 2>&1 &
pid=$!
for _ in $(seq 100); do
  if curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null 2>&1; then break; fi
  sleep 0.1
done
# Every check (`--checks all`), every phase (examples, coverage, fuzzing, stateful).
set +e
NO_PROXY=127.0.0.1 no_proxy=127.0.0.1 "$ST" --config-file scripts/schemathesis.toml run \
  "http://127.0.0.1:$PORT/openapi.json" -H "Authorization: Bearer $TOKEN" --checks all \
  --max-examples "${ST_MAX_EXAMPLES:-50}" --max-time "${ST_MAX_TIME:-150}" --request-timeout 10 -w 2 \
  --seed 1 --report junit --report-dir "$DIR/report"
rc=$?
set -e
if ! kill -0 "$pid" 2>/dev/null; then echo "harmony serve exited during the run" >&2; cat "$DIR/serve.log" >&2; exit 1; fi
exit $rc
