#!/usr/bin/env bash
# Ingest throughput of two `harmony` binaries, alternating A B, B A, … in one run
# (docs/RESEARCH-ingest.md): `harmony load --reports N` into SQLite (the embedded server) or into
# PostgreSQL (`harmony serve --db postgres://…`, a fresh database per run, dropped after it).
# Prints one line per run: store, binary, reports/s, batch p50 and p99.
#   bench/server/ingest_ab.sh A_BIN B_BIN [ROUNDS] [sqlite|postgres|both]
# PostgreSQL: PGURL names a server whose user may create databases
# (default postgres://postgres@127.0.0.1:5432); N reports per run (default 1,000,000).
set -euo pipefail
A=$1; B=$2; ROUNDS=${3:-3}; STORES=${4:-both}
N=${N:-1000000}
PGURL=${PGURL:-postgres://postgres@127.0.0.1:5432}
PORT=${PORT:-18431}
export NO_PROXY="127.0.0.1,localhost" no_proxy="127.0.0.1,localhost"
unset http_proxy HTTP_PROXY https_proxy HTTPS_PROXY all_proxy ALL_PROXY
TOKEN=ingest-ab-token-0123456789abcdef

line() { # store, label: the JSON of `harmony load` on stdin
  python3 -c "
import json,sys; d=json.load(sys.stdin)
print('%-8s %-4s %9s reports/s  p50 %6.1f ms  p99 %6.1f ms' % ('$1', '$2', format(int(d['reports_per_second']),','), d['batch_p50_ms'], d['batch_p99_ms']))"
}

sqlite() { # bin, label
  "$1" load --reports "$N" --estimate-queries 1 --json 2>/dev/null | line sqlite "$2"
}

postgres() { # bin, label
  local db="harmony_ingest_ab_$$_$RANDOM" pid
  psql "$PGURL/postgres" -qc "CREATE DATABASE $db"
  "$1" serve --db "$PGURL/$db" --listen "127.0.0.1:$PORT" --admin-token "$TOKEN" --log-level warn 2>/dev/null &
  pid=$!
  for _ in $(seq 100); do curl -s --noproxy '*' -o /dev/null "http://127.0.0.1:$PORT/readyz" && break; sleep 0.1; done
  "$1" load --server "http://127.0.0.1:$PORT" --token "$TOKEN" --reports "$N" --estimate-queries 1 --json 2>/dev/null |
    line postgres "$2"
  kill "$pid"; wait "$pid" || true
  psql "$PGURL/postgres" -qc "DROP DATABASE $db"
}

# A B in odd rounds, B A in even ones: the first run of a pair tends to be the faster one on
# this machine, and the swap puts that on both binaries alike.
for round in $(seq "$ROUNDS"); do
  for store in sqlite postgres; do
    [ "$STORES" = both ] || [ "$STORES" = "$store" ] || continue
    if [ $((round % 2)) = 1 ]; then
      "$store" "$A" A
      "$store" "$B" B
    else
      "$store" "$B" B
      "$store" "$A" A
    fi
  done
done
