#!/usr/bin/env bash
# Three `harmony serve` replicas on one PostgreSQL database, under `harmony load` spread over
# them: a replica SIGKILLed mid-load, then PostgreSQL restarted mid-load. After each, every
# acknowledged report is stored once (the database's count) and every replica that answers
# gives the same estimates for every window (the live one, one per day of the series).
#
#   bash scripts/replicas.sh [path/to/harmony]
#
# Starts its own PostgreSQL 15 cluster (as user postgres when run as root) on port 54359 in a
# temporary directory and removes it at the end; the replicas listen on 127.0.0.1:18471-18473.
set -euo pipefail
BIN=$(realpath "${1:-target/debug/harmony}")
PGBIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
PORT=54359
WORK=$(mktemp -d /tmp/harmony-replicas.XXXXXX)
chmod 755 "$WORK"
TOKEN=replicas-admin-token-0123456789
DB="postgres://postgres@127.0.0.1:$PORT/harmony_replicas"
REPORTS=${REPLICAS_REPORTS:-400000}
URLS="http://127.0.0.1:18471,http://127.0.0.1:18472,http://127.0.0.1:18473"
export NO_PROXY=127.0.0.1 no_proxy=127.0.0.1
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY

as_pg() { if [ "$(id -u)" = 0 ]; then su postgres -c "$*"; else bash -c "$*"; fi; }
pg_ctl() { as_pg "$PGBIN/pg_ctl -D $WORK/pg/data $*"; }
declare -A PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  pg_ctl "-m immediate stop" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

mkdir -p "$WORK/pg"
[ "$(id -u)" = 0 ] && chown postgres "$WORK/pg"
as_pg "$PGBIN/initdb -D $WORK/pg/data -A trust -U postgres >/dev/null"
pg_ctl "-o '-p $PORT -k $WORK/pg -c listen_addresses=127.0.0.1' -l $WORK/pg/log -w start >/dev/null"
"$PGBIN/psql" -h 127.0.0.1 -p $PORT -U postgres -qc "CREATE DATABASE harmony_replicas"
psql() { "$PGBIN/psql" -h 127.0.0.1 -p $PORT -U postgres -d harmony_replicas -qtA "$@"; }

start() { # replica number 1-3
  "$BIN" serve --db "$DB" --listen "127.0.0.1:1847$1" --admin-token "$TOKEN" --log-level warn \
    >>"$WORK/replica$1.log" 2>&1 &
  PIDS[$1]=$!
}
ready() { # replica number: waits up to 20 s for /readyz
  for _ in $(seq 200); do
    curl -sf "http://127.0.0.1:1847$1/readyz" >/dev/null && return 0
    sleep 0.1
  done
  echo "replica $1 not ready after 20 s:"; tail -5 "$WORK/replica$1.log"; return 1
}
# Started together on a fresh database: each creates the tables or finds them.
for r in 1 2 3; do start $r; done
for r in 1 2 3; do ready $r; done

get() { curl -sf -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:1847$1$2"; }
# Every replica that answers gives byte-identical documents for the live estimates and the daily
# series (waits up to the staleness bound and a margin, 5 s, for the last commits to reach all).
same_everywhere() { # collection id, replicas to ask
  local id=$1; shift
  local path ok first
  for path in "/v1/collections/$id/estimates" "/v1/collections/$id/series?period=day"; do
    for _ in $(seq 50); do
      ok=1; first=$(get "$1" "$path")
      for r in "$@"; do [ "$(get "$r" "$path")" = "$first" ] || ok=0; done
      [ $ok = 1 ] && break
      sleep 0.1
    done
    [ $ok = 1 ] || { echo "replicas $* disagree on $path"; return 1; }
  done
}
stored() { psql -c "SELECT count(*) FROM harmony_reports r JOIN harmony_collections c ON c.key = r.collection WHERE c.id = '$1'"; }

# `harmony load` over the three replicas; `disrupt` runs once the first reports are stored.
run_load() { # name, disrupt command
  local name=$1 disrupt=$2 before id
  before=$(psql -c "SELECT count(*) FROM harmony_collections")
  "$BIN" load --server "$URLS" --token "$TOKEN" --reports "$REPORTS" --batch 2000 --concurrency 6 \
    --estimate-queries 3 --json >"$WORK/$name.json" 2>"$WORK/$name.err" &
  local load=$!
  for _ in $(seq 600); do
    [ "$(psql -c "SELECT count(*) FROM harmony_reports")" -gt "$(cat "$WORK/stored-before")" ] && break
    kill -0 $load 2>/dev/null || break
    sleep 0.05
  done
  eval "$disrupt"
  wait $load || { echo "$name: harmony load failed:"; cat "$WORK/$name.err"; return 1; }
  id=$(psql -c "SELECT id FROM harmony_collections ORDER BY key DESC LIMIT 1")
  [ "$(psql -c "SELECT count(*) FROM harmony_collections")" = $((before + 1)) ]
  echo "$name: $(cat "$WORK/$name.json")"
  local n; n=$(stored "$id")
  [ "$n" = "$REPORTS" ] || { echo "$name: $n reports stored, $REPORTS sent"; return 1; }
  echo "$name: $n reports stored once each"
  echo "$id" >"$WORK/$name.id"
}
psql -c "SELECT 0" >"$WORK/stored-before"

# 1. SIGKILL of replica 2 mid-load: its clients go on through the others.
run_load kill "kill -9 \${PIDS[2]}; echo 'replica 2 killed'"
grep -q '"servers_agreeing":2' "$WORK/kill.json"
same_everywhere "$(cat "$WORK/kill.id")" 1 3
start 2; ready 2
same_everywhere "$(cat "$WORK/kill.id")" 1 2 3
echo "kill: replicas 1, 2 (restarted) and 3 answer identical estimates and series"

# 2. PostgreSQL restarted mid-load: the replicas answer 503 while it is down and go on after.
psql -c "SELECT count(*) FROM harmony_reports" >"$WORK/stored-before"
run_load pg-restart "pg_ctl '-m fast -w restart -o \"-p $PORT -k $WORK/pg -c listen_addresses=127.0.0.1\"' >/dev/null; echo 'PostgreSQL restarted'"
grep -q '"servers_agreeing":3' "$WORK/pg-restart.json"
same_everywhere "$(cat "$WORK/pg-restart.id")" 1 2 3
same_everywhere "$(cat "$WORK/kill.id")" 1 2 3
for r in 1 2 3; do curl -sf "http://127.0.0.1:1847$r/readyz"; echo; done
echo "replicas: ok"
