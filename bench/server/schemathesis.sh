#!/usr/bin/env bash
# schemathesis (PyPI) against a running `harmony serve`'s own OpenAPI document, with the admin
# token: every phase (examples, coverage, fuzzing, stateful via the document's links) and the
# checks of issue 17's acceptance — no 5xx, responses conform to the document (status codes,
# content types, bodies). Loopback only; the server and the venv are temporary.
#   bench/server/schemathesis.sh [MAX_EXAMPLES]     (default 300: ~5,000+ generated requests;
#   200 generated 3,781 on 2026-11-26, all passing)
# Uses $HARMONY, else target/release/harmony, else target/debug/harmony.
set -euo pipefail
cd "$(dirname "$0")/../.."
max=${1:-300}
bin=${HARMONY:-}
[ -z "$bin" ] && for b in target/release/harmony target/debug/harmony; do [ -x "$b" ] && bin=$b && break; done
[ -n "$bin" ] || { echo "no harmony binary: cargo build --release -p harmony-cli" >&2; exit 1; }
bin=$(realpath "$bin")
tmp=$(mktemp -d /tmp/harmony-st.XXXXXX)
python3 -m venv "$tmp/venv"
"$tmp/venv/bin/pip" install --quiet schemathesis
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$bin" serve --db "sqlite://$tmp/st.db" --listen "127.0.0.1:$port" --admin-token st-admin \
  --metrics-token st-metrics --log-level warn 2> "$tmp/serve.log" &
pid=$!
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -rf "$tmp"' EXIT
for _ in $(seq 1 200); do curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.05; done
# From the temporary directory: schemathesis keeps its state in ./.schemathesis.
(cd "$tmp" && "$tmp/venv/bin/schemathesis" run "http://127.0.0.1:$port/openapi.json" \
  -H "Authorization: Bearer st-admin" \
  --checks not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance \
  --max-examples "$max" --workers 2 --seed 1) | tee "$tmp/out.txt"
kill -0 $pid || { echo "the server died" >&2; exit 1; }
grep -E "generated, .* passed|Test cases" -A1 "$tmp/out.txt" | tail -2
